// evidence/metrics.hpp: the metric catalog, FLOPs from SASS instruction counts, aggregation
// per scope, metric-name checks and suggestions, the measured (hierarchical) roofline, the
// declared-vs-measured line and every classification rule, on synthetic values whose
// expected answers are worked out in the comments. The CUPTI side (counters/collect.hpp) is
// checked here only where it runs without a GPU: its error mapping and its refusals.
#include <kscope/evidence/metrics.hpp>
#include <kscope/counters/collect.hpp>
#include <kscope/counters/detail/plan_cache.hpp>

#include <doctest/doctest.h>

#if KSCOPE_HAS_RANGE_PROFILER
#  include <dlfcn.h>
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace counters_test {  // one per file: the unit tests build as one program

namespace {

constexpr double nan_value = std::numeric_limits<double>::quiet_NaN();

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// The evidence of a finding under one metric name, or nullptr.
const kscope::evidence* fact(const kscope::finding& f, std::string_view metric) {
  for (const kscope::evidence& e : f.facts)
    if (e.metric == metric) return &e;
  return nullptr;
}

bool mentions(const std::vector<std::string>& lines, std::string_view part) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return contains(l, part); });
}

constexpr const char* sm_pct = "sm__throughput.avg.pct_of_peak_sustained_elapsed";
constexpr const char* mem_pct = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed";
constexpr const char* dram_pct = "dram__throughput.avg.pct_of_peak_sustained_elapsed";
constexpr const char* l2_pct = "lts__throughput.avg.pct_of_peak_sustained_elapsed";
constexpr const char* l1_pct = "l1tex__throughput.avg.pct_of_peak_sustained_active";
constexpr const char* occupancy = "sm__warps_active.avg.pct_of_peak_sustained_active";
constexpr const char* tensor_pct = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed";
constexpr const char* duration = "gpu__time_duration.sum";
constexpr const char* dram_read = "dram__bytes_read.sum";
constexpr const char* dram_write = "dram__bytes_write.sum";
constexpr const char* ffma_name = "sm__sass_thread_inst_executed_op_ffma_pred_on.sum";
constexpr const char* fadd_name = "sm__sass_thread_inst_executed_op_fadd_pred_on.sum";
constexpr const char* fmul_name = "sm__sass_thread_inst_executed_op_fmul_pred_on.sum";

// All nine FP instruction counters, zero unless set.
kscope::metric_values fp_counters(double fp32_add, double fp32_mul, double fp32_fma) {
  kscope::metric_values v;
  for (const char* op : {"dadd", "dmul", "dfma", "hadd", "hmul", "hfma"})
    v[std::string("sm__sass_thread_inst_executed_op_") + op + "_pred_on.sum"] = 0;
  v[fadd_name] = fp32_add;
  v[fmul_name] = fp32_mul;
  v[ffma_name] = fp32_fma;
  return v;
}

// The base metrics a device might list (a small slice of GH100's).
const std::vector<std::string> bases = {
    "dram__bytes_read",  "dram__bytes_write", "dram__throughput", "lts__t_bytes",   "l1tex__t_bytes",
    "gpu__time_duration", "sm__throughput",   "sm__warps_active", "sm__pipe_tensor_cycles_active",
    "sm__pipe_fma_cycles_active", "lts__t_sector_hit_rate", "TriageCompute.sm__throughput",
};

}  // namespace

// ---------------------------------------------------------------------------------------
// Catalog

