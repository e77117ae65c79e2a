// What CUPTI's graph-level trace allows, and what it costs (GPU needed; links libcupti).
//
// The collector's graph mode (activity/collector.hpp, issue 26) rests on four facts this
// program establishes on the machine it runs on, before the library relies on them:
//   1. CUPTI_ACTIVITY_KIND_GRAPH_TRACE can be enabled together with CONCURRENT_KERNEL, and
//      then a graph launch gives one graph record (its correlation id is the launch's) and
//      no kernel records, while eager launches still give kernel records.
//   2. Disabling GRAPH_TRACE for one launch (outside a callback, and inside the launch's
//      own API-enter callback) makes that launch traced node by node.
//   3. What enabling / disabling GRAPH_TRACE costs (µs per call).
//   4. Host + GPU time per replay of a graph of small kernels, and per eager launch, with
//      no CUPTI, kernel activity, kernel + graph trace, and kernel + graph trace with every
//      k-th replay traced node by node (each mode in its own child process: CUPTI's state
//      is process-wide).
//
//   nvcc -O2 -arch=sm_90 bench/cupti_graph_trace_probe.cu -lcupti -o graph_trace_probe
//   ./graph_trace_probe            # facts 1-3, then the timing table of 4
#include <cupti.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <unistd.h>
#include <sys/wait.h>

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

#define CHECK_CUDA(call)                                                                              \
  do {                                                                                                \
    cudaError_t e_ = (call);                                                                          \
    if (e_ != cudaSuccess) {                                                                          \
      std::fprintf(stderr, "%s:%d %s failed: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(2);                                                                                   \
    }                                                                                                 \
  } while (0)

const char* cupti_error(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return s ? s : "?";
}

__global__ void tiny_kernel(float* p, int i) {
  if (threadIdx.x == 0 && blockIdx.x == 0) p[i & 255] += 1.0f;
}

constexpr int graph_nodes = 100;

// ---- record counting ------------------------------------------------------------------
struct counts {
  long eager_kernels = 0, graph_kernels = 0, graph_records = 0, other = 0;
  std::map<unsigned, long> kernels_by_correlation;  // graph kernels per launch
  std::map<unsigned, long> graph_by_correlation;
};
std::mutex counts_mutex;
counts total;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 8u << 20;
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  std::lock_guard<std::mutex> lock(counts_mutex);
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      if (k->graphId == 0) {
        ++total.eager_kernels;
      } else {
        ++total.graph_kernels;
        ++total.kernels_by_correlation[k->correlationId];
      }
    } else if (record->kind == CUPTI_ACTIVITY_KIND_GRAPH_TRACE) {
      const auto* g = reinterpret_cast<const CUpti_ActivityGraphTrace2*>(record);
      ++total.graph_records;
      ++total.graph_by_correlation[g->correlationId];
    } else {
      ++total.other;
    }
  }
  free(buffer);
}

counts take_counts() {
  cuptiActivityFlushAll(1);
  std::lock_guard<std::mutex> lock(counts_mutex);
  counts c = total;
  total = counts{};
  return c;
}

void print_counts(const char* what, const counts& c) {
  std::printf("  %-58s eager kernels %ld, graph kernels %ld (%zu launches), graph records %ld (%zu launches)\n", what,
              c.eager_kernels, c.graph_kernels, c.kernels_by_correlation.size(), c.graph_records,
              c.graph_by_correlation.size());
}

// ---- the work -------------------------------------------------------------------------
struct work {
  cudaStream_t stream{};
  float* data = nullptr;
  cudaGraphExec_t exec{};
  void init() {
    CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CHECK_CUDA(cudaMalloc(&data, 256 * sizeof(float)));
    cudaGraph_t graph{};
    CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < graph_nodes; ++i) tiny_kernel<<<1, 32, 0, stream>>>(data, i);
    CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
    CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    CHECK_CUDA(cudaGraphDestroy(graph));
  }
  void eager(int n) {
    for (int i = 0; i < n; ++i) tiny_kernel<<<1, 32, 0, stream>>>(data, i);
  }
  void replay(int n) {
    for (int i = 0; i < n; ++i) CHECK_CUDA(cudaGraphLaunch(exec, stream));
  }
  void sync() { CHECK_CUDA(cudaStreamSynchronize(stream)); }
};

