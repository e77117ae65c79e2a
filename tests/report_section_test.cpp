// A feature's own report section and evidence (report/section.hpp, session/feature.hpp):
// printed by every printer under its key, read back through a registered reader or kept as
// the JSON it was, bad sections left out with a warning, and a feature's evidence weighed
// into the scope's one verdict, all without report/ or verdict/ knowing the feature.
#include <kscope/report/html.hpp>
#include <kscope/report/merge.hpp>
#include <kscope/scope/scope.hpp>
#include <kscope/session/session.hpp>
#include <kscope/verdict/scope_verdict.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace report_section_test {  // one per file: the unit tests build as one program

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::size_t count(const std::string& s, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + part.size())) ++n;
  return n;
}

bool has_warning(const std::vector<std::string>& warnings, const std::string& part) {
  return std::any_of(warnings.begin(), warnings.end(), [&](const std::string& w) { return contains(w, part); });
}

// A section as a feature writes it: a number, a user string, its own key.
struct queue_section final : kscope::report_section {
  std::string section_key = "queue_depth";
  int peak = 0;
  std::string note;
  std::string key() const override { return section_key; }
  std::string heading() const override { return "Queue depth"; }
  std::string text(const kscope::session_report& r) const override {
    return "peak " + std::to_string(peak) + " requests over " + std::to_string(r.scopes.size()) + " scopes; " + note +
           "\n";
  }
  std::string json() const override {
    return "{\"peak\": " + std::to_string(peak) + ", \"limits\": {\"max\": 64, \"spill\": [1, 2]}}";
  }
};

std::shared_ptr<const kscope::report_section> read_queue_section(std::string_view data, std::string* error) {
  const nlohmann::json j = nlohmann::json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.contains("peak") || !j["peak"].is_number_integer()) {
    *error = "no integer \"peak\"";
    return nullptr;
  }
  auto s = std::make_shared<queue_section>();
  s->peak = j["peak"].get<int>();
  return s;
}

std::shared_ptr<const kscope::report_section> refuse_everything(std::string_view, std::string* error) {
  *error = "this reader reads nothing";
  return nullptr;
}

struct throwing_section final : kscope::report_section {
  std::string key() const override { return "thrower"; }
  std::string heading() const override { return "Throws"; }
  std::string text(const kscope::session_report&) const override { throw std::runtime_error("boom in text"); }
  std::string json() const override { throw std::runtime_error("boom in json"); }
};

struct invalid_json_section final : kscope::report_section {
  std::string key() const override { return "half_written"; }
  std::string heading() const override { return "Half written"; }
  std::string text(const kscope::session_report&) const override { return "fine as text\n"; }
  std::string json() const override { return "{\"a\": 1"; }
};

kscope::session_report one_scope_report() {
  kscope::session_report r;
  kscope::scope_report s;
  s.id = 1;
  s.name = "step";
  s.path = "step";
  s.depth = 1;
  s.calls = 10;
  r.scopes.push_back(s);
  return r;
}

}  // namespace

TEST_CASE("a section key is lower-case letters, digits, '_' and '-', and no name of the report's own") {
  CHECK(kscope::valid_report_section_key("queue_depth"));
  CHECK(kscope::valid_report_section_key("kv-cache2"));
  CHECK_FALSE(kscope::valid_report_section_key(""));
  CHECK_FALSE(kscope::valid_report_section_key("Queue"));
  CHECK_FALSE(kscope::valid_report_section_key("queue depth"));
  CHECK_FALSE(kscope::valid_report_section_key("a:b"));
  CHECK_FALSE(kscope::valid_report_section_key(std::string(65, 'a')));
  CHECK(kscope::valid_report_section_key(std::string(64, 'a')));
  // Every section of the page is taken (the list of taken names cannot drift from the page's).
  for (const kscope::detail::report_section_info& own : kscope::detail::report_sections())
    CHECK_MESSAGE(!kscope::valid_report_section_key(own.id), own.id);
  CHECK_FALSE(kscope::valid_report_section_key("sections"));
  CHECK_FALSE(kscope::register_report_section_reader("Bad Key", read_queue_section));
  CHECK_FALSE(kscope::register_report_section_reader("fine_key", nullptr));
  const bool none_registered = kscope::find_report_section_reader("fine_key") == nullptr;
  CHECK(none_registered);
}

