// The session report as JSON (parsed back field by field) and report formatting helpers.
#include <kscope/scope/scope.hpp>
#include <kscope/session/session.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

namespace session_test {  // one per file: the unit tests build as one program

TEST_CASE("the JSON report parses back with every field") {
  auto& session = kscope::session::global();
  session.reset();
  for (int i = 0; i < 12; ++i) {
    KSCOPE_SCOPE("j_outer");
    kscope::scope inner{"j_inner \"quoted\"\n"};
    inner.set_work({100.0, 50.0});
    inner.tag("shape", "4x4");
  }
  session.warn("a test warning");
  const kscope::session_report r = session.report();
  const auto doc = nlohmann::json::parse(r.json());

  CHECK(doc["schema"] == "kscope.report/2");
  const auto& ctx = doc["context"];
  CHECK(ctx["kscope_version"] == KSCOPE_VERSION_STRING);
  CHECK(ctx["timestamp_utc"].get<std::string>().size() == 20);
  CHECK(ctx["process_id"].get<long long>() > 0);
  CHECK(ctx["cuda_compiled"].get<bool>() == (KSCOPE_HAS_CUDA != 0));
  CHECK(doc["sample_cap"] == 10000);
  REQUIRE(doc["warnings"].size() == 1);
  CHECK(doc["warnings"][0] == "a test warning");

  const auto& scopes = doc["scopes"];
  REQUIRE(scopes.size() == 2);
  const auto& outer = scopes[0];
  const auto& inner = scopes[1];
  CHECK(outer["name"] == "j_outer");
  CHECK(outer["path"] == "j_outer");
  CHECK(outer["depth"] == 1);
  CHECK(outer["calls"] == 12);
  CHECK(outer["cross_thread"] == false);
  CHECK(outer["gpu_calls"] == 0);
  CHECK(outer["gpu_ns"].is_null());
  CHECK(inner["name"] == "j_inner \"quoted\"\n");
  CHECK(inner["path"] == "j_outer/j_inner \"quoted\"\n");
  CHECK(inner["parent"] == outer["id"]);
  CHECK(inner["depth"] == 2);

  const kscope::scope_report& native = r.scopes[1];
  const auto& host = inner["host_ns"];
  CHECK(host["n"] == native.host_ns.n);
  CHECK(host["warmup"] == native.host_ns.warmup);
  CHECK(host["median"].get<double>() == doctest::Approx(native.host_ns.median));
  CHECK(host["mean"].get<double>() == doctest::Approx(native.host_ns.mean));
  CHECK(host["min"].get<double>() == doctest::Approx(native.host_ns.min));
  CHECK(host["max"].get<double>() == doctest::Approx(native.host_ns.max));
  CHECK(host["p90"].get<double>() == doctest::Approx(native.host_ns.p90));
  CHECK(host["median_ci"]["level"].get<double>() == doctest::Approx(0.95));
  CHECK(host["steady"].get<bool>() == native.host_ns.steady);
  CHECK(host["outliers"] == native.host_ns.outliers);
  CHECK(inner["declared_work"]["flops"].get<double>() == doctest::Approx(1200.0));
  CHECK(inner["declared_work"]["bytes"].get<double>() == doctest::Approx(600.0));
  CHECK(inner["declared_work"]["calls"] == 12);
  CHECK(inner["host_inclusive_ns"].get<double>() == doctest::Approx(native.host_inclusive_ns));
  CHECK(inner["share_of_parent"].get<double>() == doctest::Approx(native.share_of_parent));
  CHECK(outer["share_of_parent"].is_null());  // top level: no parent scope
  REQUIRE(inner["tags"].size() == 1);
  CHECK(inner["tags"][0]["key"] == "shape");
  CHECK(inner["tags"][0]["value"] == "4x4");
  CHECK(inner["tags"][0]["count"] == 12);
  CHECK(inner["samples_kept"] == 12);
  CHECK(inner["samples_capped"] == false);
}

TEST_CASE("write_json writes the document and reports failure without throwing") {
  auto& session = kscope::session::global();
  session.reset();
  { KSCOPE_SCOPE("w_phase"); }
  const auto r = session.report();
  const std::string path = "kscope_session_test.json";
  REQUIRE(r.write_json(path));
  std::FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE(f);
  std::string content;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) content.append(buf, n);
  std::fclose(f);
  std::remove(path.c_str());
  CHECK(nlohmann::json::parse(content)["scopes"][0]["name"] == "w_phase");
  CHECK_FALSE(r.write_json("/nonexistent-directory/x.json"));
}