TEST_CASE("the default set holds the metrics the issue names, each described once") {
  const std::vector<std::string> names = kscope::default_metric_names();
  const std::set<std::string> set(names.begin(), names.end());
  CHECK(set.size() == names.size());  // no duplicates
  for (const char* required :
       {"gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum",
        "l1tex__t_bytes.sum", "sm__sass_thread_inst_executed_op_fadd_pred_on.sum",
        "sm__sass_thread_inst_executed_op_fmul_pred_on.sum", "sm__sass_thread_inst_executed_op_ffma_pred_on.sum",
        "sm__sass_thread_inst_executed_op_dadd_pred_on.sum", "sm__sass_thread_inst_executed_op_dmul_pred_on.sum",
        "sm__sass_thread_inst_executed_op_dfma_pred_on.sum", "sm__sass_thread_inst_executed_op_hadd_pred_on.sum",
        "sm__sass_thread_inst_executed_op_hmul_pred_on.sum", "sm__sass_thread_inst_executed_op_hfma_pred_on.sum",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "sm__warps_active.avg.pct_of_peak_sustained_active",
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"}) {
    CAPTURE(required);
    CHECK(set.count(required) == 1);
  }
  // The Ampere tensor name is only a fallback: it does not exist on GH100.
  CHECK(set.count("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed") == 0);
  const kscope::metric_info& tensor = kscope::metric_info_of(kscope::counter_metric::tensor_pipe_active);
  CHECK(tensor.name_uncertain);
  CHECK(tensor.names.size() == 2);

  std::set<std::string_view> every_name;
  for (const kscope::metric_info& m : kscope::metric_catalog()) {
    CAPTURE(m.name());
    CHECK(!m.meaning.empty());
    CHECK(!m.unit.empty());
    CHECK(&kscope::metric_info_of(m.id) == &m);
    for (std::string_view n : m.names) CHECK(every_name.insert(n).second);  // a name belongs to one quantity
  }
  CHECK(kscope::find_metric_info("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum")->id ==
        kscope::counter_metric::fp32_fma);
  CHECK(kscope::find_metric_info("no__such_metric.sum") == nullptr);
  const std::vector<std::string> pipes = kscope::pipe_metric_names();
  CHECK(pipes.size() == 5);
  CHECK(std::find(pipes.begin(), pipes.end(), "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active") !=
        pipes.end());
}

TEST_CASE("aggregation rule: the catalog's, else the name's last word") {
  using a = kscope::metric_aggregation;
  CHECK(kscope::aggregation_for(duration) == a::sum);
  CHECK(kscope::aggregation_for(sm_pct) == a::duration_weighted_mean);
  CHECK(kscope::aggregation_for("smsp__inst_executed.sum") == a::sum);
  CHECK(kscope::aggregation_for("sm__cycles_active.avg") == a::sum);  // a count per unit
  CHECK(kscope::aggregation_for("sm__cycles_active.max") == a::max);
  CHECK(kscope::aggregation_for("sm__cycles_active.min") == a::min);
  CHECK(kscope::aggregation_for("lts__t_sector_hit_rate.pct") == a::duration_weighted_mean);
  CHECK(kscope::aggregation_for("dram__bytes.sum.per_second") == a::duration_weighted_mean);
  CHECK(std::string(kscope::to_string(a::duration_weighted_mean)) == "duration-weighted mean");
}

TEST_CASE("metric_value takes the first name collected, skipping NaN") {
  kscope::metric_values v{{"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", 7}};
  CHECK(kscope::metric_value(v, kscope::counter_metric::fp32_fma) == 7);
  CHECK(kscope::collected_name(v, kscope::counter_metric::fp32_fma) ==
        "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum");
  v[ffma_name] = nan_value;  // the preferred name present but NaN: the fallback still answers
  CHECK(kscope::metric_value(v, kscope::counter_metric::fp32_fma) == 7);
  CHECK(std::isnan(kscope::metric_value(v, kscope::counter_metric::fp64_fma)));
  CHECK(kscope::collected_name(v, kscope::counter_metric::fp64_fma).empty());
}

// ---------------------------------------------------------------------------------------
// FLOPs

TEST_CASE("FLOPs: add and mul count 1, fma counts 2, per precision") {
  kscope::metric_values v = fp_counters(10, 20, 30);  // fp32: 10 + 20 + 2*30 = 90
  v["sm__sass_thread_inst_executed_op_dadd_pred_on.sum"] = 1;
  v["sm__sass_thread_inst_executed_op_dmul_pred_on.sum"] = 2;
  v["sm__sass_thread_inst_executed_op_dfma_pred_on.sum"] = 3;  // fp64: 1 + 2 + 6 = 9
  v["sm__sass_thread_inst_executed_op_hfma_pred_on.sum"] = 4;  // fp16: 8
  const kscope::flop_count f = kscope::count_flops(v);
  CHECK(f.complete);
  CHECK(f.missing.empty());
  CHECK(f.of(kscope::data_type::fp32).flops == 90);
  CHECK(f.of(kscope::data_type::fp32).adds == 10);
  CHECK(f.of(kscope::data_type::fp32).muls == 20);
  CHECK(f.of(kscope::data_type::fp32).fmas == 30);
  CHECK(f.of(kscope::data_type::fp64).flops == 9);
  CHECK(f.of(kscope::data_type::fp16).flops == 8);
  CHECK(f.total == 107);
  REQUIRE(f.precisions.size() == 3);  // most FLOPs first
  CHECK(f.precisions[0] == kscope::data_type::fp32);
  CHECK(f.precisions[1] == kscope::data_type::fp64);
  CHECK(f.precisions[2] == kscope::data_type::fp16);
  CHECK(f.precision_text() == "fp32+fp64+fp16 (fp32 84%)");  // 90 / 107 = 84.1 %
}

TEST_CASE("FLOPs: the tensor pipe's ops per source type join the total, named apart") {
  // A cuBLAS fp16 GEMM, n = 4096, on an H200: sm__ops_path_tensor_src_fp16.sum = 2 n^3
  // exactly, and a few CUDA-core FLOPs of its epilogue.
  const double n = 4096;
  kscope::metric_values v = fp_counters(0, 0, 1000);  // fp32: 2000
  v["sm__ops_path_tensor_src_fp16.sum"] = 2 * n * n * n;
  v["sm__ops_path_tensor_src_bf16_dst_fp32.sum"] = 0;
  const kscope::flop_count f = kscope::count_flops(v);
  CHECK(f.tensor == 2 * n * n * n);
  REQUIRE(f.tensor_by_type.size() == 1);
  CHECK(f.tensor_by_type[0].first == kscope::data_type::fp16);
  CHECK(f.total == 2 * n * n * n + 2000);
  CHECK(f.precision_text() == "fp16 tensor");  // the epilogue's fp32 is under 1 %
  // Declared 2 n^3: agrees, no line; declared half: the line counts tensor ops.
  kscope::metric_values measured = v;
  measured["gpu__time_duration.sum"] = 1e6;
  const kscope::work_check ok = kscope::compare_declared_work({2 * n * n * n, std::nan("")}, measured, 1);
  CHECK_FALSE(ok.flops_differ);
  const kscope::work_check off = kscope::compare_declared_work({n * n * n, std::nan("")}, measured, 1);
  CHECK(off.flops_differ);
  CHECK(contains(off.text, "SASS FP instructions and tensor ops"));
  CHECK(!contains(off.text, "its FLOPs are not in these counts"));
  // No tensor counter: NaN, not zero, and the CUDA-core text as before.
  const kscope::flop_count plain = kscope::count_flops(fp_counters(0, 0, 1000));
  CHECK(std::isnan(plain.tensor));
  CHECK(plain.precision_text() == "fp32");
}

TEST_CASE("FLOPs of a naive fp32 GEMM are exactly 2 n^3") {
  const double n = 512;
  const kscope::flop_count f = kscope::count_flops(fp_counters(0, 0, n * n * n));  // one FFMA per (i, j, k)
  CHECK(f.total == 268435456.0);  // 2 * 512^3, exact in a double
  CHECK(f.of(kscope::data_type::fp32).flops == 2 * n * n * n);
  CHECK(f.precision_text() == "fp32");
  CHECK(f.precisions == std::vector<kscope::data_type>{kscope::data_type::fp32});
}

TEST_CASE("FLOPs: missing or bad counters make a precision unmeasured, never zero") {
  kscope::metric_values v{{fadd_name, 5}, {fmul_name, 5}};  // no ffma_name, nothing else
  kscope::flop_count f = kscope::count_flops(v);
  CHECK(std::isnan(f.total));
  CHECK(!f.complete);
  CHECK(f.precision_text() == "not measured");
  CHECK(std::find(f.missing.begin(), f.missing.end(), ffma_name) != f.missing.end());
  CHECK(f.missing.size() == 7);  // ffma_name + the six fp64 / fp16 counters

  v = fp_counters(0, 0, 0);
  f = kscope::count_flops(v);
  CHECK(f.total == 0);
  CHECK(f.complete);
  CHECK(f.precision_text() == "none (no FP instructions)");

  v = fp_counters(1, 1, nan_value);  // NaN fma: fp32 not measured, fp64 and fp16 are
  f = kscope::count_flops(v);
  CHECK(!f.of(kscope::data_type::fp32).measured());
  CHECK(f.of(kscope::data_type::fp64).measured());
  CHECK(f.total == 0);  // what was measured: a lower bound, flagged by complete
  CHECK(!f.complete);

  v = fp_counters(-1, 0, 0);  // a negative count is not a count
  CHECK(!kscope::count_flops(v).of(kscope::data_type::fp32).measured());
}

// ---------------------------------------------------------------------------------------
// Aggregation

TEST_CASE("aggregation: sums of counts, duration-weighted means of percentages, kernels and calls") {
  kscope::counter_values a, b, c;
  a.values = {{duration, 100}, {dram_read, 1000}, {sm_pct, 20}, {"smsp__cycles_active.max", 5}};
  b.values = {{duration, 300}, {dram_read, 3000}, {sm_pct, 60}, {"smsp__cycles_active.max", 9}};
  c.values = {{duration, 600}, {dram_read, 6000}};  // its call did not collect SM throughput
  kscope::counter_aggregate scope;
  scope.add_call({a, b});
  scope.add_call({c});
  CHECK(scope.calls() == 2);
  CHECK(scope.kernels() == 3);
  CHECK(scope.total(duration) == 1000);
  CHECK(scope.total(dram_read) == 10000);
  // (20 * 100 + 60 * 300) / (100 + 300) = 20000 / 400 = 50: c has no value, so no weight.
  CHECK(scope.total(sm_pct) == doctest::Approx(50.0));
  CHECK(scope.total("smsp__cycles_active.max") == 9);
  const auto sm = scope.find(sm_pct);
  REQUIRE(sm);
  CHECK(sm->kernels == 2);
  // The second call's group did not hold SM throughput: not missing, just not measured there
  // (a percentage is a mean over the calls that measured it, so it is not scaled).
  CHECK(sm->missing == 0);
  CHECK(sm->calls == 1);
  CHECK(scope.find(dram_read)->calls == 2);
  CHECK(sm->weighted);
  CHECK(sm->how == kscope::metric_aggregation::duration_weighted_mean);
  CHECK(!scope.find("never.sum"));
  CHECK(std::isnan(scope.total("never.sum")));

  const kscope::metric_values totals = scope.totals();
  CHECK(totals.at(dram_read) == 10000);
  CHECK(scope.metrics().at(sm_pct).value == doctest::Approx(50.0));
}

TEST_CASE("aggregation: NaN and negative values are left out; no duration means a plain mean, flagged") {
  kscope::counter_values a, b;
  a.values = {{sm_pct, 30}, {dram_read, nan_value}};
  b.values = {{sm_pct, 50}, {dram_read, -4}, {duration, 200}};
  kscope::counter_aggregate scope;
  scope.add_kernel(a);
  scope.add_kernel(b);
  scope.count_call();
  const auto sm = scope.find(sm_pct);
  REQUIRE(sm);
  CHECK(!sm->weighted);
  CHECK(sm->value == doctest::Approx(40.0));  // (30 + 50) / 2
  CHECK(!scope.find(dram_read));              // neither value counts
  CHECK(scope.calls() == 1);
  CHECK(scope.kernels() == 2);
}

TEST_CASE("aggregated totals feed the FLOP count") {
  kscope::counter_values a, b;
  a.values = fp_counters(0, 0, 1000);
  b.values = fp_counters(10, 0, 500);
  kscope::counter_aggregate scope;
  scope.add_call({a, b});
  CHECK(kscope::count_flops(scope.totals()).total == 3010);  // 2 * 1500 + 10
}

TEST_CASE("the trailing L2 sweep's DRAM writes are the range's write-back: kept apart, in the volume only") {
  // H200, a copy of 2^28 floats: 1.052 GB written during the kernel, the last 21.7 MB of
  // its output still dirty in the L2 when it ended; the sweep (a 120 MB read) wrote those.
  kscope::metric_values copy{{"dram__bytes_write.sum", 1.052e9},
                             {"dram__bytes_read.sum", 1.0738e9},
                             {"gpu__time_duration.sum", 5.6e5}};
  const kscope::metric_values sweep{{"dram__bytes_write.sum", 2.17e7},
                                    {"dram__bytes_read.sum", 1.2e8},
                                    {"gpu__time_duration.sum", 3e4}};
  CHECK(kscope::dram_bytes_moved(copy) == doctest::Approx(1.052e9 + 1.0738e9));
  kscope::add_write_back(copy, sweep);
  CHECK(copy.at(std::string(kscope::dram_write_back_metric)) == 2.17e7);
  // The hardware's own counts stay as counted in the range (comparable with Nsight Compute).
  CHECK(copy.at("dram__bytes_write.sum") == 1.052e9);
  CHECK(copy.at("dram__bytes_read.sum") == 1.0738e9);
  CHECK(copy.at("gpu__time_duration.sum") == 5.6e5);
  CHECK(copy.size() == 4);
  // The volume moved includes it; the roofline's rate does not (it happened after the range).
  CHECK(kscope::dram_bytes_moved(copy) == doctest::Approx(1.0737e9 + 1.0738e9));
  const kscope::measured_roofline m = kscope::measure_roofline(copy);
  REQUIRE(m.find(kscope::memory_level::dram));
  CHECK(m.find(kscope::memory_level::dram)->bytes == doctest::Approx(1.052e9 + 1.0738e9));
  // Aggregated per scope like any count, and used by the declared-vs-measured check: a copy
  // declaring 2 x 1.0737 GB agrees with what it moved.
  CHECK(kscope::aggregation_for(kscope::dram_write_back_metric) == kscope::metric_aggregation::sum);
  const kscope::work_check w = kscope::compare_declared_work({0, 2 * 1.0737e9}, copy, 1);
  CHECK_FALSE(w.bytes_differ);

  // Missing or not finite in the sweep: nothing recorded, nothing invented.
  kscope::metric_values reads_only{{"dram__bytes_read.sum", 1e9}};
  kscope::add_write_back(reads_only, {{"dram__bytes_read.sum", 1e8}});
  CHECK(reads_only.size() == 1);
  kscope::add_write_back(reads_only, {{"dram__bytes_write.sum", std::numeric_limits<double>::infinity()}});
  kscope::add_write_back(reads_only, {{"dram__bytes_write.sum", std::nan("")}});
  CHECK(reads_only.size() == 1);
  CHECK(std::isnan(kscope::dram_bytes_moved(reads_only)));  // no write count: not a number
  kscope::metric_values odd{{"dram__bytes_read.sum", 1e6},
                            {"dram__bytes_write.sum", 1e6},
                            {std::string(kscope::dram_write_back_metric), std::nan("")}};
  CHECK(kscope::dram_bytes_moved(odd) == 2e6);
}

// ---------------------------------------------------------------------------------------
// Metric names

TEST_CASE("metric names: known names, bases with their suffix, group prefixes") {
  CHECK(kscope::check_metric_name("dram__bytes_read.sum", bases).known);
  CHECK(kscope::check_metric_name("dram__bytes_read.sum.per_second", bases).known);
  CHECK(kscope::check_metric_name("sm__throughput.avg.pct_of_peak_sustained_elapsed", bases).known);
  CHECK(kscope::check_metric_name("lts__t_sector_hit_rate.pct", bases).known);
  CHECK(kscope::check_metric_name("TriageCompute.sm__throughput.avg.pct_of_peak_sustained_elapsed", bases).known);
  // A full name listed as such is known too.
  CHECK(kscope::check_metric_name("x__y.sum", {"x__y.sum"}).known);
}

TEST_CASE("metric names: an unknown name lists up to 3 close matches, with the suffix kept") {
  kscope::metric_name_check c = kscope::check_metric_name("dram__byte_read.sum", bases);
  CHECK(!c.known);
  REQUIRE(!c.suggestions.empty());
  CHECK(c.suggestions.size() <= 3);
  CHECK(c.suggestions.front() == "dram__bytes_read.sum");
  CHECK(contains(c.message, "unknown metric 'dram__byte_read.sum'"));
  CHECK(contains(c.message, "did you mean dram__bytes_read.sum"));

  // The Ampere tensor name on GH100: the Hopper name is suggested.
  c = kscope::check_metric_name("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed", bases);
  CHECK(!c.known);
  REQUIRE(!c.suggestions.empty());
  CHECK(c.suggestions.front() == "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed");

  // A truncated name: found by its shared beginning.
  c = kscope::check_metric_name("dram__bytes.sum", bases);
  CHECK(!c.known);
  CHECK(std::find(c.suggestions.begin(), c.suggestions.end(), "dram__bytes_read.sum") != c.suggestions.end());

  // Nothing close: said so.
  c = kscope::check_metric_name("zzzz.sum", bases);
  CHECK(!c.known);
  CHECK(c.suggestions.empty());
  CHECK(contains(c.message, "no metric this device offers is close"));

  // At most three, closest first.
  const std::vector<std::string> many = {"abc__defgh_1", "abc__defgh_2", "abc__defgh_3", "abc__defgh_4",
                                         "abc__defgh_12"};
  const std::vector<std::string> s = kscope::closest_metric_names("abc__defgh_0.sum", many);
  REQUIRE(s.size() == 3);
  CHECK(s[0] == "abc__defgh_1.sum");  // distance 1 each; ties by name
  CHECK(s[1] == "abc__defgh_2.sum");
  CHECK(s[2] == "abc__defgh_3.sum");
}

TEST_CASE("metric names: a missing or misspelt rollup is named as such") {
  kscope::metric_name_check c = kscope::check_metric_name("dram__bytes_read", bases);
  CHECK(!c.known);
  CHECK(contains(c.message, "needs a rollup"));
  c = kscope::check_metric_name("dram__bytes_read.summ", bases);
  CHECK(!c.known);
  CHECK(contains(c.message, "'summ' is not a rollup"));
  REQUIRE(!c.suggestions.empty());
  CHECK(c.suggestions.front() == "dram__bytes_read.sum");
  c = kscope::check_metric_name("sm__throughput.avg.pct_of_peak_sustained_elapse", bases);
  CHECK(!c.known);
  CHECK(contains(c.message, "is not a submetric"));
  REQUIRE(!c.suggestions.empty());
  CHECK(c.suggestions.front() == "sm__throughput.avg.pct_of_peak_sustained_elapsed");
  c = kscope::check_metric_name("lts__t_sector_hit_rate.pct.sum", bases);
  CHECK(!c.known);
  CHECK(contains(c.message, "ends a ratio metric"));
  CHECK(!kscope::check_metric_name("", bases).known);

  const std::string all = kscope::check_metric_names({"dram__bytes_read.sum", "dram__byte_read.sum", "zz.sum"}, bases);
  CHECK(contains(all, "dram__byte_read.sum"));
  CHECK(contains(all, "zz.sum"));
  CHECK(!contains(all, "'dram__bytes_read.sum'"));
  CHECK(kscope::check_metric_names({"dram__bytes_read.sum"}, bases).empty());
}

TEST_CASE("resolving a request: fallbacks taken and noted, defaults missing noted, explicit names must exist") {
  // A device that offers only the fallback (smsp__) FFMA counter and no tensor counters.
  const std::set<std::string> offer = {"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", dram_read, duration};
  const auto is_available = [&offer](const std::string& n) { return offer.count(n) > 0; };

  kscope::metric_request r = kscope::resolve_metric_request({ffma_name, dram_read, dram_read}, is_available, bases);
  CHECK(r.ok());
  CHECK(r.collect == std::vector<std::string>{"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", dram_read});
  REQUIRE(r.notes.size() == 1);
  CHECK(contains(r.notes[0], "collecting smsp__sass_thread_inst_executed_op_ffma_pred_on.sum instead"));

  r = kscope::resolve_metric_request({}, is_available, bases);  // the default set
  CHECK(r.ok());
  CHECK(r.collect.size() == 3);
  CHECK(mentions(r.notes, "sm__throughput.avg.pct_of_peak_sustained_elapsed"));
  CHECK(mentions(r.notes, "left out"));
  CHECK(r.errors.empty());

  r = kscope::resolve_metric_request({dram_read, "dram__byte_read.sum"}, is_available, bases);
  CHECK(!r.ok());
  REQUIRE(r.errors.size() == 1);
  CHECK(contains(r.errors[0], "did you mean dram__bytes_read.sum"));

  // Well formed and listed as a base, but the device's own check refuses it.
  r = kscope::resolve_metric_request({"dram__bytes_write.sum"}, is_available, bases);
  CHECK(!r.ok());
  CHECK(contains(r.errors.at(0), "well formed but this device does not offer it"));

  // Without a device check, the name grammar and the base list decide.
  r = kscope::resolve_metric_request({"lts__t_bytes.sum", "lts__t_bytez.sum"}, nullptr, bases);
  CHECK(r.collect == std::vector<std::string>{"lts__t_bytes.sum"});
  CHECK(r.errors.size() == 1);

  const std::set<std::string> nothing;
  r = kscope::resolve_metric_request({}, [&nothing](const std::string& n) { return nothing.count(n) > 0; }, {});
  CHECK(!r.ok());
  CHECK(contains(r.errors.at(0), "none of the requested metrics"));
}

// ---------------------------------------------------------------------------------------
// Measured roofline

TEST_CASE("measured roofline of a copy kernel: intensity 0, DRAM rate and fraction of the roof") {
  // 1 GB read + 1 GB written in 0.5 ms: 2 GB / 5e-4 s = 4e12 B/s; DRAM roof 5e12 -> 80 %.
  kscope::metric_values v = fp_counters(0, 0, 0);
  v[duration] = 5e5;
  v[dram_read] = 1e9;
  v[dram_write] = 1e9;
  v["lts__t_bytes.sum"] = 2.5e9;
  v["l1tex__t_bytes.sum"] = 2e9;
  kscope::hierarchical_roofs roofs{kscope::roof_line{"fp32 plain", 60e12, 5e12, false}};
  roofs.l2_bytes_per_s = 10e12;  // L1 left unknown
  const kscope::measured_roofline m = kscope::measure_roofline(v, &roofs);
  CHECK(m.seconds == doctest::Approx(5e-4));
  CHECK(m.flops.total == 0);
  CHECK(m.flops_per_s == 0);
  REQUIRE(m.levels.size() == 3);
  const kscope::level_point* dram = m.find(kscope::memory_level::dram);
  REQUIRE(dram);
  CHECK(dram->bytes == 2e9);
  CHECK(dram->intensity == 0);
  CHECK(dram->bytes_per_s == doctest::Approx(4e12));
  CHECK(dram->fraction_of_bandwidth == doctest::Approx(0.8));
  REQUIRE(dram->placed);
  CHECK(dram->placed->limiter == kscope::bound::memory);  // 80 % of the bandwidth roof, below the ridge
  const kscope::level_point* l2 = m.find(kscope::memory_level::l2);
  REQUIRE(l2);
  CHECK(l2->bytes_per_s == doctest::Approx(5e12));
  CHECK(l2->fraction_of_bandwidth == doctest::Approx(0.5));
  const kscope::level_point* l1 = m.find(kscope::memory_level::l1);
  REQUIRE(l1);
  CHECK(std::isnan(l1->roof_bytes_per_s));
  CHECK(!l1->placed);
  CHECK(m.problems.empty());
  const std::string text = kscope::describe(m);
  CHECK(contains(text, "0 FLOP"));
  CHECK(contains(text, "DRAM 2.00 GB"));
  CHECK(contains(text, "80% of 5.00 TB/s"));
}

TEST_CASE("measured roofline of GEMMs: hierarchical points and chart points") {
  // Naive fp32 GEMM n = 512 in 1 ms: 2^28 FLOP -> 268 GFLOP/s; DRAM 3 MiB, L2 64 MiB,
  // L1 1 GiB: intensities 85.3, 4, 0.25 FLOP/B.
  const double n = 512;
  kscope::metric_values v = fp_counters(0, 0, n * n * n);
  v[duration] = 1e6;
  v[dram_read] = 2 * 1048576.0;
  v[dram_write] = 1048576.0;
  v["lts__t_bytes.sum"] = 64 * 1048576.0;
  v["l1tex__t_bytes.sum"] = 1024 * 1048576.0;
  const kscope::measured_roofline m = kscope::measure_roofline(v);  // no roofs: rates only
  CHECK(m.flops_per_s == doctest::Approx(2 * n * n * n / 1e-3));
  CHECK(m.find(kscope::memory_level::dram)->intensity == doctest::Approx(2 * n * n * n / (3 * 1048576.0)));
  CHECK(m.find(kscope::memory_level::l2)->intensity == doctest::Approx(4.0));
  CHECK(m.find(kscope::memory_level::l1)->intensity == doctest::Approx(0.25));
  CHECK(!m.find(kscope::memory_level::dram)->placed);
  const auto point = m.chart_point(kscope::memory_level::l2, "gemm");
  REQUIRE(point);
  CHECK(point->label == "gemm (L2)");
  CHECK(point->intensity == doctest::Approx(4.0));
  CHECK(point->flops_per_s == doctest::Approx(m.flops_per_s));
}

TEST_CASE("measured roofline: zero or missing duration, NaN bytes and missing FLOPs are problems, not numbers") {
  kscope::metric_values v = fp_counters(0, 0, 100);
  v[duration] = 0;
  v[dram_read] = 10;
  v[dram_write] = 10;
  kscope::measured_roofline m = kscope::measure_roofline(v);
  CHECK(std::isnan(m.seconds));
  CHECK(std::isnan(m.flops_per_s));
  CHECK(mentions(m.problems, "not a positive finite time"));
  REQUIRE(m.find(kscope::memory_level::dram));
  CHECK(std::isnan(m.find(kscope::memory_level::dram)->bytes_per_s));
  CHECK(m.find(kscope::memory_level::dram)->intensity == doctest::Approx(10.0));  // 200 / 20
  CHECK(mentions(m.problems, "lts__t_bytes.sum"));  // L2 not measured: said

  v.erase(duration);
  v[dram_read] = nan_value;
  m = kscope::measure_roofline(v);
  CHECK(mentions(m.problems, "no duration"));
  CHECK(!m.find(kscope::memory_level::dram));
  CHECK(mentions(m.problems, "DRAM bytes"));

  kscope::metric_values bytes_only{{duration, 1e3}, {dram_read, 8}, {dram_write, 8}};
  m = kscope::measure_roofline(bytes_only);
  CHECK(mentions(m.problems, "FP instruction counts not measured"));
  CHECK(std::isnan(m.find(kscope::memory_level::dram)->intensity));
  CHECK(m.find(kscope::memory_level::dram)->bytes_per_s == doctest::Approx(16e6));  // 16 B in 1 us
  CHECK(!m.chart_point(kscope::memory_level::dram, "x"));

  v[dram_read] = -1;
  v[duration] = 1;
  CHECK(mentions(kscope::measure_roofline(v).problems, "is not a byte count"));
}

TEST_CASE("declared vs measured: one line past 10 %, none within it") {
  kscope::metric_values v = fp_counters(0, 0, 0);
  v[dram_read] = 300e6;
  v[dram_write] = 148e6;  // 448 MB in one call
  kscope::work_check c = kscope::compare_declared_work({0, 201e6}, v, 1);
  CHECK(c.bytes_differ);
  CHECK(!c.flops_differ);  // 0 declared, 0 executed
  CHECK(c.bytes_ratio == doctest::Approx(448.0 / 201.0));
  CHECK(c.text == "declared 201 MB, DRAM moved 448 MB: 2.2\xC3\x97");

  // Per call: two calls of 224 MB each against 201 MB declared per call: 1.11x.
  c = kscope::compare_declared_work({0, 201e6}, v, 2);
  CHECK(c.measured_dram_bytes == doctest::Approx(224e6));
  CHECK(c.bytes_differ);
  CHECK(c.text == "declared 201 MB, DRAM moved 224 MB: 1.11\xC3\x97");

  // Within 10 %: nothing to say.
  c = kscope::compare_declared_work({0, 430e6}, v, 1);
  CHECK(!c.bytes_differ);
  CHECK(c.text.empty());

  // FLOPs: 2 GFLOP declared, 1 GFLOP executed (fp32), tensor pipe busy: said why.
  kscope::metric_values g = fp_counters(0, 0, 0.5e9);
  g[dram_read] = 1e6;
  g[dram_write] = 0;
  g[tensor_pct] = 80;
  c = kscope::compare_declared_work({2e9, 1e6}, g, 1);
  CHECK(c.flops_differ);
  CHECK(!c.bytes_differ);
  CHECK(c.flops_ratio == doctest::Approx(0.5));
  CHECK(contains(c.text, "declared 2.00 GFLOP, executed 1.00 GFLOP (fp32, SASS FP instructions): 0.5\xC3\x97"));
  CHECK(contains(c.text, "tensor pipe was busy 80%"));

  // Declared nothing, moved bytes: no ratio, still a line. Unmeasured: no line.
  c = kscope::compare_declared_work({0, 0}, v, 1);
  CHECK(c.bytes_differ);
  CHECK(c.text == "declared 0.00 B, DRAM moved 448 MB");
  c = kscope::compare_declared_work({1e9, 1e9}, kscope::metric_values{}, 1);
  CHECK(c.text.empty());
  CHECK(kscope::compare_declared_work({1e9, 1e9}, v, 0).text.empty());
}

// ---------------------------------------------------------------------------------------
// Classification

TEST_CASE("classify a copy kernel: memory-bound at DRAM") {
  kscope::classification_input in;
  in.counters = {{sm_pct, 14.0}, {mem_pct, 92.0}, {dram_pct, 91.5}, {l2_pct, 45.0}, {l1_pct, 30.0}};
  const kscope::classification c = kscope::classify(in);
  CHECK(c.verdict.kind == kscope::bottleneck::memory);
  CHECK(c.verdict.where == "DRAM");
  REQUIRE(fact(c.verdict, dram_pct));
  CHECK(fact(c.verdict, dram_pct)->value == 91.5);
  CHECK(fact(c.verdict, mem_pct)->value == 92.0);
  CHECK(fact(c.verdict, sm_pct)->value == 14.0);
  CHECK(contains(c.verdict.text, "memory-bound: DRAM at 92% of its peak (dram__throughput"));
  CHECK(contains(c.verdict.text, "= 91.5"));
  CHECK(contains(c.verdict.text, "move fewer bytes to and from DRAM"));
  CHECK(c.also.empty());
  CHECK(mentions(c.missing, "launch gaps not checked"));  // no timeline given: said
}

TEST_CASE("classify a streaming copy whose L2 reads busier than DRAM: DRAM at its roof explains L2's fills") {
  // A 256 MiB copy on an H200: lts__throughput 71.9 % (it counts tag lookups and DRAM
  // fills too), dram 63.2 %, and the memory speed-of-light value 63.2 %: DRAM, not L2.
  kscope::classification_input in;
  in.counters = {{sm_pct, 20.4}, {mem_pct, 63.2}, {dram_pct, 63.2}, {l2_pct, 71.9}, {l1_pct, 23.4}};
  const kscope::classification c = kscope::classify(in);
  CHECK(c.verdict.kind == kscope::bottleneck::memory);
  CHECK(c.verdict.where == "DRAM");
  // L2 more than a quarter ahead of DRAM: L2 is the limit.
  in.counters[l2_pct] = 85.0;
  CHECK(kscope::classify(in).verdict.where == "L2");
  // DRAM under its roof: L2 at the roof is the limit.
  in.counters[l2_pct] = 71.9;
  in.counters[dram_pct] = 55.0;
  CHECK(kscope::classify(in).verdict.where == "L2");
}

TEST_CASE("classify a stencil whose memory rollup reads under L2: the top unit decides, not the rollup") {
  // A 5-point stencil on an H200: L2 66 %, DRAM 46 %, SM 38 %, and
  // gpu__compute_memory_throughput 46 %. Nsight Compute's breakdown names L2; so does kscope,
  // not "latency-bound: both under 60 %".
  kscope::classification_input in;
  in.counters = {{sm_pct, 38.0}, {mem_pct, 46.0}, {dram_pct, 46.0}, {l2_pct, 66.0}, {l1_pct, 41.0}};
  const kscope::classification c = kscope::classify(in);
  CHECK(c.verdict.kind == kscope::bottleneck::memory);
  CHECK(c.verdict.where == "L2");
  CHECK(contains(c.verdict.text, "L2 at 66% of its peak"));
  CHECK(contains(c.verdict.text, "keep reused data in L1 / shared memory"));
  REQUIRE(fact(c.verdict, l2_pct));
  CHECK(fact(c.verdict, l2_pct)->value == 66.0);
  CHECK(c.also.empty());
}

TEST_CASE("classify a tensor GEMM: compute-bound (tensor) whatever L1 reads; L1 is the operands' traffic") {
  // cuBLAS HGEMM on an H200 by counters: L1 98 %, tensor pipe 93 %. Not "memory-bound: L1
  // at 98 %: reuse data in registers".
  kscope::classification_input in;
  in.counters = {{sm_pct, 93.0}, {mem_pct, 98.0}, {l1_pct, 98.0}, {l2_pct, 40.0}, {dram_pct, 12.0},
                 {tensor_pct, 93.0}};
  const kscope::classification c = kscope::classify(in);
  CHECK(c.verdict.kind == kscope::bottleneck::compute);
  CHECK(c.verdict.where == "tensor pipe");
  CHECK(contains(c.verdict.text, "tensor pipe busy 93% of its peak"));
  CHECK(contains(c.verdict.text, "the tensor cores are the limit"));
  REQUIRE(c.also.size() == 1);
  CHECK(c.also[0].where == "L1");
  CHECK(contains(c.also[0].text, "operand traffic of the tensor-core MMAs"));
  CHECK(!contains(c.also[0].text, "reuse data in registers"));
  // One-pass stand-ins only (per-scope counters): the same verdict.
  in.counters = {{"l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed", 97.0},
                 {"lts__t_sectors.avg.pct_of_peak_sustained_elapsed", 35.0}, {dram_pct, 10.0}, {tensor_pct, 91.0},
                 {"smsp__issue_active.avg.pct_of_peak_sustained_active", 30.0}};
  const kscope::classification one_pass = kscope::classify(in);
  CHECK(one_pass.verdict.kind == kscope::bottleneck::compute);
  CHECK(one_pass.verdict.where == "tensor pipe");
  // DRAM at its roof beside the tensor roof stays a memory finding with its advice.
  in.counters = {{sm_pct, 80.0}, {mem_pct, 85.0}, {dram_pct, 85.0}, {tensor_pct, 80.0}};
  const kscope::classification both = kscope::classify(in);
  CHECK(both.verdict.where == "tensor pipe");
  REQUIRE(both.also.size() == 1);
  CHECK(both.also[0].kind == kscope::bottleneck::memory);
  CHECK(contains(both.also[0].text, "move fewer bytes to and from DRAM"));
}

TEST_CASE("classify with warp stalls: a dominant reason names the cause, never decides the class") {
  // 31 of 32 warps of a block wait at a barrier: Nsight Compute's barrier stall 73 %.
  kscope::classification_input in;
  in.counters = {{sm_pct, 22.0}, {mem_pct, 18.0}, {occupancy, 90.0}};
  in.stalls = {{"barrier", 0.73, "warps wait at a block barrier"}, {"long_scoreboard", 0.1}, {"selected", 0.1}};
  kscope::classification c = kscope::classify(in);
  CHECK(c.verdict.kind == kscope::bottleneck::latency);
  CHECK(contains(c.verdict.text, "dominant stall: barrier 73% of the warp samples (warps wait at a block barrier)"));
  // The cause comes before occupancy.
  CHECK(c.verdict.text.find("dominant stall") < c.verdict.text.find("achieved occupancy"));
  CHECK(fact(c.verdict, "stall.barrier")->value == 0.73);
  CHECK(!mentions(c.missing, "warp stall reasons"));

  // Long scoreboard under a memory figure below the roof: latency or spills, not saturation.
  in.stalls = {{"long_scoreboard", 0.8}};
  c = kscope::classify(in);
  CHECK(c.verdict.kind == kscope::bottleneck::latency);
  CHECK(contains(c.verdict.text, "not proof of saturation: memory throughput is 18%"));
  CHECK(contains(c.verdict.text, "local-memory spills"));

  // "Not selected" is not a problem to remove.
  in.stalls = {{"not_selected", 0.6}};
  CHECK(contains(kscope::classify(in).verdict.text, "eligible warps to spare, nothing to remove"));

  // No reason over half: the top two, said as such.
  in.stalls = {{"wait", 0.3}, {"barrier", 0.25}, {"drain", 0.05}};
  c = kscope::classify(in);
  CHECK(contains(c.verdict.text, "top stalls: wait 30%, barrier 25% (no reason holds half the samples)"));
  CHECK(!fact(c.verdict, "stall.drain"));

  // Stalls never decide the class: a memory-bound kernel stays memory-bound, the stall beside it.
  in.counters = {{sm_pct, 10.0}, {mem_pct, 90.0}, {dram_pct, 90.0}};
  in.stalls = {{"barrier", 0.9}};
  c = kscope::classify(in);
  CHECK(c.verdict.kind == kscope::bottleneck::memory);
  CHECK(contains(c.verdict.text, "dominant stall: barrier 90%"));
}

TEST_CASE("classify a naive GEMM: memory-bound at L1, not 'check CPU gaps'") {
  // One thread per output, 276 ms per call: the SOL pair says memory (L1), and the timeline
  // says the GPU was busy the whole span.
  kscope::classification_input in;
  in.counters = fp_counters(0, 0, 4096.0 * 4096 * 4096);
  in.counters[sm_pct] = 47.0;
  in.counters[mem_pct] = 94.0;
  in.counters[l1_pct] = 94.0;
  in.counters[l2_pct] = 31.0;
  in.counters[dram_pct] = 3.0;
  in.span_ns = 277e6;
  in.gpu_busy_ns = 276e6;
  const kscope::classification c = kscope::classify(in);
  CHECK(c.verdict.kind == kscope::bottleneck::memory);
  CHECK(c.verdict.where == "L1");
  CHECK(contains(c.verdict.text, "L1 at 94% of its peak"));
  CHECK(!contains(c.verdict.text, "CPU gaps"));
  REQUIRE(fact(c.verdict, "timeline.gpu_idle_share"));
  CHECK(fact(c.verdict, "timeline.gpu_idle_share")->value == doctest::Approx(1.0 / 277));
  CHECK(!mentions(c.missing, "launch gaps"));
}

TEST_CASE("classify a tiled GEMM: compute-bound, FP32 pipe by the instruction mix") {
  kscope::classification_input in;
  in.counters = fp_counters(1e6, 0, 68.7e9);
  in.counters[sm_pct] = 81.0;
  in.counters[mem_pct] = 52.0;
  in.counters[tensor_pct] = 0.0;
  const kscope::classification c = kscope::classify(in);
  CHECK(c.verdict.kind == kscope::bottleneck::compute);
  CHECK(c.verdict.where == "FP32 pipe");
  REQUIRE(fact(c.verdict, ffma_name));
  CHECK(fact(c.verdict, ffma_name)->value == 68.7e9);
  CHECK(fact(c.verdict, sm_pct)->value == 81.0);
  CHECK(contains(c.verdict.text, "compute-bound: SM throughput 81% of peak"));
  // 1e6 + 2 * 68.7e9 FLOP, all fp32:
  CHECK(contains(c.verdict.text, "busy pipe by the instruction mix: FP32 pipe (fp32 100% of 137 GFLOP"));
  CHECK(contains(c.verdict.text, "pipe utilisation not measured"));
  CHECK(c.also.empty());  // memory at 52 %: not at a roof
}

TEST_CASE("classify compute-bound kernels: tensor pipe, measured pipes, no FP, nothing to name the pipe") {
  kscope::classification_input in;
  in.counters = {{sm_pct, 88.0}, {mem_pct, 40.0}, {tensor_pct, 91.0}};
  kscope::classification c = kscope::classify(in);
  CHECK(c.verdict.where == "tensor pipe");
  CHECK(fact(c.verdict, tensor_pct)->value == 91.0);

  in.counters = {{sm_pct, 88.0},
                 {mem_pct, 40.0},
                 {tensor_pct, 2.0},
                 {"sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active", 85.0},
                 {"sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", 30.0}};
  c = kscope::classify(in);
  CHECK(c.verdict.where == "ALU pipe");
  CHECK(contains(c.verdict.text, "busiest pipe: ALU pipe 85%"));

  in.counters = fp_counters(0, 0, 0);
  in.counters[sm_pct] = 70.0;
  in.counters[mem_pct] = 10.0;
  c = kscope::classify(in);
  CHECK(c.verdict.where == "non-FP pipes");

  in.counters = {{sm_pct, 70.0}, {mem_pct, 10.0}};
  c = kscope::classify(in);
  CHECK(c.verdict.kind == kscope::bottleneck::compute);
  CHECK(contains(c.verdict.text, "the busy pipe was not measured"));
  CHECK(mentions(c.missing, "which pipe is busy is unknown"));
}

TEST_CASE("classify a tiny-grid kernel: latency-bound, with occupancy, grid and stalls as evidence") {
  kscope::classification_input in;
  in.counters = {{sm_pct, 1.5}, {mem_pct, 0.8}, {occupancy, 3.1}};
  in.grid_blocks = 4;
  in.sm_count = 132;
  in.stalls = {{"long_scoreboard", 0.52}, {"not_selected", 0.01}, {"barrier", 0.2}};
  in.span_ns = 50e3;
  in.gpu_busy_ns = 48e3;
  const kscope::classification c = kscope::classify(in);
  CHECK(c.verdict.kind == kscope::bottleneck::latency);
  CHECK(contains(c.verdict.text,
                 "latency-bound: SM throughput 1.5% and memory throughput 0.8% of peak, both under 60%"));
  CHECK(contains(c.verdict.text, "achieved occupancy 3.1%"));
  CHECK(contains(c.verdict.text, "grid of 4 blocks for 132 SMs: 128 SMs have no work"));
  CHECK(contains(c.verdict.text, "dominant stall: long scoreboard 52% of the warp samples"));
  CHECK(contains(c.verdict.text, "the time is inside the kernels"));
  CHECK(fact(c.verdict, occupancy)->value == 3.1);
  CHECK(fact(c.verdict, "launch.grid_blocks")->value == 4);
  CHECK(fact(c.verdict, "device.sm_count")->value == 132);
  CHECK(fact(c.verdict, "stall.long_scoreboard")->value == 0.52);
  CHECK(!fact(c.verdict, "stall.barrier"));  // a dominant reason stands alone
  CHECK(c.missing.empty());
}

TEST_CASE("classify latency without evidence of why: says which evidence is missing") {
  kscope::classification_input in;
  in.counters = {{sm_pct, 20.0}, {mem_pct, 30.0}};
  const kscope::classification c = kscope::classify(in);
  CHECK(c.verdict.kind == kscope::bottleneck::latency);
  CHECK(contains(c.verdict.text, "no evidence of why"));
  CHECK(mentions(c.missing, occupancy));
  CHECK(mentions(c.missing, "grid size and SM count"));
  CHECK(mentions(c.missing, "warp stall reasons"));

  in.counters[occupancy] = 60.0;  // high occupancy: not the cause, and said so
  in.grid_blocks = 1000;
  in.sm_count = 100;
  const kscope::classification d = kscope::classify(in);
  CHECK(contains(d.verdict.text, "achieved occupancy 60% is not low"));
  CHECK(contains(d.verdict.text, "grid of 1000 blocks (10 per SM) fills the SMs"));
}

TEST_CASE("classify launch gaps: launch/CPU-bound, the kernels' own verdict beside it") {
  kscope::classification_input in;
  in.counters = {{sm_pct, 70.0}, {mem_pct, 20.0}};
  in.span_ns = 100e3;
  in.gpu_busy_ns = 20e3;  // idle 80 %
  const kscope::classification c = kscope::classify(in);
  CHECK(c.verdict.kind == kscope::bottleneck::launch);
  CHECK(fact(c.verdict, "timeline.gpu_idle_share")->value == doctest::Approx(0.8));
  CHECK(fact(c.verdict, "timeline.span_ns")->value == 100e3);
  CHECK(contains(c.verdict.text, "launch/CPU-bound: GPU idle 80% of the scope's span"));
  CHECK(contains(c.verdict.text, "20.0 us of 100 us per call"));
  CHECK(contains(c.verdict.text, "check CPU gaps"));
  REQUIRE(c.also.size() == 1);
  CHECK(c.also[0].kind == kscope::bottleneck::compute);

  // Exactly at the threshold counts; just under does not.
  in.gpu_busy_ns = 50e3;
  CHECK(kscope::classify(in).verdict.kind == kscope::bottleneck::launch);
  in.gpu_busy_ns = 50.1e3;
  CHECK(kscope::classify(in).verdict.kind == kscope::bottleneck::compute);

  // The timeline alone decides launch-bound, even with no counters at all.
  kscope::classification_input only_timeline;
  only_timeline.span_ns = 1e6;
  only_timeline.gpu_busy_ns = 1e4;
  const kscope::classification t = kscope::classify(only_timeline);
  CHECK(t.verdict.kind == kscope::bottleneck::launch);
  REQUIRE(t.also.size() == 1);
  CHECK(t.also[0].kind == kscope::bottleneck::undetermined);
}

TEST_CASE("classify at both roofs: the higher one wins, the other is a second finding") {
  kscope::classification_input in;
  in.counters = {{sm_pct, 75.0}, {mem_pct, 85.0}, {dram_pct, 85.0}};
  const kscope::classification c = kscope::classify(in);
  CHECK(c.verdict.kind == kscope::bottleneck::memory);
  REQUIRE(c.also.size() == 1);
  CHECK(c.also[0].kind == kscope::bottleneck::compute);
  // The threshold itself counts as at the roof.
  in.counters = {{sm_pct, 60.0}, {mem_pct, 10.0}};
  CHECK(kscope::classify(in).verdict.kind == kscope::bottleneck::compute);
  in.counters = {{sm_pct, 59.9}, {mem_pct, 10.0}};
  CHECK(kscope::classify(in).verdict.kind == kscope::bottleneck::latency);
  kscope::classification_thresholds strict;
  strict.at_roof_pct = 80;
  in.counters = {{sm_pct, 75.0}, {mem_pct, 10.0}};
  CHECK(kscope::classify(in, strict).verdict.kind == kscope::bottleneck::latency);
}

TEST_CASE("classify memory-bound without per-level %: level from bytes and roofs, or said unknown") {
  kscope::classification_input in;
  in.counters = {{sm_pct, 10.0}, {mem_pct, 80.0}, {duration, 1e6}, {dram_read, 1e9}, {dram_write, 1e9},
                 {"lts__t_bytes.sum", 3e9}};
  kscope::classification c = kscope::classify(in);
  CHECK(c.verdict.kind == kscope::bottleneck::memory);
  CHECK(c.verdict.where.empty());
  CHECK(contains(c.verdict.text, "the limiting level was not measured"));
  CHECK(mentions(c.missing, "which memory level is the limit is unknown"));

  // DRAM 2e12 B/s of 2.5e12 (80 %), L2 3e12 of 10e12 (30 %): DRAM.
  kscope::hierarchical_roofs roofs{kscope::roof_line{"fp32", 60e12, 2.5e12, false}};
  roofs.l2_bytes_per_s = 10e12;
  in.roofs = roofs;
  c = kscope::classify(in);
  CHECK(c.verdict.where == "DRAM");
  CHECK(contains(c.verdict.text, "DRAM at 80% of its bandwidth roof"));
  REQUIRE(fact(c.verdict, "measured.DRAM_bytes_per_s"));
  CHECK(fact(c.verdict, "measured.DRAM_bytes_per_s")->value == doctest::Approx(2e12));
}

TEST_CASE("classify with missing or bad counters: undetermined, naming what is missing") {
  kscope::classification_input in;
  in.counters = {{mem_pct, 95.0}};  // SM throughput missing: memory at a roof is not enough to decide
  kscope::classification c = kscope::classify(in);
  CHECK(c.verdict.kind == kscope::bottleneck::undetermined);
  CHECK(contains(c.verdict.text, sm_pct));
  CHECK(!contains(c.verdict.text, mem_pct));
  CHECK(mentions(c.missing, sm_pct));
  CHECK(fact(c.verdict, mem_pct)->value == 95.0);  // what was there is still shown

  in.counters = {{sm_pct, nan_value}, {mem_pct, -3.0}};  // NaN and negative are not percentages
  c = kscope::classify(in);
  CHECK(c.verdict.kind == kscope::bottleneck::undetermined);
  CHECK(mentions(c.missing, sm_pct));
  CHECK(mentions(c.missing, mem_pct));
  CHECK(c.verdict.facts.empty());

  in.counters = {};
  in.span_ns = 0;  // a zero span is no timeline
  in.gpu_busy_ns = 0;
  c = kscope::classify(in);
  CHECK(c.verdict.kind == kscope::bottleneck::undetermined);
  CHECK(mentions(c.missing, "launch gaps not checked"));
  CHECK(std::string(kscope::to_string(kscope::bottleneck::launch)) == "launch/CPU-bound");
}

// ---------------------------------------------------------------------------------------
// The CUPTI side, where it runs without a GPU

TEST_CASE("counter states have names and CUPTI errors map to one clear reason") {
  CHECK(std::string(kscope::to_string(kscope::counter_state::collected)) == "collected");
  CHECK(std::string(kscope::to_string(kscope::counter_state::no_permission)) == "no permission");
#if KSCOPE_HAS_RANGE_PROFILER
  using kscope::detail::counter_state_for;
  CHECK(counter_state_for(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) == kscope::counter_state::no_permission);
  CHECK(counter_state_for(CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES) ==
        kscope::counter_state::no_permission);
  CHECK(counter_state_for(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) == kscope::counter_state::busy);
  CHECK(counter_state_for(CUPTI_ERROR_HARDWARE_BUSY) == kscope::counter_state::busy);
  CHECK(counter_state_for(CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED) == kscope::counter_state::busy);
  CHECK(counter_state_for(CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED) == kscope::counter_state::unsupported_device);
  CHECK(counter_state_for(CUPTI_ERROR_NOT_SUPPORTED) == kscope::counter_state::unsupported_device);
  CHECK(counter_state_for(CUPTI_ERROR_UNKNOWN) == kscope::counter_state::failed);
  const std::string why = kscope::detail::counter_error_advice(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES);
  CHECK(contains(why, "NVreg_RestrictProfilingToAdminUsers=0"));
  CHECK(contains(why, "SYS_ADMIN"));
  CHECK(contains(kscope::detail::counter_error_advice(CUPTI_ERROR_HARDWARE_BUSY), "Nsight Compute"));
  CHECK(kscope::detail::counter_error_advice(CUPTI_ERROR_UNKNOWN).empty());

  // A failing step becomes the pass's one message: the call, the error and the fix.
  kscope::detail::counter_setup setup;
  CHECK(!setup.cupti_ok(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES, "cuptiProfilerGetCounterAvailability"));
  CHECK(setup.state == kscope::counter_state::no_permission);
  CHECK(contains(setup.message, "hardware counters unavailable: cuptiProfilerGetCounterAvailability failed with"));
  CHECK(contains(setup.message, "NVreg_RestrictProfilingToAdminUsers=0"));
  CHECK(setup.message.find('\n') == std::string::npos);  // one line
  CHECK(setup.cupti_ok(CUPTI_SUCCESS, "cuptiRangeProfilerStart"));
#endif
}

#if !KSCOPE_HAS_RANGE_PROFILER
TEST_CASE("built without the range profiler headers: counters are disabled, with the reason") {
  int calls = 0;
  const kscope::counter_result r = kscope::profile_counters({}, [&] { ++calls; });
  CHECK(r.state == kscope::counter_state::disabled);
  CHECK(contains(r.message, "cupti_range_profiler.h"));
  CHECK(calls == 0);
  const kscope::counter_metric_list list = kscope::list_counter_metrics();
  CHECK(list.state == kscope::counter_state::disabled);
  CHECK(list.base_metrics.empty());
}
#endif

#if KSCOPE_HAS_RANGE_PROFILER
TEST_CASE("libnvperf_host: searched beside libcupti first; an explicit path is the only one tried") {
  const std::vector<std::string> c = kscope::detail::nvperf_host_candidates("", "/opt/cuda/lib64/libcupti.so.13");
  REQUIRE(!c.empty());
  CHECK(c.front() == "/opt/cuda/lib64/libnvperf_host.so");
  CHECK(c.back() == "libnvperf_host.so");  // the default search last
  CHECK(kscope::detail::nvperf_host_candidates("/x/libnvperf_host.so", "/opt/cuda/lib64/libcupti.so.13") ==
        std::vector<std::string>{"/x/libnvperf_host.so"});

  std::string why;
  CHECK(!kscope::detail::load_nvperf_host("/nonexistent/libnvperf_host.so", "", why));
  CHECK(contains(why, "libnvperf_host.so, which CUPTI needs to configure counters, not found"));
  CHECK(contains(why, "/nonexistent/libnvperf_host.so"));
}

TEST_CASE("a libcupti without the range profiler is named by its first missing entry point") {
  void* libm = ::dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);  // any library without CUPTI's symbols
  REQUIRE(libm != nullptr);
  kscope::detail::profiler_api api;
  CHECK(kscope::detail::resolve_profiler_symbols(libm, api) == "cuptiProfilerInitialize");
  CHECK(!api.resolved());
  ::dlclose(libm);
}
#endif