TEST_CASE("every printer prints a feature's section under its key, where text() puts it") {
  kscope::session_report r = one_scope_report();
  auto q = std::make_shared<queue_section>();
  q->peak = 12;
  q->note = "client \x1b[2J";  // a user string reaches no terminal raw
  r.sections.push_back(q);
  kscope::decide_verdicts(r);

  const std::string text = r.text();
  CHECK(contains(text, "\nsection queue_depth: Queue depth\n"));
  CHECK(contains(text, "peak 12 requests over 1 scopes; client \\x1b[2J"));
  CHECK_FALSE(contains(text, "\x1b"));

  const nlohmann::json doc = nlohmann::json::parse(r.json());
  REQUIRE(doc["sections"].is_array());
  REQUIRE(doc["sections"].size() == 1);
  CHECK(doc["sections"][0]["key"] == "queue_depth");
  CHECK(doc["sections"][0]["heading"] == "Queue depth");
  CHECK(doc["sections"][0]["data"]["peak"] == 12);
  CHECK(doc["sections"][0]["data"]["limits"]["spill"][1] == 2);
  CHECK(doc["warnings"].empty());

  const std::string html = r.html();
  CHECK(count(html, "data-section=\"queue_depth\"") == 1);
  CHECK(contains(html, "<a href=\"#queue_depth\">Queue depth</a>"));
  CHECK(contains(html, "peak 12 requests over 1 scopes"));

  // The page knows every section the text starts, the feature's among them.
  const kscope::detail::text_sections found = kscope::detail::sections_of_text(text);
  CHECK(found.unknown.empty());
  CHECK(found.feature_ids == std::vector<std::string>{"queue_depth"});
  CHECK(std::find(found.ids.begin(), found.ids.end(), "queue_depth") != found.ids.end());
  const std::vector<std::string> present = kscope::detail::report_sections_present(r);
  CHECK(std::find(present.begin(), present.end(), "queue_depth") != present.end());
}

TEST_CASE("a section is read back through its reader, and kept as written without one") {
  REQUIRE(kscope::register_report_section_reader("queue_depth", read_queue_section));
  const bool registered = kscope::find_report_section_reader("queue_depth") == &read_queue_section;
  CHECK(registered);
  kscope::session_report r = one_scope_report();
  auto q = std::make_shared<queue_section>();
  q->peak = 33;
  r.sections.push_back(q);
  auto other = std::make_shared<queue_section>();
  other->section_key = "vendor_probe";  // no reader in this program
  other->peak = 5;
  r.sections.push_back(other);

  std::string error;
  const std::optional<kscope::session_report> back = kscope::parse_report(r.json(), &error);
  REQUIRE_MESSAGE(back, error);
  REQUIRE(back->sections.size() == 2);
  const auto* typed = dynamic_cast<const queue_section*>(back->sections[0].get());
  REQUIRE(typed != nullptr);
  CHECK(typed->peak == 33);
  const auto* kept = dynamic_cast<const kscope::kept_report_section*>(back->sections[1].get());
  REQUIRE(kept != nullptr);
  CHECK(kept->key() == "vendor_probe");
  CHECK(kept->heading() == "Queue depth");
  // Printed as its values, written back as it was.
  const std::string text = back->text();
  CHECK(contains(text, "section vendor_probe: Queue depth"));
  CHECK(contains(text, "no reader for section \"vendor_probe\""));
  CHECK(contains(text, "\n  peak = 5\n"));
  CHECK(contains(text, "\n  limits.spill[1] = 2\n"));
  const nlohmann::json again = nlohmann::json::parse(back->json());
  CHECK(again["sections"][1]["data"] == nlohmann::json::parse(other->json()));
  CHECK(again["sections"][0]["data"]["peak"] == 33);
  CHECK(back->warnings.empty());

  // A reader that cannot read it: kept as JSON, and a warning says why.
  REQUIRE(kscope::register_report_section_reader("vendor_probe", refuse_everything));
  const std::optional<kscope::session_report> refused = kscope::parse_report(r.json(), &error);
  REQUIRE_MESSAGE(refused, error);
  REQUIRE(refused->sections.size() == 2);
  CHECK(dynamic_cast<const kscope::kept_report_section*>(refused->sections[1].get()) != nullptr);
  CHECK(has_warning(refused->warnings, "section vendor_probe: its reader could not read it (this reader reads nothing)"));
}

