// Per-scope hardware counters, the parts that need no GPU: a profiled call (the counter
// hook said yes) and every scope opened inside it are counted and kept out of the timing
// statistics; the report's counters section from synthetic counter values (known verdicts,
// per-call numbers, the declared-vs-measured line, JSON).
#include <kscope/counters/detail/step_kernels.hpp>
#include <kscope/cupti/detail/kernel_launch_ids.hpp>
#include <kscope/report/report.hpp>
#include <kscope/scope/detail/counter_hook.hpp>
#include <kscope/scope/scope.hpp>
#include <kscope/session/session.hpp>

#include <kscope/verdict/scope_verdict.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <string>

namespace scope_counters_test {  // one per file: the unit tests build as one program

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A hook that profiles every call of the node it is told, and counts opens and closes.
std::atomic<kscope::node_id> profiled_node{0};
std::atomic<int> opens{0}, closes{0};
bool fake_open(kscope::node_id node) noexcept {
  if (node != profiled_node.load()) return false;
  ++opens;
  return true;
}
void fake_close(kscope::node_id) noexcept { ++closes; }
const kscope::detail::counter_hook fake_hook{&fake_open, &fake_close};

}  // namespace

TEST_CASE("a profiled call and the scopes inside it are counted, never timed") {
  auto& session = kscope::session::global();
  session.reset();
  kscope::node_id outer_node = 0;
  {
    KSCOPE_SCOPE("pc_outer");  // learn the node id first (not profiled: the hook is off)
    outer_node = kscope::detail::this_thread_state().current;
  }
  session.reset();
  profiled_node = outer_node;
  kscope::detail::active_counter_hook.store(&fake_hook);
  for (int i = 0; i < 3; ++i) {
    if (i == 2) kscope::detail::active_counter_hook.store(nullptr);  // the last call runs unprofiled
    KSCOPE_SCOPE("pc_outer");
    { KSCOPE_SCOPE("pc_inner"); }
  }
  kscope::detail::active_counter_hook.store(nullptr);
  CHECK(opens == 2);
  CHECK(closes == 2);
  CHECK(kscope::detail::profiled_depth == 0);
  const kscope::session_report r = session.report();
  const kscope::scope_report* outer = r.find("pc_outer");
  const kscope::scope_report* inner = r.find("pc_outer/pc_inner");
  REQUIRE(outer != nullptr);
  REQUIRE(inner != nullptr);
  CHECK(outer->calls == 1);
  CHECK(outer->profiled_calls == 2);
  CHECK(outer->host_ns.n == 1);
  CHECK(inner->calls == 1);             // the inner scope's time included the replay twice
  CHECK(inner->profiled_calls == 2);
  CHECK(nlohmann::json::parse(r.json()).at("scopes").at(0).at("profiled_calls") == 2);
}

TEST_CASE("a profiled step notes the scopes opened inside it, on its thread, while its log is active") {
  auto& session = kscope::session::global();
  session.reset();
  static kscope::detail::profiled_step_log log;  // large: never on the stack
  log.open_count = 0;
  log.launch_count = 0;
  profiled_node = 0;
  {
    KSCOPE_SCOPE("ps_step");
    profiled_node = kscope::detail::this_thread_state().current;
  }
  kscope::detail::active_counter_hook.store(&fake_hook);
  kscope::detail::active_step_log.store(&log);
  kscope::node_id a = 0, b = 0;
  {
    KSCOPE_SCOPE("ps_step");  // profiled: the scopes below are inside it
    {
      KSCOPE_SCOPE("ps_a");
      a = kscope::detail::this_thread_state().current;
      kscope::detail::note_profiled_step_launch(log, false);  // as a launch callback would
      { KSCOPE_SCOPE("ps_b"); b = kscope::detail::this_thread_state().current; }
    }
    { KSCOPE_SCOPE("ps_a"); }
    kscope::detail::note_profiled_step_launch(log, true);  // a graph, from the step scope itself
  }
  { KSCOPE_SCOPE("ps_elsewhere"); }  // not profiled: not inside the step
  kscope::detail::active_step_log.store(nullptr);
  kscope::detail::active_counter_hook.store(nullptr);
  REQUIRE(log.open_count == 3);
  CHECK(log.opens[0] == a);
  CHECK(log.opens[1] == b);
  CHECK(log.opens[2] == a);
  REQUIRE(log.launch_count.load() == 2);
  const std::uint64_t first = log.launches[0].load(), second = log.launches[1].load();
  CHECK((first & 0xffffffffu) == a);
  CHECK((first & kscope::detail::profiled_step_log::graph_bit) == 0);
  CHECK(((first >> 32) & 0x7fffffffu) == kscope::detail::this_thread_state().thread_index);
  CHECK((second & 0xffffffffu) == profiled_node.load());
  CHECK((second & kscope::detail::profiled_step_log::graph_bit) != 0);
  const std::map<kscope::node_id, std::uint64_t> calls =
      kscope::detail::step_scope_calls(profiled_node.load(), std::vector<kscope::node_id>(log.opens, log.opens + 3));
  CHECK(calls.at(profiled_node.load()) == 1);
  CHECK(calls.at(a) == 2);
  CHECK(calls.at(b) == 1);
}

