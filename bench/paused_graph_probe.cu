// What the collector makes of a CUDA graph built while tracing is paused (GPU needed; built
// by hand, it uses kscope's collector and links nothing but libdl):
//
//   nvcc -std=c++17 -arch=sm_90 -O1 -DKSCOPE_HAS_CUDA=1 -Xcompiler -pthread -Iinclude \
//     bench/paused_graph_probe.cu -o paused_graph_probe -ldl && ./paused_graph_probe
//
// Session 17 (H100, CUPTI 130001): a graph captured and instantiated while paused and
// replayed 6 times after the resume came out with 0 kernels in its scope although CUPTI
// delivered all 18 records: the attribution held them for a replay traced as one record that
// such a graph never gets (bench/RESULTS.md). Each case prints the replaying scope's kernels
// and the attribution's counters; A-E the ways the graph can be built, F-G the node-level
// stamps of a graph of known kernel lengths (50, 10, 10 us) built paused and built traced,
// H a pause with two kernels in flight (are their records delivered whole?).
#include <kscope/activity/collector.hpp>
#include <kscope/scope/scope.hpp>
#include <cuda_runtime.h>
#include <cupti.h>
#include <dlfcn.h>
#include <cstdio>
__global__ void ga(float* x) { x[threadIdx.x] += 1.0f; }
__global__ void gb(float* x) { x[threadIdx.x] *= 2.0f; }
__global__ void gc(float* x) { x[threadIdx.x] -= 1.0f; }
__global__ void spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}
static cudaGraph_t capture_spin(cudaStream_t s) {
  cudaGraph_t g; cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  spin<<<1,32,0,s>>>(50000); spin<<<1,32,0,s>>>(10000); spin<<<1,32,0,s>>>(10000);
  cudaStreamEndCapture(s, &g); return g;
}
static void durations(const char* what, const kscope::cupti_snapshot& a, kscope::node_id node) {
  std::printf("  %s kernel durations (us) in node %llu:", what, (unsigned long long)node);
  for (const auto& e : a.activity.recent)
    if (e.node == node && e.kind == kscope::activity_kind::kernel) std::printf(" %.1f", (e.end_ns - e.start_ns) / 1e3);
  std::printf("\n");
}
using enable_fn = CUptiResult (*)(CUpti_ActivityKind);
static enable_fn en, dis;
struct sg { cudaGraph_t g; cudaGraphExec_t e; };
static cudaGraph_t capture(cudaStream_t s, float* x) {
  cudaGraph_t g; cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  ga<<<1,256,0,s>>>(x); gb<<<1,256,0,s>>>(x); gc<<<1,256,0,s>>>(x);
  cudaStreamEndCapture(s, &g); return g;
}
static void report(const char* name, kscope::node_id node, const kscope::cupti_snapshot& b, const kscope::cupti_snapshot& a) {
  const auto* n = a.activity.find(node);
  std::printf("%-58s node kernels %llu scaled %llu graph_replays %llu | delta kernel_records %llu graph_records %llu graph_launch_records %llu unattributed %llu unscoped %llu unreferenced %llu held %llu retimed %llu\n",
    name, n ? (unsigned long long)n->kernel_count : 0ull, n ? (unsigned long long)n->scaled_kernel_count : 0ull, n ? (unsigned long long)n->graph_replays : 0ull,
    (unsigned long long)(a.activity.counters.kernel_records - b.activity.counters.kernel_records),
    (unsigned long long)(a.activity.counters.graph_records - b.activity.counters.graph_records),
    (unsigned long long)(a.activity.counters.graph_launch_records - b.activity.counters.graph_launch_records),
    (unsigned long long)(a.activity.counters.unattributed - b.activity.counters.unattributed),
    (unsigned long long)(a.activity.counters.unscoped - b.activity.counters.unscoped),
    (unsigned long long)a.activity.counters.graph_replays_unreferenced, (unsigned long long)a.activity.counters.graph_replays_held,
    (unsigned long long)a.activity.counters.graph_replays_retimed);
}
static kscope::cupti_snapshot snap() { cudaDeviceSynchronize(); auto& c = kscope::cupti_collector::global(); c.flush(); return c.snapshot(10); }
static void replay(cudaGraphExec_t e, cudaStream_t s, kscope::node_id node) {
  auto saved = kscope::detail::this_thread_state().current;
  kscope::detail::this_thread_state().current = node;
  for (int i = 0; i < 6; ++i) cudaGraphLaunch(e, s);
  cudaStreamSynchronize(s);
  kscope::detail::this_thread_state().current = saved;
}
int main() {
  auto& c = kscope::cupti_collector::global();
  if (!c.start()) { std::printf("no start: %s\n", c.status().message.c_str()); return 1; }
  void* h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
  en = (enable_fn)dlsym(h, "cuptiActivityEnable"); dis = (enable_fn)dlsym(h, "cuptiActivityDisable");
  std::printf("cupti handle %p enable %p\n", h, (void*)en);
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  float* x; cudaMalloc(&x, 1024);
  cudaGraphExec_t e;
  { // control: built and replayed while tracing
    auto b = snap(); cudaGraph_t g = capture(s, x); cudaGraphInstantiate(&e, g, 0);
    replay(e, s, 100); report("control: built traced", 100, b, snap()); }
  { // A: built paused
    auto b = snap(); c.pause_tracing(); cudaGraph_t g = capture(s, x); cudaGraphInstantiate(&e, g, 0);
    c.resume_tracing(); replay(e, s, 101); report("A: captured+instantiated paused", 101, b, snap());
    replay(e, s, 111); report("A: second round", 111, b, snap()); }
  { // B: paused, kernel kind on around the instantiate
    auto b = snap(); c.pause_tracing(); cudaGraph_t g = capture(s, x);
    std::printf("  enable kernel kind: %d\n", (int)en(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    cudaGraphInstantiate(&e, g, 0); std::printf("  disable: %d\n", (int)dis(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    c.resume_tracing(); replay(e, s, 102); report("B: paused, kernel kind on at instantiate", 102, b, snap()); }
  { // C: captured paused, instantiated traced
    auto b = snap(); c.pause_tracing(); cudaGraph_t g = capture(s, x); c.resume_tracing();
    cudaGraphInstantiate(&e, g, 0); replay(e, s, 103); report("C: captured paused, instantiated traced", 103, b, snap()); }
  { // D: built paused, then cudaGraphExecUpdate / re-instantiate after resume
    auto b = snap(); c.pause_tracing(); cudaGraph_t g = capture(s, x); cudaGraphInstantiate(&e, g, 0); c.resume_tracing();
    cudaGraphExecUpdateResultInfo info; cudaError_t r = cudaGraphExecUpdate(e, g, &info);
    std::printf("  exec update: %d result %d\n", (int)r, (int)info.result);
    replay(e, s, 104); report("D: built paused, exec-updated traced", 104, b, snap()); }
  { // E: built paused with all kinds re-enabled by raw CUPTI (kernel + graph trace)
    auto b = snap(); c.pause_tracing(); cudaGraph_t g = capture(s, x);
    en(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); en(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
    cudaGraphInstantiate(&e, g, 0); dis(CUPTI_ACTIVITY_KIND_GRAPH_TRACE); dis(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    c.resume_tracing(); replay(e, s, 105); report("E: paused, kernel+graph kinds on at instantiate", 105, b, snap()); }
  { // F: spin graph (50 + 10 + 10 us) built paused: are its node-level stamps honest?
    auto b = snap(); c.pause_tracing(); cudaGraph_t g = capture_spin(s); cudaGraphInstantiate(&e, g, 0);
    c.resume_tracing(); replay(e, s, 106); auto a = snap(); report("F: spin graph built paused", 106, b, a); durations("F", a, 106); }
  { // G: the same graph built traced (sampled: first 2 node by node, held against the reference)
    auto b = snap(); cudaGraph_t g = capture_spin(s); cudaGraphInstantiate(&e, g, 0);
    replay(e, s, 107); auto a = snap(); report("G: spin graph built traced", 107, b, a); durations("G", a, 107); }
  { // H: pause with a kernel in flight (no sync): is its record delivered, and whole?
    auto b = snap();
    auto saved = kscope::detail::this_thread_state().current;
    kscope::detail::this_thread_state().current = 108;
    spin<<<1,32,0,s>>>(2000000); spin<<<1,32,0,s>>>(1000000);
    kscope::detail::this_thread_state().current = saved;
    c.pause_tracing();  // forced flush with both kernels in flight
    cudaDeviceSynchronize(); c.resume_tracing();
    auto a = snap(); report("H: paused with 2 kernels in flight (2 ms, 1 ms)", 108, b, a); durations("H", a, 108);
    std::printf("  H dropped zero start %llu, end<start %llu\n", (unsigned long long)(a.activity.counters.dropped_zero_start - b.activity.counters.dropped_zero_start),
                (unsigned long long)(a.activity.counters.dropped_end_before_start - b.activity.counters.dropped_end_before_start)); }
  auto f = snap();
  std::printf("status: %s\n", f.status.message.c_str());
  for (auto& w : f.warnings) std::printf("warning: %s\n", w.c_str());
  c.stop();
  return 0;
}
