// kscope/activity/options.hpp — how the CUPTI activity collector collects, and the
// same settings read from the environment (KSCOPE_CUPTI_OPTIONS).
//
// Pure C++ (no CUDA, no CUPTI): the CPU tests parse every option here.
//
//   kscope::cupti_options o;
//   o.graphs = kscope::graph_tracing::node;       // every graph node, every replay
//   kscope::cupti_collector::global().start(o);
//
//   KSCOPE_CUPTI_OPTIONS="graphs=sampled,graph_every=50,sync=0" ./engine
//
// The environment wins over the program's options, so a deployed binary can be switched
// to the full view (graphs=node) or lightened (sync=0) without a rebuild; a value that is
// not understood is named in one warning and the program's own value stays.
#pragma once

#include "attribution.hpp"
#include "../evidence/trace_windows.hpp"
#include "../core/detail/option_text.hpp"

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace kscope {

// How CUDA-graph replays are traced. CUPTI traces a graph either node by node (one record
// per kernel, copy and memset of every replay) or as one record per launch
// (CUPTI_ACTIVITY_KIND_GRAPH_TRACE). Node by node costs the GPU about as much as eager
// launches of the same kernels and slowed a graph-replayed decode step by ~15 % on an H200
// (bench/RESULTS.md); one record per launch costs nearly nothing but names no kernel.
enum class graph_tracing : std::uint8_t {
  // Each graph's first `graph_first` replays, then its `graph_first`+2nd, +4th, +8th, ...
  // below `graph_every`, then every `graph_every`-th are traced node by node
  // (graph_sampling.hpp says why), the others as one record; per-scope kernel counts and times of the
  // replays traced as one record are scaled from the node-level replays of the same graph,
  // and the report says from how many (node_gpu_activity::graph_replays*). The default.
  sampled,
  node,   // every replay node by node: exact kernel tables, the old cost
  graph,  // every replay as one record: GPU time per replay and scope, no kernel detail
};

[[nodiscard]] constexpr const char* to_string(graph_tracing g) noexcept {
  switch (g) {
    case graph_tracing::sampled: return "sampled";
    case graph_tracing::node: return "node";
    case graph_tracing::graph: return "graph";
  }
  return "unknown";
}

// How to collect. The defaults suit a long-running inference process.
//
//   kscope::cupti_options o;
//   o.buffer_count = 16;                                    // 128 MiB cap
//   o.collect_memset = false;
//   kscope::cupti_collector::global().start(o);
struct cupti_options {
  std::size_t buffer_bytes = std::size_t{8} << 20;  // per activity buffer
  std::size_t buffer_count = 8;                     // pool cap = buffer_bytes * buffer_count
  bool collect_memcpy = true;
  bool collect_memset = true;
  // Synchronization records: how long the host waited in stream / event / context
  // synchronizes, per scope (node_gpu_activity::host_sync); the diagnosis of a host that
  // blocks inside a step rests on them.
  bool collect_sync = true;
  // Also hook the driver-API launch calls (cuLaunchKernel(Ex), cuGraphLaunch, cuMemcpy*):
  // needed for cuBLAS / Triton / JIT launches. Off: runtime API only (one callback less
  // per <<<>>> launch; bench/cupti_overhead_bench.cu measures the difference). The graph
  // launch's driver callback stays on while graphs are sampled (it decides each replay).
  bool driver_api_callbacks = true;
  // Hook the runtime-API calls too. A runtime launch reaches the driver, whose callback
  // carries the same correlation id, so with the driver hooked the runtime hook only
  // doubles the callbacks per launch; off, launches that never reach a hooked driver call
  // would go unattributed (counted), which no CUDA 13 launch path was seen to do.
  bool runtime_api_callbacks = true;
  // CUDA-graph replays: see graph_tracing. Where the driver offers no graph-level trace,
  // graphs are traced node by node and the status says so.
  graph_tracing graphs = graph_tracing::sampled;
  std::uint32_t graph_first = 2;    // sampled: each graph's first replays traced per node
  std::uint32_t graph_every = 100;  // sampled: then every k-th replay (0: no more)
  std::uint32_t flush_period_ms = 0;  // > 0: cuptiActivityFlushPeriod; 0: CUPTI's heuristics
  // Tracing in windows (evidence/trace_windows.hpp): trace for windows.window_ms out of every
  // windows.period_ms, paused in between by a thread of the collector's. Off (0) by default:
  // every launch is traced. Windows on a timer also need window_thread (below): without it
  // the collector traces every launch and says why.
  trace_window_options windows{};
  // Lets the collector's own thread pause and resume tracing on the windows' grid. Off by
  // default, and the production preset leaves it off: on an H100 (driver 580, CUDA 13.0,
  // CUPTI 130001) a graph-replayed loop paused from that thread got kernel records carrying
  // one stale correlation id after the first pause (every kernel to one launch's scope, the
  // kernel totals 5.6 times the busy time), and a program that captured CUDA graphs while
  // paused crashed (SIGSEGV) in 4 runs of 4 (bench/RESULTS.md, "tracing in windows", session
  // 15). A program that pauses and resumes from its own launching thread between steps
  // (pause_tracing / resume_tracing) got every window's records right. On: for probes only.
  bool window_thread = false;
  // A pause also switches off the launch, copy, sync and graph-launch callbacks, so that a
  // launch between windows pays no callback of kscope's. On by default: on an H100 (driver
  // 580, CUPTI 130001), a program pausing between its steps from its launching thread got
  // every window's records right with them off (gpu_cupti_test's pause case, and
  // gpu_graph_truth_test's program_windows_quiet on a graph loop, session 16). Off keeps
  // them (a launch between windows pays two stores and makes no record): the stale
  // correlation ids seen with them off came from pauses on the collector's own thread
  // (window_thread), which was wrong with them kept too.
  bool pause_callbacks = true;
  // A pause also drops kscope's CUPTI subscription, and the resume takes it again with every
  // callback start() enabled: between windows CUPTI has no subscriber of kscope's at all. Off
  // by default: a probe of what a subscription costs a launch between windows (a paused
  // collector with only its callbacks off still cost a PyTorch op +3.7 us, bench/RESULTS.md,
  // session 15). Graphs built between windows are unseen, so traced node by node.
  bool pause_unsubscribe = false;
  // A pause also detaches CUPTI from the process (cuptiFinalize, at the exit of the next
  // CUDA call after the pause, as CUPTI's documentation asks), and the resume attaches it
  // again and enables all that start() enabled. Why: CUPTI attached after the program's CUDA
  // started and then switched off still cost a PyTorch op +2.7 us where a finalize left
  // +0.2 (bench/RESULTS.md, session 23); switching off is not enough. Detached, a torch op
  // between windows cost +0.05 us; each period pays a detach (~2 ms) and an attach (~5-7 ms)
  // on the thread that pauses and resumes, so periods of seconds suit it. Before it detaches,
  // the collector waits for the GPU (the current context and every active primary one) so
  // that no record of the window is still on its way, then flushes. It does not detach,
  // and keeps CUPTI attached and switched off as before, where a finalize would destroy what
  // others rely on: once per-scope counters, PM sampling or warp stalls have set CUPTI up in
  // this process, or once the program has used CUDA graphs (their node ids and the
  // graph-level trace live in CUPTI), or where CUPTI's graph-node callbacks are off (the GPU
  // wait would break a stream capture that nothing said had begun) or its graph-launch
  // callbacks are (graphs=node: a graph built unseen would be launched unnoticed); the
  // status says which, and how many pauses detached.
  bool pause_detach = false;
  // Tracing in windows of steps (evidence/trace_windows.hpp, step_window_options): trace
  // trace_steps.window_steps of every trace_steps.period_steps steps, paused and resumed by
  // the collector at a step's close, on the thread that runs the steps. A step is a call of
  // the outermost scope named step_scope (any outermost scope when empty) on the first thread
  // that closes one; outermost scopes of other threads are not steps. Off (0/0) by default;
  // KSCOPE_CUPTI_OPTIONS=trace_steps=1/100,step_scope=decode. Windows in time (`windows`)
  // are not used when these are set.
  step_window_options trace_steps{};
  std::string step_scope;
  // GPU timestamps put on kscope's clock by CUPTI calling kscope's clock (exact); off: CUPTI's
  // own clock plus an offset measured from paired samples at start (drifts by microseconds
  // over hours). A switch so that the overhead bench can tell whether the callback costs
  // anything per launch; it applies before the first start (CUPTI keeps it registered).
  bool timestamp_callback = true;
  std::string library_path;           // explicit libcupti (after $KSCOPE_CUPTI_LIBRARY)
  attribution_options attribution{};  // used by the first start() only
};

// Applies "key=value,key=value" (KSCOPE_CUPTI_OPTIONS) to `options`. Returns one line per
// item that was not understood, naming it and saying what kscope does instead (the
// option keeps its value); the other items apply. Keys:
//   memcpy, memset, sync,
//   driver_api, runtime_api            on/off (as KSCOPE_CUPTI: 1/0, on/off, true/false, ...)
//   graphs                             sampled | node | graph
//   graph_first, graph_every           whole numbers (0 .. 1000000)
//   buffer_mb                          MiB per activity buffer (1 .. 1024)
//   buffers                            activity buffers in the pool (1 .. 1024)
//   flush_ms                           cuptiActivityFlushPeriod in ms (0 .. 3600000; 0: CUPTI's)
//   window_ms, period_ms               tracing in windows, ms (0 .. 86400000; window_ms=0: always)
//   window_thread                      on/off: the collector's thread pauses and resumes (probes only)
//   pause_callbacks                    on/off: a pause switches the launch callbacks off too
//
//   std::vector<std::string> problems = kscope::apply_cupti_options_text("graphs=node,sync=0", o);
KSCOPE_DECL std::vector<std::string> apply_cupti_options_text(std::string_view text, cupti_options& options,
                                                         std::string_view source = "KSCOPE_CUPTI_OPTIONS");

// The options with $KSCOPE_CUPTI_OPTIONS applied (the collector's start() does this).
KSCOPE_DECL std::vector<std::string> apply_cupti_options_environment(cupti_options& options);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::vector<std::string> apply_cupti_options_text(std::string_view text, cupti_options& options,
                                                         std::string_view source) {
  std::vector<std::string> problems;
  const auto refuse = [&](std::string_view item, const char* expected) {
    problems.push_back(detail::option_refusal(source, item, expected));
  };
  detail::for_each_option(text, [&](std::string_view key, std::string_view value, std::string_view item) {
    if (key.empty()) {
      refuse(item, "expected key=value");
      return;
    }
    std::uint64_t n = 0;
    if (key == "memcpy" || key == "memset" || key == "sync" || key == "driver_api" || key == "runtime_api" ||
        key == "timestamp_callback" || key == "pause_callbacks" || key == "window_thread" ||
        key == "pause_unsubscribe" || key == "pause_detach") {
      bool& target = key == "memcpy"       ? options.collect_memcpy
                     : key == "memset"     ? options.collect_memset
                     : key == "sync"       ? options.collect_sync
                     : key == "driver_api" ? options.driver_api_callbacks
                     : key == "timestamp_callback" ? options.timestamp_callback
                     : key == "pause_callbacks" ? options.pause_callbacks
                     : key == "window_thread" ? options.window_thread
                     : key == "pause_unsubscribe" ? options.pause_unsubscribe
                     : key == "pause_detach" ? options.pause_detach
                                           : options.runtime_api_callbacks;
      if (!detail::parse_option_switch(value, target)) refuse(item, "on or off");
    } else if (key == "graphs") {
      if (value == "sampled") options.graphs = graph_tracing::sampled;
      else if (value == "node") options.graphs = graph_tracing::node;
      else if (value == "graph") options.graphs = graph_tracing::graph;
      else refuse(item, "sampled, node or graph");
    } else if (key == "graph_first" || key == "graph_every") {
      if (detail::parse_option_count(value, 0, 1000000, n))
        (key == "graph_first" ? options.graph_first : options.graph_every) = static_cast<std::uint32_t>(n);
      else
        refuse(item, "a whole number from 0 to 1000000");
    } else if (key == "buffer_mb") {
      if (detail::parse_option_count(value, 1, 1024, n)) options.buffer_bytes = static_cast<std::size_t>(n) << 20;
      else refuse(item, "MiB from 1 to 1024");
    } else if (key == "buffers") {
      if (detail::parse_option_count(value, 1, 1024, n)) options.buffer_count = static_cast<std::size_t>(n);
      else refuse(item, "a count from 1 to 1024");
    } else if (key == "flush_ms") {
      if (detail::parse_option_count(value, 0, 3600000, n)) options.flush_period_ms = static_cast<std::uint32_t>(n);
      else refuse(item, "milliseconds from 0 to 3600000");
    } else if (key == "window_ms" || key == "period_ms") {
      if (detail::parse_option_count(value, 0, 86400000, n))
        (key == "window_ms" ? options.windows.window_ms : options.windows.period_ms) = static_cast<std::uint32_t>(n);
      else
        refuse(item, "milliseconds from 0 to 86400000");
    } else if (key == "trace_steps") {
      // W/P: W steps traced of every P; 0/0 (or "off") traces every step.
      const std::size_t slash = value.find('/');
      std::uint64_t window = 0, period = 0;
      if (value == "off" || value == "0" || value == "0/0") {
        options.trace_steps = step_window_options{};
      } else if (slash != std::string_view::npos && detail::parse_option_count(value.substr(0, slash), 1, 1000000, window) &&
                 detail::parse_option_count(value.substr(slash + 1), 2, 1000000, period) && window < period) {
        options.trace_steps = step_window_options{static_cast<std::uint32_t>(window), static_cast<std::uint32_t>(period)};
      } else {
        refuse(item, "W/P, whole numbers with 0 < W < P <= 1000000, or off");
      }
    } else if (key == "step_scope") {
      options.step_scope = std::string(value);
    } else {
      refuse(item, "keys: memcpy, memset, sync, driver_api, runtime_api, timestamp_callback, graphs, graph_first, "
                   "graph_every, buffer_mb, buffers, flush_ms, window_ms, period_ms, window_thread, pause_callbacks, "
                   "pause_unsubscribe, pause_detach, trace_steps, step_scope");
    }
  });
  return problems;
}

KSCOPE_DECL std::vector<std::string> apply_cupti_options_environment(cupti_options& options) {
  const char* text = std::getenv("KSCOPE_CUPTI_OPTIONS");
  if (text == nullptr) return {};
  return apply_cupti_options_text(text, options);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
