// kscope/report/merge.hpp — read "kscope.report/2" JSON back (and "kscope.report/1", the
// schema before one verdict per scope), and merge one report per rank.
//
// With one process per GPU, each rank writes its own report (rank.hpp names the files);
// merge_reports() lines the scopes up by path and says, per scope, what every rank spent
// and which rank was slowest (the straggler: in a collective, every rank waits for it).
// Pure C++ on kscope's own JSON reader (detail/json_reader.hpp): no CUDA, no JSON library.
// Reports are read one scope at a time and every number that sizes something is range-
// checked (report_max_* below), so a hostile file costs bounded memory and time.
// The merged JSON ("kscope.merged/1") is documented in docs/multi_gpu.md.
//
//   std::vector<std::string> docs = {read("run.rank0.json"), read("run.rank1.json")};
//   kscope::merged_report m = kscope::merge_reports(docs);
//   std::fputs(m.text().c_str(), stdout);      // errors per input are listed first
//   std::string json = m.json();
#pragma once

#include "../core/config.hpp"
#include "../core/detail/json_reader.hpp"
#include "../core/detail/text_escape.hpp"
#include "../core/detail/json_writer.hpp"
#include "../core/detail/number_format.hpp"
#include "../evidence/communication.hpp"
#include "report.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace kscope {

// What parse_report keeps from one document is bounded, so that a hostile file (a CI
// artefact, a report from another machine) cannot make it allocate or loop without end:
// every count that sizes a list or a loop is checked against one of these, and every
// integer field against its range, with an error that names the field and the limit.
//
// A kscope report has at most as many scopes as the recorder has nodes (recorder::
// max_nodes, 65 536; tests/merge_test.cpp checks they agree), and no scope is deeper than
// the number of nodes above it.
// The largest document read (any report kscope writes is far smaller); the kscope tool
// refuses a larger file before reading it.
inline constexpr std::size_t report_max_input_bytes = std::size_t{256} << 20;  // 256 MiB
inline constexpr std::size_t report_max_scopes = std::size_t{1} << 16;
inline constexpr std::size_t report_max_scope_depth = std::size_t{1} << 16;
// Warnings, roof lines, top kernels: a report writes tens of them.
inline constexpr std::size_t report_max_list_entries = std::size_t{1} << 16;
// Tags over all scopes (about 100 bytes each once read).
inline constexpr std::size_t report_max_tags = std::size_t{1} << 20;
// JSON values in one scope, one top kernel or the context: a scope with 64 devices and
// its tags has a few hundred.
inline constexpr std::size_t report_max_values_per_entry = std::size_t{1} << 16;

