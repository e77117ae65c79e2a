// Tests that docs/report_schema.md and docs/bench_schema.md describe what the code writes.
//
// A session report and a bench report are built by hand with every optional block
// present, written by the library's own JSON writers, read back with kscope's JSON
// reader, and every key path in them (`scopes[].host_ns.median`) is compared with the key
// paths the two pages list. The pages follow one convention, stated at their top:
//   * key tables have `key` as the header of their first column; each row's first cell
//     holds one or more key paths in backticks;
//   * `a.b` is member b of object a, `a[]` an element of array a, `a.*` any member of a
//     free-form object a;
//   * a `##`/`###` heading with key paths in backticks makes the rows under it relative
//     to each of those paths; a heading without backticks makes them absolute again;
//   * the second column is the JSON type: string, integer, number, bool, object, array,
//     or several joined with "or"; null is accepted wherever a number is (NaN is written
//     as null) and elsewhere only when the type says "or null".
// The test fails listing every documented key the output lacks, every output key the page
// does not document, and every value whose JSON type the page does not allow.
#include <kscope/bench/bench.hpp>
#include <kscope/core/detail/json_reader.hpp>
#include <kscope/core/detail/json_writer.hpp>
#include <kscope/device/device.hpp>
#include <kscope/report/report.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace schema_test {  // one per file: the unit tests build as one program

namespace {

using kscope::detail::json_type;
using kscope::detail::json_value;

// ---- what the output holds ------------------------------------------------------------

// "integer" for a whole number, so a page saying "integer" is held to it.
std::string type_name(const json_value& v) {
  switch (v.type) {
    case json_type::null: return "null";
    case json_type::boolean: return "bool";
    case json_type::number: return std::floor(v.number) == v.number ? "integer" : "number";
    case json_type::string: return "string";
    case json_type::array: return "array";
    case json_type::object: return "object";
  }
  return "?";
}

// Every key path of a document with the JSON types seen at it.
void collect(const json_value& v, const std::string& path, std::map<std::string, std::set<std::string>>& out) {
  // An array element (`a[]`) has no key of its own: `a` documents it, its members
  // (`a[].b`) are documented one by one.
  if (!path.empty() && path.back() != ']') out[path].insert(type_name(v));
  if (v.is_object()) {
    for (const auto& [key, member] : v.members) collect(member, path.empty() ? key : path + "." + key, out);
  } else if (v.is_array()) {
    for (const json_value& item : v.items) {
      // Elements that are objects or arrays have paths of their own; scalars do not.
      if (item.is_object() || item.is_array()) collect(item, path + "[]", out);
    }
  }
}

std::map<std::string, std::set<std::string>> key_paths(const std::string& json_text) {
  const kscope::detail::json_parse_result parsed = kscope::detail::parse_json(json_text);
  REQUIRE_MESSAGE(parsed.ok(), parsed.error);
  std::map<std::string, std::set<std::string>> out;
  collect(parsed.value, "", out);
  return out;
}

// ---- what the page documents -----------------------------------------------------------

struct documented_key {
  std::string path;
  std::set<std::string> types;  // empty: no type stated
  int line = 0;
};

std::string read_text(const std::string& path) {
  std::string text;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE_MESSAGE(f != nullptr, "cannot open " << path);
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  std::fclose(f);
  return text;
}

std::vector<std::string> backticked(const std::string& text) {
  std::vector<std::string> spans;
  std::size_t at = 0;
  while ((at = text.find('`', at)) != std::string::npos) {
    const std::size_t end = text.find('`', at + 1);
    if (end == std::string::npos) break;
    spans.push_back(text.substr(at + 1, end - at - 1));
    at = end + 1;
  }
  return spans;
}

std::vector<std::string> table_cells(const std::string& line) {
  std::vector<std::string> cells;
  std::size_t start = line.find('|') + 1;
  while (start < line.size()) {
    const std::size_t end = line.find('|', start);
    if (end == std::string::npos) break;
    std::string cell = line.substr(start, end - start);
    const std::size_t first = cell.find_first_not_of(' ');
    const std::size_t last = cell.find_last_not_of(' ');
    cells.push_back(first == std::string::npos ? std::string() : cell.substr(first, last - first + 1));
    start = end + 1;
  }
  return cells;
}

// "integer or null" -> {integer, null}; "array of string" -> {array}; "summary" -> object.
std::set<std::string> parse_types(const std::string& cell) {
  std::set<std::string> types;
  if (cell.rfind("array", 0) == 0) {
    types.insert("array");
    if (cell.find("or null") != std::string::npos) types.insert("null");
    return types;
  }
  std::string word;
  const auto flush = [&] {
    if (word == "string" || word == "bool" || word == "integer" || word == "number" || word == "object" ||
        word == "array" || word == "null")
      types.insert(word);
    if (word == "summary" || word == "interval") types.insert("object");
    word.clear();
  };
  for (char c : cell + " ") {
    if (c >= 'a' && c <= 'z') word += c;
    else flush();
  }
  return types;
}

bool valid_path(const std::string& p) {
  if (p.empty()) return false;
  for (char c : p)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '[' || c == ']' ||
          c == '*'))
      return false;
  return true;
}

