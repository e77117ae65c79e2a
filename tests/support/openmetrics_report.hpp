// tests/support/openmetrics_report.hpp — one hand-built session_report with every section
// the OpenMetrics exposition reads, and scope names meant to break it: a double quote, a
// line feed, a backslash, invalid UTF-8, a '}' and " # " (which the Python parser takes for
// the start of an exemplar), and a scope whose p90 is NaN.
//
// Used by tests/openmetrics_test.cpp (doctest, on the text) and by
// tests/process/openmetrics_program.cpp, whose output tests/process/openmetrics_check.py
// hands to a real parser (prometheus_client).
//
//   const kscope::session_report r = kscope_test::openmetrics_report();
#pragma once

#include <kscope/report/data.hpp>

#include <cmath>
#include <string>

namespace kscope_test {

// The hostile scope's name as the report holds it (its path: under "step").
inline const std::string hostile_scope_name = std::string("say \"hi\"\nthen \\ go } # x \xff end");

inline kscope::summary time_summary(double median_ns, double p90_ns, double p99_ns, std::size_t n) {
  kscope::summary s;
  s.n = n;
  s.median = median_ns;
  s.p90 = p90_ns;
  s.p99 = p99_ns;
  s.mean = median_ns;
  s.min = median_ns / 2;
  s.max = p99_ns;
  return s;
}

inline kscope::session_report openmetrics_report() {
  kscope::session_report r;
  r.context.kscope_version = "9.8.7";
  r.context.rank = 3;
  r.context.devices = {"NVIDIA H200: Hopper (sm_90), 132 SMs at 1980 MHz, 139.8 GiB"};

  kscope::scope_report step;
  step.id = 1;
  step.name = step.path = "step";
  step.depth = 1;
  step.calls = 100;
  step.host_ns = time_summary(2e6, 2.5e6, 3e6, 90);
  step.host_inclusive_ns = 2.1e8;
  step.gpu_calls = 100;
  step.gpu_ns = time_summary(1.5e6, 1.8e6, 1.9e6, 90);
  step.gpu_total_ns = 1.55e8;
  kscope::node_gpu_activity a;
  // 400 kernels (120 ms, 110 ms busy) recorded, 100 (30 ms) estimated for graph replays traced
  // as one record: the counters hold the recorded part, gauges the estimate.
  a.kernel_count = 500;
  a.scaled_kernel_count = 100;
  a.kernel_ns = 150'000'000;
  a.scaled_kernel_ns = 30'000'000;
  a.busy_ns = 140'000'000;
  a.scaled_busy_ns = 30'000'000;
  a.memcpy[static_cast<std::size_t>(kscope::copy_direction::h2d)] = {100, 1'000'000, 5'000'000};
  a.memcpy[static_cast<std::size_t>(kscope::copy_direction::d2h)] = {100, 4'000, 300'000};
  a.memset = {10, 2048, 20'000};
  a.host_sync.count = 100;
  a.host_sync.ns = 40'000'000;
  step.gpu_activity = a;
  r.scopes.push_back(step);

  kscope::scope_report hostile;
  hostile.id = 2;
  hostile.parent = 1;
  hostile.name = hostile_scope_name;
  hostile.path = "step/" + hostile_scope_name;
  hostile.depth = 2;
  hostile.calls = 7;
  // Its p90 was never computed (NaN): the exposition must leave that quantile out.
  hostile.host_ns = time_summary(1e3, std::nan(""), 4e3, 7);
  hostile.host_inclusive_ns = 9e3;
  r.scopes.push_back(hostile);

  // A scope with no sample kept: no quantile at all, still its count and sum.
  kscope::scope_report idle;
  idle.id = 3;
  idle.parent = 1;
  idle.name = "idle";
  idle.path = "step/idle";
  idle.depth = 2;
  idle.calls = 0;
  r.scopes.push_back(idle);

  kscope::scope_report unscoped;
  unscoped.id = kscope::unscoped_node;
  unscoped.name = unscoped.path = kscope::unscoped_node_name;
  unscoped.depth = 1;
  kscope::node_gpu_activity u;
  u.kernel_count = 3;
  u.kernel_ns = 30'000;
  u.busy_ns = 30'000;
  unscoped.gpu_activity = u;
  r.scopes.push_back(unscoped);

  kscope::gpu_time_report t;
  t.wall_ns = 2e8;
  t.busy_ns = 1.5e8;
  t.busy_share = 0.75;
  t.idle_by_scope = {{1, "step", 3e7, 12}, {0, "", 2e7, 4}};
  kscope::scope_gpu_time sg;
  sg.id = 1;
  sg.path = "step";
  sg.gpu_ns = 1.15e8;
  sg.share_of_gpu = 0.9997;
  t.scopes.push_back(sg);
  kscope::scope_gpu_time sh;
  sh.id = 2;
  sh.path = hostile.path;  // share NaN: left out
  t.scopes.push_back(sh);
  r.gpu_time = t;
  // Traced in windows: 3 of 100 ms in 30 s.
  r.trace_windows.windowed = true;
  r.trace_windows.options = {100, 10000};
  r.trace_windows.windows = 3;
  r.trace_windows.traced_ns = 300000000;
  r.trace_windows.since_ns = 1000;
  r.trace_windows.until_ns = 1000 + 30000000000;

  kscope::session_sampled_metrics m;
  m.running = true;
  m.samples = 500;
  m.samples_lost = 2;
  m.coverage = 0.4;
  m.data.metrics = {"sm__throughput.avg.pct_of_peak_sustained_elapsed", "dram__bytes_read.sum",
                    "gpc__cycles_elapsed.avg.per_second"};
  m.data.is_count = {false, true, false};
  m.data.device = 0;
  m.data.device_wide.samples = 500;
  m.data.device_wide.sampled_ns = 1e8;
  m.data.device_wide.busy_ns = 8e7;
  m.data.device_wide.values = {{62.5, std::nan(""), 1e8}, {2.5e12, 2.5e11, 1e8}, {1.98e9, std::nan(""), 1e8}};
  kscope::node_sampled_metrics n;
  n.node = 1;
  n.samples = 400;
  n.values = {{70.0, std::nan(""), 8e7}, {3e12, 2.4e11, 8e7}, {std::nan(""), std::nan(""), 0}};
  m.data.nodes.push_back(n);
  r.sampled_metrics = m;
  return r;
}

}  // namespace kscope_test
