// kscope/report/trace.hpp — Chrome trace / Perfetto JSON: host scopes, kernels, copies, and arrows.
//
// Pure C++ (no CUDA): the session hands over the host scope intervals it recorded and the
// GPU events the CUPTI collector kept (gpu_activity_event, attribution.hpp); both are on
// kscope's one clock (steady_clock ns), so requests and kernels line up without fitting.
// Open the file in https://ui.perfetto.dev or chrome://tracing. Format: see
// docs/trace_format.md.
//
//   std::string json = kscope::chrome_trace_json(host_intervals, snapshot.activity.recent);
//   kscope::write_chrome_trace("run.trace.json", host_intervals, snapshot.activity.recent);
//
// Layout:
//   - every process id (pid) is unique per writing process: its rank (rank.hpp) or, without
//     one, its OS process id picks a block of trace_pid_block pids (trace_pid_slot); the
//     host threads are the block's first pid, GPU d the pid after it plus d
//     (trace_host_pid, trace_device_pid), so the traces of several ranks never overlay each
//     other when they are merged (kscope merge, trace_merge.hpp);
//   - host scopes: complete ("X") events, pid = the host pid, tid = kscope thread index;
//   - kernels, copies, memsets: "X" events, pid = the device's pid, tid = stream;
//   - metadata names every process after its rank, host and OS pid, and "otherData" holds
//     who wrote the trace and its clock base (trace_process);
//   - a flow arrow ("s" on the launching scope -> "f" with "bp":"e" on the GPU event) from
//     the scope that launched each GPU event (same node, same thread, the latest instance
//     that started before the GPU event) to the event;
//   - no two "X" events on one track overlap: host scopes may nest (they do, by
//     construction) but must not partially overlap, and GPU events on one stream must not
//     overlap at all. A GPU event that overlaps its predecessor on the same stream by at
//     most trace_options::overlap_tolerance_ns (clock interpolation jitter) has its start
//     clamped to the predecessor's end; a larger overlap (e.g. concurrent branches of a
//     CUDA graph reported on one stream) moves it to an overflow track named
//     "stream S (overlap k)", tid = S + k * stride (trace_overflow_tid_stride, or a larger power of
//     ten when a stream number reaches it). Host intervals that
//     partially overlap go to overflow tracks the same way. Both are counted (trace_stats).
#pragma once

#include "../evidence/activity_results.hpp"
#include "../scope/host_interval.hpp"
#include "../cupti/detail/demangle.hpp"
#include "../core/config.hpp"
#include "../core/detail/atomic_file.hpp"
#include "../core/detail/json_writer.hpp"  // every string of the trace: escaped, invalid UTF-8 repaired
#include "../scope/detail/thread_state.hpp"
#include "../core/detail/clock.hpp"
#include "rank.hpp"

