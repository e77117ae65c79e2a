// What an NVTX tool is shown (scope/nvtx.hpp, scope/detail/nvtx.hpp), read back from a
// fake tool (tests/process/fake_nvtx_tool.cpp) that NVTX loads into this process.
//
// The domain is created once per process, so each scenario is a process of its own:
// tests/CMakeLists.txt runs this program once per test case (`--no-skip --test-case=...`),
// with NVTX_INJECTION64_PATH, KSCOPE_FAKE_NVTX_LOG and the scenario's KSCOPE_NVTX_DOMAIN
// set through ctest's ENVIRONMENT. The cases are marked skip so that a run without a filter
// never mixes them in one process.
#include <kscope/scope/recorder_snapshot.hpp>
#include <kscope/scope/scope.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

namespace {

using fields = std::vector<std::string>;

std::vector<fields> read_log() {
  const char* path = std::getenv("KSCOPE_FAKE_NVTX_LOG");
  REQUIRE_MESSAGE(path != nullptr, "KSCOPE_FAKE_NVTX_LOG is not set (tests/CMakeLists.txt sets it)");
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "the fake NVTX tool wrote no log: was it loaded (NVTX_INJECTION64_PATH)?");
  std::vector<fields> lines;
  std::string line;
  while (std::getline(in, line)) {
    fields f;
    std::size_t start = 0;
    for (;;) {
      const std::size_t tab = line.find('\t', start);
      f.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
      if (tab == std::string::npos) break;
      start = tab + 1;
    }
    lines.push_back(f);
  }
  return lines;
}

std::size_t count(const std::vector<fields>& log, const fields& wanted) {
  return static_cast<std::size_t>(std::count(log.begin(), log.end(), wanted));
}

// Index of the first line equal to `wanted` at or after `from`; log.size() when none.
std::size_t find(const std::vector<fields>& log, const fields& wanted, std::size_t from = 0) {
  for (std::size_t i = from; i < log.size(); ++i)
    if (log[i] == wanted) return i;
  return log.size();
}

std::size_t count_kind(const std::vector<fields>& log, const std::string& kind) {
  return static_cast<std::size_t>(
      std::count_if(log.begin(), log.end(), [&](const fields& f) { return !f.empty() && f[0] == kind; }));
}

bool has_warning(const std::string& part) {
  for (const std::string& w : kscope::detail::nvtx_warnings())
    if (w.find(part) != std::string::npos) return true;
  return false;
}

constexpr kscope::nvtx_category attention{3, "attention"};
constexpr kscope::nvtx_color green = kscope::nvtx_color::rgb(0x76B900);

// The same scopes in every scenario with a tool: the lines they give differ only in the
// domain's name and in how the work travels (payload or message).
void run_scopes() {
  {
    static kscope::detail::call_site site;  // KSCOPE_SCOPE("plain"), with the scope named
    kscope::scope s{site, "plain"};
    s.set_work({2.5e9, 1.5e6});
    s.tag("batch", "8");
    {
      KSCOPE_SCOPE("inner_untagged");  // its close sends nothing: no work, no tags
    }
    s.tag("dtype", "bf16");  // after a nested scope: still this scope's
  }
  for (int i = 0; i < 2; ++i) {
    KSCOPE_SCOPE_STYLED("styled", attention, green);  // the category is named once
  }
  {
    kscope::scope s{std::string("runtime_") + "name", kscope::nvtx_style{kscope::nvtx_color::argb(0x80112233)}};
    s.tag("only", "tags");
  }
  {
    kscope::range r = kscope::start_range("request", kscope::nvtx_style{kscope::nvtx_category{4, "requests"}});
    r.set_work({1.0, 2.0});
    kscope::end_range(std::move(r));
  }
  {
    kscope::scope s{"long_tags"};
    s.tag("k", std::string(300, 'v'));
  }
  {
    KSCOPE_SCOPE_STYLED("bad_category", kscope::nvtx_category{5000, "too big"});
  }
}

// What run_scopes gives whatever the domain, and how the work travels.
void check_common(const std::vector<fields>& log, const std::string& domain) {
  CHECK(count(log, {"domain", domain}) == 1);
  CHECK(count_kind(log, "domain") == 1);
  // Call-site names are registered in the chosen domain, once each.
  CHECK(count(log, {"register", domain, "plain"}) == 1);
  CHECK(count(log, {"register", domain, "styled"}) == 1);
  CHECK(count(log, {"push", domain, "0", "none", "plain", "none"}) == 1);
  // Category named once for two ranges, with its colour on each.
  CHECK(count(log, {"category", domain, "3", "attention"}) == 1);
  CHECK(count(log, {"push", domain, "3", "FF76B900", "styled", "none"}) == 2);
  CHECK(count(log, {"push", domain, "0", "80112233", "runtime_name", "none"}) == 1);
  CHECK(count(log, {"category", domain, "4", "requests"}) == 1);
  CHECK(count(log, {"start", domain, "4", "none", "request", "none"}) == 1);
  // An id past max_nvtx_category_id: no category, never named, one warning line.
  CHECK(count(log, {"push", domain, "0", "none", "bad_category", "none"}) == 1);
  CHECK(count_kind(log, "category") == 2);
  CHECK(has_warning("NVTX category 5000 not used: ids go from 1 to 4095"));
  // Marks only where there is something to carry: plain, runtime_name, request, long_tags.
  CHECK(count_kind(log, "mark") == 4);
  for (const fields& f : log) {
    if (f.empty() || f[0] != "mark") continue;
    CHECK(f[1] == domain);
    CHECK(f[4] != "inner_untagged");
    CHECK(f[4].rfind("styled", 0) != 0);
  }
  // Pushes and pops balance, starts and ends too.
  CHECK(count_kind(log, "push") == count_kind(log, "pop"));
  CHECK(count_kind(log, "start") == 1);
  CHECK(count_kind(log, "end") == 1);
}

