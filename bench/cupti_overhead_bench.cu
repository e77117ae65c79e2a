// Host cost per kernel launch with kscope's CUPTI collection, against no CUPTI and raw
// CUPTI kernel activity (GPU needed).
//
// An empty kernel is launched 50 000 times per repetition on one stream; the time of the
// launch loop plus the final stream synchronize, divided by 50 000, is the per-launch host
// cost. Each configuration runs in its own child process (CUPTI's state is process-wide
// and cannot be fully reset), the whole set three times in rotation, and the table shows
// the median over all repetitions of a configuration:
//
//   none                  plain <<<>>> launches
//   raw_cupti             CUPTI CONCURRENT_KERNEL activity only (buffers, no callbacks):
//                         the floor any CUPTI-based collector pays
//   kscope_callback       kscope's default: launch callback on runtime + driver API
//   kscope_runtime_only   launch callback on the runtime API only
//
// Each kscope child also checks that every launch was attributed to the scope node open
// around the loop (printed as attributed/expected). Target: kscope adds <= 10 % on top of
// raw CUPTI's per-launch cost.
//
//   build-*/bench/cupti_overhead_bench            # prints the table
//   build-*/bench/cupti_overhead_bench --child kscope_callback   # one configuration
#include <kscope/activity/collector.hpp>

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

__global__ void empty_kernel() {}

constexpr int launches_per_rep = 50000;
constexpr int reps = 7;
constexpr int warmup_launches = 2000;
constexpr int rounds = 3;
constexpr kscope::node_id bench_node = 7;

const char* const modes[] = {"none", "raw_cupti", "kscope_callback", "kscope_runtime_only"};

#define CHECK_CUDA(call)                                                                 \
  do {                                                                                   \
    cudaError_t e_ = (call);                                                             \
    if (e_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_));            \
      std::exit(2);                                                                      \
    }                                                                                    \
  } while (0)

// ---- raw CUPTI: kernel activity with a minimal buffer handler -------------------------
kscope::detail::cupti_api raw_api;
std::uint64_t raw_kernels = 0;
std::vector<std::uint8_t*> raw_free;
std::mutex raw_mutex;  // CUPTI requests from launching threads, completes on its own

void CUPTIAPI raw_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *max_records = 0;
  std::lock_guard<std::mutex> lock(raw_mutex);
  if (raw_free.empty()) {
    *buffer = nullptr;
    *size = 0;
    return;
  }
  *buffer = raw_free.back();
  raw_free.pop_back();
  *size = 8u << 20;
}

void CUPTIAPI raw_completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t, std::size_t valid) {
  CUpti_Activity* record = nullptr;
  std::lock_guard<std::mutex> lock(raw_mutex);
  while (raw_api.activity_get_next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) ++raw_kernels;
  }
  raw_free.push_back(buffer);
}

bool start_raw_cupti() {
  std::string why;
  if (!kscope::detail::load_cupti(raw_api, "", why)) {
    std::fprintf(stderr, "raw CUPTI: %s\n", why.c_str());
    return false;
  }
  for (int i = 0; i < 8; ++i) {
    auto* b = static_cast<std::uint8_t*>(std::aligned_alloc(64, 8u << 20));
    std::memset(b, 0, 8u << 20);
    raw_free.push_back(b);
  }
  if (raw_api.activity_register_callbacks(&raw_requested, &raw_completed) != CUPTI_SUCCESS) return false;
  return raw_api.activity_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS;
}

