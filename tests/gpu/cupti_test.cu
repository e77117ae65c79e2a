// GPU cases for the CUPTI collector (run on the lent H200; skipped without a device).
//
// Every kernel must land on the scope node open on its launching thread at launch time:
// 4 threads x 2 streams x nested scopes x 1000 kernels, a CUDA graph launched 10 times, a
// cuBLAS GEMM, a driver-API launch, copies and memsets; timestamps on kscope's clock. A
// graph captured in one real scope and replayed in another shows, in the session report,
// which scope built its kernels (runs last: it uses the session and real scopes).
// Scopes are set through a tiny RAII helper that does what kscope::scope does for
// attribution (sets detail::this_thread_state().current), so node ids are known here.
// The collector, CUPTI's graph-level trace and cuBLAS are expected wherever
// tests/gpu/expectations.hpp says so: a collector that does not start, a graph traced only
// node by node, or cuBLAS that does not load fails there.
#include <kscope/activity/collector.hpp>
#include <kscope/scope/scope.hpp>
#include <kscope/session/session.hpp>

#include <doctest/doctest.h>

#include "expectations.hpp"

#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

#define REQUIRE_CUDA(call) REQUIRE_MESSAGE((call) == cudaSuccess, #call)

class test_scope {
 public:
  explicit test_scope(kscope::node_id node) : saved_(kscope::detail::this_thread_state().current) {
    kscope::detail::this_thread_state().current = node;
  }
  ~test_scope() { kscope::detail::this_thread_state().current = saved_; }
  test_scope(const test_scope&) = delete;
  test_scope& operator=(const test_scope&) = delete;

 private:
  kscope::node_id saved_;
};

__global__ void tag_kernel(int* out, int value) {
  if (threadIdx.x == 0 && out != nullptr) out[blockIdx.x] = value;
}
__global__ void graph_step_a(float* x) { x[threadIdx.x] += 1.0f; }
__global__ void graph_step_b(float* x) { x[threadIdx.x] *= 2.0f; }
__global__ void graph_step_c(float* x) { x[threadIdx.x] -= 1.0f; }

// A non-blocking stream and the 256 floats the step graphs work on, released at scope exit
// (a failed REQUIRE included).
struct graph_workspace {
  cudaStream_t stream = nullptr;
  float* x = nullptr;
  graph_workspace() {
    REQUIRE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    REQUIRE_CUDA(cudaMalloc(&x, 256 * sizeof(float)));
  }
  ~graph_workspace() {
    cudaFree(x);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
  graph_workspace(const graph_workspace&) = delete;
  graph_workspace& operator=(const graph_workspace&) = delete;
};

// A graph of graph_step_a, graph_step_b and (when `kernels` is 3) graph_step_c on `x`,
// captured on `stream` and instantiated.
struct step_graph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
};
step_graph capture_step_graph(cudaStream_t stream, float* x, int kernels) {
  step_graph g;
  REQUIRE_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  graph_step_a<<<1, 256, 0, stream>>>(x);
  graph_step_b<<<1, 256, 0, stream>>>(x);
  if (kernels == 3) graph_step_c<<<1, 256, 0, stream>>>(x);
  REQUIRE_CUDA(cudaStreamEndCapture(stream, &g.graph));
  REQUIRE_CUDA(cudaGraphInstantiate(&g.exec, g.graph, 0));
  return g;
}
__global__ void spin_ns(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}
__global__ void driver_launched(int* out) { out[0] = 42; }

kscope::cupti_collector& collector() {
  auto& c = kscope::cupti_collector::global();
  static const bool started = [&c] {
    const bool ok = c.start();
    MESSAGE("collector: " << c.status().message);
    return ok;
  }();
  if (!started)
    kscope_test::refused(kscope_test::feature::activity, "cupti_collector::start",
                         kscope::to_string(c.status().state), c.status().message, __FILE__, __LINE__);
  REQUIRE_MESSAGE(started, "CUPTI collector did not start: " << c.status().message);
  return c;
}

kscope::cupti_snapshot flushed_snapshot() {
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  auto& c = collector();
  c.flush();
  return c.snapshot(200);
}

std::uint64_t kernels_of(const kscope::cupti_snapshot& s, kscope::node_id node) {
  const auto* n = s.activity.find(node);
  return n != nullptr ? n->kernel_count : 0;
}

}  // namespace