TEST_CASE("an empty session reports no scopes, in text and JSON") {
  auto& session = kscope::session::global();
  session.reset();
  const auto r = session.report();
  CHECK(r.scopes.empty());
  CHECK(r.text().find("(no scopes recorded)") != std::string::npos);
  CHECK(nlohmann::json::parse(r.json())["scopes"].empty());
}

TEST_CASE("duration formatting picks a unit and three significant digits") {
  using kscope::detail::format_duration_ns;
  CHECK(format_duration_ns(812) == "812 ns");
  CHECK(format_duration_ns(1234) == "1.23 us");
  CHECK(format_duration_ns(45600000) == "45.6 ms");
  CHECK(format_duration_ns(2.5e9) == "2.50 s");
  CHECK(format_duration_ns(std::nan("")) == "-");
}

TEST_CASE("the JSON writer escapes control characters and writes non-finite numbers as null") {
  std::string out;
  kscope::detail::json_writer w(out);
  w.begin_object().member("s", std::string("a\x01\"b\\")).member("nan", std::nan("")).member("x", 0.1).end_object();
  const auto doc = nlohmann::json::parse(out);
  CHECK(doc["s"] == "a\x01\"b\\");
  CHECK(doc["nan"].is_null());
  CHECK(doc["x"].get<double>() == 0.1);
}

namespace {
kscope::device_info h200_like() {
  kscope::device_info d;
  d.present = true;
  d.name = "test H200";
  d.cc_major = 9;
  d.cc_minor = 0;
  d.sm_count = 132;
  d.sm_clock_khz = 1980000;
  d.memory_clock_khz = 3201000;
  d.memory_bus_width_bits = 6016;
  return d;
}
}  // namespace