// ---- toggling inside the launch's callback ----------------------------------------------
std::atomic<int> node_level_requests{0};  // > 0: the next graph launches are traced per node
std::atomic<long> launches_seen{0};
int sample_every = 0;                      // timing child: every k-th replay per node
std::atomic<long> toggle_failures{0};

void CUPTIAPI on_api(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  if (cbid != CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch && cbid != CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  static thread_local bool toggled = false;
  if (cb->callbackSite == CUPTI_API_ENTER) {
    const long n = launches_seen.fetch_add(1) + 1;
    bool node_level = false;
    if (sample_every > 0) node_level = n % sample_every == 1;
    else if (node_level_requests.load() > 0) node_level = node_level_requests.fetch_sub(1) > 0;
    if (node_level) {
      if (cuptiActivityDisable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE) != CUPTI_SUCCESS) ++toggle_failures;
      toggled = true;
    }
  } else if (toggled) {
    if (cuptiActivityEnable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE) != CUPTI_SUCCESS) ++toggle_failures;
    toggled = false;
  }
}

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Each fact runs in its own process (--fact N), so a crash in one (CUPTI refusing a
// call inside a callback, say) is reported as that fact's outcome and the others still run.
int facts(const std::string& which) {
  work w;
  // Where CUDA's state comes from relative to CUPTI's start: "0" builds the context and
  // the graph before CUPTI (a graph instantiated before graph-level tracing began), "1c"
  // starts CUPTI before any CUDA call, the others create the context first and the graph
  // after CUPTI started (what a collector started early in main sees).
  if (which == "0") w.init();
  else if (which != "1c") CHECK_CUDA(cudaFree(nullptr));
  CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  std::printf("register buffers: %s\n", cupti_error(r));
  r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  std::printf("enable CONCURRENT_KERNEL: %s\n", cupti_error(r));
  r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
  std::printf("enable GRAPH_TRACE with it: %s\n", cupti_error(r));
  if (r != CUPTI_SUCCESS) return 1;
  if (which != "0") w.init();

  if (which == "2b") goto inside_callback;
  {
  std::printf("fact 1: both kinds on\n");
  w.eager(graph_nodes);
  w.replay(3);
  w.sync();
  print_counts("100 eager launches + 3 replays of a 100-node graph", take_counts());

  std::printf("fact 2a: GRAPH_TRACE disabled around one launch, outside any callback\n");
  double t0 = now_us();
  r = cuptiActivityDisable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
  double t1 = now_us();
  w.replay(1);
  double t2 = now_us();
  CUptiResult r2 = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
  double t3 = now_us();
  w.replay(1);
  w.sync();
  std::printf("  disable: %s (%.1f us), enable: %s (%.1f us)\n", cupti_error(r), t1 - t0, cupti_error(r2), t3 - t2);
  print_counts("replay with GRAPH_TRACE off, then one with it on", take_counts());

  // Toggle cost over many calls.
  double best_disable = 1e30, best_enable = 1e30, sum = 0;
  constexpr int toggles = 200;
  for (int i = 0; i < toggles; ++i) {
    const double a = now_us();
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
    const double b = now_us();
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
    const double c = now_us();
    best_disable = std::min(best_disable, b - a);
    best_enable = std::min(best_enable, c - b);
    sum += c - a;
  }
  std::printf("fact 3: disable+enable GRAPH_TRACE: mean %.2f us per pair (best disable %.2f, best enable %.2f)\n",
              sum / toggles, best_disable, best_enable);

  }
  return 0;
inside_callback:
  std::printf("fact 2b: GRAPH_TRACE disabled inside cuGraphLaunch's API-enter callback (launches 2 and 4 of 4)\n");
  CUpti_SubscriberHandle subscriber{};
  r = cuptiSubscribe(&subscriber, on_api, nullptr);
  std::printf("  subscribe: %s\n", cupti_error(r));
  cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch);
  cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz);
  w.replay(1);
  node_level_requests = 1;
  w.replay(1);
  w.replay(1);
  node_level_requests = 1;
  w.replay(1);
  w.sync();
  const counts c = take_counts();
  print_counts("4 replays, launches 2 and 4 per node", c);
  std::printf("  node-level launches with %d kernels each:", graph_nodes);
  for (const auto& [id, n] : c.kernels_by_correlation) std::printf(" corr %u: %ld", id, n);
  std::printf("\n  graph-level launches:");
  for (const auto& [id, n] : c.graph_by_correlation) std::printf(" corr %u", id);
  std::printf("\n  toggle failures inside the callback: %ld\n", toggle_failures.load());
  cuptiUnsubscribe(subscriber);
  return 0;
}

