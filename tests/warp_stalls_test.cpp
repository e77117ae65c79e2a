// warp_stalls/stalls.hpp: the stall-reason table, CUPTI name parsing, profiles per launch,
// per kernel and per scope, the dominant stall and its evidence, the table and JSON
// printers, on synthetic PC-sampling records whose expected answers are worked out in the
// comments. The CUPTI side (warp_stalls/collect.hpp) is checked here only where it runs
// without a GPU: its refusal of bad options. Source lines: the cubin store
// (cupti/detail/cubin_store.hpp: budget, eviction, duplicates, lookups, counts, with
// made-up CRCs and byte strings), the ELF line-table check on hand-built ELF images, the
// rules that turn a store miss or a lookup into a status (warp_stalls/collect.hpp:
// find_source_line), and how each status prints.
#include <kscope/warp_stalls/stalls.hpp>
#include <kscope/cupti/detail/cubin_store.hpp>
#include <kscope/warp_stalls/collect.hpp>

#include <kscope/core/detail/json_reader.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace warp_stalls_test {  // one per file: the unit tests build as one program

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

// ---------------------------------------------------------------------------------------
// Source lines: the cubin store

namespace {

using kscope::detail::cubin_store;
using kscope::source_line_status;

// `bytes` bytes of a made-up cubin (the store never reads them, except the ELF check).
std::vector<char> blob(std::size_t bytes, char fill = 'c') { return std::vector<char>(bytes, fill); }

cubin_store::outcome add(cubin_store& s, std::uint64_t crc, const std::vector<char>& b) {
  return s.add(crc, b.data(), b.size());
}

}  // namespace

TEST_CASE("cubin store: kept by CRC, found by CRC, a copy that outlives the caller's bytes") {
  cubin_store s(1000);
  {
    std::vector<char> module = blob(100, 'a');
    CHECK(add(s, 0x11, module) == cubin_store::outcome::stored);
    module.assign(100, 'z');  // the caller's bytes change (CUPTI's are gone after the callback)
  }
  const kscope::detail::cubin_ref found = s.find(0x11);
  REQUIRE(found);
  CHECK(found.bytes->size() == 100);
  CHECK(found.bytes->front() == 'a');
  CHECK(!s.find(0x22));
  CHECK(!s.lost(0x22));  // never seen is not lost
  const auto c = s.counts();
  CHECK(c.added == 1);
  CHECK(c.stored == 1);
  CHECK(c.cubins == 1);
  CHECK(c.bytes == 100);
  CHECK(c.budget_bytes == 1000);
  CHECK(c.lookups == 2);
  CHECK(c.hits == 1);
}

TEST_CASE("cubin store: a CRC seen again is counted once as a duplicate, never stored twice") {
  cubin_store s(1000);
  CHECK(add(s, 7, blob(300)) == cubin_store::outcome::stored);
  CHECK(add(s, 7, blob(300)) == cubin_store::outcome::duplicate);  // same module on a second device
  CHECK(add(s, 7, blob(300)) == cubin_store::outcome::duplicate);
  const auto c = s.counts();
  CHECK(c.added == 3);
  CHECK(c.stored == 1);
  CHECK(c.duplicates == 2);
  CHECK(c.bytes == 300);
  CHECK(c.cubins == 1);
}

TEST_CASE("cubin store: over budget the least recently used cubins go, and are remembered as lost") {
  cubin_store s(1000);
  CHECK(add(s, 1, blob(400)) == cubin_store::outcome::stored);
  CHECK(add(s, 2, blob(400)) == cubin_store::outcome::stored);
  CHECK(s.find(1));  // 1 is now used more recently than 2
  CHECK(add(s, 3, blob(400)) == cubin_store::outcome::stored);  // 1200 > 1000: evicts 2, not 1
  CHECK(s.find(1));
  CHECK(!s.find(2));
  CHECK(s.find(3));
  CHECK(s.lost(2));
  CHECK(!s.lost(1));
  auto c = s.counts();
  CHECK(c.evicted == 1);
  CHECK(c.bytes == 800);
  CHECK(c.bytes <= c.budget_bytes);
  // One cubin as large as everything held pushes all of it out; never more than the budget.
  CHECK(add(s, 4, blob(1000)) == cubin_store::outcome::stored);
  c = s.counts();
  CHECK(c.evicted == 3);
  CHECK(c.cubins == 1);
  CHECK(c.bytes == 1000);
  CHECK(s.lost(1));
  CHECK(s.lost(3));
  // Loaded again later: stored again, and no longer lost.
  CHECK(add(s, 2, blob(10)) == cubin_store::outcome::stored);
  CHECK(!s.lost(2));
}

