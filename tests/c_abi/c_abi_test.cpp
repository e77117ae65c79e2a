// The C interface (include/kscope/c/kscope_c.h) through libkscope_c.so itself, as a C
// caller (or Python's ctypes) sees it: statuses and the per-thread last error, scope
// handles and their order rules, reports and their formats, the diagnosis options, the
// benchmark harness with C callbacks on the host timer, and misuse answered with a status.
// Linked against the shared library only: nothing of kscope's C++ is visible here.
#include "kscope/c/kscope_c.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

// libkscope_c_testing.so's fake per-scope counter hook (fake_counter_hook.cpp).
extern "C" void kscope_testing_fake_counters(const char* name, unsigned open_sleep_ms, unsigned close_sleep_ms);
extern "C" void kscope_testing_fake_counter_calls(int* opened, int* closed);

namespace {

std::string last_error() { return kscope_last_error(); }

uint32_t site(const std::string& name) {
  uint32_t id = 0;
  REQUIRE(kscope_site_register(name.data(), name.size(), &id) == KSCOPE_OK);
  return id;
}

// Takes a library buffer into a std::string and frees it.
std::string take(char* text, size_t size) {
  std::string out(text, size);
  kscope_free(text);
  return out;
}

std::string report_as(int format) {
  kscope_report* r = nullptr;
  REQUIRE(kscope_report_create(&r) == KSCOPE_OK);
  char* text = nullptr;
  size_t size = 0;
  REQUIRE(kscope_report_format(r, format, &text, &size) == KSCOPE_OK);
  kscope_report_destroy(r);
  return take(text, size);
}

const nlohmann::json* find_scope(const nlohmann::json& report, const std::string& path) {
  for (const auto& s : report["scopes"])
    if (s["path"] == path) return &s;
  return nullptr;
}

void busy_wait_us(int us) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < until) {
  }
}

}  // namespace

TEST_CASE("c abi: version, and the last error starts empty and is per thread") {
  CHECK(kscope_c_abi_version() == KSCOPE_C_ABI_VERSION);
  CHECK(std::string(kscope_c_version()).find('.') != std::string::npos);
  std::thread([] { CHECK(last_error().empty()); }).join();
  CHECK(kscope_site_register(nullptr, 3, nullptr) == KSCOPE_ERROR_INVALID_ARGUMENT);
  const std::string mine = last_error();
  CHECK(mine.find("null") != std::string::npos);
  std::thread([] { CHECK(last_error().empty()); }).join();  // another thread's error is not this one's
  CHECK(last_error() == mine);
}

TEST_CASE("c abi: a name registers once; scopes nest and reach the report with exact counts") {
  const uint32_t outer = site("c_step");
  CHECK(site("c_step") == outer);
  const uint32_t inner = site("c_decode");
  CHECK(inner != outer);
  for (int i = 0; i < 7; ++i) {
    const kscope_scope_handle s = kscope_scope_open(outer);
    REQUIRE(s > 0);
    const kscope_scope_handle d = kscope_scope_open(inner);
    REQUIRE(d > 0);
    CHECK(d != s);
    CHECK(kscope_scope_set_work(d, 1e6, 4e6) == KSCOPE_OK);
    CHECK(kscope_scope_tag(d, "batch", 5, "8", 1) == KSCOPE_OK);
    busy_wait_us(50);
    CHECK(kscope_scope_close(d) == KSCOPE_OK);
    CHECK(kscope_scope_close(s) == KSCOPE_OK);
  }
  const auto report = nlohmann::json::parse(report_as(KSCOPE_FORMAT_JSON));
  CHECK(report["schema"] == "kscope.report/2");
  const nlohmann::json* decode = find_scope(report, "c_step/c_decode");
  REQUIRE(decode != nullptr);
  CHECK((*decode)["calls"] == 7);
  CHECK((*decode)["host_ns"]["median"].get<double>() >= 50e3);
  CHECK((*decode)["declared_work"]["flops"].get<double>() == doctest::Approx(7e6));
  CHECK((*decode)["tags"][0]["key"] == "batch");
  CHECK((*decode)["tags"][0]["count"] == 7);
  CHECK(report_as(KSCOPE_FORMAT_TEXT).find("c_decode") != std::string::npos);
  CHECK(report_as(KSCOPE_FORMAT_CSV).find("c_step/c_decode") != std::string::npos);
  CHECK(report_as(KSCOPE_FORMAT_HTML).find("c_decode") != std::string::npos);
  CHECK(report_as(KSCOPE_FORMAT_OPENMETRICS).find("# EOF") != std::string::npos);
}