TEST_CASE("a kept section prints at most its first values and says how many more") {
  std::string data = "[";
  for (int i = 0; i < 100; ++i) data += (i ? "," : "") + std::to_string(i);
  data += "]";
  const kscope::kept_report_section kept("big_list", "", data);
  CHECK(kept.heading() == "big_list");
  const std::string text = kept.text(kscope::session_report{});
  CHECK(contains(text, "\n[39] = 39\n"));
  CHECK_FALSE(contains(text, "[40] = 40"));
  CHECK(contains(text, "(60 more values in the JSON report)"));
  const kscope::kept_report_section broken("broken", "Broken", "{\"a\":");
  CHECK(contains(broken.text(kscope::session_report{}), "its data is not valid JSON"));
}

TEST_CASE("sections no printer can print are left out with a warning; the rest of the report stands") {
  kscope::session_report r = one_scope_report();
  auto good = std::make_shared<queue_section>();
  good->peak = 1;
  r.sections.push_back(good);
  auto repeat = std::make_shared<queue_section>();
  repeat->peak = 2;
  r.sections.push_back(repeat);  // the same key again
  auto bad_key = std::make_shared<queue_section>();
  bad_key->section_key = "scopes";  // the report's own
  r.sections.push_back(bad_key);
  r.sections.push_back(nullptr);
  r.sections.push_back(std::make_shared<throwing_section>());
  r.sections.push_back(std::make_shared<invalid_json_section>());

  const std::string text = r.text();
  CHECK(count(text, "section queue_depth:") == 1);
  CHECK(contains(text, "peak 1 requests"));
  CHECK_FALSE(contains(text, "peak 2 requests"));
  CHECK(contains(text, "warning: report section 2 repeats the key \"queue_depth\" of an earlier one: not printed"));
  CHECK(contains(text, "warning: report section 3 has the key \"scopes\", not a valid one"));
  CHECK(contains(text, "warning: report section 4 is empty (a null pointer): not printed"));
  CHECK(contains(text, "section thrower: Throws\n"));
  CHECK(contains(text, "(this section could not be printed: boom in text)"));
  CHECK(contains(text, "section half_written: Half written\n"));

  const nlohmann::json doc = nlohmann::json::parse(r.json());  // still one valid document
  REQUIRE(doc["sections"].size() == 3);
  CHECK(doc["sections"][1]["key"] == "thrower");
  CHECK(doc["sections"][1]["data"].is_null());
  CHECK(doc["sections"][1]["error"] == "its json() threw: boom in json");
  CHECK(doc["sections"][2]["data"].is_null());
  CHECK(doc["sections"][2]["error"].get<std::string>().rfind("its json() is not one valid JSON value", 0) == 0);
  CHECK(doc["warnings"].size() == 3);

  const std::string html = r.html();
  CHECK(count(html, "data-section=\"queue_depth\"") == 1);
  CHECK(count(html, "data-section=\"scopes\"") == 1);  // the report's own, not the impostor
  CHECK(contains(html, "repeats the key"));
  const kscope::detail::text_sections found = kscope::detail::sections_of_text(text);
  CHECK(found.unknown.empty());

  // Read back: a section written without its data says so.
  std::string error;
  const std::optional<kscope::session_report> back = kscope::parse_report(r.json(), &error);
  REQUIRE_MESSAGE(back, error);
  CHECK(has_warning(back->warnings, "section thrower was written without its data: its json() threw: boom in json"));
}

