// The serving example's GPU kernels (examples/serving.cu): embedding, fused residual-add +
// RMSnorm, the KV-cache append, decode attention, SiLU, the row gather and greedy sampling.
// The GEMMs are cuBLAS's (engine.hpp). No kscope here: kernels are timed and attributed by
// the scopes of the host code that launches them.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace {

// ---- kernels ----------------------------------------------------------------------------

constexpr int head_dim = 128;  // heads = hidden / 128

// What the scheduler tells the GPU about one row of a batch: the request's KV-cache slot,
// the position of the row's token in its sequence, and the token id.
struct row_meta {
  int slot;
  int position;
  int token;
};

__device__ float block_sum(float v) {
  __shared__ float partial[32];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) total += partial[w];
  return total;
}

// Four consecutive halves (8 bytes, aligned) as floats.
__device__ void load_four(const __half* p, float (&v)[4]) {
  const uint2 raw = *reinterpret_cast<const uint2*>(p);
  __half2 lo, hi;
  memcpy(&lo, &raw.x, sizeof lo);
  memcpy(&hi, &raw.y, sizeof hi);
  const float2 a = __half22float2(lo), b = __half22float2(hi);
  v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
}

// Deterministic values in [-amplitude, amplitude] + offset: weights with variance 1/fan_in
// keep activations near 1 through the layers, so fp16 never overflows.
__global__ void fill_uniform(__half* p, std::size_t n, float amplitude, float offset, unsigned seed) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    p[i] = __float2half(offset + amplitude * (static_cast<float>(h & 0xffffff) / 8388608.0f - 1.0f));
  }
}

// x[row] = embedding[token]: the table is the LM head's [vocab x hidden] (tied embeddings).
__global__ void embed_tokens(int hidden, const row_meta* rows, const __half* table, __half* x) {
  const int row = blockIdx.x;
  const uint4* src = reinterpret_cast<const uint4*>(table + static_cast<std::size_t>(rows[row].token) * hidden);
  uint4* dst = reinterpret_cast<uint4*>(x + static_cast<std::size_t>(row) * hidden);
  for (int i = threadIdx.x; i < hidden / 8; i += blockDim.x) dst[i] = src[i];
}

// residual += delta (when given); normed = rmsnorm(residual) * gamma. The residual add is
// fused into the norm, as engines do: one launch and one pass over the row.
__global__ void add_rmsnorm(int hidden, __half* residual, const __half* delta, const __half* gamma, __half* normed) {
  const std::size_t offset = static_cast<std::size_t>(blockIdx.x) * hidden;
  __half2* x = reinterpret_cast<__half2*>(residual + offset);
  const __half2* d = delta ? reinterpret_cast<const __half2*>(delta + offset) : nullptr;
  const __half2* g = reinterpret_cast<const __half2*>(gamma);
  __half2* y = reinterpret_cast<__half2*>(normed + offset);
  float sum_sq = 0;
  for (int i = threadIdx.x; i < hidden / 2; i += blockDim.x) {
    __half2 v = x[i];
    if (d) {
      v = __hadd2(v, d[i]);
      x[i] = v;
    }
    const float2 f = __half22float2(v);
    sum_sq += f.x * f.x + f.y * f.y;
  }
  const float inv_rms = rsqrtf(block_sum(sum_sq) / hidden + 1e-6f);
  for (int i = threadIdx.x; i < hidden / 2; i += blockDim.x) {
    const float2 f = __half22float2(x[i]), w = __half22float2(g[i]);
    y[i] = __floats2half2_rn(f.x * inv_rms * w.x, f.y * inv_rms * w.y);
  }
}

// One unfused elementwise op of an eager model (bias add, rotary half, scale, cast...):
// a few microseconds of GPU work for a whole launch of host work.
__global__ void eager_elementwise(std::size_t n, const __half* x, __half* y, float scale) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = __float2half(__half2float(x[i]) * scale);
}

