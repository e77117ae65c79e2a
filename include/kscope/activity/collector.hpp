// kscope/activity/collector.hpp — the live CUPTI activity collector.
//
// Collects kernel, memcpy and memset activity through CUPTI (loaded with dlopen, never
// linked) and attributes every record to the scope node that was open on the launching
// thread at launch time (attribution.hpp). The session starts it, flushes it at report
// time and reads per-node GPU aggregates, the top-kernels table, counters, warnings and
// recent records for the trace:
//
//   auto& cupti = kscope::cupti_collector::global();
//   cupti.start();                       // false + a warning when CUPTI is unusable
//   ... run scopes and kernels ...
//   cupti.flush();                       // cuptiActivityFlushAll: every buffer attributed
//   kscope::cupti_snapshot s = cupti.snapshot();
//   const kscope::node_gpu_activity* gpu = s.activity.find(node);
//
// Design (decisions and why):
// - Attribution: a launch-time callback on the runtime AND driver API launch / memcpy /
//   memset / graph-launch calls (detail/callback_ids.hpp) stores correlation id ->
//   (node open on this thread, thread index) in a lock-free table (correlation.hpp): two
//   atomic stores, no lock, no allocation, and scopes need no CUPTI call of their own.
//   Measured on the H200 it costs what raw CUPTI kernel activity costs, within noise
//   (bench/RESULTS.md, docs/decisions.md).
// - CUDA graphs: a replayed kernel goes to the scope open at cudaGraphLaunch (above). The
//   resource callbacks GRAPHNODE_CREATED (on the thread that captures or adds the node:
//   the scope open there built it) and GRAPHNODE_CLONED (cudaGraphInstantiate: the copy
//   inherits its original's scope) fill a bounded graph node -> scope table
//   (graph_nodes.hpp, detail/graph_events.hpp); the attribution then reports, per
//   launching scope, which scopes built its graph kernels. These fire when graphs are
//   built, never per launch, so the launch path is unchanged.
// - Buffers: a pool allocated and touched at start (default 8 x 8 MiB = 64 MiB cap) and
//   recycled through CUPTI's buffer-requested / buffer-completed callbacks. When every
//   buffer is out the request gets none and CUPTI drops and counts records; that count is
//   read with cuptiActivityGetNumDroppedRecords outside kscope's locks and reported.
// - One clock: cuptiActivityRegisterTimestampCallback returns detail::now_ns(), so GPU
//   timestamps are steady_clock ns like host scope times. If that is unavailable, paired
//   (cuptiGetTimestamp, now_ns) samples give an offset, refreshed at every flush; the
//   status says which (cupti_clock).
// - Other tools: cuptiSubscribe_v2 (CUPTI 13) names kscope as a subscriber and, when
//   another tool (ncu, nsys, a profiler) already owns CUPTI, reports that tool's name.
//   CUPTI 13.0 still allows a single subscriber, so kscope then degrades: no CUPTI
//   records, GPU times from CUDA events, one warning naming the error
//   (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED).
// - Exit: an atexit handler (registered after the CUDA runtime's, so it runs first)
//   force-flushes, disables the activity kinds and unsubscribes. It never calls
//   cuptiFinalize (it races with threads still in CUDA calls; only a pause with
//   cupti_options::pause_detach does, at a CUDA call's exit as CUPTI asks), and the collector
//   is never destroyed, so a late CUPTI callback finds valid memory and does nothing harmful.
// - KSCOPE_CUPTI=0 in the environment keeps CUPTI off (start() returns false).
#pragma once

#include "attribution.hpp"
#include "options.hpp"
#include "graph_sampling.hpp"
#include "../evidence/trace_windows.hpp"
#include "../scope/recorder.hpp"          // the step scope's node (cupti_options::step_scope)
#include "../scope/detail/step_hook.hpp"  // windows of steps: the outermost scope's close
#include "../scope/detail/thread_state.hpp"
#include "../core/config.hpp"
#include "../core/detail/clock.hpp"
#include "../cupti/detail/api.hpp"
#include "../cupti/detail/kernel_launch_ids.hpp"  // a profiled step's launches (counters)
#include "detail/buffer_pool.hpp"
#include "../core/detail/once.hpp"
#include "../core/detail/env_switch.hpp"
#include "../device/availability.hpp"  // probe_gpu(): no GPU, said once, in words

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#if KSCOPE_HAS_CUPTI
#  include "detail/callback_ids.hpp"
#  include "../cupti/detail/cubin_store.hpp"  // module cubins for warp-stall source lines
#  include "detail/graph_events.hpp"
#  include "detail/parse.hpp"
#  include <cuda_runtime_api.h>
#  include <pthread.h>
#  include <signal.h>
#  include <unistd.h>
#endif

namespace kscope {

// Which clock GPU timestamps are on.
enum class cupti_clock : std::uint8_t {
  none,                // not started
  timestamp_callback,  // CUPTI calls detail::now_ns(): exact, the default
  offset,              // CUPTI's clock + an offset from paired samples
  cupti_native,        // no way to convert: CUPTI's own clock (traces will not align)
};

enum class cupti_state : std::uint8_t {
  not_started,
  running,
  disabled,             // KSCOPE_CUPTI=0, or built without CUDA / CUPTI headers
  unavailable,          // no device, or libcupti not found
  owned_by_other_tool,  // CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (ncu, nsys, ...)
  failed,               // another CUPTI error
  stopped,
};

[[nodiscard]] constexpr const char* to_string(cupti_state s) noexcept {
  switch (s) {
    case cupti_state::not_started: return "not started";
    case cupti_state::running: return "running";
    case cupti_state::disabled: return "disabled";
    case cupti_state::unavailable: return "unavailable";
    case cupti_state::owned_by_other_tool: return "owned by another tool";
    case cupti_state::failed: return "failed";
    case cupti_state::stopped: return "stopped";
  }
  return "unknown";
}

[[nodiscard]] constexpr const char* to_string(cupti_clock c) noexcept {
  switch (c) {
    case cupti_clock::none: return "none";
    case cupti_clock::timestamp_callback: return "CUPTI timestamp callback (steady_clock ns)";
    case cupti_clock::offset: return "CUPTI clock + offset from paired cuptiGetTimestamp/steady_clock samples";
    case cupti_clock::cupti_native: return "CUPTI's own clock (not aligned with host times)";
  }
  return "unknown";
}

// What the collector is doing, in one line for the report header.
struct cupti_status {
  cupti_state state = cupti_state::not_started;
  cupti_clock clock = cupti_clock::none;
  std::string library;             // the libcupti loaded
  std::uint32_t cupti_version = 0; // cuptiGetVersion (130001 for CUDA 13.0)
  std::size_t pool_bytes = 0;
  std::size_t callbacks_enabled = 0;  // launch callback ids enabled
  bool graph_capture = false;         // graph-node callbacks on: capture-time scopes known
  std::string message;             // "CUPTI 130001 (...): kernel+memcpy+memset; ..."
};

// Everything the session reads at report time.
struct cupti_snapshot {
  cupti_status status;
  gpu_activity_report activity;       // per node, top kernels, counters, recent events
  std::vector<std::string> warnings;  // collector problems first, then attribution's
  std::uint64_t buffers_completed = 0;
  std::uint64_t buffers_denied = 0;   // requests refused because the pool was exhausted
  std::uint64_t callback_errors = 0;  // exceptions caught inside CUPTI callbacks
  std::uint64_t graph_node_errors = 0;  // graph-node callbacks whose node id could not be read
  // kscope's own CPU time attributing completed buffers (on CUPTI's thread, or the thread
  // that flushed), and the records it walked: what watching costs besides CUPTI itself.
  std::int64_t attribution_cpu_ns = 0;
  std::uint64_t attribution_records = 0;
};

// The process-wide collector (CUPTI's callbacks are process-wide too).
//
//   auto& c = kscope::cupti_collector::global();
//   if (!c.start()) std::fprintf(stderr, "%s\n", c.status().message.c_str());
class cupti_collector {
 public:
  // Never destroyed: CUPTI may call back during exit, after static destructors ran.
  [[nodiscard]] static cupti_collector& global();

  cupti_collector(const cupti_collector&) = delete;
  cupti_collector& operator=(const cupti_collector&) = delete;

  // Starts collection. Returns true when running; false leaves the program untouched and
  // puts one line in status().message and the snapshot's warnings. Idempotent.
  bool start(const cupti_options& options = {});

  // start() from a CUDA injection library's InitializeInjection, which the driver calls
  // inside cuInit when CUDA_INJECTION64_PATH names the library (libkscope_c.so exports one:
  // src/kscope_c.cpp): tracing from before the program's first CUDA call. Not cheaper: on a
  // torch loop kscope attached there cost an op what it costs attached later, tracing and
  // between windows (bench/RESULTS.md, session 24), though CUPTI alone attached there had
  // left nothing when switched off (sessions 22-23).
  // The same as start() but for the GPU probe, whose CUDA calls would re-enter cuInit.
  bool start_in_driver_initialization(const cupti_options& options = {});

  // Delivers every completed activity buffer now (cuptiActivityFlushAll); each record is
  // attributed as its buffer arrives. force: also deliver buffers with records still in
  // flight (those come back without timestamps and are counted as dropped) — what the
  // exit handler does. Call with no kscope lock held; never from a CUPTI callback.
  void flush(bool force = false);

  // Flushes (forced), disables the activity kinds and unsubscribes. Data stays readable.
  void stop() noexcept;