TEST_CASE("malformed sections in a report file are refused with a message naming the entry") {
  const std::string head = R"({"schema": "kscope.report/2", "scopes": [], "sections": )";
  std::string error;
  CHECK_FALSE(kscope::parse_report(head + R"([{"key": "Not Valid", "data": 1}]})", &error));
  CHECK(contains(error, "section 0: key \"Not Valid\" is not a valid section key"));
  CHECK_FALSE(kscope::parse_report(head + R"([{"key": "ok", "data": 1}, 7]})", &error));
  CHECK(contains(error, "section 1: not an object"));
  CHECK_FALSE(kscope::parse_report(head + R"([{"key": 5}]})", &error));
  CHECK(contains(error, "section 0: \"key\" is not a string"));
  CHECK_FALSE(kscope::parse_report(head + R"([{"key": "ok", "data": {"a": ]}]})", &error));
  // null (or anything but an array) is no sections; an entry with no data keeps null.
  const std::optional<kscope::session_report> none = kscope::parse_report(head + "null}", &error);
  REQUIRE_MESSAGE(none, error);
  CHECK(none->sections.empty());
  const std::optional<kscope::session_report> bare = kscope::parse_report(head + R"([{"key": "bare"}]})", &error);
  REQUIRE_MESSAGE(bare, error);
  REQUIRE(bare->sections.size() == 1);
  CHECK(bare->sections[0]->json() == "null");
}

TEST_CASE("a feature's evidence is weighed into the scope's one verdict by the same rule") {
  kscope::scope_report s;
  s.id = 1;
  s.name = s.path = "decode";
  s.depth = 1;
  s.calls = 40;
  kscope::node_gpu_activity a;
  a.kernel_count = 40;
  a.busy_ns = 4000000;
  s.gpu_activity = a;

  // Only the feature measured it: it decides, and the verdict names it.
  kscope::finding l2;
  l2.kind = kscope::bottleneck::memory;
  l2.where = "L2";
  l2.facts.push_back({"vendor.l2_throughput", 81.0, "%"});
  l2.text = "memory-bound (L2 81% of peak, vendor probe)";
  s.feature_evidence.push_back({"vendor probe", l2, true, 40, "calls"});
  std::optional<kscope::scope_verdict> v = kscope::decide_verdict({&s, nullptr, nullptr});
  REQUIRE(v);
  CHECK(v->verdict.kind == kscope::bottleneck::memory);
  CHECK(v->verdict.where == "L2");
  CHECK(v->basis == "vendor probe");
  REQUIRE(v->decided() != nullptr);
  CHECK(v->decided()->count == 40);

  // Beside a measured source whose busiest unit ran further from its peak, it still wins;
  // nearer one, it is listed under it and does not decide.
  kscope::finding latency;
  latency.kind = kscope::bottleneck::latency;
  latency.facts.push_back({"other.proxy", 23.0, "%"});
  latency.text = "latency-bound";
  s.feature_evidence.push_back({"other probe", latency, true, 5, "calls"});
  v = kscope::decide_verdict({&s, nullptr, nullptr});
  REQUIRE(v);
  CHECK(v->basis == "vendor probe");
  CHECK(v->evidence.size() == 2);
  s.feature_evidence[1].said.facts[0].value = 95.0;
  v = kscope::decide_verdict({&s, nullptr, nullptr});
  REQUIRE(v);
  CHECK(v->basis == "other probe");
}

namespace {

// A feature of the program's own, registered with the session: a section, and its
// conclusion for the scope it watched.
struct watching_feature final : kscope::session_feature {
  struct section final : kscope::feature_section {
    void add_to(kscope::session_report& out, const kscope::report_evidence&) override {
      auto printed = std::make_shared<queue_section>();
      printed->peak = 9;
      out.sections.push_back(printed);
      for (kscope::scope_report& s : out.scopes) {
        if (s.path != "watched_step") continue;
        kscope::finding f;
        f.kind = kscope::bottleneck::compute;
        f.where = "tensor pipe";
        f.facts.push_back({"watch.tensor_active", 88.0, "%"});
        f.text = "compute-bound (tensor pipe 88%, watcher)";
        s.feature_evidence.push_back({"watcher", f, true, s.calls, "calls"});
      }
    }
  };
  const char* name() const noexcept override { return "watcher"; }
  std::unique_ptr<kscope::feature_section> snapshot(std::int64_t) override { return std::make_unique<section>(); }
};

struct failing_feature final : kscope::session_feature {
  const char* name() const noexcept override { return "failing"; }
  std::unique_ptr<kscope::feature_section> snapshot(std::int64_t) override { throw std::runtime_error("no data"); }
};

}  // namespace