TEST_CASE("cubin store: larger than the whole budget is dropped and counted, nothing evicted for it") {
  cubin_store s(1000);
  CHECK(add(s, 1, blob(500)) == cubin_store::outcome::stored);
  CHECK(add(s, 9, blob(1001)) == cubin_store::outcome::dropped);
  CHECK(add(s, 8, std::vector<char>()) == cubin_store::outcome::dropped);  // no bytes: nothing to keep
  CHECK(s.find(1));
  CHECK(!s.find(9));
  CHECK(s.lost(9));
  const auto c = s.counts();
  CHECK(c.dropped == 2);
  CHECK(c.evicted == 0);
  CHECK(c.bytes == 500);
}

TEST_CASE("cubin store: a smaller budget evicts now; budget 0 keeps nothing") {
  cubin_store s(1000);
  CHECK(add(s, 1, blob(300)) == cubin_store::outcome::stored);
  CHECK(add(s, 2, blob(300)) == cubin_store::outcome::stored);
  CHECK(add(s, 3, blob(300)) == cubin_store::outcome::stored);
  s.set_budget_bytes(650);  // 900 > 650: the oldest (1) goes
  CHECK(!s.find(1));
  CHECK(s.find(2));
  CHECK(s.counts().bytes == 600);
  s.set_budget_bytes(0);
  CHECK(s.counts().cubins == 0);
  CHECK(s.counts().bytes == 0);
  CHECK(add(s, 5, blob(1)) == cubin_store::outcome::dropped);
  CHECK(s.budget_bytes() == 0);
  s.note_error();
  CHECK(s.counts().errors == 1);
}

TEST_CASE("cubin store: the lost-CRC memory is bounded") {
  cubin_store s(10);
  for (std::uint64_t crc = 1; crc <= cubin_store::remembered_losses + 100; ++crc) (void)add(s, crc, blob(11));
  const auto c = s.counts();
  CHECK(c.dropped == cubin_store::remembered_losses + 100);
  CHECK(s.lost(1));
  CHECK(!s.lost(cubin_store::remembered_losses + 50));  // beyond the memory: counted only
}

TEST_CASE("cubin store: threads adding and looking up at once keep the budget and the counts") {
  cubin_store s(64 * 100);
  std::atomic<int> found{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&s, &found, t] {
      for (std::uint64_t i = 0; i < 500; ++i) {
        const std::uint64_t crc = 1 + (i * 7 + static_cast<std::uint64_t>(t)) % 300;  // overlapping CRCs
        const std::vector<char> b = blob(64 + crc % 64);
        (void)s.add(crc, b.data(), b.size());
        if (const auto r = s.find(crc); r) found += r.bytes->size() == b.size() ? 1 : 0;
      }
    });
  for (std::thread& t : threads) t.join();
  const auto c = s.counts();
  CHECK(c.added == 2000);
  CHECK(c.stored + c.duplicates + c.dropped == c.added);
  CHECK(c.bytes <= c.budget_bytes);
  CHECK(c.stored - c.evicted == c.cubins);
  CHECK(found.load() > 0);
}

TEST_CASE("the process-wide store's budget is set through the public call") {
  const std::size_t before = kscope::cubin_store_budget_bytes();
  CHECK(before == cubin_store::default_budget_bytes);  // 64 MiB
  kscope::set_cubin_store_budget_bytes(1234);
  CHECK(kscope::cubin_store_budget_bytes() == 1234);
  kscope::set_cubin_store_budget_bytes(before);
}

// ---------------------------------------------------------------------------------------
// Source lines: the ELF check