// The key paths of every key table of a schema page, joined to their heading's prefixes.
std::vector<documented_key> documented_keys(const std::string& page, std::vector<std::string>& problems) {
  std::vector<documented_key> keys;
  std::vector<std::string> prefixes;
  bool in_key_table = false;
  int line_number = 0;
  std::size_t start = 0;
  const std::string text = read_text(page);
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    const std::string where = page + ":" + std::to_string(line_number);
    if (line.rfind("##", 0) == 0) {
      prefixes = backticked(line);
      for (const std::string& p : prefixes)
        if (!valid_path(p)) problems.push_back(where + ": heading path `" + p + "` is not a key path");
      in_key_table = false;
      continue;
    }
    if (line.rfind("|", 0) != 0) {
      in_key_table = false;
      continue;
    }
    const std::vector<std::string> cells = table_cells(line);
    if (cells.empty()) continue;
    if (cells[0] == "key") {
      in_key_table = true;
      continue;
    }
    if (!in_key_table || cells[0].find("---") == 0) continue;
    const std::vector<std::string> paths = backticked(cells[0]);
    if (paths.empty()) problems.push_back(where + ": a key table row without a key path in backticks");
    for (const std::string& p : paths) {
      if (!valid_path(p)) {
        problems.push_back(where + ": `" + p + "` is not a key path");
        continue;
      }
      const std::set<std::string> types = cells.size() > 1 ? parse_types(cells[1]) : std::set<std::string>{};
      if (prefixes.empty()) keys.push_back({p, types, line_number});
      for (const std::string& prefix : prefixes) keys.push_back({prefix + "." + p, types, line_number});
    }
  }
  return keys;
}

bool matches(const std::string& documented, const std::string& output) {
  if (documented.size() >= 2 && documented.compare(documented.size() - 2, 2, ".*") == 0) {
    const std::string stem = documented.substr(0, documented.size() - 1);  // "params."
    return output.size() > stem.size() && output.compare(0, stem.size(), stem) == 0;
  }
  return documented == output;
}

bool type_allowed(const std::string& seen, const std::set<std::string>& allowed) {
  if (allowed.empty() || allowed.count(seen)) return true;
  if (seen == "integer" && allowed.count("number")) return true;
  if (seen == "null" && allowed.count("number")) return true;  // NaN is written as null
  return false;
}

