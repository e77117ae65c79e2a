// A small LLM-serving loop instrumented with kscope, with one knob per classic pathology.
//
// A producer thread plays the clients: requests (prompt length, output length) arrive at a
// Poisson rate into a queue. The main thread is the engine: each step it schedules
// (admits requests into free batch slots, builds the batch metadata on the host and copies
// it to the GPU), prefills newly admitted prompts, decodes one token for every running
// request, samples (argmax over the vocabulary), and copies the sampled token ids back.
// The model is a decoder of `--layers` identical layers, fp16, hidden `--hidden`, with a
// per-layer KV cache; GEMMs go to cuBLAS (linked: CUDA::cublas), the rest are
// the small kernels below. Every request carries cross-thread kscope ranges ("request",
// "queue", "ttft"); every step is a KSCOPE_SCOPE("step") with its phases inside.
//
//   ./serving                          healthy: about 4 s and 3 GiB on an H100/H200
//   ./serving --launch-bound           GPU idles between tiny launches and host work
//   ./serving --sync-in-step           blocking syncs and a pageable copy inside decode
//   ./serving --interleave-prefill     whole long prompts prefilled inside decode steps
//   ./serving --large-kv               4096-token histories: attention is DRAM-bound
//   ./serving --graph --json run.json  decode replayed as CUDA graphs; report as JSON
//   ./serving --sweep all              the three sweep sets (batch size, prompt length,
//                                      request rate): a table, CSV, JSON and an SVG per set
//
// docs/serving.md describes the loop, the knobs and what each one does to the kernels.
#include <kscope/kscope.hpp>

#include <cublas_v2.h>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using steady = std::chrono::steady_clock;

// ---- sizes that are not knobs -------------------------------------------------------

constexpr int vocab_size = 32000;              // Llama-2's vocabulary
constexpr int head_dim = 128;                  // heads = hidden / 128
constexpr int prefill_token_budget = 512;      // chunked prefill: prompt tokens per step
constexpr int interleave_token_cap = 16384;    // --interleave-prefill: bounds activations
constexpr int large_kv_history_tokens = 4096;  // --large-kv: cached conversation history
constexpr int eager_kernels_per_layer = 8;     // --launch-bound: unfused elementwise ops
// --launch-bound: host work per step. 1 ms, about the step's GPU time at hidden 1024, so
// the GPU idles most of the step on any host; with 300 us the GPU's busy share went from
// 46 % to 56 % between two H200 hosts whose CPUs launch at different speeds.
constexpr double launch_bound_host_us = 1000;
constexpr unsigned request_seed = 2026;        // same requests every run

// ---- command line ---------------------------------------------------------------------

struct serving_options {
  int requests = 320;
  double rate_per_s = 100;  // 0: every request arrives at once
  int max_batch = 32;
  int prompt_tokens = 256;  // mean; each request draws from [P/2, 3P/2]
  int output_tokens = 128;  // mean; each request draws from [T/2, 3T/2]
  int layers = 8;
  int hidden = 4096;
  bool prompt_given = false;
  bool hidden_given = false;
  bool launch_bound = false;
  bool sync_in_step = false;
  bool interleave_prefill = false;
  bool large_kv = false;
  bool graph = false;
  bool metric_sampling = false;
  bool quiet = false;
  std::string json_path;
  std::string trace_path;
  // Closed loop: this many clients, each sending its next request when its last one is
  // done (0: open loop, Poisson arrivals at rate_per_s).
  int concurrency = 0;
  bool requests_given = false;
  bool rate_given = false;
  // --sweep: "batch", "seq", "rate" or "all" ("" for one run), and its points.
  std::string sweep;
  std::vector<double> sweep_points;
};

void print_usage(std::FILE* out) {
  std::fputs(
      "usage: serving [options]   (each takes --opt=value or --opt value)\n"
      "  --requests N          requests to serve (default 320)\n"
      "  --rate R              arrivals per second, Poisson; 0 = all at once (default 100)\n"
      "  --batch B             most requests decoded together (default 32)\n"
      "  --prompt P            mean prompt tokens, drawn from [P/2, 3P/2] (default 256;\n"
      "                        1024 with --interleave-prefill)\n"
      "  --output T            mean output tokens, drawn from [T/2, 3T/2] (default 128)\n"
      "  --layers L            decoder layers (default 8)\n"
      "  --hidden H            hidden size, a multiple of 128 (default 4096; 1024 with\n"
      "                        --launch-bound)\n"
      "  --graph               replay decode as a CUDA graph, captured once per batch size\n"
      "  --concurrency C       closed loop: C clients, each sending its next request as soon\n"
      "                        as its last one is done (--rate unused; default 0: open loop,\n"
      "                        Poisson arrivals at --rate)\n"
      "pathologies (off by default; the defaults give a healthy run):\n"
      "  --launch-bound        eager decode: 8 tiny elementwise kernels per layer, 1 ms of\n"
      "                        host work per step, no graph\n"
      "  --sync-in-step        cudaDeviceSynchronize after every layer and a blocking copy of\n"
      "                        the logits to pageable memory inside decode\n"
      "  --interleave-prefill  no prefill chunking: whole prompts of every newly arrived\n"
      "                        request are prefilled inside the decode step\n"
      "  --large-kv            every request continues a 4096-token cached history: decode\n"
      "                        attention reads a large KV cache (about 19 GiB in all)\n"
      "output:\n"
      "  --metric-sampling     sample GPU metrics while running (per step scope \"step\")\n"
      "  --json FILE           write the kscope session report as JSON\n"
      "  --trace FILE          write a Chrome / Perfetto trace\n"
      "  --quiet               print the serving summary only, not the kscope report\n"
      "sweeps (one run of the loop per point; a table on stdout, serving_sweep_<set>.md,\n"
      ".csv, .json and .svg in the working directory):\n"
      "  --sweep SET           batch: --batch over the points, one client per slot (closed\n"
      "                        loop) at --prompt and --output; seq: --prompt over the points,\n"
      "                        closed loop at --batch; rate: --rate over the points (Poisson)\n"
      "                        at --batch, --prompt, --output; all: the three in turn\n"
      "  --sweep-points LIST   the points of one set, comma-separated (defaults: batch\n"
      "                        1,2,4,8,16,32,64; seq 128,256,512,1024,2048; rate\n"
      "                        50,100,150,200). --requests N fixes the requests per point\n"
      "                        (default: 6 per client, at least 8, closed loop; 1.5 s\n"
      "                        of arrivals, at least 140, rate)\n"
      "  --help                this text\n",
      out);
}

bool parse_int(const std::string& text, long lo, long hi, int& out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < lo || v > hi) return false;
  out = static_cast<int>(v);
  return true;
}

bool parse_rate(const std::string& text, double& out) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v) || v < 0) return false;
  out = v;
  return true;
}

// "1,2,4,8": numbers > 0, at least one.
bool parse_points(const std::string& text, std::vector<double>& out) {
  out.clear();
  std::stringstream list(text);
  std::string item;
  while (std::getline(list, item, ',')) {
    double v = 0;
    if (!parse_rate(item, v) || v <= 0) return false;
    out.push_back(v);
  }
  return !out.empty() && text.back() != ',';
}

// The defaults of each sweep set, and the range its points must lie in (the knob's).
struct sweep_set {
  const char* name;
  const char* axis;  // the option it sweeps
  std::vector<double> default_points;
  double lo, hi;
  bool integers;
};
const std::vector<sweep_set>& sweep_sets() {
  static const std::vector<sweep_set> sets = {
      {"batch", "--batch", {1, 2, 4, 8, 16, 32, 64}, 1, 1024, true},
      {"seq", "--prompt", {128, 256, 512, 1024, 2048}, 1, 65536, true},
      {"rate", "--rate", {50, 100, 150, 200}, 0, 1e9, false},
  };
  return sets;
}

// The options a sweep decides itself, and the points' range. -1 to go on, else 2.
int check_sweep_options(const serving_options& o) {
  const auto refuse = [](const std::string& why) {
    std::fprintf(stderr, "serving: %s\n", why.c_str());
    return 2;
  };
  if (o.sweep.empty()) {
    if (!o.sweep_points.empty()) return refuse("--sweep-points needs --sweep batch, seq or rate");
    return -1;
  }
  if (!o.json_path.empty() || !o.trace_path.empty() || o.metric_sampling)
    return refuse("--json, --trace and --metric-sampling are for one run; a sweep writes serving_sweep_<set>.*");
  if (o.concurrency > 0)
    return refuse("--concurrency: the sweep sets choose the arrivals (batch and seq: one client per batch slot; "
                  "rate: Poisson)");
  if (o.rate_given)
    return refuse("--rate: --sweep rate sweeps it (its points: --sweep-points), and batch and seq run closed loop");
  if (o.sweep == "all" && !o.sweep_points.empty())
    return refuse("--sweep-points needs one set (--sweep batch, seq or rate), not all");
  for (const sweep_set& set : sweep_sets()) {
    if (o.sweep != set.name) continue;
    for (double v : o.sweep_points) {
      if (v < set.lo || v > set.hi || (set.integers && v != std::floor(v)))
        return refuse(std::string("--sweep-points for ") + set.name + ": '" + kscope::param_value(v).to_string() +
                      "' is not a valid " + set.axis + (set.integers ? " (an integer in [" : " (a number in (") +
                      kscope::param_value(static_cast<long long>(set.lo)).to_string() + ", " +
                      kscope::param_value(set.hi).to_string() + "])");
    }
  }
  return -1;
}