TEST_CASE("4 threads x 2 streams x nested scopes x 1000 kernels: all attributed exactly") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::activity);
  auto& c = collector();
  (void)c;
  constexpr int threads = 4;
  constexpr int kernels_per_thread = 1000;
  int* scratch = nullptr;
  REQUIRE_CUDA(cudaMalloc(&scratch, 1024 * sizeof(int)));

  std::vector<std::map<kscope::node_id, std::uint64_t>> expected(threads);
  std::atomic<int> failures{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      cudaStream_t streams[2];
      for (auto& s : streams) {
        if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) failures++;
      }
      const kscope::node_id outer = static_cast<kscope::node_id>(1000 + 100 * t);
      test_scope outer_scope(outer);
      for (int i = 0; i < kernels_per_thread; ++i) {
        const int s = i % 2;
        kscope::node_id node = outer;
        if (i % 3 == 0) {
          tag_kernel<<<1, 32, 0, streams[s]>>>(scratch, i);  // from the outer scope itself
        } else {
          node = static_cast<kscope::node_id>(outer + 1 + s);
          test_scope inner(node);
          if (i % 3 == 1) {
            tag_kernel<<<1, 32, 0, streams[s]>>>(scratch, i);
          } else {
            node = static_cast<kscope::node_id>(outer + 10 + s);
            test_scope innermost(node);
            tag_kernel<<<2, 64, 0, streams[s]>>>(scratch, i);
          }
        }
        ++expected[t][node];
      }
      for (auto& s : streams) {
        if (cudaStreamSynchronize(s) != cudaSuccess) failures++;
        cudaStreamDestroy(s);
      }
    });
  }
  for (auto& th : pool) th.join();
  REQUIRE(failures.load() == 0);

  const auto snap = flushed_snapshot();
  std::uint64_t total = 0;
  for (int t = 0; t < threads; ++t) {
    for (const auto& entry : expected[t]) {
      const kscope::node_id node = entry.first;
      CHECK_MESSAGE(kernels_of(snap, node) == entry.second, "node " << node);
      total += kernels_of(snap, node);
    }
    // Exclusive attribution: the outer node only has the kernels launched from itself.
    CHECK(kernels_of(snap, static_cast<kscope::node_id>(1000 + 100 * t)) == expected[t][1000 + 100 * t]);
  }
  CHECK(total == threads * kernels_per_thread);
  CHECK(snap.activity.counters.unattributed == 0);
  CHECK(snap.activity.counters.dropped_by_cupti == 0);
  CHECK(snap.activity.counters.dropped_zero_start == 0);
  CHECK(snap.activity.counters.dropped_end_before_start == 0);
  // Two streams per thread: kernels of one node span them, so busy <= sum of durations.
  const auto* n = snap.activity.find(1000 + 1);
  REQUIRE(n != nullptr);
  CHECK(n->busy_ns > 0);
  CHECK(n->busy_ns <= n->kernel_ns);
  REQUIRE_CUDA(cudaFree(scratch));
}

TEST_CASE("a 3-kernel CUDA graph launched 10 times: 30 kernels in its node, graph ids kept") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::activity);
  auto& c = collector();
  const graph_workspace workspace;
  cudaStream_t stream = workspace.stream;
  float* x = workspace.x;
  const auto [graph, exec] = capture_step_graph(stream, x, 3);
  constexpr kscope::node_id graph_node = 5000;
  {
    test_scope s(graph_node);
    for (int i = 0; i < 10; ++i) REQUIRE_CUDA(cudaGraphLaunch(exec, stream));
  }
  REQUIRE_CUDA(cudaStreamSynchronize(stream));
  const auto snap = flushed_snapshot();
  CHECK(kernels_of(snap, graph_node) == 30);
  std::set<std::uint32_t> graph_ids;
  std::set<std::uint64_t> graph_nodes;
  std::set<std::uint32_t> correlations;
  std::size_t graph_level = 0;
  for (const auto& e : snap.activity.recent) {
    if (e.node != graph_node) continue;
    graph_ids.insert(e.graph_id);
    correlations.insert(e.correlation_id);
    // Replays traced as one record (graph sampling) carry no node of the graph.
    if (e.kind == kscope::activity_kind::graph) ++graph_level;
    else graph_nodes.insert(e.graph_node_id);
  }
  CHECK(graph_ids.size() == 1);
  CHECK(*graph_ids.begin() != 0);
  CHECK(graph_nodes.size() == 3);
  MESSAGE(graph_level << " of 10 replays traced as one record");
  CHECK(correlations.size() == 10);  // one per graph launch, shared by its 3 kernels
  // Graph-level trace where it is expected: the default (sampled) traces each graph's first
  // replays node by node and the others as one record each.
  if (kscope_test::needs(kscope_test::feature::graph_trace)) {
    const std::string status = c.status().message;
    CHECK_MESSAGE(status.find("graphs sampled") != std::string::npos, status);
    CHECK_MESSAGE(graph_level > 0, "no replay traced as one record; collector: " << status);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST_CASE("a cuBLAS GEMM inside a scope is attributed to it") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::activity);
  auto& c = collector();
  (void)c;
  void* lib = nullptr;
  for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
    if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
  }