TEST_CASE("profile_counters refuses bad options before touching the GPU, and never calls the work") {
  int calls = 0;
  kscope::counter_options o;
  o.max_kernels = 0;
  kscope::counter_result r = kscope::profile_counters({"dram__bytes_read.sum"}, [&] { ++calls; }, o);
  CHECK(r.state == kscope::counter_state::invalid_request);
  CHECK(contains(r.message, "max_kernels"));
  CHECK(calls == 0);
  CHECK(!r.ok());

  o = {};
  r = kscope::profile_counters({"dram__bytes_read.sum", ""}, [&] { ++calls; }, o);
  CHECK(r.state == kscope::counter_state::invalid_request);
  CHECK(contains(r.message, "empty metric name"));
  CHECK(calls == 0);

  o.ranges = kscope::counter_ranges::whole_callable;
  o.range_name = "";
  r = kscope::profile_counters({}, [&] { ++calls; }, o);
  CHECK(r.state == kscope::counter_state::invalid_request);
  CHECK(contains(r.message, "range_name"));
  CHECK(calls == 0);

  // Consecutive ranges (the per-scope counters' stretches): a name for the first, and room
  // for at least one range.
  o.ranges = kscope::counter_ranges::consecutive;
  r = kscope::profile_counters({}, [&] { ++calls; }, o);
  CHECK(r.state == kscope::counter_state::invalid_request);
  CHECK(contains(r.message, "range_name"));
  o.range_name = "step";
  o.max_kernels = 0;
  r = kscope::profile_counters({}, [&] { ++calls; }, o);
  CHECK(r.state == kscope::counter_state::invalid_request);
  CHECK(contains(r.message, "max_kernels"));
  o.max_kernels = kscope::counter_max_kernels_limit + 1;
  r = kscope::profile_counters({}, [&] { ++calls; }, o);
  CHECK(r.state == kscope::counter_state::invalid_request);
  CHECK(calls == 0);
}