TEST_CASE("scopes with declared work are placed on the roofline of their dtype") {
  const kscope::device_peaks peaks = kscope::theoretical_peaks(h200_like());
  const double bw = peaks.theoretical_bytes_per_s;  // 4.81e12
  CHECK(bw == doctest::Approx(3201000e3 * 6016 / 8 * 2));

  // A copy-like scope: 1 GB per call in 0.25 ms GPU median -> 4e12 B/s, memory-bound.
  kscope::scope_report copy;
  copy.name = copy.path = "copy";
  copy.depth = 1;
  copy.calls = copy.work_calls = copy.gpu_calls = 10;
  copy.declared = {10 * 0.25e9, 10 * 1e9};
  copy.gpu_ns.median = 0.25e6;
  copy.gpu_ns.median_ci = {0.24e6, 0.26e6, 0.95};
  kscope::detail::place_scope(copy, peaks);
  REQUIRE(copy.roofline);
  CHECK(copy.roof == "fp32 plain");
  CHECK(copy.roofline->bytes_per_s == doctest::Approx(4e12));
  CHECK(copy.roofline->limiter == kscope::bound::memory);
  CHECK(copy.roofline->fraction_of_roof == doctest::Approx(4e12 / bw));
  // The rate interval is the time interval transformed: [work / t_hi, work / t_lo].
  CHECK(copy.flops_per_s_ci.lo == doctest::Approx(0.25e9 / 0.26e-3));
  CHECK(copy.flops_per_s_ci.hi == doctest::Approx(0.25e9 / 0.24e-3));
  CHECK(std::isnan(copy.fraction_of_measured_roof));

  // A bf16 GEMM tagged with its dtype is placed under the bf16 tensor roof.
  kscope::scope_report gemm;
  gemm.name = gemm.path = "gemm";
  gemm.calls = gemm.work_calls = gemm.gpu_calls = 1;
  const double n = 8192;
  gemm.declared = {2 * n * n * n, 3 * 2 * n * n};
  gemm.gpu_ns.median = 1.4e6;
  gemm.tags.push_back({"dtype", "bf16", 1});
  kscope::detail::place_scope(gemm, peaks);
  REQUIRE(gemm.roofline);
  CHECK(gemm.roof == "bf16 tensor");
  CHECK(gemm.roofline->limiter == kscope::bound::compute);
  const double bf16_peak = peaks.find(kscope::data_type::bf16, kscope::core_kind::tensor)->theoretical_flops_per_s;
  CHECK(gemm.roofline->fraction_of_roof == doctest::Approx(2 * n * n * n / 1.4e-3 / bf16_peak));

  // Measured peaks add the fraction of the measured roof.
  kscope::device_peaks measured = peaks;
  measured.measured_bytes_per_s = 4.2e12;
  kscope::detail::place_scope(copy, measured);
  CHECK(copy.fraction_of_measured_roof == doctest::Approx(4e12 / 4.2e12));

  // No work declared, or no time: no placement.
  kscope::scope_report idle;
  idle.calls = 3;
  kscope::detail::place_scope(idle, peaks);
  CHECK_FALSE(idle.roofline);

  // The text report shows the roofline table, and each placed scope's verdict (declared
  // work decides where nothing was measured) with its advice.
  kscope::session_report r;
  r.scopes = {copy, gemm};
  kscope::decide_verdicts(r);
  const std::string text = r.text();
  CHECK(text.find("roofline (median call)") != std::string::npos);
  CHECK(text.find("copy: memory-bound") != std::string::npos);
  CHECK(text.find("bf16 tensor") != std::string::npos);
  const auto doc = nlohmann::json::parse(r.json());
  CHECK(doc["scopes"][0]["verdict"]["class"] == "memory-bound");
  CHECK(doc["scopes"][0]["verdict"]["source"] == "declared work");
  CHECK(doc["scopes"][1]["verdict"]["class"] == "compute-bound");
  CHECK(doc["scopes"][1]["roofline"]["roof"] == "bf16 tensor");
  CHECK(doc["scopes"][0]["roofline"]["fraction_of_measured_roof"].get<double>() == doctest::Approx(4e12 / 4.2e12));
}

TEST_CASE("a dtype tag kscope does not know falls back to fp32 plain cores") {
  const kscope::device_peaks peaks = kscope::theoretical_peaks(h200_like());
  kscope::scope_report s;
  s.calls = s.work_calls = 1;
  s.declared = {1e9, 1e6};
  s.host_ns.median = 1e6;
  s.tags.push_back({"dtype", "complex128", 1});
  kscope::detail::place_scope(s, peaks);
  REQUIRE(s.roofline);
  CHECK(s.roof == "fp32 plain");
}

namespace {

// A GPU activity source that returns what the test put in it, and counts the calls.
struct fake_gpu_source final : kscope::gpu_activity_source {
  kscope::cupti_snapshot data;
  int starts = 0, flushes = 0, snapshots = 0, resets = 0;

