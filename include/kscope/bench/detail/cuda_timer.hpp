// kscope/bench/detail/cuda_timer.hpp — the platform edge of the benchmark harness: the
// CUDA-event timer behind kscope::bench, its clock-probe kernel, kernel resource queries,
// and the host name and time a bench_context records.
//
// The data these fill (bench_context, kernel_resources) is plain and lives in
// ../result.hpp, so results can be read and written on a CPU-only machine; everything
// here that calls CUDA is behind KSCOPE_HAS_CUDA. Only the runtime is used: the
// clock-probe kernel is PTX text loaded with cudaLibraryLoadData, so g++-compiled
// programs get it too and nothing links libcuda.
#pragma once

#include "../../core/config.hpp"
#include "../../core/detail/once.hpp"
#include "../../core/detail/utc_time.hpp"
#include "../result.hpp"
#include "../sampler.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <exception>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#if KSCOPE_HAS_CUDA
#  include <cuda_runtime_api.h>
#endif
#if defined(__has_include)
#  if __has_include(<unistd.h>)
#    include <unistd.h>
#    define KSCOPE_DETAIL_HAS_UNISTD 1
#  endif
#endif

namespace kscope {

namespace detail {
namespace harness {

// Not gmtime_r: its libc lock, held by a thread a fork leaves behind, hangs the child.
KSCOPE_DECL std::string utc_timestamp();

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string utc_timestamp() { return utc_timestamp_text(std::time(nullptr)); }
#endif  // KSCOPE_DETAIL_DEFINITIONS

KSCOPE_DECL std::string host_name();

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string host_name() {
#if defined(KSCOPE_DETAIL_HAS_UNISTD)
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) == 0) return buf;
#endif
  return {};
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_HAS_CUDA

KSCOPE_DECL std::string cuda_message(cudaError_t e, const char* what);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string cuda_message(cudaError_t e, const char* what) {
  return std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The clock probe / hold kernel, in PTX so that it needs neither nvcc nor libcuda.
//   kscope_clock_probe(flag, min_ns, timeout_ns, out)
// One thread. It starts on an edge of %globaltimer (whose ticks can be as coarse as
// 1 us; starting and ending on an edge removes that quantization), then spins for at
// least min_ns and, when `flag` is not null, until the host stores a non-zero word
// there. It ends on the next edge and writes {SM cycles, ns, timed_out} to out[0..2].
// timeout_ns bounds the spin (and a cycle count bounds each edge wait) so a host that
// never releases the flag — e.g. a callable that synchronizes its stream — costs one
// timeout, never a hang. cycles * 1000 / ns is the SM clock in MHz.
inline constexpr const char* clock_probe_ptx = R"PTX(
.version 7.0
.target sm_70
.address_size 64

.visible .entry kscope_clock_probe(
    .param .u64 param_flag,
    .param .u64 param_min_ns,
    .param .u64 param_timeout_ns,
    .param .u64 param_out)
{
    .reg .pred p<4>;
    .reg .b32 f;
    .reg .b64 flag, min_ns, timeout_ns, out, t, t_prev, t0, t1, c, c_start, c0, c1, d, timed_out;

    ld.param.u64 flag, [param_flag];
    ld.param.u64 min_ns, [param_min_ns];
    ld.param.u64 timeout_ns, [param_timeout_ns];
    ld.param.u64 out, [param_out];
    mov.u64 timed_out, 0;
    mov.u64 c_start, %clock64;

    mov.u64 t_prev, %globaltimer;
WAIT_FIRST_EDGE:
    mov.u64 t0, %globaltimer;
    mov.u64 c0, %clock64;
    sub.u64 d, c0, c_start;
    setp.gt.u64 p1, d, 100000000;
    @p1 bra GIVE_UP;
    setp.eq.u64 p0, t0, t_prev;
    @p0 bra WAIT_FIRST_EDGE;

SPIN:
    mov.u64 t, %globaltimer;
    sub.u64 d, t, t0;
    setp.ge.u64 p1, d, timeout_ns;
    @p1 bra GIVE_UP;
    setp.lt.u64 p2, d, min_ns;
    @p2 bra SPIN;
    setp.eq.u64 p3, flag, 0;
    @p3 bra LAST_EDGE;
    ld.volatile.u32 f, [flag];
    setp.eq.u32 p2, f, 0;
    @p2 bra SPIN;

LAST_EDGE:
    mov.u64 t_prev, %globaltimer;
    mov.u64 c_start, %clock64;
WAIT_LAST_EDGE:
    mov.u64 t1, %globaltimer;
    mov.u64 c1, %clock64;
    sub.u64 d, c1, c_start;
    setp.gt.u64 p1, d, 100000000;
    @p1 bra GIVE_UP;
    setp.eq.u64 p0, t1, t_prev;
    @p0 bra WAIT_LAST_EDGE;
    bra DONE;

GIVE_UP:
    mov.u64 timed_out, 1;
    mov.u64 t1, %globaltimer;
    mov.u64 c1, %clock64;
DONE:
    sub.u64 c, c1, c0;
    sub.u64 d, t1, t0;
    st.volatile.u64 [out], c;
    st.volatile.u64 [out+8], d;
    st.volatile.u64 [out+16], timed_out;
    ret;
}
)PTX";

struct clock_probe_kernel {
  cudaKernel_t kernel = nullptr;
  std::string error;  // why it is unavailable
};

// Loaded once per process and never unloaded: unloading from a static destructor could
// run after the CUDA runtime has shut down. A fork during the load waits for it, and the
// child never inherits it half-done (core/detail/once.hpp).
KSCOPE_DECL const clock_probe_kernel& clock_probe();

KSCOPE_DECL kernel_resources query_resources(const void* function, int block_threads, std::size_t dynamic_smem_bytes);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const clock_probe_kernel& clock_probe() {
  static lazy_global<const clock_probe_kernel> probe{lock_rank::init_code_loading};
  return probe.get([] {
    auto* kept = new clock_probe_kernel;
    clock_probe_kernel& p = *kept;
    cudaLibrary_t library = nullptr;
    cudaError_t e = cudaLibraryLoadData(&library, clock_probe_ptx, nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (e != cudaSuccess) {
      p.error = cuda_message(e, "loading the clock-probe PTX");
      cudaGetLastError();
      return kept;
    }
    e = cudaLibraryGetKernel(&p.kernel, library, "kscope_clock_probe");
    if (e != cudaSuccess) {
      p.error = cuda_message(e, "finding the clock-probe kernel");
      p.kernel = nullptr;
      cudaGetLastError();
    }
    return kept;
  });
}

KSCOPE_DECL kernel_resources query_resources(const void* function, int block_threads, std::size_t dynamic_smem_bytes) {
  kernel_resources r;
  r.block_threads = block_threads;
  r.dynamic_smem_bytes = dynamic_smem_bytes;
  cudaFuncAttributes a{};
  cudaError_t e = cudaFuncGetAttributes(&a, function);
  if (e != cudaSuccess) {
    r.error = cuda_message(e, "cudaFuncGetAttributes");
    cudaGetLastError();
    return r;
  }
  r.registers_per_thread = a.numRegs;
  r.static_smem_bytes = a.sharedSizeBytes;
  r.local_bytes_per_thread = a.localSizeBytes;
  r.max_threads_per_block = a.maxThreadsPerBlock;
  r.ptx_version = a.ptxVersion;
  r.binary_version = a.binaryVersion;
  int device = 0, threads_per_sm = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device);
  r.max_warps_per_sm = threads_per_sm / 32;
  if (block_threads <= 0) {
    r.error = "no block size given: occupancy unknown";
    return r;
  }
  e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&r.active_blocks_per_sm, function, block_threads,
                                                    dynamic_smem_bytes);
  if (e != cudaSuccess) {
    r.error = cuda_message(e, "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    cudaGetLastError();
    return r;
  }
  const int warps_per_block = (block_threads + 31) / 32;
  if (r.max_warps_per_sm > 0)
    r.occupancy = static_cast<double>(r.active_blocks_per_sm * warps_per_block) / r.max_warps_per_sm;
  return r;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The CUDA-event timer. Per sample, on one stream:
//
//   [memset 2 x L2]      cold mode only: evicts the benchmark's data; not timed
//   probe(hold)          spins >= 20 us and until the host has enqueued everything below
//   event start
//   N launches           a CUDA graph of N captured calls, or a loop, or one call
//   event stop
//   probe(10 us)         SM clock right after the work; not timed
//   host: release the hold, synchronize, read the events and both probes
//
// Holding the stream matters for short kernels: without it the start event fires as
// soon as it is enqueued and the kernels arrive one host launch (~4 us) later each, so
// the host's launch rate is measured instead of the GPU's time. The sample's clock is
// the lower of the two probes (the clock just before and just after the work).
class cuda_bench_timer final : public bench_timer {
 public:
  using function = std::function<void(cudaStream_t)>;

  cuda_bench_timer(std::vector<function> targets, cudaStream_t stream, const bench_options& options);

  ~cuda_bench_timer() override {
    // Best effort, never throws: the context may already be gone at process exit.
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    for (target& t : targets_)
      if (t.exec != nullptr) cudaGraphExecDestroy(t.exec);
    if (flush_buffer_ != nullptr) cudaFree(flush_buffer_);
    if (words_ != nullptr) cudaFreeHost(const_cast<std::uint64_t*>(words_));
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
    if (own_stream_) cudaStreamDestroy(stream_);
    cudaGetLastError();
  }

  [[nodiscard]] bool ready() const noexcept { return ready_; }
  [[nodiscard]] const std::string& error() const noexcept { return error_; }
  [[nodiscard]] cudaStream_t stream() const noexcept { return stream_; }

  KSCOPE_DECL std::string prepare(std::size_t which, std::size_t launches) override;

  KSCOPE_DECL batch_capture capture(std::size_t which) const override;

  KSCOPE_DECL timed_sample time(std::size_t which, std::size_t launches) override;

  // The median of empty_samples samples taken exactly as time() takes one (flush,
  // held start, events, post probe) with no call between the events, measured on the
  // first request and kept: the time this stream reads when no work reaches it.
  KSCOPE_DECL double empty_stream_s() override;

  KSCOPE_DECL void execute(std::size_t which) override;

  std::vector<std::string> notes() const override { return notes_; }

 private:
  struct target {
    function fn;
    cudaGraphExec_t exec = nullptr;
    std::size_t graph_launches = 0;
    bool called = false;
    batch_capture capture;
  };

  // The errors a stream capture reports when a call did something a capture cannot
  // hold (used to find the call that broke it).
  static bool is_capture_error(cudaError_t e) noexcept;

  // `calls` calls of t captured on the stream (never run): the graph (null when none was
  // made), the capture's status, the first capture error a call saw, and whether one threw.
  struct captured_calls {
    cudaGraph_t graph = nullptr;
    cudaError_t status = cudaSuccess;
    cudaError_t first_launch_error = cudaSuccess;
    bool threw = false;
  };
  KSCOPE_DECL captured_calls capture_calls(target& t, std::size_t calls);

  // A target timed one call at a time with launches not held: one call captured (never
  // run on the stream; work it sends elsewhere, or events it records, are the callable's
  // own) for the evidence an empty graph gives (t.capture.no_work); the batch's graph_nodes
  // stay -1, as no batch graph exists.
  KSCOPE_DECL void check_one_call(target& t);

  // One sample of `launches` calls of `t` (none when t is null: the empty sample).
  timed_sample sample(target* t, std::size_t launches, bool hold);


  // Word layout of the mapped host block: the pre probe writes words 0..2, the post
  // probe 4..6, and word 8 is the hold flag (the probe reads its low 32 bits).
  static constexpr std::size_t words_index_pre = 0;
  static constexpr std::size_t words_index_post = 4;
  static constexpr std::size_t flag_index = 8;
  static constexpr std::uint64_t hold_min_ns = 20000;
  static constexpr std::uint64_t post_probe_ns = 10000;
  static constexpr std::uint64_t hold_timeout_ns = 200000000;  // 200 ms
  static constexpr int empty_samples = 7;  // odd: the median is one of them

  bool check(cudaError_t e, const char* what);
  void note_once(const std::string& n);

  void launch_probe(std::uint64_t flag_device_address, std::uint64_t min_ns, std::size_t out_index);

  void release_hold() noexcept;

  double probe_mhz(std::size_t index) const noexcept;

  bench_options options_;
  std::vector<target> targets_;
  cudaStream_t stream_ = nullptr;
  bool own_stream_ = false;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
  volatile std::uint64_t* words_ = nullptr;
  std::uint64_t device_words_ = 0;
  void* flush_buffer_ = nullptr;
  std::size_t flush_bytes_ = 0;
  unsigned flushes_ = 0;
  cudaKernel_t probe_ = nullptr;
  bool hold_usable_ = true;
  bool ready_ = false;
  bool empty_measured_ = false;
  double empty_stream_s_ = std::numeric_limits<double>::quiet_NaN();
  std::string error_;
  std::vector<std::string> notes_;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL batch_capture cuda_bench_timer::capture(std::size_t which) const { return targets_.at(which).capture; }
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL cuda_bench_timer::cuda_bench_timer(std::vector<function> targets, cudaStream_t stream, const bench_options& options) : options_(options) {
  for (auto& f : targets) {
    targets_.emplace_back();
    targets_.back().fn = std::move(f);
  }
  if (stream != nullptr) {
    stream_ = stream;
  } else if (!check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate")) {
    return;
  } else {
    own_stream_ = true;
  }
  if (!check(cudaEventCreate(&start_), "cudaEventCreate") || !check(cudaEventCreate(&stop_), "cudaEventCreate"))
    return;
  void* host = nullptr;
  if (!check(cudaHostAlloc(&host, 128, cudaHostAllocMapped), "cudaHostAlloc(mapped)")) return;
  words_ = static_cast<volatile std::uint64_t*>(host);
  void* device_words = nullptr;
  if (!check(cudaHostGetDevicePointer(&device_words, host, 0), "cudaHostGetDevicePointer")) return;
  device_words_ = reinterpret_cast<std::uint64_t>(device_words);
  for (int i = 0; i < 16; ++i) words_[i] = 0;

  if (options_.cache == cache_mode::cold) {
    int device = 0, l2 = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device);
    // Twice the L2 size, and at least 64 MiB in case the attribute under-reports.
    flush_bytes_ = std::max<std::size_t>(2 * static_cast<std::size_t>(l2), std::size_t{64} << 20);
    if (!check(cudaMalloc(&flush_buffer_, flush_bytes_), "cudaMalloc(L2 flush buffer)")) return;
  }
  const clock_probe_kernel& probe = clock_probe();
  probe_ = probe.kernel;
  if (probe_ == nullptr) {
    notes_.push_back("SM clock not sampled and launches not held (" + probe.error + ")");
  } else {
    // Load the probe into this context now, outside any timed sample.
    launch_probe(0, 1000, words_index_post);
    if (!check(cudaStreamSynchronize(stream_), "clock probe test launch")) return;
  }
  ready_ = true;
}

KSCOPE_DECL cuda_bench_timer::captured_calls cuda_bench_timer::capture_calls(target& t, std::size_t calls) {
  captured_calls c;
  (void)cudaGetLastError();  // so that an error seen below comes from the calls captured
  c.status = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
  if (c.status != cudaSuccess) return c;
  try {
    for (std::size_t i = 0; i < calls; ++i) {
      t.fn(stream_);
      // The call that broke the capture reports why (e.g. cudaErrorStreamCaptureImplicit
      // for a launch on the legacy default stream); later calls only see "invalidated".
      const cudaError_t launch_error = cudaPeekAtLastError();
      if (c.first_launch_error == cudaSuccess && is_capture_error(launch_error)) c.first_launch_error = launch_error;
    }
  } catch (...) {
    c.threw = true;  // the capture is ended below; the exception is reported by the next timed call
  }
  c.status = cudaStreamEndCapture(stream_, &c.graph);
  return c;
}

KSCOPE_DECL void cuda_bench_timer::check_one_call(target& t) {
  const captured_calls c = capture_calls(t, 1);
  // Only an empty graph is evidence. A refused capture is not: a call that synchronizes or
  // allocates cannot be captured, and a launch on the legacy default stream breaks the
  // capture of a blocking stream though that stream then waits for it, so the time is
  // the work's (the batch's capture may say otherwise: there the calls are many and short).
  // Nor is a call cut short by an exception.
  std::size_t nodes = 0;
  if (!c.threw && c.status == cudaSuccess && c.graph != nullptr &&
      cudaGraphGetNodes(c.graph, nullptr, &nodes) == cudaSuccess && nodes == 0)
    t.capture.no_work = "one call captured into a CUDA graph (never run) put no node on the stream";
  if (c.graph != nullptr) cudaGraphDestroy(c.graph);
  cudaGetLastError();
  cudaStreamSynchronize(stream_);
  cudaGetLastError();
}

KSCOPE_DECL std::string cuda_bench_timer::prepare(std::size_t which, std::size_t launches) {
  target& t = targets_.at(which);
  t.capture = batch_capture{};
  if (launches <= 1) {
    // A call long enough to be timed alone is not batched, so no batch graph shows what it
    // put on the stream; its time alone cannot either: a callable that waits on the host
    // between the events and launches elsewhere reads as long as its wait (200 us of host
    // time was timed as the work on an H100, session 21). One call is captured and
    // dropped, so that an empty capture still says no work reached the stream. Only where
    // a host wait can lie between the events: held launches keep it out (the stream waits
    // for the whole sample to be enqueued), and a callable that blocks on its stream
    // (holding was given up for it) cannot be captured.
    const bool waits_show = !options_.hold_launches || probe_ == nullptr;
    if (options_.use_graphs && ready_ && waits_show && hold_usable_) check_one_call(t);
    return "none";
  }
  if (!options_.use_graphs || !ready_) return "loop";
  if (t.exec != nullptr) {
    cudaGraphExecDestroy(t.exec);
    t.exec = nullptr;
  }
  const captured_calls c = capture_calls(t, launches);
  cudaGraph_t graph = c.graph;
  cudaError_t e = c.status;
  const cudaError_t first_launch_error = c.first_launch_error;
  if (e == cudaSuccess && graph != nullptr) {
    std::size_t nodes = 0;
    if (cudaGraphGetNodes(graph, nullptr, &nodes) == cudaSuccess) {
      t.capture.graph_nodes = static_cast<long long>(nodes);
      if (nodes == 0 && !c.threw)  // calls cut short by an exception are no evidence
        t.capture.no_work = "the CUDA graph captured from " + std::to_string(launches) +
                            " calls on the stream has no nodes";
    }
  }
  // A capture the driver rejected because a call used the legacy default stream: the
  // work went there, not to the stream the callable was given.
  for (cudaError_t seen : {first_launch_error, e}) {
    if (t.capture.no_work.empty() && seen == cudaErrorStreamCaptureImplicit)
      t.capture.no_work = "capturing " + std::to_string(launches) + " calls into a CUDA graph failed with " +
                          cuda_message(seen, "a launch") + ", which a launch on the legacy default stream causes";
  }
  if (!t.capture.no_work.empty()) {
    // Nothing to time: leave the stream and the error state clean, build no graph.
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();
    cudaStreamSynchronize(stream_);
    cudaGetLastError();
    return "graph";
  }
  if (e == cudaSuccess && graph != nullptr) e = cudaGraphInstantiate(&t.exec, graph, 0);
  if (graph != nullptr) cudaGraphDestroy(graph);
  if (e == cudaSuccess) e = cudaGraphUpload(t.exec, stream_);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream_);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (t.exec != nullptr) cudaGraphExecDestroy(t.exec);
    t.exec = nullptr;
    t.graph_launches = 0;
    notes_.push_back("target " + std::to_string(which) + ": CUDA graph capture failed (" +
                     cuda_message(e, "capture") + "); batched with a loop of launches instead");
    return "loop";
  }
  t.graph_launches = launches;
  return "graph";
}

KSCOPE_DECL timed_sample cuda_bench_timer::time(std::size_t which, std::size_t launches) {
  if (!ready_) return {};
  target& t = targets_.at(which);
  // The first call of a target may load modules or allocate (cuBLAS workspaces),
  // which can wait for the device: never hold the stream across it.
  const bool hold = options_.hold_launches && hold_usable_ && t.called && probe_ != nullptr;
  t.called = true;
  return sample(&t, launches, hold);
}

KSCOPE_DECL double cuda_bench_timer::empty_stream_s() {
  if (empty_measured_) return empty_stream_s_;
  empty_measured_ = true;
  if (!ready_) return empty_stream_s_;
  const bool hold = options_.hold_launches && hold_usable_ && probe_ != nullptr;
  std::vector<double> times;
  for (int i = 0; i < empty_samples; ++i) {
    const timed_sample x = sample(nullptr, 0, hold);
    if (x.total_s >= 0) times.push_back(x.total_s);
  }
  if (!times.empty()) empty_stream_s_ = quantile(times, 0.5);
  return empty_stream_s_;
}

KSCOPE_DECL void cuda_bench_timer::execute(std::size_t which) {
  if (!ready_) return;
  targets_.at(which).fn(stream_);
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

KSCOPE_DECL bool cuda_bench_timer::is_capture_error(cudaError_t e) noexcept {
  return e == cudaErrorStreamCaptureImplicit || e == cudaErrorStreamCaptureUnsupported ||
         e == cudaErrorStreamCaptureInvalidated || e == cudaErrorStreamCaptureIsolation ||
         e == cudaErrorStreamCaptureUnjoined || e == cudaErrorStreamCaptureUnmatched ||
         e == cudaErrorStreamCaptureMerge || e == cudaErrorStreamCaptureWrongThread;
}

KSCOPE_DECL timed_sample cuda_bench_timer::sample(target* t, std::size_t launches, bool hold) {
  timed_sample result;
  for (int i = 0; i < 8; ++i) words_[i] = 0;
  words_[flag_index] = 0;

  if (options_.cache == cache_mode::cold && flush_buffer_ != nullptr) {
    // The byte value changes per sample so no layer can skip a redundant write.
    if (!check(cudaMemsetAsync(flush_buffer_, static_cast<int>(++flushes_ & 0xff), flush_bytes_, stream_),
               "L2 flush memset"))
      return result;
  }
  if (probe_ != nullptr) launch_probe(hold ? device_words_ + flag_index * 8 : 0, hold_min_ns, words_index_pre);
  bool launched = check(cudaEventRecord(start_, stream_), "cudaEventRecord(start)");
  std::string failure;
  if (launched && t != nullptr) {
    try {
      if (launches > 1 && t->exec != nullptr && t->graph_launches == launches) {
        launched = check(cudaGraphLaunch(t->exec, stream_), "cudaGraphLaunch");
      } else {
        for (std::size_t i = 0; i < launches; ++i) t->fn(stream_);
      }
    } catch (const std::exception& ex) {
      failure = std::string("the benchmark threw: ") + ex.what();
    } catch (...) {
      failure = "the benchmark threw an exception";
    }
  }
  launched = check(cudaEventRecord(stop_, stream_), "cudaEventRecord(stop)") && launched;
  if (probe_ != nullptr) launch_probe(0, post_probe_ns, words_index_post);
  release_hold();
  const bool synced = check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  if (!failure.empty()) {
    error_ = failure;
    note_once(failure);
    return result;
  }
  if (!launched || !synced) return result;

  float ms = 0;
  if (!check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime")) return result;
  if (hold && words_[words_index_pre + 2] != 0) {
    // The host could not enqueue the sample within the timeout: the callable blocks on
    // the stream (a synchronize, a blocking copy). Holding would only add timeouts, so
    // stop holding, and drop this sample, which includes the wait.
    hold_usable_ = false;
    note_once("launches are not held: the benchmark blocks the host on its stream "
              "(synchronize or blocking copy inside the callable); short kernels may include launch gaps");
    return result;
  }
  result.total_s = static_cast<double>(ms) * 1e-3;
  const double pre = probe_mhz(words_index_pre);
  const double post = probe_mhz(words_index_post);
  if (std::isfinite(pre) && std::isfinite(post)) result.sm_clock_mhz = std::min(pre, post);
  else if (std::isfinite(post)) result.sm_clock_mhz = post;
  else result.sm_clock_mhz = pre;
  return result;
}

KSCOPE_DECL bool cuda_bench_timer::check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  error_ = cuda_message(e, what);
  note_once(error_);
  cudaGetLastError();
  return false;
}

KSCOPE_DECL void cuda_bench_timer::note_once(const std::string& n) {
  for (const std::string& x : notes_)
    if (x == n) return;
  notes_.push_back(n);
}

KSCOPE_DECL void cuda_bench_timer::launch_probe(std::uint64_t flag_device_address, std::uint64_t min_ns, std::size_t out_index) {
  std::uint64_t flag = flag_device_address;
  std::uint64_t min = min_ns;
  std::uint64_t timeout = hold_timeout_ns;
  std::uint64_t out = device_words_ + out_index * 8;
  void* args[] = {&flag, &min, &timeout, &out};
  if (cudaLaunchKernel(reinterpret_cast<const void*>(probe_), dim3(1), dim3(1), args, 0, stream_) != cudaSuccess) {
    cudaGetLastError();
    probe_ = nullptr;
    note_once("the clock-probe kernel failed to launch; SM clock not sampled, launches not held");
  }
}

KSCOPE_DECL void cuda_bench_timer::release_hold() noexcept {
  // The probe polls this word through the mapped pointer; a volatile store after all
  // enqueue calls returned is enough, since those calls already handed the work to
  // the driver.
  words_[flag_index] = 1;
}

KSCOPE_DECL double cuda_bench_timer::probe_mhz(std::size_t index) const noexcept {
  const std::uint64_t cycles = words_[index];
  const std::uint64_t ns = words_[index + 1];
  if (words_[index + 2] != 0 || ns == 0 || cycles == 0) return std::numeric_limits<double>::quiet_NaN();
  return static_cast<double>(cycles) * 1e3 / static_cast<double>(ns);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#endif  // KSCOPE_HAS_CUDA

}  // namespace harness
}  // namespace detail

}  // namespace kscope