namespace {

// A minimal ELF64 little-endian image with the named sections (and .shstrtab), as nvcc
// writes cubins: header, section-name table, section headers.
std::vector<char> elf_with_sections(const std::vector<std::string>& names) {
  std::string strtab(1, '\0');
  std::vector<std::uint32_t> offsets;
  for (const std::string& n : names) {
    offsets.push_back(static_cast<std::uint32_t>(strtab.size()));
    strtab += n;
    strtab += '\0';
  }
  const auto shstrtab_name = static_cast<std::uint32_t>(strtab.size());
  strtab += ".shstrtab";
  strtab += '\0';
  const std::size_t strtab_at = 64;
  std::size_t headers_at = strtab_at + strtab.size();
  headers_at = (headers_at + 7) / 8 * 8;
  const std::size_t count = names.size() + 2;  // the null section, the names, .shstrtab
  std::vector<char> image(headers_at + count * 64, '\0');
  const auto put = [&image](std::size_t at, std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) image[at + static_cast<std::size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
  };
  image[0] = 0x7f;
  image[1] = 'E';
  image[2] = 'L';
  image[3] = 'F';
  image[4] = 2;  // 64-bit
  image[5] = 1;  // little endian
  image[6] = 1;
  put(0x28, headers_at, 8);
  put(0x3A, 64, 2);
  put(0x3C, count, 2);
  put(0x3E, count - 1, 2);
  std::memcpy(image.data() + strtab_at, strtab.data(), strtab.size());
  for (std::size_t i = 0; i < names.size(); ++i) put(headers_at + (i + 1) * 64, offsets[i], 4);
  const std::size_t last = headers_at + (count - 1) * 64;
  put(last, shstrtab_name, 4);
  put(last + 0x18, strtab_at, 8);
  put(last + 0x20, strtab.size(), 8);
  return image;
}

}  // namespace

TEST_CASE("the ELF check: .debug_line means -lineinfo; its absence, none; anything else, unknown") {
  using kscope::detail::cubin_line_info;
  using kscope::detail::cubin_line_table;
  const auto with = elf_with_sections({".text._Z5chasePKiiiPi", ".debug_frame", ".debug_line", ".nv_debug_line_sass"});
  const auto without = elf_with_sections({".text._Z5chasePKiiiPi", ".debug_frame", ".rela.debug_line.x"});
  CHECK(cubin_line_table(with.data(), with.size()) == cubin_line_info::present);
  CHECK(cubin_line_table(without.data(), without.size()) == cubin_line_info::absent);
  // Names that only start like it, or end inside the table, are not it.
  const auto prefix = elf_with_sections({".debug_line_x", ".debug_lin"});
  CHECK(cubin_line_table(prefix.data(), prefix.size()) == cubin_line_info::absent);
  // Not an ELF, truncated, a 32-bit ELF, headers pointing outside: unknown, never a read out of bounds.
  const std::string text = "__global__ void k() {}";
  CHECK(cubin_line_table(text.data(), text.size()) == cubin_line_info::unknown);
  CHECK(cubin_line_table(with.data(), 63) == cubin_line_info::unknown);
  CHECK(cubin_line_table(with.data(), with.size() - 1) == cubin_line_info::unknown);  // last header cut
  CHECK(cubin_line_table(nullptr, 0) == cubin_line_info::unknown);
  auto elf32 = with;
  elf32[4] = 1;
  CHECK(cubin_line_table(elf32.data(), elf32.size()) == cubin_line_info::unknown);
  auto far = with;
  far[0x28 + 7] = 0x7f;  // section table at ~2^62
  CHECK(cubin_line_table(far.data(), far.size()) == cubin_line_info::unknown);
  auto bad_names = with;
  bad_names[0x3E] = 0x40;  // name-table index beyond the section count
  CHECK(cubin_line_table(bad_names.data(), bad_names.size()) == cubin_line_info::unknown);
}

// ---------------------------------------------------------------------------------------
// Source lines: from a PC to a status

namespace {

kscope::warp_stall_pc pc_in(std::uint64_t crc, std::string symbol = "_Z4gemmPKfS0_Pfi", std::uint64_t offset = 0x10) {
  kscope::warp_stall_pc pc;
  pc.function = "gemm(const float*, const float*, float*, int)";
  pc.symbol = std::move(symbol);
  pc.pc_offset = offset;
  pc.cubin_crc = crc;
  return pc;
}

// A fake cuptiGetSassToSourceCorrelation: answers what it is told, counts its calls.
struct fake_correlator {
  kscope::detail::sass_source answer;
  int calls = 0;
  kscope::detail::sass_source operator()(const std::vector<char>&, const std::string&, std::uint64_t) {
    ++calls;
    return answer;
  }
};

}  // namespace

