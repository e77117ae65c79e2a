// The session with CUPTI on: per-scope kernel and copy attribution in the report, the
// (unscoped) bucket, the roofline of a declared-work scope, the HTML page and the trace.
#include <kscope/kscope.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace {

__global__ void add_one(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("with CUPTI on, the report shows each scope's kernels and copies") {
  auto& session = kscope::session::global();
  REQUIRE_MESSAGE(session.enable_cupti(), kscope::cupti_collector::global().status().message);
  session.reset();
  const int n = 1 << 20;
  float* x = nullptr;
  REQUIRE(cudaMalloc(&x, n * sizeof(float)) == cudaSuccess);
  float* host = nullptr;
  REQUIRE(cudaMallocHost(&host, n * sizeof(float)) == cudaSuccess);
  cudaStream_t stream;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  add_one<<<1, 32, 0, stream>>>(x, 32);  // outside any scope
  for (int step = 0; step < 5; ++step) {
    KSCOPE_SCOPE("cs_step");
    {
      kscope::scope s{"cs_upload", stream};
      cudaMemcpyAsync(x, host, n * sizeof(float), cudaMemcpyHostToDevice, stream);
    }
    {
      kscope::scope s{"cs_compute", stream};
      s.set_work({1.0 * n, 8.0 * n});
      for (int k = 0; k < 3; ++k) add_one<<<(n + 255) / 256, 256, 0, stream>>>(x, n);
    }
    {
      kscope::scope s{"cs_download", stream};
      cudaMemcpyAsync(host, x, n * sizeof(float), cudaMemcpyDeviceToHost, stream);
      cudaStreamSynchronize(stream);
    }
  }
  const auto r = session.report();
  MESSAGE(r.text());
  const auto* compute = r.find("cs_step/cs_compute");
  const auto* upload = r.find("cs_step/cs_upload");
  const auto* download = r.find("cs_step/cs_download");
  const auto* step = r.find("cs_step");
  const auto* unscoped = r.find("(unscoped)");
  REQUIRE(compute);
  REQUIRE(upload);
  REQUIRE(download);
  REQUIRE(step);
  REQUIRE(compute->gpu_activity);
  CHECK(compute->gpu_activity->kernel_count == 15);
  CHECK(compute->gpu_activity->busy_ns > 0);
  REQUIRE(upload->gpu_activity);
  CHECK(upload->gpu_activity->copies(kscope::copy_direction::h2d).bytes == 5ull * n * sizeof(float));
  REQUIRE(download->gpu_activity);
  CHECK(download->gpu_activity->copies(kscope::copy_direction::d2h).bytes == 5ull * n * sizeof(float));
  CHECK_FALSE(step->gpu_activity);  // its children launched everything
  REQUIRE(unscoped);
  REQUIRE(unscoped->gpu_activity);
  CHECK(unscoped->gpu_activity->kernel_count >= 1);
  REQUIRE(compute->roofline);
  CHECK(r.cupti_counters.unattributed == 0);
  bool found = false;
  for (const auto& k : r.top_kernels) found = found || k.name.find("add_one") != std::string::npos;
  CHECK(found);

  const auto doc = nlohmann::json::parse(r.json());
  CHECK_FALSE(doc["cupti"]["status"].get<std::string>().empty());
  bool json_compute = false;
  for (const auto& s : doc["scopes"])
    if (s["path"] == "cs_step/cs_compute") json_compute = s["gpu_activity"]["kernel_count"] == 15;
  CHECK(json_compute);

  REQUIRE(r.write_html("session_test.html"));
  const std::string html = read_file("session_test.html");
  CHECK(html.find("<svg") != std::string::npos);
  CHECK(html.find("kscope-point") != std::string::npos);
  std::remove("session_test.html");

  std::string why;
  REQUIRE_MESSAGE(session.write_trace("session_test.trace.json", &why), why);
  const auto trace = nlohmann::json::parse(read_file("session_test.trace.json"));
  int host_events = 0, kernel_events = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e["pid"] == kscope::trace_host_pid) ++host_events;
    else if (e.contains("name") && e["name"].get<std::string>().find("add_one") != std::string::npos) ++kernel_events;
  }
  CHECK(host_events >= 20);
  CHECK(kernel_events >= 16);
  std::remove("session_test.trace.json");

  cudaStreamDestroy(stream);
  cudaFreeHost(host);
  cudaFree(x);
}