TEST_CASE("aggregation under rotating one-pass groups: sums scaled to every call, each metric's calls counted") {
  // Four calls, two groups: A = {duration, dram_read} in calls 1 and 3, B = {duration, sm_pct,
  // fp32_fma} in calls 2 and 4; each call runs two kernels.
  const std::string fma = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum";
  kscope::counter_aggregate scope;
  for (int call = 0; call < 4; ++call) {
    kscope::counter_values k1, k2;
    if (call % 2 == 0) {
      k1.values = {{duration, 100}, {dram_read, 1000}};
      k2.values = {{duration, 100}, {dram_read, 3000}};
    } else {
      k1.values = {{duration, 100}, {sm_pct, 40}, {fma, 10}};
      k2.values = {{duration, 300}, {sm_pct, 80}};  // this kernel's FMA count was not given: missing
    }
    scope.add_call({k1, k2});
  }
  CHECK(scope.calls() == 4);
  CHECK(scope.kernels() == 8);
  // duration in every call: 4 x (200 or 400) = 1200, not scaled.
  CHECK(scope.total(duration) == 1200);
  CHECK(scope.find(duration)->calls == 4);
  // DRAM reads from 2 of 4 calls (2 x 4000 = 8000), scaled to 4 calls: 16000 (4000 per call).
  CHECK(scope.find(dram_read)->calls == 2);
  CHECK(scope.total(dram_read) == doctest::Approx(16000));
  CHECK(scope.find(dram_read)->missing == 0);
  // A percentage is the duration-weighted mean over the calls that measured it: (40 + 240) / 4 = 70.
  CHECK(scope.total(sm_pct) == doctest::Approx(70.0));
  CHECK(scope.find(sm_pct)->calls == 2);
  // FMA: 2 kernels measured of the 4 in its two calls; 20 over 2 calls -> 40 for 4.
  CHECK(scope.find(fma)->missing == 2);
  CHECK(scope.total(fma) == doctest::Approx(40));
}

