// One verdict per scope (verdict/scope_verdict.hpp): which evidence decides, what the rest
// is said to conclude, what was missing, and the verdict's way through the printers and the
// JSON reader.
#include <kscope/pm_sampling/sampler.hpp>
#include <kscope/report/merge.hpp>
#include <kscope/report/report.hpp>
#include <kscope/verdict/scope_verdict.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace verdict_test {  // one per file: the unit tests build as one program

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

bool any_contains(const std::vector<std::string>& lines, const std::string& part) {
  for (const std::string& l : lines)
    if (contains(l, part)) return true;
  return false;
}

kscope::finding counters_said(kscope::bottleneck kind, const std::string& where) {
  kscope::finding f;
  f.kind = kind;
  f.where = where;
  f.facts.push_back(kscope::evidence{"dram__throughput.avg.pct_of_peak_sustained_elapsed", 87, "%"});
  f.text = std::string(kscope::to_string(kind)) + " (" + where + " 87%)";
  return f;
}

// A node of the sampled-metrics section with the default metrics' means (SM %, DRAM %,
// tensor %) and the share of its samples the GPU idled.
kscope::node_sampled_metrics sampled_node(double sm, double dram, double tensor, double idle) {
  kscope::node_sampled_metrics n;
  n.samples = 40;
  n.touched_sample_ns = 1e6;
  n.touched_idle_ns = idle * 1e6;
  n.values.resize(7);
  n.values[0].mean = sm;
  n.values[1].mean = dram;
  n.values[4].mean = tensor;
  return n;
}

// A scope that declared work and was placed under the fp32 roof: memory-bound at 40 % of it.
kscope::scope_report placed_scope(kscope::bound limiter, bool impossible = false) {
  kscope::scope_report s;
  s.id = 3;
  s.name = s.path = "decode";
  s.depth = 1;
  s.calls = 10;
  s.work_calls = 10;
  s.declared = kscope::work{1e9, 4e9};
  kscope::placement p{};
  p.flops_per_s = 1e12;
  p.bytes_per_s = 4e12;
  p.intensity = 0.25;
  p.roof_flops_per_s = 1.2e12;
  p.fraction_of_roof = impossible ? 13.4 : 0.4;
  p.limiter = limiter;
  s.roofline = p;
  s.roof = "fp32 plain";
  s.roofline_impossible = impossible;
  if (impossible) s.roofline_impossible_reason = "the declared work is more than what ran";
  return s;
}

}  // namespace