  bool start(const kscope::cupti_options&) override {
    ++starts;
    data.status.state = kscope::cupti_state::running;
    return true;
  }
  void flush() override { ++flushes; }
  kscope::cupti_snapshot snapshot(std::size_t top_kernel_limit) override {
    ++snapshots;
    kscope::cupti_snapshot s = data;
    if (s.activity.top_kernels.size() > top_kernel_limit) s.activity.top_kernels.resize(top_kernel_limit);
    return s;
  }
  void reset() override {
    ++resets;
    data.activity = kscope::gpu_activity_report{};
    data.warnings.clear();
  }
  kscope::cupti_status status() const override { return data.status; }
};

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("GPU activity from an injected source lands on its scopes in the report and trace") {
  auto& session = kscope::session::global();
  auto fake = std::make_shared<fake_gpu_source>();
  session.set_gpu_activity_source(fake);
  session.reset();
  CHECK(fake->resets == 0);  // not started: nothing to forget
  REQUIRE(session.enable_cupti());
  CHECK(fake->starts == 1);

  kscope::node_id decode = 0;
  std::int64_t launched_ns = 0;
  for (int i = 0; i < 3; ++i) {
    kscope::scope s{"fk_decode"};
    decode = s.node();
    launched_ns = kscope::detail::now_ns();
  }
  kscope::node_gpu_activity decode_activity;
  decode_activity.kernel_count = 7;
  decode_activity.busy_ns = 12345;
  kscope::node_gpu_activity unscoped_activity;
  unscoped_activity.kernel_count = 2;
  fake->data.status.message = "fake source: 9 kernels";
  fake->data.activity.nodes = {{kscope::unscoped_node, unscoped_activity}, {decode, decode_activity}};
  kscope::kernel_summary gemm;
  gemm.name = gemm.mangled_name = "fake_gemm";
  gemm.calls = 7;
  fake->data.activity.top_kernels = {gemm};
  fake->data.activity.counters.kernel_records = 9;
  kscope::gpu_activity_event event;
  event.node = decode;
  event.name = "fake_gemm";
  event.start_ns = launched_ns;
  event.end_ns = launched_ns + 1000;
  fake->data.activity.recent = {event};
  fake->data.warnings = {"a fake source warning"};

  const kscope::session_report r = session.report();
  CHECK(fake->flushes >= 1);
  CHECK(fake->snapshots >= 1);
  const kscope::scope_report* s = r.find("fk_decode");
  REQUIRE(s);
  CHECK(s->calls == 3);
  REQUIRE(s->gpu_activity);
  CHECK(s->gpu_activity->kernel_count == 7);
  CHECK(s->gpu_activity->busy_ns == 12345);
  const kscope::scope_report* unscoped = r.find(kscope::unscoped_node_name);
  REQUIRE(unscoped);
  REQUIRE(unscoped->gpu_activity);
  CHECK(unscoped->gpu_activity->kernel_count == 2);
  CHECK(r.cupti_status == "fake source: 9 kernels");
  REQUIRE(r.top_kernels.size() == 1);
  CHECK(r.top_kernels[0].name == "fake_gemm");
  CHECK(r.cupti_counters.kernel_records == 9);
  CHECK(std::find(r.warnings.begin(), r.warnings.end(), "a fake source warning") != r.warnings.end());

  const std::string path = "kscope_session_fake_source.trace.json";
  std::string why;
  REQUIRE_MESSAGE(session.write_trace(path, &why), why);
  const auto trace = nlohmann::json::parse(slurp(path));
  std::remove(path.c_str());
  int host_events = 0, gpu_events = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e["pid"] == kscope::trace_host_pid(kscope::this_trace_process())) ++host_events;
    else if (e["name"] == "fake_gemm") ++gpu_events;
  }
  CHECK(host_events == 3);
  CHECK(gpu_events == 1);

  session.reset();  // a started source is flushed and reset with the session
  CHECK(fake->resets == 1);
  CHECK(session.report().find(kscope::unscoped_node_name) == nullptr);

  session.set_gpu_activity_source(nullptr);  // back to the CUPTI collector, never started here
  CHECK(session.report().cupti_status.empty());
  session.reset();
}