TEST_CASE("a step scope without whole steps is refused, with why") {
  kscope::scope_counter_options o;
  o.whole_steps = false;
  o.step_scope = "decode";
  auto& sampler = kscope::scope_counter_sampler::global();
  CHECK_FALSE(sampler.start(o));
  CHECK(contains(sampler.snapshot().status, "whole_steps is off"));
  CHECK(kscope::detail::active_counter_hook.load() == nullptr);
  sampler.stop();
}

TEST_CASE("a profiled step's kernel ranges pair with its launches only when nothing can have shifted them") {
  using kscope::detail::pair_step_kernels;
  using kscope::detail::step_launch;
  const kscope::node_id step = 7, decode = 8, sample = 9;
  const std::uint32_t thread = 3;
  const std::vector<step_launch> launches = {{decode, thread, false}, {decode, thread, false},
                                             {kscope::detail::root_node, thread, false}, {sample, thread, false}};
  SUBCASE("paired: each range to its launch's scope, a launch outside every scope to the step") {
    const auto p = pair_step_kernels(step, thread, 4, launches, 4);
    CHECK(p.why_not.empty());
    CHECK(p.kernel_scopes == std::vector<kscope::node_id>{decode, decode, step, sample});
  }
  SUBCASE("a range more or fewer than the launches: not paired") {
    CHECK(pair_step_kernels(step, thread, 5, launches, 4).kernel_scopes.empty());
    const auto p = pair_step_kernels(step, thread, 3, launches, 4);
    CHECK(p.kernel_scopes.empty());
    CHECK(contains(p.why_not, "differ in number"));
  }
  SUBCASE("a graph launch: not paired") {
    std::vector<step_launch> with_graph = launches;
    with_graph[1].graph = true;
    const auto p = pair_step_kernels(step, thread, 4, with_graph, 4);
    CHECK(p.kernel_scopes.empty());
    CHECK(contains(p.why_not, "CUDA graph"));
  }
  SUBCASE("a kernel from another thread: not paired, even when the counts agree") {
    std::vector<step_launch> other = launches;
    other[2].thread = thread + 1;
    const auto p = pair_step_kernels(step, thread, 4, other, 4);
    CHECK(p.kernel_scopes.empty());
    CHECK(contains(p.why_not, "other threads"));
  }
  SUBCASE("launches past the log's capacity, or none seen: not paired") {
    CHECK(contains(pair_step_kernels(step, thread, 5, launches, 5).why_not, "log holds"));
    CHECK(contains(pair_step_kernels(step, thread, 4, {}, 0).why_not, "no launch callback"));
  }
  SUBCASE("a slot taken but not written when the step ended: not paired") {
    std::vector<step_launch> torn = launches;
    torn[3].unread = true;
    CHECK(contains(pair_step_kernels(step, thread, 4, torn, 4).why_not, "still being noted"));
  }
  SUBCASE("no ranges: nothing to pair, nothing to say") {
    const auto p = pair_step_kernels(step, thread, 0, launches, 4);
    CHECK(p.kernel_scopes.empty());
    CHECK(p.why_not.empty());
  }
}