// CUPTI evaluated the DRAM counters of one per-scope pass as NaN in every range (H100, CUDA
// 13.0): that call must not count for them, or the two-call average halves (the GPU test
// read 279 MB per call for a 537 MB copy).
TEST_CASE("aggregation under rotation: a call whose metric is NaN in every kernel does not count for it") {
  kscope::counter_aggregate scope;
  kscope::counter_values good, unvalued, other;
  good.values = {{duration, 100}, {dram_read, 4000}};
  unvalued.values = {{duration, 100}, {dram_read, nan_value}};
  other.values = {{duration, 100}, {sm_pct, 50}};
  scope.add_call({good});
  scope.add_call({unvalued});
  scope.add_call({other});
  scope.add_call({other});
  CHECK(scope.calls() == 4);
  REQUIRE(scope.find(dram_read));
  CHECK(scope.find(dram_read)->calls == 1);
  CHECK(scope.find(dram_read)->missing == 0);
  // One call's 4000 scaled to four calls: 4000 per call, not 2000.
  CHECK(scope.total(dram_read) == doctest::Approx(16000));
  CHECK(scope.find(duration)->calls == 4);

  SUBCASE("a NaN beside a value in the same call: the call counts, the kernel is missing") {
    kscope::counter_aggregate mixed;
    kscope::counter_values second = unvalued;
    mixed.add_call({good, second});
    CHECK(mixed.find(dram_read)->calls == 1);
    CHECK(mixed.find(dram_read)->missing == 1);
    CHECK(mixed.total(dram_read) == doctest::Approx(4000));
  }
}