  // Tracing in windows (evidence/trace_windows.hpp): stops tracing until resume_tracing(): the
  // activity kinds are disabled, so a launch gets no record, and its callbacks are off
  // unless cupti_options::pause_callbacks says otherwise (options.hpp says why); the
  // subscription stays, and so do the resource callbacks (graph nodes built, modules loaded:
  // never per launch) and the records and aggregates so far. With cupti_options::windows set, the collector's own thread calls
  // these on the schedule; a program may call them itself (its own windows: around the
  // steps it wants traced), and each resume opens a window in the report. False when not
  // running, or when CUPTI refused (then tracing stays as it was, counted).
  bool pause_tracing();
  bool resume_tracing();
  // Running and not paused: launches are traced now.
  [[nodiscard]] bool tracing() const noexcept;
  // The windows traced so far (windowed false: every launch since start). Cheap: no flush,
  // no attribution lock (the PM-sample attribution reads it at every fold).
  [[nodiscard]] trace_window_summary trace_windows() const;

  [[nodiscard]] cupti_status status() const;

  [[nodiscard]] bool running() const noexcept;

  // Every kernel, copy and memset the attribution applies from now on also goes to `sink`
  // (nullptr: stop). The PM-sample attribution (live_metrics.hpp) sets it; the collector
  // keeps the sink alive while it is set.
  void set_interval_sink(std::shared_ptr<kernel_interval_sink> sink);

  // Per-node aggregates, top kernels, counters, warnings, recent events. Does not flush:
  // call flush() first (report() does both).
  [[nodiscard]] cupti_snapshot snapshot(std::size_t top_kernel_limit = 50);

  // flush() then snapshot().
  [[nodiscard]] cupti_snapshot report(std::size_t top_kernel_limit = 50);

  // Forgets aggregates, counters and recent events (kernel names and launches stay).
  void reset();

  // The path a completed CUPTI buffer takes (walk, parse, attribute), under the same lock.
  // Tests and benchmarks feed synthetic buffers of real CUPTI records through it.
  void consume_buffer(std::uint8_t* buffer, std::size_t valid_bytes);

  // The launch table the launch callback writes (tests drive the hook through it).
  [[nodiscard]] correlation_table& launches();

  // The graph node -> capture-time scope table the graph-node callbacks write.
  [[nodiscard]] graph_node_table& graph_nodes();

 private:
  cupti_collector();

  void ensure_attribution(const attribution_options& options);
  gpu_attribution& attribution_locked();

  // The state message is the warning while CUPTI is not collecting: one line per
  // problem, and a later successful start() leaves no stale line behind. `message` says
  // what went wrong only; status_locked() adds what the report still has.
  bool refuse(cupti_state state, std::string message);

  void add_warning(std::string w);

  // What a report still has while CUPTI is not collecting. Said when the status is read,
  // not when start() refused: KSCOPE_CUPTI=0 refuses before any CUDA call, so only later
  // (the session probes before it reports) is it known whether there is a GPU at all.
  static std::string without_cupti();

  cupti_status status_locked() const;

  std::uint64_t read_dropped_by_cupti() noexcept;

#if KSCOPE_HAS_CUPTI
  static std::uint64_t CUPTIAPI steady_timestamp() {
    return static_cast<std::uint64_t>(detail::now_ns());
  }

  // The hot path: runs inside every hooked launch, on the launching thread. userdata is
  // the attribution (created once, never replaced); its two tables are thread-safe.
  static void CUPTIAPI on_api_callback(void* userdata, CUpti_CallbackDomain domain,
                                       CUpti_CallbackId cbid, const void* cbdata) {
    if (KSCOPE_UNLIKELY(userdata == nullptr || cbdata == nullptr)) return;
    auto& attribution = *static_cast<gpu_attribution*>(userdata);
    if (KSCOPE_LIKELY(domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API)) {
      const auto* data = static_cast<const CUpti_CallbackData*>(cbdata);
      // A step profiled by the per-scope counters: its launches, with their scopes.
      if (KSCOPE_UNLIKELY(detail::active_step_log.load(std::memory_order_relaxed) != nullptr))
        note_profiled_step(domain, cbid, *data);
      if (KSCOPE_UNLIKELY(domain == CUPTI_CB_DOMAIN_DRIVER_API && (cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch ||
                                                                  cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz))) {
        const bool unreferenced = global().on_graph_launch(*data);
        if (data->callbackSite == CUPTI_API_ENTER && global().options_.driver_api_callbacks)
          record_launch_from_this_thread(attribution.launches(), data->correlationId);
        // After the store above (or the runtime call's, the same id): the mark must stay.
        if (unreferenced) mark_unreferenced_replay_from_this_thread(attribution.launches(), data->correlationId);
        if (KSCOPE_UNLIKELY(data->callbackSite == CUPTI_API_EXIT && detach_pending_.load(std::memory_order_relaxed)))
          global().detach_at_api_exit();
        return;
      }
      if (data->callbackSite != CUPTI_API_ENTER) {
        // A pause asked CUPTI detached (cupti_options::pause_detach): here, at a call's exit.
        if (KSCOPE_UNLIKELY(detach_pending_.load(std::memory_order_relaxed))) global().detach_at_api_exit();
        return;
      }
      record_launch_from_this_thread(attribution.launches(), data->correlationId);
      return;
    }
    if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
      const auto& resource = *static_cast<const CUpti_ResourceData*>(cbdata);
      // A module's cubin is handed out only here: copied for warp-stall source lines (noexcept).
      if (cbid == CUPTI_CBID_RESOURCE_MODULE_LOADED) return detail::capture_loaded_module(resource);
      if (cbid == CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED || cbid == CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING)
        return global().on_graph_exec_callback(cbid, resource);
      on_graph_node_callback(attribution, cbid, resource);
    }
  }

  static KSCOPE_NOINLINE void note_profiled_step(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                                 const CUpti_CallbackData& data) noexcept {
    if (detail::profiled_step_log* log = detail::active_step_log.load(std::memory_order_acquire))
      detail::note_launch_for_profiled_step(*log, domain, cbid, data);
  }

  // The graph launch's driver callback (graph-level trace on): decides, on the launching
  // thread, whether this replay is traced node by node, and if so keeps graph-level trace
  // off from its API entry to its API exit (CUPTI decides how to trace a launch inside
  // the call). Several threads launching node-level replays at once share one "off"
  // (a count under graph_toggle_mutex_), so no replay finds it switched back early; a
  // replay launched by another thread inside that window is traced node by node too,
  // which its records say (the attribution counts what it got, not what was decided).
  // True at API entry when no replay of this graph will be traced as one record (its
  // launch is then marked for the attribution).
  bool on_graph_launch(const CUpti_CallbackData& data) noexcept {
    thread_local bool node_level_in_this_call = false;
    if (KSCOPE_UNLIKELY(!graphs_seen_.load(std::memory_order_relaxed))) graphs_seen_.store(true, std::memory_order_relaxed);
    if (!graph_trace_on_.load(std::memory_order_acquire)) {
      node_level_in_this_call = false;  // stopped meanwhile: nothing to switch back
      return false;
    }
    try {
      if (data.callbackSite == CUPTI_API_ENTER) {
        // cuGraphLaunch(hGraphExec, hStream): the executable graph is the first parameter.
        const void* const* params = static_cast<const void* const*>(data.functionParams);
        const auto exec = params != nullptr ? reinterpret_cast<std::uintptr_t>(params[0]) : std::uintptr_t{0};
        const graph_replay_sampler::replay_decision decision = graph_sampler_.decide_replay(exec);
        if (!decision.node_level) return false;
        node_level_in_this_call = true;
        std::lock_guard<std::mutex> lock(graph_toggle_mutex_);
        if (graph_node_level_launches_.fetch_add(1, std::memory_order_acq_rel) == 0)
          (void)api_.activity_disable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
        return decision.never_one_record;
      } else if (node_level_in_this_call) {
        node_level_in_this_call = false;
        std::lock_guard<std::mutex> lock(graph_toggle_mutex_);
        const std::uint32_t in_flight = graph_node_level_launches_.load(std::memory_order_relaxed);
        if (in_flight > 0) {
          // Enabled before the count drops: a graph built meanwhile reads the kind as off.
          if (in_flight == 1 && !graph_trace_paused_) (void)api_.activity_enable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
          graph_node_level_launches_.fetch_sub(1, std::memory_order_acq_rel);
        }
      }
    } catch (...) {
      callback_errors_.fetch_add(1, std::memory_order_relaxed);
    }
    return false;
  }

  void on_graph_exec_callback(CUpti_CallbackId cbid, const CUpti_ResourceData& data) noexcept {
    graphs_seen_.store(true, std::memory_order_relaxed);
    try {
      const auto* graph = static_cast<const CUpti_GraphData*>(data.resourceDescriptor);
      if (graph == nullptr) return;
      const auto exec = reinterpret_cast<std::uintptr_t>(graph->graphExec);
      if (cbid == CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED) {
        // Whether CUPTI builds it with graph-level trace: not while paused, nor while a
        // node-level replay holds the kind off (graph_sampling.hpp: such a graph replayed
        // as one record crashed CUPTI). Read without graph_toggle_mutex_: this runs inside
        // CUPTI's callback while another thread may hold that lock and wait in CUPTI. Both
        // flags say "off" from before the kind goes off until after it is back on.
        const bool graph_trace_on = graph_trace_on_.load(std::memory_order_acquire) &&
                                    graph_node_level_launches_.load(std::memory_order_acquire) == 0;
        graph_sampler_.graph_exec_created(exec, graph_trace_on);
      } else {
        graph_sampler_.graph_exec_destroyed(exec);
      }
    } catch (...) {
      callback_errors_.fetch_add(1, std::memory_order_relaxed);
    }
  }

