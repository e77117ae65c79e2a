// kscope/session/session.hpp — the report of a run: what the scopes recorded, summarized,
// placed on the roofline, with the GPU activity CUPTI attributed to each scope.
//
//   KSCOPE_SCOPE("decode");                          // anywhere, any thread (scope.hpp)
//   auto r = kscope::session::global().report();      // later, off the hot path
//   std::fputs(r.text().c_str(), stdout);
//
// The session owns report assembly only. The data is the recorder's (scope/recorder.hpp),
// which scopes write to without knowing about reports; the GPU activity comes through a
// gpu_activity_source (the CUPTI collector by default, a fake in tests). report() takes a
// consistent copy of the recorder's data under the recorder's lock, then summarizes it
// (statistics, roofline, device description) with no lock held, so scopes closing on
// other threads never wait for a report being built.
#pragma once

#include "../core/config.hpp"
#include "../core/detail/clock.hpp"
#include "../core/detail/json_writer.hpp"
#include "../core/roofline.hpp"
#include "../core/stats.hpp"
#include "../activity/collector.hpp"
#include "live_metric_sampling.hpp"
#include "../counters/scope_counters.hpp"
#include "../device/device.hpp"
#include "../report/rank.hpp"
#include "../report/report.hpp"
#include "../report/trace.hpp"
#include "../verdict/scope_verdict.hpp"
#include "../scope/recorder.hpp"
#include "../scope/recorder_snapshot.hpp"
#include "../core/detail/once.hpp"
#include "../core/detail/utc_time.hpp"
#include "../scope/detail/switch_warnings.hpp"
#include "detail/advice.hpp"
#include "detail/context.hpp"
#include "detail/exit_report.hpp"
#include "detail/features.hpp"
#include "detail/metrics_writer.hpp"
#include "detail/window.hpp"
#include "feature.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#  include <unistd.h>
#endif