TEST_CASE("host intervals pushed out of the trace ring are reported, not silently lost") {
  auto& session = kscope::session::global();
  session.set_trace_capacity(10);
  session.reset();
  for (int i = 0; i < 25; ++i) { KSCOPE_SCOPE("ov_step"); }
  const kscope::session_report r = session.report();
  bool warned = false;
  for (const std::string& w : r.warnings) warned = warned || w.find("15 older host intervals were overwritten") == 0;
  CHECK_MESSAGE(warned, r.text());
  CHECK(r.find("ov_step")->calls == 25);  // the summaries keep every call

  const std::string path = "kscope_session_overwritten.trace.json";
  REQUIRE(session.write_trace(path));
  const auto trace = nlohmann::json::parse(slurp(path));
  std::remove(path.c_str());
  int host_events = 0;
  const std::int64_t host_pid = kscope::trace_host_pid(kscope::this_trace_process());
  for (const auto& e : trace["traceEvents"]) host_events += e["ph"] == "X" && e["pid"] == host_pid;
  CHECK(host_events == 10);

  session.set_trace_capacity(65536);
  session.reset();
  { KSCOPE_SCOPE("ov_step"); }
  for (const std::string& w : session.report().warnings) CHECK(w.find("overwritten") == std::string::npos);
}

// report() accounts the GPU's time from the trace ring and the source's recent events, and
// lists cross-thread ranges as requests (summarized whole: no warm-up dropped).
TEST_CASE("the report accounts GPU time per call and lists requests") {
  auto& session = kscope::session::global();
  auto fake = std::make_shared<fake_gpu_source>();
  session.set_gpu_activity_source(fake);
  session.reset();
  REQUIRE(session.enable_cupti());

  kscope::node_id step = 0, decode = 0;
  std::vector<std::pair<std::int64_t, std::int64_t>> decode_calls;
  for (int i = 0; i < 4; ++i) {
    kscope::range request = kscope::start_range("gt_request");
    kscope::scope s{"gt_step"};
    step = s.node();
    kscope::scope d{"gt_decode"};
    decode = d.node();
    const std::int64_t start = kscope::detail::now_ns();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    decode_calls.emplace_back(start, kscope::detail::now_ns());
  }
  // This thread's index, as the trace ring recorded it.
  const kscope::recorder_trace ring = kscope::recorder::global().trace_snapshot();
  std::uint32_t thread = 0;
  for (const kscope::recorded_interval& e : ring.intervals)
    if (e.node == decode) thread = e.thread_index;
  kscope::node_gpu_activity decode_activity;
  decode_activity.kernel_count = 8;
  decode_activity.kernel_ns = decode_activity.busy_ns = 8 * 20000;
  fake->data.activity.nodes = {{decode, decode_activity}};
  fake->data.activity.recent.clear();
  for (const auto& [start, end] : decode_calls) {
    // Two kernels per decode call, 20 us each, 40 us apart: gap 20 us.
    for (int k = 0; k < 2; ++k) {
      kscope::gpu_activity_event e;
      e.node = decode;
      e.thread_index = thread;
      e.name = "gt_kernel";
      e.start_ns = start + 10000 + k * 40000;
      e.end_ns = e.start_ns + 20000;
      fake->data.activity.recent.push_back(e);
    }
  }
  const kscope::session_report r = session.report();
  REQUIRE(r.gpu_time);
  const kscope::gpu_time_report& t = *r.gpu_time;
  CHECK(t.gpu_events == 8);
  CHECK(t.gpu_events_unmatched == 0);
  CHECK(t.busy_ns == doctest::Approx(8 * 20000));
  CHECK(t.busy_share > 0);
  CHECK(t.busy_share < 1);
  const kscope::scope_gpu_time* d = t.find(decode);
  REQUIRE(d != nullptr);
  CHECK(d->calls_seen == 4);
  CHECK(d->kernels_per_call == doctest::Approx(2));
  CHECK(d->busy_per_call_ns.median == doctest::Approx(40000));
  CHECK(d->gaps_per_call_ns.median == doctest::Approx(20000));
  CHECK(d->share_of_gpu == doctest::Approx(1));
  const kscope::scope_gpu_time* s = t.find(step);
  REQUIRE(s != nullptr);
  CHECK(s->kernels_per_call == doctest::Approx(2));  // its child's kernels count for it
  CHECK(r.text().find("GPU time (CUPTI)") != std::string::npos);

  const kscope::scope_report* request = r.find("gt_request");
  REQUIRE(request != nullptr);
  CHECK(request->cross_thread);
  CHECK(request->host_ns.warmup == 0);
  const std::string text = r.text();
  CHECK_MESSAGE(text.find("Requests (cross-thread ranges)") != std::string::npos, text);
  const auto doc = nlohmann::json::parse(r.json());
  REQUIRE(doc["requests"].size() == 1);
  CHECK(doc["requests"][0]["path"] == "gt_request");
  CHECK(doc["requests"][0]["count"] == 4);
  CHECK(doc["requests"][0]["p50_ns"].get<double>() == doctest::Approx(request->host_ns.median));
  CHECK(doc["gpu_time"]["gpu_events"] == 8);

  session.set_gpu_activity_source(nullptr);
  session.reset();
}

