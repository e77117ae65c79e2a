// The three standard experiment sets of an inference kernel, on a small attention-like
// kernel (naive softmax(Q K^T / sqrt(d)) V per head, fp32):
//   1. fixed batch, varying sequence length   (how does it scale with context?)
//   2. fixed sequence length, varying batch   (does batching fill the GPU?)
//   3. fixed total tokens, varying requests   (same work, split into more, shorter requests)
// Each set is a kscope::sweep; kscope::run_sweep runs one benchmark per point with a
// progress line on stderr, and each report goes to stdout as markdown and to
// sweep_<set>.json / sweep_<set>.csv in the directory given as argument (default: .).
//
//   ./sweeps /tmp/out
#include <kscope/bench/bench.hpp>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <string>

namespace {

constexpr int head_dim = 64;
constexpr int heads = 8;
constexpr int threads = 128;

// Max (or sum) over the block, broadcast to every thread. `scratch` holds one value per warp.
__device__ float block_reduce(float v, float* scratch, bool take_max) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = take_max ? fmaxf(v, other) : v + other;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x / 32) ? scratch[lane] : (take_max ? -INFINITY : 0.0f);
    for (int offset = 16; offset > 0; offset /= 2) {
      const float other = __shfl_xor_sync(0xffffffffu, v, offset);
      v = take_max ? fmaxf(v, other) : v + other;
    }
    if (lane == 0) scratch[0] = v;
  }
  __syncthreads();
  const float result = scratch[0];
  __syncthreads();
  return result;
}

// One block per (query row, batch x head). q, k, v, o: [batch][heads][seq_len][64].
// Deliberately naive: scores for the whole row in shared memory, K and V re-read per
// query row (from L2 when they fit), which is what the sweeps expose.
__global__ void naive_attention(const float* __restrict__ q, const float* __restrict__ k,
                                const float* __restrict__ v, float* __restrict__ o, int seq_len, float scale) {
  extern __shared__ float scores[];  // seq_len values
  __shared__ float q_row[head_dim];
  __shared__ float scratch[32];
  const long long head = blockIdx.y;
  const int row = blockIdx.x;
  const float* qp = q + (head * seq_len + row) * head_dim;
  const float* kp = k + head * seq_len * head_dim;
  const float* vp = v + head * seq_len * head_dim;
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) q_row[d] = qp[d];
  __syncthreads();

  float local_max = -INFINITY;
  for (int j = threadIdx.x; j < seq_len; j += blockDim.x) {
    float s = 0;
#pragma unroll 16
    for (int d = 0; d < head_dim; ++d) s += q_row[d] * kp[static_cast<long long>(j) * head_dim + d];
    s *= scale;
    scores[j] = s;
    local_max = fmaxf(local_max, s);
  }
  const float row_max = block_reduce(local_max, scratch, true);
  float local_sum = 0;
  for (int j = threadIdx.x; j < seq_len; j += blockDim.x) {
    const float e = __expf(scores[j] - row_max);
    scores[j] = e;
    local_sum += e;
  }
  const float row_sum = block_reduce(local_sum, scratch, false);  // its barriers publish scores[]
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float acc = 0;
    for (int j = 0; j < seq_len; ++j) acc += scores[j] * vp[static_cast<long long>(j) * head_dim + d];
    o[(head * seq_len + row) * head_dim + d] = acc / row_sum;
  }
}

__global__ void fill_uniform(float* x, std::size_t n, unsigned seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    x[i] = static_cast<float>(h & 0xffffff) / 8388608.0f - 1.0f;
  }
}

struct tensors {
  float *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
};

// The benchmark of one (batch, seq_len) point: shape [batch, heads, seq_len, 64].
kscope::bench attention_bench(const tensors& t, long long batch, long long seq_len) {
  const dim3 grid(static_cast<unsigned>(seq_len), static_cast<unsigned>(batch * heads));
  const std::size_t shared = static_cast<std::size_t>(seq_len) * sizeof(float);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const int length = static_cast<int>(seq_len);
  kscope::bench b{"naive attention", [=](cudaStream_t s) {
                    naive_attention<<<grid, threads, shared, s>>>(t.q, t.k, t.v, t.o, length, scale);
                  }};
  const double bh = static_cast<double>(batch * heads);
  const double l = static_cast<double>(seq_len);
  // Q K^T and P V: 2 * L * L * d each per head; minimum traffic: Q, K, V read, O written once.
  b.shape({batch, heads, seq_len, head_dim})
      .dtype("fp32")
      .strides({heads * seq_len * head_dim, seq_len * head_dim, head_dim, 1})
      .set_work({4.0 * bh * l * l * head_dim, 4.0 * bh * l * head_dim * sizeof(float)})
      .kernel(naive_attention, threads, shared)
      .time_budget_s(5);
  return b;
}

// Returns whether every point's result is valid (bench_result::valid()).
bool run_set(const char* label, const kscope::sweep& points, const tensors& t, const std::string& dir) {
  std::printf("\n## %s\n\n", label);
  const kscope::bench_report report = kscope::run_sweep(points, [&](const kscope::sweep_point& p) {
    const long long batch = p.has("batch") ? p.integer("batch") : p.integer("requests");
    return attention_bench(t, batch, p.integer("seq_len"));
  });
  report.print();
  const std::string stem = dir + "/sweep_" + std::string(label).substr(0, std::string(label).find(':'));
  report.write_json(stem + ".json");
  report.write_csv(stem + ".csv");
  for (const kscope::bench_result& r : report.results)
    if (!r.valid()) std::fprintf(stderr, "sweeps: %s: %s\n", r.name.c_str(), r.stop_message.c_str());
  return report.all_valid();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : ".";
  const kscope::bench_context context = kscope::describe_bench_context();
  if (!context.gpu.present) {
    std::printf("sweeps: no GPU (%s); nothing to measure\n", context.gpu.problem.c_str());
    return 0;
  }
  // The largest point of every set has 32768 tokens (8 x 4096 and 32 x 1024).
  const std::size_t elements = std::size_t{32768} * heads * head_dim;
  tensors t;
  for (float** p : {&t.q, &t.k, &t.v, &t.o}) {
    if (cudaMalloc(p, elements * sizeof(float)) != cudaSuccess) {
      std::fprintf(stderr, "sweeps: cudaMalloc failed\n");
      return 1;
    }
  }
  fill_uniform<<<1024, 256>>>(t.q, elements, 1);
  fill_uniform<<<1024, 256>>>(t.k, elements, 2);
  fill_uniform<<<1024, 256>>>(t.v, elements, 3);
  cudaDeviceSynchronize();

  using kscope::axis;
  using kscope::sweep;
  bool all_valid = true;
  all_valid &= run_set("seq_len: batch 8, sequence length 256..4096",
                       sweep::cartesian({axis("batch", {8}), kscope::geometric_axis("seq_len", 256, 4096)}), t, dir);
  all_valid &= run_set("batch: sequence length 1024, batch 1..32",
                       sweep::cartesian({axis("seq_len", {1024}), kscope::geometric_axis("batch", 1, 32)}), t, dir);
  all_valid &= run_set("requests: 4096 tokens in total, 1..16 requests",
                       sweep::zip({axis("requests", {1, 2, 4, 8, 16}), axis("seq_len", {4096, 2048, 1024, 512, 256})}),
                       t, dir);

  for (float* p : {t.q, t.k, t.v, t.o}) cudaFree(p);
  // Non-zero when any point could not be measured or timed no work: scripts that run
  // the example must not take its numbers then.
  return all_valid ? 0 : 1;
}