// Writes each row's new K and V (columns [H, 2H) and [2H, 3H) of qkv) into its request's
// KV-cache slot at the row's position.
__global__ void append_kv(int hidden, const __half* qkv, const row_meta* rows, __half* k_cache, __half* v_cache,
                          std::size_t slot_stride) {
  const int row = blockIdx.x;
  const row_meta meta = rows[row];
  const std::size_t dst =
      static_cast<std::size_t>(meta.slot) * slot_stride + static_cast<std::size_t>(meta.position) * hidden;
  const uint4* k = reinterpret_cast<const uint4*>(qkv + static_cast<std::size_t>(row) * 3 * hidden + hidden);
  const uint4* v = reinterpret_cast<const uint4*>(qkv + static_cast<std::size_t>(row) * 3 * hidden + 2 * hidden);
  uint4* k_out = reinterpret_cast<uint4*>(k_cache + dst);
  uint4* v_out = reinterpret_cast<uint4*>(v_cache + dst);
  for (int i = threadIdx.x; i < hidden / 8; i += blockDim.x) {
    k_out[i] = k[i];
    v_out[i] = v[i];
  }
}

// 8 warps per (head, row) block: with 4, a long context (--large-kv, 4672 positions) kept
// too few loads in flight and attention read the KV cache at 59 % of the H200's DRAM peak,
// under the 60 % that makes a kernel memory-bound; the pathology must be unambiguous.
constexpr int attention_warps = 8;
constexpr int positions_per_iteration = 4;

// Decode attention: one block per (head, row); the row's query against every cached
// position of its sequence. Each warp takes a contiguous share of the positions, a lane
// holds 4 of the head's 128 dimensions, and 4 positions' K and V rows are loaded before
// any is used, so enough bytes are in flight for the kernel to run at DRAM speed; an
// online softmax keeps one pass. Bytes read: rows x context x hidden x 4 (K and V, fp16).
__global__ void __launch_bounds__(attention_warps * 32)
    decode_attention(int hidden, const __half* __restrict__ qkv, const __half* __restrict__ k_cache,
                     const __half* __restrict__ v_cache, std::size_t slot_stride, const row_meta* __restrict__ rows,
                     __half* __restrict__ out) {
  const int head = blockIdx.x, row = blockIdx.y;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const row_meta meta = rows[row];
  const int context = meta.position + 1;  // the new token's K/V were appended already
  const int dim = head * head_dim + lane * 4;
  float q[4];
  load_four(qkv + static_cast<std::size_t>(row) * 3 * hidden + dim, q);
  const float scale = rsqrtf(static_cast<float>(head_dim));
  for (float& v : q) v *= scale;
  const __half* k_base = k_cache + static_cast<std::size_t>(meta.slot) * slot_stride + dim;
  const __half* v_base = v_cache + static_cast<std::size_t>(meta.slot) * slot_stride + dim;
  const int share = (context + attention_warps - 1) / attention_warps;
  const int begin = warp * share, end = min(context, begin + share);

  float running_max = -INFINITY, running_sum = 0, acc[4] = {0, 0, 0, 0};
  for (int p = begin; p < end; p += positions_per_iteration) {
    float k[positions_per_iteration][4], v[positions_per_iteration][4];
#pragma unroll
    for (int j = 0; j < positions_per_iteration; ++j) {
      if (p + j < end) {
        load_four(k_base + static_cast<std::size_t>(p + j) * hidden, k[j]);
        load_four(v_base + static_cast<std::size_t>(p + j) * hidden, v[j]);
      } else {
        for (int d = 0; d < 4; ++d) k[j][d] = v[j][d] = 0;
      }
    }
    float score[positions_per_iteration];
#pragma unroll
    for (int j = 0; j < positions_per_iteration; ++j)
      score[j] = q[0] * k[j][0] + q[1] * k[j][1] + q[2] * k[j][2] + q[3] * k[j][3];
    for (int offset = 16; offset > 0; offset /= 2)
#pragma unroll
      for (int j = 0; j < positions_per_iteration; ++j) score[j] += __shfl_xor_sync(0xffffffffu, score[j], offset);
    float step_max = running_max;
#pragma unroll
    for (int j = 0; j < positions_per_iteration; ++j) {
      if (p + j >= end) score[j] = -INFINITY;
      step_max = fmaxf(step_max, score[j]);
    }
    const float correction = __expf(running_max - step_max);  // 0 on the first pass
    running_sum *= correction;
    for (float& a : acc) a *= correction;
#pragma unroll
    for (int j = 0; j < positions_per_iteration; ++j) {
      const float weight = __expf(score[j] - step_max);
      running_sum += weight;
      for (int d = 0; d < 4; ++d) acc[d] += weight * v[j][d];
    }
    running_max = step_max;
  }

  // Combine the warps' partial softmaxes.
  __shared__ float warp_max[attention_warps], warp_sum[attention_warps], warp_acc[attention_warps][head_dim];
  if (lane == 0) {
    warp_max[warp] = running_max;
    warp_sum[warp] = running_sum;
  }
  for (int d = 0; d < 4; ++d) warp_acc[warp][lane * 4 + d] = acc[d];
  __syncthreads();
  if (threadIdx.x < head_dim) {
    float overall_max = -INFINITY;
    for (int w = 0; w < attention_warps; ++w) overall_max = fmaxf(overall_max, warp_max[w]);
    float total = 0, value = 0;
    for (int w = 0; w < attention_warps; ++w) {
      if (warp_sum[w] == 0) continue;  // a warp with no positions (short contexts)
      const float factor = __expf(warp_max[w] - overall_max);
      total += warp_sum[w] * factor;
      value += warp_acc[w][threadIdx.x] * factor;
    }
    out[static_cast<std::size_t>(row) * hidden + head * head_dim + threadIdx.x] = __float2half(value / total);
  }
}

