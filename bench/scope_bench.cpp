// What a scope costs on the host, against the raw calls it wraps.
// Names are fixed so runs can be compared across versions (bench/RESULTS.md).
#include <kscope/scope/recorder_snapshot.hpp>  // recorder::reset between cases
#include <kscope/scope/scope.hpp>

#include <benchmark/benchmark.h>

#include <string>

#if KSCOPE_HAS_NVTX
#  include <nvtx3/nvToolsExt.h>
#endif

namespace {

void BM_raw_nvtx_push_pop(benchmark::State& state) {
#if KSCOPE_HAS_NVTX
  for (auto _ : state) {
    nvtxRangePushA("raw");
    nvtxRangePop();
  }
#else
  state.SkipWithError("built without NVTX (no CUDA Toolkit)");
  for (auto _ : state) {}
#endif
}
BENCHMARK(BM_raw_nvtx_push_pop);

void BM_scope_disabled_runtime(benchmark::State& state) {
  kscope::set_enabled(false);
  for (auto _ : state) {
    KSCOPE_SCOPE("disabled");
    benchmark::ClobberMemory();
  }
  kscope::set_enabled(true);
}
BENCHMARK(BM_scope_disabled_runtime);

void BM_scope_host_only(benchmark::State& state) {
  kscope::recorder::global().set_nvtx(false);
  for (auto _ : state) {
    KSCOPE_SCOPE("host_only");
    benchmark::ClobberMemory();
  }
  kscope::recorder::global().set_nvtx(true);
  kscope::recorder::global().reset();
}
BENCHMARK(BM_scope_host_only);

void BM_scope_nvtx(benchmark::State& state) {
  kscope::recorder::global().set_nvtx(true);
  for (auto _ : state) {
    KSCOPE_SCOPE("nvtx");
    benchmark::ClobberMemory();
  }
  kscope::recorder::global().reset();
}
BENCHMARK(BM_scope_nvtx);

// Declared work: with no NVTX tool attached, the close emits nothing more (the payload
// mark is only sent to a tool: scope/detail/nvtx.hpp).
void BM_scope_nvtx_work(benchmark::State& state) {
  kscope::recorder::global().set_nvtx(true);
  for (auto _ : state) {
    static kscope::detail::call_site site;  // what KSCOPE_SCOPE expands to, named
    kscope::scope s{site, "nvtx_work"};
    s.set_work({2.0e9, 1.0e6});
    benchmark::ClobberMemory();
  }
  kscope::recorder::global().reset();
}
BENCHMARK(BM_scope_nvtx_work);

// A name known only at run time: looked up by its text, its NVTX message copied when a
// tool is attached.
void BM_scope_nvtx_runtime_name(benchmark::State& state) {
  kscope::recorder::global().set_nvtx(true);
  const std::string name = "runtime_name";
  for (auto _ : state) {
    kscope::scope s{name};
    benchmark::ClobberMemory();
  }
  kscope::recorder::global().reset();
}
BENCHMARK(BM_scope_nvtx_runtime_name);

// With a category and a colour (scope/nvtx.hpp): with no tool attached the styled push
// returns before it builds the event, so this should cost what BM_scope_nvtx does.
void BM_scope_nvtx_styled(benchmark::State& state) {
  kscope::recorder::global().set_nvtx(true);
  constexpr kscope::nvtx_category category{1, "bench"};
  for (auto _ : state) {
    KSCOPE_SCOPE_STYLED("nvtx_styled", category, kscope::nvtx_color::rgb(0x76B900));
    benchmark::ClobberMemory();
  }
  kscope::recorder::global().reset();
}
BENCHMARK(BM_scope_nvtx_styled);

#if KSCOPE_HAS_CUDA
bool have_device() {
  int n = 0;
  const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  cudaGetLastError();
  return ok;
}
#endif

void BM_raw_event_record_pair(benchmark::State& state) {
#if KSCOPE_HAS_CUDA
  if (!have_device()) {
    state.SkipWithError("no CUDA device");
    for (auto _ : state) {}
    return;
  }
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (auto _ : state) {
    cudaEventRecord(a, stream);
    cudaEventRecord(b, stream);
  }
  cudaStreamSynchronize(stream);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaStreamDestroy(stream);
#else
  state.SkipWithError("built without CUDA");
  for (auto _ : state) {}
#endif
}
BENCHMARK(BM_raw_event_record_pair);

void BM_scope_stream_events(benchmark::State& state) {
#if KSCOPE_HAS_CUDA
  if (!have_device()) {
    state.SkipWithError("no CUDA device");
    for (auto _ : state) {}
    return;
  }
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  { KSCOPE_SCOPE_STREAM("warm_pool", stream); }
  for (auto _ : state) {
    KSCOPE_SCOPE_STREAM("stream_events", stream);
  }
  cudaStreamSynchronize(stream);
  kscope::recorder::global().reset();
  cudaStreamDestroy(stream);
#else
  state.SkipWithError("built without CUDA");
  for (auto _ : state) {}
#endif
}
BENCHMARK(BM_scope_stream_events);

// Where a scope's time goes: the clocks it reads, and the runtime calls a stream scope makes.
void BM_clock_now_ns(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(kscope::detail::now_ns());
  state.SetLabel(kscope::detail::ticks_are_tsc() ? "ticks: invariant TSC" : "ticks: steady_clock");
}
BENCHMARK(BM_clock_now_ns);

void BM_clock_ticks(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(kscope::detail::ticks());
}
BENCHMARK(BM_clock_ticks);

void BM_cuda_stream_get_device(benchmark::State& state) {
#if KSCOPE_HAS_CUDA
  if (!have_device()) {
    state.SkipWithError("no CUDA device");
    for (auto _ : state) {}
    return;
  }
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  int device = 0;
  for (auto _ : state) {
    cudaStreamGetDevice(stream, &device);
    benchmark::DoNotOptimize(device);
  }
  cudaStreamDestroy(stream);
#else
  state.SkipWithError("built without CUDA");
  for (auto _ : state) {}
#endif
}
BENCHMARK(BM_cuda_stream_get_device);

}  // namespace

BENCHMARK_MAIN();