namespace {

// One profiled call of a DRAM-bound copy: 1 ms, 2 GB moved, DRAM at 85 % of peak.
kscope::counter_values copy_kernel() {
  kscope::counter_values k;
  k.values = {{"gpu__time_duration.sum", 1e6},
              {"dram__bytes_read.sum", 1e9},
              {"dram__bytes_write.sum", 1e9},
              {"sm__sass_thread_inst_executed_op_fadd_pred_on.sum", 0},
              {"sm__sass_thread_inst_executed_op_fmul_pred_on.sum", 0},
              {"sm__sass_thread_inst_executed_op_ffma_pred_on.sum", 0},
              {"sm__throughput.avg.pct_of_peak_sustained_elapsed", 12},
              {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 85}};
  return k;
}

}  // namespace

TEST_CASE("counters section: per-call numbers, verdict, declared vs measured, JSON") {
  kscope::counter_aggregate agg;
  agg.add_call({copy_kernel()});
  agg.add_call({copy_kernel()});
  const kscope::hierarchical_roofs roofs{kscope::roof_line{"fp32 plain", 60e12, 4.8e12, false}};
  // Declared 1 GB per call; the counters say 2 GB: one line says so.
  const kscope::scope_counter_report c =
      kscope::make_scope_counter_report(agg, 2, 0, 2, 0, kscope::work{0, 1e9}, 1.1e6, 1.0e6, &roofs);
  CHECK(c.per_call(kscope::metric_value(c.totals, kscope::counter_metric::dram_read_bytes)) == doctest::Approx(1e9));
  CHECK(c.classified.verdict.kind == kscope::bottleneck::memory);
  REQUIRE(c.declared_vs_measured.has_value());
  CHECK(c.declared_vs_measured->bytes_differ);
  CHECK(contains(c.declared_vs_measured->text, "2.0"));

  kscope::session_report r;
  kscope::scope_report s;
  s.id = 3;
  s.name = s.path = "copy";
  s.depth = 1;
  s.calls = 10;
  s.profiled_calls = 2;
  s.counters = c;
  r.scopes.push_back(s);
  kscope::session_counters_status st;
  st.enabled = true;
  st.status = "per-scope counters: each scope's first 2 calls";
  st.passes = 2;
  st.skipped_busy = 1;
  r.counters = st;
  kscope::decide_verdicts(r);  // as the session does: the counters decide the scope's verdict
  const std::string text = r.text();
  INFO(text);
  CHECK(contains(text, "Hardware counters per scope"));
  CHECK(contains(text, "2.00 GB"));  // DRAM per call
  // The section gives the numbers; the one conclusion is the scope's verdict, below it.
  const std::size_t verdicts = text.find("\nverdict per scope");
  REQUIRE(verdicts != std::string::npos);
  CHECK(text.find("memory-bound") > verdicts);
  CHECK(contains(text, "copy: memory-bound"));
  CHECK(contains(text, ", from hardware counters over 2 profiled calls"));
  CHECK(contains(text, "1 due calls not profiled"));
  CHECK_FALSE(contains(text, "each profiled call cost"));  // no call timed: no cost line
  const nlohmann::json j = nlohmann::json::parse(r.json());
  CHECK(j.at("counters").at("passes") == 2);
  CHECK(j.at("counters").at("cost").at("calls") == 0);
  const nlohmann::json& sc = j.at("scopes").at(0).at("counters");
  CHECK(sc.at("profiled_calls") == 2);
  CHECK(sc.find("verdict") == sc.end());
  CHECK(j.at("scopes").at(0).at("verdict").at("class") == "memory-bound");
  CHECK(j.at("scopes").at(0).at("verdict").at("source") == "hardware counters");
  CHECK(sc.at("declared_vs_measured").at("bytes_differ") == true);
  CHECK(sc.at("totals").at("dram__bytes_read.sum").get<double>() == doctest::Approx(2e9));

  // No call profiled: undetermined, never a guess.
  const kscope::scope_counter_report none =
      kscope::make_scope_counter_report(kscope::counter_aggregate{}, 0, 1, 0, 0, kscope::work{}, 1e6, 1e5, nullptr);
  CHECK(none.classified.verdict.kind == kscope::bottleneck::undetermined);
}

TEST_CASE("enable_counters without CUPTI's range profiler says why, once") {
  kscope::scope_counter_options o;
  o.first_calls = 0;
  o.every = 0;
  CHECK_FALSE(kscope::scope_counter_sampler::global().start(o));
  CHECK(contains(kscope::scope_counter_sampler::global().snapshot().status, "no call would be profiled"));
  CHECK(kscope::detail::active_counter_hook.load() == nullptr);
}