// The mark of `message` sits inside its range: after its push (or start), before its pop.
void check_mark_inside(const std::vector<fields>& log, const fields& open, const std::string& message) {
  const std::size_t pushed = find(log, open);
  REQUIRE(pushed < log.size());
  std::size_t marked = log.size();
  for (std::size_t i = pushed; i < log.size() && marked == log.size(); ++i)
    if (log[i][0] == "mark" && log[i][4].rfind(message, 0) == 0) marked = i;
  REQUIRE(marked < log.size());
  // The very next line closes it (a nested scope's push and pop came before the mark).
  REQUIRE(marked + 1 < log.size());
  CHECK(log[marked + 1][0] == (open[0] == "start" ? "end" : "pop"));
}

}  // namespace

TEST_CASE("nvtx tool: the program names the domain; work and tags as payloads" * doctest::skip()) {
  // KSCOPE_NVTX_DOMAIN=from_env is set too: the program's choice comes first.
  REQUIRE(std::getenv("KSCOPE_NVTX_DOMAIN") != nullptr);
  CHECK(kscope::nvtx_domain_name() == "from_env");  // what it would be before the call
  CHECK(kscope::set_nvtx_domain("  myengine\t"));   // trimmed
  CHECK(kscope::nvtx_domain_name() == "myengine");
  CHECK_FALSE(kscope::set_nvtx_domain(""));  // refused; the choice stays
  CHECK(has_warning("kscope::set_nvtx_domain(\"\") not used: it is empty; the NVTX domain stays \"myengine\""));
  CHECK(kscope::nvtx_domain_name() == "myengine");

  run_scopes();

  CHECK(has_warning(
      "KSCOPE_NVTX_DOMAIN=\"from_env\" not used: the program named the NVTX domain \"myengine\" "
      "(kscope::set_nvtx_domain), which comes first; ranges use that one"));
  // After the first range: the same name is fine, another is refused and said once.
  CHECK(kscope::set_nvtx_domain("myengine"));
  CHECK_FALSE(kscope::set_nvtx_domain("late"));
  CHECK_FALSE(kscope::set_nvtx_domain("late"));
  CHECK(kscope::nvtx_domain_name() == "myengine");
  const std::string late =
      "kscope::set_nvtx_domain(\"late\") came after the first NVTX range: ranges stay in the NVTX domain \"myengine\"";
  CHECK(has_warning(late));
  const std::vector<std::string> warnings = kscope::detail::nvtx_warnings();
  CHECK(std::count(warnings.begin(), warnings.end(), late) == 1);
  // The report carries them (the session's warnings come from the recorder's snapshot).
  const kscope::recorder_snapshot snapshot = kscope::recorder::global().snapshot();
  CHECK(std::count(snapshot.warnings.begin(), snapshot.warnings.end(), late) == 1);

  const std::vector<fields> log = read_log();
  const std::string d = "myengine";
  check_common(log, d);
  CHECK(count(log, {"domain", "from_env"}) == 0);
  CHECK(count(log, {"extension", "2", "payload"}) == 1);
  // The schema, registered once, describes kscope's payload field by field.
  CHECK(count(log, {"schema", d, "kscope scope", "flops:20:0:8,bytes:20:8:8,tags:76:16:240", "256"}) == 1);
  CHECK(count_kind(log, "schema") == 1);
  // The values, decoded through that schema by a tool that knows nothing else of kscope.
  CHECK(count(log, {"mark", d, "0", "none", "plain", "flops=2500000000;bytes=1500000;tags=batch=8 dtype=bf16"}) == 1);
  CHECK(count(log, {"mark", d, "0", "80112233", "runtime_name", "flops=nan;bytes=nan;tags=only=tags"}) == 1);
  CHECK(count(log, {"mark", d, "4", "none", "request", "flops=1;bytes=2;tags="}) == 1);
  check_mark_inside(log, {"push", d, "0", "none", "plain", "none"}, "plain");
  check_mark_inside(log, {"start", d, "4", "none", "request", "none"}, "request");
  // Tags longer than the payload's 240 bytes are cut, and say so.
  const std::string cut = "flops=nan;bytes=nan;tags=k=" + std::string(239 - 3 - 2, 'v') + "...";
  CHECK(count(log, {"mark", d, "0", "none", "long_tags", cut}) == 1);
}

