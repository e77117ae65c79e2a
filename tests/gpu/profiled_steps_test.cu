// Per-scope counters by whole steps (scope_counter_options::whole_steps, the default): a
// step of eight nested scopes is profiled as one range-profiler session, and each kernel's
// range goes to the scope that launched it. Known answers: every profiled step's kernels are
// split exactly as launched (38 per nested scope, 3 in the step itself), each nested scope
// counts one profiled call per profiled step, the profiled steps stay out of the timings,
// and no note says a step was not split. Run twice: with the activity collector holding
// CUPTI's callbacks (its launch callback notes the step's launches), and without it (the
// counter pass subscribes its own). Timings of the same loop are bench/profiled_steps.cu's.
#include <kscope/kscope.hpp>

#include <doctest/doctest.h>

#include "expectations.hpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <string>

namespace {

#define REQUIRE_CUDA(call) REQUIRE_MESSAGE((call) == cudaSuccess, #call)

__global__ void ps_axpy(float* y, const float* x, int n, float a) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

constexpr int nested_scopes = 8;
constexpr int kernels_per_scope = 38;
constexpr int kernels_in_step = 3;  // launched by the step scope itself
constexpr int steps = 12;
const char* const scope_names[nested_scopes] = {"ps_embed", "ps_attn", "ps_proj", "ps_norm",
                                                "ps_mlp_up", "ps_mlp_down", "ps_logits", "ps_sample"};

void run_steps(float* y, const float* x, int n, cudaStream_t stream) {
  for (int step = 0; step < steps; ++step) {
    kscope::scope s{"ps_step"};
    for (int k = 0; k < kernels_in_step; ++k) ps_axpy<<<(n + 255) / 256, 256, 0, stream>>>(y, x, n, 0.5f);
    for (const char* name : scope_names) {
      kscope::scope nested{name};
      for (int k = 0; k < kernels_per_scope; ++k) ps_axpy<<<(n + 255) / 256, 256, 0, stream>>>(y, x, n, 1.0001f);
    }
    REQUIRE_CUDA(cudaStreamSynchronize(stream));
  }
}

// The 12 steps with the counters on (whole steps, the defaults); false when the counters
// were refused (the case then fails where they are expected, tests/gpu/expectations.hpp).
bool profile_steps(kscope::session& session, float* y, const float* x, int n, cudaStream_t stream) {
  session.reset();
  kscope::scope_counter_sampler::global().reset();
  if (!session.enable_counters()) {
    const kscope::session_report r = session.report();
    kscope_test::refused(kscope_test::feature::counters, "session::enable_counters", "not enabled",
                         r.counters ? r.counters->status : std::string(), __FILE__, __LINE__);
    return false;
  }
  run_steps(y, x, n, stream);
  session.disable_counters();
  return true;
}

void check_split(kscope::session& session, const char* mode) {
  const kscope::session_report r = session.report();
  REQUIRE(r.counters.has_value());
  std::printf("PSTEP %s status: %s\n", mode, r.counters->status.c_str());
  for (const std::string& n : r.counters->notes) std::printf("PSTEP %s note: %s\n", mode, n.c_str());
  for (const std::string& n : r.counters->notes) CHECK_MESSAGE(n.find("not told apart") == std::string::npos, n);
  const kscope::scope_report* step = r.find("ps_step");
  REQUIRE(step != nullptr);
  REQUIRE(step->counters.has_value());
  const std::uint64_t profiled = step->counters->profiled_calls;
  std::printf("PSTEP %s: %llu of %d steps profiled; step kernels %llu\n", mode,
              static_cast<unsigned long long>(profiled), steps,
              static_cast<unsigned long long>(step->counters->kernels));
  CHECK(profiled >= 2);  // first_calls
  CHECK(step->profiled_calls + step->calls == steps);
  const std::uint64_t whole = profiled - step->counters->partial_calls;
  CHECK(step->counters->partial_calls == 0);
  CHECK(step->counters->kernels == whole * kernels_in_step);
  for (const char* name : scope_names) {
    const kscope::scope_report* s = r.find(std::string("ps_step/") + name);
    REQUIRE(s != nullptr);
    REQUIRE_MESSAGE(s->counters.has_value(), name);
    CHECK_MESSAGE(s->counters->kernels == whole * kernels_per_scope, name);
    CHECK_MESSAGE(s->counters->profiled_calls == whole, name);
    // Its kernels' time, measured by the counters, is there: every kernel had a duration.
    const auto duration = s->counters->totals.find("gpu__time_duration.sum");
    REQUIRE_MESSAGE(duration != s->counters->totals.end(), name);
    CHECK_MESSAGE(duration->second > 0, name);
  }
}

}  // namespace

TEST_CASE("whole steps: each kernel of a profiled step goes to the scope that launched it") {
  KSCOPE_TEST_NEEDS(kscope_test::feature::counters);
  auto& session = kscope::session::global();
  constexpr int n = 1 << 16;
  float *x = nullptr, *y = nullptr;
  REQUIRE_CUDA(cudaMalloc(&x, sizeof(float) * n));
  REQUIRE_CUDA(cudaMalloc(&y, sizeof(float) * n));
  REQUIRE_CUDA(cudaMemset(x, 0, sizeof(float) * n));
  REQUIRE_CUDA(cudaMemset(y, 0, sizeof(float) * n));
  cudaStream_t stream = nullptr;
  REQUIRE_CUDA(cudaStreamCreate(&stream));

  SUBCASE("without the activity collector: the counter pass takes the launch callback") {
    if (!profile_steps(session, y, x, n, stream)) return;
    check_split(session, "own callback");
  }
  SUBCASE("with the activity collector: its launch callback notes the step's launches") {
    if (!session.enable_cupti())
      KSCOPE_TEST_REFUSED(kscope_test::feature::activity, "session::enable_cupti", "not started",
                          kscope::cupti_collector::global().status().message);
    if (!profile_steps(session, y, x, n, stream)) return;
    check_split(session, "collector");
    // The profiled steps' kernels stay out of the GPU activity: only unprofiled steps' count.
    const kscope::session_report r = session.report();
    const kscope::scope_report* mlp = r.find("ps_step/ps_mlp_up");
    REQUIRE(mlp != nullptr);
    const std::uint64_t unprofiled = static_cast<std::uint64_t>(mlp->calls);
    if (mlp->gpu_activity) CHECK(mlp->gpu_activity->kernel_count == unprofiled * kernels_per_scope);
  }
  (void)cudaStreamDestroy(stream);
  (void)cudaFree(x);
  (void)cudaFree(y);
}
