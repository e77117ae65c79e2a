// core/warp_stalls.hpp: the stall-reason table, CUPTI name parsing, profiles per launch,
// per kernel and per scope, the dominant stall and its evidence, the table and JSON
// printers, on synthetic PC-sampling records whose expected answers are worked out in the
// comments. The CUPTI side (cupti/warp_stalls.hpp) is checked here only where it runs
// without a GPU: its refusal of bad options.
#include <kscope/core/warp_stalls.hpp>
#include <kscope/cupti/warp_stalls.hpp>

#include <kscope/core/detail/json_reader.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// Whether the text holds "nan" or "inf" as a word of its own (what printf writes for a
// non-finite double); "dominant" and "information" do not count.
bool has_non_finite(std::string_view text) {
  const auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  for (std::string_view word : {"nan", "NaN", "inf"}) {
    for (std::size_t at = text.find(word); at != std::string_view::npos; at = text.find(word, at + 1)) {
      const bool starts = at == 0 || !letter(text[at - 1]);
      const bool ends = at + word.size() == text.size() || !letter(text[at + word.size()]);
      if (starts && ends) return true;
    }
  }
  return false;
}

std::string cupti(std::string_view key) { return "smsp__pcsamp_warps_issue_stalled_" + std::string(key); }

// Kernel "gemm", launch 5 (kernel-serialized sampling gives each launch a correlation id):
//   PC 0x10: long_scoreboard 600 (500 of them not issued), selected 100
//   PC 0x20: long_scoreboard 10, lg_throttle 200, barrier 90
// Totals: long_scoreboard 610, lg_throttle 200, selected 100, barrier 90 -> 1000 samples,
// 900 of them stalls. The dominant stall is long scoreboard, 610 / 1000 = 61 %.
std::vector<kscope::pc_stall_record> gemm_records(std::uint32_t launch) {
  return {
      {"gemm", 0x10, launch,
       {{cupti("long_scoreboard"), 600}, {cupti("long_scoreboard_not_issued"), 500}, {cupti("selected"), 100}}},
      {"gemm", 0x20, launch, {{cupti("long_scoreboard"), 10}, {cupti("lg_throttle"), 200}, {cupti("barrier"), 90}}},
  };
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Table and names

TEST_CASE("the table describes every reason the issue names, once, with a label, a meaning and advice") {
  const auto& table = kscope::stall_reason_table();
  std::set<std::string_view> keys;
  for (const kscope::stall_reason_info& r : table) {
    CHECK_MESSAGE(keys.insert(r.key).second, "duplicate key " << r.key);
    CHECK(!r.label.empty());
    CHECK(!r.meaning.empty());
    CHECK(!r.advice.empty());
    CHECK(r.meaning.find('\n') == std::string_view::npos);  // one line each
    CHECK(r.advice.find('\n') == std::string_view::npos);
  }
  for (const char* key : {"long_scoreboard", "short_scoreboard", "mio_throttle", "lg_throttle", "barrier",
                          "math_pipe_throttle", "not_selected", "no_instructions", "wait", "selected", "membar",
                          "drain", "dispatch_stall", "imc_miss", "branch_resolving", "sleeping", "tex_throttle",
                          "misc"})
    CHECK_MESSAGE(keys.count(key) == 1, key);
  CHECK(kscope::find_stall_reason("selected")->category == kscope::stall_category::issued);
  CHECK(kscope::find_stall_reason("long_scoreboard")->category == kscope::stall_category::memory);
  CHECK(kscope::find_stall_reason("barrier")->category == kscope::stall_category::synchronization);
}

TEST_CASE("CUPTI names: prefixes and the _not_issued twin are taken off, unknown names kept whole") {
  kscope::stall_reason_name n = kscope::parse_stall_reason_name(cupti("barrier_not_issued"));
  CHECK(n.key == "barrier");
  CHECK(n.not_issued);
  CHECK(n.known_prefix);
  n = kscope::parse_stall_reason_name("smsp__pcsamp_warp_stall_long_scoreboard");
  CHECK(n.key == "long_scoreboard");
  CHECK(!n.not_issued);
  n = kscope::parse_stall_reason_name("smsp__pcsamp_warps_issue_stalled_no_instruction");  // metric spelling
  CHECK(n.key == "no_instructions");
  n = kscope::parse_stall_reason_name("vendor_reason_x");
  CHECK(n.key == "vendor_reason_x");
  CHECK(!n.known_prefix);
  CHECK(!n.not_issued);
  // "_not_issued" alone is a name, not a suffix of an empty one.
  CHECK(kscope::parse_stall_reason_name("_not_issued").key == "_not_issued");
  CHECK(kscope::find_stall_reason(cupti("mio_throttle")) == kscope::find_stall_reason("mio_throttle"));
  CHECK(kscope::find_stall_reason(cupti("quantum_wait")) == nullptr);
  CHECK(kscope::stall_reason_label("quantum_wait") == "quantum_wait");
  CHECK(kscope::stall_reason_category("quantum_wait") == kscope::stall_category::other);
}

// ---------------------------------------------------------------------------------------
// Profiles

TEST_CASE("a launch's records add up per reason; _not_issued counts beside its reason, never in the total") {
  const auto profiles = kscope::build_warp_stall_profiles(gemm_records(5));
  REQUIRE(profiles.size() == 1);
  const kscope::warp_stall_profile& p = profiles[0];
  CHECK(p.name == "gemm");
  CHECK(p.launches == 1);
  CHECK(p.total_samples() == 1000);
  CHECK(p.issued_samples() == 100);
  CHECK(p.stall_samples() == 900);
  CHECK(p.samples_of("long_scoreboard") == 610);
  CHECK(p.reasons.at("long_scoreboard").not_issued == 500);
  CHECK(p.samples_of("lg_throttle") == 200);
  CHECK(p.share_of("long_scoreboard") == doctest::Approx(0.61));
  CHECK(p.share_of("membar") == 0);
  REQUIRE(p.pcs.size() == 2);
  const auto rows = p.breakdown();
  REQUIRE(rows.size() == 4);
  CHECK(rows[0].first == "long_scoreboard");
  CHECK(rows[1].first == "lg_throttle");
  CHECK(rows[2].first == "selected");
  CHECK(rows[3].first == "barrier");
}

TEST_CASE("the dominant stall names its share, both sample counts, its meaning and its advice") {
  const auto p = kscope::build_warp_stall_profiles(gemm_records(5))[0];
  const kscope::warp_stall_finding d = kscope::dominant_stall(p);
  REQUIRE(d.found);
  CHECK(d.reason == "long_scoreboard");
  CHECK(d.category == kscope::stall_category::memory);
  CHECK(d.samples == 610);
  CHECK(d.not_issued == 500);
  CHECK(d.total_samples == 1000);
  CHECK(d.percent == doctest::Approx(61.0));
  CHECK_MESSAGE(contains(d.text, "long scoreboard: 61% of 1,000 samples (610): "), d.text);
  CHECK(contains(d.text, kscope::find_stall_reason("long_scoreboard")->meaning));
  CHECK(contains(d.text, kscope::find_stall_reason("long_scoreboard")->advice));
  // At 5 %: long scoreboard 61 %, LG throttle 20 %, barrier 9 %; "selected" is never a finding.
  const auto all = kscope::stall_findings(p, 5.0);
  REQUIRE(all.size() == 3);
  CHECK(all[1].reason == "lg_throttle");
  CHECK(contains(all[1].text, "LG throttle: 20% of 1,000 samples (200)"));
  CHECK(all[2].reason == "barrier");
  CHECK(contains(all[2].text, "barrier: 9.0% of 1,000 samples (90)"));
  CHECK(kscope::stall_findings(p, 50.0).size() == 1);
}

TEST_CASE("selected is not a stall: it counts in the total but never dominates") {
  kscope::pc_stall_record r{"busy", 0x0, 1, {{cupti("selected"), 900}, {cupti("barrier"), 100}}};
  const auto p = kscope::build_warp_stall_profiles({r})[0];
  const auto d = kscope::dominant_stall(p);
  REQUIRE(d.found);
  CHECK(d.reason == "barrier");
  CHECK(d.percent == doctest::Approx(10.0));
  CHECK(contains(d.text, "barrier: 10% of 1,000 samples (100)"));

  kscope::pc_stall_record only{"issue", 0x0, 1, {{cupti("selected"), 50}}};
  const auto q = kscope::build_warp_stall_profiles({only})[0];
  const auto none = kscope::dominant_stall(q);
  CHECK(!none.found);
  CHECK(none.total_samples == 50);
  CHECK(contains(none.text, "every one of 50 samples"));
  CHECK(kscope::to_stall_shares(q).empty());
}

TEST_CASE("equal counts go to the reason listed first in the table") {
  kscope::pc_stall_record r{"k", 0x0, 1, {{cupti("barrier"), 50}, {cupti("long_scoreboard"), 50}}};
  const auto p = kscope::build_warp_stall_profiles({r})[0];
  CHECK(kscope::dominant_stall(p).reason == "long_scoreboard");
  CHECK(p.pcs[0].top_reason() == "long_scoreboard");
}

TEST_CASE("unknown reason names are counted under their own key and explained as unknown") {
  const std::vector<kscope::pc_stall_record> records = {
      {"k", 0x0, 1, {{cupti("quantum_wait"), 700}, {cupti("quantum_wait_not_issued"), 70}, {cupti("wait"), 300}}},
      {"k", 0x8, 1, {{"vendor_reason_x", 5}}},
  };
  const auto p = kscope::build_warp_stall_profiles(records)[0];
  CHECK(p.total_samples() == 1005);
  CHECK(p.samples_of("quantum_wait") == 700);
  CHECK(p.reasons.at("quantum_wait").not_issued == 70);
  CHECK(p.samples_of("vendor_reason_x") == 5);
  const auto d = kscope::dominant_stall(p);
  CHECK(d.reason == "quantum_wait");
  CHECK(d.category == kscope::stall_category::other);
  CHECK(contains(d.text, "quantum_wait: 70% of 1,005 samples (700)"));
  CHECK(contains(d.text, "does not describe"));
  const std::string table = kscope::format_warp_stalls(p);
  CHECK(contains(table, "quantum_wait"));
  CHECK(contains(table, "vendor_reason_x"));
}

TEST_CASE("launches come out in launch order; records without a launch group by function") {
  auto records = gemm_records(9);
  const auto earlier = gemm_records(3);
  records.insert(records.end(), earlier.begin(), earlier.end());
  records.push_back({"relu", 0x40, 0, {{cupti("drain"), 7}}});
  records.push_back({"relu", 0x40, 0, {{cupti("drain"), 3}}});
  records.push_back({"relu", 0x50, 0, {{cupti("wait"), 5}}});
  const auto p = kscope::build_warp_stall_profiles(records);
  REQUIRE(p.size() == 3);
  CHECK(p[0].name == "gemm");
  CHECK(p[1].name == "gemm");
  CHECK(p[2].name == "relu");
  CHECK(p[2].launches == 0);  // continuous sampling: launches not known
  CHECK(p[2].total_samples() == 15);
  REQUIRE(p[2].pcs.size() == 2);  // the two records of PC 0x40 are one PC
  CHECK(p[2].pcs[0].samples() == 10);
}

TEST_CASE("a launch is named after its function with the most samples") {
  const std::vector<kscope::pc_stall_record> records = {
      {"helper", 0x0, 4, {{cupti("wait"), 10}}},
      {"main_kernel", 0x0, 4, {{cupti("wait"), 90}}},
  };
  const auto p = kscope::build_warp_stall_profiles(records);
  REQUIRE(p.size() == 1);
  CHECK(p[0].name == "main_kernel");
  CHECK(p[0].pcs.size() == 2);
}

TEST_CASE("per kernel and per scope: launches and PCs add") {
  auto records = gemm_records(1);
  const auto second = gemm_records(2);
  records.insert(records.end(), second.begin(), second.end());
  records.push_back({"relu", 0x4, 3, {{cupti("drain"), 20}}});
  const auto launches = kscope::build_warp_stall_profiles(records);
  REQUIRE(launches.size() == 3);

  const auto kernels = kscope::merge_by_kernel(launches);
  REQUIRE(kernels.size() == 2);
  CHECK(kernels[0].name == "gemm");
  CHECK(kernels[0].launches == 2);
  CHECK(kernels[0].total_samples() == 2000);
  REQUIRE(kernels[0].pcs.size() == 2);  // same offsets: added, not duplicated
  CHECK(kernels[0].pcs[0].samples() == 1400);
  CHECK(kscope::dominant_stall(kernels[0]).percent == doctest::Approx(61.0));

  const auto scope = kscope::aggregate_warp_stalls("step", launches);
  CHECK(scope.name == "step");
  CHECK(scope.launches == 3);
  CHECK(scope.total_samples() == 2020);
  CHECK(scope.pcs.size() == 3);

  const auto scopes = kscope::aggregate_warp_stalls_by_scope(
      {{"forward", launches[0]}, {"backward", launches[2]}, {"forward", launches[1]}});
  REQUIRE(scopes.size() == 2);
  CHECK(scopes[0].name == "forward");
  CHECK(scopes[0].total_samples() == 2000);
  CHECK(scopes[1].name == "backward");
  CHECK(kscope::dominant_stall(scopes[1]).reason == "drain");
  CHECK(kscope::dominant_stall(scopes[1]).percent == doctest::Approx(100.0));
}

TEST_CASE("hottest PCs: most samples first, each with its top reason and function+offset") {
  const auto p = kscope::build_warp_stall_profiles(gemm_records(1))[0];
  const auto hot = p.hottest_pcs(5);
  REQUIRE(hot.size() == 2);
  CHECK(hot[0].pc_offset == 0x10);
  CHECK(hot[0].samples() == 700);
  CHECK(hot[0].top_reason() == "long_scoreboard");
  CHECK(hot[0].where() == "gemm+0x10");
  CHECK(hot[1].top_reason() == "lg_throttle");
  CHECK(p.hottest_pcs(1).size() == 1);
  CHECK(p.hottest_pcs(0).empty());
}

TEST_CASE("stall shares for classify(): stalls only, as shares of all samples") {
  const auto p = kscope::build_warp_stall_profiles(gemm_records(1))[0];
  const auto shares = kscope::to_stall_shares(p);
  REQUIRE(shares.size() == 3);
  CHECK(shares[0].reason == "long_scoreboard");
  CHECK(shares[0].share == doctest::Approx(0.61));
  double sum = 0;
  for (const auto& s : shares) sum += s.share;
  CHECK(sum == doctest::Approx(0.9));  // the 10 % "selected" is not a stall
}

// ---------------------------------------------------------------------------------------
// Empty input and printers

TEST_CASE("the non-finite check finds printf's words and nothing else") {
  CHECK(has_non_finite("share: nan"));
  CHECK(has_non_finite("[inf]"));
  CHECK(!has_non_finite("dominant stall, information"));
}

TEST_CASE("empty input: no profiles; an empty profile says so and prints no NaN") {
  CHECK(kscope::build_warp_stall_profiles({}).empty());
  CHECK(kscope::merge_by_kernel({}).empty());
  const kscope::warp_stall_profile empty = kscope::aggregate_warp_stalls("idle", {});
  CHECK(empty.total_samples() == 0);
  CHECK(empty.share_of("barrier") == 0);
  CHECK(empty.breakdown().empty());
  CHECK(empty.hottest_pcs(3).empty());
  const auto d = kscope::dominant_stall(empty);
  CHECK(!d.found);
  CHECK(d.percent == 0);
  CHECK(contains(d.text, "no warp samples"));
  CHECK(kscope::stall_findings(empty).empty());
  const std::string table = kscope::format_warp_stalls(empty);
  CHECK(contains(table, "idle: 0 samples"));
  CHECK(contains(table, "no warp samples"));
  CHECK(!has_non_finite(table));
  const std::string json = kscope::warp_stalls_json({empty});
  CHECK(!has_non_finite(json));
  const auto parsed = kscope::detail::parse_json(json);
  REQUIRE_MESSAGE(parsed.ok(), parsed.error);
  REQUIRE(parsed.value.is_array());
  const kscope::detail::json_value& o = parsed.value.at(0);
  CHECK(o.member_number("total_samples", -1) == 0);
  REQUIRE(o.find("dominant") != nullptr);
  CHECK(o.find("dominant")->is_null());
}

TEST_CASE("the table: every line carries the prefix; rows, dominant stall, advice and hottest PCs") {
  const auto p = kscope::build_warp_stall_profiles(gemm_records(1))[0];
  kscope::warp_stall_print_options o;
  o.prefix = "WARPSTALL ";
  o.top_pcs = 2;
  const std::string table = kscope::format_warp_stalls(p, o);
  std::istringstream lines(table);
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    ++count;
    CHECK_MESSAGE(line.rfind("WARPSTALL ", 0) == 0, line);
  }
  CHECK(count >= 9);  // header, column titles, 4 rows, dominant, 2 "also", hottest title, 2 PCs
  CHECK(contains(table, "gemm: 1,000 samples, 100 issued, 1 launch"));
  CHECK(contains(table, "dominant stall: long scoreboard: 61% of 1,000 samples (610)"));
  CHECK(contains(table, "also: LG throttle: 20% of 1,000 samples (200)"));
  CHECK(contains(table, "selected (issued)"));
  CHECK(contains(table, "not a stall"));
  CHECK(contains(table, "gemm+0x10  700 samples (70%), mostly long scoreboard"));
  CHECK(!has_non_finite(table));
}