TEST_CASE("measured evidence decides, the busiest unit nearest its peak first; the others are named as agreeing or not") {
  kscope::scope_report s = placed_scope(kscope::bound::memory);
  s.counters = kscope::scope_counter_report{};
  s.counters->profiled_calls = 5;
  s.counters->classified.verdict = counters_said(kscope::bottleneck::memory, "DRAM");  // DRAM at 87 %
  SUBCASE("counters' unit nearer its peak: the counters decide") {
    const kscope::node_sampled_metrics sampled = sampled_node(70, 20, 85, 0.0);  // compute-bound, tensor at 85 %
    const std::vector<std::string> metrics = kscope::default_sampling_metrics();
    const std::optional<kscope::scope_verdict> v = kscope::decide_verdict({&s, &sampled, &metrics});
    REQUIRE(v);
    CHECK(v->basis == "hardware counters");
    CHECK(v->verdict.kind == kscope::bottleneck::memory);
    CHECK(v->verdict.where == "DRAM");
    // Every source's evidence under it, the deciding one first; none with a class of its own.
    REQUIRE(v->evidence.size() == 3);
    CHECK(v->evidence[0].source == "hardware counters");
    CHECK(v->decided() == &v->evidence[0]);
    CHECK(v->evidence[0].percent_of_peak == 87);
    CHECK(v->evidence[0].metric == "dram__throughput.avg.pct_of_peak_sustained_elapsed");
    CHECK(v->evidence[1].source == "sampled metrics");
    CHECK(v->evidence[1].count == 40);
    CHECK(v->evidence[1].count_of == "samples");
    CHECK_FALSE(v->evidence[1].agrees);
    CHECK(v->evidence[2].source == "declared work");
    CHECK(v->evidence[2].agrees);
    CHECK(v->evidence[2].count == 10);
    CHECK(v->evidence[2].percent_of_peak == doctest::Approx(40));
    CHECK(v->missing.empty());
    CHECK(kscope::detail::verdict_headline(*v) ==
          "memory-bound (DRAM), from hardware counters over 5 profiled calls; busiest unit "
          "dram__throughput.avg.pct_of_peak_sustained_elapsed at 87.0% of peak");
    const std::vector<std::string> lines = kscope::detail::verdict_lines(*v);
    REQUIRE(lines.size() == 4);
    CHECK(lines[0] == "memory-bound (DRAM 87%)");  // the verdict's own text
    CHECK(lines[1] == "hardware counters (5 profiled calls): dram__throughput.avg.pct_of_peak_sustained_elapsed 87.0%");
    CHECK(contains(lines[2], "sampled metrics (40 samples, outweighed): "));
    CHECK(contains(lines[3], "declared work (10 calls): declared.flops_per_s 1.00 TFLOP/s"));
    CHECK(contains(lines[3], "roofline.fraction_of_roof 40.0%"));
    for (std::size_t i = 1; i < lines.size(); ++i)  // numbers, no second conclusion
      CHECK_MESSAGE(!contains(lines[i], "-bound"), lines[i]);
  }
  SUBCASE("the sampled tensor pipe nearer its peak: the sampled metrics decide") {
    const kscope::node_sampled_metrics sampled = sampled_node(88, 20, 93, 0.0);  // tensor pipe at 93 %
    const std::vector<std::string> metrics = kscope::default_sampling_metrics();
    const std::optional<kscope::scope_verdict> v = kscope::decide_verdict({&s, &sampled, &metrics});
    REQUIRE(v);
    CHECK(v->basis == "sampled metrics");
    CHECK(v->verdict.kind == kscope::bottleneck::compute);
    REQUIRE(v->evidence.size() == 3);
    CHECK(v->evidence[0].source == "sampled metrics");
    CHECK(v->evidence[0].percent_of_peak == 93);
    CHECK(v->evidence[1].source == "hardware counters");
    CHECK_FALSE(v->evidence[1].agrees);
  }
}

TEST_CASE("a counter stand-in that read latency-bound gives way to a sampled unit measured near its peak") {
  // The transpose: per-scope counters with only a stand-in for L2 (lts__t_sectors 22.6 %)
  // said latency-bound; the sampled L2 ran at 76 % (Nsight Compute: L2 at 80 %).
  kscope::scope_report s;
  s.id = 4;
  s.name = s.path = "transpose";
  s.calls = 10;
  s.gpu_activity = kscope::node_gpu_activity{};
  s.gpu_activity->kernel_count = 10;
  s.counters = kscope::scope_counter_report{};
  kscope::finding latency;
  latency.kind = kscope::bottleneck::latency;
  latency.facts = {{"sm__throughput.avg.pct_of_peak_sustained_elapsed", 12, "%"},
                   {"lts__t_sectors.avg.pct_of_peak_sustained_elapsed", 22.6, "%"},
                   {"sm__warps_active.avg.pct_of_peak_sustained_active", 95, "%"}};  // occupancy: no unit
  s.counters->classified.verdict = latency;
  std::vector<std::string> metrics = kscope::default_sampling_metrics();
  kscope::node_sampled_metrics sampled = sampled_node(15, 30, 0, 0.0);
  metrics.push_back("lts__throughput.avg.pct_of_peak_sustained_elapsed");
  sampled.values.resize(metrics.size());
  sampled.values.back().mean = 76;
  const std::optional<kscope::scope_verdict> v = kscope::decide_verdict({&s, &sampled, &metrics});
  REQUIRE(v);
  CHECK(v->basis == "sampled metrics");
  CHECK(v->verdict.kind == kscope::bottleneck::memory);
  CHECK(v->verdict.where == "L2");
  REQUIRE(v->evidence.size() == 2);
  CHECK(v->evidence[0].percent_of_peak == 76);
  CHECK(v->evidence[0].metric == "lts__throughput.avg.pct_of_peak_sustained_elapsed");
  CHECK(v->evidence[1].source == "hardware counters");
  CHECK_FALSE(v->evidence[1].agrees);  // it read latency-bound
  CHECK(v->evidence[1].percent_of_peak == 22.6);  // occupancy left out
  CHECK(kscope::detail::measured_peak_pct(latency) == 22.6);
}