// Tracing in windows through the session: a source that traced one window, over the first
// two of four calls, gives a report whose GPU account, per-call figures, JSON and text rest
// on that window alone, and say so.
TEST_CASE("traced in windows: the report's account, per-call figures, JSON and text rest on the windows") {
  auto& session = kscope::session::global();
  auto fake = std::make_shared<fake_gpu_source>();
  session.set_gpu_activity_source(fake);
  session.reset();
  REQUIRE(session.enable_cupti());

  kscope::node_id decode = 0;
  std::vector<std::pair<std::int64_t, std::int64_t>> decode_calls;
  for (int i = 0; i < 4; ++i) {
    kscope::scope s{"tw_step"};
    kscope::scope d{"tw_decode"};
    decode = d.node();
    const std::int64_t start = kscope::detail::now_ns();
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    decode_calls.emplace_back(start, kscope::detail::now_ns());
  }
  const kscope::recorder_trace ring = kscope::recorder::global().trace_snapshot();
  std::uint32_t thread = 0;
  for (const kscope::recorded_interval& e : ring.intervals)
    if (e.node == decode) thread = e.thread_index;
  // The window: the first two calls. Only their kernels were traced: two per call, 20 us each.
  const std::int64_t window_start = decode_calls[0].first - 100000, window_end = decode_calls[1].second + 50000;
  kscope::node_gpu_activity decode_activity;
  decode_activity.kernel_count = 4;
  decode_activity.kernel_ns = decode_activity.busy_ns = 4 * 20000;
  fake->data.activity.nodes = {{decode, decode_activity}};
  fake->data.activity.recent.clear();
  for (int call = 0; call < 2; ++call)
    for (int k = 0; k < 2; ++k) {
      kscope::gpu_activity_event e;
      e.node = decode;
      e.thread_index = thread;
      e.name = "tw_kernel";
      e.start_ns = decode_calls[call].first + 10000 + k * 40000;
      e.end_ns = e.start_ns + 20000;
      fake->data.activity.recent.push_back(e);
    }
  kscope::trace_window_log log;
  log.configure({1, 1000000}, window_start);
  log.begin(window_start);
  log.end(window_end);
  fake->data.activity.windows = log.summary(decode_calls[3].second);

  const kscope::session_report r = session.report();
  CHECK(r.trace_windows.windowed);
  CHECK(r.trace_windows.windows == 1);
  REQUIRE(r.gpu_time);
  const kscope::gpu_time_report& t = *r.gpu_time;
  CHECK(t.windowed);
  // Busy over the traced time from the window's first record on, not over the four calls.
  const double wall = static_cast<double>(window_end - (decode_calls[0].first + 10000));
  CHECK(t.wall_ns == doctest::Approx(wall));
  CHECK(t.busy_share == doctest::Approx(4 * 20000 / wall));
  const kscope::scope_gpu_time* d = t.find(decode);
  REQUIRE(d != nullptr);
  CHECK(d->calls_seen == 2);  // calls 3 and 4 were not traced: not calls with no kernels
  CHECK(d->kernels_per_call == doctest::Approx(2));
  CHECK(t.calls_untraced >= 4);  // decode and step, calls 3 and 4
  const auto doc = nlohmann::json::parse(r.json());
  CHECK(doc["cupti"]["trace_windows"]["windows"] == 1);
  std::string text = r.text();
  for (std::size_t at; (at = text.find("\n  ")) != std::string::npos;) text.replace(at, 3, " ");
  CHECK_MESSAGE(text.find("of the traced time") != std::string::npos, text);
  CHECK_MESSAGE(text.find("in 1 traced window; between them unknown") != std::string::npos, text);

  session.set_gpu_activity_source(nullptr);
  session.reset();
}