TEST_CASE("counters section: measured points in the HTML roofline picture") {
  kscope::counter_aggregate agg;
  agg.add_call({copy_kernel()});
  const kscope::hierarchical_roofs roofs{kscope::roof_line{"fp32 plain", 60e12, 4.8e12, false}};
  kscope::session_report r;
  r.context.roof_lines.push_back(kscope::roof_line{"fp32 plain", 60e12, 4.8e12, false});
  kscope::scope_report s;
  s.id = 3;
  s.name = s.path = "copy";
  s.depth = 1;
  s.calls = 10;
  s.counters = kscope::make_scope_counter_report(agg, 1, 0, 1, 0, kscope::work{}, 1.1e6, 1e6, &roofs);
  r.scopes.push_back(s);
  const std::string html = r.html();
  CHECK(contains(html, "<svg"));
  CHECK(contains(html, "copy (DRAM)"));
  CHECK(contains(html, "Hardware counters per scope"));
}

TEST_CASE("the cost of profiled calls: cold and re-armed calls told apart, averages per call") {
  kscope::scope_counter_cost c;
  CHECK(kscope::describe_cost(c).empty());
  // 2 calls set CUPTI up (40 ms before the work in all), 8 re-armed a kept pass (4 ms in
  // all), 10 ms after the work over the 10 calls.
  c.calls = 10;
  c.cold_calls = 2;
  c.warm_calls = 8;
  c.cold_before_ns = 40e6;
  c.warm_before_ns = 4e6;
  c.after_ns = 10e6;
  const std::string line = kscope::describe_cost(c);
  INFO(line);
  CHECK(contains(line, "0.500 ms before its work (8 calls re-armed a kept pass)"));
  CHECK(contains(line, "20.000 ms on the 2 that set CUPTI up"));
  CHECK(contains(line, "1.000 ms after it"));
  // Every call cold (keeping refused): no re-armed average is invented.
  c.cold_calls = 10;
  c.warm_calls = 0;
  c.cold_before_ns = 100e6;
  c.warm_before_ns = 0;
  const std::string cold = kscope::describe_cost(c);
  INFO(cold);
  CHECK(contains(cold, "10.000 ms before its work (10 calls, each setting CUPTI up)"));
  CHECK_FALSE(contains(cold, "re-armed"));
  // Read while a call is in flight: one more warm open than closes. Each average divides by
  // its own count, so neither is skewed (the open's time is in warm_before_ns and its count
  // in warm_calls; after_ns and calls have not seen it yet).
  kscope::scope_counter_cost in_flight;
  in_flight.calls = 3;
  in_flight.cold_calls = 1;
  in_flight.warm_calls = 3;
  in_flight.cold_before_ns = 9e6;
  in_flight.warm_before_ns = 3e6;
  in_flight.after_ns = 6e6;
  const std::string flight = kscope::describe_cost(in_flight);
  INFO(flight);
  CHECK(contains(flight, "1.000 ms before its work (3 calls re-armed a kept pass)"));
  CHECK(contains(flight, "9.000 ms on the 1 that set CUPTI up"));
  CHECK(contains(flight, "2.000 ms after it"));
  // Setups paid for calls that then ran unprofiled are stated, not hidden.
  in_flight.abandoned_setups = 2;
  in_flight.abandoned_ns = 50e6;
  CHECK(contains(kscope::describe_cost(in_flight), "2 setups (25.000 ms each) were paid for calls that then ran unprofiled"));
  kscope::scope_counter_cost only_abandoned;
  only_abandoned.abandoned_setups = 1;
  only_abandoned.abandoned_ns = 1e6;
  CHECK(contains(kscope::describe_cost(only_abandoned), "1 setups (1.000 ms each)"));

  kscope::session_report r;
  kscope::session_counters_status st;
  st.enabled = true;
  st.status = "per-scope counters";
  st.passes = 10;
  st.cost = c;
  r.counters = st;
  CHECK(contains(r.text(), "each profiled call cost"));
  const nlohmann::json j = nlohmann::json::parse(r.json());
  CHECK(j.at("counters").at("cost").at("cold_calls") == 10);
  CHECK(j.at("counters").at("cost").at("warm_calls") == 0);
  CHECK(j.at("counters").at("cost").at("abandoned_setups") == 0);
  CHECK(j.at("counters").at("cost").at("after_ns").get<double>() == doctest::Approx(10e6));
}