// y = silu(y), in place over the MLP's up projection.
__global__ void silu_in_place(std::size_t n, __half* y) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = __half2float(y[i]);
    y[i] = __float2half(v / (1.0f + __expf(-v)));
  }
}

// out[i] = in[index[i]]: the last prompt token of each request whose prefill completes.
__global__ void gather_rows(int hidden, const __half* in, const int* index, __half* out) {
  const uint4* src = reinterpret_cast<const uint4*>(in + static_cast<std::size_t>(index[blockIdx.x]) * hidden);
  uint4* dst = reinterpret_cast<uint4*>(out + static_cast<std::size_t>(blockIdx.x) * hidden);
  for (int i = threadIdx.x; i < hidden / 8; i += blockDim.x) dst[i] = src[i];
}

// Greedy sampling: tokens[r] = argmax over the vocabulary of one logits row. Rows
// [0, decode_rows) are the decode batch's logits; the rest are the first tokens of
// requests whose prefill completed, at logits rows prefill_first_row + (r - decode_rows).
__global__ void argmax_rows(int vocab, int decode_rows, int prefill_first_row, const __half* logits, int* tokens) {
  const int r = blockIdx.x;
  const int source = r < decode_rows ? r : prefill_first_row + (r - decode_rows);
  const __half* row = logits + static_cast<std::size_t>(source) * vocab;
  float best = -INFINITY;
  int best_index = 0;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float v = __half2float(row[i]);
    if (v > best) best = v, best_index = i;
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, best, offset);
    const int other_index = __shfl_xor_sync(0xffffffffu, best_index, offset);
    if (other > best || (other == best && other_index < best_index)) best = other, best_index = other_index;
  }
  __shared__ float warp_best[32];
  __shared__ int warp_index[32];
  if (threadIdx.x % 32 == 0) warp_best[threadIdx.x / 32] = best, warp_index[threadIdx.x / 32] = best_index;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w)
      if (warp_best[w] > best || (warp_best[w] == best && warp_index[w] < best_index))
        best = warp_best[w], best_index = warp_index[w];
    tokens[r] = best_index;
  }
}

int blocks_for(std::size_t n, int threads) {
  return static_cast<int>(std::min<std::size_t>((n + threads - 1) / threads, 4096));
}

}  // namespace