TEST_CASE("the production preset: graphs sampled, every launch traced, low-rate metric sampling, no per-scope counters") {
  const kscope::production_options p = kscope::production_preset();
  CHECK(p.cupti.graphs == kscope::graph_tracing::sampled);
  CHECK(p.cupti.graph_first >= 1);
  CHECK(p.cupti.graph_every > 0);
  CHECK(p.metric_sampling);
  // Ten times sparser than the default sampler, its decoder on a twentieth of one core.
  CHECK(p.sampling.sampler.interval_ns == 10 * kscope::metric_sampler_options{}.interval_ns);
  CHECK(p.sampling.sampler.max_decoder_share == doctest::Approx(0.05));
  CHECK(p.sampling.sampler.max_decoder_share < kscope::metric_sampler_options{}.max_decoder_share);
  // Every launch traced: windows on a timer are off until they are right on the GPU
  // (cupti_options::window_thread), and nothing turns the collector's thread on.
  CHECK_FALSE(p.cupti.windows.windowed());
  CHECK_FALSE(p.cupti.window_thread);
  CHECK_FALSE(kscope::cupti_options{}.windows.windowed());
  CHECK_FALSE(kscope::cupti_options{}.window_thread);
  // window_thread is a switch of KSCOPE_CUPTI_OPTIONS (for probes).
  kscope::cupti_options probe;
  CHECK(kscope::apply_cupti_options_text("window_ms=100,period_ms=10000,window_thread=on", probe).empty());
  CHECK(probe.window_thread);
  CHECK(probe.windows.traced_share() == doctest::Approx(kscope::production_trace_windows.traced_share()));
  CHECK_FALSE(kscope::apply_cupti_options_text("window_thread=maybe", probe).empty());
  // The collector and the sampler are what it turns on; counters stay off.
  kscope::production_options lean = p;
  lean.metric_sampling = false;
  (void)kscope::session::global().enable_production(lean);  // no GPU here: refused, with its reason
  const kscope::session_report r = kscope::session::global().report();
  CHECK_FALSE(r.counters.has_value());
}

TEST_CASE("environment words: trimmed, any case, nothing else") {
  using kscope::detail::equals_word;
  CHECK(equals_word("kernel", "kernel"));
  CHECK(equals_word(" KERNEL\t", "kernel"));
  CHECK(equals_word("Kernel\n", "kernel"));
  CHECK_FALSE(equals_word("kernels", "kernel"));
  CHECK_FALSE(equals_word("kern", "kernel"));
  CHECK_FALSE(equals_word("", "kernel"));
  CHECK_FALSE(equals_word(nullptr, "kernel"));
  CHECK_FALSE(equals_word("kernel x", "kernel"));
}