TEST_CASE("one-pass plan: stand-ins for multi-pass metrics, first-fit groups, duration in each") {
  // A fake device: sm__throughput needs 8 passes, lts__throughput 4 (its one-pass stand-in is
  // the catalog's next name), gpu__compute_memory_throughput 5 with no stand-in; any three
  // other metrics fit in one pass (duration does not count).
  const auto passes = [](const std::vector<std::string>& names) -> std::size_t {
    std::size_t others = 0;
    for (const std::string& n : names) {
      if (n == "sm__throughput.avg.pct_of_peak_sustained_elapsed") return names.size() == 1 ? 8 : 9;
      if (n == "lts__throughput.avg.pct_of_peak_sustained_elapsed") return 4;
      if (n == "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed") return 5;
      if (n == "not.offered") return 0;
      if (n != "gpu__time_duration.sum") ++others;
    }
    return others <= 3 ? 1 : 2;
  };
  const std::vector<std::string> wanted = {"gpu__time_duration.sum",
                                           "dram__bytes_read.sum",
                                           "dram__bytes_write.sum",
                                           "sm__throughput.avg.pct_of_peak_sustained_elapsed",
                                           "lts__throughput.avg.pct_of_peak_sustained_elapsed",
                                           "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
                                           "lts__t_bytes.sum",
                                           "l1tex__t_bytes.sum",
                                           "not.offered",
                                           "dram__bytes_read.sum"};
  const kscope::one_pass_plan plan = kscope::plan_one_pass_groups(wanted, passes);
  // Singles in order: read, write, lts sectors (stand-in), lts bytes, l1 bytes.
  REQUIRE(plan.groups.size() == 2);
  CHECK(plan.groups[0] == std::vector<std::string>{"gpu__time_duration.sum", "dram__bytes_read.sum",
                                                   "dram__bytes_write.sum",
                                                   "lts__t_sectors.avg.pct_of_peak_sustained_elapsed"});
  CHECK(plan.groups[1] == std::vector<std::string>{"gpu__time_duration.sum", "lts__t_bytes.sum", "l1tex__t_bytes.sum"});
  for (const auto& g : plan.groups) CHECK(passes(g) == 1);
  REQUIRE(plan.notes.size() == 4);
  CHECK(plan.notes[0].find("sm__throughput") == 0);
  CHECK(plan.notes[0].find("needs 8 passes alone: not collected per scope") != std::string::npos);
  CHECK(plan.notes[1].find("collect lts__t_sectors.avg.pct_of_peak_sustained_elapsed instead") != std::string::npos);
  CHECK(plan.notes[2].find("needs 5 passes alone") != std::string::npos);
  CHECK(plan.notes[3].find("not.offered cannot be configured") == 0);
  // Nothing collectable: one group with the duration alone.
  CHECK(kscope::plan_one_pass_groups({"not.offered"}, passes).groups.size() == 1);
}