namespace kscope {

// Where the session gets per-scope GPU activity (kernels, copies, memsets) from. The
// default reads the process-wide CUPTI collector; tests hand the session a fake, so every
// step of report assembly that involves GPU activity runs on a CPU.
//
//   struct replay : kscope::gpu_activity_source { /* return a recorded snapshot */ };
//   kscope::session::global().set_gpu_activity_source(std::make_shared<replay>());
class gpu_activity_source {
 public:
  virtual ~gpu_activity_source() = default;
  // Starts collecting; false (with status().message saying why) when it cannot.
  virtual bool start(const cupti_options& options) = 0;
  // Delivers everything collected so far, so that snapshot() includes it. Called with no
  // kscope lock held.
  virtual void flush() = 0;
  // Per-node activity, the `top_kernel_limit` kernels by total time, counters, recent
  // events (for the trace) and warnings.
  [[nodiscard]] virtual cupti_snapshot snapshot(std::size_t top_kernel_limit) = 0;
  // Forgets the aggregates and events collected so far.
  virtual void reset() = 0;
  // state == cupti_state::not_started: never started, and the report leaves GPU
  // activity out entirely.
  [[nodiscard]] virtual cupti_status status() const = 0;
};

// The default source: the process-wide CUPTI collector (activity/collector.hpp).
//   kscope::session::global().set_gpu_activity_source(std::make_shared<kscope::cupti_activity_source>());
class cupti_activity_source final : public gpu_activity_source {
 public:
  KSCOPE_DECL bool start(const cupti_options& options) override;
  KSCOPE_DECL void flush() override;
  [[nodiscard]] KSCOPE_DECL cupti_snapshot snapshot(std::size_t top_kernel_limit) override;
  KSCOPE_DECL void reset() override;
  [[nodiscard]] KSCOPE_DECL cupti_status status() const override;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool cupti_activity_source::start(const cupti_options& options) { return cupti_collector::global().start(options); }

KSCOPE_DECL cupti_snapshot cupti_activity_source::snapshot(std::size_t top_kernel_limit) {
  return cupti_collector::global().snapshot(top_kernel_limit);
}

KSCOPE_DECL void cupti_activity_source::reset() { cupti_collector::global().reset(); }

KSCOPE_DECL cupti_status cupti_activity_source::status() const { return cupti_collector::global().status(); }
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void cupti_activity_source::flush() {
  cupti_collector& collector = cupti_collector::global();
  if (collector.running()) collector.flush();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The production preset: what an engine can leave on while it serves (bench/RESULTS.md
// measures its cost on examples/serving). Kept: every scope (host times, CUDA-event GPU
// times, NVTX ranges) and GPU-wide metrics sampled at a low rate (PM sampling, no replay)
// all the time; the activity collector on every launch (windows on its timer are off:
// activity/options.hpp, window_thread; a program may pause and resume it between steps),
// with exact attribution of every eager kernel, copy, memset and host wait, CUDA-graph
// replays traced as one record each with a few replays per graph traced node by node
// (per-scope GPU time and kernel tables scaled from those, and said to be).
// Given up: per-scope hardware counters (enable_counters), node-level detail of most graph
// replays, dense metric samples, records between windows (KSCOPE_CUPTI_OPTIONS=window_ms=0
// traces every launch again). For a profiling run take the full view instead:
// enable_cupti with cupti_options::graphs = graph_tracing::node (or
// KSCOPE_CUPTI_OPTIONS=graphs=node), enable_metric_sampling() at its default rate and
// enable_counters().
//
//   kscope::session::global().enable_production();       // or KSCOPE_PRODUCTION=1
struct production_options {
  cupti_options cupti;                   // the collector's defaults: graphs sampled
  bool metric_sampling = true;
  metric_sampling_options sampling;      // low rate: see production_preset()
  std::vector<std::string> step_scopes;  // scopes whose calls get sampled-metric distributions
};

// The preset's values: one PM sample per millisecond of GPU time, sampled in 50 ms windows
// while the decoder uses at most 5 % of one core (the default samples every 100 us and lets
// it use 25 %).
[[nodiscard]] KSCOPE_DECL production_options production_preset();

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL production_options production_preset() {
  production_options p;
  p.cupti.graphs = graph_tracing::sampled;
  // Every launch traced: windows on a timer are off until they are right on the GPU
  // (activity/options.hpp, window_thread).
  p.sampling.sampler.interval_ns = 1'000'000;
  p.sampling.sampler.window = std::chrono::milliseconds(50);
  p.sampling.sampler.max_decoder_share = 0.05;
  return p;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The process-wide session. Like the recorder it is created on first use and never
// destroyed, so a report can still be made from a static destructor.
class session {
 public:
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  [[nodiscard]] static session& global() noexcept;

  static constexpr std::size_t max_nodes = recorder::max_nodes;

  // ---- the recorder's switches, here because users have always found them here ---------
  // Run-time switch; also set by KSCOPE=0 in the environment. Disabled scopes cost a
  // load and a branch.
  void set_enabled(bool on) noexcept;
  [[nodiscard]] bool enabled() const noexcept;
  // NVTX ranges for scopes (on by default; with no tool attached they cost ~1 ns).
  void set_nvtx(bool on) noexcept;
  // Samples kept per node and series before the reservoir takes over (default 10 000).
  // Applies to nodes' series created after the call, and to all after reset().
  void set_sample_cap(std::size_t cap) noexcept;
  [[nodiscard]] std::size_t sample_cap() noexcept;
  // Host intervals kept for the trace (default 65 536, the most recent; the report warns
  // how many older ones were overwritten). Starts the trace afresh.
  void set_trace_capacity(std::size_t intervals);

  // ---- reports --------------------------------------------------------------------------
  // Builds the report: flushes the GPU activity source, waits for the CUDA events of
  // every scope closed so far, copies the recorder's data and summarizes each node.
  // Scopes still open are not included. KSCOPE_REPORT=path in the environment writes it
  // when the program exits (detail/exit_report.hpp).
  [[nodiscard]] session_report report();
  // The report as live metrics in the OpenMetrics text format (report/openmetrics.hpp,
  // docs/openmetrics.md), for a /metrics endpoint; KSCOPE_METRICS=path writes it to a file
  // every KSCOPE_METRICS_INTERVAL seconds.
  //   http_reply(kscope::session::global().openmetrics());
  [[nodiscard]] std::string openmetrics();

  // What happened since the previous window() (or since the start, or reset()): per-scope
  // calls, host and GPU-event percentiles, totals and tag counts of that interval alone,
  // its start, end and length (report_window), and the GPU's busy share over it when the
  // activity collector runs (else why not). The call-path tree, the run totals report()
  // reads, the trace and the KSCOPE_METRICS file (cumulative, as Prometheus counters must
  // be) are not touched. A scope still open when a window is taken is counted in the window
  // in which it closes, with its whole time. Memory stays bounded however many windows are
  // taken (recorder::set_window_sample_cap / set_window_sample_budget). The per-scope
  // CUPTI tables, top kernels, sampled metrics and counters are the run's and left out:
  // report() has them. Every printer works on it; its JSON says "window" (since/until).
  //   for (;;) { sleep(10); publish(kscope::session::global().window().json()); }
  [[nodiscard]] session_report window();

  // Forgets all samples, tags, trace intervals, warnings and GPU activity (node ids stay
  // valid: call sites cache them).
  void reset() noexcept;

  // The peaks roofline placements use. Without a call, the first report reads the
  // theoretical roofs of device 0 (device.hpp's table); hand it measure_peaks() results
  // to place scopes against the measured roofs as well:
  //   kscope::session::global().set_peaks(kscope::measure_peaks());
  void set_peaks(device_peaks peaks);

  // Starts the CUPTI collector (cupti.hpp): every kernel, copy and memset is then
  // attributed to the scope open on the launching thread, and report() adds the per-scope
  // GPU activity and the top-kernels table. Costs about a microsecond per launch. Returns
  // false (with one warning in the report) when CUPTI is missing, owned by another tool
  // (ncu, nsys), or disabled with KSCOPE_CUPTI=0; scopes then keep their CUDA-event times.
  // KSCOPE_CUPTI=1 in the environment starts it before main (see the end of this header).
  //   kscope::session::global().enable_cupti();
  bool enable_cupti(const cupti_options& options = {});

  // The production preset (production_options says what it keeps and gives up): the
  // collector, then metric sampling at a low rate. True when the collector runs; a sampler
  // that cannot start says why in the report and the rest keeps working.
  //   kscope::session::global().enable_production();
  bool enable_production(const production_options& options = production_preset());

  // Samples GPU-wide hardware counters while the program runs (CUPTI PM sampling: no
  // replay, no serialization; pm_sampling/sampler.hpp) and shares each sample among the
  // scopes whose kernels ran during it (session/live_metric_sampling.hpp). The report then has a
  // "GPU metrics sampled while running" section: per scope SM %, DRAM %, tensor-pipe %,
  // warps, clock and DRAM bytes, with a verdict from them, and per step scope (the names in
  // `step_scopes`) the p50 / p90 over calls. Starts the CUPTI collector too when it is not
  // running (the kernels' scopes come from it). Returns false, with the one-line reason
  // in the report's warnings, when sampling is unavailable (no permission to the GPU
  // counters, Nsight or another sampler attached, CUDA older than 12.6, ...); everything
  // else keeps working. KSCOPE_METRIC_SAMPLING=1 in the environment does the same with
  // the defaults before main.
  //   kscope::session::global().enable_metric_sampling();
  bool enable_metric_sampling(const metric_sampling_options& options = {},
                              std::vector<std::string> step_scopes = {});
  // Stops sampling; what was sampled stays in later reports.
  void disable_metric_sampling();

  // Hardware counters per scope (counters/scope_counters.hpp): each step's first calls and
  // then every k-th are profiled (a whole step as one range-profiler session, each kernel
  // counted in the scope that launched it); the report then has a "Hardware
  // counters per scope" section (measured DRAM bytes and FLOPs per call, speed-of-light
  // throughputs, the measured roofline point, the verdict with its evidence) and counts
  // the profiled calls, whose times stay out of every statistic. False, with the reason
  // in the report, when counters cannot run here. KSCOPE_COUNTERS=1 does the same.
  //   kscope::session::global().enable_counters();
  bool enable_counters(const scope_counter_options& options = {});
  void disable_counters() noexcept;

  // Replaces where GPU activity comes from (nullptr: the CUPTI collector again). The
  // session keeps the source alive while a report uses it.
  void set_gpu_activity_source(std::shared_ptr<gpu_activity_source> source);

  // Writes a Chrome trace / Perfetto JSON file (trace.hpp): the most recent host scope
  // intervals per thread (up to the trace capacity), and the GPU records the activity
  // source kept, on one time base, with arrows from each scope to the kernels it
  // launched. False (and `error`, when given) if the file cannot be written.
  //   kscope::session::global().write_trace("run.trace.json");
  bool write_trace(const std::string& path, std::string* error = nullptr);

  // A warning shown once in the report (deduplicated), e.g. from the CUPTI collector.
  void warn(std::string message);

  // Registers a feature (session/feature.hpp): every later report asks it for its section,
  // write_trace() for its tracks. One with the same name() is replaced; nullptr is ignored.
  // enable_metric_sampling() and enable_counters() register the built-in ones.
  void add_feature(std::shared_ptr<session_feature> feature);
  // The registered feature called `name`, or nullptr.
  [[nodiscard]] std::shared_ptr<session_feature> find_feature(const std::string& name);
  // Unregisters it: later reports have no section from it. False when none is registered.
  bool remove_feature(const std::string& name);

  // KSCOPE_COUNTERS=1: enable_counters() with the defaults (whole steps; the step scope
  // named by KSCOPE_COUNTERS_STEP, else each thread's outermost scope), before main;
  // =calls: each scope's calls profiled on their own; =kernel: with kernel replay (every
  // metric in each profiled call, at kernel replay's cost).
  bool start_counters_from_environment();

  // KSCOPE_PRODUCTION=1: enable_production() before main (with KSCOPE_CUPTI_OPTIONS applied
  // to its collector, as to any).
  bool start_production_from_environment();

  // KSCOPE_METRIC_SAMPLING=1: enable_metric_sampling() with the defaults, before main.
  bool start_metric_sampling_from_environment();

  // KSCOPE_CUPTI=1: starts GPU activity collection as if enable_cupti() had been called.
  // Returns whether it started. Run once before main by the variable below.
  bool start_cupti_from_environment();

 private:
  session();

  std::shared_ptr<gpu_activity_source> gpu_source();
  // The peaks to place scopes against: set_peaks()'s, else device 0's theoretical ones.
  std::optional<device_peaks> peaks_for_report(bool have_device);
  // The start report() and window() share, in two steps because each takes its copies in
  // its own order. First the activity source's snapshot (none when it never started, with
  // whether there is a GPU asked before any status is read: CUPTI's line then says "no GPU
  // times" rather than "CUDA events only"), flushed first with no kscope lock held: CUPTI
  // delivers its buffers through callbacks that must not wait on one.
  cupti_snapshot read_gpu_activity(std::size_t top_kernel_limit, session_report& out);
  // Then, with the recorder's copy taken: the context (host, devices, roofs), the sample
  // cap and the warnings (the session's, the recorder's, the environment's, the source's).
  // `window`: `data` is one window's (recorder::take_window()). Returns the peaks to place
  // the scopes against.
  std::optional<device_peaks> begin_report(session_report& out, const recorder_snapshot& data,
                                           const cupti_snapshot& gpu, bool window);

  std::mutex mutex_;  // guards the members below; never held while calling out
  std::vector<std::string> warnings_;
  device_peaks peaks_;
  bool have_peaks_ = false;
  std::shared_ptr<gpu_activity_source> source_;
  // In registration order: GPU-time accounting (always), then what was enabled.
  std::vector<std::shared_ptr<session_feature>> features_;
  // The last window's end, in ticks and in the ns it was reported with (window()).
  std::int64_t window_edge_ticks_ = -1;
  std::int64_t window_edge_ns_ = 0;
  std::shared_ptr<detail::pm_sampling_feature> sampling_feature();  // created on first use
  std::vector<std::shared_ptr<session_feature>> features_copy();
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void session::set_enabled(bool on) noexcept { recorder::global().set_enabled(on); }

KSCOPE_DECL bool session::enabled() const noexcept { return recorder::global().enabled(); }

KSCOPE_DECL void session::set_nvtx(bool on) noexcept { recorder::global().set_nvtx(on); }

KSCOPE_DECL void session::set_sample_cap(std::size_t cap) noexcept { recorder::global().set_sample_cap(cap); }

KSCOPE_DECL std::size_t session::sample_cap() noexcept { return recorder::global().sample_cap(); }

KSCOPE_DECL void session::set_trace_capacity(std::size_t intervals) { recorder::global().set_trace_capacity(intervals); }

KSCOPE_DECL void session::disable_counters() noexcept { scope_counter_sampler::global().stop(); }
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL session& session::global() noexcept {
  // A fork never catches it half-built (core/detail/once.hpp). Leaked on purpose (above).
  static detail::lazy_global<session> instance{detail::lock_rank::init};
  return instance.get([] { return new session(); });
}

KSCOPE_DECL void session::set_peaks(device_peaks peaks) {
  std::lock_guard<std::mutex> lock(mutex_);
  peaks_ = std::move(peaks);
  have_peaks_ = true;
}

KSCOPE_DECL bool session::enable_cupti(const cupti_options& options) {
  const std::shared_ptr<gpu_activity_source> source = gpu_source();
  const bool ok = source->start(options);
  // A source that tried has a state, and the report prints its status line (with what
  // remains, known only at report time); a copy taken now would be said twice.
  if (!ok && source->status().state == cupti_state::not_started) warn(source->status().message);
  return ok;
}

KSCOPE_DECL bool session::enable_production(const production_options& options) {
  const bool collecting = enable_cupti(options.cupti);
  if (options.metric_sampling) (void)enable_metric_sampling(options.sampling, options.step_scopes);
  return collecting;
}

KSCOPE_DECL bool session::enable_counters(const scope_counter_options& options) {
  scope_counter_sampler& sampler = scope_counter_sampler::global();
  const bool ok = sampler.start(options);
  if (!ok) warn(sampler.snapshot().status);
  if (find_feature("counters") == nullptr) add_feature(std::make_shared<detail::counters_feature>());
  return ok;
}

KSCOPE_DECL void session::set_gpu_activity_source(std::shared_ptr<gpu_activity_source> source) {
  if (!source) source = std::make_shared<cupti_activity_source>();
  std::lock_guard<std::mutex> lock(mutex_);
  source_ = std::move(source);
}

KSCOPE_DECL void session::warn(std::string message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (std::find(warnings_.begin(), warnings_.end(), message) == warnings_.end())
    warnings_.push_back(std::move(message));
}

KSCOPE_DECL bool session::start_counters_from_environment() {
  const char* v = std::getenv("KSCOPE_COUNTERS");
  scope_counter_options o;
  if (const char* step = std::getenv("KSCOPE_COUNTERS_STEP")) o.step_scope = step;
  if (v != nullptr && detail::equals_word(v, "kernel")) {
    o.kernel_replay = true;
    return enable_counters(o);
  }
  if (v != nullptr && detail::equals_word(v, "calls")) {
    o.whole_steps = false;
    return enable_counters(o);
  }
  if (v != nullptr && detail::equals_word(v, "scopes")) {
    o.ranges_per_scope = true;
    return enable_counters(o);
  }
  switch (detail::parse_switch(v)) {
    case detail::switch_value::on: return enable_counters(o);
    case detail::switch_value::unrecognised:
      warn(detail::switch_warning("KSCOPE_COUNTERS", v,
                                  "per-scope counters not started (KSCOPE_COUNTERS=1 profiles whole steps, =scopes whole "
                                  "steps one range per scope stretch, =calls each scope's calls on their own, =kernel "
                                  "with kernel replay)"));
      return false;
    default: return false;
  }
}

KSCOPE_DECL bool session::start_production_from_environment() {
  const char* v = std::getenv("KSCOPE_PRODUCTION");
  switch (detail::parse_switch(v)) {
    case detail::switch_value::on: return enable_production();
    case detail::switch_value::unrecognised:
      warn(detail::switch_warning("KSCOPE_PRODUCTION", v,
                                  "the production preset not started (KSCOPE_PRODUCTION=1 starts it)"));
      return false;
    default: return false;
  }
}

KSCOPE_DECL bool session::start_metric_sampling_from_environment() {
  const char* v = std::getenv("KSCOPE_METRIC_SAMPLING");
  switch (detail::parse_switch(v)) {
    case detail::switch_value::on: return enable_metric_sampling();
    case detail::switch_value::unrecognised:
      warn(detail::switch_warning("KSCOPE_METRIC_SAMPLING", v,
                                  "metric sampling not started (KSCOPE_METRIC_SAMPLING=1 starts it)"));
      return false;
    default: return false;
  }
}

KSCOPE_DECL bool session::start_cupti_from_environment() {
  const char* v = std::getenv("KSCOPE_CUPTI");
  switch (detail::parse_switch(v)) {
    case detail::switch_value::on: return enable_cupti();
    case detail::switch_value::unrecognised:
      warn(detail::switch_warning("KSCOPE_CUPTI", v, "CUPTI not started (KSCOPE_CUPTI=1 starts it)"));
      return false;
    default: return false;
  }
}

KSCOPE_DECL session::session()
    : source_(std::make_shared<cupti_activity_source>()),
      features_{std::make_shared<detail::gpu_time_feature>()} {
  detail::guard_across_fork(mutex_, detail::lock_rank::session);
}

KSCOPE_DECL std::shared_ptr<gpu_activity_source> session::gpu_source() {
  std::lock_guard<std::mutex> lock(mutex_);
  return source_;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// ---- implementation ------------------------------------------------------------------

namespace detail {

// Where and when the report was taken: host, process, time, devices, rank.
KSCOPE_DECL void fill_host_context(report_context& context);

// A path joins names with '/', so a '/' inside a name is written "\/" (and a '\' as "\\"):
// a top-level scope "a/b" and scope "b" under "a" must never share a path, or merge and
// compare would add them up.
KSCOPE_DECL std::string escape_path_part(const std::string& name);

// Summarizes the recorder's data (no lock held: `data` is the session's own copy) into
// out.scopes, depth-first with children in creation order, and adds the GPU activity of
// each node. Nodes with nothing in their subtree are left out.
KSCOPE_DECL void summarize_scopes(const recorder_snapshot& data, const gpu_activity_report& activity,
                             const tick_map& clock, const device_peaks* peaks, session_report& out);

KSCOPE_DECL void add_unique(std::vector<std::string>& lines, const std::string& line);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void fill_host_context(report_context& context) {
  char host[256] = {0};
#if defined(__unix__) || defined(__APPLE__)
  if (gethostname(host, sizeof host - 1) == 0) context.host_name = host;
  context.process_id = static_cast<long long>(getpid());
#endif
  // Not gmtime_r: its libc lock, held by a thread a fork leaves behind, hangs the child.
  context.timestamp_utc = utc_timestamp_text(std::time(nullptr));
  describe_devices(context);
  if (const std::optional<int> rank = current_rank()) context.rank = *rank;
  if (!context.devices.empty()) {
    // Theoretical roofs of every device, so a multi-GPU report can be read per device.
    std::string peaks;
    json_writer w(peaks);
    w.begin_array();
    for (std::size_t d = 0; d < context.devices.size(); ++d)
      write_json(w, theoretical_peaks(query_device(static_cast<int>(d))));
    w.end_array();
    context.peaks_json = std::move(peaks);
  }
}

KSCOPE_DECL std::string escape_path_part(const std::string& name) {
  if (name.find_first_of("/\\") == std::string::npos) return name;
  std::string out;
  out.reserve(name.size() + 4);
  for (char c : name) {
    if (c == '/' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

KSCOPE_DECL void summarize_scopes(const recorder_snapshot& data, const gpu_activity_report& activity,
                             const tick_map& clock, const device_peaks* peaks, session_report& out) {
  const std::vector<recorded_node>& nodes = data.nodes;
  std::vector<char> listed(nodes.size(), 0);
  for (std::size_t id = nodes.size(); id-- > 1;) {
    if (nodes[id].calls > 0 || nodes[id].profiled_calls > 0 || activity.find(static_cast<node_id>(id))) listed[id] = 1;
    if (listed[id]) listed[nodes[id].parent] = 1;
  }
  std::vector<double> host_ns;
  std::vector<std::pair<node_id, std::string>> stack;
  const auto& top = nodes[root_node].children;
  for (auto it = top.rbegin(); it != top.rend(); ++it) stack.emplace_back(*it, std::string());
  while (!stack.empty()) {
    const node_id id = stack.back().first;
    const std::string parent_path = std::move(stack.back().second);
    stack.pop_back();
    if (!listed[id]) continue;
    const recorded_node& n = nodes[id];
    scope_report s;
    s.id = id;
    s.parent = n.parent;
    s.name = n.name;
    s.path = parent_path.empty() ? escape_path_part(n.name) : parent_path + "/" + escape_path_part(n.name);
    s.depth = n.depth;
    s.cross_thread = n.cross_thread;
    s.calls = n.calls;
    s.profiled_calls = n.profiled_calls;
    stats_options options;
    // Warm-up detection needs the samples in call order and enough of them; a phase
    // that ran a handful of times is summarized whole.
    options.detect_warmup = n.calls >= 10 && !n.host_ticks.saturated();
    // A cross-thread range ("request", "ttft") is a population of latencies, not a
    // measurement settling to a steady state: its slow first instances are part of the
    // distribution users read p99 from, so none is dropped as warm-up.
    if (n.cross_thread) options.detect_warmup = false;
    host_ns.assign(n.host_ticks.samples().begin(), n.host_ticks.samples().end());
    for (double& v : host_ns) v = clock.duration_ns(v);
    s.host_ns = summarize(host_ns, options);
    s.host_inclusive_ns = clock.duration_ns(n.host_total_ticks);
    double children_ticks = 0;
    for (node_id c : n.children)
      if (!nodes[c].cross_thread) children_ticks += nodes[c].host_total_ticks;
    s.host_exclusive_ns = clock.duration_ns(n.host_total_ticks - children_ticks);
    if (n.parent != root_node && nodes[n.parent].host_total_ticks > 0)
      s.share_of_parent = n.host_total_ticks / nodes[n.parent].host_total_ticks;
    s.gpu_calls = n.gpu_ns.count();
    if (s.gpu_calls) {
      stats_options gpu_options;
      gpu_options.detect_warmup = s.gpu_calls >= 10 && !n.gpu_ns.saturated();
      s.gpu_ns = summarize(n.gpu_ns.samples(), gpu_options);
    }
    s.gpu_total_ns = n.gpu_total_ns;
    s.declared = work{n.flops, n.bytes};
    s.work_calls = n.work_calls;
    s.samples_kept = n.host_ticks.samples().size();
    s.samples_capped = n.host_ticks.saturated();
    for (const recorded_tag& t : n.tags) s.tags.push_back(tag_count{t.key, t.value, t.count});
    if (n.host_ticks.saturated()) {  // the reservoir's extremes are exact over all calls
      s.host_ns.min = clock.duration_ns(n.host_ticks.min());
      s.host_ns.max = clock.duration_ns(n.host_ticks.max());
    }
    // Activity first: an impossible placement's likely cause depends on whether CUPTI
    // saw the scope's kernels.
    if (const node_gpu_activity* a = activity.find(id)) s.gpu_activity = *a;
    if (peaks) place_scope(s, *peaks);
    out.scopes.push_back(std::move(s));
    for (auto it = n.children.rbegin(); it != n.children.rend(); ++it)
      stack.emplace_back(*it, out.scopes.back().path);
  }
  // Work launched with no scope open is reported too, never dropped.
  if (const node_gpu_activity* a = activity.find(unscoped_node)) {
    scope_report s;
    s.id = unscoped_node;
    s.name = s.path = unscoped_node_name;
    s.depth = 1;
    s.gpu_activity = *a;
    out.scopes.push_back(std::move(s));
  }
}

KSCOPE_DECL void add_unique(std::vector<std::string>& lines, const std::string& line) {
  if (std::find(lines.begin(), lines.end(), line) == lines.end()) lines.push_back(line);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::optional<device_peaks> session::peaks_for_report(bool have_device) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (have_peaks_) return peaks_.device.present ? std::optional<device_peaks>(peaks_) : std::nullopt;
  }
  if (!have_device) return std::nullopt;
  device_peaks theoretical = theoretical_peaks(query_device(0));  // outside the lock: a CUDA query
  std::lock_guard<std::mutex> lock(mutex_);
  if (!have_peaks_) {  // set_peaks() may have run meanwhile: its peaks win
    peaks_ = std::move(theoretical);
    have_peaks_ = true;
  }
  return peaks_.device.present ? std::optional<device_peaks>(peaks_) : std::nullopt;
}

KSCOPE_DECL cupti_snapshot session::read_gpu_activity(std::size_t top_kernel_limit, session_report& out) {
  (void)probe_gpu();  // a cached CUDA query, made for the context anyway
  const std::shared_ptr<gpu_activity_source> source = gpu_source();
  cupti_snapshot gpu;
  if (source->status().state != cupti_state::not_started) {
    source->flush();
    gpu = source->snapshot(top_kernel_limit);
    out.cupti_status = gpu.status.message;
    out.trace_windows = gpu.activity.windows;
  }
  return gpu;
}

KSCOPE_DECL std::optional<device_peaks> session::begin_report(session_report& out, const recorder_snapshot& data,
                                                              const cupti_snapshot& gpu, bool window) {
  detail::fill_host_context(out.context);
  std::optional<device_peaks> peaks = peaks_for_report(!out.context.devices.empty());
  if (peaks) {
    out.context.roofs = detail::describe_roofs(*peaks);
    out.context.roof_lines = roof_lines(*peaks);
  }
  out.sample_cap = data.sample_cap;
  out.gpu_timing_skipped = data.gpu_timing_skipped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    out.warnings = warnings_;
  }
  for (const std::string& w : data.warnings) detail::add_unique(out.warnings, w);
  if (std::string w = detail::environment_warning(); !w.empty()) detail::add_unique(out.warnings, w);
  if (data.gpu_event_errors)
    out.warnings.push_back(std::to_string(data.gpu_event_errors) + " GPU scope timings were lost to CUDA event errors" +
                           (window ? " in this window" : ""));
  // The trace ring is the run's: a window's gpu_time says how much of it the window used.
  if (data.trace_overwritten && !window)
    out.warnings.push_back(std::to_string(data.trace_overwritten) +
                           " older host intervals were overwritten (the trace keeps the most recent " +
                           std::to_string(data.trace_capacity) + "; session::set_trace_capacity raises it)");
  for (const std::string& w : gpu.warnings) detail::add_unique(out.warnings, w);
  return peaks;
}

KSCOPE_DECL session_report session::report() {
  session_report out;
  // The scopes' GPU work settled first, then CUPTI flushed: a flush delivers only the
  // records of work that has ended, and a program that reports (or exits) right after
  // launching would otherwise lose its last kernels (seen at exit on an H100: a step scope
  // with no kernels at all).
  recorder& rec = recorder::global();
  rec.settle_gpu();
  const cupti_snapshot gpu = read_gpu_activity(50, out);
  out.top_kernels = gpu.activity.top_kernels;
  out.cupti_counters = gpu.activity.counters;
  // Step 1 of every feature (session/feature.hpp), before the recorder is copied. The
  // collector was flushed above: kernels that ended before now are attributed.
  const std::vector<std::shared_ptr<session_feature>> features = features_copy();
  std::vector<std::unique_ptr<feature_section>> sections;
  sections.reserve(features.size());
  std::vector<std::string> feature_failures;  // added once begin_report() has set the warnings
  const std::int64_t now = detail::now_ns();
  for (const std::shared_ptr<session_feature>& f : features) {
    // A feature that throws loses its own section, never the report.
    std::string failure;
    try {
      sections.push_back(f->snapshot(now));
    } catch (const std::exception& e) {
      failure = e.what();
    } catch (...) {
      failure = "not a std::exception";
    }
    if (!failure.empty()) {
      sections.emplace_back();
      feature_failures.push_back(std::string("feature ") + f->name() + ": no section in this report (" + failure + ")");
    }
  }
  const recorder_snapshot data = rec.snapshot();  // the one step under the recorder's lock
  const detail::tick_map clock = detail::calibrate_ticks();
  const std::optional<device_peaks> peaks = begin_report(out, data, gpu, /*window=*/false);
  out.warnings.insert(out.warnings.end(), feature_failures.begin(), feature_failures.end());

  detail::summarize_scopes(data, gpu.activity, clock, peaks ? &*peaks : nullptr, out);
  // Each scope's time against its kernels, and advice from that evidence. CUPTI stopped
  // after collecting still gave a timeline of what it saw.
  const bool timeline = gpu.status.state == cupti_state::running || gpu.status.state == cupti_state::stopped;
  detail::reconcile_and_advise(out, gpu.activity, peaks ? &*peaks : nullptr, timeline);
  // Step 2: each feature's section, from what it took and the evidence every feature reads.
  report_evidence evidence;
  evidence.scopes = &data;
  evidence.activity = &gpu.activity;
  evidence.clock = &clock;
  evidence.peaks = peaks ? &*peaks : nullptr;
  evidence.timeline = timeline;
  for (std::size_t i = 0; i < sections.size(); ++i) {
    if (!sections[i]) continue;
    // What it added before it threw is taken back: its sections and its scopes' evidence.
    const std::size_t sections_before = out.sections.size();
    std::vector<std::size_t> evidence_before(out.scopes.size());
    for (std::size_t s = 0; s < out.scopes.size(); ++s) evidence_before[s] = out.scopes[s].feature_evidence.size();
    std::string failure;
    try {
      sections[i]->add_to(out, evidence);
    } catch (const std::exception& e) {
      failure = e.what();
    } catch (...) {
      failure = "not a std::exception";
    }
    if (failure.empty()) continue;
    if (out.sections.size() > sections_before) out.sections.resize(sections_before);
    for (std::size_t s = 0; s < out.scopes.size() && s < evidence_before.size(); ++s)
      if (out.scopes[s].feature_evidence.size() > evidence_before[s])
        out.scopes[s].feature_evidence.resize(evidence_before[s]);
    out.warnings.push_back(std::string("feature ") + features[i]->name() + ": its section could not be added (" +
                           failure + ")");
  }
  // An untagged scope whose kernels ran on the tensor pipe is placed under a tensor roof.
  if (peaks) detail::place_by_evidence(out, *peaks);
  // Declared bytes above the DRAM roof that the counters measured as less traffic: cache.
  if (peaks) detail::explain_cache_reuse(out, *peaks);
  // One verdict per scope from all of it (verdict/scope_verdict.hpp).
  decide_verdicts(out);
  return out;
}

KSCOPE_DECL session_report session::window() {
  session_report out;
  recorder& rec = recorder::global();
  // GPU times of the scopes closed so far are read in the window they closed in.
  rec.settle_gpu();
  const recorder_window taken = rec.take_window();  // the cut: one hold of the recorder's lock
  // After the cut: the ring then has every GPU event that ended before it.
  const cupti_snapshot gpu = read_gpu_activity(0, out);
  const detail::tick_map clock = detail::calibrate_ticks();
  const std::optional<device_peaks> peaks = begin_report(out, taken.data, gpu, /*window=*/true);
  // The scopes' CUPTI aggregates are the run's: a window's scopes carry none.
  const gpu_activity_report no_activity;
  detail::summarize_scopes(taken.data, no_activity, clock, peaks ? &*peaks : nullptr, out);
  detail::reconcile_and_advise(out, no_activity, peaks ? &*peaks : nullptr, false);
  // Each calibration maps ticks to ns a little differently: the previous window's end, in
  // the ns it was reported with, is this one's start, so consecutive windows tile the run.
  std::int64_t since_ns = clock.to_ns(taken.since_ticks);
  const std::int64_t until_ns = clock.to_ns(taken.until_ticks);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (taken.since_ticks == window_edge_ticks_) since_ns = window_edge_ns_;
    window_edge_ticks_ = taken.until_ticks;
    window_edge_ns_ = std::max(since_ns, until_ns);
  }
  const bool collecting = gpu.status.state == cupti_state::running;
  detail::add_window(out, taken, since_ns, until_ns, gpu.activity, collecting,
                     collecting ? rec.trace_snapshot() : recorder_trace{}, clock);
  decide_verdicts(out);
  return out;
}

KSCOPE_DECL std::string session::openmetrics() { return kscope::openmetrics(report()); }

KSCOPE_DECL bool session::enable_metric_sampling(const metric_sampling_options& options,
                                            std::vector<std::string> step_scopes) {
  const std::shared_ptr<live_metric_sampling> live = sampling_feature()->sampling();
  // The scopes of the sampled kernels come from the activity collector.
  if (gpu_source()->status().state == cupti_state::not_started) (void)enable_cupti();
  cupti_collector::global().set_interval_sink(live);
  metric_sampling_options o = options;
  for (std::string& problem : apply_metric_sampler_options_environment(o.sampler)) warn(std::move(problem));
  if (!step_scopes.empty()) {
    // Before each fold, the calls of the step scopes that closed since the last one (from
    // the recorder's trace ring: the most recent trace_capacity intervals).
    struct step_feed {
      std::mutex mutex;
      std::vector<std::string> names;
      std::int64_t last_end_ns = 0;
    };
    auto feed = std::make_shared<step_feed>();
    feed->names = std::move(step_scopes);
    o.before_fold = [feed](live_metric_sampling& target) {
      std::lock_guard<std::mutex> lock(feed->mutex);
      const recorder_trace trace = recorder::global().trace_snapshot();
      const detail::tick_map clock = detail::calibrate_ticks();
      std::int64_t newest = feed->last_end_ns;
      for (const recorded_interval& e : trace.intervals) {
        if (e.node >= trace.names.size()) continue;
        if (std::find(feed->names.begin(), feed->names.end(), trace.names[e.node]) == feed->names.end()) continue;
        const std::int64_t end = clock.to_ns(e.end_ticks);
        if (end <= feed->last_end_ns) continue;
        target.add_step_call(static_cast<sampled_node>(e.node), clock.to_ns(e.start_ticks), end);
        newest = std::max(newest, end);
      }
      feed->last_end_ns = newest;
    };
  }
  const bool ok = live->start(o);
  if (!ok) warn(live->status().message);
  return ok;
}

KSCOPE_DECL void session::disable_metric_sampling() {
  const auto f = std::dynamic_pointer_cast<detail::pm_sampling_feature>(find_feature("pm_sampling"));
  if (f) f->sampling()->stop();
}

KSCOPE_DECL void session::add_feature(std::shared_ptr<session_feature> feature) {
  if (!feature) return;
  std::lock_guard<std::mutex> lock(mutex_);
  for (std::shared_ptr<session_feature>& f : features_) {
    if (std::strcmp(f->name(), feature->name()) == 0) {
      f = std::move(feature);
      return;
    }
  }
  features_.push_back(std::move(feature));
}

KSCOPE_DECL std::shared_ptr<session_feature> session::find_feature(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::shared_ptr<session_feature>& f : features_)
    if (name == f->name()) return f;
  return nullptr;
}

KSCOPE_DECL bool session::remove_feature(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = features_.begin(); it != features_.end(); ++it) {
    if (name == (*it)->name()) {
      features_.erase(it);
      return true;
    }
  }
  return false;
}

KSCOPE_DECL std::shared_ptr<detail::pm_sampling_feature> session::sampling_feature() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::shared_ptr<session_feature>& f : features_)
    if (auto pm = std::dynamic_pointer_cast<detail::pm_sampling_feature>(f)) return pm;
  auto pm = std::make_shared<detail::pm_sampling_feature>();
  features_.push_back(pm);
  return pm;
}

KSCOPE_DECL std::vector<std::shared_ptr<session_feature>> session::features_copy() {
  std::lock_guard<std::mutex> lock(mutex_);
  return features_;
}

KSCOPE_DECL bool session::write_trace(const std::string& path, std::string* error) {
  const std::shared_ptr<gpu_activity_source> source = gpu_source();
  cupti_snapshot gpu;
  if (source->status().state != cupti_state::not_started) {
    source->flush();
    gpu = source->snapshot(0);
  }
  const recorder_trace trace = recorder::global().trace_snapshot();
  const detail::tick_map clock = detail::calibrate_ticks();
  std::vector<host_interval> host;
  host.reserve(trace.intervals.size());
  for (const recorded_interval& e : trace.intervals)
    host.push_back(host_interval{trace.names[e.node], e.node, e.thread_index, clock.to_ns(e.start_ticks),
                                 clock.to_ns(e.end_ticks)});
  trace_options options;
  // Each feature's tracks beside the kernels (sampled GPU metrics as counters).
  for (const std::shared_ptr<session_feature>& f : features_copy()) f->add_trace_tracks(options, detail::now_ns());
  // Rank, pid, host and clock base, and the name of each GPU in the trace (a CUDA query
  // each, on this cold path), for the trace's metadata and a later merge of ranks.
  options.process = this_trace_process();
  std::vector<std::string>& device_names = options.process->device_names;
  std::vector<bool> asked;
  for (const gpu_activity_event& e : gpu.activity.recent) {
    if (e.device >= 64 || (e.device < asked.size() && asked[e.device])) continue;
    if (e.device >= asked.size()) {
      asked.resize(e.device + 1);
      device_names.resize(e.device + 1);
    }
    asked[e.device] = true;
    const device_info info = query_device(static_cast<int>(e.device));
    if (info.present) device_names[e.device] = info.name;
  }
  return write_chrome_trace(path, host, gpu.activity.recent, options, error);
}

KSCOPE_DECL void session::reset() noexcept {
  try {
    const std::shared_ptr<gpu_activity_source> source = gpu_source();
    if (source->status().state != cupti_state::not_started) {
      source->flush();
      source->reset();
    }
  } catch (...) {
  }
  recorder::global().reset();
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    warnings_.clear();
  } catch (...) {
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

namespace detail {
// KSCOPE_NO_ENVIRONMENT_START (defined for a file): this file starts nothing from the
// environment. Each file that includes this header initializes the inline variables below
// before main, and so compiles the session, every feature and every printer they reach (a
// header-only file that includes kscope.hpp and opens one scope: 30 s of g++ -O1, 8.6 s
// without them; bench/RESULTS.md). One file of the program without the macro is enough for
// KSCOPE_CUPTI=1, KSCOPE_REPORT=path and the other switches to work with no code change; a
// program whose files all define it starts features itself.
#if !defined(KSCOPE_NO_ENVIRONMENT_START)
// KSCOPE_PRODUCTION=1 first: it starts the collector with its options, which a plain
// KSCOPE_CUPTI=1 after it then finds running.
inline const bool production_started_from_environment = session::global().start_production_from_environment();
// KSCOPE_CUPTI=1 must collect from the first kernel on, with no code change. Scopes no
// longer touch the session (scope.hpp stays light), so nothing on their path could start
// it; this variable's initializer does, before main, in every program that includes this
// header — which every program that makes a report does. An inline variable is
// initialized once per program however many files include it.
inline const bool cupti_started_from_environment = session::global().start_cupti_from_environment();
// KSCOPE_COUNTERS=1 likewise.
inline const bool counters_started_from_environment = session::global().start_counters_from_environment();
// KSCOPE_METRIC_SAMPLING=1 likewise (after the collector, which it would start anyway).
inline const bool metric_sampling_started_from_environment =
    session::global().start_metric_sampling_from_environment();
// KSCOPE_METRICS=path likewise, after them: its first file then shows what they started.
inline const bool metrics_started_from_environment =
    start_metrics_from_environment([] { return session::global().openmetrics(); });
#endif  // !KSCOPE_NO_ENVIRONMENT_START

// session::global().report() as a plain function, for the exit report.
KSCOPE_DECL session_report global_session_report();

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL session_report global_session_report() { return session::global().report(); }
#endif  // KSCOPE_DETAIL_DEFINITIONS

// KSCOPE_REPORT=path: the report written when the program exits (detail/exit_report.hpp).
// Last: its exit handler then runs before those of what the switches above started (the
// collector's, the metrics writer's).
#if !defined(KSCOPE_NO_ENVIRONMENT_START)
inline const bool exit_report_registered_from_environment =
    register_exit_report(std::getenv(exit_report_variable), &global_session_report);
#endif  // !KSCOPE_NO_ENVIRONMENT_START
}  // namespace detail

}  // namespace kscope