int run_child(const std::string& mode) {
  CHECK_CUDA(cudaFree(nullptr));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  auto& collector = kscope::cupti_collector::global();
  bool kscope_mode = mode.rfind("kscope", 0) == 0;
  if (mode == "raw_cupti") {
    if (!start_raw_cupti()) {
      std::printf("RESULT %s unavailable\n", mode.c_str());
      return 0;
    }
  } else if (kscope_mode) {
    kscope::cupti_options o;
    if (mode == "kscope_runtime_only") o.driver_api_callbacks = false;
    if (!collector.start(o)) {
      std::printf("RESULT %s unavailable %s\n", mode.c_str(), collector.status().message.c_str());
      return 0;
    }
    std::fprintf(stderr, "[%s] %s\n", mode.c_str(), collector.status().message.c_str());
  } else if (mode != "none") {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }

  // The "scope": the launch callback reads the thread's current node, which is all an
  // open kscope::scope changes.
  auto& thread = kscope::detail::this_thread_state();
  thread.current = bench_node;

  for (int i = 0; i < warmup_launches; ++i) empty_kernel<<<1, 1, 0, stream>>>();
  CHECK_CUDA(cudaStreamSynchronize(stream));
  std::vector<double> per_launch_us;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < launches_per_rep; ++i) empty_kernel<<<1, 1, 0, stream>>>();
    CHECK_CUDA(cudaStreamSynchronize(stream));
    const auto t1 = std::chrono::steady_clock::now();
    per_launch_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / launches_per_rep);
  }
  CHECK_CUDA(cudaGetLastError());
  thread.current = kscope::detail::root_node;

  const std::uint64_t expected = static_cast<std::uint64_t>(warmup_launches) + std::uint64_t{reps} * launches_per_rep;
  std::uint64_t seen = 0;
  if (mode == "raw_cupti") {
    (void)raw_api.activity_flush_all(0);
    seen = raw_kernels;
  } else if (kscope_mode) {
    collector.flush();
    auto snap = collector.snapshot();
    if (const auto* n = snap.activity.find(bench_node)) seen = n->kernel_count;
    for (const auto& w : snap.warnings) std::fprintf(stderr, "[%s] warning: %s\n", mode.c_str(), w.c_str());
  }
  std::printf("RESULT %s", mode.c_str());
  for (double v : per_launch_us) std::printf(" %.4f", v);
  std::printf(" seen=%llu expected=%llu\n", static_cast<unsigned long long>(seen),
              static_cast<unsigned long long>(mode == "none" ? 0 : expected));
  CHECK_CUDA(cudaStreamDestroy(stream));
  return 0;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "--child") == 0) return run_child(argv[2]);

  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device\n");
    return 0;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  char self[4096] = {};
  const ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) {
    std::fprintf(stderr, "cannot find my own executable\n");
    return 2;
  }
  std::map<std::string, std::vector<double>> samples;
  std::map<std::string, std::string> attribution;
  for (int round = 0; round < rounds; ++round) {
    for (const char* mode : modes) {
      const std::string command = std::string("'") + self + "' --child " + mode;
      FILE* child = popen(command.c_str(), "r");
      if (child == nullptr) continue;
      char line[8192];
      while (std::fgets(line, sizeof line, child) != nullptr) {
        if (std::strncmp(line, "RESULT ", 7) != 0) continue;
        char* save = nullptr;
        ::strtok_r(line, " \n", &save);           // RESULT
        ::strtok_r(nullptr, " \n", &save);        // mode
        while (char* tok = ::strtok_r(nullptr, " \n", &save)) {
          if (std::strncmp(tok, "seen=", 5) == 0) {
            attribution[mode] = std::string(tok + 5);
          } else if (std::strncmp(tok, "expected=", 9) == 0) {
            attribution[mode] += "/" + std::string(tok + 9);
          } else if (std::strcmp(tok, "unavailable") == 0) {
            attribution[mode] = "unavailable";
            break;
          } else {
            samples[mode].push_back(std::strtod(tok, nullptr));
          }
        }
      }
      pclose(child);
    }
  }

  std::printf("\nHost cost per empty-kernel launch, %d launches x %d reps x %d rounds per configuration\n",
              launches_per_rep, reps, rounds);
  std::printf("GPU: %s (sm_%d%d); statistic: median over %d repetitions (min in brackets)\n\n", prop.name,
              prop.major, prop.minor, reps * rounds);
  const double none = median(samples["none"]);
  const double raw = median(samples["raw_cupti"]);
  std::printf("| configuration | us/launch | added vs none | vs raw CUPTI | attributed |\n|---|---|---|---|---|\n");
  for (const char* mode : modes) {
    const auto& v = samples[mode];
    if (v.empty()) {
      std::printf("| %s | unavailable | | | %s |\n", mode, attribution[mode].c_str());
      continue;
    }
    const double m = median(v);
    const double lo = *std::min_element(v.begin(), v.end());
    std::printf("| %s | %.3f (%.3f) | %+.3f | %s | %s |\n", mode, m, lo, m - none,
                raw > 0 && std::strncmp(mode, "kscope", 6) == 0
                    ? (std::to_string((m - raw) / raw * 100.0).substr(0, 5) + " %").c_str()
                    : "",
                attribution[mode].c_str());
  }
  if (raw > 0 && none > 0) {
    const double k = median(samples["kscope_callback"]);
    std::printf("\nkscope (default configuration) on top of raw CUPTI: %+.3f us/launch = %+.1f %% of raw CUPTI's "
                "per-launch cost, %+.1f %% of CUPTI's own added cost (target: <= 10 %%)\n",
                k - raw, (k - raw) / raw * 100.0, raw > none ? (k - raw) / (raw - none) * 100.0 : 0.0);
  }
  return 0;
}