  // A graph node created or cloned, on the thread building the graph (not a hot path:
  // graphs are built once and replayed many times). Never throws into CUDA.
  static void on_graph_node_callback(gpu_attribution& attribution, CUpti_CallbackId cbid,
                                     const CUpti_ResourceData& data) noexcept {
    cupti_collector& c = global();
    c.graphs_seen_.store(true, std::memory_order_relaxed);
    try {
      if (detail::record_graph_node_event(attribution.graph_nodes(), cbid, data, c.api_.get_graph_node_id,
                                          detail::current_node()) == detail::graph_node_event::no_id) {
        c.graph_node_errors_.fetch_add(1, std::memory_order_relaxed);
      }
    } catch (...) {
      c.callback_errors_.fetch_add(1, std::memory_order_relaxed);
    }
  }

  static void CUPTIAPI on_buffer_requested(std::uint8_t** buffer, std::size_t* size,
                                           std::size_t* max_records) {
    cupti_collector& c = global();
    std::uint8_t* b = c.pool_.acquire();
    *buffer = b;
    *size = b != nullptr ? c.pool_.buffer_bytes() : 0;
    *max_records = 0;
  }

  static void CUPTIAPI on_buffer_completed(CUcontext, std::uint32_t, std::uint8_t* buffer,
                                           std::size_t, std::size_t valid_bytes) {
    cupti_collector& c = global();
    c.buffers_completed_.fetch_add(1, std::memory_order_relaxed);
    if (valid_bytes > 0 && c.pool_.owns(buffer)) {
      const std::int64_t began = detail::now_ns();
      try {
        c.consume_buffer(buffer, valid_bytes);
      } catch (...) {
        c.callback_errors_.fetch_add(1, std::memory_order_relaxed);
      }
      c.attribution_cpu_ns_.fetch_add(detail::now_ns() - began, std::memory_order_relaxed);
    }
    c.pool_.release(buffer);
    // Outside every kscope lock: a CUPTI call made from inside a CUPTI callback never holds
    // a kscope lock, so CUPTI's internal locks and ours are never taken in opposite orders.
    // Not while detaching or detached: a CUPTI call then would attach CUPTI again (a buffer
    // can come back on CUPTI's own thread while cuptiFinalize runs).
    if (c.api_.activity_get_num_dropped_records != nullptr && !c.finalizing_.load(std::memory_order_acquire) &&
        !c.detached_.load(std::memory_order_acquire)) {
      std::size_t dropped = 0;
      if (c.api_.activity_get_num_dropped_records(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped > 0) {
        c.dropped_by_cupti_.fetch_add(dropped, std::memory_order_relaxed);
      }
    }
  }

  static void at_exit_handler() noexcept { global().stop(); }

  // Paired samples; the narrowest bracket wins.
  std::int64_t measure_clock_offset() const noexcept {
    std::int64_t best_width = -1, offset = 0;
    for (int i = 0; i < 7; ++i) {
      std::uint64_t cupti_ns = 0;
      const std::int64_t before = detail::now_ns();
      if (api_.get_timestamp(&cupti_ns) != CUPTI_SUCCESS) return offset;
      const std::int64_t after = detail::now_ns();
      const std::int64_t width = after - before;
      if (best_width < 0 || width < best_width) {
        best_width = width;
        offset = before + width / 2 - static_cast<std::int64_t>(cupti_ns);
      }
    }
    return offset;
  }

  bool start_cupti() {
    // The short reason only: why there is no GPU is the report's GPU line (probe_gpu().message).
    if (!in_driver_initialization_) {  // there, the driver calling us is the GPU's presence
      const gpu_availability& gpu = probe_gpu();
      if (!gpu.available()) return refuse(cupti_state::unavailable, "CUPTI not started: " + gpu.reason);
    }
    std::string why;
    if (!detail::load_cupti(api_, options_.library_path, why)) {
      return refuse(cupti_state::unavailable, "CUPTI unavailable: " + why);
    }
    if (pool_.buffer_count() == 0 && !pool_.allocate(options_.buffer_bytes, options_.buffer_count)) {
      return refuse(cupti_state::failed,
                    "CUPTI not started: could not allocate the activity buffer pool (" +
                        std::to_string(options_.buffer_count) + " x " + std::to_string(options_.buffer_bytes) +
                        " bytes)");
    }
    gpu_attribution* attribution = nullptr;
    {
      std::lock_guard<std::mutex> lock(attribution_mutex_);
      attribution = &attribution_locked();
    }

    // 1. Subscribe first: if another tool owns CUPTI, touch nothing else of its setup.
    callbacks_enabled_ = 0;
    std::string other_tool;
    const CUptiResult subscribed = api_.subscribe_named(subscriber_, &on_api_callback, attribution, "kscope", other_tool);
    if (subscribed != CUPTI_SUCCESS) {
      std::string who = other_tool.empty() ? std::string() : ": held by " + other_tool;
      return fail_with(subscribed, "cuptiSubscribe", who);
    }
    enable_launch_callbacks();
    enable_graph_callbacks();
    enable_module_callbacks();
    if (callbacks_enabled_ == 0) {
      teardown();
      return refuse(cupti_state::failed,
                    "CUPTI launch callbacks could not be enabled");
    }

    // 2. Buffers.
    if (!buffers_registered_) {
      const CUptiResult r = api_.activity_register_callbacks(&on_buffer_requested, &on_buffer_completed);
      if (r != CUPTI_SUCCESS) {
        teardown();
        return fail_with(r, "cuptiActivityRegisterCallbacks", "");
      }
      buffers_registered_ = true;
    }

    // 3. One clock, before any activity kind is enabled (CUPTI's requirement).
    if (clock_ == cupti_clock::none || clock_ == cupti_clock::cupti_native || clock_set_up_again_) {
      clock_set_up_again_ = false;
      if (options_.timestamp_callback && api_.activity_register_timestamp_callback != nullptr &&
          api_.activity_register_timestamp_callback(&steady_timestamp) == CUPTI_SUCCESS) {
        clock_ = cupti_clock::timestamp_callback;
        clock_offset_ns_.store(0, std::memory_order_relaxed);
      } else if (api_.get_timestamp != nullptr) {
        clock_ = cupti_clock::offset;
        clock_offset_ns_.store(measure_clock_offset(), std::memory_order_relaxed);
      } else {
        clock_ = cupti_clock::cupti_native;
        add_warning("CUPTI timestamps could not be put on kscope's clock; GPU and host times "
                    "in traces are not aligned");
      }
    }

    // 4. Activity kinds. Kernels are required; the rest degrade with a warning. A warp-stall
    // pass's PC sampling, kept enabled, would make CUPTI refuse them: let it go first.
    if (const detail::pc_sampling_release_hook release =
            detail::pc_sampling_release_for_activity().load(std::memory_order_acquire))
      (void)release();
    enabled_kinds_.clear();
    CUptiResult r = enable_kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (r != CUPTI_SUCCESS) {
      teardown();
      return fail_with(r, "cuptiActivityEnable(CONCURRENT_KERNEL)", "");
    }
    std::string kinds = "kernel";
    std::string graphs = enable_graph_trace();
    if (options_.collect_memcpy) {
      if (enable_kind(CUPTI_ACTIVITY_KIND_MEMCPY) == CUPTI_SUCCESS) kinds += "+memcpy";
      else add_warning("CUPTI memcpy activity could not be enabled; copies are not attributed");
      (void)enable_kind(CUPTI_ACTIVITY_KIND_MEMCPY2);  // peer copies; optional
    }
    if (options_.collect_memset) {
      if (enable_kind(CUPTI_ACTIVITY_KIND_MEMSET) == CUPTI_SUCCESS) kinds += "+memset";
      else add_warning("CUPTI memset activity could not be enabled; memsets are not attributed");
    }
    if (options_.collect_sync) {
      if (enable_kind(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) == CUPTI_SUCCESS) kinds += "+sync";
      else add_warning("CUPTI synchronization activity could not be enabled; host waits are not attributed");
    }
    if (options_.flush_period_ms > 0 && api_.activity_flush_period != nullptr) {
      (void)api_.activity_flush_period(options_.flush_period_ms);
    }
    if (!exit_handler_registered_) {
      // probe_gpu() above (its cudaGetDeviceCount, in this call or an earlier one) made
      // the runtime register its own teardown first, so this handler runs before it
      // (atexit is LIFO). Started inside cuInit, it may run after the runtime's teardown:
      // it makes CUPTI calls only, which the driver (still there) serves.
      exit_handler_registered_ = std::atexit(&at_exit_handler) == 0;
    }
    state_ = cupti_state::running;
    running_.store(true, std::memory_order_release);
    detail::activity_tracing().store(true, std::memory_order_release);
    paused_ = false;
    tracing_.store(true, std::memory_order_release);
    if (options_.trace_steps.windowed() && options_.windows.window_ms > 0) {
      add_warning("cupti_options: windows of steps (trace_steps) and of time (window_ms) both set: windows of steps "
                  "are used");
      options_.windows = {};
    }
    if (options_.windows.window_ms > 0 && !options_.windows.windowed())
      add_warning("cupti_options::windows: period_ms (" + std::to_string(options_.windows.period_ms) +
                  ") is not longer than window_ms (" + std::to_string(options_.windows.window_ms) +
                  "): every launch is traced, no windows");
    if (options_.windows.windowed() && !options_.window_thread) {
      // Windows on a timer gave wrong records and a crash on an H100 (options.hpp,
      // window_thread): every launch is traced instead, and the status says so.
      add_warning("tracing in windows of " + detail::window_length_text(options_.windows.window_ms) + " every " +
                  detail::window_length_text(options_.windows.period_ms) +
                  " not started: pausing CUPTI from the collector's thread gave kernel records a stale correlation "
                  "id and crashed a program capturing CUDA graphs on an H100 (CUDA 13.0); every launch is traced "
                  "(pause_tracing()/resume_tracing() from the launching thread between steps work)");
      options_.windows = {};
    }
    const std::int64_t began = detail::now_ns();
    window_log_.configure(options_.windows, began);
    window_log_.begin(began);
    if (options_.windows.windowed()) start_window_thread(trace_window_schedule(options_.windows, began));
    if (options_.trace_steps.windowed()) start_step_windows();
    message_ = "CUPTI " + std::to_string(api_.version) + " (" + api_.path + "): " + kinds + " activity; " +
               (!options_.driver_api_callbacks      ? "launch callback (runtime API only)"
                : !options_.runtime_api_callbacks ? "launch callback (driver API only)"
                                                  : "launch callback (runtime+driver API)") +
               (graph_capture_enabled_ ? "; graph capture scopes" : "; graph capture scopes off") + "; " + graphs +
               (options_.windows.windowed() ? "; traced in windows of " + detail::window_length_text(options_.windows.window_ms) +
                                                  " every " + detail::window_length_text(options_.windows.period_ms)
                                            : std::string()) +
               (options_.trace_steps.windowed()
                    ? "; traced in windows of " + std::to_string(options_.trace_steps.window_steps) + " step" +
                          (options_.trace_steps.window_steps == 1 ? "" : "s") + " every " +
                          std::to_string(options_.trace_steps.period_steps) + " (a step: a call of " +
                          step_scope_text() + ")"
                    : std::string()) +
               "; clock: " + to_string(clock_);
    return true;
  }

  bool fail_with(CUptiResult r, const char* call, const std::string& detail_text) {
    const std::string name = api_.result_name(r);
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
      return refuse(cupti_state::owned_by_other_tool,
                    "CUPTI owned by another tool (" + name + detail_text + ")");
    }
    return refuse(cupti_state::failed,
                  "CUPTI not started: " + std::string(call) + " failed with " + name + detail_text);
  }