TEST_CASE("undecided counters give way to sampled metrics, and say why") {
  kscope::scope_report s = placed_scope(kscope::bound::compute);
  s.gpu_activity = kscope::node_gpu_activity{};
  s.counters = kscope::scope_counter_report{};
  s.counters->classified.verdict.kind = kscope::bottleneck::undetermined;
  s.counters->classified.verdict.text = "undetermined: no kernel profiled";
  const kscope::node_sampled_metrics sampled = sampled_node(12, 82, 0, 0.05);  // memory-bound, DRAM
  const std::vector<std::string> metrics = kscope::default_sampling_metrics();
  const std::optional<kscope::scope_verdict> v = kscope::decide_verdict({&s, &sampled, &metrics});
  REQUIRE(v);
  CHECK(v->basis == "sampled metrics");
  CHECK(v->verdict.kind == kscope::bottleneck::memory);
  REQUIRE(v->evidence.size() == 2);
  CHECK(v->evidence[1].source == "declared work");
  CHECK_FALSE(v->evidence[1].agrees);  // declared work placed it compute-bound
  CHECK(any_contains(v->missing, "hardware counters did not decide: undetermined: no kernel profiled"));
}

TEST_CASE("declared work alone decides, and the report says what would decide better") {
  kscope::scope_report s = placed_scope(kscope::bound::memory);
  s.gpu_activity = kscope::node_gpu_activity{};
  const std::optional<kscope::scope_verdict> v = kscope::decide_verdict({&s, nullptr, nullptr});
  REQUIRE(v);
  CHECK(v->basis == "declared work");
  CHECK(v->verdict.kind == kscope::bottleneck::memory);
  CHECK(v->verdict.where == "DRAM");
  CHECK(contains(v->verdict.text, "declared work"));
  CHECK(contains(v->verdict.text, "of the fp32 plain roof"));
  CHECK(any_contains(v->missing, "hardware counters: not collected"));
  CHECK(any_contains(v->missing, "sampled metrics: not collected"));
}

TEST_CASE("a placement that cannot be true is no verdict, and no evidence is no verdict") {
  SUBCASE("impossible placement, nothing else") {
    const kscope::scope_report s = placed_scope(kscope::bound::compute, /*impossible=*/true);
    CHECK_FALSE(kscope::decide_verdict({&s, nullptr, nullptr}));
    CHECK_FALSE(kscope::detail::declared_work_finding(s));
  }
  SUBCASE("impossible placement beside counters: counters decide, the placement is named as missing") {
    kscope::scope_report s = placed_scope(kscope::bound::compute, /*impossible=*/true);
    s.counters = kscope::scope_counter_report{};
    s.counters->classified.verdict = counters_said(kscope::bottleneck::compute, "tensor pipe");
    const std::optional<kscope::scope_verdict> v = kscope::decide_verdict({&s, nullptr, nullptr});
    REQUIRE(v);
    CHECK(v->basis == "hardware counters");
    CHECK(v->evidence.size() == 1);
    CHECK(any_contains(v->missing, "declared work: its placement cannot be true (the declared work is more than what ran)"));
  }
  SUBCASE("kernels only a counter pass saw (no CUPTI, no stream): undetermined with the counters' reason") {
    kscope::scope_report s;
    s.name = s.path = "gemm";
    s.calls = 10;
    s.counters = kscope::scope_counter_report{};
    s.counters->profiled_calls = 5;
    s.counters->kernels = 20;
    s.counters->classified.verdict.kind = kscope::bottleneck::undetermined;
    s.counters->classified.verdict.text = "undetermined: memory throughput was not measured";
    const std::optional<kscope::scope_verdict> v = kscope::decide_verdict({&s, nullptr, nullptr});
    REQUIRE(v);  // was no verdict at all: the scope left out of "verdict per scope"
    CHECK(v->verdict.kind == kscope::bottleneck::undetermined);
    CHECK(any_contains(v->missing, "hardware counters did not decide: undetermined: memory throughput was not measured"));
  }
  SUBCASE("GPU work and no evidence that decided: undetermined, with what was missing") {
    kscope::scope_report s;
    s.name = s.path = "barrier";
    s.calls = 5;
    s.gpu_activity = kscope::node_gpu_activity{};
    s.gpu_activity->kernel_count = 5;
    const std::optional<kscope::scope_verdict> v = kscope::decide_verdict({&s, nullptr, nullptr});
    REQUIRE(v);
    CHECK(v->verdict.kind == kscope::bottleneck::undetermined);
    CHECK(any_contains(v->missing, "hardware counters: not collected"));
    CHECK(any_contains(v->missing, "declared work: none"));
    CHECK(v->evidence.empty());
    CHECK(v->decided() == nullptr);
    CHECK(kscope::detail::verdict_headline(*v).rfind("undetermined: ", 0) == 0);
    const std::vector<std::string> lines = kscope::detail::verdict_lines(*v);
    CHECK(any_contains(lines, "not decided or not collected: hardware counters: not collected"));
  }
  SUBCASE("a host-only scope") {
    kscope::scope_report s;
    s.name = s.path = "tokenize";
    s.calls = 5;
    CHECK_FALSE(kscope::decide_verdict({&s, nullptr, nullptr}));
  }
  CHECK_FALSE(kscope::decide_verdict({}));
}