// Compares one page with the union of the key paths of some documents; returns the
// mismatches, one line each.
std::vector<std::string> check_page(const std::string& page, const std::vector<std::string>& documents) {
  std::vector<std::string> problems;
  const std::vector<documented_key> keys = documented_keys(page, problems);
  std::map<std::string, std::set<std::string>> seen;
  for (const std::string& doc : documents)
    for (auto& [path, types] : key_paths(doc)) seen[path].insert(types.begin(), types.end());
  std::set<std::string> reported;
  for (const documented_key& k : keys) {
    bool found = false;
    for (const auto& [path, types] : seen) {
      if (!matches(k.path, path)) continue;
      found = true;
      if (k.path.back() == '*') continue;  // free-form: any value
      for (const std::string& t : types)
        if (!type_allowed(t, k.types))
          problems.push_back(page + ":" + std::to_string(k.line) + ": `" + k.path + "` is written as " + t +
                             ", the page does not allow it");
    }
    if (!found && reported.insert(k.path).second)
      problems.push_back(page + ":" + std::to_string(k.line) + ": documented `" + k.path + "` is not in the output");
  }
  for (const auto& [path, types] : seen) {
    bool documented = false;
    for (const documented_key& k : keys) documented = documented || matches(k.path, path);
    if (!documented) problems.push_back(page + ": output key `" + path + "` is not documented");
  }
  return problems;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += "\n  " + l;
  return out;
}

// ---- documents with every optional block ---------------------------------------------

kscope::summary full_summary(double median) {
  kscope::summary s;
  s.n = 40;
  s.warmup = 3;
  s.median = median;
  s.mean = median * 1.01;
  s.stddev = median * 0.02;
  s.min = median * 0.97;
  s.max = median * 1.2;
  s.mad = median * 0.01;
  s.p90 = median * 1.05;
  s.p99 = median * 1.15;
  s.median_ci = kscope::interval{median * 0.99, median * 1.01, 0.95};
  s.outliers = 2;
  s.steady = true;
  return s;
}

kscope::device_info h200(int ordinal) {
  kscope::device_info d;
  d.present = true;
  d.ordinal = ordinal;
  d.device_count = 2;
  d.name = "NVIDIA H200";
  d.cc_major = 9;
  d.cc_minor = 0;
  d.sm_count = 132;
  d.l2_bytes = 60 << 20;
  d.memory_bytes = 150ull << 30;
  d.sm_clock_khz = 1980000;
  d.memory_clock_khz = 3201000;
  d.memory_bus_width_bits = 6144;
  d.driver_version = 13000;
  d.runtime_version = 13000;
  d.uuid = "GPU-00000000-0000-0000-0000-000000000000";
  d.pci_bus_id = "0000:3b:00.0";
  return d;
}

// A feature's own section (report/section.hpp); one whose json() fails, for "error".
struct fixture_section final : kscope::report_section {
  bool fails = false;
  std::string key() const override { return fails ? "failing_probe" : "queue_depth"; }
  std::string heading() const override { return "Queue depth"; }
  std::string text(const kscope::session_report&) const override { return "peak 3\n"; }
  std::string json() const override {
    if (fails) throw std::runtime_error("no data");
    return R"({"peak": 3})";
  }
};

