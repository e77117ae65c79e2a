// kscope/report/merge.hpp — read "kscope.report/1" JSON back, and merge one report per rank.
//
// With one process per GPU, each rank writes its own report (rank.hpp names the files);
// merge_reports() lines the scopes up by path and says, per scope, what every rank spent
// and which rank was slowest (the straggler: in a collective, every rank waits for it).
// Pure C++ on kscope's own JSON reader (detail/json_reader.hpp): no CUDA, no JSON library.
// The merged JSON ("kscope.merged/1") is documented in docs/multi_gpu.md.
//
//   std::vector<std::string> docs = {read("run.rank0.json"), read("run.rank1.json")};
//   kscope::merged_report m = kscope::merge_reports(docs);
//   std::fputs(m.text().c_str(), stdout);      // errors per input are listed first
//   std::string json = m.json();
#pragma once

#include "../core/config.hpp"
#include "../core/detail/json_reader.hpp"
#include "../core/detail/json_writer.hpp"
#include "../core/detail/number_format.hpp"
#include "../cupti/communication.hpp"
#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kscope {

namespace detail {

inline double nan_value() noexcept { return std::numeric_limits<double>::quiet_NaN(); }

inline summary summary_from_json(const json_value& v) {
  summary s{};
  s.n = static_cast<std::size_t>(v.member_number("n", 0));
  s.warmup = static_cast<std::size_t>(v.member_number("warmup", 0));
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
  s.outliers = static_cast<std::size_t>(v.member_number("outliers", 0));
  s.steady = v.member_bool("steady", true);
  return s;
}

// Writes a parsed value back as JSON (numbers through the writer: '.' in any locale).
inline void write_json_value(json_writer& w, const json_value& v) {
  switch (v.type) {
    case json_type::null: w.value(nullptr); return;
    case json_type::boolean: w.value(v.boolean); return;
    case json_type::number: w.value(v.number); return;
    case json_type::string: w.value(v.string); return;
    case json_type::array:
      w.begin_array();
      for (const json_value& item : v.items) write_json_value(w, item);
      w.end_array();
      return;
    case json_type::object:
      w.begin_object();
      for (const auto& [key, member] : v.members) {
        w.key(key);
        write_json_value(w, member);
      }
      w.end_object();
      return;
  }
}

inline void copy_from_json(const json_value* v, copy_totals& c) {
  if (v == nullptr) return;
  c.count = static_cast<std::uint64_t>(v->member_number("count", 0));
  c.bytes = static_cast<std::uint64_t>(v->member_number("bytes", 0));
  c.ns = static_cast<std::int64_t>(v->member_number("ns", 0));
}

inline node_gpu_activity gpu_activity_from_json(const json_value& v) {
  node_gpu_activity a;
  const auto i64 = [&](const json_value& o, const char* key) { return static_cast<std::int64_t>(o.member_number(key, 0)); };
  const auto u64 = [&](const json_value& o, const char* key) { return static_cast<std::uint64_t>(o.member_number(key, 0)); };
  a.kernel_count = u64(v, "kernel_count");
  a.kernel_ns = i64(v, "kernel_ns");
  a.busy_ns = i64(v, "busy_ns");
  a.idle_ns = i64(v, "idle_ns");
  a.first_start_ns = i64(v, "first_start_ns");
  a.last_end_ns = i64(v, "last_end_ns");
  for (copy_direction d : {copy_direction::h2d, copy_direction::d2h, copy_direction::d2d, copy_direction::other})
    copy_from_json(v.find(std::string("memcpy_") + to_string(d)), a.memcpy[static_cast<std::size_t>(d)]);
  copy_from_json(v.find("memset"), a.memset);
  a.comm_kernel_count = u64(v, "comm_kernel_count");
  a.comm_ns = i64(v, "comm_ns");
  a.comm_busy_ns = i64(v, "comm_busy_ns");
  a.compute_busy_ns = i64(v, "compute_busy_ns");
  if (const json_value* devices = v.find("devices")) {
    for (const json_value& d : devices->items) {
      if (a.devices.size() >= max_devices_per_node) break;
      device_gpu_activity split;
      split.device = static_cast<std::uint32_t>(d.member_number("device", 0));
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

}  // namespace detail

// Rebuilds a session_report from its "kscope.report/1" JSON (the inverse of json(), up to
// what the JSON holds: the context's device lines are rebuilt from `context.gpu`, which
// is also kept as is in context.devices_json; samples are not in the JSON). Empty result, with `*error` set, for anything that is not such a
// document.
//
//   std::string error;
//   if (auto r = kscope::parse_report(text, &error)) std::fputs(r->text().c_str(), stdout);
[[nodiscard]] inline std::optional<session_report> parse_report(std::string_view json_text,
                                                                std::string* error = nullptr) {
  const auto fail = [&](std::string message) -> std::optional<session_report> {
    if (error) *error = std::move(message);
    return std::nullopt;
  };
  detail::json_parse_result parsed = detail::parse_json(json_text);
  if (!parsed.ok()) return fail("not valid JSON: " + parsed.error);
  const detail::json_value& doc = parsed.value;
  if (!doc.is_object()) return fail("not a kscope report: the document is not a JSON object");
  const std::string schema = doc.member_string("schema");
  if (schema != "kscope.report/1")
    return fail("not a kscope report: schema is \"" + schema + "\", expected \"kscope.report/1\"");
  const detail::json_value* scopes = doc.find("scopes");
  if (scopes == nullptr || !scopes->is_array()) return fail("malformed kscope report: no \"scopes\" array");

  session_report r;
  if (const detail::json_value* c = doc.find("context")) {
    r.context.kscope_version = c->member_string("kscope_version");
    r.context.host_name = c->member_string("host");
    r.context.timestamp_utc = c->member_string("timestamp_utc");
    r.context.process_id = static_cast<long long>(c->member_number("process_id", 0));
    r.context.cuda_compiled = c->member_bool("cuda_compiled", false);
    r.context.no_device_reason = c->member_string("no_device_reason", "no GPU in the report");
    if (const detail::json_value* gpus = c->find("gpu"); gpus && gpus->is_array()) {
      detail::json_writer devices(r.context.devices_json);
      detail::write_json_value(devices, *gpus);
      for (const detail::json_value& g : gpus->items) {
        std::string line = "#" + std::to_string(static_cast<long long>(g.member_number("ordinal", 0))) + " " +
                           g.member_string("name", "?");
        const std::string cc = g.member_string("compute_capability");
        if (!cc.empty()) line += ", sm_" + cc;
        const double sms = g.member_number("sm_count", detail::nan_value());
        if (std::isfinite(sms)) line += ", " + std::to_string(static_cast<long long>(sms)) + " SMs";
        r.context.devices.push_back(line);
      }
    }
    if (const detail::json_value* roofs = c->find("roofs"))
      for (const detail::json_value& line : roofs->items) r.context.roofs.push_back(line.string_or(""));
    const double rank = c->member_number("rank", -1);
    r.context.rank = (rank >= 0 && rank <= 2147483647.0) ? static_cast<int>(rank) : -1;
  }
  r.sample_cap = static_cast<std::size_t>(doc.member_number("sample_cap", 0));
  r.gpu_timing_skipped = static_cast<std::uint64_t>(doc.member_number("gpu_timing_skipped", 0));
  if (const detail::json_value* w = doc.find("warnings"))
    for (const detail::json_value& line : w->items) r.warnings.push_back(line.string_or(""));
  if (const detail::json_value* cupti = doc.find("cupti")) {
    r.cupti_status = cupti->member_string("status");
    if (const detail::json_value* kernels = cupti->find("top_kernels")) {
      for (const detail::json_value& k : kernels->items) {
        kernel_summary s;
        s.name = k.member_string("name");
        s.mangled_name = k.member_string("mangled_name");
        s.calls = static_cast<std::uint64_t>(k.member_number("calls", 0));
        s.total_ns = static_cast<std::int64_t>(k.member_number("total_ns", 0));
        s.median_ns = k.member_number("median_ns", 0);
        s.min_ns = static_cast<std::int64_t>(k.member_number("min_ns", 0));
        s.max_ns = static_cast<std::int64_t>(k.member_number("max_ns", 0));
        for (int i = 0; i < 3; ++i) {
          s.grid[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(k.find("grid") ? k.find("grid")->at(static_cast<std::size_t>(i)).number_or(0) : 0);
          s.block[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(k.find("block") ? k.find("block")->at(static_cast<std::size_t>(i)).number_or(0) : 0);
        }
        s.registers_per_thread = static_cast<std::uint32_t>(k.member_number("registers_per_thread", 0));
        s.static_shared_bytes = static_cast<std::int32_t>(k.member_number("static_shared_bytes", 0));
        s.dynamic_shared_bytes = static_cast<std::int32_t>(k.member_number("dynamic_shared_bytes", 0));
        s.launch_config_varies = k.member_bool("launch_config_varies", false);
        s.communication = k.member_bool("communication", is_communication_kernel(s.mangled_name));
        r.top_kernels.push_back(std::move(s));
      }
    }
  }
  for (const detail::json_value& s : scopes->items) {
    if (!s.is_object()) return fail("malformed kscope report: a scope is not an object");
    const detail::json_value* path = s.find("path");
    if (path == nullptr || !path->is_string()) return fail("malformed kscope report: a scope has no \"path\"");
    scope_report out;
    out.id = static_cast<node_id>(s.member_number("id", 0));
    out.parent = static_cast<node_id>(s.member_number("parent", 0));
    out.path = path->string;
    out.name = s.member_string("name", out.path);
    out.depth = static_cast<std::size_t>(s.member_number("depth", 1));
    out.cross_thread = s.member_bool("cross_thread", false);
    out.calls = static_cast<std::uint64_t>(s.member_number("calls", 0));
    if (const detail::json_value* h = s.find("host_ns"); h && h->is_object()) out.host_ns = detail::summary_from_json(*h);
    else out.host_ns = detail::summary_from_json(detail::json_value{});
    out.host_inclusive_ns = s.member_number("host_inclusive_ns", 0);
    out.host_exclusive_ns = s.member_number("host_exclusive_ns", 0);
    out.share_of_parent = s.member_number("share_of_parent", detail::nan_value());
    out.gpu_calls = static_cast<std::uint64_t>(s.member_number("gpu_calls", 0));
    if (const detail::json_value* g = s.find("gpu_ns"); g && g->is_object()) out.gpu_ns = detail::summary_from_json(*g);
    else out.gpu_calls = 0;
    out.gpu_total_ns = s.member_number("gpu_total_ns", 0);
    if (const detail::json_value* w = s.find("declared_work")) {
      out.declared = work{w->member_number("flops", 0), w->member_number("bytes", 0)};
      out.work_calls = static_cast<std::uint64_t>(w->member_number("calls", 0));
    }
    if (const detail::json_value* a = s.find("gpu_activity"); a && a->is_object())
      out.gpu_activity = detail::gpu_activity_from_json(*a);
    out.samples_kept = static_cast<std::size_t>(s.member_number("samples_kept", 0));
    out.samples_capped = s.member_bool("samples_capped", false);
    if (const detail::json_value* tags = s.find("tags")) {
      for (const detail::json_value& t : tags->items)
        out.tags.push_back(tag_count{t.member_string("key"), t.member_string("value"),
                                     static_cast<std::uint64_t>(t.member_number("count", 0))});
    }
    r.scopes.push_back(std::move(out));
  }
  return r;
}

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
  int rank = -1;           // from context.rank, else the index
  bool rank_from_report = false;
  std::string host;
  std::string error;       // empty: merged
};

struct merged_report {
  std::vector<merge_input> inputs;
  std::vector<merged_scope> scopes;  // in order of first appearance (depth-first per report)

  [[nodiscard]] std::size_t merged_count() const noexcept {
    std::size_t n = 0;
    for (const merge_input& i : inputs) n += i.error.empty();
    return n;
  }
  [[nodiscard]] const merged_scope* find(const std::string& path) const noexcept {
    for (const merged_scope& s : scopes)
      if (s.path == path) return &s;
    return nullptr;
  }
  [[nodiscard]] std::string text() const;
  [[nodiscard]] std::string json() const;
};

namespace detail {

inline across_ranks summarize_ranks(const std::vector<std::pair<int, double>>& values) {
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

inline void write_across_json(json_writer& w, const across_ranks& a) {
  w.begin_object();
  w.member("ranks", static_cast<unsigned long long>(a.ranks));
  w.member("min_ns", a.min_ns).member("median_ns", a.median_ns).member("max_ns", a.max_ns);
  w.key("slowest_rank");
  if (a.slowest_rank < 0) w.value(nullptr); else w.value(a.slowest_rank);
  w.member("slowest_ratio", a.slowest_ratio);
  w.end_object();
}

}  // namespace detail

// Parses and merges per-rank report documents. A document that is not valid JSON, not
// "kscope.report/1", malformed, or claims a rank another input already has, gets an error
// in `inputs` and is left out; the others are still merged. No inputs: an empty result.
//
//   auto m = kscope::merge_reports({doc0, doc1, doc2});
//   for (const auto& in : m.inputs) if (!in.error.empty()) std::fprintf(stderr, "%s\n", in.error.c_str());
[[nodiscard]] inline merged_report merge_reports(const std::vector<std::string>& json_documents) {
  merged_report out;
  std::vector<session_report> reports;
  std::vector<int> ranks;
  for (std::size_t i = 0; i < json_documents.size(); ++i) {
    merge_input in;
    in.index = i;
    std::string error;
    std::optional<session_report> r = parse_report(json_documents[i], &error);
    if (!r) {
      in.error = "input " + std::to_string(i) + ": " + error;
      out.inputs.push_back(std::move(in));
      continue;
    }
    in.host = r->context.host_name;
    in.rank_from_report = r->context.rank >= 0;
    in.rank = in.rank_from_report ? r->context.rank : static_cast<int>(i);
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
      auto [it, inserted] = index_of.emplace(s.path, out.scopes.size());
      if (inserted) {
        merged_scope m;
        m.path = s.path;
        m.name = s.name;
        m.depth = s.depth;
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

inline std::string merged_report::text() const {
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
    std::string name(2 * (s.depth > 0 ? s.depth - 1 : 0), ' ');
    name += s.name;
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
    std::string name(2 * (s.depth > 0 ? s.depth - 1 : 0), ' ');
    name += s.name;
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
  out += "*: the scope's slowest rank\n";
  return out;
}

inline std::string merged_report::json() const {
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

}  // namespace kscope