TEST_CASE("c abi: names that are long or hold a NUL byte are scopes too") {
  const std::string long_name(400, 'x');
  const std::string with_nul("a\0b", 3);
  for (const std::string& name : {long_name, with_nul}) {
    const kscope_scope_handle s = kscope_scope_open(site(name));
    REQUIRE(s > 0);
    CHECK(kscope_scope_close(s) == KSCOPE_OK);
  }
  const kscope_scope_handle named = kscope_scope_open_named("c_by_name", 9, 0, 0);
  REQUIRE(named > 0);
  CHECK(kscope_scope_close(named) == KSCOPE_OK);
  const auto report = nlohmann::json::parse(report_as(KSCOPE_FORMAT_JSON));
  CHECK(find_scope(report, long_name) != nullptr);
  CHECK(find_scope(report, "c_by_name") != nullptr);
}

TEST_CASE("c abi: closing out of order closes the scopes above first and says which") {
  const kscope_scope_handle a = kscope_scope_open(site("c_order_a"));
  const kscope_scope_handle b = kscope_scope_open(site("c_order_b"));
  REQUIRE(a > 0);
  REQUIRE(b > 0);
  CHECK(kscope_scope_close(a) == KSCOPE_ERROR_ORDER);
  CHECK(last_error().find("'c_order_b'") != std::string::npos);
  CHECK(kscope_scope_close(b) == KSCOPE_ERROR_NOT_FOUND);  // already closed, with a
  CHECK(kscope_scope_close(a) == KSCOPE_ERROR_NOT_FOUND);  // twice
  CHECK(kscope_scope_tag(a, "k", 1, "v", 1) == KSCOPE_ERROR_NOT_FOUND);
  CHECK(kscope_scope_close(0) == KSCOPE_OK);
  // The thread's current scope is the root again: a new scope is top level.
  const kscope_scope_handle c = kscope_scope_open(site("c_order_after"));
  CHECK(kscope_scope_close(c) == KSCOPE_OK);
  const auto report = nlohmann::json::parse(report_as(KSCOPE_FORMAT_JSON));
  CHECK(find_scope(report, "c_order_a/c_order_b") != nullptr);
  CHECK(find_scope(report, "c_order_after") != nullptr);
}

TEST_CASE("c abi: a scope closes on the thread that opened it; elsewhere it is an error") {
  const kscope_scope_handle s = kscope_scope_open(site("c_thread_scope"));
  REQUIRE(s > 0);
  std::thread([s] {
    CHECK(kscope_scope_close(s) == KSCOPE_ERROR_NOT_FOUND);
    CHECK(last_error().find("another thread") != std::string::npos);
  }).join();
  CHECK(kscope_scope_close(s) == KSCOPE_OK);
}

TEST_CASE("c abi: an unregistered site opens nothing and says why") {
  CHECK(kscope_scope_open(999999) == -1);
  CHECK(last_error().find("never registered") != std::string::npos);
  CHECK(kscope_scope_close(-1) == KSCOPE_OK);
  kscope_range* r = reinterpret_cast<kscope_range*>(1);
  CHECK(kscope_range_start(0, &r) == KSCOPE_ERROR_NOT_FOUND);
}

TEST_CASE("c abi: disabled, scopes open nothing and that is not an error") {
  kscope_set_enabled(0);
  CHECK(kscope_is_enabled() == 0);
  CHECK(kscope_scope_open(site("c_disabled")) == 0);
  kscope_range* r = reinterpret_cast<kscope_range*>(1);
  CHECK(kscope_range_start(site("c_disabled_range"), &r) == KSCOPE_OK);
  CHECK(r == nullptr);
  kscope_set_enabled(1);
  CHECK(kscope_is_enabled() == 1);
  const auto report = nlohmann::json::parse(report_as(KSCOPE_FORMAT_JSON));
  CHECK(find_scope(report, "c_disabled") == nullptr);
}