// ---- timing children --------------------------------------------------------------------
int child(const std::string& mode) {
  work w;
  CHECK_CUDA(cudaFree(nullptr));
  if (mode != "none") {
    cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (mode != "kernel") cuptiActivityEnable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
    if (mode.rfind("graph_sampled", 0) == 0) {
      sample_every = std::atoi(mode.c_str() + std::strlen("graph_sampled"));
      CUpti_SubscriberHandle subscriber{};
      cuptiSubscribe(&subscriber, on_api, nullptr);
      cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch);
      cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz);
    }
  }
  w.init();  // after CUPTI started (fact 0: a graph instantiated before it)
  w.replay(50);
  w.eager(2000);
  w.sync();
  constexpr int replays = 2000, launches = 50000;
  std::vector<double> per_replay, per_launch;
  for (int rep = 0; rep < 5; ++rep) {
    double a = now_us();
    w.replay(replays);
    w.sync();
    double b = now_us();
    w.eager(launches);
    w.sync();
    double c = now_us();
    per_replay.push_back((b - a) / replays);
    per_launch.push_back((c - b) / launches);
  }
  std::sort(per_replay.begin(), per_replay.end());
  std::sort(per_launch.begin(), per_launch.end());
  const counts k = mode == "none" ? counts{} : take_counts();
  std::printf("%s %.3f %.4f %ld %ld %ld\n", mode.c_str(), per_replay[2], per_launch[2], k.graph_kernels,
              k.graph_records, k.eager_kernels);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);  // a crash must not take the lines printed before it
  if (argc == 3 && std::string(argv[1]) == "--child") return child(argv[2]);
  if (argc == 3 && std::string(argv[1]) == "--fact") return facts(argv[2]);
  for (const char* which : {"1", "1c", "2b", "0"}) {
    const std::string cmd = std::string(argv[0]) + " --fact " + which + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) continue;
    char line[1024];
    while (std::fgets(line, sizeof line, p)) std::fputs(line, stdout);
    const int status = pclose(p);
    std::printf("(facts %s: exit status %d%s)\n", which, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                WIFSIGNALED(status) ? ", killed by a signal" : "");
  }
  // Timing: each mode in its own process, three rounds in rotation.
  const std::vector<std::string> modes = {"none", "kernel", "graph", "graph_sampled50", "graph_sampled10"};
  std::map<std::string, std::vector<double>> replay_us, launch_us;
  std::map<std::string, std::string> records;
  for (int round = 0; round < 3; ++round) {
    for (const std::string& m : modes) {
      const std::string cmd = std::string(argv[0]) + " --child " + m;
      FILE* p = popen(cmd.c_str(), "r");
      if (!p) continue;
      char line[512] = {};
      if (std::fgets(line, sizeof line, p)) {
        char name[64] = {};
        double r = 0, l = 0;
        long gk = 0, gr = 0, ek = 0;
        if (std::sscanf(line, "%63s %lf %lf %ld %ld %ld", name, &r, &l, &gk, &gr, &ek) == 6) {
          replay_us[m].push_back(r);
          launch_us[m].push_back(l);
          records[m] = std::to_string(gk) + " graph kernels, " + std::to_string(gr) + " graph records, " +
                       std::to_string(ek) + " eager kernels";
        }
      }
      pclose(p);
    }
  }
  std::printf("fact 4: medians over 3 processes x 5 repetitions (median of each process's 5)\n");
  std::printf("  %-18s %14s %14s  %s\n", "mode", "us / replay", "us / launch", "records (last process)");
  for (const std::string& m : modes) {
    auto& r = replay_us[m];
    auto& l = launch_us[m];
    if (r.empty()) continue;
    std::sort(r.begin(), r.end());
    std::sort(l.begin(), l.end());
    std::printf("  %-18s %8.3f [%5.1f-%5.1f] %8.4f  %s\n", m.c_str(), r[r.size() / 2], r.front(), r.back(),
                l[l.size() / 2], records[m].c_str());
  }
  std::printf("  (a replay is %d tiny kernels; 'us / launch' is an eager <<<>>> launch of the same kernel)\n",
              graph_nodes);
  return 0;
}