TEST_CASE("one-pass plan: a metric that needs a second pass beside the duration gets a group without it") {
  // As GH100's SASS instruction counters: one pass alone, two beside gpu__time_duration.sum
  // or beside each other.
  const auto passes = [](const std::vector<std::string>& names) -> std::size_t {
    std::size_t sass = 0, others = 0;
    for (const std::string& n : names) (n.find("sass") != std::string::npos ? sass : others) += 1;
    return sass == 0 || (sass == 1 && others == 0) ? 1 : 2;
  };
  const std::vector<std::string> wanted = {"gpu__time_duration.sum", "dram__bytes_read.sum",
                                           "sm__sass_thread_inst_executed_op_ffma_pred_on.sum",
                                           "sm__sass_thread_inst_executed_op_fadd_pred_on.sum"};
  const kscope::one_pass_plan plan = kscope::plan_one_pass_groups(wanted, passes);
  REQUIRE(plan.groups.size() == 3);
  CHECK(plan.groups[0] == std::vector<std::string>{"gpu__time_duration.sum", "dram__bytes_read.sum"});
  CHECK(plan.groups[1] == std::vector<std::string>{"sm__sass_thread_inst_executed_op_ffma_pred_on.sum"});
  CHECK(plan.groups[2] == std::vector<std::string>{"sm__sass_thread_inst_executed_op_fadd_pred_on.sum"});
  for (const auto& g : plan.groups) CHECK(passes(g) == 1);  // every group one pass, as collected
  bool said = false;
  for (const std::string& n : plan.notes) said |= n.find("does not fit one pass beside gpu__time_duration.sum") != std::string::npos;
  CHECK(said);
}