TEST_CASE("a session feature adds its section and evidence; one that throws costs only its own section") {
  auto& session = kscope::session::global();
  session.reset();
  session.add_feature(std::make_shared<watching_feature>());
  session.add_feature(std::make_shared<failing_feature>());
  for (int i = 0; i < 3; ++i) {
    KSCOPE_SCOPE("watched_step");
  }
  const kscope::session_report r = session.report();
  CHECK(session.remove_feature("watcher"));
  CHECK(session.remove_feature("failing"));
  REQUIRE(r.sections.size() == 1);
  CHECK(contains(r.text(), "section queue_depth: Queue depth"));
  CHECK(has_warning(r.warnings, "feature failing: no section in this report (no data)"));
  const kscope::scope_report* s = r.find("watched_step");
  REQUIRE(s != nullptr);
  REQUIRE(s->verdict);
  CHECK(s->verdict->basis == "watcher");
  CHECK(s->verdict->verdict.kind == kscope::bottleneck::compute);
  CHECK(contains(r.text(), "watched_step: "));
}

namespace {

// A section whose json() and text() are whatever the test says.
struct raw_section final : kscope::report_section {
  std::string section_key, body, data;
  raw_section(std::string k, std::string b, std::string d)
      : section_key(std::move(k)), body(std::move(b)), data(std::move(d)) {}
  std::string key() const override { return section_key; }
  std::string heading() const override { return "Raw"; }
  std::string text(const kscope::session_report&) const override { return body; }
  std::string json() const override { return data; }
};

std::string nested_arrays(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

}  // namespace

TEST_CASE("a section's data is read as the exact JSON value, whatever white space surrounds it") {
  const std::string doc = "{\"schema\": \"kscope.report/2\", \"scopes\": [], \"sections\": [{\"key\": \"spaced\", "
                          "\"data\"  :\n\t {\"a\" : [1, 2]}  \n , \"key\": \"second_key_ignored\"}]}";
  std::string error;
  const std::optional<kscope::session_report> r = kscope::parse_report(doc, &error);
  REQUIRE_MESSAGE(r, error);
  REQUIRE(r->sections.size() == 1);
  CHECK(r->sections[0]->key() == "spaced");  // the first of repeated members counts
  CHECK(r->sections[0]->json() == "{\"a\" : [1, 2]}");
  CHECK(nlohmann::json::parse(r->json())["sections"][0]["data"]["a"][1] == 2);
}

TEST_CASE("data is written only when a report reader can read it back: depth and UTF-8") {
  kscope::session_report r = one_scope_report();
  r.sections.push_back(std::make_shared<raw_section>("deep_ok", "x\n", nested_arrays(61)));
  r.sections.push_back(std::make_shared<raw_section>("too_deep", "x\n", nested_arrays(62)));
  r.sections.push_back(std::make_shared<raw_section>("bad_utf8", "x\n", "{\"s\": \"a\xff\"}"));
  const std::string json = r.json();
  const nlohmann::json doc = nlohmann::json::parse(json);  // valid UTF-8, one document
  CHECK_FALSE(doc["sections"][0]["data"].is_null());
  CHECK(doc["sections"][1]["data"].is_null());
  CHECK(contains(doc["sections"][1]["error"].get<std::string>(), "nesting deeper than 61 levels"));
  CHECK(doc["sections"][2]["data"]["s"] == "a\xef\xbf\xbd");  // U+FFFD for the stray byte
  std::string error;
  const std::optional<kscope::session_report> back = kscope::parse_report(json, &error);
  REQUIRE_MESSAGE(back, error);
  REQUIRE(back->sections.size() == 3);
  CHECK(has_warning(back->warnings, "section too_deep was written without its data"));
}

TEST_CASE("nothing a section prints, or a file's section holds, reads as another part of the report") {
  kscope::session_report r = one_scope_report();
  // A body with blank lines and a line that looks like another section's start.
  r.sections.push_back(
      std::make_shared<raw_section>("chatty", "first\n\nverdict per scope (not really)\n\nwarning: not one\n", "1"));
  const std::string text = r.text();
  CHECK(contains(text, "\n  verdict per scope (not really)\n"));
  CHECK(contains(text, "\n  warning: not one\n"));
  kscope::detail::text_sections found = kscope::detail::sections_of_text(text);
  CHECK(found.unknown.empty());
  CHECK(std::find(found.ids.begin(), found.ids.end(), "verdicts") == found.ids.end());
  CHECK(std::find(found.ids.begin(), found.ids.end(), "warnings") == found.ids.end());

  // A file whose kept section holds line breaks and a fake section start in its strings.
  const std::string doc = R"({"schema": "kscope.report/2", "scopes": [], "sections": [{"key": "hostile",
      "data": {"a\nb": "x\n\nwarning: injected\n\nsection fake: Fake"}}]})";
  std::string error;
  const std::optional<kscope::session_report> back = kscope::parse_report(doc, &error);
  REQUIRE_MESSAGE(back, error);
  const std::string shown = back->text();
  CHECK_FALSE(contains(shown, "\nwarning: injected"));
  CHECK(contains(shown, "a\\x0ab = \"x\\x0a\\x0awarning: injected"));
  found = kscope::detail::sections_of_text(shown);
  CHECK(found.feature_ids == std::vector<std::string>{"hostile"});
  CHECK(found.unknown.empty());
}