// A session report as session::report() fills it on a 2-GPU host with CUPTI, a rank,
// declared work and tags; `with_devices` false gives the no-GPU context instead.
std::string session_report_json(bool with_devices) {
  kscope::session_report r;
  r.context.host_name = "gpu-node";
  r.context.timestamp_utc = "2026-12-02T10:00:00Z";
  r.context.process_id = 4242;
  r.context.rank = 1;
  // A window report's interval (session::window()), so that its keys are checked too.
  r.window = kscope::report_window{3, 1'000'000'000, 11'000'000'000, 10'000'000'000, 0.625, 6.25e9, ""};
  if (with_devices) {
    std::string devices, peaks;
    kscope::detail::json_writer dw(devices), pw(peaks);
    dw.begin_array();
    pw.begin_array();
    for (int d = 0; d < 2; ++d) {
      kscope::write_json(dw, h200(d));
      kscope::device_peaks p;
      p.device = h200(d);
      p.theoretical_bytes_per_s = 4.8e12;
      p.measured_bytes_per_s = 4.1e12;
      p.bandwidth_method = "copy kernel";
      p.bandwidth_error = "";
      kscope::compute_roof roof;
      roof.type = kscope::data_type::bf16;
      roof.cores = kscope::core_kind::tensor;
      roof.theoretical_flops_per_s = 989e12;
      roof.measured_flops_per_s = 760e12;
      roof.method = "cublasGemmEx";
      p.compute.push_back(roof);
      p.failures.push_back("fp8 tensor: not measured");
      kscope::write_json(pw, p);
      r.context.devices.push_back("NVIDIA H200");
    }
    dw.end_array();
    pw.end_array();
    r.context.devices_json = devices;
    r.context.peaks_json = peaks;
    r.context.roofs.push_back("bf16 tensor 989 TFLOP/s, 4.80 TB/s");
  } else {
    r.context.no_device_reason = "no CUDA device: cudaGetDeviceCount found 0 devices";
  }
  r.warnings.push_back("CUPTI: 3 records dropped");
  r.cupti_status = "collecting";
  r.cupti_counters.records_seen = 10;
  if (with_devices) {  // traced in windows: every key of cupti.trace_windows (null in the other)
    kscope::trace_window_log log;
    log.configure({100, 10000}, 0);
    log.begin(0);
    log.end(100000000);
    r.trace_windows = log.summary(200000000);
  }
  kscope::kernel_summary k;
  k.name = "gemm";
  k.mangled_name = "_Z4gemmv";
  k.calls = 3;
  k.total_ns = 3000;
  k.median_ns = 1000;
  k.min_ns = 900;
  k.max_ns = 1100;
  k.grid = {128, 1, 1};
  k.block = {256, 1, 1};
  k.registers_per_thread = 64;
  r.top_kernels.push_back(k);
  r.sample_cap = 10000;
  r.gpu_timing_skipped = 1;

  kscope::scope_report step;
  step.id = 1;
  step.name = step.path = "step";
  step.depth = 1;
  step.calls = 40;
  step.host_ns = full_summary(2e6);
  step.host_inclusive_ns = 8e7;
  step.host_exclusive_ns = 1e7;
  step.gpu_calls = 40;
  step.gpu_ns = full_summary(1.9e6);
  step.gpu_total_ns = 7.6e7;
  step.declared = kscope::work{2e12, 1e9};
  step.work_calls = 40;
  step.roofline = kscope::place(kscope::work{5e10, 2.5e7}, 1.9e-3, 989e12, 4.8e12);
  step.roof = "bf16 tensor";
  step.flops_per_s_ci = kscope::interval{2.5e13, 2.7e13, 0.95};
  step.fraction_of_measured_roof = 0.035;
  kscope::node_gpu_activity a;
  a.kernel_count = 80;
  a.kernel_ns = 7000000;
  a.busy_ns = 6900000;
  a.idle_ns = 100000;
  a.first_start_ns = 1000;
  a.last_end_ns = 8000000;
  a.memcpy[0] = kscope::copy_totals{2, 4096, 1500};
  a.memset = kscope::copy_totals{1, 1024, 300};
  a.comm_kernel_count = 40;
  a.comm_ns = 2000000;
  a.comm_busy_ns = 2000000;
  a.compute_busy_ns = 5000000;
  kscope::device_gpu_activity split;
  split.device = 1;
  split.kernel_count = 80;
  split.kernel_ns = a.kernel_ns;
  split.busy_ns = a.busy_ns;
  split.comm_kernel_count = 40;
  split.comm_ns = a.comm_ns;
  a.devices.push_back(split);
  // A CUDA graph replayed by "step" whose kernels were captured inside "step/attention".
  kscope::graph_capture_origin built;
  built.captured_in = 2;
  built.kernel_count = 40;
  built.kernel_ns = 1200000;
  built.copy_count = 1;
  built.copy_ns = 300;
  a.graph_capture.push_back(built);
  step.gpu_activity = a;
  step.samples_kept = 40;
  step.samples_capped = false;
  step.tags.push_back(kscope::tag_count{"dtype", "bf16", 40});
  if (with_devices) {
    // Per-scope counters (two profiled calls of "step") and PM sampling.
    step.profiled_calls = 2;
    kscope::counter_values kv;
    kv.values = {{"gpu__time_duration.sum", 1e6},
                 {"dram__bytes_read.sum", 1e9},
                 {"dram__bytes_write.sum", 5e8},
                 {"lts__t_bytes.sum", 3e9},
                 {"sm__sass_thread_inst_executed_op_ffma_pred_on.sum", 1e9},
                 {"sm__sass_thread_inst_executed_op_fadd_pred_on.sum", 0},
                 {"sm__sass_thread_inst_executed_op_fmul_pred_on.sum", 0},
                 {"sm__throughput.avg.pct_of_peak_sustained_elapsed", 30},
                 {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 80}};
    kscope::counter_aggregate agg;
    agg.add_call({kv});
    agg.add_call({kv});
    const kscope::hierarchical_roofs roofs{kscope::roof_line{"fp32 plain", 60e12, 4.8e12, false}};
    step.counters = kscope::make_scope_counter_report(agg, 2, 0, 2, 0, kscope::work{5e10, 2.5e7}, 2e6, 1.9e6, &roofs);
    kscope::session_counters_status counters;
    counters.enabled = true;
    counters.status = "per-scope counters: each scope's first 2 calls";
    counters.metrics = {"dram__bytes_read.sum"};
    counters.notes = {"a note"};
    counters.passes = 2;
    r.counters = counters;

    const std::vector<std::string> metrics = {"dram__throughput.avg.pct_of_peak_sustained_elapsed",
                                              "dram__bytes_read.sum"};
    kscope::sampled_metrics agg2(metrics);
    agg2.add_step_call(1, 0, 200'000);
    agg2.add_kernel({0, 150'000, 1, 0});
    for (int i = 0; i < 2; ++i) {
      const double v[] = {80.0, 1e6};
      agg2.add_sample(i * 100'000, (i + 1) * 100'000, v);
    }
    agg2.attribute_all();
    kscope::session_sampled_metrics sampled;
    sampled.status = "metric sampling stopped: 2 samples";
    sampled.notes = {"a note"};
    sampled.running = true;
    sampled.interval_ns = 100'000;
    sampled.mean_interval_ns = 100'000;
    sampled.windows = 1;
    sampled.coverage = 0.5;
    sampled.samples = 2;
    sampled.attributed = true;
    sampled.folded_until_ns = 200'000;
    sampled.data = agg2.report();
    r.sampled_metrics = sampled;
    // The scope's one verdict, its evidence and another source's under it, and one missing.
    kscope::scope_verdict verdict;
    verdict.basis = "hardware counters";
    verdict.verdict.kind = kscope::bottleneck::memory;
    verdict.verdict.where = "DRAM";
    verdict.verdict.text = "memory-bound (DRAM 80%)";
    verdict.verdict.facts.push_back(kscope::evidence{"dram__throughput.avg.pct_of_peak_sustained_elapsed", 80, "%"});
    verdict.evidence.push_back(kscope::verdict_evidence{"hardware counters", verdict.verdict.facts, 80,
                                                        "dram__throughput.avg.pct_of_peak_sustained_elapsed", 2,
                                                        "profiled calls", true});
    verdict.evidence.push_back(kscope::verdict_evidence{"sampled metrics", verdict.verdict.facts, 80,
                                                        "dram__throughput.avg.pct_of_peak_sustained_elapsed", 2,
                                                        "samples", true});
    verdict.missing.push_back("declared work: none (scope::set_work)");
    step.verdict = verdict;
  }
  r.scopes.push_back(step);

  kscope::scope_report child;
  child.id = 2;
  child.parent = 1;
  child.name = "attention";
  child.path = "step/attention";
  child.depth = 2;
  child.calls = 40;
  child.host_ns = full_summary(1e6);
  child.host_inclusive_ns = 4e7;
  child.host_exclusive_ns = 4e7;
  child.share_of_parent = 0.5;
  child.samples_kept = 40;
  r.scopes.push_back(child);

  // A cross-thread range: the requests section.
  kscope::scope_report request;
  request.id = 3;
  request.name = request.path = "request";
  request.depth = 1;
  request.cross_thread = true;
  request.calls = 40;
  request.host_ns = full_summary(5e7);
  request.host_inclusive_ns = 2e9;
  request.samples_kept = 40;
  r.scopes.push_back(request);

  // GPU-time accounting: one idle gap, one scope with calls in the host ring.
  kscope::gpu_time_report t;
  t.window_start_ns = 1000;
  t.window_end_ns = 80'001'000;
  t.wall_ns = 8e7;
  t.busy_ns = 6.9e6;
  t.busy_share = 6.9e6 / 8e7;
  t.host_intervals = 80;
  t.gpu_events = 160;
  t.gpu_overwritten = 3;
  t.gpu_events_unmatched = 1;
  t.idle_gaps.push_back(kscope::gpu_idle_gap{2'000'000, 500'000, 2, "step/attention"});
  t.idle_by_scope.push_back(kscope::gpu_idle_by_scope{2, "step/attention", 1.1e6, 3});
  kscope::scope_gpu_time g;
  g.id = 1;
  g.path = "step";
  g.gpu_ns = 6.9e6;
  g.share_of_gpu = 1;
  g.kernel_count = 80;
  g.calls_seen = 40;
  g.busy_per_call_ns = full_summary(1.7e5);
  g.gaps_per_call_ns = full_summary(2e4);
  g.kernels_per_call = 2;
  g.d2h_per_call = 0.5;
  g.max_gap_ns = 5e5;
  t.scopes.push_back(g);
  // The second document's account has holes (gpu_time.hpp): its reason is written.
  if (!with_devices) {
    t.unknown_reason = "CUPTI dropped 3 activity records";
    t.busy_ns = std::nan("");
    t.busy_share = std::nan("");
  }
  r.gpu_time = t;
  auto section = std::make_shared<fixture_section>();
  section->fails = !with_devices;
  r.sections.push_back(section);
  return r.json();
}

kscope::sample_series full_series() {
  kscope::sample_series s;
  s.samples_s = {1.1e-3, 1.0e-3, 1.05e-3};
  s.sm_clock_mhz = {1980, 1975, 1980};
  s.launches_per_sample = 4;
  s.batching = "graph";
  s.first_estimate_s = 1.2e-3;
  s.warmup_samples = 10;
  s.warmup_calls = 42;
  s.warmup_s = 0.05;
  s.invalid_samples = 0;
  s.measured_s = 3.15e-3;
  s.measured_span_s = 0.6;
  return s;
}

kscope::series_analysis full_analysis() {
  kscope::series_analysis a;
  a.throttled = {false, false, false};
  a.median_sm_clock_mhz = 1980;
  a.min_sm_clock_mhz = 1975;
  a.max_sm_clock_mhz = 1980;
  a.used_s = {1.1e-3, 1.0e-3, 1.05e-3};
  a.stats = full_summary(1.05e-3);
  a.rel_half_width = 0.01;
  return a;
}

// A bench report with a reference, an output check, a roofline, kernel resources, sweep
// parameters of every kind and raw samples.
std::string bench_report_json() {
  kscope::bench_context c;
  c.timestamp_utc = "2026-12-02T10:00:00Z";
  c.host_name = "gpu-node";
  c.gpu = h200(0);

  kscope::bench_result r;
  r.name = "gemm";
  r.metadata = kscope::bench_metadata{{4096, 4096, 4096}, "bf16", {4096, 1}, {{"layout", "NT"}, {"batch", 8}, {"alpha", 0.5}}};
  r.declared = kscope::work{2.0 * 4096 * 4096 * 4096, 3.0 * 4096 * 4096 * 2};
  r.stopped = kscope::stop_reason::target_reached;
  r.wall_s = 1.2;
  r.rounds = 3;
  r.series = full_series();
  r.analysis = full_analysis();
  r.sm_clock_max_mhz = 1980;
  r.flops_per_s = kscope::rate_estimate{1.3e14, kscope::interval{1.28e14, 1.32e14, 0.95}};
  r.bytes_per_s = kscope::rate_estimate{9.6e10, kscope::interval{9.5e10, 9.7e10, 0.95}};
  r.peak_flops_per_s = 989e12;
  r.peak_bytes_per_s = 4.8e12;
  r.peak_flops_source = "bf16 tensor (theoretical)";
  r.fraction_of_peak_bandwidth = 0.02;
  r.roofline = kscope::place(r.declared, 1.05e-3, 989e12, 4.8e12);
  kscope::kernel_resources k;
  k.block_threads = 256;
  k.registers_per_thread = 128;
  k.occupancy = 0.5;
  k.ptx_version = 90;
  k.binary_version = 90;
  r.resources = k;
  kscope::reference_result ref;
  ref.name = "cublas";
  ref.metadata = r.metadata;
  ref.series = full_series();
  ref.analysis = full_analysis();
  ref.versus = kscope::comparison{1.4, kscope::interval{1.38, 1.42, 0.95}, 1e-6, kscope::verdict::slower};
  ref.relative_speed = 1 / 1.4;
  ref.relative_speed_ci = kscope::interval{1 / 1.42, 1 / 1.38, 0.95};
  ref.check.performed = true;
  ref.check.values = 4096 * 4096;
  ref.check.max_rel_error = 1e-3;
  ref.check.max_abs_error = 2e-3;
  ref.check.tolerance = 1e-2;
  ref.check.passed = true;
  r.reference = ref;
  // bench::counters: one profiled call, through the harness's own conversion, so that
  // every block of "counters" (measured levels, declared vs measured, evidence) is there.
  kscope::counter_result pass;
  pass.state = kscope::counter_state::collected;
  pass.message = "hardware counters: 21 metrics for 1 kernels in 19 replay passes on GH100";
  pass.passes = 19;
  pass.notes = {"fixture note"};
  kscope::counter_values kernel;
  kernel.name = "gemm_kernel";
  kernel.values = {{"gpu__time_duration.sum", 1.05e6},
                   {"dram__bytes_read.sum", 2.0e8},
                   {"dram__bytes_write.sum", 7.0e7},
                   {"lts__t_bytes.sum", 9.0e8},
                   {"l1tex__t_bytes.sum", 4.0e9},
                   {"sm__throughput.avg.pct_of_peak_sustained_elapsed", 82},
                   {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 40}};
  for (const char* op : {"fadd", "fmul", "dadd", "dmul", "dfma", "hadd", "hmul", "hfma"})
    kernel.values[std::string("sm__sass_thread_inst_executed_op_") + op + "_pred_on.sum"] = 0;
  kernel.values["sm__sass_thread_inst_executed_op_ffma_pred_on.sum"] = 4096.0 * 4096 * 4096;
  pass.kernels = {kernel};
  kscope::detail::harness::counter_pass_context counted;
  counted.declared = r.declared;
  counted.peak_flops_per_s = r.peak_flops_per_s;
  counted.peak_bytes_per_s = r.peak_bytes_per_s;
  counted.median_s = 1.05e-3;
  kscope::bench_warp_stalls stalls;
  stalls.collected = true;
  stalls.message = "warp stalls: 1,000 samples in 1 kernel launches";
  stalls.samples = 1000;
  stalls.shares = {{"math_pipe_throttle", 0.4}, {"wait", 0.2}};
  r.counters = kscope::detail::harness::counters_from_pass(pass, {"gpu__time_duration.sum"}, counted, stalls);
  r.warnings.push_back("fixture");
  return kscope::bench_report{c, {r}}.json();
}

std::string doc_path(const char* name) { return std::string(KSCOPE_SOURCE_DIR) + "/docs/" + name; }

}  // namespace

TEST_CASE("docs/report_schema.md lists exactly the keys a session report's JSON has") {
  const std::vector<std::string> problems =
      check_page(doc_path("report_schema.md"), {session_report_json(true), session_report_json(false)});
  CHECK_MESSAGE(problems.empty(), problems.size() << " mismatches:" << joined(problems));
}

TEST_CASE("docs/bench_schema.md lists exactly the keys a bench report's JSON has") {
  const std::vector<std::string> problems = check_page(doc_path("bench_schema.md"), {bench_report_json()});
  CHECK_MESSAGE(problems.empty(), problems.size() << " mismatches:" << joined(problems));
}

// The checker itself: a page that leaves a key out, lists one the output lacks, or states
// the wrong type, is caught (so the two cases above cannot pass by checking nothing).
TEST_CASE("the schema check finds missing, extra and mistyped keys") {
  const std::string page = std::string(KSCOPE_TEST_DATA_DIR) + "/schema_check_fixture.md";
  const std::vector<std::string> problems = check_page(page, {R"({"a": 1, "b": {"c": "x", "d": [{"e": 1.5}]},
                                                                  "p": {"free": 1}, "undocumented": true})"});
  const std::string all = joined(problems);
  CHECK_MESSAGE(problems.size() == 4, all);
  CHECK(all.find("output key `undocumented` is not documented") != std::string::npos);
  CHECK(all.find("documented `b.gone` is not in the output") != std::string::npos);
  CHECK(all.find("`a` is written as integer") != std::string::npos);  // the page says string
  CHECK(all.find("`b.d[].e` is written as number") != std::string::npos);  // the page says integer
}

// The graph_capture keys name scopes by the report's own paths, and the text report
// prints the same breakdown under the scope that replayed the graph.
TEST_CASE("graph_capture: JSON and text name the scope that built the graph by its path") {
  kscope::session_report r;
  kscope::scope_report build, replay;
  build.id = 3;
  build.name = "attention";
  build.path = "prefill/attention";
  build.depth = 2;
  replay.id = 4;
  replay.name = replay.path = "replay";
  replay.depth = 1;
  kscope::node_gpu_activity a;
  a.kernel_count = 41;
  a.kernel_ns = 1250000;
  a.graph_capture.push_back(kscope::graph_capture_origin{3, 40, 1200000, 0, 0});
  a.graph_capture.push_back(kscope::graph_capture_origin{99, 1, 50000, 2, 4000});  // not in the report
  replay.gpu_activity = a;
  r.scopes = {build, replay};

  const std::string text = r.text();
  CHECK_MESSAGE(text.find("  graph kernels built in: prefill/attention (40 kernels, ") != std::string::npos, text);
  CHECK_MESSAGE(text.find(", node 99 (1 kernel, ") != std::string::npos, text);
  CHECK_MESSAGE(text.find("; 2 copies/memsets, ") != std::string::npos, text);

  const kscope::detail::json_parse_result parsed = kscope::detail::parse_json(r.json());
  REQUIRE(parsed.ok());
  const json_value* scopes = parsed.value.find("scopes");
  REQUIRE(scopes != nullptr);
  REQUIRE(scopes->items.size() == 2);
  const json_value* activity = scopes->items[1].find("gpu_activity");
  REQUIRE(activity != nullptr);
  const json_value* capture = activity->find("graph_capture");
  REQUIRE(capture != nullptr);
  REQUIRE(capture->items.size() == 2);
  const json_value& first = capture->items[0];
  REQUIRE(first.find("captured_in") != nullptr);
  CHECK(first.find("captured_in")->string == "prefill/attention");
  CHECK(first.find("captured_in_id")->number == 3);
  CHECK(first.find("kernels")->number == 40);
  CHECK(first.find("ns")->number == 1200000);
  CHECK(capture->items[1].find("captured_in")->string == "node 99");
  CHECK(capture->items[1].find("copies")->number == 2);
}

}  // namespace schema_test