TEST_CASE("a PC's status: resolved, or which of module, line table and CUPTI stood in the way") {
  using kscope::detail::find_source_line;
  using kscope::detail::module_watch;
  cubin_store s(1 << 20);
  const auto with_lines = elf_with_sections({".debug_line"});
  const auto without_lines = elf_with_sections({".text.k"});
  const std::vector<char> not_elf = blob(64, 'x');
  (void)add(s, 0xA, with_lines);
  (void)add(s, 0xB, without_lines);
  (void)add(s, 0xC, not_elf);

  fake_correlator ok{{true, "/src/kernels.cu", 42, ""}};
  auto line = find_source_line(s, module_watch::watched, pc_in(0xA), ok);
  CHECK(line.status == source_line_status::resolved);
  CHECK(line.file == "/src/kernels.cu");
  CHECK(line.line == 42);
  CHECK(ok.calls == 1);

  // CUPTI succeeds without a line: no line table -> not built with -lineinfo; a table
  // without this PC -> its own status; an image kscope cannot read -> -lineinfo is the likely cause.
  fake_correlator empty{{true, "", 0, ""}};
  CHECK(find_source_line(s, module_watch::watched, pc_in(0xB), empty).status == source_line_status::no_line_info);
  CHECK(find_source_line(s, module_watch::watched, pc_in(0xA), empty).status == source_line_status::no_line_for_pc);
  CHECK(find_source_line(s, module_watch::watched, pc_in(0xC), empty).status == source_line_status::no_line_info);
  // CUPTI fails: without a line table that is still "no -lineinfo"; with one, a failed lookup, and why.
  fake_correlator failing{{false, "", 0, "cuptiGetSassToSourceCorrelation failed with CUPTI_ERROR_UNKNOWN"}};
  std::string error;
  CHECK(find_source_line(s, module_watch::watched, pc_in(0xB), failing, &error).status ==
        source_line_status::no_line_info);
  CHECK(error.empty());
  CHECK(find_source_line(s, module_watch::watched, pc_in(0xA), failing, &error).status ==
        source_line_status::lookup_failed);
  CHECK(contains(error, "CUPTI_ERROR_UNKNOWN"));

  // No cubin: loaded while kscope watched nothing (it watched the pass, so before it), or
  // nobody could watch, or the store lost it. CUPTI is never asked.
  fake_correlator never{{true, "x.cu", 1, ""}};
  CHECK(find_source_line(s, module_watch::watched, pc_in(0xDEAD), never).status == source_line_status::module_not_seen);
  CHECK(find_source_line(s, module_watch::not_watched, pc_in(0xDEAD), never).status ==
        source_line_status::module_not_watched);
  cubin_store small(100);
  (void)add(small, 0xE, blob(101));  // dropped: over the budget
  CHECK(find_source_line(small, module_watch::watched, pc_in(0xE), never).status == source_line_status::module_dropped);
  // No CRC, no symbol, or no way to look up at all.
  CHECK(find_source_line(s, module_watch::watched, pc_in(0), never).status == source_line_status::unavailable);
  CHECK(find_source_line(s, module_watch::watched, pc_in(0xA, ""), never).status == source_line_status::unavailable);
  CHECK(find_source_line(s, module_watch::unavailable, pc_in(0xA), never).status == source_line_status::unavailable);
  CHECK(never.calls == 0);
}

TEST_CASE("CUPTI's directory and file become one path") {
  using kscope::detail::join_source_path;
  CHECK(join_source_path("/work/build", "../src/k.cu") == "/work/build/../src/k.cu");
  CHECK(join_source_path("/work/build/", "k.cu") == "/work/build/k.cu");
  CHECK(join_source_path("/work/build", "/abs/k.cu") == "/abs/k.cu");
  CHECK(join_source_path(nullptr, "k.cu") == "k.cu");
  CHECK(join_source_path("", "k.cu") == "k.cu");
  CHECK(join_source_path("/work", nullptr).empty());
  CHECK(join_source_path("/work", "").empty());
}