// Returns -1 to go on, else the exit status (0 after --help, 2 on a bad command line).
int parse_command_line(int argc, char** argv, serving_options& o) {
  struct value_option {
    const char* name;
    const char* expects;
    std::function<bool(const std::string&)> set;
  };
  const std::vector<value_option> value_options = {
      {"--requests", "an integer in [1, 10000000]",
       [&](const std::string& v) { return o.requests_given = parse_int(v, 1, 10000000, o.requests); }},
      {"--rate", "a number >= 0", [&](const std::string& v) { return o.rate_given = parse_rate(v, o.rate_per_s); }},
      {"--batch", "an integer in [1, 1024]", [&](const std::string& v) { return parse_int(v, 1, 1024, o.max_batch); }},
      {"--prompt", "an integer in [1, 65536]",
       [&](const std::string& v) { return o.prompt_given = parse_int(v, 1, 65536, o.prompt_tokens); }},
      {"--output", "an integer in [1, 65536]",
       [&](const std::string& v) { return parse_int(v, 1, 65536, o.output_tokens); }},
      {"--layers", "an integer in [1, 256]", [&](const std::string& v) { return parse_int(v, 1, 256, o.layers); }},
      {"--hidden", "a multiple of 128 in [128, 16384]",
       [&](const std::string& v) {
         return o.hidden_given = parse_int(v, head_dim, 16384, o.hidden) && o.hidden % head_dim == 0;
       }},
      {"--json", "a file name",
       [&](const std::string& v) {
         o.json_path = v;
         return !v.empty();
       }},
      {"--trace", "a file name",
       [&](const std::string& v) {
         o.trace_path = v;
         return !v.empty();
       }},
      {"--concurrency", "an integer in [0, 1024]",
       [&](const std::string& v) { return parse_int(v, 0, 1024, o.concurrency); }},
      {"--sweep", "batch, seq, rate or all",
       [&](const std::string& v) {
         o.sweep = v;
         return v == "batch" || v == "seq" || v == "rate" || v == "all";
       }},
      {"--sweep-points", "a comma-separated list of numbers > 0",
       [&](const std::string& v) { return parse_points(v, o.sweep_points); }},
  };
  const std::vector<std::pair<const char*, bool*>> flags = {
      {"--launch-bound", &o.launch_bound},
      {"--sync-in-step", &o.sync_in_step},
      {"--interleave-prefill", &o.interleave_prefill},
      {"--large-kv", &o.large_kv},
      {"--graph", &o.graph},
      {"--metric-sampling", &o.metric_sampling},
      {"--quiet", &o.quiet},
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      print_usage(stdout);
      return 0;
    }
    const std::size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    bool known = false;
    for (const auto& [flag, target] : flags) {
      if (name != flag) continue;
      if (eq != std::string::npos) {
        std::fprintf(stderr, "serving: %s takes no value\n", flag);
        return 2;
      }
      *target = known = true;
    }
    for (const value_option& option : value_options) {
      if (name != option.name) continue;
      known = true;
      std::string value;
      if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        std::fprintf(stderr, "serving: %s needs a value (%s)\n", option.name, option.expects);
        return 2;
      }
      if (!option.set(value)) {
        std::fprintf(stderr, "serving: %s expects %s, not '%s'\n", option.name, option.expects, value.c_str());
        return 2;
      }
    }
    if (!known) {
      std::fprintf(stderr, "serving: unknown option '%s' (--help lists them)\n", arg.c_str());
      return 2;
    }
  }
  // Each pathology is strongest at its own sizes; a size given explicitly wins, so the
  // healthy run can be compared at the same sizes (e.g. --prompt 1024 without the knob).
  if (o.interleave_prefill && !o.prompt_given) o.prompt_tokens = 1024;  // long prompts
  if (o.launch_bound && !o.hidden_given) o.hidden = 1024;               // a small model
  return check_sweep_options(o);
}

// ---- errors ---------------------------------------------------------------------------

[[noreturn]] void fail(const std::string& what) {
  std::fflush(stdout);
  std::fprintf(stderr, "serving: %s\n", what.c_str());
  std::exit(1);
}

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) fail(std::string(what) + ": " + cudaGetErrorString(status));
}

// This program never changes its locale, so printf's "%.2f" is written with a point.
std::string two_decimals(double v) {
  char text[64];
  std::snprintf(text, sizeof text, "%.2f", v);
  return text;
}

void check_blas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) fail(std::string(what) + ": " + cublasGetStatusString(status));
}

// A launch's configuration errors surface at once; errors while it runs surface at the
// next synchronizing call, which is checked too.
void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

// Busy host work of about `us` microseconds (the scheduler's Python, a tokenizer...).
void busy_wait_us(double us) {
  const auto until = steady::now() + std::chrono::nanoseconds(static_cast<long long>(us * 1000));
  while (steady::now() < until) {
  }
}

// ---- kernels ----------------------------------------------------------------------------

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

// ---- requests -----------------------------------------------------------------------------

struct request {
  int id = 0;
  int prompt_tokens = 0;
  int output_tokens = 0;
  steady::time_point arrival;
  // Cross-thread ranges: opened by the producer at arrival, closed by the engine.
  kscope::range life;   // "request": arrival -> its last token copied back
  kscope::range queue;  // "queue":   arrival -> admitted into a batch slot
  kscope::range ttft;   // "ttft":    arrival -> its first token copied back
  // Engine state.
  int slot = -1;
  int prefilled = 0;  // prompt tokens prefilled so far
  int generated = 0;  // output tokens sampled so far
  int last_token = 0;
  steady::time_point admitted, first_token, finished;
};

// Host timestamps of a finished request, for the summary.
struct request_timing {
  double queue_ms, ttft_ms, tpot_ms, latency_ms;  // tpot_ms is NaN for one output token
  int output_tokens;
  steady::time_point arrival, finished, admitted;
};

// What one step produced, for the throughput of a sweep point: when its tokens were
// copied back, how many (first tokens and decoded ones), its decode rows, and how many
// requests it finished.
struct step_record {
  steady::time_point end;
  int tokens;
  int decode_rows;
  int finished;
};