TEST_CASE("classify without the speed-of-light rollups: the busiest measured unit stands in, and says so") {
  kscope::classification_input in;
  in.counters = {{"dram__throughput.avg.pct_of_peak_sustained_elapsed", 81},
                 {"lts__t_sectors.avg.pct_of_peak_sustained_elapsed", 55},
                 {"smsp__issue_active.avg.pct_of_peak_sustained_active", 22},
                 {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", 3}};
  const kscope::classification c = kscope::classify(in);
  CHECK(c.verdict.kind == kscope::bottleneck::memory);
  CHECK(c.verdict.where == "DRAM");
  bool said_sm = false, said_mem = false;
  for (const std::string& m : c.missing) {
    said_sm = said_sm || (m.find("sm__throughput") == 0 && m.find("smsp__issue_active") != std::string::npos);
    said_mem = said_mem || (m.find("gpu__compute_memory_throughput") == 0 &&
                            m.find("dram__throughput") != std::string::npos);
  }
  CHECK(said_sm);
  CHECK(said_mem);
  // Nothing of either side measured: still undetermined, never guessed.
  kscope::classification_input none;
  none.counters = {{"dram__bytes_read.sum", 1e6}};
  CHECK(kscope::classify(none).verdict.kind == kscope::bottleneck::undetermined);
}

TEST_CASE("one-pass plan: a rollup with a breakdown on its chip is planned as its parts") {
  // A fake GH100: the rollups need several passes, every part one pass alone, and any four
  // metrics fit one pass; one lts part cannot be configured when `broken` is set.
  bool broken = false;
  const auto passes = [&broken](const std::vector<std::string>& names) -> std::size_t {
    std::size_t others = 0;
    for (const std::string& n : names) {
      if (n == "lts__throughput.avg.pct_of_peak_sustained_elapsed") return 4;
      if (broken && n == "lts__d_decomp_input_sectors.avg.pct_of_peak_sustained_elapsed") return 0;
      if (n != "gpu__time_duration.sum") ++others;
    }
    return others <= 4 ? 1 : 2;
  };
  const std::vector<std::string> wanted = {"gpu__time_duration.sum", "lts__throughput.avg.pct_of_peak_sustained_elapsed"};
  const kscope::metric_breakdown* lts = kscope::find_breakdown(wanted[1], "GH100");
  REQUIRE(lts != nullptr);
  CHECK(kscope::find_breakdown(wanted[1], "GA100") == nullptr);  // another chip: no breakdown
  const kscope::one_pass_plan plan = kscope::plan_one_pass_groups(wanted, passes, "GH100");
  std::vector<std::string> planned;
  for (const auto& g : plan.groups) {
    CHECK(passes(g) == 1);
    for (const std::string& m : g)
      if (m != "gpu__time_duration.sum") planned.push_back(m);
  }
  CHECK(planned == lts->parts);  // every part once, in the breakdown's order
  REQUIRE(plan.notes.size() == 1);
  CHECK(plan.notes[0].find("measure its 11 parts") != std::string::npos);
  // Without the chip's breakdown: the catalog's one-pass stand-in, as before.
  const kscope::one_pass_plan other = kscope::plan_one_pass_groups(wanted, passes, "GA100");
  REQUIRE(other.groups.size() == 1);
  CHECK(other.groups[0].back() == "lts__t_sectors.avg.pct_of_peak_sustained_elapsed");
  // A part that does not fit one pass: the rollup is not measured, and the note says why.
  broken = true;
  const kscope::one_pass_plan partial = kscope::plan_one_pass_groups(wanted, passes, "GH100");
  REQUIRE(partial.notes.size() == 1);
  CHECK(partial.notes[0].find("1 of its 11 parts do not fit one pass") != std::string::npos);
  CHECK(partial.notes[0].find("a lower bound") != std::string::npos);
}

namespace {
// One kernel of a per-scope call: its duration and some metrics.
kscope::counter_values kernel_with(double duration_ns, kscope::metric_values values) {
  kscope::counter_values k;
  k.values = std::move(values);
  k.values.emplace("gpu__time_duration.sum", duration_ns);
  return k;
}
}  // namespace

TEST_CASE("aggregate: a busiest-part rollup is put back together kernel by kernel, not from the scope's means") {
  const kscope::metric_breakdown& lts = *kscope::find_breakdown("lts__throughput.avg.pct_of_peak_sustained_elapsed", "GH100");
  const std::string xbar = "lts__xbar2lts_cycles_active.avg.pct_of_peak_sustained_elapsed";
  const std::string sectors = "lts__t_sectors.avg.pct_of_peak_sustained_elapsed";
  // Call A measures every part but xbar2lts, call B xbar2lts alone (two one-pass groups).
  // Kernel 0 (3 ms): xbar2lts 83 %, sectors 25 %; kernel 1 (1 ms): xbar2lts 10 %, sectors 70 %.
  kscope::metric_values a0, a1;
  for (const std::string& p : lts.parts) {
    if (p == xbar) continue;
    a0.emplace(p, p == sectors ? 25.0 : 1.0);
    a1.emplace(p, p == sectors ? 70.0 : 1.0);
  }
  kscope::counter_aggregate agg;
  agg.add_call({kernel_with(3e6, a0), kernel_with(1e6, a1)});
  agg.add_call({kernel_with(3e6, {{xbar, 83.0}}), kernel_with(1e6, {{xbar, 10.0}})});
  const kscope::metric_values totals = agg.totals();
  const auto it = totals.find(lts.rollup);
  REQUIRE(it != totals.end());
  // Per kernel the busiest part: 83 and 70, weighted by time: (83 x 3 + 70 x 1) / 4. The
  // busiest of the scope's means would say 64.75 (xbar2lts's mean), too low.
  CHECK(it->second == doctest::Approx(79.75));
  const auto m = agg.metrics();
  REQUIRE(m.count(lts.rollup) == 1);
  CHECK(m.at(lts.rollup).calls == 1);  // each part rests on one call
  CHECK(m.at(lts.rollup).weighted);
  // The classification reads it as measured: L2 at the roof, not a lower-bound stand-in.
  kscope::classification_input in;
  in.counters = totals;
  in.counters.emplace("sm__throughput.avg.pct_of_peak_sustained_elapsed", 6.0);
  in.counters.emplace("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 79.75);
  const kscope::classification c = kscope::classify(in);
  CHECK(c.verdict.kind == kscope::bottleneck::memory);
  CHECK(c.verdict.where == "L2");
}

TEST_CASE("aggregate: no rollup from parts when a part is missing or the calls' kernels differ") {
  const kscope::metric_breakdown& lts = *kscope::find_breakdown("lts__throughput.avg.pct_of_peak_sustained_elapsed", "GH100");
  kscope::metric_values all_but_one;
  for (std::size_t i = 1; i < lts.parts.size(); ++i) all_but_one.emplace(lts.parts[i], 50.0);
  kscope::counter_aggregate missing;
  missing.add_call({kernel_with(1e6, all_but_one)});
  CHECK(missing.totals().count(lts.rollup) == 0);  // the missing part could be the busiest
  kscope::metric_values every;
  for (const std::string& p : lts.parts) every.emplace(p, 40.0);
  kscope::counter_aggregate varying;
  varying.add_call({kernel_with(1e6, every)});
  varying.add_call({kernel_with(1e6, every), kernel_with(1e6, every)});  // a call of two kernels
  CHECK(varying.totals().count(lts.rollup) == 0);  // kernels cannot be matched by position
  kscope::counter_aggregate same;
  same.add_call({kernel_with(1e6, every)});
  same.add_call({kernel_with(2e6, every)});
  REQUIRE(same.totals().count(lts.rollup) == 1);
  CHECK(same.totals().at(lts.rollup) == doctest::Approx(40.0));
  // Measured itself: the measured value stands, no composition.
  kscope::counter_aggregate measured;
  kscope::metric_values with_rollup = every;
  with_rollup.emplace(lts.rollup, 55.0);
  measured.add_call({kernel_with(1e6, with_rollup)});
  CHECK(measured.totals().at(lts.rollup) == doctest::Approx(55.0));
}

TEST_CASE("aggregate: the tensor pipe's fp16 FLOPs are the HMMA and HGMMA counts summed, scaled to all calls") {
  const std::string hmma16 = "sm__ops_path_tensor_op_hmma_src_fp16_dst_fp16.sum",
                    hmma32 = "sm__ops_path_tensor_op_hmma_src_fp16_dst_fp32.sum",
                    hgmma = "sm__ops_path_tensor_op_hgmma_src_fp16.sum";
  kscope::counter_aggregate agg;
  agg.add_call({kernel_with(1e6, {{hmma16, 1e9}})});
  agg.add_call({kernel_with(1e6, {{hmma32, 2e9}, {hgmma, 4e9}})});
  agg.add_call({kernel_with(1e6, {{"dram__bytes_read.sum", 1e6}})});
  // Each part from one of three calls, scaled to all three: 3e9 + 6e9 + 12e9.
  const kscope::metric_values totals = agg.totals();
  REQUIRE(totals.count("sm__ops_path_tensor_src_fp16.sum") == 1);
  CHECK(totals.at("sm__ops_path_tensor_src_fp16.sum") == doctest::Approx(21e9));
  const kscope::flop_count f = kscope::count_flops(totals);
  CHECK(f.tensor == doctest::Approx(21e9));
  // A part never measured: no fp16 tensor count at all (it could hold most of them).
  kscope::counter_aggregate partial;
  partial.add_call({kernel_with(1e6, {{hgmma, 4e9}})});
  CHECK(partial.totals().count("sm__ops_path_tensor_src_fp16.sum") == 0);
}

TEST_CASE("classify: stand-ins under the roof do not make a kernel latency-bound") {
  // The one-pass stand-ins of a naive transpose on an H100: L2 sectors 26 %, issue 6 %, where
  // lts__throughput (not measured) was 86 %.
  kscope::classification_input in;
  in.counters = {{"lts__t_sectors.avg.pct_of_peak_sustained_elapsed", 25.8},
                 {"dram__throughput.avg.pct_of_peak_sustained_elapsed", 14.7},
                 {"smsp__issue_active.avg.pct_of_peak_sustained_active", 6.2}};
  const kscope::classification c = kscope::classify(in);
  CHECK(c.verdict.kind == kscope::bottleneck::undetermined);
  CHECK(c.verdict.text.find("lower bounds") != std::string::npos);
  CHECK(c.verdict.text.find("gpu__compute_memory_throughput") != std::string::npos);
  // A stand-in at the roof still decides: a lower bound at 85 % means at least 85 %.
  in.counters["lts__t_sectors.avg.pct_of_peak_sustained_elapsed"] = 85.0;
  CHECK(kscope::classify(in).verdict.kind == kscope::bottleneck::memory);
  // Both rollups measured and under the roof: latency-bound.
  kscope::classification_input measured;
  measured.counters = {{"sm__throughput.avg.pct_of_peak_sustained_elapsed", 10.0},
                       {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 20.0}};
  CHECK(kscope::classify(measured).verdict.kind == kscope::bottleneck::latency);
}

namespace {
kscope::detail::plan_cache_key sample_plan_key() {
  kscope::detail::plan_cache_key key;
  key.chip = "GH100";
  key.cupti_version = 130001;
  key.driver_version = 13000;
  key.availability_hash = kscope::detail::plan_cache_hash({1, 2, 3});
  key.metrics = {"gpu__time_duration.sum", "dram__bytes_read.sum", "lts__t_bytes.sum"};
  return key;
}
kscope::one_pass_plan sample_plan() {
  kscope::one_pass_plan plan;
  plan.groups = {{"gpu__time_duration.sum", "dram__bytes_read.sum"}, {"lts__t_bytes.sum"}};
  plan.notes = {"a stand-in was taken:\nsecond line"};
  return plan;
}
}  // namespace

TEST_CASE("the metric-group plan on disk: read back only for the key it was made for, and only whole") {
  using namespace kscope::detail;
  const plan_cache_key key = sample_plan_key();
  const std::string text = plan_cache_text(key, sample_plan());
  REQUIRE(!text.empty());
  kscope::one_pass_plan read;
  REQUIRE(parse_plan_cache(text, key, read));
  CHECK(read.groups == sample_plan().groups);
  REQUIRE(read.notes.size() == 1);
  CHECK(read.notes[0] == "a stand-in was taken: second line");  // one line in the file

  SUBCASE("another chip, driver, CUPTI, availability or metric list: not this plan") {
    for (int change = 0; change < 6; ++change) {
      plan_cache_key other = key;
      if (change == 0) other.chip = "AD102";
      if (change == 1) other.driver_version = 12080;
      if (change == 2) other.cupti_version = 130000;
      if (change == 3) other.availability_hash ^= 1;
      if (change == 4) std::swap(other.metrics[0], other.metrics[1]);
      if (change == 5) other.metrics.pop_back();
      kscope::one_pass_plan untouched;
      CHECK_MESSAGE(!parse_plan_cache(text, other, untouched), change);
      CHECK(untouched.groups.empty());
    }
  }
  SUBCASE("a file not whole or not understood is refused") {
    const std::string cut = text.substr(0, text.size() - 4);  // "end" lost: a truncated write
    CHECK(!parse_plan_cache(cut, key, read));
    CHECK(!parse_plan_cache(text.substr(0, text.find("group")), key, read));          // no group
    CHECK(!parse_plan_cache(text + "group x\n", key, read));                        // after "end"
    std::string odd = text;
    odd.insert(odd.find("group"), "colour blue\n");
    CHECK(!parse_plan_cache(odd, key, read));
    std::string empty_group = text;
    empty_group.insert(empty_group.find("group"), "group \n");
    CHECK(!parse_plan_cache(empty_group, key, read));
    std::string control = text;
    control.insert(control.find("group") + 6, "a\tb ");
    CHECK(!parse_plan_cache(control, key, read));
    CHECK(!parse_plan_cache("", key, read));
    CHECK(!parse_plan_cache(std::string(kscope::detail::plan_cache_max_bytes + 1, 'x'), key, read));
  }
  SUBCASE("names that cannot be written keep nothing") {
    plan_cache_key spaced = key;
    spaced.metrics.push_back("two words");
    CHECK(plan_cache_text(spaced, sample_plan()).empty());
    CHECK(plan_cache_text(key, kscope::one_pass_plan{}).empty());  // no group: nothing worth keeping
  }
}

TEST_CASE("the metric-group plan on disk: where it goes, written whole, off with KSCOPE_CACHE_DIR=0") {
  using namespace kscope::detail;
  const char* saved = std::getenv("KSCOPE_CACHE_DIR");
  const std::string saved_value = saved ? saved : "";
  char dir_template[] = "/tmp/kscope_plan_cache_XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string dir = std::string(dir_template) + "/nested";  // made by the write
  ::setenv("KSCOPE_CACHE_DIR", dir.c_str(), 1);
  CHECK(plan_cache_directory() == dir);
  const plan_cache_key key = sample_plan_key();
  kscope::one_pass_plan read;
  CHECK(!read_plan_cache(key, read));  // nothing there yet
  write_plan_cache(key, sample_plan());
  std::string path;
  REQUIRE(read_plan_cache(key, read, &path));
  CHECK(path == plan_cache_path(dir, key));
  CHECK(read.groups == sample_plan().groups);
  // A damaged file is ignored, and the next write replaces it.
  if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fputs("kscope counter plan 1\nchip GH1", f);
    std::fclose(f);
  }
  CHECK(!read_plan_cache(key, read));
  write_plan_cache(key, sample_plan());
  CHECK(read_plan_cache(key, read));
  ::setenv("KSCOPE_CACHE_DIR", "0", 1);
  CHECK(plan_cache_directory().empty());
  CHECK(!read_plan_cache(key, read));
  ::setenv("KSCOPE_CACHE_DIR", "", 1);
  CHECK(plan_cache_directory().empty());
  std::remove(path.c_str());
  ::rmdir(dir.c_str());
  ::rmdir(dir_template);
  if (saved) ::setenv("KSCOPE_CACHE_DIR", saved_value.c_str(), 1); else ::unsetenv("KSCOPE_CACHE_DIR");
}

}  // namespace counters_test