namespace {

// Every conclusion word a printer could write.
const char* const class_words[] = {"memory-bound", "compute-bound", "latency-bound", "launch/CPU-bound", "undetermined"};

// Wrapped lines joined again: a line break followed by the indent of a continuation (two
// spaces more than its first line, which may start an item with "- ") becomes one space.
std::string unwrapped(const std::string& text) {
  std::string out;
  std::size_t indent = 0;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    const std::size_t spaces = line.find_first_not_of(' ');
    const bool item = spaces != std::string::npos && line.compare(spaces, 2, "- ") == 0;
    const bool continuation = !out.empty() && !item && spaces != std::string::npos && spaces == indent + 2;
    if (continuation) out += " " + line.substr(spaces);
    else {
      if (!out.empty()) out += "\n";
      out += line;
      indent = spaces == std::string::npos ? 0 : spaces;
    }
    at = end + 1;
  }
  return out;
}

// The class words in `text`, each with how often it occurs.
std::vector<std::pair<std::string, std::size_t>> class_words_in(const std::string& text) {
  std::vector<std::pair<std::string, std::size_t>> found;
  for (const char* word : class_words) {
    std::size_t n = 0;
    for (std::size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
    if (n > 0) found.emplace_back(word, n);
  }
  return found;
}

// Every string of a JSON document that names a class, with its key path.
void json_class_strings(const nlohmann::json& j, const std::string& path, std::vector<std::string>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) json_class_strings(it.value(), path + "." + it.key(), out);
  } else if (j.is_array()) {
    for (const auto& item : j) json_class_strings(item, path + "[]", out);
  } else if (j.is_string()) {
    if (!class_words_in(j.get<std::string>()).empty()) out.push_back(path);
  }
}

// A report of one scope whose three sources disagree: the counters read a stand-in at 23 %
// as latency-bound, the sampled L2 ran at 76 % (memory-bound), the declared work sits at
// 60 % of the fp32 roof right of the ridge (compute).
kscope::session_report conflicting_report() {
  kscope::session_report r;
  kscope::scope_report s = placed_scope(kscope::bound::compute);
  s.name = s.path = "transpose";
  s.roofline->fraction_of_roof = 0.6;
  s.gpu_activity = kscope::node_gpu_activity{};
  s.gpu_activity->kernel_count = 10;
  s.counters = kscope::scope_counter_report{};
  s.counters->profiled_calls = 4;
  kscope::finding latency;
  latency.kind = kscope::bottleneck::latency;
  latency.facts = {{"sm__throughput.avg.pct_of_peak_sustained_elapsed", 12, "%"},
                   {"lts__t_sectors.avg.pct_of_peak_sustained_elapsed", 22.6, "%"}};
  latency.text = "latency-bound: SM throughput 12% and memory throughput 23% of peak";
  s.counters->classified.verdict = latency;
  r.scopes.push_back(s);
  kscope::session_sampled_metrics section;
  section.running = true;
  section.attributed = true;
  section.data.metrics = kscope::default_sampling_metrics();
  section.data.metrics.push_back("lts__throughput.avg.pct_of_peak_sustained_elapsed");
  kscope::node_sampled_metrics n = sampled_node(15, 30, 0, 0.0);
  n.node = s.id;
  n.values.resize(section.data.metrics.size());
  n.values.back().mean = 76;
  section.data.nodes.push_back(n);
  r.sampled_metrics = section;
  kscope::decide_verdicts(r);
  return r;
}

}  // namespace