TEST_CASE("c abi: counters off, the try calls open and close as the plain ones do") {
  const uint32_t id = site("c_try_plain");
  for (int i = 0; i < 3; ++i) {
    const kscope_scope_handle s = i == 2 ? kscope_scope_try_open_stream(id, 0) : kscope_scope_try_open(id);
    REQUIRE(s > 0);
    CHECK(kscope_scope_try_close(s) == KSCOPE_OK);
  }
  CHECK(kscope_scope_try_open(999999) == -1);  // an error is an error, not "would block"
  CHECK(last_error().find("never registered") != std::string::npos);
  for (const kscope_scope_handle nothing : {0, -1, KSCOPE_SCOPE_WOULD_BLOCK}) {  // no scope: nothing to close
    CHECK(kscope_scope_try_close(nothing) == KSCOPE_OK);
    CHECK(kscope_scope_close(nothing) == KSCOPE_OK);
  }
  const auto report = nlohmann::json::parse(report_as(KSCOPE_FORMAT_JSON));
  const nlohmann::json* s = find_scope(report, "c_try_plain");
  REQUIRE(s != nullptr);
  CHECK((*s)["calls"] == 3);
}

TEST_CASE("c abi: counters on, the try calls do nothing that may block and say so; the plain calls do it") {
  const uint32_t counted = site("c_try_counted");
  const uint32_t other = site("c_try_other");
  kscope_testing_fake_counters("c_try_counted", 0, 0);
  // Any open may be one the counters profile: the try calls open nothing.
  CHECK(kscope_scope_try_open(counted) == KSCOPE_SCOPE_WOULD_BLOCK);
  CHECK(kscope_scope_try_open_stream(counted, 0) == KSCOPE_SCOPE_WOULD_BLOCK);
  CHECK(kscope_scope_try_open(other) == KSCOPE_SCOPE_WOULD_BLOCK);
  int opened = -1, closed = -1;
  kscope_testing_fake_counter_calls(&opened, &closed);
  CHECK(opened == 0);

  // A call the counters do not profile closes through the try call, counters on or not.
  const kscope_scope_handle unprofiled = kscope_scope_open(other);
  REQUIRE(unprofiled > 0);
  CHECK(kscope_scope_try_close(unprofiled) == KSCOPE_OK);

  // A profiled call's close ends its counter pass: never through the try call, even once
  // counters are off again.
  const kscope_scope_handle profiled = kscope_scope_open(counted);
  REQUIRE(profiled > 0);
  kscope_testing_fake_counter_calls(&opened, &closed);
  CHECK(opened == 1);
  kscope_testing_fake_counters(nullptr, 0, 0);
  CHECK(kscope_scope_open(999999) == -1);
  const std::string error = last_error();
  CHECK(kscope_scope_try_close(profiled) == KSCOPE_WOULD_BLOCK);
  CHECK(last_error() == error);  // "would block" is no failure
  kscope_testing_fake_counter_calls(&opened, &closed);
  CHECK(closed == 0);
  CHECK(kscope_scope_close(profiled) == KSCOPE_OK);
  kscope_testing_fake_counter_calls(&opened, &closed);
  CHECK(closed == 1);
  // A handle no longer open: the try call leaves it to the plain one, which names the mistake.
  CHECK(kscope_scope_try_close(profiled) == KSCOPE_WOULD_BLOCK);
  CHECK(kscope_scope_close(profiled) == KSCOPE_ERROR_NOT_FOUND);

  const auto report = nlohmann::json::parse(report_as(KSCOPE_FORMAT_JSON));
  const nlohmann::json* s = find_scope(report, "c_try_counted");
  REQUIRE(s != nullptr);
  CHECK((*s)["profiled_calls"] == 1);
}

TEST_CASE("c abi: a close out of order is left to the plain call, which closes the scopes above first") {
  const kscope_scope_handle outer = kscope_scope_try_open(site("c_try_outer"));
  const kscope_scope_handle inner = kscope_scope_try_open(site("c_try_inner"));
  REQUIRE(outer > 0);
  REQUIRE(inner > 0);
  CHECK(kscope_scope_try_close(outer) == KSCOPE_WOULD_BLOCK);  // nothing closed
  CHECK(kscope_scope_try_close(inner) == KSCOPE_OK);
  CHECK(kscope_scope_try_close(outer) == KSCOPE_OK);
}

TEST_CASE("c abi: a range ends on another thread") {
  kscope_range* r = nullptr;
  REQUIRE(kscope_range_start(site("c_request"), &r) == KSCOPE_OK);
  REQUIRE(r != nullptr);
  CHECK(kscope_range_set_work(r, 0, 100) == KSCOPE_OK);
  std::thread([r] {
    busy_wait_us(200);
    CHECK(kscope_range_end(r) == KSCOPE_OK);
  }).join();
  CHECK(kscope_range_end(nullptr) == KSCOPE_OK);
  const auto report = nlohmann::json::parse(report_as(KSCOPE_FORMAT_JSON));
  const nlohmann::json* request = find_scope(report, "c_request");
  REQUIRE(request != nullptr);
  CHECK((*request)["cross_thread"] == true);
  CHECK((*request)["host_ns"]["median"].get<double>() >= 200e3);
}