// The queue between the producer and the engine.
class request_queue {
 public:
  void push(std::unique_ptr<request> r) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      items_.push_back(std::move(r));
    }
    ready_.notify_one();
  }
  void close() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closed_ = true;
    }
    ready_.notify_one();
  }
  // Everything that arrived so far, without waiting.
  void take_all(std::deque<std::unique_ptr<request>>& into) {
    std::lock_guard<std::mutex> lock(mutex_);
    while (!items_.empty()) {
      into.push_back(std::move(items_.front()));
      items_.pop_front();
    }
  }
  // Waits until a request is there (true) or none will come (false).
  bool wait_for_request() {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait(lock, [&] { return !items_.empty() || closed_; });
    return !items_.empty();
  }
  // Closed loop (--concurrency): the engine counts each finished request, and a client
  // waits for the finish that frees it.
  void mark_finished() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++finished_;
    }
    finished_ready_.notify_one();
  }
  void wait_until_finished(int count) {
    std::unique_lock<std::mutex> lock(mutex_);
    finished_ready_.wait(lock, [&] { return finished_ >= count; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::condition_variable finished_ready_;
  std::deque<std::unique_ptr<request>> items_;
  bool closed_ = false;
  int finished_ = 0;
};

// The clients: Poisson arrivals (open loop), or --concurrency clients that each send their
// next request when their last one is done (closed loop: request i waits for the
// (i - C + 1)-th finish); lengths drawn uniformly around the means.
void produce_requests(const serving_options& o, request_queue& queue) {
  std::mt19937 random(request_seed);
  std::exponential_distribution<double> gap_s(o.rate_per_s > 0 ? o.rate_per_s : 1.0);
  std::uniform_int_distribution<int> prompt(std::max(1, o.prompt_tokens / 2), std::max(1, o.prompt_tokens * 3 / 2));
  std::uniform_int_distribution<int> output(std::max(1, o.output_tokens / 2), std::max(1, o.output_tokens * 3 / 2));
  steady::time_point next = steady::now();
  for (int id = 0; id < o.requests; ++id) {
    if (o.concurrency > 0) {
      if (id >= o.concurrency) queue.wait_until_finished(id - o.concurrency + 1);
    } else if (o.rate_per_s > 0) {
      next += std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(gap_s(random)));
      std::this_thread::sleep_until(next);
    }
    auto r = std::make_unique<request>();
    r->id = id;
    r->prompt_tokens = prompt(random);
    r->output_tokens = output(random);
    r->arrival = steady::now();
    // Opened with no scope open on this thread: top-level nodes of the report.
    r->life = kscope::start_range("request");
    r->queue = kscope::start_range("queue");
    r->ttft = kscope::start_range("ttft");
    {
      KSCOPE_SCOPE("tokenize");  // the client-facing thread's own CPU work
      busy_wait_us(5 + 0.01 * r->prompt_tokens);
    }
    queue.push(std::move(r));
  }
  queue.close();
}

// ---- the engine -------------------------------------------------------------------------

// Sizes derived from the options; also what the memory estimate and the summary print.
struct model_shape {
  int layers, hidden, heads, max_batch;
  int history;           // cached tokens before each prompt (--large-kv)
  int max_context;       // KV-cache positions per slot
  int max_prefill_rows;  // prompt tokens prefilled in one step, at most
  std::size_t layer_weight_bytes, lm_head_bytes, kv_cache_bytes, activation_bytes;

  static model_shape of(const serving_options& o) {
    model_shape s{};
    s.layers = o.layers;
    s.hidden = o.hidden;
    s.heads = o.hidden / head_dim;
    s.max_batch = o.max_batch;
    s.history = o.large_kv ? large_kv_history_tokens : 0;
    const int max_prompt = std::max(1, o.prompt_tokens * 3 / 2);
    const int max_output = std::max(1, o.output_tokens * 3 / 2);
    s.max_context = s.history + max_prompt + max_output;
    s.max_prefill_rows = o.interleave_prefill
                             ? std::max(max_prompt, std::min(o.max_batch * max_prompt, interleave_token_cap))
                             : prefill_token_budget;
    const std::size_t h = static_cast<std::size_t>(o.hidden);
    s.layer_weight_bytes = 12 * h * h * sizeof(__half);  // QKV 3H^2, O H^2, up 4H^2, down 4H^2
    s.lm_head_bytes = static_cast<std::size_t>(vocab_size) * h * sizeof(__half);
    s.kv_cache_bytes = 2 * static_cast<std::size_t>(o.layers) * o.max_batch * s.max_context * h * sizeof(__half);
    const std::size_t rows = static_cast<std::size_t>(std::max(s.max_prefill_rows, o.max_batch));
    // x, delta, normed, attention out, eager scratch (H each), qkv (3H), mlp (4H).
    s.activation_bytes =
        rows * 12 * h * sizeof(__half) + 2 * static_cast<std::size_t>(o.max_batch) * vocab_size * sizeof(__half);
    return s;
  }
  [[nodiscard]] std::size_t total_bytes() const {
    return layer_weight_bytes + lm_head_bytes + kv_cache_bytes + activation_bytes;
  }
};

double gib(std::size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

// One step's plan, built by schedule() on the host.
struct step_plan {
  std::vector<int> decode_slots;      // row r of the decode batch is slots[decode_slots[r]]
  std::vector<int> completing_slots;  // requests whose prefill completes this step
  int prefill_rows = 0;               // prompt tokens prefilled this step
  double decode_context_tokens = 0;   // sum of the decode rows' contexts (for set_work)
};

class engine {
 public:
  explicit engine(const serving_options& o) : o_(o), shape_(model_shape::of(o)), slots_(o.max_batch) {
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    check_blas(cublasCreate(&cublas_), "cublasCreate");
    check_blas(cublasSetStream(cublas_, stream_), "cublasSetStream");
    allocate();
    graphs_.assign(static_cast<std::size_t>(o.max_batch) + 1, nullptr);
    for (int s = o.max_batch - 1; s >= 0; --s) free_slots_.push_back(s);
  }

  // Teardown errors are ignored: it runs after the report, and exit frees it all anyway.
  ~engine() {
    for (cudaGraphExec_t g : graphs_)
      if (g) cudaGraphExecDestroy(g);
    for (void* p : device_allocations_) cudaFree(p);
    cudaFreeHost(meta_host_);
    cudaFreeHost(tokens_host_);
    cublasDestroy(cublas_);
    cudaStreamDestroy(stream_);
  }

  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  [[nodiscard]] bool has_work() const { return !waiting_.empty() || active_ > 0; }
  [[nodiscard]] const std::vector<request_timing>& finished() const { return finished_; }
  [[nodiscard]] long steps() const { return steps_; }
  [[nodiscard]] double mean_decode_batch() const {
    return steps_with_decode_ ? decode_rows_total_ / steps_with_decode_ : 0;
  }
  [[nodiscard]] int graphs_captured() const { return graphs_captured_; }
  [[nodiscard]] const std::vector<step_record>& step_log() const { return step_log_; }

  // Loads every kernel and lets cuBLAS choose its algorithms before the measured run: a
  // 16-token prompt in slot 0 (overwritten later by a real request) and one decode row.
  void warm_up() {
    KSCOPE_SCOPE("warmup");
    row_meta* decode = decode_meta_host();
    row_meta* prefill = prefill_meta_host();
    // Positions 0..rows inclusive must fit in a slot and the prefill buffers.
    const int rows = std::max(1, std::min({16, shape_.max_prefill_rows, shape_.max_context - 1}));
    for (int i = 0; i < rows; ++i) prefill[i] = row_meta{0, i, i};
    last_rows_host()[0] = rows - 1;
    decode[0] = row_meta{0, rows, 7};
    check(cudaMemcpyAsync(meta_device_, meta_host_, meta_bytes(rows), cudaMemcpyHostToDevice, stream_), "warm-up H2D");
    embed_tokens<<<rows, 128, 0, stream_>>>(shape_.hidden, prefill_meta_device(), lm_head_, x_);
    check_launch("embed_tokens");
    run_layers(rows, prefill_meta_device(), false);
    prefill_logits(1);
    run_decode_kernels(1);
    argmax_rows<<<2, 256, 0, stream_>>>(vocab_size, 1, shape_.max_batch, logits_, tokens_device_);
    check_launch("argmax_rows");
    check(cudaStreamSynchronize(stream_), "warm-up");
  }

  // One iteration of the serving loop; see the file comment.
  void step(request_queue& queue) {
    const steady::time_point began = steady::now();  // the loop's own clock, not kscope's
    step_body(queue);
    step_us_.push_back(std::chrono::duration<double, std::micro>(steady::now() - began).count());
  }
  // Host time of every step, for what instrumenting the loop costs (bench/serving_overhead.sh).
  [[nodiscard]] const std::vector<double>& step_us() const { return step_us_; }

 private:
  void step_body(request_queue& queue) {
    KSCOPE_SCOPE("step");
    step_plan plan = schedule(queue);
    if (plan.prefill_rows > 0) prefill(plan);
    if (!plan.decode_slots.empty()) decode(plan);
    const int sampled = static_cast<int>(plan.decode_slots.size() + plan.completing_slots.size());
    if (sampled > 0) {
      kscope::scope s{"sampling", stream_};
      argmax_rows<<<sampled, 256, 0, stream_>>>(vocab_size, static_cast<int>(plan.decode_slots.size()),
                                                shape_.max_batch, logits_, tokens_device_);
      check_launch("argmax_rows");
    }
    {
      // Always synchronized, even with nothing to copy: the next step rewrites the pinned
      // metadata, which this step's H2D copy may still be reading.
      kscope::scope s{"d2h", stream_};
      if (sampled > 0)
        check(cudaMemcpyAsync(tokens_host_, tokens_device_, sampled * sizeof(int), cudaMemcpyDeviceToHost, stream_),
              "cudaMemcpyAsync (tokens D2H)");
      check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (end of step)");
    }
    retire(plan, queue);
    ++steps_;
  }

  // ---- memory ----
  template <class T>
  T* device_array(std::size_t count, const char* what) {
    void* p = nullptr;
    check(cudaMalloc(&p, count * sizeof(T)), what);
    device_allocations_.push_back(p);
    return static_cast<T*>(p);
  }

  void allocate() {
    KSCOPE_SCOPE("load_model");  // so the weight fills and cache memsets are not unscoped
    const std::size_t h = static_cast<std::size_t>(shape_.hidden);
    const std::size_t rows = static_cast<std::size_t>(std::max(shape_.max_prefill_rows, shape_.max_batch));
    // One layer's weights, used by every layer: at 4096 hidden they are 384 MiB, far past
    // the L2 (50-60 MiB), so each layer still streams them from DRAM as distinct weights
    // would, and --layers does not multiply the memory.
    w_qkv_ = device_array<__half>(3 * h * h, "cudaMalloc (QKV weights)");
    w_o_ = device_array<__half>(h * h, "cudaMalloc (O weights)");
    w_up_ = device_array<__half>(4 * h * h, "cudaMalloc (MLP up weights)");
    w_down_ = device_array<__half>(4 * h * h, "cudaMalloc (MLP down weights)");
    gamma_ = device_array<__half>(h, "cudaMalloc (norm weights)");
    lm_head_ = device_array<__half>(static_cast<std::size_t>(vocab_size) * h, "cudaMalloc (LM head)");
    const std::size_t kv_elements = shape_.kv_cache_bytes / 2 / sizeof(__half);
    k_cache_ = device_array<__half>(kv_elements, "cudaMalloc (K cache)");
    v_cache_ = device_array<__half>(kv_elements, "cudaMalloc (V cache)");
    x_ = device_array<__half>(rows * h, "cudaMalloc (residual)");
    delta_ = device_array<__half>(rows * h, "cudaMalloc (delta)");
    normed_ = device_array<__half>(rows * h, "cudaMalloc (normed)");
    attention_out_ = device_array<__half>(rows * h, "cudaMalloc (attention out)");
    scratch_ = device_array<__half>(rows * h, "cudaMalloc (scratch)");
    qkv_ = device_array<__half>(rows * 3 * h, "cudaMalloc (qkv)");
    mlp_ = device_array<__half>(rows * 4 * h, "cudaMalloc (mlp)");
    gathered_ = device_array<__half>(static_cast<std::size_t>(shape_.max_batch) * h, "cudaMalloc (gathered)");
    logits_ = device_array<__half>(2 * static_cast<std::size_t>(shape_.max_batch) * vocab_size, "cudaMalloc (logits)");
    tokens_device_ = device_array<int>(2 * static_cast<std::size_t>(shape_.max_batch), "cudaMalloc (tokens)");
    meta_device_ = device_array<unsigned char>(meta_bytes(shape_.max_prefill_rows), "cudaMalloc (metadata)");
    check(cudaMallocHost(&meta_host_, meta_bytes(shape_.max_prefill_rows)), "cudaMallocHost (metadata)");
    check(cudaMallocHost(&tokens_host_, 2 * sizeof(int) * shape_.max_batch), "cudaMallocHost (tokens)");
    if (o_.sync_in_step) host_logits_.resize(static_cast<std::size_t>(shape_.max_batch) * vocab_size);

    const auto fill = [&](__half* p, std::size_t n, std::size_t fan_in, unsigned seed) {
      fill_uniform<<<blocks_for(n, 256), 256, 0, stream_>>>(p, n, std::sqrt(3.0f / fan_in), 0.0f, seed);
      check_launch("fill_uniform");
    };
    fill(w_qkv_, 3 * h * h, h, 1);
    fill(w_o_, h * h, h, 2);
    fill(w_up_, 4 * h * h, h, 3);
    fill(w_down_, 4 * h * h, 4 * h, 4);
    fill(lm_head_, static_cast<std::size_t>(vocab_size) * h, h, 5);
    fill_uniform<<<blocks_for(h, 256), 256, 0, stream_>>>(gamma_, h, 0.0f, 1.0f, 6);
    check_launch("fill_uniform");
    // The cache's contents never matter for timing; zeros keep the softmax finite. Under
    // --large-kv the history positions stay zero: a prefix-cache hit, never prefilled.
    check(cudaMemsetAsync(k_cache_, 0, kv_elements * sizeof(__half), stream_), "cudaMemsetAsync (K cache)");
    check(cudaMemsetAsync(v_cache_, 0, kv_elements * sizeof(__half), stream_), "cudaMemsetAsync (V cache)");
    check(cudaStreamSynchronize(stream_), "initialization");
  }

  // The metadata buffer, pinned on the host and mirrored on the device at fixed offsets
  // (a captured decode graph keeps reading the same addresses): the decode rows, the
  // prefill rows that complete a prompt, then the prefill rows. One copy per step sends
  // what is used.
  [[nodiscard]] std::size_t last_rows_offset() const { return sizeof(row_meta) * shape_.max_batch; }
  [[nodiscard]] std::size_t prefill_offset() const { return last_rows_offset() + sizeof(int) * shape_.max_batch; }
  [[nodiscard]] std::size_t meta_bytes(int prefill_rows) const {
    return prefill_offset() + sizeof(row_meta) * static_cast<std::size_t>(prefill_rows);
  }
  row_meta* decode_meta_host() { return reinterpret_cast<row_meta*>(meta_host_); }
  int* last_rows_host() { return reinterpret_cast<int*>(meta_host_ + last_rows_offset()); }
  row_meta* prefill_meta_host() { return reinterpret_cast<row_meta*>(meta_host_ + prefill_offset()); }
  const row_meta* decode_meta_device() const { return reinterpret_cast<const row_meta*>(meta_device_); }
  const int* last_rows_device() const { return reinterpret_cast<const int*>(meta_device_ + last_rows_offset()); }
  const row_meta* prefill_meta_device() const {
    return reinterpret_cast<const row_meta*>(meta_device_ + prefill_offset());
  }

  // ---- kernels of a forward pass ----
  // Row-major Y[rows x out] = X[rows x in] W[in x out]: cuBLAS is column-major, so this is
  // Y^T = W^T X^T with nothing transposed in memory. fp16 in and out, fp32 accumulation.
  void gemm(int rows, int in_features, int out_features, const __half* x, int x_stride, const __half* w, __half* y) {
    const float alpha = 1.0f, beta = 0.0f;
    check_blas(cublasGemmEx(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, out_features, rows, in_features, &alpha, w, CUDA_R_16F,
                            out_features, x, CUDA_R_16F, x_stride, &beta, y, CUDA_R_16F, out_features,
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
  }

  // logits[rows x vocab] = x[rows x H] table^T, the table being [vocab x H] row-major.
  void lm_head(int rows, const __half* x, __half* logits) {
    const float alpha = 1.0f, beta = 0.0f;
    check_blas(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, vocab_size, rows, shape_.hidden, &alpha, lm_head_,
                            CUDA_R_16F, shape_.hidden, x, CUDA_R_16F, shape_.hidden, &beta, logits, CUDA_R_16F,
                            vocab_size, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx (LM head)");
  }

  // Every layer over `rows` rows of x_, leaving the final norm in normed_. Decode rows
  // attend over their KV cache; prefill leaves attention out (at these prompt lengths its
  // FLOPs are a few % of the GEMMs'), the O projection reading the queries instead.
  void run_layers(int rows, const row_meta* meta, bool decoding) {
    const int h = shape_.hidden;
    const std::size_t elements = static_cast<std::size_t>(rows) * h;
    const std::size_t slot_stride = static_cast<std::size_t>(shape_.max_context) * h;
    const std::size_t layer_stride = slot_stride * shape_.max_batch;
    for (int layer = 0; layer < shape_.layers; ++layer) {
      add_rmsnorm<<<rows, 256, 0, stream_>>>(h, x_, layer == 0 ? nullptr : delta_, gamma_, normed_);
      check_launch("add_rmsnorm");
      if (o_.launch_bound) {
        // An eager model's unfused elementwise ops; their results are never read.
        for (int i = 0; i < eager_kernels_per_layer; ++i) {
          eager_elementwise<<<blocks_for(elements, 256), 256, 0, stream_>>>(elements, normed_, scratch_, 1.0f);
          check_launch("eager_elementwise");
        }
      }
      gemm(rows, h, 3 * h, normed_, h, w_qkv_, qkv_);
      __half* k_layer = k_cache_ + layer * layer_stride;
      __half* v_layer = v_cache_ + layer * layer_stride;
      append_kv<<<rows, 128, 0, stream_>>>(h, qkv_, meta, k_layer, v_layer, slot_stride);
      check_launch("append_kv");
      if (decoding) {
        {
          // Attention is its own phase (as engines mark it), so its KV reads are measured
          // apart from the weight GEMMs. Not while capturing a graph: a host scope
          // opening inside the capture would split the graph's kernels between scopes.
          std::optional<kscope::scope> attention;
          if (!capturing_) attention.emplace("attention");
          decode_attention<<<dim3(shape_.heads, rows), attention_warps * 32, 0, stream_>>>(
              h, qkv_, k_layer, v_layer, slot_stride, meta, attention_out_);
          check_launch("decode_attention");
        }
        gemm(rows, h, h, attention_out_, h, w_o_, delta_);
      } else {
        gemm(rows, h, h, qkv_, 3 * h, w_o_, delta_);
      }
      add_rmsnorm<<<rows, 256, 0, stream_>>>(h, x_, delta_, gamma_, normed_);
      check_launch("add_rmsnorm");
      gemm(rows, h, 4 * h, normed_, h, w_up_, mlp_);
      silu_in_place<<<blocks_for(4 * elements, 256), 256, 0, stream_>>>(4 * elements, mlp_);
      check_launch("silu_in_place");
      gemm(rows, 4 * h, h, mlp_, 4 * h, w_down_, delta_);
      // A per-layer check left in from debugging: the host waits for the GPU, which then
      // idles until the next layer's launches reach it.
      if (decoding && o_.sync_in_step) check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (in decode)");
    }
    add_rmsnorm<<<rows, 256, 0, stream_>>>(h, x_, delta_, gamma_, normed_);
    check_launch("add_rmsnorm");
  }

  // The LM head over the last prompt token of each of `completing` requests, into logits
  // rows [max_batch, max_batch + completing).
  void prefill_logits(int completing) {
    if (completing == 0) return;
    gather_rows<<<completing, 128, 0, stream_>>>(shape_.hidden, normed_, last_rows_device(), gathered_);
    check_launch("gather_rows");
    lm_head(completing, gathered_, logits_ + static_cast<std::size_t>(shape_.max_batch) * vocab_size);
  }

  void run_decode_kernels(int rows) {
    embed_tokens<<<rows, 128, 0, stream_>>>(shape_.hidden, decode_meta_device(), lm_head_, x_);
    check_launch("embed_tokens");
    run_layers(rows, decode_meta_device(), true);
    lm_head(rows, normed_, logits_);
  }

  // ---- phases of a step ----
  step_plan schedule(request_queue& queue) {
    KSCOPE_SCOPE("schedule");
    queue.take_all(waiting_);
    // An eager engine's per-step host work (Python scheduling, building tensors): the GPU
    // has nothing queued meanwhile, since the previous step ended in a synchronize.
    if (o_.launch_bound) busy_wait_us(launch_bound_host_us);

    step_plan plan;
    row_meta* prefill_rows = prefill_meta_host();
    int* last_rows = last_rows_host();
    const int budget = shape_.max_prefill_rows;
    // Prompt tokens for the requests prefilling, oldest first: a chunk of at most the
    // budget per step (chunked prefill), or whole prompts under --interleave-prefill.
    const auto add_chunk = [&](request& r, int tokens) {
      for (int t = 0; t < tokens; ++t) {
        const int position = r.prefilled + t;
        const unsigned hash = (static_cast<unsigned>(r.id) * 2654435761u) ^ (static_cast<unsigned>(position) * 40503u);
        prefill_rows[plan.prefill_rows + t] =
            row_meta{r.slot, shape_.history + position, static_cast<int>(hash % vocab_size)};
      }
      plan.prefill_rows += tokens;
      r.prefilled += tokens;
      if (r.prefilled == r.prompt_tokens) {
        last_rows[plan.completing_slots.size()] = plan.prefill_rows - 1;
        plan.completing_slots.push_back(r.slot);
      }
    };
    for (int slot : prefilling_) {  // chunks of prompts begun in earlier steps
      request& r = *slots_[slot];
      const int tokens = std::min(r.prompt_tokens - r.prefilled, budget - plan.prefill_rows);
      if (tokens <= 0) break;
      add_chunk(r, tokens);
    }
    while (!waiting_.empty() && !free_slots_.empty() && plan.prefill_rows < budget) {
      request& next = *waiting_.front();
      // Interleaved prefill takes whole prompts only, as many as fit in the buffers.
      if (o_.interleave_prefill && plan.prefill_rows + next.prompt_tokens > budget) break;
      std::unique_ptr<request> r = std::move(waiting_.front());
      waiting_.pop_front();
      r->slot = free_slots_.back();
      free_slots_.pop_back();
      r->admitted = steady::now();
      r->queue.end();
      prefilling_.push_back(r->slot);
      const int slot = r->slot;
      slots_[slot] = std::move(r);
      ++active_;
      add_chunk(*slots_[slot], std::min(slots_[slot]->prompt_tokens, budget - plan.prefill_rows));
    }
    // Decode rows: every request that has its first token and is not done.
    row_meta* decode_rows = decode_meta_host();
    for (int slot = 0; slot < shape_.max_batch; ++slot) {
      const request* r = slots_[slot].get();
      if (r == nullptr || r->generated == 0) continue;
      const int position = shape_.history + r->prompt_tokens + r->generated - 1;  // of its last token
      decode_rows[plan.decode_slots.size()] = row_meta{slot, position, r->last_token};
      plan.decode_slots.push_back(slot);
      plan.decode_context_tokens += position + 1;
    }
    {
      kscope::scope s{"h2d", stream_};
      check(cudaMemcpyAsync(meta_device_, meta_host_, meta_bytes(plan.prefill_rows), cudaMemcpyHostToDevice, stream_),
            "cudaMemcpyAsync (metadata H2D)");
    }
    return plan;
  }

  void prefill(const step_plan& plan) {
    kscope::scope s{"prefill", stream_};
    s.tag("dtype", "fp16");  // placed under the fp16 tensor roof, not the fp32 default
    const double h = shape_.hidden, rows = plan.prefill_rows,
                 completing = static_cast<double>(plan.completing_slots.size());
    // Declared work for the roofline: 2 FLOPs per weight per token (12 H^2 weights a
    // layer), the weights read once per layer, the KV written, the LM head for the
    // completing requests. Activations are left out (small next to the weights).
    s.set_work({shape_.layers * rows * 24 * h * h + completing * 2 * h * vocab_size,
                shape_.layers * (static_cast<double>(shape_.layer_weight_bytes) + rows * 4 * h) +
                    (completing > 0 ? static_cast<double>(shape_.lm_head_bytes) : 0.0)});
    embed_tokens<<<plan.prefill_rows, 128, 0, stream_>>>(shape_.hidden, prefill_meta_device(), lm_head_, x_);
    check_launch("embed_tokens");
    run_layers(plan.prefill_rows, prefill_meta_device(), false);
    prefill_logits(static_cast<int>(plan.completing_slots.size()));
  }

  void decode(const step_plan& plan) {
    kscope::scope s{"decode", stream_};
    s.tag("dtype", "fp16");
    const int rows = static_cast<int>(plan.decode_slots.size());
    const double h = shape_.hidden, b = rows;
    // Weights per layer and the LM head once; K and V of every context position (fp16,
    // 4 H bytes per position and layer); attention is 4 H FLOPs per position and layer.
    s.set_work({shape_.layers * (b * 24 * h * h + 4 * h * plan.decode_context_tokens) + b * 2 * h * vocab_size,
                shape_.layers * (static_cast<double>(shape_.layer_weight_bytes) + 4 * h * plan.decode_context_tokens) +
                    static_cast<double>(shape_.lm_head_bytes)});
    // Graphs cannot hold the synchronizing calls of --sync-in-step, and --launch-bound is
    // the eager engine by definition.
    if (o_.graph && !o_.launch_bound && !o_.sync_in_step) {
      cudaGraphExec_t& exec = graphs_[rows];
      if (exec == nullptr) {
        // Captured inside this scope (no scope opens or closes during the capture, so
        // kscope makes no CUDA call meanwhile); the metadata rows are at fixed device
        // addresses, so one graph per batch size serves every later step.
        cudaGraph_t graph = nullptr;
        check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
        capturing_ = true;
        run_decode_kernels(rows);
        capturing_ = false;
        check(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
        check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
        check(cudaGraphDestroy(graph), "cudaGraphDestroy");
        ++graphs_captured_;
      }
      check(cudaGraphLaunch(exec, stream_), "cudaGraphLaunch");
    } else {
      run_decode_kernels(rows);
    }
    if (o_.sync_in_step) {
      // Logits copied to pageable memory "for logging": cudaMemcpy blocks the host and,
      // from pageable memory, stages through a driver buffer at a fraction of PCIe speed.
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (before logits copy)");
      check(cudaMemcpy(host_logits_.data(), logits_, static_cast<std::size_t>(rows) * vocab_size * sizeof(__half),
                       cudaMemcpyDeviceToHost),
            "cudaMemcpy (logits D2H)");
    }
  }

  // Hands each sampled token to its request; ends the ranges of first and last tokens.
  void retire(const step_plan& plan, request_queue& queue) {
    KSCOPE_SCOPE("retire");
    const steady::time_point now = steady::now();
    int finished_now = 0;
    const auto finish_if_done = [&](request& r) {
      if (r.generated < r.output_tokens) return;
      r.finished = now;
      r.life.end();
      const auto ms = [](steady::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
      finished_.push_back(
          request_timing{ms(r.admitted - r.arrival), ms(r.first_token - r.arrival),
                         r.output_tokens > 1 ? ms(r.finished - r.first_token) / (r.output_tokens - 1) : std::nan(""),
                         ms(r.finished - r.arrival), r.output_tokens, r.arrival, r.finished, r.admitted});
      free_slots_.push_back(r.slot);
      slots_[r.slot].reset();
      --active_;
      ++finished_now;
      if (o_.concurrency > 0) queue.mark_finished();  // frees its client (closed loop)
    };
    const std::size_t decoded = plan.decode_slots.size();
    for (std::size_t i = 0; i < decoded; ++i) {
      request& r = *slots_[plan.decode_slots[i]];
      r.last_token = tokens_host_[i];
      ++r.generated;
      finish_if_done(r);
    }
    for (std::size_t i = 0; i < plan.completing_slots.size(); ++i) {
      request& r = *slots_[plan.completing_slots[i]];
      r.last_token = tokens_host_[decoded + i];
      r.generated = 1;
      r.first_token = now;
      r.ttft.end();
      prefilling_.erase(std::find(prefilling_.begin(), prefilling_.end(), r.slot));
      finish_if_done(r);
    }
    if (decoded > 0) {
      decode_rows_total_ += static_cast<double>(decoded);
      ++steps_with_decode_;
    }
    step_log_.push_back(step_record{now, static_cast<int>(decoded + plan.completing_slots.size()),
                                    static_cast<int>(decoded), finished_now});
  }

  const serving_options& o_;
  const model_shape shape_;
  cublasHandle_t cublas_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::vector<void*> device_allocations_;
  __half *w_qkv_ = nullptr, *w_o_ = nullptr, *w_up_ = nullptr, *w_down_ = nullptr, *gamma_ = nullptr;
  __half *lm_head_ = nullptr, *k_cache_ = nullptr, *v_cache_ = nullptr;
  __half *x_ = nullptr, *delta_ = nullptr, *normed_ = nullptr, *attention_out_ = nullptr, *scratch_ = nullptr;
  __half *qkv_ = nullptr, *mlp_ = nullptr, *gathered_ = nullptr, *logits_ = nullptr;
  int* tokens_device_ = nullptr;
  unsigned char* meta_device_ = nullptr;
  unsigned char* meta_host_ = nullptr;
  int* tokens_host_ = nullptr;
  std::vector<__half> host_logits_;      // pageable on purpose (--sync-in-step)
  std::vector<cudaGraphExec_t> graphs_;  // decode graph per batch size
  int graphs_captured_ = 0;
  bool capturing_ = false;  // inside a decode graph's capture: no scopes open

  std::deque<std::unique_ptr<request>> waiting_;  // arrived, not admitted
  std::vector<std::unique_ptr<request>> slots_;   // admitted, by KV-cache slot
  std::vector<int> free_slots_;
  std::vector<int> prefilling_;  // slots whose prompt is not fully prefilled, oldest first
  int active_ = 0;
  std::vector<request_timing> finished_;
  std::vector<step_record> step_log_;
  std::vector<double> step_us_;
  long steps_ = 0, steps_with_decode_ = 0;
  double decode_rows_total_ = 0;
};

// ---- summary ------------------------------------------------------------------------------

// Percentile by linear interpolation between order statistics; NaNs are left out.
double percentile(std::vector<double> values, double p) {
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return std::isnan(v); }), values.end());
  if (values.empty()) return std::nan("");
  std::sort(values.begin(), values.end());
  const double at = p / 100.0 * static_cast<double>(values.size() - 1);
  const std::size_t below = static_cast<std::size_t>(at);
  const std::size_t above = std::min(below + 1, values.size() - 1);
  return values[below] + (at - static_cast<double>(below)) * (values[above] - values[below]);
}

void print_summary(const engine& e, double wall_s) {
  const std::vector<request_timing>& done = e.finished();
  std::vector<double> queue, ttft, tpot, latency;
  long long tokens = 0;
  steady::time_point first_arrival = steady::time_point::max(), last_finish = steady::time_point::min();
  for (const request_timing& t : done) {
    queue.push_back(t.queue_ms);
    ttft.push_back(t.ttft_ms);
    tpot.push_back(t.tpot_ms);
    latency.push_back(t.latency_ms);
    tokens += t.output_tokens;
    first_arrival = std::min(first_arrival, t.arrival);
    last_finish = std::max(last_finish, t.finished);
  }
  const double span_s = done.empty() ? 0 : std::chrono::duration<double>(last_finish - first_arrival).count();
  std::printf("\nserving summary (host timestamps)\n");
  std::printf("  requests done      %zu in %.2f s (first arrival to last token; %.2f s with start-up)\n", done.size(),
              span_s, wall_s);
  std::printf("  throughput         %.0f output tokens/s, %.1f requests/s\n", span_s > 0 ? tokens / span_s : 0.0,
              span_s > 0 ? done.size() / span_s : 0.0);
  std::printf("  steps              %ld, mean decode batch %.1f\n", e.steps(), e.mean_decode_batch());
  // p50 and p99 in ms; "-" when no request has the value (TPOT needs two output tokens).
  const auto line = [](const char* name, const std::vector<double>& values) {
    const double p50 = percentile(values, 50), p99 = percentile(values, 99);
    if (std::isnan(p50))
      std::printf("  %-18s -\n", name);
    else
      std::printf("  %-18s p50 %8.3f ms   p99 %8.3f ms\n", name, p50, p99);
  };
  line("TTFT", ttft);
  line("TPOT", tpot);
  line("queue", queue);
  line("request latency", latency);
  // The steady steps: the first and last tenth (batch filling, draining) left out.
  const std::vector<double>& all = e.step_us();
  if (all.size() >= 10) {
    const std::vector<double> steady_steps(all.begin() + all.size() / 10, all.end() - all.size() / 10);
    double sum = 0;
    for (double v : steady_steps) sum += v;
    std::printf("  step time          mean %.1f us   p50 %.1f us   p99 %.1f us   max %.1f us   (%zu steady steps of %zu)\n",
                sum / steady_steps.size(), percentile(steady_steps, 50), percentile(steady_steps, 99),
                *std::max_element(steady_steps.begin(), steady_steps.end()), steady_steps.size(), all.size());
  }
}

// What the GPU ran per step, from kscope's attribution (CUPTI collecting): kernels of
// every scope under "step", and how many of them were replayed from graphs.
void print_gpu_work_per_step(const kscope::session_report& report) {
  std::uint64_t steps = 0, kernels = 0, copies = 0;
  for (const kscope::scope_report& s : report.scopes) {
    if (s.path == "step") steps = s.calls;
    if (s.path != "step" && s.path.rfind("step/", 0) != 0) continue;
    if (!s.gpu_activity) continue;
    kernels += s.gpu_activity->kernel_count;
    for (const kscope::copy_totals& c : s.gpu_activity->memcpy) copies += c.count;
  }
  if (!report.cupti_status.empty()) std::printf("  CUPTI              %s\n", report.cupti_status.c_str());
  if (steps == 0 || kernels == 0) return;
  std::printf("  GPU work per step  %.1f kernels, %.1f copies (CUPTI, %llu steps)\n", double(kernels) / steps,
              double(copies) / steps, static_cast<unsigned long long>(steps));
}

// ---- one run of the loop ------------------------------------------------------------------

// Serves o.requests requests on a warmed-up engine: the clients on their own thread, the
// engine loop on this one, until every request is done.
void serve(const serving_options& o, engine& e) {
  request_queue queue;
  std::thread producer(produce_requests, std::cref(o), std::ref(queue));
  for (;;) {
    if (!e.has_work()) {
      KSCOPE_SCOPE("wait_for_requests");
      if (!queue.wait_for_request()) break;  // all requests served
    }
    e.step(queue);
  }
  producer.join();
}

// ---- sweeps -------------------------------------------------------------------------------
//
// Each point is one run of the loop on a fresh engine (its KV cache is sized by the
// point). The loop is steady between the first finish (before it the batch was filling)
// and the last arrival (after it the batch drains). Warm-up: the requests that arrived
// before the first finish; they are left out of everything. TTFT: every other request.
// TPOT: those of them that also finished by the last arrival, since a request still
// decoding then ran its last tokens in a shrinking batch with no prefill beside it, which
// makes its TPOT faster than the steady loop's. Throughput and the mean decode batch:
// the steps that ended in the window from the first measured arrival to the last arrival.

constexpr double nan_value = std::numeric_limits<double>::quiet_NaN();
// Closed loop: 6 requests per client, so a batch of 32 leaves 160 for TTFT and about 128
// for TPOT after warm-up (the first wave) and the drain (the last), enough for a p99.
constexpr int closed_loop_requests_per_client = 6;
constexpr int closed_loop_min_requests = 8;
constexpr double rate_point_arrival_s = 1.5;  // rate set: requests = rate x this, ...
constexpr int rate_point_min_requests = 140;  // ... and at least this many

// What one point measured.
struct point_measurement {
  std::size_t warmup = 0;                // arrived before the first request finished
  std::vector<double> ttft_ms;           // the others'
  std::vector<double> tpot_ms;           // of those, the ones that finished by the last arrival (2+ tokens)
  double window_s = nan_value;           // first measured arrival -> last arrival
  double tokens_per_s = nan_value, requests_per_s = nan_value, mean_decode_batch = nan_value;
  std::string no_window;                 // why there is no window, when there is none
  int waiting_at_last_arrival = 0;       // arrived but not admitted into a slot yet
};

point_measurement measure(const engine& e) {
  point_measurement m;
  const std::vector<request_timing>& done = e.finished();
  if (done.empty()) {
    m.no_window = "no request finished";
    return m;
  }
  steady::time_point first_finish = steady::time_point::max(), last_arrival = steady::time_point::min();
  for (const request_timing& t : done) {
    first_finish = std::min(first_finish, t.finished);
    last_arrival = std::max(last_arrival, t.arrival);
  }
  steady::time_point window_start = steady::time_point::max();
  for (const request_timing& t : done) {
    if (t.arrival < first_finish) {
      ++m.warmup;
      continue;
    }
    m.ttft_ms.push_back(t.ttft_ms);
    if (t.finished <= last_arrival && std::isfinite(t.tpot_ms)) m.tpot_ms.push_back(t.tpot_ms);  // NaN: 1 token
    window_start = std::min(window_start, t.arrival);
    if (t.admitted > last_arrival) ++m.waiting_at_last_arrival;
  }
  if (m.ttft_ms.size() < 2 || !(window_start < last_arrival)) {
    m.no_window = "fewer than 2 requests arrived after the first one finished: no window to measure in";
    return m;
  }
  double tokens = 0, finished = 0, decode_rows = 0, decode_steps = 0;
  for (const step_record& step : e.step_log()) {
    if (step.end <= window_start || step.end > last_arrival) continue;
    tokens += step.tokens;
    finished += step.finished;
    if (step.decode_rows > 0) {
      decode_rows += step.decode_rows;
      ++decode_steps;
    }
  }
  m.window_s = std::chrono::duration<double>(last_arrival - window_start).count();
  m.tokens_per_s = tokens / m.window_s;
  m.requests_per_s = finished / m.window_s;
  if (decode_steps > 0) m.mean_decode_batch = decode_rows / decode_steps;
  return m;
}

// Columns of every sweep table, in order; point_values() follows it.
const std::vector<kscope::sweep_metric>& sweep_metrics() {
  static const std::vector<kscope::sweep_metric> metrics = {
      {"requests", "", "requests"},
      {"warmup", "", "warm-up"},
      {"tpot_requests", "", "TPOT requests"},
      {"ttft_p50_ms", "ms", "TTFT p50"},
      {"ttft_p99_ms", "ms", "TTFT p99"},
      {"tpot_p50_ms", "ms", "TPOT p50"},
      {"tpot_p99_ms", "ms", "TPOT p99"},
      {"output_tokens_per_s", "tokens/s", "throughput"},
      {"requests_per_s", "requests/s", "throughput"},
      {"decode_batch", "", "mean decode batch"},
      {"window_s", "s", "window"},
  };
  return metrics;
}

std::vector<kscope::sweep_value> point_values(const point_measurement& m) {
  using kscope::sweep_value;
  const auto windowed = [&](double v) { return m.no_window.empty() ? sweep_value::of(v) : sweep_value::absent(m.no_window); };
  return {sweep_value::of(static_cast<double>(m.ttft_ms.size())),
          sweep_value::of(static_cast<double>(m.warmup)),
          sweep_value::of(static_cast<double>(m.tpot_ms.size())),
          kscope::quantile_value(m.ttft_ms, 0.50, 0.95, "requests"),
          kscope::quantile_value(m.ttft_ms, 0.99, 0.95, "requests"),
          kscope::quantile_value(m.tpot_ms, 0.50, 0.95, "requests"),
          kscope::quantile_value(m.tpot_ms, 0.99, 0.95, "requests"),
          windowed(m.tokens_per_s),
          windowed(m.requests_per_s),
          m.no_window.empty() && std::isnan(m.mean_decode_batch) ? sweep_value::absent("no decode step in the window")
                                                                 : windowed(m.mean_decode_batch),
          windowed(m.window_s)};
}

// The options of one point: the base options with the point's values.
serving_options options_at(const serving_options& base, const kscope::sweep_point& p) {
  serving_options o = base;
  if (p.has("batch")) o.max_batch = static_cast<int>(p.integer("batch"));
  if (p.has("clients")) o.concurrency = static_cast<int>(p.integer("clients"));
  if (p.has("rate")) o.rate_per_s = p.real("rate"), o.concurrency = 0;
  if (p.has("prompt")) o.prompt_tokens = static_cast<int>(p.integer("prompt"));
  if (p.has("output")) o.output_tokens = static_cast<int>(p.integer("output"));
  if (!base.requests_given) {
    o.requests = o.concurrency > 0
                     ? std::max(closed_loop_min_requests, closed_loop_requests_per_client * o.concurrency)
                     : static_cast<int>(std::clamp(std::ceil(o.rate_per_s * rate_point_arrival_s),
                                                   static_cast<double>(rate_point_min_requests), 1e7));
  }
  return o;
}

// The command line that runs one point alone, with the full kscope report and diagnosis.
std::string command_line(const serving_options& o) {
  std::string s = "serving --batch " + std::to_string(o.max_batch) + " --prompt " + std::to_string(o.prompt_tokens) +
                  " --output " + std::to_string(o.output_tokens) + " --requests " + std::to_string(o.requests);
  s += o.concurrency > 0 ? " --concurrency " + std::to_string(o.concurrency)
                         : " --rate " + kscope::param_value(o.rate_per_s).to_string();
  if (o.layers != 8) s += " --layers " + std::to_string(o.layers);
  if (o.hidden != 4096) s += " --hidden " + std::to_string(o.hidden);
  if (o.graph) s += " --graph";
  if (o.launch_bound) s += " --launch-bound";
  if (o.sync_in_step) s += " --sync-in-step";
  if (o.interleave_prefill) s += " --interleave-prefill";
  if (o.large_kv) s += " --large-kv";
  return s;
}

// The points of a set: the swept axis first (it is the plot's x), then the fixed sizes.
kscope::sweep make_sweep(const std::string& set, const serving_options& base) {
  using kscope::axis;
  using kscope::sweep;
  std::vector<double> given = base.sweep_points;
  for (const sweep_set& s : sweep_sets())
    if (set == s.name && given.empty()) given = s.default_points;
  std::vector<long long> integers;
  for (double v : given) integers.push_back(static_cast<long long>(v));
  const long long batch = base.max_batch, prompt = base.prompt_tokens, output = base.output_tokens;
  if (set == "batch")  // one client per slot: the batch stays full
    return sweep::zip({axis("batch", integers), axis("clients", integers)}) *
           sweep::cartesian({axis("prompt", {prompt}), axis("output", {output})});
  if (set == "seq")
    return sweep::cartesian({axis("prompt", integers)}) *
           sweep::cartesian({axis("batch", {batch}), axis("clients", {batch}), axis("output", {output})});
  return sweep::cartesian({axis("rate", given)}) *
         sweep::cartesian({axis("batch", {batch}), axis("prompt", {prompt}), axis("output", {output})});
}

std::string set_title(const std::string& set) {
  if (set == "batch") return "serving sweep: batch size (closed loop, one client per batch slot)";
  if (set == "seq") return "serving sweep: prompt length (closed loop, one client per batch slot)";
  return "serving sweep: request rate (open loop, Poisson arrivals)";
}

// Runs one set, prints its table and writes its files. Returns 1 when a file could not
// be written, else 0.
int run_sweep_set(const std::string& set, const serving_options& base, const std::string& device) {
  const kscope::sweep points = make_sweep(set, base);
  kscope::sweep_results results;
  results.title = set_title(set);
  results.metrics = sweep_metrics();
  const bool graph = base.graph && !base.launch_bound && !base.sync_in_step;
  results.context = {
      device,
      "model: " + std::to_string(base.layers) + " layers, hidden " + std::to_string(base.hidden) +
          ", fp16; decode " + (graph ? "as CUDA graphs" : "eager") + "; pathologies:" +
          (base.launch_bound ? " launch-bound" : "") + (base.sync_in_step ? " sync-in-step" : "") +
          (base.interleave_prefill ? " interleave-prefill" : "") + (base.large_kv ? " large-kv" : "") +
          (base.launch_bound || base.sync_in_step || base.interleave_prefill || base.large_kv ? "" : " none"),
      std::string("arrivals: ") +
          (set == "rate" ? "Poisson at each rate (open loop)"
                         : "clients = batch slots, each sending its next request when its last one is done (closed "
                           "loop)") +
          "; requests per point: " +
          (base.requests_given ? std::to_string(base.requests)
                               : set == "rate" ? "1.5 s of arrivals, at least 140" : "6 per client, at least 8") +
          "; prompt and output lengths drawn from [L/2, 3L/2] around the means",
      "warm-up: requests that arrived before the first request finished (the batch was filling), left out of "
      "every column; requests: the others",
      "TTFT: arrival to first token copied back, per request; TPOT: (last token - first token) / (output - 1), per "
      "request that also finished by the last arrival (TPOT requests; later ones decoded in the draining batch)",
      "throughput and mean decode batch: over the steps that ended in the window, from the first measured arrival "
      "to the last arrival (the drain after it is left out)",
      "kscope: scopes on, CUPTI off (a single run enables CUPTI, about 1 us more per launch)",
  };
  std::printf("\n%s: %zu points\n", results.title.c_str(), points.size());
  std::fflush(stdout);

  for (std::size_t i = 0; i < points.size(); ++i) {
    const kscope::sweep_point& p = points[i];
    const serving_options o = options_at(base, p);
    const std::string name = p.label();
    const model_shape shape = model_shape::of(o);
    std::size_t free_bytes = 0, total_bytes = 0;
    check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    if (shape.total_bytes() > free_bytes) {
      const std::string why = "not run: needs " + two_decimals(gib(shape.total_bytes())) +
                              " GiB of GPU memory, " + two_decimals(gib(free_bytes)) + " GiB free";
      std::printf("[%zu/%zu] %s: %s\n", i + 1, points.size(), name.c_str(), why.c_str());
      results.add(p, std::vector<kscope::sweep_value>(results.metrics.size(), kscope::sweep_value::absent(why)));
      continue;
    }
    const steady::time_point start = steady::now();
    kscope::session::global().reset();  // this point's scopes only
    point_measurement m;
    long steps = 0;
    {
      engine e(o);
      e.warm_up();
      serve(o, e);
      m = measure(e);
      steps = e.steps();
    }
    const double wall_s = std::chrono::duration<double>(steady::now() - start).count();
    std::vector<std::string> notes;
    if (m.waiting_at_last_arrival > o.max_batch)
      notes.push_back(std::to_string(m.waiting_at_last_arrival) +
                      " measured requests were still waiting for a slot at the last arrival (more than the batch "
                      "of " + std::to_string(o.max_batch) +
                      "): arrivals outpace the loop, so TTFT grows with the run's length");
    std::printf("[%zu/%zu] %s: %d requests: %zu warm-up, %zu measured (%zu finished by the last arrival: TPOT); "
                "window %s s; %ld steps; %.2f s\n",
                i + 1, points.size(), name.c_str(), o.requests, m.warmup, m.ttft_ms.size(), m.tpot_ms.size(),
                m.no_window.empty() ? two_decimals(m.window_s).c_str() : "n/a", steps, wall_s);
    std::printf("      alone: %s\n", command_line(o).c_str());
    for (const std::string& n : notes) std::printf("      note: %s\n", n.c_str());
    std::fflush(stdout);
    results.add(p, point_values(m), notes);
  }

  std::printf("\n%s", results.markdown().c_str());
  kscope::sweep_plot_options plot;
  plot.title = results.title;
  plot.x_axis = set == "batch" ? "batch" : set == "seq" ? "prompt" : "rate";
  plot.panels = {{"ttft_p50_ms", "ttft_p99_ms"}, {"tpot_p50_ms", "tpot_p99_ms"}, {"output_tokens_per_s"}, {"requests_per_s"}};
  const std::string stem = "serving_sweep_" + set;
  const std::pair<std::string, std::string> files[] = {{stem + ".md", results.markdown()},
                                                       {stem + ".csv", results.csv()},
                                                       {stem + ".json", results.json()},
                                                       {stem + ".svg", kscope::sweep_svg(results, plot)}};
  int status = 0;
  std::string written;
  for (const auto& [path, text] : files) {
    std::string error;
    if (kscope::write_text_file(path, text, &error)) {
      written += (written.empty() ? "" : ", ") + path;
    } else {
      std::fprintf(stderr, "serving: %s\n", error.c_str());
      status = 1;
    }
  }
  if (!written.empty()) std::printf("\nwrote %s (plot: %s.svg)\n", written.c_str(), stem.c_str());
  std::fflush(stdout);
  return status;
}

int run_sweeps(const serving_options& base) {
  const steady::time_point start = steady::now();
  const std::string device = kscope::describe(kscope::query_device(0));
  int status = 0;
  for (const sweep_set& set : sweep_sets())
    if (base.sweep == "all" || base.sweep == set.name) status |= run_sweep_set(set.name, base, device);
  std::printf("\nsweeps done in %.1f s\n", std::chrono::duration<double>(steady::now() - start).count());
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  serving_options o;
  if (const int status = parse_command_line(argc, argv, o); status >= 0) return status;

  // Without a GPU there is nothing to serve; exit 0 so that a CI machine can run this.
  // (In kscope's words: no driver, no device or a driver too old, not the runtime's error.)
  if (const kscope::gpu_availability& gpu = kscope::probe_gpu(); !gpu.available()) {
    std::printf("serving: no CUDA device (%s); this example needs a GPU, nothing to do.\n", gpu.message.c_str());
    return 0;
  }
  if (!o.sweep.empty()) return run_sweeps(o);

  const steady::time_point start = steady::now();
  const model_shape shape = model_shape::of(o);
  std::size_t free_bytes = 0, total_bytes = 0;
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  if (shape.total_bytes() > free_bytes)
    fail("needs " + std::to_string(gib(shape.total_bytes())) + " GiB of GPU memory, " +
         std::to_string(gib(free_bytes)) + " GiB free: lower --batch, --layers, --hidden, --prompt or --output");
  const bool graph = o.graph && !o.launch_bound && !o.sync_in_step;
  if (o.concurrency > 0)
    std::printf("serving: %d requests from %d clients (closed loop), batch <= %d, prompt ~%d, output ~%d tokens%s\n",
                o.requests, o.concurrency, o.max_batch, o.prompt_tokens, o.output_tokens,
                o.large_kv ? (", history " + std::to_string(shape.history) + " cached tokens").c_str() : "");
  else
    std::printf("serving: %d requests at %g/s, batch <= %d, prompt ~%d, output ~%d tokens%s\n", o.requests,
                o.rate_per_s, o.max_batch, o.prompt_tokens, o.output_tokens,
                o.large_kv ? (", history " + std::to_string(shape.history) + " cached tokens").c_str() : "");
  std::printf("  model: %d layers, hidden %d (%d heads), vocab %d, fp16; decode %s\n", o.layers, o.hidden, shape.heads,
              vocab_size, graph ? "as CUDA graphs" : "eager");
  std::printf("  GPU memory %.2f GiB: weights %.2f, KV cache %.2f (%d slots x %d positions), activations %.2f\n",
              gib(shape.total_bytes()), gib(shape.layer_weight_bytes + shape.lm_head_bytes), gib(shape.kv_cache_bytes),
              o.max_batch, shape.max_context, gib(shape.activation_bytes));
  std::printf("  pathologies:%s%s%s%s%s\n", o.launch_bound ? " launch-bound" : "",
              o.sync_in_step ? " sync-in-step" : "", o.interleave_prefill ? " interleave-prefill" : "",
              o.large_kv ? " large-kv" : "",
              o.launch_bound || o.sync_in_step || o.interleave_prefill || o.large_kv ? "" : " none");
  if (o.graph && !graph)
    std::printf("  note: --graph ignored: %s\n", o.launch_bound
                                                     ? "--launch-bound decodes eagerly"
                                                     : "--sync-in-step's synchronizations cannot be captured");
  if (o.concurrency > 0 && o.rate_given) std::printf("  note: --rate unused: --concurrency runs a closed loop\n");
  std::fflush(stdout);

  kscope::session& session = kscope::session::global();
  // Every kernel and copy is then attributed to the scope that launched it.
  session.enable_cupti();
  engine e(o);
  e.warm_up();
  if (o.metric_sampling && !session.enable_metric_sampling({}, {"step"}))
    std::printf("  note: metric sampling did not start (the report's warnings say why)\n");

  serve(o, e);
  if (o.metric_sampling) session.disable_metric_sampling();
  const double wall_s = std::chrono::duration<double>(steady::now() - start).count();

  const kscope::session_report report = session.report();
  if (!o.quiet) std::fputs(report.text().c_str(), stdout);
  print_summary(e, wall_s);
  print_gpu_work_per_step(report);
  if (e.graphs_captured() > 0)
    std::printf("  decode graphs      %d captured (one per batch size seen)\n", e.graphs_captured());
  // What kscope concludes from the report alone, each finding with its numbers.
  std::printf("\n%s", kscope::diagnosis_text(kscope::diagnose(report), report).c_str());
  int status = 0;
  std::string error;
  if (!o.json_path.empty() && !report.write_json(o.json_path, &error)) {
    std::fprintf(stderr, "serving: %s\n", error.c_str());
    status = 1;
  }
  if (!o.trace_path.empty() && !session.write_trace(o.trace_path, &error)) {
    std::fprintf(stderr, "serving: %s\n", error.c_str());
    status = 1;
  }
  return status;
}