TEST_CASE("conflicting sources: one conclusion per scope in text, JSON, HTML and CSV, its evidence under it") {
  const kscope::session_report r = conflicting_report();
  REQUIRE(r.scopes[0].verdict);
  const kscope::scope_verdict& v = *r.scopes[0].verdict;
  CHECK(v.basis == "sampled metrics");
  CHECK(v.verdict.kind == kscope::bottleneck::memory);
  CHECK(v.verdict.where == "L2");
  REQUIRE(v.evidence.size() == 3);  // sampled metrics (decided), counters, declared work

  SUBCASE("text: the one class appears only in the verdict, the sections give numbers") {
    const std::string text = r.text();
    const auto words = class_words_in(text);
    REQUIRE_MESSAGE(words.size() == 1, text);
    CHECK(words[0].first == "memory-bound");
    const std::size_t section = text.find("\nverdict per scope");
    REQUIRE(section != std::string::npos);
    CHECK_MESSAGE(text.find("memory-bound") > section, text);
    // Unwrapped: the headline, then under it the text and each source's numbers.
    const std::string flat = unwrapped(text);
    CHECK_MESSAGE(contains(flat, "\ntranspose: memory-bound (L2), from sampled metrics over 40 samples; busiest unit "
                                 "lts__throughput.avg.pct_of_peak_sustained_elapsed at 76.0% of peak\n"),
                  text);
    CHECK_MESSAGE(contains(flat, "\n  - memory-bound (from sampling, 40 samples): SM 15%"), text);
    CHECK_MESSAGE(contains(flat, "\n  - hardware counters (4 profiled calls, outweighed): "
                                 "sm__throughput.avg.pct_of_peak_sustained_elapsed 12.0%"),
                  text);
    CHECK_MESSAGE(contains(flat, "\n  - declared work (10 calls, outweighed): declared.flops_per_s 1.00 TFLOP/s"), text);
    // The roofline and sampled sections keep their numbers and name no limiter.
    CHECK_MESSAGE(contains(text, "roofline (median call)"), text);
    CHECK_MESSAGE(!contains(text, "outweighed: the scope"), text);
    CHECK_MESSAGE(!contains(text, "~compute"), text);
  }
  SUBCASE("JSON: one verdict object, the only place a class is named") {
    const auto doc = nlohmann::json::parse(r.json());
    CHECK(doc["schema"] == "kscope.report/2");
    const auto& j = doc["scopes"][0]["verdict"];
    CHECK(j["class"] == "memory-bound");
    CHECK(j["unit"] == "L2");
    CHECK(j["percent_of_peak"] == 76);
    CHECK(j["metric"] == "lts__throughput.avg.pct_of_peak_sustained_elapsed");
    CHECK(j["source"] == "sampled metrics");
    CHECK(j["count"] == 40);
    CHECK(j["count_of"] == "samples");
    REQUIRE(j["evidence"].size() == 3);
    CHECK(j["evidence"][1]["source"] == "hardware counters");
    CHECK(j["evidence"][1]["agrees"] == false);
    CHECK(j["evidence"][1]["percent_of_peak"] == 22.6);
    CHECK(j["evidence"][1]["facts"][1]["metric"] == "lts__t_sectors.avg.pct_of_peak_sustained_elapsed");
    std::vector<std::string> named;
    json_class_strings(doc, "", named);
    const std::vector<std::string> only_the_verdict = {".scopes[].verdict.class", ".scopes[].verdict.text"};
    CHECK_MESSAGE(named == only_the_verdict, doc.dump(1));
    CHECK(doc["scopes"][0]["roofline"].find("limiter") == doc["scopes"][0]["roofline"].end());
    CHECK(doc["sampled_metrics"]["scopes"][0].find("verdict") == doc["sampled_metrics"]["scopes"][0].end());
  }
  SUBCASE("HTML: one conclusion, in the verdict list; the roofline points name no limiter") {
    const std::string html = r.html();
    const auto words = class_words_in(html);
    REQUIRE_MESSAGE(words.size() == 1, html);
    CHECK(words[0].first == "memory-bound");
    const std::size_t section = html.find("id=\"verdicts\"");
    REQUIRE(section != std::string::npos);
    CHECK(html.find("memory-bound") > section);
    CHECK(contains(html, "data-kind=\"memory-bound\""));
    CHECK(contains(html, "hardware counters (4 profiled calls, outweighed)"));
  }
  SUBCASE("CSV: one verdict column set") {
    const std::string csv = r.csv();
    const auto words = class_words_in(csv);
    REQUIRE_MESSAGE(words.size() == 1, csv);
    CHECK(words[0].second == 1);
    CHECK(contains(csv, ",memory-bound,L2,sampled metrics\n"));
  }
  SUBCASE("read back: the same verdict, printed the same") {
    std::string error;
    const std::optional<kscope::session_report> back = kscope::parse_report(r.json(), &error);
    REQUIRE_MESSAGE(back, error);
    REQUIRE(back->scopes[0].verdict);
    const kscope::scope_verdict& b = *back->scopes[0].verdict;
    CHECK(b.basis == v.basis);
    CHECK(b.verdict.kind == v.verdict.kind);
    CHECK(b.verdict.where == v.verdict.where);
    CHECK(b.verdict.text == v.verdict.text);
    CHECK(b.verdict.facts.size() == v.verdict.facts.size());
    REQUIRE(b.evidence.size() == v.evidence.size());
    for (std::size_t i = 0; i < b.evidence.size(); ++i) {
      CHECK(b.evidence[i].source == v.evidence[i].source);
      CHECK(b.evidence[i].agrees == v.evidence[i].agrees);
      CHECK(b.evidence[i].count == v.evidence[i].count);
      CHECK(b.evidence[i].facts.size() == v.evidence[i].facts.size());
    }
    CHECK(b.missing == v.missing);
    const std::string text = back->text();
    const std::size_t from = text.find("\nverdict per scope");
    REQUIRE(from != std::string::npos);
    const std::string original = r.text();
    CHECK(text.substr(from) == original.substr(original.find("\nverdict per scope")));
  }
}