#if defined(__unix__) || defined(__APPLE__)
#  include <unistd.h>
#endif

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kscope {

// Who wrote a trace: which rank and process, on which host, with which GPUs. The trace's
// pids and metadata carry it, so that the traces of several ranks merged into one (kscope
// merge, trace_merge.hpp) stay apart and their clocks can be aligned. Left out of
// trace_options, it is this_trace_process().
//
//   kscope::trace_process me = kscope::this_trace_process();  // rank, pid, host, clock offset
//   me.device_names = {"NVIDIA H100 80GB HBM3"};
struct trace_process {
  int rank = -1;                          // -1: not known (set_rank, RANK, ...: rank.hpp)
  long long process_id = 0;               // the OS process id; 0: not known
  std::string host_name;                  // "": not known
  std::vector<std::string> device_names;  // by CUDA device number; "" or absent: not known
  // system_clock minus steady_clock in ns, taken when the trace is written: the wall-clock
  // time of kscope's clock, so that traces of different hosts (each steady clock counts
  // from its own boot) can be lined up as well as the hosts' clocks agree (NTP). Empty:
  // not known.
  std::optional<std::int64_t> wall_clock_offset_ns;
};

// This process: current_rank(), the OS process id, the host name, the clock offset now.
// Device names are left empty (this module is CUDA-free; the session fills them).
[[nodiscard]] KSCOPE_DECL trace_process this_trace_process();

// pids come in blocks of this many: the host threads first, then one per GPU.
inline constexpr std::int64_t trace_pid_block = 1000;
// The largest block whose pids stay below 2^31 (some viewers read a pid as a signed
// 32-bit number).
inline constexpr std::int64_t trace_max_pid_slot = (std::int64_t{2147483647} - (trace_pid_block - 1)) / trace_pid_block;

// The block of a process's pids: rank + 1 when the rank is known (rank 0 -> 1, so pid 0,
// which viewers treat as the kernel's, is never used), else the OS process id (1 when that
// is not known either); a slot beyond trace_max_pid_slot wraps around (a merge remaps any
// pid that then collides).
//   kscope::trace_pid_slot({3});  // 4
[[nodiscard]] KSCOPE_DECL std::int64_t trace_pid_slot(const trace_process& process) noexcept;
// pid of the process's host threads: slot * trace_pid_block (rank 3: 4000).
[[nodiscard]] KSCOPE_DECL std::int64_t trace_host_pid(const trace_process& process) noexcept;
// pid of a GPU: the host pid + 1 + device (rank 3, GPU 1: 4002); a device number beyond
// the block wraps around.
[[nodiscard]] KSCOPE_DECL std::int64_t trace_device_pid(const trace_process& process, std::uint32_t device) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL trace_process this_trace_process() {
  trace_process p;
  if (const std::optional<int> rank = current_rank()) p.rank = *rank;
#if defined(__unix__) || defined(__APPLE__)
  p.process_id = static_cast<long long>(::getpid());
  char host[256] = {0};
  if (::gethostname(host, sizeof host - 1) == 0) p.host_name = host;
#endif
  const std::int64_t wall_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count();
  p.wall_clock_offset_ns = wall_ns - detail::now_ns();
  return p;
}

KSCOPE_DECL std::int64_t trace_pid_slot(const trace_process& process) noexcept {
  std::int64_t slot = process.rank >= 0 ? std::int64_t{process.rank} + 1
                      : process.process_id > 0 ? static_cast<std::int64_t>(process.process_id)
                                               : 1;
  if (slot > trace_max_pid_slot) slot = 1 + (slot - 1) % trace_max_pid_slot;
  return slot;
}

KSCOPE_DECL std::int64_t trace_host_pid(const trace_process& process) noexcept {
  return trace_pid_slot(process) * trace_pid_block;
}

KSCOPE_DECL std::int64_t trace_device_pid(const trace_process& process, std::uint32_t device) noexcept {
  return trace_host_pid(process) + 1 + static_cast<std::int64_t>(device % static_cast<std::uint32_t>(trace_pid_block - 1));
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// otherData.schema of a trace kscope wrote: what a merger recognizes (trace_merge.hpp).
inline constexpr const char* trace_schema = "kscope.trace/1";
// Overflow tracks: tid = base tid + lane * stride, the stride 100000, or the first power of ten
// above every base tid of the trace (stream and thread numbers are not bounded), so that an
// overflow track never takes the tid of another stream or thread.
inline constexpr std::int64_t trace_overflow_tid_stride = 100000;

namespace detail {
[[nodiscard]] constexpr std::int64_t overflow_tid_stride(std::int64_t largest_base_tid) noexcept {
  std::int64_t stride = trace_overflow_tid_stride;
  while (stride <= largest_base_tid && stride <= std::numeric_limits<std::int64_t>::max() / 10) stride *= 10;
  return stride;
}
}  // namespace detail

//   kscope::trace_options o;
//   o.flows = false;                 // smaller files for long runs
// One counter track beside the GPU tracks (Perfetto and chrome://tracing draw it as a
// graph): a value from each instant on, kscope's clock. The session adds one per sampled
// metric (PM sampling) on the sampled device's process.
struct trace_counter_track {
  std::string name;        // "DRAM %"
  std::int64_t device = 0; // the GPU process it is drawn in
  std::vector<std::pair<std::int64_t, double>> points;  // (ns, value), any order
};

struct trace_options {
  std::int64_t origin_ns = std::numeric_limits<std::int64_t>::min();  // default: earliest event
  std::string process_name = "kscope";
  bool flows = true;                       // launch arrows from scopes to GPU events
  bool demangle = true;                    // kernel names as C++ signatures
  std::int64_t overlap_tolerance_ns = 1000;  // on one stream: clamp up to this, else overflow
  std::vector<trace_counter_track> counter_tracks;  // sampled GPU metrics (may be empty)
  std::optional<trace_process> process;    // who wrote it; empty: this_trace_process()
};

// What the export did, for tests and for a line in the report.
struct trace_stats {
  std::size_t host_events = 0;
  std::size_t gpu_events = 0;
  std::size_t flows = 0;
  std::size_t flows_without_scope = 0;  // GPU events whose launching scope was not found
  std::size_t clamped = 0;              // GPU starts moved to the predecessor's end
  std::size_t overflow_events = 0;      // events placed on an overflow track
  std::size_t counter_points = 0;       // counter-track points written
  std::size_t skipped = 0;              // intervals with end < start
};

namespace detail {

// Microseconds with nanosecond resolution, exact (integer arithmetic, no float rounding).
KSCOPE_DECL std::string trace_us(std::int64_t ns);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string trace_us(std::int64_t ns) {
  char buf[40];
  const bool negative = ns < 0;
  const std::uint64_t magnitude = negative ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  std::snprintf(buf, sizeof buf, "%s%" PRIu64 ".%03" PRIu64, negative ? "-" : "", magnitude / 1000,
                magnitude % 1000);
  return buf;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Greedy track assignment. Host: nesting allowed (a stack per lane). GPU: strictly
// sequential per lane, with jitter clamping on lane 0.
struct lane_state {
  std::vector<std::int64_t> open_ends;  // host: stack of enclosing ends; GPU: [last end]
};

}  // namespace detail

// The whole trace as one JSON document ({"traceEvents": [...], "displayTimeUnit": "ns"}).
[[nodiscard]] KSCOPE_DECL std::string chrome_trace_json(const std::vector<host_interval>& host,
                                                   const std::vector<gpu_activity_event>& gpu,
                                                   const trace_options& options = {},
                                                   trace_stats* stats_out = nullptr);

// Writes chrome_trace_json() to `path`, all or nothing (core/detail/atomic_file.hpp: a
// temporary file renamed over `path` once complete, so a failed write leaves the previous
// trace intact). Returns false, with *error = "cannot write PATH: <system's reason>", on
// I/O failure; never throws for I/O.
//
//   std::string why;
//   if (!kscope::write_chrome_trace("run.trace.json", host, gpu, {}, &why)) warn(why);
KSCOPE_DECL bool write_chrome_trace(const std::string& path, const std::vector<host_interval>& host,
                               const std::vector<gpu_activity_event>& gpu, const trace_options& options = {},
                               std::string* error = nullptr);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string chrome_trace_json(const std::vector<host_interval>& host,
                                                   const std::vector<gpu_activity_event>& gpu,
                                                   const trace_options& options,
                                                   trace_stats* stats_out) {
  trace_stats stats;
  std::int64_t origin = options.origin_ns;
  if (origin == std::numeric_limits<std::int64_t>::min()) {
    origin = std::numeric_limits<std::int64_t>::max();
    for (const auto& h : host) origin = std::min(origin, h.start_ns);
    for (const auto& g : gpu) origin = std::min(origin, g.start_ns);
    // Sampled metrics often begin before the first kept scope or kernel: no point before 0.
    for (const trace_counter_track& track : options.counter_tracks)
      for (const auto& point : track.points)
        if (std::isfinite(point.second)) origin = std::min(origin, point.first);
    if (origin == std::numeric_limits<std::int64_t>::max()) origin = 0;
  }

  const trace_process process = options.process ? *options.process : this_trace_process();
  const std::int64_t host_pid = trace_host_pid(process);

  // ---- host tracks: per thread, parents before children, partial overlaps to overflow.
  struct placed_host {
    const host_interval* interval;
    std::int64_t tid;
  };
  std::vector<const host_interval*> host_order;
  host_order.reserve(host.size());
  for (const auto& h : host) {
    if (h.end_ns < h.start_ns) {
      ++stats.skipped;
      continue;
    }
    host_order.push_back(&h);
  }
  std::stable_sort(host_order.begin(), host_order.end(), [](const host_interval* a, const host_interval* b) {
    if (a->thread_index != b->thread_index) return a->thread_index < b->thread_index;
    if (a->start_ns != b->start_ns) return a->start_ns < b->start_ns;
    return a->end_ns > b->end_ns;  // the enclosing interval first
  });
  std::vector<placed_host> host_placed;
  host_placed.reserve(host_order.size());
  std::map<std::int64_t, std::string> host_track_names;
  std::int64_t largest_thread = 0;
  for (const host_interval* h : host_order) largest_thread = std::max<std::int64_t>(largest_thread, h->thread_index);
  const std::int64_t host_stride = detail::overflow_tid_stride(largest_thread);
  {
    std::uint32_t current_thread = std::numeric_limits<std::uint32_t>::max();
    std::vector<detail::lane_state> lanes;
    for (const host_interval* h : host_order) {
      if (h->thread_index != current_thread) {
        current_thread = h->thread_index;
        lanes.clear();
      }
      std::size_t lane = 0;
      for (;; ++lane) {
        if (lane == lanes.size()) lanes.emplace_back();
        auto& ends = lanes[lane].open_ends;
        while (!ends.empty() && ends.back() <= h->start_ns) ends.pop_back();
        if (ends.empty() || ends.back() >= h->end_ns) {
          ends.push_back(h->end_ns);
          break;
        }
      }
      const std::int64_t tid = static_cast<std::int64_t>(h->thread_index) +
                               static_cast<std::int64_t>(lane) * host_stride;
      if (lane > 0) ++stats.overflow_events;
      if (host_track_names.find(tid) == host_track_names.end()) {
        std::string name = "thread " + std::to_string(h->thread_index);
        if (lane > 0) name += " (overlap " + std::to_string(lane) + ")";
        host_track_names.emplace(tid, std::move(name));
      }
      host_placed.push_back({h, tid});
    }
  }

  // ---- GPU tracks: per (device, stream), sequential; jitter clamped, overlaps to overflow.
  struct placed_gpu {
    const gpu_activity_event* event;
    std::int64_t start_ns;  // after clamping
    std::int64_t tid;
  };
  std::vector<const gpu_activity_event*> gpu_order;
  gpu_order.reserve(gpu.size());
  for (const auto& g : gpu) {
    if (g.end_ns < g.start_ns) {
      ++stats.skipped;
      continue;
    }
    gpu_order.push_back(&g);
  }
  std::stable_sort(gpu_order.begin(), gpu_order.end(), [](const gpu_activity_event* a, const gpu_activity_event* b) {
    if (a->device != b->device) return a->device < b->device;
    if (a->stream != b->stream) return a->stream < b->stream;
    if (a->start_ns != b->start_ns) return a->start_ns < b->start_ns;
    return a->end_ns < b->end_ns;
  });
  std::vector<placed_gpu> gpu_placed;
  gpu_placed.reserve(gpu_order.size());
  std::map<std::pair<std::uint32_t, std::int64_t>, std::string> gpu_track_names;
  std::int64_t largest_stream = 0;
  for (const auto& g : gpu) largest_stream = std::max<std::int64_t>(largest_stream, g.stream);
  const std::int64_t gpu_stride = detail::overflow_tid_stride(largest_stream);
  {
    std::pair<std::uint32_t, std::uint32_t> current{std::numeric_limits<std::uint32_t>::max(), 0};
    std::vector<std::int64_t> lane_end;
    for (const gpu_activity_event* g : gpu_order) {
      if (g->device != current.first || g->stream != current.second) {
        current = {g->device, g->stream};
        lane_end.clear();
      }
      std::int64_t start = g->start_ns;
      std::size_t lane = 0;
      bool placed = false;
      for (; lane < lane_end.size(); ++lane) {
        if (start >= lane_end[lane]) {
          placed = true;
          break;
        }
        const std::int64_t overlap = lane_end[lane] - start;
        if (lane == 0 && overlap <= options.overlap_tolerance_ns && g->end_ns > lane_end[lane]) {
          start = lane_end[lane];
          ++stats.clamped;
          placed = true;
          break;
        }
      }
      if (!placed) lane_end.push_back(0);
      lane_end[lane] = g->end_ns;
      const std::int64_t tid = static_cast<std::int64_t>(g->stream) +
                               static_cast<std::int64_t>(lane) * gpu_stride;
      if (lane > 0) ++stats.overflow_events;
      auto key = std::make_pair(g->device, tid);
      if (gpu_track_names.find(key) == gpu_track_names.end()) {
        std::string name = "stream " + std::to_string(g->stream);
        if (lane > 0) name += " (overlap " + std::to_string(lane) + ")";
        gpu_track_names.emplace(key, std::move(name));
      }
      gpu_placed.push_back({g, start, tid});
    }
  }

  // ---- launch arrows: the latest instance of the launching node on the launching thread
  // that started no later than the GPU event.
  struct instance_ref {
    std::int64_t start_ns;
    std::size_t placed_index;
  };
  std::map<std::pair<std::uint32_t, node_id>, std::vector<instance_ref>> instances;
  std::unordered_map<node_id, std::string_view> node_names;
  for (std::size_t i = 0; i < host_placed.size(); ++i) {
    const host_interval* h = host_placed[i].interval;
    instances[{h->thread_index, h->node}].push_back({h->start_ns, i});
    node_names.emplace(h->node, h->name);
  }
  // host_placed is sorted by (thread, start): each instance list is already in order.

  std::string out;
  out.reserve(256 + 220 * (host_placed.size() + gpu_placed.size()) + (options.flows ? 200 * gpu_placed.size() : 0));
  detail::json_writer w(out);
  w.begin_object();
  w.key("traceEvents").begin_array();

  auto metadata = [&w](const char* what, std::int64_t pid, std::int64_t tid, const std::string& name) {
    w.begin_object();
    w.member("name", what).member("ph", "M").member("pid", static_cast<long long>(pid));
    if (tid >= 0) w.member("tid", static_cast<long long>(tid));
    w.key("args").begin_object().member("name", name).end_object();
    w.end_object();
  };
  auto sort_index = [&w](std::int64_t pid, long long index) {
    w.begin_object();
    w.member("name", "process_sort_index").member("ph", "M").member("pid", static_cast<long long>(pid));
    w.key("args").begin_object().member("sort_index", index).end_object();
    w.end_object();
  };
  auto labels = [&w](std::int64_t pid, const std::string& text) {
    if (text.empty()) return;
    w.begin_object();
    w.member("name", "process_labels").member("ph", "M").member("pid", static_cast<long long>(pid));
    w.key("args").begin_object().member("labels", text).end_object();
    w.end_object();
  };
  // Every process is named after its rank, host and OS pid ("rank 3: GPU 0 NVIDIA H100
  // (pid 4242 on node1)"): in a merged trace the processes of one rank read, and sort (the
  // sort index is the pid: a rank's block, host first), together.
  const std::string rank_prefix = process.rank >= 0 ? "rank " + std::to_string(process.rank) + ": " : std::string();
  std::string where;
  if (process.process_id > 0) where = "pid " + std::to_string(process.process_id);
  if (!process.host_name.empty()) where += (where.empty() ? "on " : " on ") + process.host_name;
  const std::string where_suffix = where.empty() ? std::string() : " (" + where + ")";
  std::string label_text;
  if (process.rank >= 0) label_text = "rank " + std::to_string(process.rank);
  if (!process.host_name.empty()) label_text += (label_text.empty() ? "" : ",") + process.host_name;
  if (process.process_id > 0) label_text += (label_text.empty() ? "pid " : ",pid ") + std::to_string(process.process_id);
  const auto device_name = [&process](std::uint32_t device) {
    return device < process.device_names.size() ? process.device_names[device] : std::string();
  };
  std::set<std::uint32_t> devices;  // every device with a track or a name
  for (const auto& entry : gpu_track_names) devices.insert(entry.first.first);
  for (const trace_counter_track& track : options.counter_tracks) devices.insert(static_cast<std::uint32_t>(track.device));
  for (std::size_t d = 0; d < process.device_names.size(); ++d)
    if (!process.device_names[d].empty()) devices.insert(static_cast<std::uint32_t>(d));

  metadata("process_name", host_pid, -1, rank_prefix + options.process_name + " host threads" + where_suffix);
  labels(host_pid, label_text);
  sort_index(host_pid, static_cast<long long>(host_pid));
  for (const auto& [tid, name] : host_track_names) metadata("thread_name", host_pid, tid, name);
  for (const std::uint32_t device : devices) {
    const std::int64_t pid = trace_device_pid(process, device);
    const std::string name = device_name(device);
    metadata("process_name", pid, -1,
             rank_prefix + "GPU " + std::to_string(device) + (name.empty() ? "" : " " + name) + where_suffix);
    labels(pid, label_text);
    sort_index(pid, static_cast<long long>(pid));
    for (auto it = gpu_track_names.lower_bound({device, std::numeric_limits<std::int64_t>::min()});
         it != gpu_track_names.end() && it->first.first == device; ++it)
      metadata("thread_name", pid, it->first.second, it->second);
  }

  for (const placed_host& p : host_placed) {
    const host_interval& h = *p.interval;
    w.begin_object();
    w.member("name", h.name).member("cat", "scope").member("ph", "X");
    w.key("ts").raw(detail::trace_us(h.start_ns - origin));
    w.key("dur").raw(detail::trace_us(h.end_ns - h.start_ns));
    w.member("pid", static_cast<long long>(host_pid)).member("tid", static_cast<long long>(p.tid));
    w.key("args").begin_object().member("node", static_cast<unsigned long long>(h.node)).end_object();
    w.end_object();
    ++stats.host_events;
  }

  std::unordered_map<std::string_view, std::string> demangled;
  std::size_t flow_id = 0;
  for (const placed_gpu& p : gpu_placed) {
    const gpu_activity_event& g = *p.event;
    std::string_view name = g.name;
    if (g.kind == activity_kind::kernel && options.demangle) {
      auto it = demangled.find(g.name);
      if (it == demangled.end()) {
        // demangle() takes a C string: a name holding a NUL byte is no mangled name, and
        // is kept whole rather than cut at the NUL.
        it = demangled.emplace(g.name, g.name.find('\0') == std::string_view::npos
                                           ? detail::demangle(std::string(g.name).c_str())
                                           : std::string(g.name)).first;
      }
      name = it->second;
    }
    const char* category = g.kind == activity_kind::kernel   ? "kernel"
                           : g.kind == activity_kind::memcpy ? "memcpy"
                                                             : "memset";
    w.begin_object();
    w.member("name", name).member("cat", category).member("ph", "X");
    w.key("ts").raw(detail::trace_us(p.start_ns - origin));
    w.key("dur").raw(detail::trace_us(g.end_ns - p.start_ns));
    w.member("pid", static_cast<long long>(trace_device_pid(process, g.device)))
        .member("tid", static_cast<long long>(p.tid));
    w.key("args").begin_object();
    w.member("node", static_cast<unsigned long long>(g.node));
    auto scope_name = node_names.find(g.node);
    w.member("scope", g.node == unscoped_node ? std::string_view(unscoped_node_name)
                      : scope_name != node_names.end() ? scope_name->second
                                                       : std::string_view());
    w.member("correlation", static_cast<unsigned long long>(g.correlation_id));
    if (g.thread_index != unknown_thread) w.member("thread", static_cast<unsigned long long>(g.thread_index));
    w.member("stream", static_cast<unsigned long long>(g.stream));
    if (g.kind == activity_kind::kernel) {
      w.key("grid").begin_array().value(g.grid[0]).value(g.grid[1]).value(g.grid[2]).end_array();
      w.key("block").begin_array().value(g.block[0]).value(g.block[1]).value(g.block[2]).end_array();
    } else {
      w.member("bytes", static_cast<unsigned long long>(g.bytes));
    }
    if (g.graph_id != 0) {
      w.member("graph_id", static_cast<unsigned long long>(g.graph_id));
      w.member("graph_node_id", static_cast<unsigned long long>(g.graph_node_id));
    }
    // Its real start, in ns on the trace's time line (ts is in us from the same origin).
    if (p.start_ns != g.start_ns) w.member("clamped_start_ns", static_cast<long long>(g.start_ns - origin));
    w.end_object();
    w.end_object();
    ++stats.gpu_events;

    if (!options.flows || g.thread_index == unknown_thread) {
      if (options.flows) ++stats.flows_without_scope;
      continue;
    }
    auto found = instances.find({g.thread_index, g.node});
    const placed_host* launcher = nullptr;
    if (found != instances.end()) {
      const auto& list = found->second;
      auto it = std::upper_bound(list.begin(), list.end(), g.start_ns,
                                 [](std::int64_t t, const instance_ref& r) { return t < r.start_ns; });
      if (it != list.begin()) launcher = &host_placed[std::prev(it)->placed_index];
    }
    if (launcher == nullptr) {
      ++stats.flows_without_scope;
      continue;
    }
    // Bind points strictly inside both slices: 1 ns after the scope starts (before any
    // child can start) and the middle of the GPU event.
    const host_interval& h = *launcher->interval;
    const std::int64_t s_ts = h.start_ns + (h.end_ns - h.start_ns >= 2 ? 1 : 0);
    const std::int64_t f_ts = p.start_ns + (g.end_ns - p.start_ns) / 2;
    ++flow_id;
    w.begin_object();
    w.member("name", "launch").member("cat", "launch").member("ph", "s");
    w.member("id", static_cast<unsigned long long>(flow_id));
    w.key("ts").raw(detail::trace_us(s_ts - origin));
    w.member("pid", static_cast<long long>(host_pid)).member("tid", static_cast<long long>(launcher->tid));
    w.end_object();
    w.begin_object();
    w.member("name", "launch").member("cat", "launch").member("ph", "f").member("bp", "e");
    w.member("id", static_cast<unsigned long long>(flow_id));
    w.key("ts").raw(detail::trace_us(f_ts - origin));
    w.member("pid", static_cast<long long>(trace_device_pid(process, g.device)))
        .member("tid", static_cast<long long>(p.tid));
    w.end_object();
    ++stats.flows;
  }
  // ---- counter tracks: one "C" event per point; a NaN point ends nothing, it is left out.
  for (const trace_counter_track& track : options.counter_tracks) {
    for (const auto& [ns, value] : track.points) {
      if (!std::isfinite(value)) continue;
      w.begin_object();
      w.member("name", track.name).member("ph", "C");
      w.key("ts").raw(detail::trace_us(ns - origin));
      w.member("pid", static_cast<long long>(trace_device_pid(process, static_cast<std::uint32_t>(track.device))));
      w.key("args").begin_object().member("value", value).end_object();
      w.end_object();
      ++stats.counter_points;
    }
  }
  w.end_array();
  w.member("displayTimeUnit", "ns");
  // Who wrote the trace and its clock base, for a merger (trace_merge.hpp): kscope's clock
  // is the host's steady clock, shared by every process of one host; wall_clock_offset_ns
  // puts it on the wall clock, for hosts that share only that.
  w.key("otherData").begin_object();
  w.member("schema", trace_schema);
  w.member("producer", "kscope " KSCOPE_VERSION_STRING);
  w.member("kscope_version", KSCOPE_VERSION_STRING);
  w.member("clock", "steady_clock");
  w.member("time_origin_ns", static_cast<long long>(origin));
  if (process.wall_clock_offset_ns)
    w.member("wall_clock_offset_ns", static_cast<long long>(*process.wall_clock_offset_ns));
  if (process.rank >= 0) w.member("rank", process.rank);
  else w.key("rank").value(nullptr);
  w.member("process_id", process.process_id);
  w.member("host_name", process.host_name);
  w.member("host_pid", static_cast<long long>(host_pid));
  w.key("devices").begin_array();
  for (const std::uint32_t device : devices) {
    w.begin_object();
    w.member("device", static_cast<unsigned long long>(device));
    w.member("name", device_name(device));
    w.member("pid", static_cast<long long>(trace_device_pid(process, device)));
    w.end_object();
  }
  w.end_array();
  w.member("clamped_gpu_events", static_cast<unsigned long long>(stats.clamped));
  w.member("overflow_track_events", static_cast<unsigned long long>(stats.overflow_events));
  w.end_object();
  w.end_object();
  if (stats_out != nullptr) *stats_out = stats;
  return out;
}

KSCOPE_DECL bool write_chrome_trace(const std::string& path, const std::vector<host_interval>& host,
                               const std::vector<gpu_activity_event>& gpu, const trace_options& options,
                               std::string* error) {
  return detail::write_file_atomically(path, chrome_trace_json(host, gpu, options), error);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
