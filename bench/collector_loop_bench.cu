// What the CUPTI collector costs per launch inside a serving-like step, with the noise of
// a whole serving process taken out (GPU needed).
//
// bench/serving_overhead.sh measures the real loop, but one process of it varies by 10-30 %
// from the next on a shared host, too much to tell which part of the collector costs what.
// Here one process runs many identical steps: each step opens KSCOPE_SCOPE("step") and
// "decode", launches `layers` x 9 small kernels with arguments (eight different kernels, and
// a host scope "attention" around one of them per layer, as examples/serving does), one
// pinned H2D and one D2H copy inside stream scopes (CUDA events), and ends with a stream
// synchronize. Each configuration runs in its own child process (CUPTI's state is
// process-wide), all configurations in rotation, several rounds; the statistic is the
// median step time over every step of every round, and the added cost per launch is
// (step - step with no CUPTI) / launches per step.
//
//   build-*/bench/collector_loop_bench                       # every configuration
//   build-*/bench/collector_loop_bench --child collector     # one configuration
//
// Configurations:
//   scopes        scopes only, no CUPTI
//   raw_kernel    CUPTI kernel activity alone (buffers walked, nothing attributed): CUPTI's floor
//   raw_all       raw CUPTI kernel + memcpy + memset + synchronization activity
//   collector     kscope's collector with its defaults (KSCOPE_CUPTI_OPTIONS applies)
//   collector_*   the collector with one part switched off: _nosync, _nocopy (memcpy and
//                 memset), _noruntime (driver-API callbacks only), _graphs (graph-level trace)
#include <kscope/kscope.hpp>

#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

#define CHECK_CUDA(call)                                                                  \
  do {                                                                                    \
    cudaError_t e_ = (call);                                                              \
    if (e_ != cudaSuccess) {                                                              \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_));             \
      std::exit(2);                                                                       \
    }                                                                                     \
  } while (0)

template <int Which>
__global__ void small_kernel(float* data, int n, float scale) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = data[i] * scale + static_cast<float>(Which);
}

constexpr int layers = 16;
constexpr int launches_per_layer = 9;
constexpr int steps_per_round = 400;
constexpr int warmup_steps = 50;
constexpr int rounds = 3;
constexpr int elements = 32 * 1024;

const char* const modes[] = {"scopes",         "raw_kernel",        "raw_all",          "collector",
                             "collector_nosync", "collector_nocopy", "collector_noruntime"};

// ---- raw CUPTI: activity only, records walked and counted ------------------------------
kscope::detail::cupti_api raw_api;
std::uint64_t raw_records = 0;
std::vector<std::uint8_t*> raw_free;
std::mutex raw_mutex;

void CUPTIAPI raw_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *max_records = 0;
  std::lock_guard<std::mutex> lock(raw_mutex);
  *buffer = raw_free.empty() ? nullptr : raw_free.back();
  *size = raw_free.empty() ? 0 : (8u << 20);
  if (!raw_free.empty()) raw_free.pop_back();
}
void CUPTIAPI raw_completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t, std::size_t valid) {
  CUpti_Activity* record = nullptr;
  std::lock_guard<std::mutex> lock(raw_mutex);
  while (raw_api.activity_get_next_record(buffer, valid, &record) == CUPTI_SUCCESS) ++raw_records;
  raw_free.push_back(buffer);
}
bool start_raw(bool all) {
  std::string why;
  if (!kscope::detail::load_cupti(raw_api, "", why)) return false;
  for (int i = 0; i < 8; ++i) {
    auto* b = static_cast<std::uint8_t*>(std::aligned_alloc(64, 8u << 20));
    std::memset(b, 0, 8u << 20);
    raw_free.push_back(b);
  }
  if (raw_api.activity_register_callbacks(&raw_requested, &raw_completed) != CUPTI_SUCCESS) return false;
  bool ok = raw_api.activity_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS;
  if (all) {
    for (CUpti_ActivityKind k : {CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION})
      ok = ok && raw_api.activity_enable(k) == CUPTI_SUCCESS;
  }
  return ok;
}

struct step_resources {
  cudaStream_t stream{};
  float* data = nullptr;
  int* host = nullptr;
  int* device = nullptr;
};

template <int Which>
void launch(const step_resources& r) {
  small_kernel<Which><<<elements / 256, 256, 0, r.stream>>>(r.data, elements, 1.0001f);
}

void one_step(const step_resources& r) {
  KSCOPE_SCOPE("step");
  {
    kscope::scope h2d{"h2d", r.stream};
    CHECK_CUDA(cudaMemcpyAsync(r.device, r.host, 4096, cudaMemcpyHostToDevice, r.stream));
  }
  {
    KSCOPE_SCOPE("decode");
    for (int layer = 0; layer < layers; ++layer) {
      launch<0>(r);
      launch<1>(r);
      launch<2>(r);
      {
        KSCOPE_SCOPE("attention");
        launch<3>(r);
      }
      launch<4>(r);
      launch<5>(r);
      launch<6>(r);
      launch<7>(r);
      launch<0>(r);
    }
  }
  {
    kscope::scope d2h{"d2h", r.stream};
    CHECK_CUDA(cudaMemcpyAsync(r.host, r.device, 4096, cudaMemcpyDeviceToHost, r.stream));
    CHECK_CUDA(cudaStreamSynchronize(r.stream));
  }
}