TEST_CASE("JSON: reasons largest first with shares, the dominant stall, the hottest PCs, names escaped") {
  auto records = gemm_records(1);
  for (auto& r : records) r.function = "gemm\x1b[2J\"q\"";
  const auto p = kscope::build_warp_stall_profiles(records)[0];
  const std::string json = kscope::warp_stalls_json({p}, 1);
  const auto parsed = kscope::detail::parse_json(json);
  REQUIRE_MESSAGE(parsed.ok(), parsed.error);
  const kscope::detail::json_value& o = parsed.value.at(0);
  CHECK(o.member_string("name") == "gemm\x1b[2J\"q\"");
  CHECK(o.member_number("total_samples", 0) == 1000);
  CHECK(o.member_number("issued_samples", 0) == 100);
  CHECK(o.member_number("stall_samples", 0) == 900);
  const kscope::detail::json_value* reasons = o.find("reasons");
  REQUIRE(reasons != nullptr);
  REQUIRE(reasons->is_array());
  CHECK(reasons->at(0).member_string("reason") == "long_scoreboard");
  CHECK(reasons->at(0).member_number("share", 0) == doctest::Approx(0.61));
  CHECK(reasons->at(0).member_number("not_issued_samples", 0) == 500);
  CHECK(reasons->at(0).member_string("category") == "memory");
  CHECK(reasons->at(0).member_bool("known", false));
  const kscope::detail::json_value* dominant = o.find("dominant");
  REQUIRE(dominant != nullptr);
  CHECK(dominant->member_string("reason") == "long_scoreboard");
  CHECK(dominant->member_number("share", 0) == doctest::Approx(0.61));
  const kscope::detail::json_value* hot = o.find("hottest_pcs");
  REQUIRE(hot != nullptr);
  CHECK(hot->items.size() == 1);  // top_pcs = 1
  CHECK(hot->at(0).member_number("pc_offset", 0) == 16);
  CHECK(hot->at(0).member_string("top_reason") == "long_scoreboard");
  CHECK(!has_non_finite(json));
  CHECK(!contains(json, "\x1b"));  // the control character is escaped
}