namespace detail {

KSCOPE_DECL double nan_value() noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double nan_value() noexcept { return std::numeric_limits<double>::quiet_NaN(); }
#endif  // KSCOPE_DETAIL_DEFINITIONS



// A member that counts or measures something, as its integer type: any value of the type
// is accepted (the range check is what keeps the conversion defined), absent or null is 0.
template <class Integer>
[[nodiscard]] Integer integer_member(const json_value& v, std::string_view key) {
  return v.member_integer<Integer>(key, std::numeric_limits<Integer>::min(), std::numeric_limits<Integer>::max(), 0);
}

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL trace_window_summary trace_windows_from_json(const json_value& v) {
  trace_window_summary t;
  t.windowed = true;
  t.options.window_ms = v.member_integer<std::uint32_t>("window_ms", 0, 86400000, 0);
  t.options.period_ms = v.member_integer<std::uint32_t>("period_ms", 0, 86400000, 0);
  t.windows = integer_member<std::uint64_t>(v, "windows");
  t.traced_ns = v.member_integer<std::int64_t>("traced_ns", 0, std::numeric_limits<std::int64_t>::max(), 0);
  t.since_ns = integer_member<std::int64_t>(v, "since_ns");
  t.until_ns = integer_member<std::int64_t>(v, "until_ns");
  // A share above 100 % cannot be: more traced than elapsed, or an end before the start.
  if (t.until_ns < t.since_ns || t.traced_ns > t.until_ns - t.since_ns)
    throw json_field_error("traced_ns: " + std::to_string(t.traced_ns) + " ns traced in " +
                           (t.until_ns < t.since_ns ? std::string("an interval that ends before it starts")
                                                    : std::to_string(t.until_ns - t.since_ns) + " ns elapsed"));
  t.open = v.member_bool("open", false);
  t.failed_toggles = integer_member<std::uint64_t>(v, "failed_toggles");
  t.forgotten = integer_member<std::uint64_t>(v, "forgotten");
  if (const json_value* recent = v.find("recent"); recent != nullptr && recent->is_array()) {
    if (recent->items.size() > trace_window_log::max_kept)
      throw json_field_error("recent: " + std::to_string(recent->items.size()) + " windows, more than " +
                             std::to_string(trace_window_log::max_kept));
    for (std::size_t i = 0; i < recent->items.size(); ++i) {
      const json_value& w = recent->at(i);
      const std::string field = "recent[" + std::to_string(i) + "]";
      if (!w.is_array() || w.items.size() != 2) throw json_field_error(field + ": not a [start, end] pair");
      constexpr std::int64_t lo = std::numeric_limits<std::int64_t>::min(), hi = std::numeric_limits<std::int64_t>::max();
      const std::int64_t start = json_integer<std::int64_t>(w.at(0), field, lo, hi);
      const std::int64_t end = json_integer<std::int64_t>(w.at(1), field, lo, hi);
      if (end < start || (!t.recent.empty() && start < t.recent.back().start_ns))
        throw json_field_error(field + ": a window that ends before it starts, or out of time order");
      t.recent.push_back({start, end});
    }
  }
  return t;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

KSCOPE_DECL summary summary_from_json(const json_value& v);

// cupti.trace_windows (json.hpp) back into the summary; the recent windows past
// trace_window_log::max_kept are refused, as the writer never writes more.
KSCOPE_DECL trace_window_summary trace_windows_from_json(const json_value& v);

KSCOPE_DECL void copy_from_json(const json_value* v, copy_totals& c);
// The collector's record counts as json.hpp writes them (cupti.counters).
KSCOPE_DECL attribution_counters attribution_counters_from_json(const json_value& v);

KSCOPE_DECL node_gpu_activity gpu_activity_from_json(const json_value& v);

KSCOPE_DECL void context_from_json(const json_value& c, report_context& context);

KSCOPE_DECL kernel_summary kernel_from_json(const json_value& k);

// A scope's "roofline" object back into its placement, roof and time, so that a report read
// back prints the roofline section it was written with: an impossible placement keeps its
// cause. A kscope.report/1 placement's limiter and hint become its limiter and advice.
KSCOPE_DECL void roofline_from_json(const json_value& r, scope_report& out);

// One element of "scopes"; `tags_read` counts tags over the whole report.
KSCOPE_DECL scope_report scope_from_json(const json_value& s, std::size_t& tags_read);

// The "gpu_time" section (evidence/gpu_time.hpp) as the JSON printer writes it.
KSCOPE_DECL gpu_time_report gpu_time_from_json(const json_value& t);

// The "window" object of a window report (session::window()).
KSCOPE_DECL report_window window_from_json(const json_value& w);

// A scope's "verdict" object (null: none). Reads kscope.report/2's one verdict ("class",
// "evidence") and kscope.report/1's ("basis", "verdict", "others"), whose other conclusions
// become evidence that agrees or not.
KSCOPE_DECL std::optional<scope_verdict> verdict_from_json(const json_value& v);

// A kscope.report/1 scope written before verdicts existed: its declared-work placement's
// limiter and hint as its verdict, as that report printed them. nullopt without a limiter.
KSCOPE_DECL std::optional<scope_verdict> verdict_from_placement(const json_value& roofline, const scope_report& s);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL summary summary_from_json(const json_value& v) {
  summary s{};
  s.n = integer_member<std::size_t>(v, "n");
  s.warmup = integer_member<std::size_t>(v, "warmup");
  s.median = v.member_number("median", nan_value());
  s.mean = v.member_number("mean", nan_value());
  s.stddev = v.member_number("stddev", nan_value());
  s.min = v.member_number("min", nan_value());
  s.max = v.member_number("max", nan_value());
  s.mad = v.member_number("mad", nan_value());
  s.p90 = v.member_number("p90", nan_value());
  s.p99 = v.member_number("p99", nan_value());
  s.median_ci = interval{nan_value(), nan_value(), 0.95};
  if (const json_value* ci = v.find("median_ci")) {
    s.median_ci.lo = ci->member_number("lo", nan_value());
    s.median_ci.hi = ci->member_number("hi", nan_value());
    s.median_ci.level = ci->member_number("level", 0.95);
  }
  s.outliers = integer_member<std::size_t>(v, "outliers");
  s.steady = v.member_bool("steady", true);
  // Every summary in a report is of durations: one below zero, or an interval that ends
  // before it starts, cannot be, and would be printed as a time.
  const std::pair<const char*, double> values[] = {{"median", s.median}, {"mean", s.mean}, {"stddev", s.stddev},
                                                   {"min", s.min},       {"max", s.max},   {"mad", s.mad},
                                                   {"p90", s.p90},       {"p99", s.p99},   {"median_ci.lo", s.median_ci.lo},
                                                   {"median_ci.hi", s.median_ci.hi}};
  for (const auto& [name, value] : values)
    if (value < 0) throw json_field_error(std::string(name) + ": a duration below zero (" + format_general(value, 6) + ")");
  if (s.median_ci.lo > s.median_ci.hi)
    throw json_field_error("median_ci: an interval that ends before it starts (" + format_general(s.median_ci.lo, 6) +
                           " > " + format_general(s.median_ci.hi, 6) + ")");
  return s;
}

KSCOPE_DECL void copy_from_json(const json_value* v, copy_totals& c) {
  if (v == nullptr) return;
  c.count = integer_member<std::uint64_t>(*v, "count");
  c.bytes = integer_member<std::uint64_t>(*v, "bytes");
  c.ns = integer_member<std::int64_t>(*v, "ns");
}

KSCOPE_DECL attribution_counters attribution_counters_from_json(const json_value& v) {
  attribution_counters c;
  const auto u64 = [&](const char* key) { return integer_member<std::uint64_t>(v, key); };
  c.records_seen = u64("records_seen");
  c.kernel_records = u64("kernel_records");
  c.memcpy_records = u64("memcpy_records");
  c.memset_records = u64("memset_records");
  c.sync_records = u64("sync_records");
  c.dropped_by_cupti = u64("dropped_by_cupti");
  c.dropped_zero_start = u64("dropped_zero_start");
  c.dropped_end_before_start = u64("dropped_end_before_start");
  c.dropped_malformed = u64("dropped_malformed");
  c.unscoped = u64("unscoped");
  c.unattributed = u64("unattributed");
  c.devices_over_cap = u64("devices_over_cap");
  c.graph_records = u64("graph_records");
  c.graph_built_elsewhere = u64("graph_built_elsewhere");
  c.graph_capture_unknown = u64("graph_capture_unknown");
  return c;
}

KSCOPE_DECL node_gpu_activity gpu_activity_from_json(const json_value& v) {
  node_gpu_activity a;
  const auto i64 = [](const json_value& o, const char* key) { return integer_member<std::int64_t>(o, key); };
  const auto u64 = [](const json_value& o, const char* key) { return integer_member<std::uint64_t>(o, key); };
  a.kernel_count = u64(v, "kernel_count");
  a.kernel_ns = i64(v, "kernel_ns");
  a.busy_ns = i64(v, "busy_ns");
  a.idle_ns = i64(v, "idle_ns");
  a.first_start_ns = i64(v, "first_start_ns");
  a.last_end_ns = i64(v, "last_end_ns");
  for (copy_direction d : {copy_direction::h2d, copy_direction::d2h, copy_direction::d2d, copy_direction::other})
    copy_from_json(v.find(std::string("memcpy_") + to_string(d)), a.memcpy[static_cast<std::size_t>(d)]);
  copy_from_json(v.find("memset"), a.memset);
  // Absent in reports from before the memory kinds were read: no pageable or synchronous
  // copy is then known, and none is claimed.
  if (const json_value* p = v.find("memcpy_pageable"); p != nullptr && p->is_object())
    for (copy_direction d : {copy_direction::h2d, copy_direction::d2h, copy_direction::d2d, copy_direction::other})
      copy_from_json(p->find(to_string(d)), a.memcpy_pageable[static_cast<std::size_t>(d)]);
  copy_from_json(v.find("memcpy_sync"), a.memcpy_sync);
  copy_from_json(v.find("memset_sync"), a.memset_sync);
  if (const json_value* h = v.find("host_sync")) {  // absent in reports from before it existed
    a.host_sync.count = u64(*h, "count");
    a.host_sync.ns = i64(*h, "ns");
    a.host_sync.stream = u64(*h, "stream");
    a.host_sync.event = u64(*h, "event");
    a.host_sync.context = u64(*h, "context");
  }
  a.comm_kernel_count = u64(v, "comm_kernel_count");
  a.comm_ns = i64(v, "comm_ns");
  a.comm_busy_ns = i64(v, "comm_busy_ns");
  a.compute_busy_ns = i64(v, "compute_busy_ns");
  if (const json_value* g = v.find("graphs")) {  // absent in reports from before graph-level trace
    a.graph_replays = u64(*g, "replays");
    a.graph_replays_traced = u64(*g, "traced");
    a.graph_replays_unsampled = u64(*g, "unsampled");
    a.graph_span_ns = i64(*g, "span_ns");
    a.scaled_kernel_count = u64(*g, "scaled_kernel_count");
    a.scaled_kernel_ns = i64(*g, "scaled_kernel_ns");
    a.scaled_busy_ns = i64(*g, "scaled_busy_ns");
  }
  // Which scopes built the graph kernels this one replayed (captured_in_id: the node id in
  // this report, as write_graph_capture_json wrote it).
  if (const json_value* origins = v.find("graph_capture"); origins != nullptr && origins->is_array()) {
    for (const json_value& o : origins->items) {
      if (a.graph_capture.size() >= max_capture_origins_per_node) break;
      graph_capture_origin origin;
      origin.captured_in = integer_member<node_id>(o, "captured_in_id");
      origin.kernel_count = u64(o, "kernels");
      origin.kernel_ns = i64(o, "ns");
      origin.copy_count = u64(o, "copies");
      origin.copy_ns = i64(o, "copy_ns");
      a.graph_capture.push_back(origin);
    }
  }
  if (const json_value* devices = v.find("devices")) {
    for (const json_value& d : devices->items) {
      if (a.devices.size() >= max_devices_per_node) break;
      device_gpu_activity split;
      split.device = integer_member<std::uint32_t>(d, "device");
      split.kernel_count = u64(d, "kernel_count");
      split.kernel_ns = i64(d, "kernel_ns");
      split.busy_ns = i64(d, "busy_ns");
      split.comm_kernel_count = u64(d, "comm_kernel_count");
      split.comm_ns = i64(d, "comm_ns");
      a.devices.push_back(split);
    }
  }
  return a;
}

KSCOPE_DECL void context_from_json(const json_value& c, report_context& context) {
  context.kscope_version = c.member_string("kscope_version");
  context.host_name = c.member_string("host");
  context.timestamp_utc = c.member_string("timestamp_utc");
  context.process_id = integer_member<long long>(c, "process_id");
  context.cuda_compiled = c.member_bool("cuda_compiled", false);
  context.no_device_reason = c.member_string("no_device_reason", "no GPU in the report");
  if (const json_value* gpus = c.find("gpu"); gpus && gpus->is_array()) {
    json_writer devices(context.devices_json);
    write_json_value(devices, *gpus);
    for (const json_value& g : gpus->items) {
      std::string line = "#" + std::to_string(g.member_integer<int>("ordinal", -1, std::numeric_limits<int>::max(), 0)) +
                         " " + g.member_string("name", "?");
      const std::string cc = g.member_string("compute_capability");
      if (!cc.empty()) line += ", sm_" + cc;
      const int sms = g.member_integer<int>("sm_count", 0, std::numeric_limits<int>::max(), -1);
      if (sms >= 0) line += ", " + std::to_string(sms) + " SMs";
      context.devices.push_back(std::move(line));
    }
  }
  // The devices' peaks, kept as written (null: no device was measured).
  if (const json_value* peaks = c.find("peaks"); peaks && peaks->is_array()) {
    json_writer written(context.peaks_json);
    write_json_value(written, *peaks);
  }
  if (const json_value* roofs = c.find("roofs")) {
    if (roofs->items.size() > report_max_list_entries)
      throw json_field_error("field \"roofs\" has " + std::to_string(roofs->items.size()) +
                             " entries, more than the limit of " + std::to_string(report_max_list_entries));
    for (const json_value& line : roofs->items) context.roofs.push_back(line.string_or(""));
  }
  context.rank = c.member_integer<int>("rank", -1, std::numeric_limits<int>::max(), -1);
}

KSCOPE_DECL kernel_summary kernel_from_json(const json_value& k) {
  kernel_summary s;
  s.name = k.member_string("name");
  s.mangled_name = k.member_string("mangled_name");
  s.calls = integer_member<std::uint64_t>(k, "calls");
  s.total_ns = integer_member<std::int64_t>(k, "total_ns");
  s.median_ns = k.member_number("median_ns", 0);
  s.min_ns = integer_member<std::int64_t>(k, "min_ns");
  s.max_ns = integer_member<std::int64_t>(k, "max_ns");
  const auto dimensions = [&](const char* key, std::array<std::int32_t, 3>& out) {
    const json_value* dims = k.find(key);
    if (dims == nullptr || dims->is_null()) return;
    for (std::size_t i = 0; i < 3; ++i) {
      const json_value& d = dims->at(i);
      out[i] = d.is_null() ? 0 : json_integer<std::int32_t>(d, key, 0, std::numeric_limits<std::int32_t>::max());
    }
  };
  dimensions("grid", s.grid);
  dimensions("block", s.block);
  s.registers_per_thread = integer_member<std::uint32_t>(k, "registers_per_thread");
  // The text report prints static + dynamic shared memory as one int32 sum: each half is
  // kept below 2^30 so that the sum is defined (a GPU block has at most a few hundred KiB).
  constexpr std::int32_t max_shared_bytes = (std::int32_t{1} << 30) - 1;
  s.static_shared_bytes = k.member_integer<std::int32_t>("static_shared_bytes", 0, max_shared_bytes, 0);
  s.dynamic_shared_bytes = k.member_integer<std::int32_t>("dynamic_shared_bytes", 0, max_shared_bytes, 0);
  s.launch_config_varies = k.member_bool("launch_config_varies", false);
  s.communication = k.member_bool("communication", is_communication_kernel(s.mangled_name));
  s.scaled_calls = k.member_integer<std::uint64_t>("scaled_calls", 0, s.calls, 0);
  s.scaled_ns = k.member_integer<std::int64_t>("scaled_ns", 0, std::max<std::int64_t>(s.total_ns, 0), 0);
  s.scaled_from_replays = k.member_integer<std::uint64_t>("scaled_from_replays", 0,
                                                          std::numeric_limits<std::uint64_t>::max(), 0);
  return s;
}

KSCOPE_DECL gpu_time_report gpu_time_from_json(const json_value& t) {
  if (!t.is_object()) throw json_field_error("\"gpu_time\" is not an object");
  gpu_time_report out;
  out.window_start_ns = integer_member<std::int64_t>(t, "window_start_ns");
  out.window_end_ns = integer_member<std::int64_t>(t, "window_end_ns");
  out.wall_ns = t.member_number("wall_ns", 0);
  // null: a window the GPU ring no longer held whole (gpu_time.hpp), unknown, not 0.
  const json_value* busy = t.find("busy_ns");
  out.busy_ns = busy != nullptr && busy->is_null() ? nan_value() : t.member_number("busy_ns", 0);
  out.busy_share = t.member_number("busy_share", nan_value());
  out.unknown_reason = t.member_string("unknown_reason");
  out.host_intervals = integer_member<std::size_t>(t, "host_intervals");
  out.host_overwritten = integer_member<std::uint64_t>(t, "host_intervals_overwritten");
  out.gpu_events = integer_member<std::size_t>(t, "gpu_events");
  out.gpu_overwritten = integer_member<std::uint64_t>(t, "gpu_events_overwritten");
  out.gpu_known_from_ns = integer_member<std::int64_t>(t, "gpu_known_from_ns");
  out.gpu_events_unmatched = integer_member<std::size_t>(t, "gpu_events_unmatched");
  out.calls_before_gpu_ring = integer_member<std::uint64_t>(t, "calls_before_gpu_ring");
  // Bounded like every list the reader keeps: the printer writes at most a few per scope.
  const auto list = [&](const char* key) -> const decltype(json_value::items)* {
    const json_value* v = t.find(key);
    if (v == nullptr || !v->is_array()) return nullptr;
    if (v->items.size() > report_max_scopes)
      throw json_field_error(std::string("more than ") + std::to_string(report_max_scopes) + " entries in gpu_time." + key);
    return &v->items;
  };
  if (const auto* gaps = list("idle_gaps"))
    for (const json_value& g : *gaps)
      out.idle_gaps.push_back(gpu_idle_gap{integer_member<std::int64_t>(g, "start_ns"), integer_member<std::int64_t>(g, "ns"),
                                           integer_member<node_id>(g, "open_scope_id"), g.member_string("open_scope")});
  if (const auto* by_scope = list("idle_by_scope"))
    for (const json_value& g : *by_scope)
      out.idle_by_scope.push_back(gpu_idle_by_scope{integer_member<node_id>(g, "scope_id"), g.member_string("scope"),
                                                    g.member_number("ns", 0), integer_member<std::uint64_t>(g, "gaps")});
  if (const auto* scopes = list("scopes")) {
    for (const json_value& s : *scopes) {
      scope_gpu_time g;
      g.id = integer_member<node_id>(s, "id");
      g.path = s.member_string("path");
      // A null kernel count is how the printer says the totals are unknown (totals_known).
      const json_value* kernels = s.find("kernel_count");
      g.totals_known = kernels == nullptr || !kernels->is_null();
      g.gpu_ns = g.totals_known ? s.member_number("gpu_ns", 0) : nan_value();
      g.share_of_gpu = s.member_number("share_of_gpu", nan_value());
      g.kernel_count = integer_member<std::uint64_t>(s, "kernel_count");
      g.calls_seen = integer_member<std::uint64_t>(s, "calls_seen");
      if (const json_value* b = s.find("busy_per_call_ns"); b && b->is_object()) g.busy_per_call_ns = summary_from_json(*b);
      if (const json_value* b = s.find("gaps_per_call_ns"); b && b->is_object()) g.gaps_per_call_ns = summary_from_json(*b);
      g.kernels_per_call = s.member_number("kernels_per_call", nan_value());
      g.d2h_per_call = s.member_number("d2h_per_call", nan_value());
      g.max_gap_ns = s.member_number("max_gap_ns", nan_value());
      out.scopes.push_back(std::move(g));
    }
  }
  return out;
}

KSCOPE_DECL report_window window_from_json(const json_value& w) {
  if (!w.is_object()) throw json_field_error("\"window\" is not an object");
  report_window out;
  out.sequence = integer_member<std::uint64_t>(w, "sequence");
  // Steady-clock times are never negative; with both ends in range the length cannot overflow.
  out.since_ns = w.member_integer<std::int64_t>("since_ns", 0, std::numeric_limits<std::int64_t>::max(), 0);
  out.until_ns = w.member_integer<std::int64_t>("until_ns", out.since_ns, std::numeric_limits<std::int64_t>::max(),
                                                out.since_ns);
  // Recomputed, not trusted: a window's length is what its two ends say.
  out.duration_ns = out.until_ns - out.since_ns;
  out.gpu_busy_share = w.member_number("gpu_busy_share", nan_value());
  out.gpu_busy_ns = w.member_number("gpu_busy_ns", nan_value());
  out.gpu_busy_unavailable = w.member_string("gpu_busy_unavailable");
  return out;
}

KSCOPE_DECL std::optional<scope_verdict> verdict_from_json(const json_value& v) {
  if (!v.is_object()) return std::nullopt;  // null: the scope had no verdict
  const auto facts_of = [](const json_value* facts) {
    std::vector<evidence> out;
    if (facts != nullptr && facts->is_array())
      for (const json_value& e : facts->items)
        out.push_back(evidence{e.member_string("metric"), e.member_number("value", nan_value()), e.member_string("unit")});
    return out;
  };
  scope_verdict out;
  if (const json_value* missing = v.find("missing"); missing && missing->is_array())
    for (const json_value& m : missing->items)
      if (m.is_string()) out.missing.push_back(m.string);
  if (v.find("class") != nullptr) {  // kscope.report/2
    out.verdict.kind = bottleneck_from_string(v.member_string("class"));
    out.verdict.where = v.member_string("unit");
    out.verdict.text = v.member_string("text");
    out.basis = v.member_string("source");
    if (const json_value* list = v.find("evidence"); list && list->is_array()) {
      for (const json_value& e : list->items) {
        verdict_evidence item;
        item.source = e.member_string("source");
        item.facts = facts_of(e.find("facts"));
        item.percent_of_peak = e.member_number("percent_of_peak", nan_value());
        item.metric = e.member_string("metric");
        item.count = integer_member<std::uint64_t>(e, "count");
        item.count_of = e.member_string("count_of");
        item.agrees = e.member_bool("agrees", true);
        out.evidence.push_back(std::move(item));
      }
    }
    if (const verdict_evidence* decided = out.decided()) out.verdict.facts = decided->facts;
    return out;
  }
  // kscope.report/1: the deciding finding, and what each other source said.
  out.basis = v.member_string("basis");
  const auto source_of = [&](const std::string& basis, const json_value& f, bool agrees) {
    verdict_evidence e;
    e.source = basis;
    e.facts = facts_of(f.find("evidence"));
    e.agrees = agrees;
    return e;
  };
  if (const json_value* f = v.find("verdict"); f && f->is_object()) {
    out.verdict.kind = bottleneck_from_string(f->member_string("kind"));
    out.verdict.where = f->member_string("where");
    out.verdict.text = f->member_string("text");
    out.verdict.facts = facts_of(f->find("evidence"));
    if (out.verdict.kind != bottleneck::undetermined) out.evidence.push_back(source_of(out.basis, *f, true));
  }
  if (const json_value* others = v.find("others"); others && others->is_array())
    for (const json_value& o : others->items)
      if (const json_value* said = o.find("said"); said && said->is_object())
        out.evidence.push_back(source_of(o.member_string("basis"), *said, o.member_bool("agrees", false)));
  return out;
}

KSCOPE_DECL std::optional<scope_verdict> verdict_from_placement(const json_value& roofline, const scope_report& s) {
  if (!roofline.is_object() || !s.roofline) return std::nullopt;
  const std::string limiter = roofline.member_string("limiter");
  if (limiter != "memory" && limiter != "compute" && limiter != "latency") return std::nullopt;
  scope_verdict v;
  v.basis = "declared work";
  v.verdict.kind = limiter == "memory" ? bottleneck::memory : limiter == "compute" ? bottleneck::compute : bottleneck::latency;
  v.verdict.where = limiter == "memory" ? "DRAM" : limiter == "compute" ? s.roof : std::string();
  v.verdict.text = roofline.member_string("hint");
  const placement& p = *s.roofline;
  v.verdict.facts = {{"declared.flops_per_s", p.flops_per_s, "FLOP/s"},
                     {"declared.bytes_per_s", p.bytes_per_s, "B/s"},
                     {"roofline.fraction_of_roof", p.fraction_of_roof, "share"}};
  verdict_evidence e;
  e.source = v.basis;
  e.facts = v.verdict.facts;
  e.percent_of_peak = 100 * p.fraction_of_roof;
  e.metric = "roofline.fraction_of_roof";
  e.count = s.work_calls;
  e.count_of = "calls";
  v.evidence.push_back(std::move(e));
  v.missing.push_back("measured evidence: not in this kscope.report/1 file (written before one verdict per scope)");
  return v;
}

KSCOPE_DECL void roofline_from_json(const json_value& r, scope_report& out) {
  if (!r.is_object()) return;
  const double nan = nan_value();
  placement p{};
  p.flops_per_s = r.member_number("flops_per_s", nan);
  p.bytes_per_s = r.member_number("bytes_per_s", nan);
  p.intensity = r.member_number("intensity", nan);
  p.roof_flops_per_s = r.member_number("roof_flops_per_s", nan);
  p.fraction_of_roof = r.member_number("fraction_of_roof", nan);
  // kscope.report/1 wrote the limiter; /2 leaves it to the scope's verdict (the placement's
  // own limiter is then unknown, and nothing prints it).
  const std::string limiter = r.member_string("limiter");
  p.limiter = limiter == "compute" ? bound::compute : limiter == "memory" ? bound::memory : bound::latency;
  out.roofline = p;
  out.roof = r.member_string("roof");
  out.fraction_of_measured_roof = r.member_number("fraction_of_measured_roof", nan);
  out.roofline_time_source = r.member_string("time_source");
  out.roofline_time_ns = r.member_number("time_ns", nan);
  out.roofline_roof_unknown = r.member_string("roof_unknown");
  out.roof_basis = r.member_string("roof_basis");
  if (const json_value* ci = r.find("flops_per_s_ci"); ci && ci->is_object())
    out.flops_per_s_ci = interval{ci->member_number("lo", nan), ci->member_number("hi", nan), ci->member_number("level", nan)};
  if (r.member_bool("impossible", false)) {
    // Written as the whole line ("impossible: N% of the theoretical roof — ... can take (...);
    // CAUSE"); the printer puts the first part back from the numbers, so only the cause is kept.
    const std::string line = r.member_string("impossible_reason");
    const std::size_t after = line.find("can take");
    const std::size_t cause = line.find("; ", after == std::string::npos ? 0 : after);
    out.roofline_impossible = true;
    out.roofline_impossible_reason = cause == std::string::npos ? line : line.substr(cause + 2);
  } else if (!limiter.empty()) {
    out.advice = r.member_string("hint");
  }
}

KSCOPE_DECL scope_report scope_from_json(const json_value& s, std::size_t& tags_read) {
  if (!s.is_object()) throw json_field_error("a scope is not an object");
  const json_value* path = s.find("path");
  if (path == nullptr || !path->is_string()) throw json_field_error("a scope has no \"path\"");
  scope_report out;
  out.path = path->string;
  out.id = integer_member<node_id>(s, "id");
  out.parent = integer_member<node_id>(s, "parent");
  out.name = s.member_string("name", out.path);
  out.depth = s.member_integer<std::size_t>("depth", 0, report_max_scope_depth, 1);
  out.cross_thread = s.member_bool("cross_thread", false);
  out.calls = integer_member<std::uint64_t>(s, "calls");
  if (const json_value* h = s.find("host_ns"); h && h->is_object()) out.host_ns = summary_from_json(*h);
  else out.host_ns = summary_from_json(json_value{});
  out.host_inclusive_ns = s.member_number("host_inclusive_ns", 0);
  out.host_exclusive_ns = s.member_number("host_exclusive_ns", 0);
  out.share_of_parent = s.member_number("share_of_parent", nan_value());
  // A scope nests inside its parent on one thread's stack, so it cannot take more of the
  // parent's time than all of it; a range (cross_thread) is not nested and may.
  if (out.share_of_parent < 0 || (!out.cross_thread && out.share_of_parent > 1 + 1e-9))
    throw json_field_error("share_of_parent: " + format_general(out.share_of_parent, 6) +
                           (out.share_of_parent < 0 ? " is below zero" : " of its parent's time for a scope nested in it"));
  out.gpu_calls = integer_member<std::uint64_t>(s, "gpu_calls");
  if (const json_value* g = s.find("gpu_ns"); g && g->is_object()) out.gpu_ns = summary_from_json(*g);
  else out.gpu_calls = 0;
  out.gpu_total_ns = s.member_number("gpu_total_ns", 0);
  // Why the CUDA-event GPU time cannot be true (CUPTI saw more work): printed in its place.
  out.gpu_time_disagreement = s.member_string("gpu_time_disagreement");
  out.profiled_calls = integer_member<std::uint64_t>(s, "profiled_calls");
  if (const json_value* w = s.find("declared_work")) {
    out.declared = work{w->member_number("flops", 0), w->member_number("bytes", 0)};
    out.work_calls = integer_member<std::uint64_t>(*w, "calls");
  }
  if (const json_value* a = s.find("gpu_activity"); a && a->is_object()) out.gpu_activity = gpu_activity_from_json(*a);
  if (const json_value* r = s.find("roofline")) roofline_from_json(*r, out);
  if (const json_value* v = s.find("verdict")) out.verdict = verdict_from_json(*v);
  if (const json_value* r = s.find("roofline"); r && !out.verdict) out.verdict = verdict_from_placement(*r, out);
  out.samples_kept = integer_member<std::size_t>(s, "samples_kept");
  out.samples_capped = s.member_bool("samples_capped", false);
  if (const json_value* tags = s.find("tags")) {
    if (tags->items.size() > report_max_tags - tags_read)
      throw json_field_error("more than " + std::to_string(report_max_tags) + " tags in the report (the reader's limit)");
    tags_read += tags->items.size();
    for (const json_value& t : tags->items)
      out.tags.push_back(tag_count{t.member_string("key"), t.member_string("value"), integer_member<std::uint64_t>(t, "count")});
  }
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Reads a "kscope.report/2" (or /1) document one part at a time (json_cursor): each scope, top
// kernel and the context are read as a small tree, converted and dropped, and members it
// does not use are skipped without being built, so reading a report costs about its
// session_report, not a tree of the whole file. Throws json_syntax_error and
// json_field_error; parse_report turns them into its error messages.
class report_reader {
 public:
  explicit report_reader(std::string_view text);

  session_report read();

  // "not a kscope report: ..." / "malformed kscope report: ...": parse_report's messages.
  struct not_a_report : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  struct malformed : std::runtime_error {
    using std::runtime_error::runtime_error;
  };

 private:
  static json_limits limits();

  not_a_report wrong_schema() const;
  bool known_schema() const;

  bool first_time(const std::string& key);

  // Runs `decode`, naming `where` in its field errors.
  template <class Decode>
  void in_part(const std::string& where, Decode&& decode) {
    try {
      decode();
    } catch (const json_field_error& e) {
      throw malformed(where + ": " + e.what());
    }
  }

  // The elements of an array member, one small tree at a time, at most `max_entries`.
  // Anything but an array is ignored, as the tree reader ignored it.
  template <class Each>
  void read_list(const std::string& field, std::size_t max_entries, Each&& each) {
    if (cursor_.peek() != json_type::array) {
      cursor_.skip_value();
      return;
    }
    cursor_.begin_array();
    std::size_t count = 0;
    json_value element;
    while (cursor_.next_item()) {
      if (++count > max_entries)
        throw malformed("field \"" + field + "\" has more than " + std::to_string(max_entries) +
                        " entries (the reader's limit)");
      cursor_.read_value(element, report_max_values_per_entry);
      each(element);
    }
  }

  void read_cupti();
  // The features' sections (report/section.hpp): read_sections() takes the entries,
  // add_sections() (once the document is known to be a report) gives each to the reader
  // registered for its key, else keeps it as the JSON it was.
  void read_sections();
  void add_sections();
  struct pending_section {
    std::string key, heading;
    std::string_view data;  // in the document's text
    std::string write_error;
  };
  std::vector<pending_section> pending_sections_;

  std::string_view text_;
  json_cursor cursor_;
  session_report report_;
  std::string schema_;
  unsigned seen_ = 0;
  bool saw_scopes_ = false;
  std::size_t tags_read_ = 0;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL report_reader::report_reader(std::string_view text) : text_(text), cursor_(text, limits()) {
  // A document without "context" says nothing of its GPU or its build: the text says that
  // the report has no GPU (not the reading program's build, and never an empty reason).
  report_.context.cuda_compiled = true;
  report_.context.no_device_reason = "no GPU in the report";
}

KSCOPE_DECL session_report report_reader::read() {
  if (cursor_.peek() != json_type::object) {
    cursor_.skip_value();  // invalid JSON is reported as such before "not an object"
    cursor_.finish();
    throw not_a_report("the document is not a JSON object");
  }
  cursor_.begin_object();
  std::string key;
  while (cursor_.next_member(key)) {
    // As json_value::find, the first of duplicate members counts.
    if (!first_time(key)) {
      cursor_.skip_value();
    } else if (key == "schema") {
      json_value v;
      cursor_.read_value(v, report_max_values_per_entry);
      schema_ = v.string_or("");
      if (!known_schema()) throw wrong_schema();
    } else if (key == "context") {
      json_value v;
      cursor_.read_value(v, report_max_values_per_entry);
      in_part("context", [&] { if (v.is_object()) context_from_json(v, report_.context); });
    } else if (key == "sample_cap" || key == "gpu_timing_skipped") {
      json_value v;
      cursor_.read_value(v, report_max_values_per_entry);
      in_part(key, [&] {
        if (v.is_null()) return;
        if (key == "sample_cap") report_.sample_cap = json_integer<std::size_t>(v, key, 0, SIZE_MAX);
        else report_.gpu_timing_skipped = json_integer<std::uint64_t>(v, key, 0, UINT64_MAX);
      });
    } else if (key == "window") {
      json_value v;
      cursor_.read_value(v, report_max_values_per_entry);
      in_part("window", [&] { if (!v.is_null()) report_.window = window_from_json(v); });
    } else if (key == "warnings") {
      read_list("warnings", report_max_list_entries, [&](const json_value& line) {
        report_.warnings.push_back(line.string_or(""));
      });
    } else if (key == "cupti") {
      read_cupti();
    } else if (key == "sections") {
      read_sections();
    } else if (key == "gpu_time") {
      // One entry that grows with the scopes (about 40 values each): the scopes' own bound.
      json_value v;
      cursor_.read_value(v, report_max_values_per_entry * 64);
      in_part("gpu_time", [&] { if (!v.is_null()) report_.gpu_time = gpu_time_from_json(v); });
    } else if (key == "scopes") {
      if (cursor_.peek() != json_type::array) throw malformed("no \"scopes\" array");
      saw_scopes_ = true;
      std::size_t index = 0;
      read_list("scopes", report_max_scopes, [&](const json_value& s) {
        // Name the scope by its path when it has one: "scope 3 (\"step/allreduce\")".
        const json_value* path = s.find("path");
        std::string where = "scope " + std::to_string(index++);
        if (path && path->is_string()) where += " (\"" + path->string + "\")";
        in_part(where, [&] { report_.scopes.push_back(scope_from_json(s, tags_read_)); });
      });
    } else {
      cursor_.skip_value();
    }
  }
  cursor_.finish();
  if (!known_schema()) throw wrong_schema();
  if (!saw_scopes_) throw malformed("no \"scopes\" array");
  add_sections();
  return std::move(report_);
}

KSCOPE_DECL json_limits report_reader::limits() {
  json_limits l;
  l.max_input_bytes = report_max_input_bytes;
  l.max_values = report_max_values_per_entry;
  return l;
}

KSCOPE_DECL auto report_reader::wrong_schema() const -> not_a_report {
  return not_a_report("schema is \"" + schema_ + "\", expected \"" + report_schema + "\" or \"kscope.report/1\"");
}

KSCOPE_DECL bool report_reader::known_schema() const { return schema_ == report_schema || schema_ == "kscope.report/1"; }

KSCOPE_DECL bool report_reader::first_time(const std::string& key) {
  static constexpr const char* known[] = {"schema",   "context", "sample_cap", "gpu_timing_skipped",
                                          "warnings", "cupti",   "scopes",     "window",
                                          "sections"};
  for (std::size_t i = 0; i < sizeof known / sizeof known[0]; ++i) {
    if (key != known[i]) continue;
    const unsigned bit = 1u << i;
    const bool first = (seen_ & bit) == 0;
    seen_ |= bit;
    return first;
  }
  return true;
}

KSCOPE_DECL void report_reader::read_sections() {
  if (cursor_.peek() != json_type::array) {  // null: none (and anything else, as read_list ignores it)
    cursor_.skip_value();
    return;
  }
  cursor_.begin_array();
  std::size_t index = 0;
  while (cursor_.next_item()) {
    const std::string where = "section " + std::to_string(index++);
    if (index > report_max_list_entries)
      throw malformed("field \"sections\" has more than " + std::to_string(report_max_list_entries) +
                      " entries (the reader's limit)");
    if (cursor_.peek() != json_type::object) throw malformed(where + ": not an object");
    cursor_.begin_object();
    std::string member, key, heading, write_error;
    std::string_view data = "null";
    json_value v;
    unsigned seen = 0;  // as everywhere in a report, the first of repeated members counts
    while (cursor_.next_member(member)) {
      const unsigned bit = member == "data"      ? 1u
                           : member == "key"     ? 2u
                           : member == "heading" ? 4u
                           : member == "error"   ? 8u
                                                 : 0u;
      if (bit == 0 || (seen & bit) != 0) {
        cursor_.skip_value();
        continue;
      }
      seen |= bit;
      if (member == "data") {
        const std::size_t from = cursor_.offset();
        cursor_.skip_value();
        data = text_.substr(from, cursor_.offset() - from);
        while (!data.empty() && (data.front() == ' ' || data.front() == '\n' || data.front() == '\r' ||
                                 data.front() == '\t'))
          data.remove_prefix(1);
      } else {
        cursor_.read_value(v, 1);
        if (!v.is_string()) throw malformed(where + ": \"" + member + "\" is not a string");
        (member == "key" ? key : member == "heading" ? heading : write_error) = v.string;
      }
    }
    if (!valid_report_section_key(key))
      throw malformed(where + ": key \"" + printable_name(key) + "\" is not a valid section key");
    pending_sections_.push_back({std::move(key), std::move(heading), data, std::move(write_error)});
  }
}

KSCOPE_DECL void report_reader::add_sections() {
  for (pending_section& p : pending_sections_) {
    if (!p.write_error.empty())
      report_.warnings.push_back("section " + p.key + " was written without its data: " + p.write_error);
    std::shared_ptr<const report_section> section;
    if (const report_section_reader reader = find_report_section_reader(p.key)) {
      std::string error;
      try {
        section = reader(p.data, &error);
      } catch (const std::exception& e) {
        error = e.what();
      } catch (...) {
        error = "it threw";
      }
      if (section == nullptr)
        report_.warnings.push_back("section " + p.key + ": its reader could not read it (" +
                                   (error.empty() ? std::string("no reason given") : error) + "); kept as JSON");
    }
    if (section == nullptr)
      section = std::make_shared<kept_report_section>(std::move(p.key), std::move(p.heading), std::string(p.data));
    report_.sections.push_back(std::move(section));
  }
  pending_sections_.clear();
}

KSCOPE_DECL void report_reader::read_cupti() {
  if (cursor_.peek() != json_type::object) {
    cursor_.skip_value();
    return;
  }
  cursor_.begin_object();
  std::string key;
  bool saw_status = false, saw_kernels = false, saw_windows = false, saw_counters = false;
  while (cursor_.next_member(key)) {
    if (key == "counters" && !saw_counters) {
      saw_counters = true;
      json_value v;
      cursor_.read_value(v, report_max_values_per_entry);
      if (v.is_object()) in_part("cupti.counters", [&] { report_.cupti_counters = attribution_counters_from_json(v); });
    } else if (key == "status" && !saw_status) {
      saw_status = true;
      json_value v;
      cursor_.read_value(v, report_max_values_per_entry);
      report_.cupti_status = v.string_or("");
    } else if (key == "trace_windows" && !saw_windows) {
      saw_windows = true;
      json_value v;
      cursor_.read_value(v, report_max_values_per_entry);
      if (v.is_object()) in_part("cupti.trace_windows", [&] { report_.trace_windows = trace_windows_from_json(v); });
    } else if (key == "top_kernels" && !saw_kernels) {
      saw_kernels = true;
      std::size_t index = 0;
      read_list("top_kernels", report_max_list_entries, [&](const json_value& k) {
        in_part("top kernel " + std::to_string(index++), [&] { report_.top_kernels.push_back(kernel_from_json(k)); });
      });
    } else {
      cursor_.skip_value();
    }
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

// Rebuilds a session_report from its "kscope.report/2" JSON (the inverse of json(), up to
// what the JSON holds: the context's device lines are rebuilt from `context.gpu`, which
// is also kept as is in context.devices_json; samples are not in the JSON). Empty result,
// with `*error` set, for anything that is not such a document. The error starts with what
// kind of failure it is: "not valid JSON: offset N: ...", "not a kscope report: ...",
// "malformed kscope report: ..." (a field out of its range, a list over its limit: the
// report_max_* constants above) or "refused: offset N: ..." (over a limit of the JSON
// reader: 256 MiB, nesting 64 deep, 65 536 values in one scope). Never throws for bad
// input.
//
//   std::string error;
//   if (auto r = kscope::parse_report(text, &error)) std::fputs(r->text().c_str(), stdout);
[[nodiscard]] KSCOPE_DECL std::optional<session_report> parse_report(std::string_view json_text,
                                                                std::string* error = nullptr);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::optional<session_report> parse_report(std::string_view json_text,
                                                                std::string* error) {
  const auto fail = [&](std::string message) -> std::optional<session_report> {
    if (error) *error = std::move(message);
    return std::nullopt;
  };
  try {
    return detail::report_reader(json_text).read();
  } catch (const detail::json_limit_error& e) {
    return fail(std::string("refused: ") + e.what());
  } catch (const detail::json_syntax_error& e) {
    return fail(std::string("not valid JSON: ") + e.what());
  } catch (const detail::report_reader::not_a_report& e) {
    return fail(std::string("not a kscope report: ") + e.what());
  } catch (const detail::report_reader::malformed& e) {
    return fail(std::string("malformed kscope report: ") + e.what());
  } catch (const detail::json_field_error& e) {
    return fail(std::string("malformed kscope report: ") + e.what());
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// One rank's numbers for one scope.
struct rank_scope_values {
  int rank = 0;
  std::uint64_t calls = 0;
  double host_median_ns = std::numeric_limits<double>::quiet_NaN();
  std::uint64_t gpu_calls = 0;
  double gpu_median_ns = std::numeric_limits<double>::quiet_NaN();  // NaN: no GPU timing
  // CUPTI totals incl. comm; meaningful when has_gpu_activity. (Not std::optional: g++ 12
  // -O3 warns maybe-uninitialized when sorting vectors of optionals holding vectors.)
  bool has_gpu_activity = false;
  node_gpu_activity gpu_activity;
};

// Min, median (type 7, as every kscope median) and max of the per-rank medians, and the
// slowest rank (the straggler).
struct across_ranks {
  std::size_t ranks = 0;  // ranks with a value
  double min_ns = std::numeric_limits<double>::quiet_NaN();
  double median_ns = std::numeric_limits<double>::quiet_NaN();
  double max_ns = std::numeric_limits<double>::quiet_NaN();
  int slowest_rank = -1;
  double slowest_ratio = std::numeric_limits<double>::quiet_NaN();  // max / median
};

// One scope path over all ranks.
//
//   for (const kscope::merged_scope& s : merged.scopes)
//     if (s.time.slowest_ratio > 1.1) std::printf("%s: rank %d straggles\n", s.path.c_str(), s.time.slowest_rank);
struct merged_scope {
  std::string path;
  std::string name;
  std::size_t depth = 1;
  bool cross_thread = false;             // a range: kept apart from a scope of the same path
  std::vector<rank_scope_values> ranks;  // sorted by rank
  across_ranks host;                     // over per-rank host medians
  across_ranks gpu;                      // over per-rank GPU (event) medians
  across_ranks comm;                     // over per-rank NCCL kernel time (sum, CUPTI)
  // The straggler is judged on GPU medians when every rank has one, else on host medians.
  std::string time_metric;               // "gpu" or "host"
  across_ranks time;                     // = gpu or host, per time_metric
};

// What became of one input document.
struct merge_input {
  std::size_t index = 0;   // position in the input vector
  int rank = -1;           // from context.rank, else the index (or a number no report names: merge_reports)
  bool rank_from_report = false;
  std::string host;
  std::string error;       // empty: merged
};

struct merged_report {
  std::vector<merge_input> inputs;
  std::vector<merged_scope> scopes;  // in order of first appearance (depth-first per report)

  [[nodiscard]] std::size_t merged_count() const noexcept;
  // The scope of that path (cross_thread: the range of that path, which is kept apart).
  [[nodiscard]] const merged_scope* find(const std::string& path, bool cross_thread = false) const noexcept;
  [[nodiscard]] std::string text() const;
  [[nodiscard]] std::string json() const;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::size_t merged_report::merged_count() const noexcept {
  std::size_t n = 0;
  for (const merge_input& i : inputs) n += i.error.empty();
  return n;
}

KSCOPE_DECL const merged_scope* merged_report::find(const std::string& path, bool cross_thread) const noexcept {
  for (const merged_scope& s : scopes)
    if (s.path == path && s.cross_thread == cross_thread) return &s;
  return nullptr;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

namespace detail {

KSCOPE_DECL across_ranks summarize_ranks(const std::vector<std::pair<int, double>>& values);

KSCOPE_DECL void write_across_json(json_writer& w, const across_ranks& a);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL across_ranks summarize_ranks(const std::vector<std::pair<int, double>>& values) {
  across_ranks a;
  std::vector<double> v;
  for (const auto& [rank, x] : values) {
    if (!std::isfinite(x)) continue;
    v.push_back(x);
    if (a.slowest_rank < 0 || x > a.max_ns) {
      a.max_ns = x;
      a.slowest_rank = rank;
    }
  }
  a.ranks = v.size();
  if (v.empty()) return a;
  std::sort(v.begin(), v.end());
  a.min_ns = v.front();
  a.median_ns = quantile_sorted(v.data(), v.size(), 0.5);
  a.slowest_ratio = a.median_ns > 0 ? a.max_ns / a.median_ns : (a.max_ns == 0 ? 1.0 : nan_value());
  return a;
}

KSCOPE_DECL void write_across_json(json_writer& w, const across_ranks& a) {
  w.begin_object();
  w.member("ranks", static_cast<unsigned long long>(a.ranks));
  w.member("min_ns", a.min_ns).member("median_ns", a.median_ns).member("max_ns", a.max_ns);
  w.key("slowest_rank");
  if (a.slowest_rank < 0) w.value(nullptr); else w.value(a.slowest_rank);
  w.member("slowest_ratio", a.slowest_ratio);
  w.end_object();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

// Parses and merges per-rank report documents. A document that is not valid JSON, not
// "kscope.report/1", malformed, or claims a rank another input already has, gets an error
// in `inputs` and is left out; the others are still merged. No inputs: an empty result.
//
//   auto m = kscope::merge_reports({doc0, doc1, doc2});
//   for (const auto& in : m.inputs) if (!in.error.empty()) std::fprintf(stderr, "%s\n", in.error.c_str());
[[nodiscard]] KSCOPE_DECL merged_report merge_reports(const std::vector<std::string>& json_documents);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL merged_report merge_reports(const std::vector<std::string>& json_documents) {
  merged_report out;
  std::vector<session_report> reports;
  std::vector<int> ranks;
  std::vector<std::optional<session_report>> parsed(json_documents.size());
  std::vector<std::string> errors(json_documents.size());
  std::unordered_set<int> named;  // the ranks the reports name themselves
  for (std::size_t i = 0; i < json_documents.size(); ++i) {
    parsed[i] = parse_report(json_documents[i], &errors[i]);
    if (parsed[i] && parsed[i]->context.rank >= 0) named.insert(parsed[i]->context.rank);
  }
  // A report that names no rank takes its position among the inputs, unless another report
  // names that rank: then the first number no report names and none took before it.
  int next_unnamed = 0;
  std::unordered_set<int> given;
  for (std::size_t i = 0; i < json_documents.size(); ++i) {
    merge_input in;
    in.index = i;
    std::optional<session_report>& r = parsed[i];
    if (!r) {
      in.error = "input " + std::to_string(i) + ": " + errors[i];
      out.inputs.push_back(std::move(in));
      continue;
    }
    in.host = r->context.host_name;
    in.rank_from_report = r->context.rank >= 0;
    if (in.rank_from_report) {
      in.rank = r->context.rank;
    } else {
      in.rank = static_cast<int>(std::min<std::size_t>(i, static_cast<std::size_t>(std::numeric_limits<int>::max())));
      if (named.count(in.rank) != 0 || given.count(in.rank) != 0) {
        while (named.count(next_unnamed) != 0 || given.count(next_unnamed) != 0) ++next_unnamed;
        in.rank = next_unnamed;
      }
      given.insert(in.rank);
    }
    if (std::find(ranks.begin(), ranks.end(), in.rank) != ranks.end()) {
      in.error = "input " + std::to_string(i) + ": rank " + std::to_string(in.rank) +
                 " appears twice (each rank's report must be given once)";
      out.inputs.push_back(std::move(in));
      continue;
    }
    ranks.push_back(in.rank);
    reports.push_back(std::move(*r));
    out.inputs.push_back(std::move(in));
  }
  std::unordered_map<std::string, std::size_t> index_of;
  for (std::size_t k = 0; k < reports.size(); ++k) {
    for (const scope_report& s : reports[k].scopes) {
      // A range and a scope of one path are two nodes (the recorder keeps them apart).
      auto [it, inserted] = index_of.emplace(s.cross_thread ? s.path + '\x01' : s.path, out.scopes.size());
      if (inserted) {
        merged_scope m;
        m.path = s.path;
        m.name = s.name;
        m.depth = s.depth;
        m.cross_thread = s.cross_thread;
        out.scopes.push_back(std::move(m));
      }
      rank_scope_values v;
      v.rank = ranks[k];
      v.calls = s.calls;
      v.host_median_ns = s.calls > 0 ? s.host_ns.median : detail::nan_value();
      v.gpu_calls = s.gpu_calls;
      v.gpu_median_ns = s.gpu_calls > 0 ? s.gpu_ns.median : detail::nan_value();
      v.has_gpu_activity = s.gpu_activity.has_value();
      if (s.gpu_activity) v.gpu_activity = *s.gpu_activity;
      out.scopes[it->second].ranks.push_back(std::move(v));
    }
  }
  for (merged_scope& m : out.scopes) {
    std::sort(m.ranks.begin(), m.ranks.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
    std::vector<std::pair<int, double>> host, gpu, comm;
    bool all_gpu = !m.ranks.empty();
    for (const rank_scope_values& v : m.ranks) {
      host.emplace_back(v.rank, v.host_median_ns);
      gpu.emplace_back(v.rank, v.gpu_median_ns);
      all_gpu = all_gpu && std::isfinite(v.gpu_median_ns);
      if (v.has_gpu_activity) comm.emplace_back(v.rank, static_cast<double>(v.gpu_activity.comm_ns));
    }
    m.host = detail::summarize_ranks(host);
    m.gpu = detail::summarize_ranks(gpu);
    m.comm = detail::summarize_ranks(comm);
    m.time_metric = all_gpu ? "gpu" : "host";
    m.time = all_gpu ? m.gpu : m.host;
  }
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

namespace detail {

// The scope's name indented two columns per level under its parent, for a 30-column
// table cell. The indentation stops at the cell's width: the cell looks the same (fit()
// cuts it there) and a deep scope costs no more than a shallow one.
KSCOPE_DECL std::string indented_name(const merged_scope& s);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string indented_name(const merged_scope& s) {
  constexpr std::size_t cell = 30;
  const std::size_t levels = s.depth > 0 ? s.depth - 1 : 0;
  std::string name(std::min(2 * levels, cell), ' ');
  // A name from a file: never raw control characters. A range marked as the text report marks it.
  return name + printable_name(s.name) + (s.cross_thread ? " ~" : "");
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string merged_report::text() const {
  std::string out = "kscope merge: " + std::to_string(merged_count()) + " of " + std::to_string(inputs.size()) +
                    " rank reports merged\n";
  for (const merge_input& in : inputs)
    if (!in.error.empty()) out += detail::wrap("error: " + in.error, 98);
  if (scopes.empty()) return out + "(no scopes)\n";
  // scope 30 | ranks 6 | by 5 | min 10 | median 10 | max 10 | slowest 8 | ratio 7 | comm med 10 = 96
  out += "\n" + detail::fit("scope (median per call)", 30) + detail::fit("ranks", 6, true) + " " +
         detail::fit("by", 4) + detail::fit("min", 10, true) + detail::fit("median", 10, true) +
         detail::fit("max", 10, true) + detail::fit("slowest", 8, true) + detail::fit("ratio", 7, true) +
         detail::fit("comm med", 10, true) + "\n";
  out += std::string(96, '-') + "\n";
  const auto duration = [](double ns) { return std::isfinite(ns) ? format_duration_ns(ns) : std::string("-"); };
  for (const merged_scope& s : scopes) {
    std::string name = detail::indented_name(s);
    const std::string ratio =
        std::isfinite(s.time.slowest_ratio) ? detail::format_fixed(s.time.slowest_ratio, 2) + "x" : std::string("-");
    out += detail::fit(name, 30) + detail::fit(std::to_string(s.ranks.size()), 6, true) + " " +
           detail::fit(s.time_metric, 4) + detail::fit(duration(s.time.min_ns), 10, true) +
           detail::fit(duration(s.time.median_ns), 10, true) + detail::fit(duration(s.time.max_ns), 10, true) +
           detail::fit(s.time.slowest_rank < 0 ? "-" : "r" + std::to_string(s.time.slowest_rank), 8, true) +
           detail::fit(ratio, 7, true) +
           detail::fit(s.comm.ranks ? duration(s.comm.median_ns) : "-", 10, true) + "\n";
  }
  out += detail::wrap("by: per-rank median compared (gpu: CUDA-event time when every rank has it, else host); "
                      "min/median/max over the ranks' medians; slowest: the straggler rank; ratio: its median / "
                      "the median rank's; comm med: median over ranks of NCCL kernel time (CUPTI)", 98);
  // Per rank, per scope.
  out += "\n" + detail::fit("per rank", 30) + detail::fit("rank", 6, true) + detail::fit("calls", 8, true) +
         detail::fit("host med", 10, true) + detail::fit("gpu med", 10, true) + detail::fit("kernels", 9, true) +
         detail::fit("kern time", 10, true) + detail::fit("comm", 10, true) + "\n";
  out += std::string(93, '-') + "\n";
  for (const merged_scope& s : scopes) {
    std::string name = detail::indented_name(s);
    bool first = true;
    for (const rank_scope_values& v : s.ranks) {
      const bool straggler = s.ranks.size() > 1 && v.rank == s.time.slowest_rank;
      out += detail::fit(first ? name : std::string(), 30) +
             detail::fit((straggler ? "*" : "") + std::to_string(v.rank), 6, true) +
             detail::fit(std::to_string(v.calls), 8, true) + detail::fit(duration(v.host_median_ns), 10, true) +
             detail::fit(duration(v.gpu_median_ns), 10, true) +
             detail::fit(v.has_gpu_activity ? std::to_string(v.gpu_activity.kernel_count) : "-", 9, true) +
             detail::fit(v.has_gpu_activity ? duration(static_cast<double>(v.gpu_activity.kernel_ns)) : "-", 10, true) +
             detail::fit(v.has_gpu_activity && v.gpu_activity.comm_kernel_count
                             ? duration(static_cast<double>(v.gpu_activity.comm_ns)) : "-", 10, true) +
             "\n";
      first = false;
    }
  }
  const bool ranges = std::any_of(scopes.begin(), scopes.end(), [](const merged_scope& m) { return m.cross_thread; });
  out += std::string("*: the scope's slowest rank") + (ranges ? "; ~: cross-thread range" : "") + "\n";
  return detail::printable_text(out);  // the inputs' errors quote file contents too
}

KSCOPE_DECL std::string merged_report::json() const {
  std::string out;
  detail::json_writer w(out);
  w.begin_object();
  w.member("schema", "kscope.merged/1");
  w.member("kscope_version", KSCOPE_VERSION_STRING);
  w.member("merged", static_cast<unsigned long long>(merged_count()));
  w.key("inputs").begin_array();
  for (const merge_input& in : inputs) {
    w.begin_object();
    w.member("index", static_cast<unsigned long long>(in.index));
    w.key("rank");
    if (in.error.empty()) w.value(in.rank); else w.value(nullptr);
    w.member("rank_from_report", in.rank_from_report);
    w.member("host", in.host);
    w.key("error");
    if (in.error.empty()) w.value(nullptr); else w.value(in.error);
    w.end_object();
  }
  w.end_array();
  w.key("scopes").begin_array();
  for (const merged_scope& s : scopes) {
    w.begin_object();
    w.member("path", s.path).member("name", s.name);
    w.member("depth", static_cast<unsigned long long>(s.depth));
    w.member("cross_thread", s.cross_thread);
    w.member("time_metric", s.time_metric);
    w.key("time"); detail::write_across_json(w, s.time);
    w.key("host"); detail::write_across_json(w, s.host);
    w.key("gpu"); detail::write_across_json(w, s.gpu);
    w.key("comm"); detail::write_across_json(w, s.comm);
    w.key("ranks").begin_array();
    for (const rank_scope_values& v : s.ranks) {
      w.begin_object();
      w.member("rank", v.rank);
      w.member("calls", static_cast<unsigned long long>(v.calls));
      w.member("host_median_ns", v.host_median_ns);
      w.member("gpu_calls", static_cast<unsigned long long>(v.gpu_calls));
      w.member("gpu_median_ns", v.gpu_median_ns);
      w.key("gpu_activity");
      if (!v.has_gpu_activity) {
        w.value(nullptr);
      } else {
        const node_gpu_activity& a = v.gpu_activity;
        w.begin_object();
        w.member("kernel_count", static_cast<unsigned long long>(a.kernel_count));
        w.member("kernel_ns", static_cast<long long>(a.kernel_ns));
        w.member("busy_ns", static_cast<long long>(a.busy_ns));
        w.member("comm_kernel_count", static_cast<unsigned long long>(a.comm_kernel_count));
        w.member("comm_ns", static_cast<long long>(a.comm_ns));
        w.member("comm_busy_ns", static_cast<long long>(a.comm_busy_ns));
        w.member("compute_busy_ns", static_cast<long long>(a.compute_busy_ns));
        w.key("devices");
        detail::write_device_split_json(w, a.devices);
        w.end_object();
      }
      w.end_object();
    }
    w.end_array();
    w.end_object();
  }
  w.end_array();
  w.end_object();
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