TEST_CASE("resolve_source_lines: the hottest PCs of each profile, each PC asked once, copies agree") {
  // Two launches of gemm (PCs 0x10: 700 samples, 0x20: 300 each), one of relu (0x4: 20).
  auto records = gemm_records(1);
  const auto second = gemm_records(2);
  records.insert(records.end(), second.begin(), second.end());
  records.push_back({"relu", 0x4, 3, {{cupti("drain"), 20}}, "_Z4relu", 0xBB});
  for (auto& r : records)
    if (r.function == "gemm") {
      r.symbol = "_Z4gemm";
      r.cubin_crc = 0xAA;
    }
  auto kernels = kscope::build_warp_stall_profiles(records);
  REQUIRE(kernels.size() == 3);
  CHECK(kernels[0].pcs[0].cubin_crc == 0xAA);
  CHECK(kernels[0].pcs[0].symbol == "_Z4gemm");
  auto total = kscope::aggregate_warp_stalls("all kernels", kernels);
  std::vector<kscope::warp_stall_profile*> profiles{&kernels[0], &kernels[1], &kernels[2], &total};

  std::vector<std::string> asked;
  const auto lookup = [&asked](const kscope::warp_stall_pc& pc) {
    asked.push_back(pc.where());
    kscope::source_line l;
    if (pc.function == "relu") {
      l.status = source_line_status::module_not_seen;
    } else {
      l.status = source_line_status::resolved;
      l.file = "gemm.cu";
      l.line = static_cast<std::uint32_t>(pc.pc_offset);  // 0x10 -> line 16
    }
    return l;
  };
  // The hottest PC of each profile: gemm+0x10 (both launches and the total), relu+0x4.
  CHECK(kscope::resolve_source_lines(profiles, 1, 100, lookup) == 2);
  CHECK(asked == std::vector<std::string>{"gemm+0x10", "relu+0x4"});
  for (const kscope::warp_stall_profile* p : profiles) {
    for (const kscope::warp_stall_pc& pc : p->pcs) {
      if (pc.pc_offset == 0x10) CHECK(pc.source() == "gemm.cu:16");
      if (pc.pc_offset == 0x20) CHECK(pc.line_status == source_line_status::not_looked_up);  // not among the hottest
      if (pc.function == "relu") CHECK(pc.line_status == source_line_status::module_not_seen);
    }
  }
  // Asking again for two per profile adds gemm+0x20 only; at most max_lookups in all.
  asked.clear();
  CHECK(kscope::resolve_source_lines(profiles, 2, 100, lookup) == 3);
  CHECK(total.hottest_pcs(2)[1].source() == "gemm.cu:32");
  asked.clear();
  auto fresh = kscope::build_warp_stall_profiles(records);
  std::vector<kscope::warp_stall_profile*> fresh_profiles{&fresh[0], &fresh[1], &fresh[2]};
  CHECK(kscope::resolve_source_lines(fresh_profiles, 5, 1, lookup) == 1);
  CHECK(asked.size() == 1);

  const std::string note = kscope::source_line_note(total);
  CHECK_MESSAGE(contains(note, "source lines: 2 of 3 looked-up PCs resolved"), note);
  CHECK_MESSAGE(contains(note, "1 without: module loaded before kscope saw it; start the collector first"), note);
  CHECK(kscope::source_line_note(kscope::warp_stall_profile{}).empty());
}

TEST_CASE("merging copies of a PC keeps the best answer: a line beats a reason, a reason beats nothing") {
  kscope::warp_stall_pc bare = pc_in(0xA);
  kscope::warp_stall_pc missing = bare;
  missing.line_status = source_line_status::module_not_seen;
  kscope::warp_stall_pc resolved = bare;
  resolved.line_status = source_line_status::resolved;
  resolved.file = "k.cu";
  resolved.line = 7;

  kscope::warp_stall_pc a = bare;
  a.adopt_source_line(missing);
  CHECK(a.line_status == source_line_status::module_not_seen);
  a.adopt_source_line(resolved);
  CHECK(a.source() == "k.cu:7");
  a.adopt_source_line(missing);  // a later worse answer does not undo it
  CHECK(a.source() == "k.cu:7");
  kscope::warp_stall_pc b = missing;
  b.adopt_source_line(bare);
  CHECK(b.line_status == source_line_status::module_not_seen);
  kscope::warp_stall_pc c;
  c.adopt_source_line(resolved);
  CHECK(c.symbol == resolved.symbol);
  CHECK(c.cubin_crc == 0xA);
}

// ---------------------------------------------------------------------------------------
// Source lines: how they print

namespace {

// gemm with its hottest PC resolved and the second one without a line for `why`.
kscope::warp_stall_profile gemm_with_lines(source_line_status why) {
  auto p = kscope::build_warp_stall_profiles(gemm_records(1))[0];
  for (kscope::warp_stall_pc& pc : p.pcs) {
    if (pc.pc_offset == 0x10) {
      pc.line_status = source_line_status::resolved;
      pc.file = "/src/gemm.cu";
      pc.line = 42;
    } else {
      pc.line_status = why;
    }
  }
  return p;
}

}  // namespace

