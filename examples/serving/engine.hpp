// The serving engine of examples/serving.cu: the clients (a producer thread), the request
// queue, the model (cuBLAS GEMMs and the kernels of engine_kernels.cuh), the scheduler and
// the step loop. Its only kscope code is the markers of its phases, where they run:
//
//   produce_requests()         start_range "request", "queue", "ttft"; KSCOPE_SCOPE("tokenize")
//   engine::warm_up()          KSCOPE_SCOPE("warmup")
//   engine::step_body()        KSCOPE_SCOPE("step"); kscope::scope "sampling", "d2h" (stream)
//   engine::allocate()         KSCOPE_SCOPE("load_model")
//   engine::run_layers()       kscope::scope "attention" (decode, not while capturing a graph)
//   engine::schedule()         KSCOPE_SCOPE("schedule"); kscope::scope "h2d" (stream);
//                              the "queue" range ends
//   engine::prefill()          kscope::scope "prefill" (stream), with tag and set_work
//   engine::decode()           kscope::scope "decode" (stream), with tag and set_work
//   engine::retire()           KSCOPE_SCOPE("retire"); the "ttft" and "request" ranges end
//   serve()                    KSCOPE_SCOPE("wait_for_requests")
//
// Everything else kscope does (the session, CUPTI, the report, the sweeps) is in serving.cu,
// report.hpp and sweep.hpp.
#pragma once

#include "engine_kernels.cuh"
#include "options.hpp"

#include <kscope/kscope.hpp>

#include <cublas_v2.h>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using steady = std::chrono::steady_clock;

// ---- sizes that are not knobs -------------------------------------------------------

// head_dim (128, heads = hidden / 128) is in engine_kernels.cuh, with the attention kernel.
constexpr int vocab_size = 32000;              // Llama-2's vocabulary
constexpr int prefill_token_budget = 512;      // chunked prefill: prompt tokens per step
constexpr int interleave_token_cap = 16384;    // --interleave-prefill: bounds activations
constexpr int large_kv_history_tokens = 4096;  // --large-kv: cached conversation history
constexpr int eager_kernels_per_layer = 8;     // --launch-bound: unfused elementwise ops
// --launch-bound: host work per step. 1 ms, about the step's GPU time at hidden 1024, so
// the GPU idles most of the step on any host; with 300 us the GPU's busy share went from
// 46 % to 56 % between two H200 hosts whose CPUs launch at different speeds.
constexpr double launch_bound_host_us = 1000;
constexpr unsigned request_seed = 2026;        // same requests every run

// ---- errors ---------------------------------------------------------------------------

[[noreturn]] void fail(const std::string& what) {
  std::fflush(stdout);
  std::fprintf(stderr, "serving: %s\n", what.c_str());
  std::exit(1);
}

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) fail(std::string(what) + ": " + cudaGetErrorString(status));
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

  // One iteration of the serving loop; see the comment at the top of serving.cu.
  void step(request_queue& queue) {
    const steady::time_point began = steady::now();  // the loop's own clock, not kscope's
    step_body(queue);
    trace_window_boundary();  // after the step scope closed: a traced step lies whole inside its window
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

  // --trace-steps W/P: after a step (synchronized: the GPU has drained), this thread, the
  // one that launches, pauses tracing after W steps of every P and resumes it at the next
  // period. kscope's report then says which figures rest on traced windows.
  void trace_window_boundary() {
#if !defined(KSCOPE_DISABLE)
    if (o_.trace_period_steps <= 0) return;
    const long in_period = steps_ % o_.trace_period_steps;
    if (in_period == o_.traced_steps) (void)kscope::cupti_collector::global().pause_tracing();
    else if (in_period == 0) (void)kscope::cupti_collector::global().resume_tracing();
#endif
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
    if (o_.sync_in_step || o_.pageable_copy) host_logits_.resize(static_cast<std::size_t>(shape_.max_batch) * vocab_size);

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
    } else if (o_.pageable_copy) {
      // The same logits "for logging", the way many loops do it: an async copy on the step's
      // stream into a std::vector. From pageable memory the driver stages it through a
      // pinned buffer, so the host waits for it anyway, at a fraction of the link's speed.
      KSCOPE_SCOPE_STREAM("logits_d2h", stream_);
      check(cudaMemcpyAsync(host_logits_.data(), logits_, static_cast<std::size_t>(rows) * vocab_size * sizeof(__half),
                            cudaMemcpyDeviceToHost, stream_),
            "cudaMemcpyAsync (logits D2H, pageable)");
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

}  // namespace