#ifdef KSCOPE_CUDA_LIBRARY_DIR
  if (lib == nullptr) lib = dlopen(KSCOPE_CUDA_LIBRARY_DIR "/libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
#endif
  if (lib == nullptr) {
    const char* why = dlerror();
    KSCOPE_TEST_REFUSED(kscope_test::feature::cublas, "dlopen(libcublas.so.13, .12, .so)", "not found",
                        std::string(why != nullptr ? why : "no dlopen error text"));
  }
  auto create = reinterpret_cast<decltype(&cublasCreate_v2)>(dlsym(lib, "cublasCreate_v2"));
  auto destroy = reinterpret_cast<decltype(&cublasDestroy_v2)>(dlsym(lib, "cublasDestroy_v2"));
  auto set_stream = reinterpret_cast<decltype(&cublasSetStream_v2)>(dlsym(lib, "cublasSetStream_v2"));
  auto sgemm = reinterpret_cast<decltype(&cublasSgemm_v2)>(dlsym(lib, "cublasSgemm_v2"));
  REQUIRE_UNARY(create != nullptr);
  REQUIRE_UNARY(sgemm != nullptr && destroy != nullptr && set_stream != nullptr);
  cublasHandle_t handle = nullptr;
  REQUIRE(create(&handle) == CUBLAS_STATUS_SUCCESS);
  cudaStream_t stream;
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  REQUIRE(set_stream(handle, stream) == CUBLAS_STATUS_SUCCESS);
  constexpr int n = 1024;
  float *a = nullptr, *b = nullptr, *d = nullptr;
  REQUIRE_CUDA(cudaMalloc(&a, sizeof(float) * n * n));
  REQUIRE_CUDA(cudaMalloc(&b, sizeof(float) * n * n));
  REQUIRE_CUDA(cudaMalloc(&d, sizeof(float) * n * n));
  REQUIRE_CUDA(cudaMemsetAsync(a, 0, sizeof(float) * n * n, stream));
  REQUIRE_CUDA(cudaMemsetAsync(b, 0, sizeof(float) * n * n, stream));
  REQUIRE_CUDA(cudaStreamSynchronize(stream));
  const float one = 1.0f, zero = 0.0f;
  constexpr kscope::node_id gemm_node = 6000;
  {
    test_scope s(gemm_node);
    for (int i = 0; i < 3; ++i) {
      REQUIRE(sgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, d, n) ==
              CUBLAS_STATUS_SUCCESS);
    }
  }
  REQUIRE_CUDA(cudaStreamSynchronize(stream));
  const auto snap = flushed_snapshot();
  const std::uint64_t gemm_kernels = kernels_of(snap, gemm_node);
  CHECK(gemm_kernels >= 3);
  bool saw_gemm_name = false;
  for (const auto& e : snap.activity.recent) {
    if (e.node != gemm_node || e.kind != kscope::activity_kind::kernel) continue;
    std::string name(e.name);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    saw_gemm_name = saw_gemm_name || name.find("gemm") != std::string::npos;
    MESSAGE("cuBLAS kernel: " << std::string(e.name));
  }
  CHECK(saw_gemm_name);
  destroy(handle);
  cudaFree(a);
  cudaFree(b);
  cudaFree(d);
  cudaStreamDestroy(stream);
}

TEST_CASE("a driver-API launch (cuLaunchKernel) is attributed through the driver callback") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::activity);
  auto& c = collector();
  (void)c;
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  REQUIRE_CUDA(cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fn, 12000, cudaEnableDefault, &found));
  REQUIRE(found == cudaDriverEntryPointSuccess);
  auto launch = reinterpret_cast<decltype(&cuLaunchKernel)>(fn);
  cudaFunction_t function = nullptr;
  REQUIRE_CUDA(cudaGetFuncBySymbol(&function, reinterpret_cast<const void*>(&driver_launched)));
  int* out = nullptr;
  REQUIRE_CUDA(cudaMalloc(&out, sizeof(int)));
  cudaStream_t stream;
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  constexpr kscope::node_id driver_node = 7000;
  {
    test_scope s(driver_node);
    void* args[] = {&out};
    for (int i = 0; i < 5; ++i) {
      REQUIRE(launch(reinterpret_cast<CUfunction>(function), 1, 1, 1, 1, 1, 1, 0,
                     reinterpret_cast<CUstream>(stream), args, nullptr) == CUDA_SUCCESS);
    }
  }
  REQUIRE_CUDA(cudaStreamSynchronize(stream));
  const auto snap = flushed_snapshot();
  CHECK(kernels_of(snap, driver_node) == 5);
  cudaFree(out);
  cudaStreamDestroy(stream);
}

TEST_CASE("copies and memsets: directions and bytes per node") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::activity);
  auto& c = collector();
  (void)c;
  constexpr std::size_t bytes = 1 << 20;
  void *host = nullptr, *dev_a = nullptr, *dev_b = nullptr;
  REQUIRE_CUDA(cudaMallocHost(&host, bytes));
  REQUIRE_CUDA(cudaMalloc(&dev_a, bytes));
  REQUIRE_CUDA(cudaMalloc(&dev_b, bytes));
  cudaStream_t stream;
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  constexpr kscope::node_id copy_node = 8000;
  {
    test_scope s(copy_node);
    REQUIRE_CUDA(cudaMemcpyAsync(dev_a, host, bytes, cudaMemcpyHostToDevice, stream));
    REQUIRE_CUDA(cudaMemcpyAsync(dev_b, dev_a, bytes, cudaMemcpyDeviceToDevice, stream));
    REQUIRE_CUDA(cudaMemcpyAsync(host, dev_b, bytes, cudaMemcpyDeviceToHost, stream));
    REQUIRE_CUDA(cudaMemsetAsync(dev_a, 0, bytes, stream));
  }
  REQUIRE_CUDA(cudaStreamSynchronize(stream));
  const auto snap = flushed_snapshot();
  const auto* n = snap.activity.find(copy_node);
  REQUIRE(n != nullptr);
  using d = kscope::copy_direction;
  CHECK(n->copies(d::h2d).count == 1);
  CHECK(n->copies(d::h2d).bytes == bytes);
  CHECK(n->copies(d::d2h).count == 1);
  CHECK(n->copies(d::d2h).bytes == bytes);
  CHECK(n->copies(d::d2d).bytes == bytes);  // may be a copy engine or a copy kernel
  CHECK(n->memset.count == 1);
  CHECK(n->memset.bytes == bytes);
  cudaFreeHost(host);
  cudaFree(dev_a);
  cudaFree(dev_b);
  cudaStreamDestroy(stream);
}