#if KSCOPE_HAS_RANGE_PROFILER
namespace {
std::atomic<int> releases{0};
void count_release() noexcept { ++releases; }
}  // namespace

TEST_CASE("a pass that needs the counters lets a kept range profiler go first") {
  // The per-scope counters keep the range profiler enabled between their calls; a
  // profile_counters pass (or PC or PM sampling) must release it before it begins, even
  // when it then fails (here: no GPU, or whatever this machine lacks).
  auto& releaser = kscope::detail::kept_range_profiler_releaser();
  const kscope::detail::kept_range_profiler_release before = releaser.load();
  releaser.store(&count_release);
  releases = 0;
  const kscope::counter_result r = kscope::profile_counters({"dram__bytes_read.sum"}, [] {});
  CHECK(releases.load() == 1);
  CHECK_FALSE(r.message.empty());
  releaser.store(before);
}
#endif

TEST_CASE("counters section: calls with more kernels than the image are partial, and the row says so") {
  // Three profiled calls: one filled the image after 256 kernels (partial, its kernels left
  // out), two later ones held all 300.
  kscope::counter_aggregate agg;
  agg.count_call();  // the partial call
  agg.add_call({copy_kernel()});
  agg.add_call({copy_kernel()});
  kscope::scope_counter_report c =
      kscope::make_scope_counter_report(agg, 3, 0, 600, 44, kscope::work{}, 1e6, 1e6, nullptr, 1, 1, 256);
  CHECK(c.partial_calls == 1);
  kscope::session_report r;
  kscope::scope_report s;
  s.id = 3;
  s.name = s.path = "many";
  s.depth = 1;
  s.calls = 10;
  s.profiled_calls = 3;
  s.counters = c;
  r.scopes.push_back(s);
  kscope::session_counters_status st;
  st.enabled = true;
  r.counters = st;
  std::string text = r.text();
  INFO(text);
  CHECK(contains(text, "300.0*"));  // 600 kernels over the 2 calls profiled whole
  CHECK(contains(text, "1 of 3 profiled calls launched more kernels than the counter-data image held"));
  CHECK(nlohmann::json::parse(r.json()).at("scopes").at(0).at("counters").at("partial_calls") == 1);
  // Every call partial: no per-call figure, a lower bound on the kernels, never "256".
  kscope::counter_aggregate none_whole;
  none_whole.count_call();
  r.scopes[0].counters = kscope::make_scope_counter_report(none_whole, 1, 0, 0, 44, kscope::work{}, 1e6, 1e6, nullptr, 1, 1, 256);
  CHECK(r.scopes[0].counters->classified.verdict.kind == kscope::bottleneck::undetermined);
  CHECK(contains(r.scopes[0].counters->classified.verdict.text, "more kernels than the counter-data image held"));
  text = r.text();
  CHECK(contains(text, ">256"));
}