TEST_CASE("decide_verdicts finds each scope's sampled node; a host-only scope gets none") {
  kscope::session_report r;
  r.scopes.push_back(placed_scope(kscope::bound::memory));
  kscope::scope_report host;
  host.id = 4;
  host.name = host.path = "tokenize";
  host.depth = 1;
  host.calls = 3;
  r.scopes.push_back(host);
  kscope::session_sampled_metrics section;
  section.data.metrics = kscope::default_sampling_metrics();
  kscope::node_sampled_metrics n = sampled_node(90, 15, 95, 0.0);
  n.node = 3;
  section.data.nodes.push_back(n);
  r.sampled_metrics = section;
  kscope::decide_verdicts(r);
  REQUIRE(r.scopes[0].verdict);
  CHECK(r.scopes[0].verdict->basis == "sampled metrics");
  CHECK(r.scopes[0].verdict->verdict.kind == kscope::bottleneck::compute);
  CHECK_FALSE(r.scopes[1].verdict);
  const auto doc = nlohmann::json::parse(r.json());
  CHECK(doc["scopes"][0]["verdict"]["class"] == "compute-bound");
  CHECK(doc["scopes"][1]["verdict"].is_null());
  const std::string text = r.text();
  CHECK_MESSAGE(contains(text, "decode: compute-bound"), text);
  CHECK_MESSAGE(!contains(text, "tokenize: "), text);
}

TEST_CASE("bottleneck names read back; anything else is undetermined") {
  for (kscope::bottleneck b : {kscope::bottleneck::memory, kscope::bottleneck::compute, kscope::bottleneck::latency,
                               kscope::bottleneck::launch, kscope::bottleneck::undetermined})
    CHECK(kscope::bottleneck_from_string(kscope::to_string(b)) == b);
  CHECK(kscope::bottleneck_from_string("") == kscope::bottleneck::undetermined);
  CHECK(kscope::bottleneck_from_string("Memory-Bound") == kscope::bottleneck::undetermined);
  CHECK(kscope::bottleneck_from_string("memory-bound\n") == kscope::bottleneck::undetermined);
}

}  // namespace verdict_test