TEST_CASE("synchronizes: the host's waits go to the scope that called them, with their length") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::activity);
  auto& c = collector();
  (void)c;
  cudaStream_t stream;
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t done;
  REQUIRE_CUDA(cudaEventCreate(&done));
  constexpr kscope::node_id sync_node = 8100, quiet_node = 8101;
  constexpr unsigned long long spin = 2'000'000;  // 2 ms: each synchronize waits for it
  {
    test_scope s(sync_node);
    spin_ns<<<1, 1, 0, stream>>>(spin);
    REQUIRE_CUDA(cudaStreamSynchronize(stream));
    spin_ns<<<1, 1, 0, stream>>>(spin);
    REQUIRE_CUDA(cudaEventRecord(done, stream));
    REQUIRE_CUDA(cudaEventSynchronize(done));
    spin_ns<<<1, 1, 0, stream>>>(spin);
    REQUIRE_CUDA(cudaDeviceSynchronize());
  }
  {
    test_scope s(quiet_node);
    spin_ns<<<1, 1, 0, stream>>>(1000);
  }
  const auto snap = flushed_snapshot();
  MESSAGE("sync records: " << snap.activity.counters.sync_records);
  const auto* n = snap.activity.find(sync_node);
  REQUIRE(n != nullptr);
  MESSAGE("host_sync: count " << n->host_sync.count << ", ns " << n->host_sync.ns << " (stream " << n->host_sync.stream
                              << ", event " << n->host_sync.event << ", context " << n->host_sync.context << ")");
  CHECK(n->host_sync.count == 3);
  CHECK(n->host_sync.stream == 1);
  CHECK(n->host_sync.event == 1);
  CHECK(n->host_sync.context == 1);
  // Each waited for most of a spin: the kernel starts while the host is still on its way to
  // the synchronize (under CUPTI's launch callbacks that took up to 0.6 ms of 2 on an H100).
  CHECK(n->host_sync.ns >= static_cast<std::int64_t>(3 * spin * 6 / 10));
  const auto* quiet = snap.activity.find(quiet_node);
  REQUIRE(quiet != nullptr);
  CHECK(quiet->host_sync.count == 0);  // flushed_snapshot's synchronize runs outside every scope
  cudaEventDestroy(done);
  cudaStreamDestroy(stream);
}

TEST_CASE("GPU timestamps are on kscope's clock: a kernel lies inside its host interval") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::activity);
  auto& c = collector();
  MESSAGE("clock: " << std::string(kscope::to_string(c.status().clock)));
  cudaStream_t stream;
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  constexpr kscope::node_id clock_node = 9000;
  std::int64_t open_ns = 0, close_ns = 0;
  {
    test_scope s(clock_node);
    open_ns = kscope::detail::now_ns();
    spin_ns<<<1, 1, 0, stream>>>(100000);  // 100 us
    REQUIRE_CUDA(cudaStreamSynchronize(stream));
    close_ns = kscope::detail::now_ns();
  }
  const auto snap = flushed_snapshot();
  const auto* n = snap.activity.find(clock_node);
  REQUIRE(n != nullptr);
  REQUIRE(n->kernel_count == 1);
  // Interpolated GPU timestamps: allow 20 us of slack at each end.
  CHECK(n->first_start_ns >= open_ns - 20000);
  CHECK(n->last_end_ns <= close_ns + 20000);
  CHECK(n->last_end_ns - n->first_start_ns >= 95000);
  CHECK(n->last_end_ns - n->first_start_ns <= 150000);
  cudaStreamDestroy(stream);
}

