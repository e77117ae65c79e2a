// tests/html_report_fixture.hpp — a serving loop's session report with every section the
// text report can print filled (window, scopes, requests, GPU busy and time, roofline, GPU
// activity, top kernels, hardware counters, sampled metrics, verdicts, CUPTI, warnings and
// notes), as an H200 run with CUPTI, counters and PM sampling would give it; and a report of
// many scopes, kernels and ranges for the size bound. Used by tests/html_report_test.cpp and
// by the page the browser test loads (tests/browser/html_report_page.cpp).
#pragma once

#include <kscope/report/report.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kscope_test {

inline kscope::summary distribution(double median, std::size_t n = 400, double tail = 1.15) {
  kscope::summary s;
  s.n = n;
  s.warmup = 3;
  s.median = median;
  s.mean = median * 1.04;
  s.stddev = median * 0.05;
  s.min = median * 0.9;
  s.max = median * tail * 1.3;
  s.mad = median * 0.02;
  s.p90 = median * (1 + (tail - 1) / 3);
  s.p99 = median * tail;
  s.median_ci = kscope::interval{median * 0.99, median * 1.01, 0.95};
  s.outliers = 2;
  s.steady = true;
  return s;
}

inline kscope::scope_report scope(kscope::node_id id, kscope::node_id parent, const std::string& path,
                                  std::size_t depth, std::uint64_t calls, double median_ns) {
  kscope::scope_report s;
  s.id = id;
  s.parent = parent;
  s.path = path;
  s.name = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
  s.depth = depth;
  s.calls = calls;
  s.host_ns = distribution(median_ns, calls);
  s.host_inclusive_ns = s.host_ns.mean * static_cast<double>(calls);
  s.host_exclusive_ns = s.host_inclusive_ns;
  s.samples_kept = calls;
  return s;
}

inline kscope::node_gpu_activity activity(std::uint64_t kernels, std::int64_t kernel_ns, std::int64_t idle_ns) {
  kscope::node_gpu_activity a;
  a.kernel_count = kernels;
  a.kernel_ns = kernel_ns;
  a.busy_ns = kernel_ns * 98 / 100;
  a.idle_ns = idle_ns;
  a.first_start_ns = 1000;
  a.last_end_ns = 1000 + a.busy_ns + idle_ns;
  return a;
}

inline kscope::scope_gpu_time gpu_time_of(const kscope::scope_report& s, double gpu_ns, double share, double busy_per_call,
                                          double gaps_per_call, double tail = 1.1) {
  kscope::scope_gpu_time g;
  g.id = s.id;
  g.path = s.path;
  g.gpu_ns = gpu_ns;
  g.share_of_gpu = share;
  g.kernel_count = 8 * s.calls;
  g.calls_seen = s.calls;
  g.busy_per_call_ns = distribution(busy_per_call, s.calls, tail);
  g.gaps_per_call_ns = distribution(gaps_per_call, s.calls);
  g.kernels_per_call = 8;
  g.d2h_per_call = 0;
  g.max_gap_ns = gaps_per_call * 3;
  return g;
}

