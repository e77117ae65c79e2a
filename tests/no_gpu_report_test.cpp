// A session report in a process without a usable GPU (issue 16): the reason is said once,
// in kscope's words (device/availability.hpp), the CUPTI line once, and nothing claims GPU
// times ("from CUDA events only") where there are none. Its own executable, so CUPTI,
// counters and metric sampling are first started here. ctest also runs it with
// CUDA_VISIBLE_DEVICES=-1 (no_gpu_report_test_hidden), so a GPU machine checks this path.
#include <kscope/scope/scope.hpp>
#include <kscope/session/session.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <string>

namespace {

std::size_t count(const std::string& text, const std::string& part) {
  if (part.empty()) return 0;
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

// The text printer wraps long lines at 98 columns; counting a sentence needs them joined.
std::string unwrapped(std::string text) {
  for (std::size_t at = text.find("\n  "); at != std::string::npos; at = text.find("\n  ", at)) text.replace(at, 3, " ");
  return text;
}

}  // namespace

TEST_CASE("without a GPU the report says why once, and claims no GPU times") {
  const kscope::gpu_availability& gpu = kscope::probe_gpu();
  if (gpu.available()) {
    MESSAGE("a usable GPU here: nothing to check (no_gpu_report_test_hidden hides it)");
    return;
  }
  MESSAGE("no GPU: " << gpu.message);
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible != nullptr && std::string(visible) == "-1" && gpu.absence != kscope::gpu_absence::no_driver &&
      gpu.absence != kscope::gpu_absence::built_without_cuda) {
    CHECK(gpu.absence == kscope::gpu_absence::devices_hidden);
  }

  auto& session = kscope::session::global();
  CHECK_FALSE(session.enable_cupti());
  CHECK_FALSE(session.enable_metric_sampling());
  (void)session.enable_counters();  // starts (a hook); its first profiled call finds no GPU
  for (int i = 0; i < 5; ++i) {
    KSCOPE_SCOPE("no_gpu_step");
    { KSCOPE_SCOPE("no_gpu_inner"); }
  }
  const kscope::session_report r = session.report();
  const std::string text = unwrapped(r.text());
  MESSAGE(r.text());

  // The reason, in full, exactly once: the GPU line.
  CHECK(count(text, gpu.message) == 1);
  CHECK(count(text, "GPU: " + gpu.message + "; host times only") == 1);
  CHECK(r.context.no_device_reason == gpu.message);
  // The CUPTI line once, with the short reason and no claim of GPU times.
  const std::string cupti = "CUPTI not started: " + gpu.reason + "; no usable GPU, so no GPU times";
  CHECK(r.cupti_status == cupti);
  CHECK(count(text, cupti) == 1);
  CHECK(count(text, "CUPTI not started") == 1);
  CHECK(count(text, "events only") == 0);
  // The other modules name the short reason, each once, and no warning repeats a section.
  CHECK(count(text, "metric sampling unavailable: " + gpu.reason) == 1);
  CHECK(count(text, "hardware counters unavailable: " + gpu.reason) == 1);
  CHECK(count(text, "warning: ") == 0);
  // The runtime's "insufficient driver" only where the driver really is too old.
  if (gpu.absence != kscope::gpu_absence::driver_too_old && gpu.absence != kscope::gpu_absence::cuda_error)
    CHECK(count(text, "nsufficient") == 0);

  // The JSON: the reason once, the CUPTI status in `cupti.status` and once in `warnings`
  // (the list of everything kscope could not do).
  // (Up to its first quote: JSON and HTML escape quotes, as in CUDA_VISIBLE_DEVICES="-1".)
  const std::string head = gpu.message.substr(0, gpu.message.find('"'));
  const std::string json = r.json();
  CHECK(count(json, head) == 1);
  CHECK(count(json, "events only") == 0);
  const auto doc = nlohmann::json::parse(json);
  CHECK(doc["context"]["gpu"].is_null());
  CHECK(doc["context"]["no_device_reason"] == gpu.message);
  CHECK(doc["cupti"]["status"] == cupti);
  std::size_t cupti_warnings = 0;
  for (const auto& w : doc["warnings"]) cupti_warnings += w.get<std::string>() == cupti ? 1 : 0;
  CHECK(cupti_warnings == 1);

  // The HTML page: the reason once, the CUPTI line once (as a warning: it has no status line).
  const std::string html = r.html();
  CHECK(count(html, head) == 1);
  CHECK(count(html, "CUPTI not started") == 1);
  CHECK(count(html, "events only") == 0);
}

TEST_CASE("CUPTI switched off without a GPU: no claim of CUDA-event times either") {
  const kscope::gpu_availability& gpu = kscope::probe_gpu();
  if (gpu.available()) return;
  ::setenv("KSCOPE_CUPTI", "0", 1);
  CHECK_FALSE(kscope::session::global().enable_cupti());
  ::unsetenv("KSCOPE_CUPTI");
  const kscope::session_report r = kscope::session::global().report();
  CHECK(r.cupti_status == "CUPTI collection disabled (KSCOPE_CUPTI=0); no usable GPU, so no GPU times");
  const std::string text = unwrapped(r.text());
  CHECK(count(text, "CUPTI collection disabled") == 1);
  CHECK(count(text, "events only") == 0);
  CHECK(count(text, gpu.message) == 1);
}
