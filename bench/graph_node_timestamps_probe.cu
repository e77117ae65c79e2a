// Are the timestamps of a CUDA-graph replay traced node by node true while graph-level
// trace is toggled around it? (GPU needed; links libcupti.)
//
// Issue 39: with graphs sampled, the first kernel of a node-level replay was reported tens
// to hundreds of milliseconds long and every later kernel of that replay shifted by as
// much, while CUDA events put the whole replay at 2.9 ms. This program replays a graph of
// 50 kernels of known length (each spins 20 us on the global timer: a 1 ms replay) and
// traces every 4th replay node by node, with graph-level trace disabled for that launch:
//   toggle_in_callback   disabled at the launch's API enter, enabled at its API exit
//                        (what kscope's collector did)
//   toggle_after_sync    disabled before the launch and enabled after the stream drained,
//                        outside any callback
//   node_only            graph-level trace never enabled (the control)
// each with CUPTI's own clock and with a timestamp callback (steady_clock), each with the
// host synchronizing after every replay and with the host running ahead. Per node-level
// replay: its first kernel's length and its span, which must be ~20 us and ~1 ms.
//
//   nvcc -O2 -arch=sm_90 bench/graph_node_timestamps_probe.cu -lcupti -o graph_ts
//   ./graph_ts      # every variant, each in its own process
#include <cupti.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

#define CHECK_CUDA(call)                                                                                \
  do {                                                                                                  \
    cudaError_t e_ = (call);                                                                            \
    if (e_ != cudaSuccess) {                                                                            \
      std::fprintf(stderr, "%s:%d %s failed: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(2);                                                                                     \
    }                                                                                                   \
  } while (0)

constexpr int nodes = 50;
constexpr int replays = 40;
constexpr int every = 4;  // replays 1, 5, 9, ... traced node by node (the toggled ones)

__global__ void spin_kernel(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

struct kernel_time {
  unsigned long long start, end;
};
std::mutex records_mutex;
std::map<unsigned, std::vector<kernel_time>> graph_kernels;  // by correlation id
std::map<unsigned, kernel_time> graph_records;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 8u << 20;
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  std::lock_guard<std::mutex> lock(records_mutex);
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      if (k->graphId != 0) graph_kernels[k->correlationId].push_back({k->start, k->end});
    } else if (record->kind == CUPTI_ACTIVITY_KIND_GRAPH_TRACE) {
      const auto* g = reinterpret_cast<const CUpti_ActivityGraphTrace2*>(record);
      graph_records[g->correlationId] = {g->start, g->end};
    }
  }
  free(buffer);
}

uint64_t CUPTIAPI steady_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

bool toggle_in_callback = false;
std::atomic<long> launches{0};

void CUPTIAPI on_api(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (!toggle_in_callback || domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  if (cbid != CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch && cbid != CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  static thread_local bool toggled = false;
  if (cb->callbackSite == CUPTI_API_ENTER) {
    const long n = launches.fetch_add(1);
    if (n % every == 0) {
      cuptiActivityDisable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
      toggled = true;
    }
  } else if (toggled) {
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
    toggled = false;
  }
}

int run(const std::string& strategy, bool clock_callback, bool sync_each) {
  CHECK_CUDA(cudaFree(nullptr));
  if (clock_callback) cuptiActivityRegisterTimestampCallback(steady_ns);
  cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  const bool graph_trace = strategy != "node_only";
  if (graph_trace && cuptiActivityEnable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE) != CUPTI_SUCCESS) return 3;
  CUpti_SubscriberHandle subscriber{};
  toggle_in_callback = strategy == "toggle_in_callback";
  if (toggle_in_callback) {
    cuptiSubscribe(&subscriber, on_api, nullptr);
    cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch);
    cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz);
  }
  cudaStream_t stream{};
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph{};
  cudaGraphExec_t exec{};
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < nodes; ++i) spin_kernel<<<1, 32, 0, stream>>>(20'000);
  CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int r = 0; r < replays; ++r) {
    const bool node_level = r % every == 0;
    if (strategy == "toggle_after_sync" && node_level) {
      CHECK_CUDA(cudaStreamSynchronize(stream));
      cuptiActivityDisable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
    }
    CHECK_CUDA(cudaGraphLaunch(exec, stream));
    if (strategy == "toggle_after_sync" && node_level) {
      CHECK_CUDA(cudaStreamSynchronize(stream));
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
    }
    if (sync_each) CHECK_CUDA(cudaStreamSynchronize(stream));
  }
  CHECK_CUDA(cudaStreamSynchronize(stream));
  cuptiActivityFlushAll(1);
  std::lock_guard<std::mutex> lock(records_mutex);
  std::printf("%-20s clock %-8s host %-9s: %zu node-level replays, %zu graph records\n", strategy.c_str(),
              clock_callback ? "steady" : "cupti", sync_each ? "syncs" : "runs ahead", graph_kernels.size(),
              graph_records.size());
  int bad = 0;
  for (auto& [corr, ks] : graph_kernels) {
    std::sort(ks.begin(), ks.end(), [](const kernel_time& a, const kernel_time& b) { return a.start < b.start; });
    const double first_us = (ks.front().end - ks.front().start) / 1e3;
    const double span_us = (ks.back().end - ks.front().start) / 1e3;
    double max_us = 0;
    for (const kernel_time& k : ks) max_us = std::max(max_us, (k.end - k.start) / 1e3);
    const bool wrong = max_us > 100 || span_us > 3000;
    bad += wrong;
    std::printf("    corr %5u: %zu kernels, first %.1f us, longest %.1f us, span %.1f us%s\n", corr, ks.size(), first_us,
                max_us, span_us, wrong ? "   <-- impossible (each kernel spins 20 us)" : "");
  }
  double gmin = 1e18, gmax = 0;
  for (auto& [corr, g] : graph_records) {
    gmin = std::min(gmin, (g.end - g.start) / 1e3);
    gmax = std::max(gmax, (g.end - g.start) / 1e3);
  }
  if (!graph_records.empty()) std::printf("    graph records: span %.1f .. %.1f us\n", gmin, gmax);
  std::printf("    => %d of %zu node-level replays impossible\n", bad, graph_kernels.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4) return run(argv[1], std::string(argv[2]) == "steady", std::string(argv[3]) == "sync");
  for (const char* strategy : {"toggle_in_callback", "toggle_after_sync", "node_only"})
    for (const char* clock : {"cupti", "steady"})
      for (const char* sync : {"sync", "ahead"}) {
        std::fflush(stdout);
        const pid_t pid = fork();
        if (pid == 0) {
          execl("/proc/self/exe", argv[0], strategy, clock, sync, static_cast<char*>(nullptr));
          _exit(127);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) std::printf("  (%s %s %s failed)\n", strategy, clock, sync);
      }
  return 0;
}