// The full report: a 400-step decode loop with a prefill in 20 of the steps.
inline kscope::session_report full_report() {
  kscope::session_report r;
  r.context.kscope_version = "0.1.0";
  r.context.host_name = "gpu-node";
  r.context.timestamp_utc = "2026-12-06T10:00:00Z";
  r.context.devices = {"NVIDIA H200: Hopper (sm_90), 132 SMs at 1980 MHz, 139.8 GiB, 3201 MHz x 6016-bit memory "
                       "(4.81 TB/s), 60 MiB L2; driver 13.0, runtime 13.0"};
  r.context.roofs = {"DRAM 4.81 TB/s theoretical", "fp32 plain 66.9 TFLOP/s theoretical",
                     "bf16 tensor 989 TFLOP/s theoretical", "bf16 tensor 760 TFLOP/s measured"};
  r.context.roof_lines = {{"fp32 plain", 66.9e12, 4.81e12, false},
                          {"bf16 tensor", 989e12, 4.81e12, false},
                          {"bf16 tensor (measured)", 760e12, 4.1e12, true}};
  r.window = kscope::report_window{3, 1'000'000'000, 3'000'000'000, 2'000'000'000, 0.62, 1.24e9, ""};
  r.sample_cap = 10000;
  r.gpu_timing_skipped = 2;

  kscope::scope_report step = scope(1, 0, "step", 1, 400, 2.4e6);
  step.host_ns = distribution(2.4e6, 400, 3.2);  // the prefill steps make the tail
  step.host_inclusive_ns = 400 * 2.6e6;
  step.gpu_calls = 400;
  step.gpu_ns = distribution(1.9e6, 400);
  step.gpu_total_ns = 400 * 1.95e6;
  kscope::scope_report schedule = scope(2, 1, "step/schedule", 2, 400, 2.2e5);
  schedule.share_of_parent = 0.09;
  kscope::scope_report prefill = scope(3, 1, "step/prefill", 2, 20, 5.1e6);
  prefill.share_of_parent = 0.1;
  prefill.gpu_calls = 20;
  prefill.gpu_ns = distribution(5.0e6, 20);
  prefill.gpu_total_ns = 20 * 5.0e6;
  prefill.declared = kscope::work{20 * 3.2e12, 20 * 4.0e9};
  prefill.work_calls = 20;
  prefill.roofline = kscope::place(kscope::work{3.2e12, 4.0e9}, 5.0e-3, 989e12, 4.81e12);
  prefill.roof = "bf16 tensor";
  prefill.roofline_time_source = "events";
  prefill.roofline_time_ns = 5.0e6;
  prefill.fraction_of_measured_roof = 0.84;
  prefill.gpu_activity = activity(20 * 48, 20 * 4'900'000, 20 * 90'000);
  prefill.tags.push_back(kscope::tag_count{"dtype", "bf16", 20});
  kscope::scope_report decode = scope(4, 1, "step/decode", 2, 400, 1.55e6);
  decode.share_of_parent = 0.62;
  decode.gpu_calls = 400;
  decode.gpu_ns = distribution(1.5e6, 400);
  decode.gpu_total_ns = 400 * 1.5e6;
  decode.declared = kscope::work{400 * 2.0e10, 400 * 6.2e9};
  decode.work_calls = 400;
  decode.roofline = kscope::place(kscope::work{2.0e10, 6.2e9}, 1.5e-3, 989e12, 4.81e12);
  decode.roof = "bf16 tensor";
  decode.roofline_time_source = "events";
  decode.roofline_time_ns = 1.5e6;
  decode.advice = "memory-bound at 86% of DRAM bandwidth: read fewer bytes per token (quantize the weights, "
                  "batch more requests per step)";
  decode.gpu_activity = activity(400 * 6, 400 * 1'250'000, 400 * 60'000);
  {
    // Two GPUs (tensor parallel), an NCCL all-reduce, and graphs captured in attention.
    kscope::node_gpu_activity& a = *decode.gpu_activity;
    a.comm_kernel_count = 400;
    a.comm_ns = 400 * 80'000;
    a.comm_busy_ns = a.comm_ns;
    a.devices = {{0, 400 * 3, 400 * 625'000, 400 * 610'000, 200, 400 * 40'000},
                 {1, 400 * 3, 400 * 625'000, 400 * 610'000, 200, 400 * 40'000}};
    a.graph_capture.push_back(kscope::graph_capture_origin{5, 400 * 2, 400 * 300'000, 0, 0});
    a.graph_replays = 400;
    a.graph_replays_traced = 40;
    a.scaled_kernel_count = 720;
    a.scaled_kernel_ns = 360 * 300'000;
  }
  decode.tags.push_back(kscope::tag_count{"dtype", "bf16", 400});
  kscope::scope_report attention = scope(5, 4, "step/decode/attention", 3, 400, 4.1e5);
  attention.share_of_parent = 0.27;
  attention.gpu_activity = activity(400 * 2, 400 * 300'000, 400 * 10'000);
  attention.declared = kscope::work{400 * 1.0e9, 400 * 1.2e9};
  attention.work_calls = 400;
  attention.roofline = kscope::place(kscope::work{1.0e9, 1.2e9}, 0.4e-3, 66.9e12, 4.81e12);
  attention.roof = "fp32 plain";
  attention.roofline_time_source = "kernels (CUPTI)";
  attention.roofline_time_ns = 0.4e6;
  kscope::scope_report sample = scope(6, 1, "step/sample", 2, 400, 3.1e5);
  sample.share_of_parent = 0.12;
  sample.gpu_activity = activity(400, 400 * 40'000, 400 * 250'000);
  sample.gpu_activity->memcpy[static_cast<std::size_t>(kscope::copy_direction::d2h)] = kscope::copy_totals{400, 400 * 4096, 400 * 6'000};
  sample.gpu_activity->host_sync = kscope::host_sync_totals{400, 400 * 260'000, 400, 0, 0};
  kscope::scope_report request = scope(7, 0, "request", 1, 1200, 3.8e8);
  request.cross_thread = true;
  request.host_ns = distribution(3.8e8, 1200, 2.1);
  request.samples_capped = true;
  kscope::scope_report ttft = scope(8, 0, "ttft", 1, 1200, 4.2e7);
  ttft.cross_thread = true;
  ttft.host_ns = distribution(4.2e7, 1200, 4.0);
  // A hostile name: markup and an invalid byte must reach the page escaped.
  kscope::scope_report odd = scope(9, 1, "step/<b>odd</b> & \xff", 2, 400, 1.0e3);
  odd.name = "<b>odd</b> & \xff";

  // Per-scope hardware counters on decode (two profiled calls).
  decode.profiled_calls = 2;
  {
    kscope::counter_values kv;
    kv.values = {{"gpu__time_duration.sum", 1.25e6},
                 {"dram__bytes_read.sum", 5.9e9},
                 {"dram__bytes_write.sum", 3.0e8},
                 {"lts__t_bytes.sum", 7.1e9},
                 {"sm__sass_thread_inst_executed_op_ffma_pred_on.sum", 1.0e10},
                 {"sm__sass_thread_inst_executed_op_fadd_pred_on.sum", 0},
                 {"sm__sass_thread_inst_executed_op_fmul_pred_on.sum", 0},
                 {"sm__throughput.avg.pct_of_peak_sustained_elapsed", 31},
                 {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 86}};
    kscope::counter_aggregate agg;
    agg.add_call({kv});
    agg.add_call({kv});
    const kscope::hierarchical_roofs roofs{kscope::roof_line{"fp32 plain", 66.9e12, 4.81e12, false}};
    decode.counters = kscope::make_scope_counter_report(agg, 2, 0, 12, 0, kscope::work{2.0e10, 6.2e9}, 1.55e6,
                                                        1.3e6, &roofs);
  }
  kscope::session_counters_status counters;
  counters.enabled = true;
  counters.status = "per-scope counters: each scope's first 2 calls profiled, one-pass groups";
  counters.metrics = {"dram__bytes_read.sum", "dram__bytes_write.sum"};
  counters.notes = {"the SASS instruction counters need kernel replay"};
  counters.passes = 2;
  r.counters = counters;

  // PM sampling over the steps.
  {
    const std::vector<std::string> metrics = {"dram__throughput.avg.pct_of_peak_sustained_elapsed",
                                              "sm__throughput.avg.pct_of_peak_sustained_elapsed",
                                              "dram__bytes_read.sum"};
    kscope::sampled_metrics agg(metrics);
    agg.add_step_call(1, 0, 2'400'000);
    agg.add_kernel({100'000, 1'600'000, 4, 0});
    agg.add_kernel({1'700'000, 2'000'000, 5, 0});
    for (int i = 0; i < 24; ++i) {
      const double v[] = {i < 16 ? 85.0 : 40.0, i < 16 ? 30.0 : 55.0, 4.0e8};
      agg.add_sample(i * 100'000, (i + 1) * 100'000, v);
    }
    agg.attribute_all();
    kscope::session_sampled_metrics sampled;
    sampled.status = "metric sampling: 24 samples every 100 us";
    sampled.notes = {"clock locked at 1980 MHz"};
    sampled.running = true;
    sampled.interval_ns = 100'000;
    sampled.mean_interval_ns = 100'000;
    sampled.windows = 1;
    sampled.coverage = 1;
    sampled.samples = 24;
    sampled.attributed = true;
    sampled.folded_until_ns = 2'400'000;
    sampled.data = agg.report();
    r.sampled_metrics = sampled;
  }

  // One verdict per placed scope.
  {
    kscope::scope_verdict v;
    v.basis = "hardware counters";
    v.verdict.kind = kscope::bottleneck::memory;
    v.verdict.where = "DRAM";
    v.verdict.text = "memory-bound: DRAM 86% of peak";
    v.verdict.facts.push_back(kscope::evidence{"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 86, "%"});
    v.evidence.push_back(kscope::verdict_evidence{"hardware counters", v.verdict.facts, 86,
                                                  "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
                                                  12, "profiled calls", true});
    v.evidence.push_back(kscope::verdict_evidence{"sampled metrics",
                                                  {kscope::evidence{"dram__throughput.avg.pct_of_peak_sustained_elapsed", 80, "%"}},
                                                  80, "dram__throughput.avg.pct_of_peak_sustained_elapsed", 24, "samples",
                                                  true});
    decode.verdict = v;
    kscope::scope_verdict p;
    p.basis = "declared work";
    p.verdict.kind = kscope::bottleneck::compute;
    p.verdict.text = "at the bf16 tensor roof";
    p.missing.push_back("hardware counters: session::enable_counters()");
    prefill.verdict = p;
  }
  r.scopes = {step, schedule, prefill, decode, attention, sample, odd, request, ttft};

  // The GPU-time account over the recent steps.
  kscope::gpu_time_report t;
  t.window_start_ns = 1'000'000'000;
  t.window_end_ns = 3'000'000'000;
  t.wall_ns = 2e9;
  t.busy_ns = 1.24e9;
  t.busy_share = 0.62;
  t.host_intervals = 4000;
  t.gpu_events = 9000;
  t.idle_gaps = {{1'200'000'000, 310'000, 6, "step/sample"},
                 {1'500'000'000, 290'000, 6, "step/sample"},
                 {2'100'000'000, 220'000, 2, "step/schedule"}};
  t.idle_by_scope = {{6, "step/sample", 1.0e8, 400}, {2, "step/schedule", 8.8e7, 400}, {0, "", 1.0e6, 3}};
  t.scopes = {gpu_time_of(step, 0, 0, 1.55e6, 7.0e5, 4.1),
              gpu_time_of(prefill, 20 * 4.9e6, 0.14, 4.9e6, 9.0e4),
              gpu_time_of(decode, 400 * 1.3e6, 0.75, 1.3e6, 6.0e4),
              gpu_time_of(attention, 400 * 3.0e5, 0.17, 3.0e5, 1.0e4),
              gpu_time_of(sample, 400 * 4.6e4, 0.03, 4.6e4, 2.5e5)};
  r.gpu_time = t;

  kscope::kernel_summary k;
  k.name = "flash_fwd_kernel<bf16>";
  k.mangled_name = "_Z16flash_fwd_kernelI6bf16E";
  k.calls = 800;
  k.total_ns = 800 * 300'000;
  k.median_ns = 300'000;
  k.grid = {132, 8, 1};
  k.block = {128, 1, 1};
  k.registers_per_thread = 168;
  k.dynamic_shared_bytes = 98304;
  k.scaled_calls = 720;
  k.scaled_from_replays = 40;
  r.top_kernels.push_back(k);
  k.name = "gemv_bf16";
  k.mangled_name = "_Z9gemv_bf16v";
  k.calls = 1600;
  k.scaled_calls = 0;
  k.launch_config_varies = true;
  r.top_kernels.push_back(k);

  r.cupti_status = "CUPTI activity collector: 9000 records, 0 dropped";
  r.warnings = {r.cupti_status, "step/decode: 3 calls ran with the event pool full"};
  return r;
}

// A report of `scopes` scopes (a tree 3 levels deep), `ranges` request ranges and
// `kernels` top kernels, each with GPU time, placements, activity, counters and verdicts:
// what a long, wide run gives.
inline kscope::session_report large_report(std::size_t scopes, std::size_t ranges, std::size_t kernels) {
  kscope::session_report r = full_report();
  const kscope::scope_report decode = r.scopes[3];
  const kscope::scope_report request = r.scopes[7];
  const kscope::scope_gpu_time decode_gpu = r.gpu_time->scopes[2];
  r.scopes.resize(2);
  r.gpu_time->scopes.resize(1);
  kscope::node_id next = 100, layer = 0;
  for (std::size_t i = 0; i < scopes; ++i) {
    kscope::scope_report s = decode;
    s.id = next++;
    if (i % 10 == 0) layer = s.id;
    s.parent = i % 10 == 0 ? 1 : layer;
    s.depth = i % 10 == 0 ? 2 : 3;
    s.name = "layer" + std::to_string(i);
    s.path = "step/layer" + std::to_string(i);
    s.host_inclusive_ns = 1e6 * static_cast<double>(1 + i % 97);
    r.scopes.push_back(s);
    kscope::scope_gpu_time g = decode_gpu;
    g.id = s.id;
    g.path = s.path;
    g.gpu_ns = 1e5 * static_cast<double>(1 + i % 89);
    r.gpu_time->scopes.push_back(g);
  }
  for (std::size_t i = 0; i < ranges; ++i) {
    kscope::scope_report q = request;
    q.id = next++;
    q.name = q.path = "request" + std::to_string(i);
    r.scopes.push_back(q);
  }
  const kscope::kernel_summary k = r.top_kernels.front();
  r.top_kernels.clear();
  for (std::size_t i = 0; i < kernels; ++i) {
    r.top_kernels.push_back(k);
    r.top_kernels.back().name = "kernel" + std::to_string(i);
  }
  return r;
}

}  // namespace kscope_test