TEST_CASE("nvtx tool: KSCOPE_NVTX_DOMAIN names the domain" * doctest::skip()) {
  REQUIRE(std::getenv("KSCOPE_NVTX_DOMAIN") != nullptr);
  CHECK(kscope::nvtx_domain_name() == "from_env");  // " from_env " trimmed
  run_scopes();
  CHECK(kscope::nvtx_domain_name() == "from_env");
  const std::vector<fields> log = read_log();
  check_common(log, "from_env");
  CHECK(count(log, {"domain", "kscope"}) == 0);
  CHECK(count(log, {"mark", "from_env", "0", "none", "plain", "flops=2500000000;bytes=1500000;tags=batch=8 dtype=bf16"}) ==
        1);
  // Only the category line: the domain's name was the environment's, as asked.
  for (const std::string& w : kscope::detail::nvtx_warnings()) CHECK(w.find("KSCOPE_NVTX_DOMAIN") == std::string::npos);
}

TEST_CASE("nvtx tool: a tool without the payload extension gets the work in the message" * doctest::skip()) {
  REQUIRE(std::getenv("KSCOPE_FAKE_NVTX_NO_PAYLOAD") != nullptr);
  REQUIRE(std::getenv("KSCOPE_NVTX_DOMAIN") == nullptr);
  run_scopes();
  const std::vector<fields> log = read_log();
  const std::string d = "kscope";
  check_common(log, d);
  CHECK(count(log, {"extension", "2", "refused"}) == 1);
  CHECK(count_kind(log, "schema") == 0);
  CHECK(count(log, {"mark", d, "0", "none", "plain flops=2.5e+09 bytes=1.5e+06 batch=8 dtype=bf16", "none"}) == 1);
  CHECK(count(log, {"mark", d, "0", "80112233", "runtime_name only=tags", "none"}) == 1);
  CHECK(count(log, {"mark", d, "4", "none", "request flops=1 bytes=2", "none"}) == 1);
  CHECK(count(log, {"mark", d, "0", "none", "long_tags k=" + std::string(300, 'v'), "none"}) == 1);
  check_mark_inside(log, {"push", d, "0", "none", "plain", "none"}, "plain flops=");
}

TEST_CASE("nvtx tool: an unusable KSCOPE_NVTX_DOMAIN keeps \"kscope\", with one line" * doctest::skip()) {
  const char* value = std::getenv("KSCOPE_NVTX_DOMAIN");
  REQUIRE(value != nullptr);
  REQUIRE(std::string(value).size() > 128);
  CHECK(kscope::nvtx_domain_name() == "kscope");
  run_scopes();
  const std::vector<fields> log = read_log();
  check_common(log, "kscope");
  const std::string line = "KSCOPE_NVTX_DOMAIN=\"" + std::string(value).substr(0, 64) +
                           "...\" not used: it is longer than 128 bytes; ranges use the NVTX domain \"kscope\"";
  const std::vector<std::string> warnings = kscope::detail::nvtx_warnings();
  CHECK(std::count(warnings.begin(), warnings.end(), line) == 1);
}

TEST_CASE("nvtx without a tool: the name is still chosen and checked, scopes run as before" * doctest::skip()) {
  REQUIRE(std::getenv("NVTX_INJECTION64_PATH") == nullptr);
  // Set here rather than by ctest: a control character is awkward in a CMake list.
  REQUIRE(::setenv("KSCOPE_NVTX_DOMAIN", "bad\x01name", 1) == 0);
  CHECK_FALSE(kscope::set_nvtx_domain(std::string(129, 'n')));
  CHECK(has_warning("not used: it is longer than 128 bytes; the NVTX domain stays \"kscope\""));
  CHECK_FALSE(kscope::set_nvtx_domain(" \t "));
  run_scopes();  // styles, work, tags, ranges: nothing reaches NVTX, nothing breaks
  CHECK(kscope::nvtx_domain_name() == "kscope");
  CHECK(has_warning("KSCOPE_NVTX_DOMAIN=\"bad\\x01name\" not used: it holds a control character; "
                    "ranges use the NVTX domain \"kscope\""));
  CHECK(has_warning("NVTX category 5000 not used"));
  // The domain exists (as no tool's null handle) from the first range on: the name is final.
  CHECK_FALSE(kscope::set_nvtx_domain("later"));
  CHECK(has_warning("kscope::set_nvtx_domain(\"later\") came after the first NVTX range"));
#if KSCOPE_HAS_NVTX
  CHECK(kscope::detail::nvtx_domain() == nullptr);
#endif
  const char* path = std::getenv("KSCOPE_FAKE_NVTX_LOG");
  REQUIRE(path != nullptr);
  CHECK_FALSE(std::ifstream(path).good());  // no tool, no log
  // The recorder saw every scope as usual.
  const kscope::recorder_snapshot snapshot = kscope::recorder::global().snapshot();
  bool plain_with_work = false;
  for (const kscope::recorded_node& n : snapshot.nodes)
    if (n.name == "plain") plain_with_work = n.calls == 1 && n.flops == 2.5e9 && n.tags.size() == 2;
  CHECK(plain_with_work);
}