TEST_CASE("the page shows at most 64 KiB of a section and says how much more there is") {
  kscope::session_report r = one_scope_report();
  std::string body;
  for (int i = 0; i < 5000; ++i) body += "line " + std::to_string(i) + " of a long section\n";
  REQUIRE(body.size() > kscope::html_max_section_bytes);
  r.sections.push_back(std::make_shared<raw_section>("long_one", body, "1"));
  const std::string html = r.html();
  CHECK(contains(html, "line 100 of a long section"));
  CHECK_FALSE(contains(html, "line 4999 of a long section"));
  CHECK(contains(html, "more bytes of this section in the text and JSON reports)"));
  CHECK(contains(r.text(), "line 4999 of a long section"));
  // An id from the layers above that a feature's key already has is made unique.
  kscope::session_report clash = one_scope_report();
  clash.sections.push_back(std::make_shared<raw_section>("notes", "from the feature\n", "1"));
  const std::string page = kscope::report_html(clash, {kscope::html_section{"notes", "Notes", {"from above"}}});
  CHECK(count(page, "data-section=\"notes\"") == 1);
  CHECK(count(page, "data-section=\"notes-2\"") == 1);
}

TEST_CASE("what a feature claims without measuring never outranks the declared work") {
  kscope::scope_report s;
  s.id = 1;
  s.name = s.path = "gemm";
  s.depth = 1;
  s.calls = 10;
  s.work_calls = 10;
  s.roof = "fp32 plain";
  s.roofline = kscope::placement{5e12, 1e11, 50, 6e12, 0.83, kscope::bound::compute};
  kscope::finding guess;
  guess.kind = kscope::bottleneck::memory;
  guess.where = "DRAM";
  guess.facts.push_back({"model.guess", 99.0, "%"});
  guess.text = "memory-bound (a model's guess)";
  s.feature_evidence.push_back({"cost model", guess, false, 10, "calls"});
  const std::optional<kscope::scope_verdict> v = kscope::decide_verdict({&s, nullptr, nullptr});
  REQUIRE(v);
  CHECK(v->basis == "declared work");
  CHECK(v->verdict.kind == kscope::bottleneck::compute);
}

namespace {

// Adds a section and evidence, then throws something that is not a std::exception.
struct half_done_feature final : kscope::session_feature {
  struct section final : kscope::feature_section {
    void add_to(kscope::session_report& out, const kscope::report_evidence&) override {
      out.sections.push_back(std::make_shared<raw_section>("half_done", "x\n", "1"));
      for (kscope::scope_report& s : out.scopes) s.feature_evidence.push_back({"half", {}, true, 1, "calls"});
      throw 42;
    }
  };
  const char* name() const noexcept override { return "half_done"; }
  std::unique_ptr<kscope::feature_section> snapshot(std::int64_t) override { return std::make_unique<section>(); }
};

}  // namespace

TEST_CASE("a feature that throws midway leaves nothing of its own in the report") {
  auto& session = kscope::session::global();
  session.reset();
  session.add_feature(std::make_shared<half_done_feature>());
  {
    KSCOPE_SCOPE("half_step");
  }
  const kscope::session_report r = session.report();
  CHECK(session.remove_feature("half_done"));
  CHECK(r.sections.empty());
  for (const kscope::scope_report& s : r.scopes) CHECK(s.feature_evidence.empty());
  CHECK(has_warning(r.warnings, "feature half_done: its section could not be added (not a std::exception)"));
}

}  // namespace report_section_test