TEST_CASE("top kernels table and status after the runs") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::activity);
  const auto snap = flushed_snapshot();
  REQUIRE_FALSE(snap.activity.top_kernels.empty());
  for (std::size_t i = 1; i < snap.activity.top_kernels.size(); ++i) {
    CHECK(snap.activity.top_kernels[i - 1].total_ns >= snap.activity.top_kernels[i].total_ns);
  }
  bool tag_row = false;
  for (const auto& k : snap.activity.top_kernels) {
    // Demangled names carry their namespace: "(anonymous namespace)::tag_kernel(int*, int)".
    if (k.name.find("tag_kernel(") != std::string::npos) {
      tag_row = true;
      CHECK(k.calls >= 4000);
      CHECK(k.block[0] > 0);
      CHECK(k.median_ns > 0);
    }
  }
  if (!tag_row)
    for (const auto& k : snap.activity.top_kernels) MESSAGE("top kernel: " << k.name << " x" << k.calls);
  CHECK(tag_row);
  CHECK(snap.status.state == kscope::cupti_state::running);
  CHECK(snap.status.callbacks_enabled > 0);
  MESSAGE("buffers completed: " << snap.buffers_completed << ", denied: " << snap.buffers_denied
                                << ", memory held: " << snap.activity.memory_bytes << " bytes");
  for (const auto& w : snap.warnings) MESSAGE("warning: " << w);
}

// Last in the file (doctest runs cases in file order): real scopes and a session report,
// after the cases above have checked the collector's own per-node numbers.
TEST_CASE("a graph captured in scope \"build\" and replayed in \"replay\": the report shows where it was built") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::activity);
  auto& c = kscope::cupti_collector::global();
  if (!c.start())
    KSCOPE_TEST_REFUSED(kscope_test::feature::activity, "cupti_collector::start", kscope::to_string(c.status().state),
                        c.status().message);
  MESSAGE("collector: " << c.status().message);
  REQUIRE_MESSAGE(c.status().graph_capture, "graph-node callbacks not enabled: " << c.status().message);
  const graph_workspace workspace;
  cudaStream_t stream = workspace.stream;
  float* x = workspace.x;
  const std::uint64_t graph_records_before = c.snapshot().activity.counters.graph_records;

  // Two graphs, both captured inside "build" (host scopes: a stream scope would record
  // its CUDA events into the capture). The first is instantiated inside "build", the
  // second inside "instantiate": instantiation clones the nodes, and the clones must
  // still say "build", not where cudaGraphInstantiate ran.
  cudaGraph_t graphs[2];
  cudaGraphExec_t execs[2];
  {
    kscope::scope build{"build"};
    REQUIRE_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    graph_step_a<<<1, 256, 0, stream>>>(x);
    graph_step_b<<<1, 256, 0, stream>>>(x);
    graph_step_c<<<1, 256, 0, stream>>>(x);
    REQUIRE_CUDA(cudaStreamEndCapture(stream, &graphs[0]));
    REQUIRE_CUDA(cudaGraphInstantiate(&execs[0], graphs[0], 0));
    REQUIRE_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    graph_step_a<<<1, 256, 0, stream>>>(x);
    graph_step_c<<<1, 256, 0, stream>>>(x);
    REQUIRE_CUDA(cudaStreamEndCapture(stream, &graphs[1]));
  }
  {
    kscope::scope instantiate{"instantiate"};
    REQUIRE_CUDA(cudaGraphInstantiate(&execs[1], graphs[1], 0));
  }
  constexpr int replays = 3;
  {
    kscope::scope replay{"replay"};
    for (int i = 0; i < replays; ++i) {
      REQUIRE_CUDA(cudaGraphLaunch(execs[0], stream));
      REQUIRE_CUDA(cudaGraphLaunch(execs[1], stream));
    }
  }
  REQUIRE_CUDA(cudaStreamSynchronize(stream));
  const kscope::session_report r = kscope::session::global().report();
  const std::string text = r.text();
  const auto& counters = r.cupti_counters;
  MESSAGE("graph records " << counters.graph_records << " (before this case: " << graph_records_before
                           << "), built elsewhere " << counters.graph_built_elsewhere << ", capture unknown "
                           << counters.graph_capture_unknown);

  const kscope::scope_report* build = r.find("build");
  const kscope::scope_report* replay = r.find("replay");
  REQUIRE(build != nullptr);
  REQUIRE(replay != nullptr);
  REQUIRE(replay->gpu_activity.has_value());
  const kscope::node_gpu_activity& a = *replay->gpu_activity;
  constexpr std::uint64_t kernels = replays * (3 + 2);
  CHECK(a.kernel_count == kernels);  // attribution stays with the launch-time scope
  REQUIRE_MESSAGE(a.graph_capture.size() == 1, text);
  CHECK(a.graph_capture[0].captured_in == build->id);
  CHECK(a.graph_capture[0].kernel_count == kernels);
  CHECK(a.graph_capture[0].kernel_ns > 0);
  CHECK(a.graph_capture[0].kernel_ns <= a.kernel_ns);
  // Records: the node-level replays' kernels (the others are one record per replay, scaled).
  CHECK(counters.graph_records - graph_records_before >= kernels - a.scaled_kernel_count);
  // Building and instantiating run nothing on the GPU.
  const kscope::scope_report* instantiate = r.find("instantiate");
  REQUIRE(instantiate != nullptr);
  CHECK_FALSE(instantiate->gpu_activity.has_value());

  CHECK_MESSAGE(text.find("graph kernels built in: build (" + std::to_string(kernels) + " kernels, ") !=
                    std::string::npos,
                text);
  const std::string json = r.json();
  CHECK(json.find("\"graph_capture\":[{\"captured_in\":\"build\"") != std::string::npos);

  for (int g = 0; g < 2; ++g) {
    cudaGraphExecDestroy(execs[g]);
    cudaGraphDestroy(graphs[g]);
  }
}