TEST_CASE("c abi: reports read back, formats and files") {
  const std::string json = report_as(KSCOPE_FORMAT_JSON);
  kscope_report* r = nullptr;
  REQUIRE(kscope_report_parse(json.data(), json.size(), &r) == KSCOPE_OK);
  char* text = nullptr;
  size_t size = 0;
  REQUIRE(kscope_report_format(r, KSCOPE_FORMAT_JSON, &text, &size) == KSCOPE_OK);
  const auto again = nlohmann::json::parse(take(text, size));
  CHECK(again["scopes"].size() == nlohmann::json::parse(json)["scopes"].size());
  CHECK(kscope_report_format(r, 42, &text, &size) == KSCOPE_ERROR_INVALID_ARGUMENT);
  CHECK(kscope_report_write(r, KSCOPE_FORMAT_JSON, "/nonexistent-dir/py30/report.json") == KSCOPE_ERROR_IO);
  CHECK(!last_error().empty());
  kscope_report_destroy(r);
  kscope_report_destroy(nullptr);

  kscope_report* bad = reinterpret_cast<kscope_report*>(1);
  const std::string garbage = "{\"not\": \"a report\"}";
  CHECK(kscope_report_parse(garbage.data(), garbage.size(), &bad) == KSCOPE_ERROR_INVALID_ARGUMENT);
  CHECK(bad == reinterpret_cast<kscope_report*>(1));  // left as it was
  CHECK(last_error().find("report") != std::string::npos);
  CHECK(kscope_report_format(nullptr, KSCOPE_FORMAT_TEXT, &text, &size) == KSCOPE_ERROR_INVALID_ARGUMENT);
  CHECK(kscope_write_trace("") == KSCOPE_ERROR_INVALID_ARGUMENT);
  CHECK(kscope_write_trace("/nonexistent-dir/py30/trace.json") == KSCOPE_ERROR_IO);
}

TEST_CASE("c abi: a section of the caller's own, in every format; bad keys and JSON refused") {
  const std::string json = report_as(KSCOPE_FORMAT_JSON);
  kscope_report* r = nullptr;
  REQUIRE(kscope_report_parse(json.data(), json.size(), &r) == KSCOPE_OK);
  const std::string body = "peak 12 requests\n";
  const std::string data = R"({"peak": 12})";
  REQUIRE(kscope_report_add_section(r, "queue", "Request queue", body.data(), body.size(), data.data(), data.size()) ==
          KSCOPE_OK);
  char* text = nullptr;
  size_t size = 0;
  REQUIRE(kscope_report_format(r, KSCOPE_FORMAT_TEXT, &text, &size) == KSCOPE_OK);
  const std::string printed = take(text, size);
  CHECK(printed.find("section queue: Request queue\n") != std::string::npos);
  CHECK(printed.find("  peak 12 requests\n") != std::string::npos);
  REQUIRE(kscope_report_format(r, KSCOPE_FORMAT_JSON, &text, &size) == KSCOPE_OK);
  const auto doc = nlohmann::json::parse(take(text, size));
  REQUIRE(doc["sections"].size() == 1);
  CHECK(doc["sections"][0]["data"]["peak"] == 12);
  REQUIRE(kscope_report_format(r, KSCOPE_FORMAT_HTML, &text, &size) == KSCOPE_OK);
  CHECK(take(text, size).find("data-section=\"queue\"") != std::string::npos);

  // Refused, nothing added: a repeated key, a bad key, JSON that is not one value, nulls.
  CHECK(kscope_report_add_section(r, "queue", "Again", nullptr, 0, "1", 1) == KSCOPE_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("already") != std::string::npos);
  CHECK(kscope_report_add_section(r, "Bad Key", "", nullptr, 0, "1", 1) == KSCOPE_ERROR_INVALID_ARGUMENT);
  CHECK(kscope_report_add_section(r, "scopes", "", nullptr, 0, "1", 1) == KSCOPE_ERROR_INVALID_ARGUMENT);
  CHECK(kscope_report_add_section(r, "half", "", nullptr, 0, "{\"a\":", 5) == KSCOPE_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("not one JSON value") != std::string::npos);
  CHECK(kscope_report_add_section(r, nullptr, "", nullptr, 0, "1", 1) == KSCOPE_ERROR_INVALID_ARGUMENT);
  CHECK(kscope_report_add_section(nullptr, "x", "", nullptr, 0, "1", 1) == KSCOPE_ERROR_INVALID_ARGUMENT);
  CHECK(kscope_report_add_section(r, "x", "", nullptr, 3, "1", 1) == KSCOPE_ERROR_INVALID_ARGUMENT);
  REQUIRE(kscope_report_format(r, KSCOPE_FORMAT_JSON, &text, &size) == KSCOPE_OK);
  CHECK(nlohmann::json::parse(take(text, size))["sections"].size() == 1);
  kscope_report_destroy(r);
}