// ---------------------------------------------------------------------------------------
// The CUPTI side without a GPU

TEST_CASE("profile_warp_stalls refuses bad options without running the work") {
  int calls = 0;
  kscope::warp_stall_options o;
  o.sampling_period = 4;  // below CUPTI's 5
  auto r = kscope::profile_warp_stalls([&] { ++calls; }, o);
  CHECK(r.state == kscope::counter_state::invalid_request);
  CHECK(contains(r.message, "sampling_period"));
  o.sampling_period = 0;
  o.max_pcs = 0;
  r = kscope::profile_warp_stalls([&] { ++calls; }, o);
  CHECK(r.state == kscope::counter_state::invalid_request);
  CHECK(contains(r.message, "max_pcs"));
  CHECK(calls == 0);
  CHECK(!r.ok());
}

TEST_CASE("without PC sampling support or a device, one message and the work not run") {
  int calls = 0;
  const auto r = kscope::profile_warp_stalls([&] { ++calls; });
#if !KSCOPE_HAS_PC_SAMPLING
  CHECK(r.state == kscope::counter_state::disabled);
#endif
  if (!r.ok()) {
    CHECK(calls == 0);
    CHECK(!r.message.empty());
    CHECK(r.message.find('\n') == std::string::npos);
  }
  MESSAGE(r.message);
}