// Tracing in windows (evidence/trace_windows.hpp): after pauses and resumes, each window's
// eager kernels, graph replays and host waits go to the scope that launched them, nothing
// launched between windows makes a record, and no record is left unattributed. (On an H100
// with the launch callbacks switched off during pauses, every record after the first resume
// carried one stale correlation id: this is the check for that.)
TEST_CASE("tracing paused and resumed: each window's work goes to its scope, nothing between windows") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::activity);
  auto& c = collector();
  const graph_workspace workspace;
  cudaStream_t stream = workspace.stream;
  float* x = workspace.x;
  const auto [graph, exec] = capture_step_graph(stream, x, 2);
  const kscope::cupti_snapshot before = flushed_snapshot();
  constexpr int windows = 4;
  for (int w = 0; w < windows; ++w) {
    {
      test_scope s(static_cast<kscope::node_id>(11000 + w));  // traced: 5 kernels, a wait
      for (int i = 0; i < 5; ++i) tag_kernel<<<1, 32, 0, stream>>>(nullptr, i);
      REQUIRE_CUDA(cudaStreamSynchronize(stream));
    }
    {
      test_scope s(static_cast<kscope::node_id>(11100 + w));  // traced: 3 graph replays
      for (int i = 0; i < 3; ++i) REQUIRE_CUDA(cudaGraphLaunch(exec, stream));
      REQUIRE_CUDA(cudaStreamSynchronize(stream));
    }
    REQUIRE(c.pause_tracing());
    CHECK_FALSE(c.tracing());
    {
      test_scope s(static_cast<kscope::node_id>(11200 + w));  // between windows: nothing recorded
      for (int i = 0; i < 5; ++i) tag_kernel<<<1, 32, 0, stream>>>(nullptr, i);
      REQUIRE_CUDA(cudaGraphLaunch(exec, stream));
      REQUIRE_CUDA(cudaStreamSynchronize(stream));
    }
    REQUIRE(c.resume_tracing());
    CHECK(c.tracing());
  }
  const kscope::cupti_snapshot snap = flushed_snapshot();
  for (int w = 0; w < windows; ++w) {
    CAPTURE(w);
    const kscope::node_gpu_activity* eager = snap.activity.find(static_cast<kscope::node_id>(11000 + w));
    REQUIRE(eager != nullptr);
    if (eager->kernel_count != 5) {  // which records: the same record twice, or another window's
      std::ostringstream events;
      for (const auto& e : snap.activity.recent)
        if (e.node == static_cast<kscope::node_id>(11000 + w) || e.node == static_cast<kscope::node_id>(11200 + w))
          events << " [node " << e.node << " kind " << static_cast<int>(e.kind) << " correlation " << e.correlation_id
                 << " start " << e.start_ns << " end " << e.end_ns << "]";
      MESSAGE("window " << w << " events:" << events.str());
    }
    CHECK(eager->kernel_count == 5);
    CHECK(eager->host_sync.count == 1);
    const kscope::node_gpu_activity* replays = snap.activity.find(static_cast<kscope::node_id>(11100 + w));
    REQUIRE(replays != nullptr);
    CHECK(replays->graph_replays == 3);
    CHECK(snap.activity.find(static_cast<kscope::node_id>(11200 + w)) == nullptr);
  }
  CHECK(snap.activity.counters.unattributed == before.activity.counters.unattributed);
  // No kernel went to (unscoped) (the snapshots' own device synchronizes do: not counted here).
  const auto unscoped_kernels = [](const kscope::cupti_snapshot& s) { return kernels_of(s, kscope::unscoped_node); };
  CHECK(unscoped_kernels(snap) == unscoped_kernels(before));
  // Every window's launches carried their own correlation ids.
  std::set<std::uint32_t> correlations;
  std::size_t events = 0;
  for (const auto& e : snap.activity.recent) {
    if (e.node < 11000 || e.node >= 11200 || e.kind == kscope::activity_kind::synchronization) continue;
    ++events;
    correlations.insert(e.correlation_id);
  }
  CHECK(correlations.size() >= static_cast<std::size_t>(windows * (5 + 3)));
  const kscope::trace_window_summary w = c.trace_windows();
  CHECK(w.windowed);  // paused by the program: windows from then on
  CHECK(w.windows >= static_cast<std::uint64_t>(windows));
  MESSAGE(w.describe() << "; " << events << " events in distinct " << correlations.size() << " correlations");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