TEST_CASE("c abi: a scope's one verdict, from a report of either schema") {
  const auto verdict_of = [](const std::string& doc, const std::string& path, kscope_status* status) {
    kscope_report* r = nullptr;
    REQUIRE(kscope_report_parse(doc.data(), doc.size(), &r) == KSCOPE_OK);
    char* text = nullptr;
    size_t size = 0;
    *status = kscope_report_verdict(r, path.data(), path.size(), &text, &size);
    kscope_report_destroy(r);
    return *status == KSCOPE_OK ? nlohmann::json::parse(take(text, size)) : nlohmann::json();
  };
  // kscope.report/2: the sampled L2 at 76 % decided over a counter stand-in that read otherwise.
  const std::string v2 = R"json({"schema": "kscope.report/2", "scopes": [
    {"path": "transpose", "verdict": {"class": "memory-bound", "unit": "L2", "percent_of_peak": 76,
      "metric": "lts__throughput.avg.pct_of_peak_sustained_elapsed", "source": "sampled metrics", "count": 40,
      "count_of": "samples", "text": "memory-bound (L2): L2 76%",
      "evidence": [{"source": "sampled metrics", "percent_of_peak": 76, "metric": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
                    "count": 40, "count_of": "samples", "agrees": true,
                    "facts": [{"metric": "lts__throughput.avg.pct_of_peak_sustained_elapsed", "value": 76, "unit": "%"}]},
                   {"source": "hardware counters", "percent_of_peak": 22.6, "metric": "lts__t_sectors.avg.pct_of_peak_sustained_elapsed",
                    "count": 4, "count_of": "profiled calls", "agrees": false,
                    "facts": [{"metric": "lts__t_sectors.avg.pct_of_peak_sustained_elapsed", "value": 22.6, "unit": "%"}]}],
      "missing": ["declared work: none (scope::set_work)"]}},
    {"path": "tokenize", "verdict": null}]})json";
  kscope_status status = KSCOPE_OK;
  const nlohmann::json v = verdict_of(v2, "transpose", &status);
  REQUIRE(status == KSCOPE_OK);
  CHECK(v["class"] == "memory-bound");
  CHECK(v["unit"] == "L2");
  CHECK(v["percent_of_peak"] == 76);
  CHECK(v["source"] == "sampled metrics");
  CHECK(v["count"] == 40);
  REQUIRE(v["evidence"].size() == 2);
  CHECK(v["evidence"][1]["agrees"] == false);
  CHECK(v["missing"][0] == "declared work: none (scope::set_work)");
  CHECK(verdict_of(v2, "tokenize", &status).is_null());
  CHECK(status == KSCOPE_OK);
  verdict_of(v2, "no/such/scope", &status);
  CHECK(status == KSCOPE_ERROR_NOT_FOUND);
  CHECK(last_error().find("no/such/scope") != std::string::npos);
  char* text = nullptr;
  size_t size = 0;
  CHECK(kscope_report_verdict(nullptr, "a", 1, &text, &size) == KSCOPE_ERROR_INVALID_ARGUMENT);
  // An old kscope.report/1 file, written before verdicts: its placement's limiter and hint.
  const std::string v1 = R"({"schema": "kscope.report/1", "scopes": [{"path": "decode",
    "declared_work": {"flops": 1e9, "bytes": 4e9, "calls": 10},
    "roofline": {"roof": "fp32 plain", "flops_per_s": 1e12, "bytes_per_s": 4e12, "intensity": 0.25,
                 "roof_flops_per_s": 1.2e12, "fraction_of_roof": 0.83, "limiter": "memory",
                 "hint": "memory-bound: 83% of the DRAM roof"}}]})";
  const nlohmann::json old = verdict_of(v1, "decode", &status);
  REQUIRE(status == KSCOPE_OK);
  CHECK(old["class"] == "memory-bound");
  CHECK(old["unit"] == "DRAM");
  CHECK(old["source"] == "declared work");
  CHECK(old["text"] == "memory-bound: 83% of the DRAM roof");
  CHECK(old["count"] == 10);
}