namespace {
// A feature of the program's own (session/feature.hpp): counts its snapshots and adds one
// warning line per report, with what it saw of the scopes.
struct queue_depth_feature final : kscope::session_feature {
  struct section final : kscope::feature_section {
    int depth = 0;
    std::int64_t taken_ns = 0;
    void add_to(kscope::session_report& out, const kscope::report_evidence& evidence) override {
      REQUIRE(evidence.scopes != nullptr);
      REQUIRE(evidence.activity != nullptr);
      REQUIRE(evidence.clock != nullptr);
      // Step 2 runs after the scopes are summarized: the report already holds them.
      out.warnings.push_back("queue depth " + std::to_string(depth) + " (" + std::to_string(out.scopes.size()) +
                             " scopes summarized)");
    }
  };
  explicit queue_depth_feature(std::string feature_name) : name_(std::move(feature_name)) {}
  const char* name() const noexcept override { return name_.c_str(); }
  std::unique_ptr<kscope::feature_section> snapshot(std::int64_t now_ns) override {
    ++snapshots;
    auto s = std::make_unique<section>();
    s->depth = depth;
    s->taken_ns = now_ns;
    return s;
  }
  std::string name_;
  int depth = 0;
  int snapshots = 0;
};

// Registered but with nothing to say in this report.
struct silent_feature final : kscope::session_feature {
  const char* name() const noexcept override { return "silent"; }
  std::unique_ptr<kscope::feature_section> snapshot(std::int64_t) override { return nullptr; }
};
}  // namespace

TEST_CASE("a registered feature adds its section to every report; same name replaces") {
  auto& session = kscope::session::global();
  session.reset();
  auto first = std::make_shared<queue_depth_feature>("queue_depth");
  first->depth = 3;
  session.add_feature(first);
  session.add_feature(nullptr);  // ignored
  session.add_feature(std::make_shared<silent_feature>());
  CHECK(session.find_feature("queue_depth") == first);
  CHECK(session.find_feature("no_such_feature") == nullptr);
  CHECK(session.find_feature("gpu_time") != nullptr);  // the session's own, always there
  {
    KSCOPE_SCOPE("feature_scope");
  }
  kscope::session_report r = session.report();
  CHECK(first->snapshots == 1);
  const auto has = [&](const std::string& line) {
    return std::find(r.warnings.begin(), r.warnings.end(), line) != r.warnings.end();
  };
  CHECK(has("queue depth 3 (" + std::to_string(r.scopes.size()) + " scopes summarized)"));
  CHECK(r.text().find("queue depth 3") != std::string::npos);

  // A second feature of the same name replaces the first: one section, the new one's.
  auto second = std::make_shared<queue_depth_feature>("queue_depth");
  second->depth = 7;
  session.add_feature(second);
  CHECK(session.find_feature("queue_depth") == second);
  r = session.report();
  CHECK(first->snapshots == 1);
  CHECK(second->snapshots == 1);
  CHECK(std::count_if(r.warnings.begin(), r.warnings.end(),
                      [](const std::string& w) { return w.rfind("queue depth", 0) == 0; }) == 1);
  CHECK(has("queue depth 7 (" + std::to_string(r.scopes.size()) + " scopes summarized)"));
  // Unregistered, it is asked no more.
  CHECK(session.remove_feature("queue_depth"));
  CHECK_FALSE(session.remove_feature("queue_depth"));
  CHECK(session.remove_feature("silent"));
  r = session.report();
  CHECK(second->snapshots == 1);
  CHECK(std::none_of(r.warnings.begin(), r.warnings.end(),
                     [](const std::string& w) { return w.rfind("queue depth", 0) == 0; }));
}

TEST_CASE("KSCOPE_METRIC_SAMPLING_OPTIONS applies to the sampling the session starts, and a bad item is named") {
  ::setenv("KSCOPE_METRIC_SAMPLING_OPTIONS", "interval_us=1000,decoder_share=bogus", 1);
  kscope::session& session = kscope::session::global();
  (void)session.enable_metric_sampling();  // no GPU here: refused after the options are read
  ::unsetenv("KSCOPE_METRIC_SAMPLING_OPTIONS");
  session.disable_metric_sampling();
  const kscope::session_report r = session.report();
  const std::string expected =
      "KSCOPE_METRIC_SAMPLING_OPTIONS: 'decoder_share=bogus' not understood (percent of one core, 1 .. 100); "
      "that option keeps its value";
  CHECK_MESSAGE(std::find(r.warnings.begin(), r.warnings.end(), expected) != r.warnings.end(),
                "warnings: " << r.warnings.size());
}

}  // namespace session_test