  void enable_launch_callbacks() {
    std::size_t count = 0;
    const CUpti_CallbackId* ids = detail::cupti_runtime_launch_cbids(count);
    if (options_.runtime_api_callbacks || !options_.driver_api_callbacks) {
      for (std::size_t i = 0; i < count; ++i) {
        if (api_.enable_callback(1, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API, ids[i]) == CUPTI_SUCCESS) {
          ++callbacks_enabled_;
        }
      }
    }
    if (!options_.driver_api_callbacks) return;
    ids = detail::cupti_driver_launch_cbids(count);
    for (std::size_t i = 0; i < count; ++i) {
      if (api_.enable_callback(1, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API, ids[i]) == CUPTI_SUCCESS) {
        ++callbacks_enabled_;
      }
    }
  }

  // Graph-level trace (cupti_options::graphs): on for `sampled` and `graph`, with the graph
  // launch's driver callback (the per-replay decision) and the executable-graph resource
  // callbacks (which graphs CUPTI saw built). Where the driver does not offer it, or a
  // callback cannot be enabled, graphs are traced node by node and the status says why.
  // Returns the status words.
  std::string enable_graph_trace() {
    graph_trace_on_.store(false, std::memory_order_release);
    graph_sampler_.configure(graph_tracing::node, options_.graph_first, options_.graph_every);
    {
      std::lock_guard<std::mutex> lock(graph_toggle_mutex_);
      graph_node_level_launches_.store(0, std::memory_order_release);  // a launch in flight at an earlier stop() left it counted
    }
    graph_hooks_enabled_ = false;
    graph_trace_paused_ = false;
    if (options_.graphs == graph_tracing::node) return "graphs traced node by node";
    bool hooks = api_.enable_callback(1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE,
                                      CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED) == CUPTI_SUCCESS;
    hooks = hooks && api_.enable_callback(1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE,
                                          CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING) == CUPTI_SUCCESS;
    for (CUpti_CallbackId id : {CUpti_CallbackId(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch),
                                CUpti_CallbackId(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz)})
      hooks = hooks && api_.enable_callback(1, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API, id) == CUPTI_SUCCESS;
    graph_hooks_enabled_ = hooks;
    if (!hooks) return "graphs traced node by node (the graph-launch callbacks could not be enabled)";
    const CUptiResult r = enable_kind(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
    if (r != CUPTI_SUCCESS) {
      add_warning("CUPTI graph-level trace unavailable (" + api_.result_name(r) +
                  "): every CUDA-graph replay is traced node by node, at the cost of eager launches");
      return "graphs traced node by node (no graph-level trace)";
    }
    {
      // From now on CUPTI stamps node-level replays with an offset: the attribution checks
      // them against the graph's replays traced as one record (attribution.hpp).
      std::lock_guard<std::mutex> lock(attribution_mutex_);
      attribution_locked().set_graph_level_trace(true);
    }
    graph_sampler_.configure(options_.graphs, options_.graph_first, options_.graph_every);
    graph_trace_on_.store(true, std::memory_order_release);
    if (options_.graphs == graph_tracing::graph) return "graphs traced as one record per replay";
    return "graphs sampled (each graph's first " + std::to_string(options_.graph_first) + " replays" +
           (options_.graph_every > 0 ? ", the next at powers of two, and every " + std::to_string(options_.graph_every) + "th"
                                     : std::string()) +
           " traced node by node, the others as one record, scaled)";
  }

  // The graph-node resource callbacks (capture-time scopes). Optional: without them, or
  // without cuptiGetGraphNodeId, graph kernels are still attributed to their launch scope
  // and the records are counted as graph_capture_unknown.
  void enable_graph_callbacks() {
    graph_capture_enabled_ = false;
    if (api_.get_graph_node_id == nullptr) return;
    const bool created = api_.enable_callback(1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE,
                                              CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) == CUPTI_SUCCESS;
    const bool cloned = api_.enable_callback(1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE,
                                             CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) == CUPTI_SUCCESS;
    graph_capture_enabled_ = created && cloned;
  }

  // Module loads (optional): each module's cubin goes to the cubin store
  // (detail/cubin_store.hpp), so warp-stall passes can give PCs source lines; while this is
  // on, a pass does not need CUPTI's subscriber (held here) to watch module loads itself.
  void enable_module_callbacks() {
    const bool on = detail::resolve_cubin_capture(api_.handle) &&
                    api_.enable_callback(1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE,
                                         CUPTI_CBID_RESOURCE_MODULE_LOADED) == CUPTI_SUCCESS;
    detail::cubin_store::global().set_collector_watching(on);
  }

  CUptiResult enable_kind(CUpti_ActivityKind kind) {
    const CUptiResult r = api_.activity_enable(kind);
    if (r == CUPTI_SUCCESS) enabled_kinds_.push_back(kind);
    return r;
  }

  // The callbacks a traced launch needs, on (1) or off (0): the launch, copy, memset and
  // sync ids of both APIs as start() enabled them, and the graph launch's (the per-replay
  // decision). Ids the loaded CUPTI does not know fail here as they did at start.
  void set_launch_callbacks(std::uint32_t on) {
    std::size_t count = 0;
    const CUpti_CallbackId* ids = detail::cupti_runtime_launch_cbids(count);
    if (options_.runtime_api_callbacks || !options_.driver_api_callbacks)
      for (std::size_t i = 0; i < count; ++i)
        (void)api_.enable_callback(on, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API, ids[i]);
    if (options_.driver_api_callbacks) {
      ids = detail::cupti_driver_launch_cbids(count);
      for (std::size_t i = 0; i < count; ++i)
        (void)api_.enable_callback(on, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API, ids[i]);
    }
    if (graph_hooks_enabled_)
      for (CUpti_CallbackId id : {CUpti_CallbackId(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch),
                                  CUpti_CallbackId(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz)})
        (void)api_.enable_callback(on, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API, id);
  }

  // Pause: the kinds first, then the callbacks, so that no record arrives whose launch went
  // unseen (a launch seen with no record is harmless). Resume: the other way round.
  // control_mutex_ held.
  bool pause_locked() {
    if (state_ != cupti_state::running || paused_) return false;
    const std::int64_t began = detail::now_ns();
    bool ok = true;
    {
      std::lock_guard<std::mutex> lock(graph_toggle_mutex_);
      graph_trace_paused_ = true;
      graph_trace_was_on_ = graph_trace_on_.exchange(false, std::memory_order_acq_rel);
      graph_node_level_launches_.store(0, std::memory_order_release);  // a launch in flight finds graph-level trace off and leaves it be
      for (CUpti_ActivityKind kind : enabled_kinds_) ok = api_.activity_disable(kind) == CUPTI_SUCCESS && ok;
    }
    // A detach (cupti_options::pause_detach) happens at the next CUDA call's exit, from the
    // launch callbacks: they stay on until then.
    bool detach = false;
    if (options_.pause_detach) {
      detail::cupti_detach_guard& guard = detail::cupti_detach_state();
      std::unique_lock<std::mutex> others(guard.mutex);  // never held across a CUPTI call
      std::string refusal = detach_refusal_locked(guard.state_beyond_activity);
      others.unlock();
      detach = refusal.empty();
      if (!detach) {
        ++detaches_refused_;
        detach_refusal_ = std::move(refusal);
      }
    }
    if (!detach) {
      if (options_.pause_callbacks) set_launch_callbacks(0);
      if (options_.pause_unsubscribe) drop_subscription();
    }
    // The window's records now: launches between windows still take correlation ids, and
    // after 2^18 of them (a second or two of an eager loop) the table would have forgotten
    // the window's launches whose records CUPTI had not yet delivered (counted, not lost,
    // but unattributed). Forced: the kinds are off, so the buffers CUPTI holds are handed
    // over whole now. Not when detaching: the detach, at the next call, waits for the GPU
    // and then flushes, so that no record still on its way is cut short.
    if (!detach) flush_locked(true);
    paused_ = true;
    tracing_.store(false, std::memory_order_release);
    window_log_.end(detail::now_ns());
    count_toggle(began, ok);
    if (detach) detach_pending_.store(true, std::memory_order_release);
    return ok;
  }

  bool resume_locked() {
    if (state_ != cupti_state::running || !paused_) return false;
    const std::int64_t began = detail::now_ns();
    bool ok = true;
    detach_pending_.store(false, std::memory_order_release);  // no CUDA call came: still attached
    if (detached_.load(std::memory_order_relaxed) && !attach_again_locked()) {
      window_log_.note_failed_toggle();
      return false;
    }
    if (subscriber_ == nullptr && !take_subscription_again()) {
      // Another tool took CUPTI meanwhile: no callback would attribute a launch, so tracing
      // stays paused, and the status says why.
      window_log_.note_failed_toggle();
      return false;
    }
    if (options_.pause_callbacks) set_launch_callbacks(1);
    {
      std::lock_guard<std::mutex> lock(graph_toggle_mutex_);
      for (CUpti_ActivityKind kind : enabled_kinds_) ok = api_.activity_enable(kind) == CUPTI_SUCCESS && ok;
      graph_trace_paused_ = false;
      graph_trace_on_.store(graph_trace_was_on_, std::memory_order_release);
    }
    paused_ = false;
    tracing_.store(true, std::memory_order_release);
    window_log_.begin(began);
    count_toggle(began, ok);
    return ok;
  }

  // cupti_options::pause_unsubscribe (a probe): a pause drops kscope's CUPTI subscription
  // whole, so that between windows CUPTI calls no callback of kscope's at all; the resume
  // subscribes again and enables every callback start() enabled. A graph built meanwhile is
  // unseen: traced node by node, as one built before the start. control_mutex_ held.
  void drop_subscription() {
    if (subscriber_ == nullptr) return;
    (void)api_.unsubscribe(subscriber_);
    subscriber_ = nullptr;
  }
  bool take_subscription_again() {
    gpu_attribution* attribution = nullptr;
    {
      std::lock_guard<std::mutex> lock(attribution_mutex_);
      attribution = &attribution_locked();
    }
    std::string other_tool;
    const CUptiResult r = api_.subscribe_named(subscriber_, &on_api_callback, attribution, "kscope", other_tool);
    if (r != CUPTI_SUCCESS) {
      subscriber_ = nullptr;
      add_warning("tracing in windows: CUPTI could not be subscribed to again at a resume (" + api_.result_name(r) +
                  (other_tool.empty() ? std::string() : ", held by " + other_tool) +
                  "): tracing stays paused from then on");
      return false;
    }
    if (!options_.pause_callbacks) set_launch_callbacks(1);  // else the resume enables them
    if (graph_hooks_enabled_)
      for (CUpti_CallbackId id : {CUpti_CallbackId(CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED),
                                  CUpti_CallbackId(CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING)})
        (void)api_.enable_callback(1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE, id);
    if (graph_capture_enabled_) enable_graph_callbacks();
    enable_module_callbacks();
    return true;
  }

  // ---- Detaching CUPTI between windows (cupti_options::pause_detach) -------------------
  // Why a pause keeps CUPTI attached ("" where it may detach); `others` is another feature's
  // CUPTI state (cupti_detach_guard, its mutex held). control_mutex_ held.
  std::string detach_refusal_locked(bool others) const {
    if (api_.finalize == nullptr) return "the loaded CUPTI has no cuptiFinalize";
    if (others) return "per-scope counters, PM sampling or warp stalls set CUPTI up in this process";
    if (graphs_seen_.load(std::memory_order_relaxed))
      return "the program uses CUDA graphs (their node ids and graph-level trace live in CUPTI)";
    // The detach waits for the GPU, which a stream capture in progress forbids: only where the
    // graph-node callbacks would have said that a capture began (graphs_seen_).
    if (!graph_capture_enabled_) return "CUPTI's graph-node callbacks are off, so a stream capture would go unseen";
    // A graph built before the start or while detached is seen first at its launch, by the
    // graph-launch callbacks (graphs_seen_); without them (graphs=node, or not offered) its
    // launch would go unseen and pauses would go on detaching.
    if (!graph_hooks_enabled_) return "CUPTI's graph-launch callbacks are off, so a launch of a graph built unseen would go unnoticed";
    return "";
  }

  // At the exit of a CUDA call on a program thread, with a detach asked by a pause (CUPTI's
  // documented place for cuptiFinalize). Takes no lock it would wait for: a pause, resume or
  // flush at work on another thread leaves the detach to a later call's exit.
  void detach_at_api_exit() noexcept {
    thread_local bool inside = false;  // the GPU wait below makes CUDA calls of its own
    if (inside) return;
    std::unique_lock<std::mutex> control(control_mutex_, std::try_to_lock);
    if (!control.owns_lock()) return;
    if (!detach_pending_.exchange(false, std::memory_order_acq_rel)) return;
    if (state_ != cupti_state::running || !paused_ || detached_.load(std::memory_order_relaxed)) return;
    inside = true;
    try {
      detach_locked();
    } catch (...) {
      callback_errors_.fetch_add(1, std::memory_order_relaxed);
    }
    inside = false;
  }

  void detach_locked() {
    const std::int64_t began = detail::now_ns();
    detail::cupti_detach_guard& guard = detail::cupti_detach_state();
    std::unique_lock<std::mutex> others(guard.mutex, std::try_to_lock);
    if (!others.owns_lock()) {  // a feature is setting CUPTI up right now: a later call's exit
      detach_pending_.store(true, std::memory_order_release);
      return;
    }
    std::string refusal = detach_refusal_locked(guard.state_beyond_activity);
    if (!refusal.empty()) {
      // Changed since the pause decided (a graph, another feature): the pause's flush, which
      // it left to the detach; the launch callbacks stay on (two stores a launch, no record).
      flush_locked(true);
      ++detaches_refused_;
      detach_refusal_ = std::move(refusal);
      return;
    }
    // Nothing of the window may still be on its way: a record CUPTI has not written yet is
    // gone with it. So the GPU's work is waited for, then every buffer comes back.
    const std::string unsynchronized = wait_for_gpu_work();
    flush_locked(true);
    finalizing_.store(true, std::memory_order_release);
    const CUptiResult r = api_.finalize();
    if (r != CUPTI_SUCCESS) {
      finalizing_.store(false, std::memory_order_release);
      add_warning("tracing in windows: cuptiFinalize failed (" + api_.result_name(r) +
                  "): CUPTI stays attached and switched off between windows");
      options_.pause_detach = false;
      if (options_.pause_callbacks) set_launch_callbacks(0);
      return;
    }
    detached_.store(true, std::memory_order_release);  // before finalizing_ clears: no gap for a CUPTI call
    finalizing_.store(false, std::memory_order_release);
    subscriber_ = nullptr;  // CUPTI's state is gone: the subscription, callbacks, buffers, clock
    detail::cubin_store::global().set_collector_watching(false);  // modules loaded while detached go unseen
    buffers_registered_ = false;
    buffers_reclaimed_ += pool_.reclaim_all();
    if (!unsynchronized.empty() && detach_sync_problem_.empty()) detach_sync_problem_ = unsynchronized;
    ++detaches_;
    detach_ns_ += detail::now_ns() - began;
  }

  // Waits for the current context's work and every active primary context's (the runtime's),
  // through the driver this process already loaded. "" when all were waited for. Not waited
  // for: contexts a program made itself (cuCtxCreate) and made current on other threads only;
  // and a wait never ends where the GPU waits for what this thread would do later (a kernel
  // polling a flag the host sets after this call): such a program leaves pause_detach off.
  static std::string wait_for_gpu_work() noexcept {
    using sync_fn = CUresult (*)();
    using count_fn = CUresult (*)(int*);
    using device_fn = CUresult (*)(CUdevice*, int);
    using state_fn = CUresult (*)(CUdevice, unsigned int*, int*);
    using retain_fn = CUresult (*)(CUcontext*, CUdevice);
    using release_fn = CUresult (*)(CUdevice);
    using push_fn = CUresult (*)(CUcontext);
    using pop_fn = CUresult (*)(CUcontext*);
    void* driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (driver == nullptr) return "the CUDA driver is not loaded";
    const auto sync = reinterpret_cast<sync_fn>(::dlsym(driver, "cuCtxSynchronize"));
    const auto count = reinterpret_cast<count_fn>(::dlsym(driver, "cuDeviceGetCount"));
    const auto device_at = reinterpret_cast<device_fn>(::dlsym(driver, "cuDeviceGet"));
    const auto state = reinterpret_cast<state_fn>(::dlsym(driver, "cuDevicePrimaryCtxGetState"));
    const auto retain = reinterpret_cast<retain_fn>(::dlsym(driver, "cuDevicePrimaryCtxRetain"));
    const auto release = reinterpret_cast<release_fn>(::dlsym(driver, "cuDevicePrimaryCtxRelease_v2"));
    const auto push = reinterpret_cast<push_fn>(::dlsym(driver, "cuCtxPushCurrent_v2"));
    const auto pop = reinterpret_cast<pop_fn>(::dlsym(driver, "cuCtxPopCurrent_v2"));
    std::string problem;
    if (sync == nullptr || count == nullptr || device_at == nullptr || state == nullptr || retain == nullptr || release == nullptr ||
        push == nullptr || pop == nullptr) {
      problem = "the driver lacks a context call";
    } else {
      const CUresult current = sync();  // the calling thread's context (CUDA_ERROR_INVALID_CONTEXT: none)
      if (current != CUDA_SUCCESS && current != CUDA_ERROR_INVALID_CONTEXT)
        problem = "cuCtxSynchronize " + std::to_string(static_cast<int>(current));
      int devices = 0;
      if (count(&devices) != CUDA_SUCCESS) devices = 0;
      for (int ordinal = 0; ordinal < devices; ++ordinal) {
        CUdevice d = 0;
        unsigned int flags = 0;
        int active = 0;
        if (device_at(&d, ordinal) != CUDA_SUCCESS || state(d, &flags, &active) != CUDA_SUCCESS || active == 0) continue;
        CUcontext context = nullptr;
        if (retain(&context, d) != CUDA_SUCCESS) continue;
        if (push(context) == CUDA_SUCCESS) {
          const CUresult r = sync();
          if (r != CUDA_SUCCESS && problem.empty()) problem = "cuCtxSynchronize " + std::to_string(static_cast<int>(r));
          CUcontext popped = nullptr;
          (void)pop(&popped);
        }
        (void)release(d);
      }
    }
    ::dlclose(driver);
    return problem;
  }

  // The resume after a detach: CUPTI set up again as start() set it (the kinds are enabled
  // by the resume after this). control_mutex_ held. False: tracing stays paused, said why.
  bool attach_again_locked() {
    const std::int64_t began = detail::now_ns();
    const auto give_up = [&](const std::string& why) {
      add_warning("tracing in windows: CUPTI could not be attached again at a resume (" + why +
                  "): tracing stays paused from then on");
      return false;
    };
    if (subscriber_ == nullptr && !take_subscription_again()) return false;  // said there (the resume enables the launch callbacks)
    const std::int64_t subscribed = detail::now_ns();  // CUPTI's own start again, and the resource callbacks
    const CUptiResult r = api_.activity_register_callbacks(&on_buffer_requested, &on_buffer_completed);
    if (r != CUPTI_SUCCESS) {
      drop_subscription();
      detail::cubin_store::global().set_collector_watching(false);
      return give_up("cuptiActivityRegisterCallbacks " + api_.result_name(r));
    }
    buffers_registered_ = true;
    if (clock_ == cupti_clock::timestamp_callback &&
        (api_.activity_register_timestamp_callback == nullptr ||
         api_.activity_register_timestamp_callback(&steady_timestamp) != CUPTI_SUCCESS)) {
      clock_ = api_.get_timestamp != nullptr ? cupti_clock::offset : cupti_clock::cupti_native;
      add_warning("tracing in windows: CUPTI's clock callback could not be set again after a detach: later GPU "
                  "times are on CUPTI's clock" + std::string(clock_ == cupti_clock::offset ? " plus a measured offset" : ", not aligned"));
    }
    if (clock_ == cupti_clock::offset) clock_offset_ns_.store(measure_clock_offset(), std::memory_order_relaxed);
    if (options_.flush_period_ms > 0 && api_.activity_flush_period != nullptr)
      (void)api_.activity_flush_period(options_.flush_period_ms);
    detached_.store(false, std::memory_order_release);
    attach_ns_ += detail::now_ns() - began;  // both counted for attaches that succeeded only
    attach_subscribe_ns_ += subscribed - began;
    return true;
  }

  // What the detaches did, for the status (control_mutex_ held); "" when none was asked.
  std::string detach_text_locked() const {
    if (!options_.pause_detach && detaches_ == 0) return "";
    std::string t = "; CUPTI detached at " + std::to_string(detaches_) + " pause" + (detaches_ == 1 ? "" : "s");
    if (detaches_ > 0)
      t += " (" + std::to_string(detach_ns_ / 1000) + " us to detach, " + std::to_string(attach_ns_ / 1000) +
           " us to attach again, of which " + std::to_string(attach_subscribe_ns_ / 1000) + " us to subscribe, in all)";
    if (detaches_refused_ > 0)
      t += ", kept attached at " + std::to_string(detaches_refused_) + ": " + detach_refusal_;
    if (!detach_sync_problem_.empty())
      t += "; before a detach the GPU's work could not all be waited for (" + detach_sync_problem_ +
           "): records still on their way then were lost";
    if (buffers_reclaimed_ > 0)
      t += "; " + std::to_string(buffers_reclaimed_) + " activity buffers CUPTI still held at a detach taken back";
    return t;
  }

  // A pause or resume done: what it took, and whether CUPTI refused part of it.
  void count_toggle(std::int64_t began, bool ok) {
    toggle_ns_ += detail::now_ns() - began;
    ++toggles_;
    if (!ok) window_log_.note_failed_toggle();
  }

  // Undoes start: activity kinds off, callbacks off. Buffers stay registered (CUPTI keeps
  // the registration; re-registering is not needed on a later start()).
  void teardown() noexcept {
    graph_trace_on_.store(false, std::memory_order_release);
    detach_pending_.store(false, std::memory_order_release);
    if (detached_.load(std::memory_order_relaxed)) {  // nothing of kscope's in CUPTI: a call now would only attach it again
      detached_.store(false, std::memory_order_release);
      clock_set_up_again_ = true;  // the timestamp callback went with CUPTI's state
      enabled_kinds_.clear();
      graph_capture_enabled_ = false;
      return;
    }
    for (CUpti_ActivityKind kind : enabled_kinds_) (void)api_.activity_disable(kind);
    enabled_kinds_.clear();
    graph_capture_enabled_ = false;  // unsubscribing turns every callback off
    detail::cubin_store::global().set_collector_watching(false);
    if (subscriber_ != nullptr) {
      (void)api_.unsubscribe(subscriber_);
      subscriber_ = nullptr;
    }
  }
#endif  // KSCOPE_HAS_CUPTI

  void flush_locked(bool force);

  void stop_locked();

  mutable std::mutex control_mutex_;   // start / stop / flush / status
  std::mutex attribution_mutex_;       // the attribution (CUPTI's buffer thread, snapshot)
  std::unique_ptr<gpu_attribution> attribution_;
  std::shared_ptr<kernel_interval_sink> interval_sink_;  // PM-sample attribution, when on
  detail::activity_buffer_pool pool_;
  cupti_options options_{};
  cupti_state state_ = cupti_state::not_started;
  cupti_clock clock_ = cupti_clock::none;
  std::string message_ = "CUPTI collector not started";
  std::vector<std::string> warnings_;
  std::size_t callbacks_enabled_ = 0;
  std::atomic<bool> running_{false};
  std::atomic<std::int64_t> clock_offset_ns_{0};
  std::atomic<std::uint64_t> dropped_by_cupti_{0};
  std::atomic<std::uint64_t> buffers_completed_{0};
  std::atomic<std::uint64_t> callback_errors_{0};
  std::atomic<std::uint64_t> graph_node_errors_{0};
  std::atomic<std::int64_t> attribution_cpu_ns_{0};
  bool graph_capture_enabled_ = false;
  bool exit_handler_registered_ = false;
  bool buffers_registered_ = false;
  graph_replay_sampler graph_sampler_;
  std::atomic<bool> graph_trace_on_{false};
  std::mutex graph_toggle_mutex_;  // a leaf: taken in the graph launch's callback, nothing inside
  // Changed under graph_toggle_mutex_; atomic so that the graph-built callback reads it unlocked.
  std::atomic<std::uint32_t> graph_node_level_launches_{0};
  bool graph_trace_paused_ = false;  // guarded by graph_toggle_mutex_: tracing paused, keep graph trace off
  bool graph_trace_was_on_ = false;  // guarded by graph_toggle_mutex_: graph_trace_on_ before the pause
  bool graph_hooks_enabled_ = false;  // the graph launch's callbacks were enabled at start
  // Detaching between windows (cupti_options::pause_detach): asked by a pause, done at the
  // next CUDA call's exit (the flag, read there unlocked); the rest under control_mutex_.
  // Static: the launch callbacks' exit path reads it without reaching the collector.
  static inline std::atomic<bool> detach_pending_{false};
  std::atomic<bool> graphs_seen_{false};  // a graph launched, built or instantiated (callbacks)
  // Changed under control_mutex_; atomic for the buffer callback's unlocked read.
  std::atomic<bool> detached_{false};
  std::atomic<bool> finalizing_{false};  // inside cuptiFinalize (a detach): no CUPTI call from a buffer callback
  bool clock_set_up_again_ = false;  // stopped while detached: the next start() sets the clock up
  bool in_driver_initialization_ = false;  // start_in_driver_initialization(): no GPU probe
  std::uint64_t detaches_ = 0;
  std::uint64_t detaches_refused_ = 0;
  std::string detach_refusal_;
  std::string detach_sync_problem_;
  std::size_t buffers_reclaimed_ = 0;
  std::int64_t detach_ns_ = 0;
  std::int64_t attach_ns_ = 0;
  std::int64_t attach_subscribe_ns_ = 0;  // of attach_ns_: the subscription (CUPTI starting again) and its resource callbacks
  // Tracing in windows (evidence/trace_windows.hpp). paused_, the log and the toggle counts are
  // guarded by control_mutex_; the thread's wake-up by window_thread_mutex_, which is held
  // with no other kscope lock.
  bool paused_ = false;
  std::atomic<bool> tracing_{false};
  trace_window_log window_log_;
  std::uint64_t toggles_ = 0;
  std::int64_t toggle_ns_ = 0;
  std::int64_t stopped_at_ns_ = 0;
  std::mutex window_thread_mutex_;
  std::condition_variable window_wake_;
  bool window_thread_stop_ = false;
  trace_window_schedule window_schedule_;
  // Heap-held and leaked in a forked child (the thread is not there to join).
  std::thread* window_thread_ = nullptr;
  long window_thread_pid_ = 0;

  // Windows of steps (cupti_options::trace_steps): the policy is step_window_driver's
  // (evidence/trace_windows.hpp), fed from the hook at an outermost scope's close on the
  // program's threads (scope/detail/step_hook.hpp); the collector applies its toggles.
  void start_step_windows();
  void stop_step_windows() noexcept;
  static void on_outermost_close(node_id closed) noexcept;
  void apply_step_decision(const step_window_driver::decision& d, node_id closed) noexcept;
  // The windows so far (control_mutex_ held), with the steps the driver counted.
  trace_window_summary window_summary_locked() const {
    trace_window_summary w = window_log_.summary(running_.load(std::memory_order_acquire) ? detail::now_ns() : stopped_at_ns_);
    w.steps_closed = steps_.steps();
    return w;
  }
  std::string step_scope_text() const {
    return options_.step_scope.empty() ? std::string("the outermost scope found to repeat with GPU work")
                                       : "'" + options_.step_scope + "'";
  }
  step_window_driver steps_;

  void start_window_thread(trace_window_schedule schedule);
  void stop_window_thread() noexcept;
  void window_thread_main();
#if KSCOPE_HAS_CUPTI
  detail::cupti_api api_;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  std::vector<CUpti_ActivityKind> enabled_kinds_;
#endif
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool cupti_collector::running() const noexcept {
  return running_.load(std::memory_order_acquire);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL cupti_collector& cupti_collector::global() {
  // A fork never catches it half-built (core/detail/once.hpp).
  static detail::lazy_global<cupti_collector> instance{detail::lock_rank::init};
  return instance.get([] { return new cupti_collector(); });
}

KSCOPE_DECL bool cupti_collector::start(const cupti_options& options) {
  std::lock_guard<std::mutex> control(control_mutex_);
  if (state_ == cupti_state::running) return true;
  options_ = options;
  // The environment wins: a deployed binary can be lightened or given the full view.
  for (std::string& problem : apply_cupti_options_environment(options_)) add_warning(std::move(problem));
  ensure_attribution(options_.attribution);
  if (detail::parse_switch(std::getenv("KSCOPE_CUPTI")) == detail::switch_value::off) {
    return refuse(cupti_state::disabled, "CUPTI collection disabled (KSCOPE_CUPTI=0)");
  }
#if KSCOPE_HAS_CUPTI
  return start_cupti();
#else
  return refuse(cupti_state::disabled, "CUPTI unavailable: kscope was built without the CUDA toolkit's CUPTI headers");
#endif
}

KSCOPE_DECL bool cupti_collector::start_in_driver_initialization(const cupti_options& options) {
  {
    std::lock_guard<std::mutex> control(control_mutex_);
    if (state_ == cupti_state::running) return true;  // started already, where it was started
    in_driver_initialization_ = true;
  }
  const bool started = start(options);
  std::lock_guard<std::mutex> control(control_mutex_);
  in_driver_initialization_ = false;
  if (started) message_ += "; attached at the driver's start (CUDA injection)";
  return started;
}

KSCOPE_DECL void cupti_collector::flush(bool force) {
  std::lock_guard<std::mutex> control(control_mutex_);
  flush_locked(force);
}

KSCOPE_DECL void cupti_collector::stop() noexcept {
  stop_window_thread();  // first, without the control lock: the thread takes it to toggle
  try {
    std::lock_guard<std::mutex> control(control_mutex_);
    stop_locked();
  } catch (...) {
  }
}

KSCOPE_DECL bool cupti_collector::pause_tracing() {
  std::lock_guard<std::mutex> control(control_mutex_);
#if KSCOPE_HAS_CUPTI
  if (state_ == cupti_state::running && !paused_) window_log_.note_program_window();
  return pause_locked();
#else
  return false;
#endif
}

KSCOPE_DECL bool cupti_collector::resume_tracing() {
  std::lock_guard<std::mutex> control(control_mutex_);
#if KSCOPE_HAS_CUPTI
  return resume_locked();
#else
  return false;
#endif
}

KSCOPE_DECL bool cupti_collector::tracing() const noexcept { return tracing_.load(std::memory_order_acquire); }

KSCOPE_DECL trace_window_summary cupti_collector::trace_windows() const {
  std::lock_guard<std::mutex> control(control_mutex_);
  return window_summary_locked();
}

KSCOPE_DECL void cupti_collector::start_step_windows() {
  // control_mutex_ held: nothing here takes the recorder's lock (it ranks below); a named
  // step scope is matched by name at a close, on the program's thread.
  steps_.start(options_.trace_steps, options_.step_scope, detail::now_ns());
  window_log_.configure_steps(options_.trace_steps, options_.step_scope, /*found=*/false);
  detail::outermost_close_hook.store(&on_outermost_close, std::memory_order_release);
}

KSCOPE_DECL void cupti_collector::stop_step_windows() noexcept {
  if (!steps_.on()) return;
  steps_.stop();
  detail::outermost_close_hook.store(nullptr, std::memory_order_release);
}

// On the closing thread, after its record; no kscope lock held. A step between two window
// edges takes no lock; an edge takes the control lock once.
KSCOPE_DECL void cupti_collector::on_outermost_close(node_id closed) noexcept {
  cupti_collector& c = global();
  if (!c.steps_.on()) return;
  try {
    thread_local step_window_driver::thread_memory memory;
    detail::thread_state& ts = detail::this_thread_state();
    const step_window_driver::decision d =
        c.steps_.closed(closed, &ts, memory, ts.launches_seen, c.tracing_.load(std::memory_order_acquire),
                        detail::now_ns(), [](node_id n) { return recorder::global().node_name(n); });
    if (d.found || d.lost || d.change != step_window_driver::toggle::none) c.apply_step_decision(d, closed);
  } catch (...) {
  }
}

KSCOPE_DECL void cupti_collector::apply_step_decision(const step_window_driver::decision& d, node_id closed) noexcept {
  try {
    const std::string found = d.found ? recorder::global().node_name(closed) : std::string();  // before the control lock
    std::lock_guard<std::mutex> control(control_mutex_);
    if (!steps_.on() || steps_.generation() != d.generation) return;  // stopped, or started again, meanwhile
    if (d.found) window_log_.configure_steps(options_.trace_steps, found, /*found=*/true);
    if (d.lost) window_log_.configure_steps(options_.trace_steps, std::string(), /*found=*/true);
#if KSCOPE_HAS_CUPTI
    if (d.change == step_window_driver::toggle::resume) {
      (void)resume_locked();  // false where tracing already ran (the program resumed it)
      steps_.note_paused_by_steps(false);
    } else if (d.change == step_window_driver::toggle::pause && pause_locked()) {
      steps_.note_paused_by_steps(true);
    }
#endif
  } catch (...) {
  }
}

KSCOPE_DECL void cupti_collector::start_window_thread(trace_window_schedule schedule) {
#if KSCOPE_HAS_CUPTI
  stop_window_thread();  // an earlier start's (start() after stop() after start())
  {
    std::lock_guard<std::mutex> lock(window_thread_mutex_);
    window_thread_stop_ = false;
    window_schedule_ = schedule;
  }
  window_thread_pid_ = static_cast<long>(::getpid());
  // Every signal blocked in the thread but the faults it could raise itself (as the
  // metrics writer's thread, session/detail/metrics_writer.hpp): the program's handlers
  // run on its own threads.
  sigset_t all, previous;
  sigfillset(&all);
  for (int fault : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS}) sigdelset(&all, fault);
  const bool masked = pthread_sigmask(SIG_SETMASK, &all, &previous) == 0;
  try {
    window_thread_ = new std::thread([this] { window_thread_main(); });
  } catch (const std::exception& e) {
    window_thread_ = nullptr;
    add_warning(std::string("tracing in windows: no thread to pause and resume tracing (") + e.what() +
                "); every launch is traced");
  }
  if (masked) pthread_sigmask(SIG_SETMASK, &previous, nullptr);
#else
  (void)schedule;
#endif
}

KSCOPE_DECL void cupti_collector::stop_window_thread() noexcept {
#if KSCOPE_HAS_CUPTI
  if (window_thread_ == nullptr) return;
  if (window_thread_pid_ != static_cast<long>(::getpid())) {
    window_thread_ = nullptr;  // a forked child's copy names the parent's thread: leaked, never joined
    return;
  }
  {
    std::lock_guard<std::mutex> lock(window_thread_mutex_);
    window_thread_stop_ = true;
  }
  window_wake_.notify_all();
  try {
    window_thread_->join();
  } catch (...) {
  }
  delete window_thread_;
  window_thread_ = nullptr;
#endif
}

// Wakes at each boundary of the grid and sets tracing to what the grid says; a program's
// own pause or resume in between stands until the next boundary.
KSCOPE_DECL void cupti_collector::window_thread_main() {
  std::unique_lock<std::mutex> lock(window_thread_mutex_);
  while (!window_thread_stop_) {
    const bool traced = window_schedule_.traced_at(detail::now_ns());
    lock.unlock();
    {
      std::lock_guard<std::mutex> control(control_mutex_);
#if KSCOPE_HAS_CUPTI
      if (state_ == cupti_state::running) (void)(traced ? resume_locked() : pause_locked());
#else
      (void)traced;
#endif
    }
    lock.lock();
    const std::int64_t next = window_schedule_.next_change_after(detail::now_ns());
    if (next == INT64_MAX) break;
    const std::int64_t wait = next - detail::now_ns();
    if (wait > 0) window_wake_.wait_for(lock, std::chrono::nanoseconds(wait), [this] { return window_thread_stop_; });
  }
}

KSCOPE_DECL cupti_status cupti_collector::status() const {
  std::lock_guard<std::mutex> control(control_mutex_);
  return status_locked();
}

KSCOPE_DECL void cupti_collector::set_interval_sink(std::shared_ptr<kernel_interval_sink> sink) {
  std::lock_guard<std::mutex> lock(attribution_mutex_);
  interval_sink_ = std::move(sink);
  if (attribution_ != nullptr) attribution_->set_interval_sink(interval_sink_.get());
}

KSCOPE_DECL cupti_snapshot cupti_collector::snapshot(std::size_t top_kernel_limit) {
  cupti_snapshot s;
  trace_window_summary windows;
  std::uint64_t dropped = 0;
  {
    std::lock_guard<std::mutex> control(control_mutex_);
    s.status = status_locked();
    windows = window_summary_locked();
    // Said where every printer shows the collector's status: the kernel tables, the GPU-time
    // account and the diagnosis rest on these windows only.
    if (windows.windowed) {
      s.status.message += "; " + windows.describe() + ": kernel tables, GPU-time account and diagnosis from these";
      if (toggles_ > 0)
        s.status.message += " (" + std::to_string(toggles_) + " pauses and resumes took " +
                            std::to_string(toggle_ns_ / 1000) + " us in all)";
    }
#if KSCOPE_HAS_CUPTI
    s.status.message += detach_text_locked();
#endif
    const bool problem = state_ == cupti_state::disabled || state_ == cupti_state::unavailable ||
         state_ == cupti_state::owned_by_other_tool || state_ == cupti_state::failed;
    if (problem) s.warnings.push_back(s.status.message);  // with what remains (status_locked)
    for (const auto& w : warnings_) s.warnings.push_back(w);
    // Under the control lock, so that no detach comes between its check and the CUPTI call
    // (a CUPTI call while detached would attach CUPTI again); outside the attribution lock.
    dropped = read_dropped_by_cupti();
  }
  {
    std::lock_guard<std::mutex> lock(attribution_mutex_);
    gpu_attribution& a = attribution_locked();
    a.note_dropped_by_cupti(dropped);
    s.activity = a.report(top_kernel_limit);
  }
  s.activity.windows = std::move(windows);
  s.buffers_completed = buffers_completed_.load(std::memory_order_relaxed);
  s.buffers_denied = pool_.denied();
  s.callback_errors = callback_errors_.load(std::memory_order_relaxed);
  s.graph_node_errors = graph_node_errors_.load(std::memory_order_relaxed);
  s.attribution_cpu_ns = attribution_cpu_ns_.load(std::memory_order_relaxed);
  s.attribution_records = s.activity.counters.records_seen;
  const graph_replay_sampler::counts graphs = graph_sampler_.decisions();
  if (graphs.graph_level + graphs.node_level + graphs.unknown_graph > 0) {
    s.status.message += "; graph replays: " + std::to_string(graphs.node_level) + " sampled node by node, " +
        std::to_string(graphs.graph_level) + " as one record";
    if (graphs.unknown_graph > graphs.built_paused)
      s.status.message += ", " + std::to_string(graphs.unknown_graph - graphs.built_paused) +
          " node by node (graphs instantiated before the collector started)";
    if (graphs.built_paused > 0)
      s.status.message += ", " + std::to_string(graphs.built_paused) +
          " node by node (graphs instantiated while tracing was paused)";
  }
  if (s.attribution_records > 0) {
    // What watching costs kscope itself (CUPTI's own cost comes on top, in the launches).
    s.status.message += "; attribution: " + std::to_string(s.attribution_records) + " records in " +
        std::to_string(s.attribution_cpu_ns / 1000000) + " ms of CPU (" +
        std::to_string(s.attribution_cpu_ns / static_cast<std::int64_t>(s.attribution_records)) +
        " ns each)";
  }
  if (s.buffers_denied > 0) {
    s.warnings.push_back("CUPTI asked for an activity buffer " + std::to_string(s.buffers_denied) +
         " times while all " + std::to_string(pool_.buffer_count()) +
         " were in use (records dropped; raise cupti_options::buffer_count)");
  }
  if (s.callback_errors > 0) {
    s.warnings.push_back(std::to_string(s.callback_errors) +
         " errors inside CUPTI buffer callbacks (out of memory?); records lost");
  }
  if (s.graph_node_errors > 0) {
    s.warnings.push_back(std::to_string(s.graph_node_errors) +
         " CUDA graph nodes whose id CUPTI could not give (cuptiGetGraphNodeId): the scope "
         "that built them is unknown");
  }
  for (auto& w : s.activity.warnings) s.warnings.push_back(w);
  return s;
}

KSCOPE_DECL cupti_snapshot cupti_collector::report(std::size_t top_kernel_limit) {
  flush();
  return snapshot(top_kernel_limit);
}

KSCOPE_DECL void cupti_collector::reset() {
  {
    std::lock_guard<std::mutex> control(control_mutex_);
    window_log_.reset(detail::now_ns());  // the aggregates start afresh: so do the windows they rest on
  }
  std::lock_guard<std::mutex> lock(attribution_mutex_);
  attribution_locked().reset();
}

KSCOPE_DECL void cupti_collector::consume_buffer(std::uint8_t* buffer, std::size_t valid_bytes) {
  std::lock_guard<std::mutex> lock(attribution_mutex_);
  gpu_attribution& a = attribution_locked();
#if KSCOPE_HAS_CUPTI
  (void)detail::consume_activity_buffer(api_.loaded() ? &api_ : nullptr, buffer, valid_bytes, a,
                                        clock_offset_ns_.load(std::memory_order_relaxed));
#else
  (void)buffer;
  (void)valid_bytes;
  (void)a;
#endif
}

KSCOPE_DECL correlation_table& cupti_collector::launches() {
  std::lock_guard<std::mutex> lock(attribution_mutex_);
  return attribution_locked().launches();
}

KSCOPE_DECL graph_node_table& cupti_collector::graph_nodes() {
  std::lock_guard<std::mutex> lock(attribution_mutex_);
  return attribution_locked().graph_nodes();
}

KSCOPE_DECL cupti_collector::cupti_collector() {
  detail::guard_across_fork(control_mutex_, detail::lock_rank::collector_control);
  detail::guard_across_fork(attribution_mutex_, detail::lock_rank::collector_attribution);
  detail::guard_across_fork(graph_sampler_.lock_for_fork(), detail::lock_rank::graph_sampler);
  detail::guard_across_fork(graph_toggle_mutex_, detail::lock_rank::graph_toggle);
  detail::guard_across_fork(steps_.lock_for_fork(), detail::lock_rank::step_windows);
  detail::guard_across_fork(window_thread_mutex_, detail::lock_rank::collector_windows);
}

KSCOPE_DECL void cupti_collector::ensure_attribution(const attribution_options& options) {
  std::lock_guard<std::mutex> lock(attribution_mutex_);
  if (attribution_ == nullptr) {
    attribution_ = std::make_unique<gpu_attribution>(options);
    attribution_->set_interval_sink(interval_sink_.get());
  }
}

KSCOPE_DECL gpu_attribution& cupti_collector::attribution_locked() {
  if (attribution_ == nullptr) {
    attribution_ = std::make_unique<gpu_attribution>();
    attribution_->set_interval_sink(interval_sink_.get());
  }
  return *attribution_;
}

KSCOPE_DECL bool cupti_collector::refuse(cupti_state state, std::string message) {
  state_ = state;
  message_ = std::move(message);
  return false;
}

KSCOPE_DECL void cupti_collector::add_warning(std::string w) {
  for (const auto& existing : warnings_) {
    if (existing == w) return;
  }
  warnings_.push_back(std::move(w));
}

KSCOPE_DECL std::string cupti_collector::without_cupti() {
  const gpu_availability* gpu = probed_gpu();  // never probes itself
  if (gpu != nullptr && !gpu->available()) return "no usable GPU, so no GPU times";
  return "GPU times from CUDA events only";
}

KSCOPE_DECL cupti_status cupti_collector::status_locked() const {
  cupti_status s;
  s.state = state_;
  s.clock = clock_;
  s.message = message_;
  if (state_ == cupti_state::disabled || state_ == cupti_state::unavailable ||
      state_ == cupti_state::owned_by_other_tool || state_ == cupti_state::failed)
    s.message += "; " + without_cupti();
  s.pool_bytes = pool_.capacity_bytes();
  s.callbacks_enabled = callbacks_enabled_;
  s.graph_capture = graph_capture_enabled_;
#if KSCOPE_HAS_CUPTI
  s.library = api_.path;
  s.cupti_version = api_.version;
#endif
  return s;
}

KSCOPE_DECL std::uint64_t cupti_collector::read_dropped_by_cupti() noexcept {
#if KSCOPE_HAS_CUPTI
  // Not while detached: any CUPTI call attaches CUPTI again (the count died with it, read
  // at the detach's flush).
  if (running_.load(std::memory_order_acquire) && !detached_.load(std::memory_order_acquire) &&
      api_.activity_get_num_dropped_records != nullptr) {
    std::size_t dropped = 0;
    if (api_.activity_get_num_dropped_records(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped > 0) {
      dropped_by_cupti_.fetch_add(dropped, std::memory_order_relaxed);
    }
  }
#endif
  return dropped_by_cupti_.exchange(0, std::memory_order_relaxed);
}

KSCOPE_DECL void cupti_collector::flush_locked(bool force) {
#if KSCOPE_HAS_CUPTI
  if (running_.load(std::memory_order_acquire) && !detached_.load(std::memory_order_relaxed)) {  // detached: CUPTI holds nothing; a call would attach it
    // Delivers buffers through on_buffer_completed on this thread (attribution lock
    // taken there; only the control lock is held here).
    (void)api_.activity_flush_all(force ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
    if (clock_ == cupti_clock::offset) {
      clock_offset_ns_.store(measure_clock_offset(), std::memory_order_relaxed);
    }
  }
#else
  (void)force;
#endif
}

KSCOPE_DECL void cupti_collector::stop_locked() {
  if (state_ != cupti_state::running) return;
  stop_step_windows();
  flush_locked(true);
#if KSCOPE_HAS_CUPTI
  teardown();
#endif
  running_.store(false, std::memory_order_release);
  tracing_.store(false, std::memory_order_release);
  stopped_at_ns_ = detail::now_ns();
  window_log_.end(stopped_at_ns_);
#if KSCOPE_HAS_CUPTI
  detail::activity_tracing().store(false, std::memory_order_release);
#endif
  state_ = cupti_state::stopped;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