TEST_CASE("c abi: the diagnosis, its options checked") {
  kscope_report* r = nullptr;
  REQUIRE(kscope_report_create(&r) == KSCOPE_OK);
  char *json = nullptr, *text = nullptr;
  size_t json_size = 0, text_size = 0;
  REQUIRE(kscope_diagnose(r, "{\"step_names\": [\"c_step\"], \"host_link_bytes_per_s\": 5e10}", &json,
                          &json_size, &text, &text_size) == KSCOPE_OK);
  CHECK(nlohmann::json::parse(take(json, json_size))["schema"] == "kscope.diagnosis/1");
  CHECK(take(text, text_size).find("Diagnosis") != std::string::npos);
  CHECK(kscope_diagnose(r, "{\"step_name\": []}", &json, &json_size, nullptr, nullptr) ==
        KSCOPE_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("unknown option 'step_name'") != std::string::npos);
  CHECK(kscope_diagnose(r, "{\"step_names\": \"step\"}", &json, &json_size, nullptr, nullptr) ==
        KSCOPE_ERROR_INVALID_ARGUMENT);
  CHECK(kscope_diagnose(r, "not json", &json, &json_size, nullptr, nullptr) == KSCOPE_ERROR_INVALID_ARGUMENT);
  CHECK(kscope_diagnose(r, "{\"min_step_calls\": -1}", &json, &json_size, nullptr, nullptr) ==
        KSCOPE_ERROR_INVALID_ARGUMENT);
  CHECK(kscope_diagnose(nullptr, nullptr, &json, &json_size, nullptr, nullptr) == KSCOPE_ERROR_INVALID_ARGUMENT);
  kscope_report_destroy(r);
}

TEST_CASE("c abi: the diagnosis's options listed with their defaults, from their one declaration") {
  char* json = nullptr;
  size_t size = 0;
  REQUIRE(kscope_diagnose_options(&json, &size) == KSCOPE_OK);
  const nlohmann::json o = nlohmann::json::parse(take(json, size));
  CHECK(o.size() == 18);
  CHECK(o["step_names"] == nlohmann::json::array({"step"}));
  CHECK(o["sync_names"] == nlohmann::json::array({"d2h", "sampling"}));
  CHECK(o["low_busy_share"] == 0.5);
  CHECK(o["min_step_calls"] == 10);
  CHECK(o["host_link_bytes_per_s"].is_null());  // unknown until measured
  // Every member listed is one kscope_diagnose takes; null only where unknown is allowed.
  kscope_report* r = nullptr;
  REQUIRE(kscope_report_create(&r) == KSCOPE_OK);
  char* out = nullptr;
  size_t out_size = 0;
  for (const auto& [key, value] : o.items()) {
    CAPTURE(key);
    const std::string one = nlohmann::json{{key, value}}.dump();
    CHECK(kscope_diagnose(r, one.c_str(), &out, &out_size, nullptr, nullptr) == KSCOPE_OK);
    take(out, out_size);
  }
  CHECK(kscope_diagnose(r, "{\"low_busy_share\": null}", &out, &out_size, nullptr, nullptr) ==
        KSCOPE_ERROR_INVALID_ARGUMENT);
  CHECK(kscope_diagnose_options(nullptr, nullptr) == KSCOPE_ERROR_INVALID_ARGUMENT);
  kscope_report_destroy(r);
}

TEST_CASE("c abi: CUPTI without a GPU, or with bad options, says why") {
  CHECK(kscope_enable_cupti("graphs=sideways") == KSCOPE_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("graphs") != std::string::npos);
  const char* no_gpu = std::getenv("KSCOPE_TEST_EXPECT_NO_GPU");
  if (no_gpu != nullptr && std::string(no_gpu) == "1") {
    CHECK(kscope_enable_cupti(nullptr) == KSCOPE_ERROR_UNAVAILABLE);
    CHECK(!last_error().empty());
    // Nothing runs: nothing to pause or resume, said, and the program goes on.
    CHECK(kscope_pause_tracing() == KSCOPE_ERROR_UNAVAILABLE);
    CHECK(last_error().find("not running") != std::string::npos);
    CHECK(kscope_resume_tracing() == KSCOPE_ERROR_UNAVAILABLE);
  }
}