#if KSCOPE_HAS_CUPTI
TEST_CASE("a profiled step notes each launch once, at its outermost call's successful exit") {
  static kscope::detail::profiled_step_log log;  // large: never on the stack
  log.launch_count = 0;
  log.generation.fetch_add(1);
  int ok = 0, failed = 1;
  CUpti_CallbackData data{};
  const auto call = [&](CUpti_CallbackDomain domain, CUpti_CallbackId cbid, CUpti_ApiCallbackSite site, int* result) {
    data.callbackSite = site;
    data.functionReturnValue = result;
    kscope::detail::note_launch_for_profiled_step(log, domain, cbid, data);
  };
  const auto runtime = CUPTI_CB_DOMAIN_RUNTIME_API;
  const auto driver = CUPTI_CB_DOMAIN_DRIVER_API;
  const CUpti_CallbackId launch = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  const CUpti_CallbackId driver_launch = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
  // A runtime launch with the driver launch under it: one kernel.
  call(runtime, launch, CUPTI_API_ENTER, nullptr);
  call(driver, driver_launch, CUPTI_API_ENTER, nullptr);
  call(driver, driver_launch, CUPTI_API_EXIT, &ok);
  CHECK(log.launch_count.load() == 0);  // noted at the outermost exit, not before
  call(runtime, launch, CUPTI_API_EXIT, &ok);
  CHECK(log.launch_count.load() == 1);
  // A failed launch has no range: not noted.
  call(runtime, launch, CUPTI_API_ENTER, nullptr);
  call(runtime, launch, CUPTI_API_EXIT, &failed);
  CHECK(log.launch_count.load() == 1);
  // Not a launch (a synchronize): nothing.
  call(runtime, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, CUPTI_API_ENTER, nullptr);
  call(runtime, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, CUPTI_API_EXIT, &ok);
  CHECK(log.launch_count.load() == 1);
  // A graph launch: noted as one, marked.
  call(runtime, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, CUPTI_API_ENTER, nullptr);
  call(runtime, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, CUPTI_API_EXIT, &ok);
  REQUIRE(log.launch_count.load() == 2);
  CHECK((log.launches[1].load() & kscope::detail::profiled_step_log::graph_bit) != 0);
  // A launch entered before this step's pass began (an earlier generation) and left there:
  // its exit in the new pass notes nothing, and the next launch is counted from zero.
  call(runtime, launch, CUPTI_API_ENTER, nullptr);
  log.generation.fetch_add(1);
  log.launch_count = 0;
  call(runtime, launch, CUPTI_API_EXIT, &ok);
  CHECK(log.launch_count.load() == 0);
  call(runtime, launch, CUPTI_API_ENTER, nullptr);
  call(runtime, launch, CUPTI_API_EXIT, &ok);
  CHECK(log.launch_count.load() == 1);
}
#endif

TEST_CASE("a step profiled by scope stretches: each range to its stretch's scope, empty stretches left out") {
  using kscope::detail::group_step_stretches;
  using kscope::node_id;
  const node_id step = 5, a = 6, b = 7;
  const auto range = [](double bytes, double write_back = -1) {
    kscope::counter_values v;
    v.values["dram__bytes_read.sum"] = bytes;
    if (write_back >= 0) v.values[std::string(kscope::dram_write_back_metric)] = write_back;
    return v;
  };
  SUBCASE("step, a, b, a again, then the step's empty tail: the tail's write-back goes to the last a") {
    // Launches noted when each stretch began: 0, 3, 41, 79, 117; 117 in all (the tail launched none).
    const auto s = group_step_stretches({step, a, b, a, step}, {0, 3, 41, 79, 117}, 117,
                                        {range(10), range(20), range(30), range(40), range(0, 99)});
    REQUIRE(s.why_not.empty());
    REQUIRE(s.ranges_of.size() == 3);
    REQUIRE(s.ranges_of.at(step).size() == 1);  // the tail left out
    CHECK(s.ranges_of.at(step)[0].values.at("dram__bytes_read.sum") == 10);
    REQUIRE(s.ranges_of.at(a).size() == 2);
    CHECK(s.ranges_of.at(a)[0].values.at("dram__bytes_read.sum") == 20);
    CHECK(s.ranges_of.at(a)[1].values.at("dram__bytes_read.sum") == 40);
    CHECK(s.ranges_of.at(a)[1].values.at(std::string(kscope::dram_write_back_metric)) == 99);
    CHECK(s.ranges_of.at(b).size() == 1);
    CHECK(s.ranges_of.at(b)[0].values.count(std::string(kscope::dram_write_back_metric)) == 0);
  }
  SUBCASE("the last stretch launched: its write-back stays") {
    const auto s = group_step_stretches({step, a}, {0, 2}, 5, {range(1), range(2, 7)});
    REQUIRE(s.why_not.empty());
    CHECK(s.ranges_of.at(a)[0].values.at(std::string(kscope::dram_write_back_metric)) == 7);
  }
  SUBCASE("nothing launched at all: no scope gets a range") {
    const auto s = group_step_stretches({step, a}, {0, 0}, 0, {range(1), range(2)});
    CHECK(s.why_not.empty());
    CHECK(s.ranges_of.empty());
  }
  SUBCASE("ranges that do not line up with the stretches: none is given to a scope, and why") {
    const auto s = group_step_stretches({step, a, b}, {0, 1, 2}, 3, {range(1), range(2)});
    CHECK(s.ranges_of.empty());
    CHECK(s.why_not == "2 ranges came back for 3 stretches begun");
  }
}

}  // namespace scope_counters_test