TEST_CASE("the text table puts file:line next to function+offset, and says why a PC has none") {
  const auto p = gemm_with_lines(source_line_status::module_not_seen);
  const std::string table = kscope::format_warp_stalls(p);
  CHECK_MESSAGE(contains(table, "gemm+0x10 (/src/gemm.cu:42)  700 samples (70%), mostly long scoreboard\n"), table);
  CHECK_MESSAGE(contains(table, "gemm+0x20  300 samples (30%), mostly LG throttle; no source line: module loaded "
                                "before kscope saw it; start the collector first, or launch the kernel first "
                                "inside profile_warp_stalls\n"),
                table);
  const std::string no_lineinfo = kscope::format_warp_stalls(gemm_with_lines(source_line_status::no_line_info));
  CHECK_MESSAGE(contains(no_lineinfo, "mostly LG throttle; no source line: kernel not built with -lineinfo"), no_lineinfo);
  // Every status that is not a line has words; resolved and not looked up print none.
  for (source_line_status st :
       {source_line_status::no_line_info, source_line_status::no_line_for_pc, source_line_status::module_not_seen,
        source_line_status::module_not_watched, source_line_status::module_dropped, source_line_status::lookup_failed,
        source_line_status::unavailable}) {
    CHECK(kscope::source_line_reason(st).substr(0, 16) == "no source line: ");
    const std::string t = kscope::format_warp_stalls(gemm_with_lines(st));
    CHECK(contains(t, std::string(kscope::source_line_reason(st))));
  }
  CHECK(kscope::source_line_reason(source_line_status::resolved).empty());
  CHECK(kscope::source_line_reason(source_line_status::not_looked_up).empty());
  CHECK(!contains(kscope::format_warp_stalls(kscope::build_warp_stall_profiles(gemm_records(1))[0]), "source line"));
}

TEST_CASE("JSON: each hot PC keeps file and line, and adds source, line_status and line_note") {
  const auto p = gemm_with_lines(source_line_status::no_line_info);
  const auto parsed = kscope::detail::parse_json(kscope::warp_stalls_json({p}, 2));
  REQUIRE_MESSAGE(parsed.ok(), parsed.error);
  const kscope::detail::json_value* hot = parsed.value.at(0).find("hottest_pcs");
  REQUIRE(hot != nullptr);
  REQUIRE(hot->items.size() == 2);
  const kscope::detail::json_value& first = hot->at(0);
  CHECK(first.member_string("file") == "/src/gemm.cu");
  CHECK(first.member_number("line", 0) == 42);
  CHECK(first.member_string("source") == "/src/gemm.cu:42");
  CHECK(first.member_string("line_status") == "resolved");
  CHECK(first.member_string("line_note").empty());
  const kscope::detail::json_value& second = hot->at(1);
  CHECK(second.member_string("file").empty());
  CHECK(second.member_number("line", -1) == 0);
  CHECK(second.member_string("source").empty());
  CHECK(second.member_string("line_status") == "no_lineinfo");
  CHECK(contains(second.member_string("line_note"), "not built with -lineinfo"));
  // Every status has its own key.
  std::set<std::string> keys;
  for (int i = 0; i <= static_cast<int>(source_line_status::unavailable); ++i)
    keys.insert(kscope::to_string(static_cast<source_line_status>(i)));
  CHECK(keys.size() == static_cast<std::size_t>(source_line_status::unavailable) + 1);
}

TEST_CASE("Markdown: the reason table, the dominant stall, hot PCs with their source line or the reason") {
  auto p = gemm_with_lines(source_line_status::module_not_seen);
  p.name = "gemm<float>|x";
  for (auto& pc : p.pcs) pc.function = p.name;
  const std::string md = kscope::format_warp_stalls_markdown(p);
  CHECK_MESSAGE(contains(md, "**warp stalls: `gemm<float>\\|x`**: 1,000 samples, 100 issued, 1 launch"), md);
  CHECK(contains(md, "| reason | samples | share | not issued |"));
  CHECK(contains(md, "| long scoreboard | 610 | 61% | 500 |"));
  CHECK(contains(md, "| selected (issued) | 100 | 10% | - |"));
  CHECK(contains(md, "**dominant stall:** long scoreboard: 61% of 1,000 samples (610)"));
  CHECK(contains(md, "| hottest PC | source line | samples | share | mostly |"));
  CHECK_MESSAGE(contains(md, "| `gemm<float>\\|x+0x10` | `/src/gemm.cu:42` | 700 | 70% | long scoreboard |"), md);
  CHECK(contains(md, "| `gemm<float>\\|x+0x20` | no source line: module loaded before kscope saw it"));
  CHECK(!has_non_finite(md));
  const std::string empty = kscope::format_warp_stalls_markdown(kscope::aggregate_warp_stalls("idle", {}));
  CHECK(contains(empty, "no warp samples"));
}

}  // namespace warp_stalls_test