TEST_CASE("c abi: counters by whole steps take a step scope; each scope's calls take none") {
  // Refused before anything starts: a step scope names a step, and scope calls have none.
  CHECK(kscope_enable_counters_steps(0, 0, "decode") == KSCOPE_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("whole_steps") != std::string::npos);
  // Accepted: started (the status then names the step scope), or refused with a reason
  // (no range profiler or no GPU here); either way the program goes on.
  const kscope_status steps = kscope_enable_counters_steps(0, 1, "decode");
  const auto counters_status = [] {
    const nlohmann::json report = nlohmann::json::parse(report_as(KSCOPE_FORMAT_JSON));
    return report["counters"].is_object() ? report["counters"].value("status", std::string()) : std::string();
  };
  if (steps == KSCOPE_OK) {
    CHECK(counters_status().find("the calls of 'decode'") != std::string::npos);
  } else {
    CHECK(steps == KSCOPE_ERROR_UNAVAILABLE);
    CHECK(!last_error().empty());
  }
  kscope_disable_counters();
  const kscope_status calls = kscope_enable_counters_steps(0, 0, nullptr);
  CHECK((calls == KSCOPE_OK || calls == KSCOPE_ERROR_UNAVAILABLE));
  if (calls == KSCOPE_OK) CHECK(counters_status().find("each scope's first") != std::string::npos);
  kscope_disable_counters();
}

namespace {

struct counting_call {
  int calls = 0;
  int spin_us = 20;
  bool fail = false;
};

int counted(void* user, uintptr_t) {
  auto* c = static_cast<counting_call*>(user);
  ++c->calls;
  if (c->fail) {
    const char message[] = "boom from the callback";
    kscope_bench_callback_error(message, sizeof message - 1);
    return 1;
  }
  busy_wait_us(c->spin_us);
  return 0;
}

int read_ones(void*, kscope_output_sink* sink) {
  const double values[3] = {1.0, 2.0, 3.0};
  return kscope_output_put(sink, values, 3) == KSCOPE_OK ? 0 : 1;
}

int read_off(void*, kscope_output_sink* sink) {
  const double values[3] = {1.0, 2.0, 3.5};
  return kscope_output_put(sink, values, 3) == KSCOPE_OK ? 0 : 1;
}

nlohmann::json run(kscope_bench* b, int timer) {
  char* json = nullptr;
  size_t size = 0;
  REQUIRE(kscope_bench_run(b, timer, &json, &size, nullptr, nullptr) == KSCOPE_OK);
  return nlohmann::json::parse(take(json, size))["benchmarks"][0];
}

const char* quick_spec =
    "{\"name\": \"spin\", \"work\": [1000, 8000], \"params\": {\"n\": 4, \"kind\": \"c\"},"
    " \"options\": {\"time_budget_s\": 3, \"min_time_s\": 0.05, \"target_rel_ci\": 0.05}}";

}  // namespace

TEST_CASE("c abi: bench on the host timer: the harness's statistics, the reference ratio, the output check") {
  counting_call mine{0, 20, false}, theirs{0, 60, false};
  kscope_bench* b = nullptr;
  kscope_bench* ref = nullptr;
  REQUIRE(kscope_bench_create(quick_spec, counted, &mine, &b) == KSCOPE_OK);
  REQUIRE(kscope_bench_create("{\"name\": \"slow\"}", counted, &theirs, &ref) == KSCOPE_OK);
  REQUIRE(kscope_bench_set_output(b, read_ones, nullptr, 1e-6) == KSCOPE_OK);
  REQUIRE(kscope_bench_set_output(ref, read_ones, nullptr, NAN) == KSCOPE_OK);
  REQUIRE(kscope_bench_set_reference(b, ref) == KSCOPE_OK);
  const nlohmann::json r = run(b, KSCOPE_TIMER_HOST);
  CHECK(r["valid"] == true);
  CHECK(r["name"] == "spin");
  CHECK(r["params"]["n"] == 4);
  CHECK(r["params"]["kind"] == "c");
  CHECK(mine.calls > 20);
  CHECK(theirs.calls > 20);
  const double median = r["measurement"]["time_s"]["median"].get<double>();
  CHECK(median >= 20e-6);
  CHECK(median < 1e-3);
  // 20 us against 60 us of spinning: the reference is slower, by about 3x.
  const auto& versus = r["reference"]["comparison"];
  CHECK(versus["verdict"] == "faster");
  CHECK(versus["relative_speed"].get<double>() > 1.5);
  CHECK(r["reference"]["output_check"]["performed"] == true);
  CHECK(r["reference"]["output_check"]["passed"] == true);

  // A different output fails the check, with the error.
  REQUIRE(kscope_bench_set_output(ref, read_off, nullptr, NAN) == KSCOPE_OK);
  REQUIRE(kscope_bench_set_reference(b, ref) == KSCOPE_OK);
  const nlohmann::json off = run(b, KSCOPE_TIMER_HOST);
  CHECK(off["reference"]["output_check"]["passed"] == false);
  CHECK(off["reference"]["output_check"]["max_rel_error"].get<double>() == doctest::Approx(0.5 / 3.5));
  kscope_bench_destroy(ref);
  kscope_bench_destroy(b);
}