int run_child(const std::string& mode) {
  CHECK_CUDA(cudaFree(nullptr));
  step_resources r;
  CHECK_CUDA(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
  CHECK_CUDA(cudaMalloc(&r.data, elements * sizeof(float)));
  CHECK_CUDA(cudaMemset(r.data, 0, elements * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&r.device, 4096));
  CHECK_CUDA(cudaMallocHost(&r.host, 4096));
  std::memset(r.host, 0, 4096);

  kscope::session& session = kscope::session::global();
  if (mode == "raw_kernel" || mode == "raw_all") {
    if (!start_raw(mode == "raw_all")) {
      std::printf("RESULT %s unavailable\n", mode.c_str());
      return 0;
    }
  } else if (mode.rfind("collector", 0) == 0) {
    kscope::cupti_options o;
    if (mode == "collector_nosync") o.collect_sync = false;
    if (mode == "collector_nocopy") o.collect_memcpy = o.collect_memset = false;
    if (mode == "collector_noruntime") o.runtime_api_callbacks = false;
    if (!session.enable_cupti(o)) {
      std::printf("RESULT %s unavailable\n", mode.c_str());
      return 0;
    }
  } else if (mode != "scopes") {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }
  for (int i = 0; i < warmup_steps; ++i) one_step(r);
  std::vector<double> step_us;
  step_us.reserve(steps_per_round);
  for (int i = 0; i < steps_per_round; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    one_step(r);
    step_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::string check;
  if (mode.rfind("collector", 0) == 0) {
    const kscope::session_report rep = session.report();
    std::uint64_t kernels = 0;
    for (const kscope::scope_report& s : rep.scopes)
      if (s.gpu_activity) kernels += s.gpu_activity->kernel_count;
    check = " kernels=" + std::to_string(kernels);
    std::fprintf(stderr, "[%s] %s\n", mode.c_str(), rep.cupti_status.c_str());
  } else if (mode.rfind("raw", 0) == 0) {
    (void)raw_api.activity_flush_all(0);
    check = " records=" + std::to_string(raw_records);
  }
  std::printf("RESULT %s", mode.c_str());
  for (double v : step_us) std::printf(" %.2f", v);
  std::printf("%s\n", check.c_str());
  return 0;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "--child") == 0) return run_child(argv[2]);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device\n");
    return 0;
  }
  char self[4096] = {};
  const ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) return 2;
  std::vector<std::string> chosen(std::begin(modes), std::end(modes));
  if (argc >= 2) chosen.assign(argv + 1, argv + argc);
  std::map<std::string, std::vector<double>> samples;
  std::map<std::string, std::vector<double>> round_medians;
  std::map<std::string, std::string> checks;
  for (int round = 0; round < rounds; ++round) {
    for (const std::string& mode : chosen) {
      const std::string command = std::string("'") + self + "' --child " + mode;
      FILE* child = popen(command.c_str(), "r");
      if (child == nullptr) continue;
      static char line[1 << 20];
      while (std::fgets(line, sizeof line, child) != nullptr) {
        if (std::strncmp(line, "RESULT ", 7) != 0) continue;
        char* save = nullptr;
        ::strtok_r(line, " \n", &save);
        ::strtok_r(nullptr, " \n", &save);
        std::vector<double> mine;
        while (char* tok = ::strtok_r(nullptr, " \n", &save)) {
          if (std::strchr(tok, '=') != nullptr) checks[mode] = tok;
          else if (std::strcmp(tok, "unavailable") == 0) checks[mode] = "unavailable";
          else mine.push_back(std::strtod(tok, nullptr));
        }
        samples[mode].insert(samples[mode].end(), mine.begin(), mine.end());
        round_medians[mode].push_back(median(mine));
      }
      pclose(child);
    }
  }
  const int launches = layers * launches_per_layer;
  std::printf("\nSteps of %d kernel launches, 2 copies, 1 synchronize; %d steps x %d rounds per configuration\n",
              launches, steps_per_round, rounds);
  std::printf("| configuration | median step | per round | added per launch vs scopes | check |\n|---|---:|---|---:|---|\n");
  const double base = median(samples["scopes"]);
  for (const std::string& mode : chosen) {
    const auto& v = samples[mode];
    if (v.empty()) {
      std::printf("| %s | unavailable | | | %s |\n", mode.c_str(), checks[mode].c_str());
      continue;
    }
    std::string per_round;
    for (double m : round_medians[mode]) per_round += (per_round.empty() ? "" : " / ") + std::to_string(m).substr(0, 6);
    const double m = median(v);
    std::printf("| %s | %.1f us | %s | %+.3f us | %s |\n", mode.c_str(), m, per_round.c_str(), (m - base) / launches,
                checks[mode].c_str());
  }
  return 0;
}