// A graph instantiated while tracing is paused and replayed after the resume, as a serving
// loop that captures its decode graphs lazily does: traced node by node (CUPTI saw it built
// without graph-level trace), every kernel to the scope that replayed it, nothing scaled.
// Replayed as one record, such a graph crashed CUPTI inside cuGraphLaunch on an H100; and
// its node-level replays, held for a replay traced as one record to check their times
// against, were in no figure at all (0 of 18 kernels) until the collector marked them.
TEST_CASE("a graph built while tracing is paused: replayed after the resume, node by node") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::activity);
  auto& c = collector();
  const graph_workspace workspace;
  cudaStream_t stream = workspace.stream;
  float* x = workspace.x;
  const kscope::cupti_snapshot before = flushed_snapshot();
  REQUIRE(c.pause_tracing());
  const auto [graph, exec] = capture_step_graph(stream, x, 3);
  REQUIRE_CUDA(cudaGraphLaunch(exec, stream));  // its first replay, while paused: no record
  REQUIRE_CUDA(cudaStreamSynchronize(stream));
  REQUIRE(c.resume_tracing());
  constexpr kscope::node_id replay_node = 12000;
  constexpr int replays = 6;
  {
    test_scope s(replay_node);
    for (int i = 0; i < replays; ++i) REQUIRE_CUDA(cudaGraphLaunch(exec, stream));
    REQUIRE_CUDA(cudaStreamSynchronize(stream));
  }
  const kscope::cupti_snapshot snap = flushed_snapshot();
  const kscope::node_gpu_activity* a = snap.activity.find(replay_node);
  REQUIRE_MESSAGE(a != nullptr, snap.status.message);
  CHECK(a->kernel_count == static_cast<std::uint64_t>(replays * 3));
  CHECK(a->scaled_kernel_count == 0);  // every replay traced node by node
  CHECK(snap.activity.counters.unattributed == before.activity.counters.unattributed);
  const bool graph_level = snap.status.message.find("graphs sampled") != std::string::npos ||
                           snap.status.message.find("as one record per replay") != std::string::npos;
  CHECK(snap.activity.counters.graph_replays_held == 0);
  if (graph_level) {
    CHECK_MESSAGE(snap.status.message.find("node by node (graphs instantiated while tracing was paused)") !=
                      std::string::npos,
                  snap.status.message);
    CHECK(snap.activity.counters.graph_replays_unreferenced - before.activity.counters.graph_replays_unreferenced ==
          static_cast<std::uint64_t>(replays));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

// Detaching CUPTI between windows (cupti_options::pause_detach), in a process of its own: a
// detach needs a process whose CUPTI holds no graph and no other feature's state.
namespace {
constexpr const char* detach_child_variable = "KSCOPE_TEST_DETACH_CHILD";
bool is_detach_child() { return std::getenv(detach_child_variable) != nullptr; }

// "CUPTI detached at N pauses" in the status, or -1.
long detaches_in(const std::string& status) {
  const std::string key = "CUPTI detached at ";
  const std::size_t at = status.find(key);
  return at == std::string::npos ? -1 : std::strtol(status.c_str() + at + key.size(), nullptr, 10);
}
}  // namespace

// Each window's kernels, copy and host wait go to their scope after CUPTI was detached and
// attached again; nothing between windows makes a record; GPU times are still on kscope's
// clock after a re-attach (the timestamp callback set up again); a pause with no CUDA call
// before the resume does not detach; once the program uses a CUDA graph, pauses keep CUPTI
// attached and the status says why.
TEST_CASE("pause detach child: windows with CUPTI detached between them" * doctest::skip(!is_detach_child())) {
  auto& c = kscope::cupti_collector::global();
  kscope::cupti_options o;
  o.pause_detach = true;
  // A graph's first replay node by node, the rest as one record: the second replay below is
  // one record, which also releases the first one's held node-level records.
  o.graph_first = 1;
  const bool started = c.start(o);
  REQUIRE_MESSAGE(started, "the collector did not start: " << c.status().message);
  cudaStream_t stream = nullptr;
  REQUIRE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int* device_value = nullptr;
  int* host_value = nullptr;
  REQUIRE_CUDA(cudaMalloc(&device_value, sizeof(int)));
  REQUIRE_CUDA(cudaMallocHost(&host_value, sizeof(int)));
  REQUIRE_CUDA(cudaDeviceSynchronize());
  constexpr int windows = 4;
  std::vector<std::int64_t> spin_open(windows), spin_close(windows);
  for (int w = 0; w < windows; ++w) {
    {
      test_scope s(static_cast<kscope::node_id>(13000 + w));  // traced: 5 kernels, a copy, a wait
      for (int i = 0; i < 5; ++i) tag_kernel<<<1, 32, 0, stream>>>(device_value, i);
      REQUIRE_CUDA(cudaMemcpyAsync(host_value, device_value, sizeof(int), cudaMemcpyDeviceToHost, stream));
      REQUIRE_CUDA(cudaStreamSynchronize(stream));
    }
    {
      test_scope s(static_cast<kscope::node_id>(13100 + w));  // traced: 100 us on the GPU, timed here too
      spin_open[w] = kscope::detail::now_ns();
      spin_ns<<<1, 1, 0, stream>>>(100000);
      REQUIRE_CUDA(cudaStreamSynchronize(stream));
      spin_close[w] = kscope::detail::now_ns();
    }
    REQUIRE(c.pause_tracing());
    if (w != 1) {  // window 1: resumed with no CUDA call in between, so nothing to detach at
      test_scope s(static_cast<kscope::node_id>(13200 + w));  // between windows: nothing recorded
      for (int i = 0; i < 5; ++i) tag_kernel<<<1, 32, 0, stream>>>(device_value, i);
      REQUIRE_CUDA(cudaMemcpyAsync(host_value, device_value, sizeof(int), cudaMemcpyDeviceToHost, stream));
      REQUIRE_CUDA(cudaStreamSynchronize(stream));
    }
    REQUIRE(c.resume_tracing());
  }
  REQUIRE_CUDA(cudaDeviceSynchronize());
  c.flush();
  const kscope::cupti_snapshot snap = c.snapshot(200);
  MESSAGE("status: " << snap.status.message);
  for (const std::string& warning : snap.warnings) MESSAGE("warning: " << warning);
  CHECK(detaches_in(snap.status.message) == windows - 1);
  for (int w = 0; w < windows; ++w) {
    CAPTURE(w);
    const kscope::node_gpu_activity* eager = snap.activity.find(static_cast<kscope::node_id>(13000 + w));
    REQUIRE(eager != nullptr);
    CHECK(eager->kernel_count == 5);
    CHECK(eager->memcpy[static_cast<std::size_t>(kscope::copy_direction::d2h)].count == 1);
    CHECK(eager->host_sync.count == 1);
    const kscope::node_gpu_activity* spin = snap.activity.find(static_cast<kscope::node_id>(13100 + w));
    REQUIRE(spin != nullptr);
    REQUIRE(spin->kernel_count == 1);
    // On kscope's clock after every re-attach: the kernel inside its host interval (20 us slack).
    CHECK(spin->first_start_ns >= spin_open[w] - 20000);
    CHECK(spin->last_end_ns <= spin_close[w] + 20000);
    CHECK(spin->last_end_ns - spin->first_start_ns >= 95000);
    CHECK(snap.activity.find(static_cast<kscope::node_id>(13200 + w)) == nullptr);
  }
  CHECK(snap.activity.counters.unattributed == 0);
  CHECK(snap.activity.counters.dropped_by_cupti == 0);
  CHECK(snap.buffers_denied == 0);

  // A CUDA graph from now on: the next pause keeps CUPTI attached, and says so.
  const graph_workspace workspace;
  const auto [graph, exec] = capture_step_graph(workspace.stream, workspace.x, 2);
  {
    test_scope s(13300);
    REQUIRE_CUDA(cudaGraphLaunch(exec, workspace.stream));
    REQUIRE_CUDA(cudaStreamSynchronize(workspace.stream));
  }
  REQUIRE(c.pause_tracing());
  {
    test_scope s(13301);
    tag_kernel<<<1, 32, 0, stream>>>(device_value, 7);
    REQUIRE_CUDA(cudaStreamSynchronize(stream));
  }
  REQUIRE(c.resume_tracing());
  {
    test_scope s(13302);
    REQUIRE_CUDA(cudaGraphLaunch(exec, workspace.stream));
    REQUIRE_CUDA(cudaStreamSynchronize(workspace.stream));
  }
  REQUIRE_CUDA(cudaDeviceSynchronize());
  c.flush();
  const kscope::cupti_snapshot after = c.snapshot(200);
  MESSAGE("status after a graph: " << after.status.message);
  CHECK(detaches_in(after.status.message) == windows - 1);
  CHECK_MESSAGE(after.status.message.find("kept attached at 1: the program uses CUDA graphs") != std::string::npos,
                after.status.message);
  const kscope::node_gpu_activity* first = after.activity.find(13300);
  const kscope::node_gpu_activity* second = after.activity.find(13302);
  REQUIRE(first != nullptr);
  REQUIRE(second != nullptr);
  CHECK(first->kernel_count + first->scaled_kernel_count >= 2);
  CHECK(second->graph_replays == 1);
  CHECK(after.activity.find(13301) == nullptr);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFreeHost(host_value);
  cudaFree(device_value);
  cudaStreamDestroy(stream);
  c.stop();  // while attached: an ordinary stop
}

TEST_CASE("tracing paused with CUPTI detached (pause_detach), in a process of its own" *
          doctest::skip(is_detach_child())) {
  KSCOPE_TEST_NEEDS(kscope_test::feature::activity);
  const int status = kscope_test::run_cases_in_child(
      "pause detach child*",
      kscope_test::environment_with({"KSCOPE_PRODUCTION", "KSCOPE_CUPTI", "KSCOPE_CUPTI_OPTIONS", "KSCOPE_METRIC_SAMPLING",
                                     "KSCOPE_COUNTERS", "KSCOPE_REPORT", "KSCOPE_METRICS"},
                                    {std::string(detach_child_variable) + "=1"}),
      120);
  REQUIRE(status != -1);
  CHECK_MESSAGE(WIFEXITED(status), "the child ended by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0));
  const bool passed = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  CHECK_MESSAGE(passed,
                "the child failed with status " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1) << " (its log is above)");
}