TEST_CASE("c abi: a failing callback ends the run with its message, and no GPU is said plainly") {
  counting_call failing{0, 0, true};
  kscope_bench* b = nullptr;
  REQUIRE(kscope_bench_create(quick_spec, counted, &failing, &b) == KSCOPE_OK);
  const nlohmann::json r = run(b, KSCOPE_TIMER_HOST);
  CHECK(r["valid"] == false);
  CHECK(r["stop_reason"] == "error");
  CHECK_MESSAGE(r["invalid_reason"].get<std::string>().find("boom from the callback") != std::string::npos,
                r["invalid_reason"]);
  CHECK(failing.calls < 20);  // it stops, it does not spin until the budget
  kscope_bench_destroy(b);

  const char* no_gpu = std::getenv("KSCOPE_TEST_EXPECT_NO_GPU");
  if (no_gpu != nullptr && std::string(no_gpu) == "1") {
    counting_call fine{0, 1, false};
    REQUIRE(kscope_bench_create(quick_spec, counted, &fine, &b) == KSCOPE_OK);
    const nlohmann::json g = run(b, KSCOPE_TIMER_CUDA);
    CHECK(g["valid"] == false);
    CHECK(g["invalid_reason"].get<std::string>().rfind("no GPU", 0) == 0);
    kscope_bench_destroy(b);
  }
}

TEST_CASE("c abi: bench misuse is a status, never a crash") {
  kscope_bench* b = reinterpret_cast<kscope_bench*>(1);
  CHECK(kscope_bench_create(nullptr, nullptr, nullptr, &b) == KSCOPE_ERROR_INVALID_ARGUMENT);
  CHECK(kscope_bench_create("{\"options\": {\"cache\": \"lukewarm\"}}", counted, nullptr, &b) ==
        KSCOPE_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("cache") != std::string::npos);
  CHECK(kscope_bench_create("{\"options\": {\"target_rel_ci\": 0}}", counted, nullptr, &b) ==
        KSCOPE_ERROR_INVALID_ARGUMENT);
  CHECK(kscope_bench_create("{\"shape\": [1, 2.5]}", counted, nullptr, &b) == KSCOPE_ERROR_INVALID_ARGUMENT);
  CHECK(kscope_bench_create("{\"colour\": 1}", counted, nullptr, &b) == KSCOPE_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("unknown option 'colour'") != std::string::npos);
  CHECK(b == reinterpret_cast<kscope_bench*>(1));
  counting_call c;
  REQUIRE(kscope_bench_create(nullptr, counted, &c, &b) == KSCOPE_OK);
  CHECK(kscope_bench_set_reference(b, b) == KSCOPE_ERROR_INVALID_ARGUMENT);
  CHECK(kscope_bench_set_device(b, -2) == KSCOPE_ERROR_INVALID_ARGUMENT);
  CHECK(kscope_bench_run(b, 7, nullptr, nullptr, nullptr, nullptr) == KSCOPE_ERROR_INVALID_ARGUMENT);
  CHECK(kscope_bench_run(nullptr, KSCOPE_TIMER_HOST, nullptr, nullptr, nullptr, nullptr) ==
        KSCOPE_ERROR_INVALID_ARGUMENT);
  CHECK(kscope_output_put(nullptr, nullptr, 0) == KSCOPE_ERROR_INVALID_ARGUMENT);
  kscope_bench_destroy(b);
  kscope_bench_destroy(nullptr);
}
