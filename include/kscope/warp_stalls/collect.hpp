// kscope/warp_stalls/collect.hpp — warp stalls of a piece of GPU work (opt-in): CUPTI PC
// sampling, per kernel launch, with the stall-reason breakdown and the hottest PCs.
//
//   kscope::warp_stall_result r = kscope::profile_warp_stalls([&] {
//     gemm<<<grid, block>>>(a, b, c, n);
//   });
//   if (!r.ok()) std::fprintf(stderr, "%s\n", r.message.c_str());      // one line: why not
//   for (const kscope::warp_stall_profile& k : r.kernels)                // launch order
//     std::fputs(kscope::format_warp_stalls(k).c_str(), stdout);        // table, dominant stall, hot PCs
//
// What the samples mean (the reason table, "selected" and the "_not_issued" twins, the
// dominant stall, per-scope sums) is warp_stalls/stalls.hpp's business; this header only
// collects. docs/warp_stalls.md has the whole story.
//
// The sequence: CUPTI loaded through the loader every pass shares (cupti/counter_pass.hpp: one
// libcupti per process, never linked), cuptiProfilerDeviceSupported where it can tell why a
// device is unsupported, the module-load watch (below, Source lines), cuptiPCSamplingEnable
// on the current context, the device's stall-reason names
// (cuptiPCSamplingGetNumStallReasons / GetStallReasons, which need the enable first), one
// configuration call (all stall reasons, sampling period, buffers, collection mode, parsed
// output, the buffer CUPTI fills when sampling ends), the work, cudaDeviceSynchronize, the
// watch's end, cuptiPCSamplingGetData until CUPTI has nothing left, cuptiPCSamplingDisable
// (CUPTI joins its decoding threads and puts what was still undecoded into the configured
// buffer, which is read last), the source lines of the hottest PCs.
//
// Collection modes (warp_stall_options::collection):
// - kernel_serialized (default): CUPTI runs the kernels one at a time and tags every PC
//   record with its launch's correlation id, so each launch gets its own exact profile.
// - continuous: kernels run as they would; records carry no launch, so they are grouped by
//   function (all launches of a kernel together, launches = 0).
// Either way every kernel of the current context is sampled while the pass runs, other
// threads' kernels included, and "the work" is everything between enable and disable.
//
// Source lines: the hottest PCs of each profile (options.source_line_pcs) get file:line
// from cuptiGetSassToSourceCorrelation, which needs the cubin of the PC's module. CUPTI
// hands a cubin out only in its module-load callback, so kscope keeps copies of the cubins
// of modules loaded while it watches (cupti/detail/cubin_store.hpp, bounded): kscope's activity
// collector watches from its start when it holds CUPTI's one callback subscriber; else the
// pass subscribes for the duration of its work. A module loaded while nobody watched
// (before the collector started, or between passes: CUDA loads a module at the first launch
// of one of its kernels), a kernel built without -lineinfo, another tool holding the
// subscriber: each PC says which (warp_stall_pc::line_status), and a note counts them.
//
// Never breaks the program: unavailable cases (built without the headers, no device, no
// libcupti or one without PC sampling, no permission to the counters, another profiler or
// pass holding them, an unsupported device) come back as a counter_state and one message,
// with the work not run. An exception the work throws is rethrown after sampling is
// disabled. One pass at a time per process, shared with the counters: a concurrent or
// nested call gets counter_state::busy at once.
//
// Sampled runs are slowed (kernel-serialized, and the sampler itself): their times are never
// performance.
#pragma once

#include "../core/config.hpp"
#include "../core/detail/once.hpp"
#include "stalls.hpp"
#include "../cupti/counter_pass.hpp"
#include "../cupti/detail/cubin_store.hpp"
#include "detail/pc_sampling_api.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#if KSCOPE_HAS_PC_SAMPLING
#  include "../cupti/detail/demangle.hpp"
#  include <cuda_runtime_api.h>
#endif

namespace kscope {

// How CUPTI collects (see the top of this header).
enum class warp_stall_collection : std::uint8_t {
  kernel_serialized,  // one kernel at a time, exact per launch: the default
  continuous,         // kernels overlap as usual; samples grouped by function
};

[[nodiscard]] constexpr const char* to_string(warp_stall_collection c) noexcept {
  return c == warp_stall_collection::continuous ? "continuous" : "kernel-serialized";
}

// How to sample.
//   kscope::warp_stall_options o;
//   o.sampling_period = 12;        // one sample per SM every 2^12 cycles
//   o.scope = "decode";            // the name of result.total
struct warp_stall_options {
  warp_stall_collection collection = warp_stall_collection::kernel_serialized;
  // log2 of the cycles between two samples of an SM, 5 to 31; 0: CUPTI's default for the
  // device. Smaller periods give more samples, more overhead and fuller buffers.
  std::uint32_t sampling_period = 0;
  // PC records per read of CUPTI's data, and the size of the buffer CUPTI fills when
  // sampling is disabled; records that do not fit there are lost and counted in a note.
  std::size_t max_pcs = 10000;
  std::size_t scratch_buffer_bytes = 0;   // CUPTI's decoded-record buffer; 0: its default (1 MiB)
  std::size_t hardware_buffer_bytes = 0;  // the device-side sample buffer; 0: its default (512 MiB)
  std::string scope = "all kernels";      // name of warp_stall_result::total
  std::string cupti_library;              // explicit libcupti, as counter_options::cupti_library
  // Hottest PCs per profile (each launch, and the total) given a source line; 0: none. A
  // lookup parses its module's line table, so at most warp_stall_max_source_lookups are
  // made per pass.
  std::size_t source_line_pcs = 10;
  // Leave PC sampling enabled on the context after the pass, sampling only between
  // cuptiPCSamplingStart and Stop. CUPTI names only the kernels launched before its enable
  // or while it is enabled: disabled between passes, a kernel first launched between two
  // passes reads as "non-user" in every later one (H100, CUDA 13.0:
  // bench/pc_sampling_passes_probe.cu). Kept, it costs about 1 us per kernel launch while
  // no pass runs (same probe); release_warp_stall_sampling() lets it go, and so does every
  // counter or PM-sampling pass, which needs the counters.
  bool keep_enabled = true;
};

// Source-line lookups per pass at most (each PC once, however many profiles list it).
inline constexpr std::size_t warp_stall_max_source_lookups = 1024;

// The most bytes of module cubins kscope keeps for source lines (default 64 MiB, shared by
// the collector and every pass). Beyond it the least recently used cubins are evicted and
// their PCs say "dropped"; 0 keeps none (no source lines, nothing copied at module loads).
//   kscope::set_cubin_store_budget_bytes(std::size_t{256} << 20);   // a program with big modules
KSCOPE_DECL void set_cubin_store_budget_bytes(std::size_t bytes);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void set_cubin_store_budget_bytes(std::size_t bytes) { detail::cubin_store::global().set_budget_bytes(bytes); }
#endif  // KSCOPE_DETAIL_DEFINITIONS
[[nodiscard]] KSCOPE_DECL std::size_t cubin_store_budget_bytes();

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::size_t cubin_store_budget_bytes() { return detail::cubin_store::global().budget_bytes(); }
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The upper bound on max_pcs: two buffers of this many records with every stall reason
// are about 200 MB of host memory.
inline constexpr std::size_t warp_stall_max_pcs_limit = std::size_t{1} << 18;

// The outcome of a pass: a profile per kernel launch (or per function, continuous), all of
// them together, and why there are none when there are none.
//   if (r.ok()) std::puts(kscope::dominant_stall(r.total).text.c_str());
struct warp_stall_result {
  counter_state state = counter_state::failed;  // never unknown_metric
  std::string message;                          // one line: what was sampled, or why not
  std::vector<warp_stall_profile> kernels;      // launch order (continuous: per function)
  warp_stall_profile total;                     // every kernel together, named options.scope
  std::vector<std::string> notes;               // lost samples, PCs without source lines, ...
  std::string module_loads;                     // how module loads (their cubins) were watched, or why not
  std::vector<std::string> stall_reasons;       // CUPTI's stall-reason names on this device
  std::uint32_t sampling_period = 0;            // log2 cycles, as CUPTI reports it (0: unknown)
  std::uint64_t cupti_total_samples = 0;        // CUPTI's own count, non-user kernels and drops included
  std::uint64_t dropped_samples = 0;            // dropped by the hardware (buffer back-pressure)
  std::uint64_t non_user_samples = 0;           // in kernels CUPTI gives no PCs for (its own, the driver's)
  std::uint32_t cupti_version = 0;

  [[nodiscard]] bool ok() const noexcept;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool warp_stall_result::ok() const noexcept { return state == counter_state::collected; }
#endif  // KSCOPE_DETAIL_DEFINITIONS

namespace detail {

// The source line of one PC: its module's cubin from the store, then `correlate(cubin,
// symbol, pc_offset)` -> sass_source. Without the cubin: dropped (the store lost it), not
// seen (module loads were watched, so it loaded before), or not watched. With it: resolved;
// no line info when the call succeeds without a line and the cubin has no line table, or
// fails and the cubin has none; no line for the PC when the table exists but lacks it.
// `error` receives the failed call's words.
template <class Correlate>
[[nodiscard]] source_line find_source_line(cubin_store& store, module_watch watch, const warp_stall_pc& pc,
                                           Correlate&& correlate, std::string* error = nullptr) {
  source_line out;
  if (watch == module_watch::unavailable || pc.cubin_crc == 0 || pc.symbol.empty()) {
    out.status = source_line_status::unavailable;
    return out;
  }
  const cubin_ref cubin = store.find(pc.cubin_crc);
  if (!cubin) {
    out.status = store.lost(pc.cubin_crc)          ? source_line_status::module_dropped
                 : watch == module_watch::watched ? source_line_status::module_not_seen
                                                   : source_line_status::module_not_watched;
    return out;
  }
  const sass_source s = correlate(*cubin.bytes, pc.symbol, pc.pc_offset);
  if (s.ok && s.line > 0 && !s.file.empty()) {
    out.status = source_line_status::resolved;
    out.file = s.file;
    out.line = s.line;
  } else if (cubin.line_info == cubin_line_info::absent || (s.ok && cubin.line_info == cubin_line_info::unknown)) {
    out.status = source_line_status::no_line_info;
  } else if (s.ok) {
    out.status = source_line_status::no_line_for_pc;
  } else {
    out.status = source_line_status::lookup_failed;
    if (error != nullptr) *error = s.error;
  }
  return out;
}

// "" when the options can be tried, else what is wrong with them.
KSCOPE_DECL std::string warp_stall_request_error(const warp_stall_options& o);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string warp_stall_request_error(const warp_stall_options& o) {
  if (o.sampling_period != 0 && (o.sampling_period < 5 || o.sampling_period > 31))
    return "warp_stall_options::sampling_period must be 0 (CUPTI's default) or between 5 and 31, got " +
           std::to_string(o.sampling_period);
  if (o.max_pcs == 0 || o.max_pcs > warp_stall_max_pcs_limit)
    return "warp_stall_options::max_pcs must be between 1 and " + std::to_string(warp_stall_max_pcs_limit) +
           ", got " + std::to_string(o.max_pcs);
  return {};
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_HAS_PC_SAMPLING

// The entry points, resolved once from the libcupti the counters loaded.
KSCOPE_DECL pc_sampling_api& pc_sampling_state();

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL pc_sampling_api& pc_sampling_state() {
  static lazy_global<pc_sampling_api> state{lock_rank::init};  // fork-safe (core/detail/once.hpp)
  return state.get([] { return new pc_sampling_api(); });
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// A CUpti_PCSamplingData with room for max_pcs records of num_reasons reasons each, in
// arrays it owns (CUPTI writes into them, never allocates them).
class pc_sampling_buffer {
 public:
  pc_sampling_buffer(std::size_t max_pcs, std::size_t num_reasons);
  pc_sampling_buffer(const pc_sampling_buffer&) = delete;
  pc_sampling_buffer& operator=(const pc_sampling_buffer&) = delete;

  CUpti_PCSamplingData* get() noexcept { return &data_; }
  const CUpti_PCSamplingData& data() const noexcept { return data_; }
  std::size_t reason_capacity() const noexcept { return stride_; }

  // Before each read: counts to zero, so a call that writes nothing reads as empty, and
  // correlation ids to zero, so a libcupti that does not fill them reads as "unknown".
  void reset() noexcept;

 private:
  // Arrays, not std::vector: nvcc 13's front end fails (internal error) on a vector of
  // CUPTI's packed, aligned structs in C++20.
  CUpti_PCSamplingData data_{};
  std::size_t stride_;
  std::size_t count_;
  std::unique_ptr<CUpti_PCSamplingPCData[]> records_;
  std::unique_ptr<CUpti_PCSamplingStallReason[]> reasons_;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL pc_sampling_buffer::pc_sampling_buffer(std::size_t max_pcs, std::size_t num_reasons) : stride_(std::max<std::size_t>(1, num_reasons)),
      count_(max_pcs),
      records_(new CUpti_PCSamplingPCData[max_pcs]()),
      reasons_(new CUpti_PCSamplingStallReason[max_pcs * stride_]()) {
  data_.size = sizeof(CUpti_PCSamplingData);
  data_.collectNumPcs = max_pcs;
  data_.pPcData = records_.get();
  reset();
}

KSCOPE_DECL void pc_sampling_buffer::reset() noexcept {
  data_.totalNumPcs = 0;
  data_.remainingNumPcs = 0;
  data_.totalSamples = 0;
  data_.droppedSamples = 0;
  data_.nonUsrKernelsTotalSamples = 0;
  data_.hardwareBufferFull = 0;
  for (std::size_t i = 0; i < count_; ++i) {
    CUpti_PCSamplingPCData& r = records_[i];
    r.size = sizeof(CUpti_PCSamplingPCData);
    r.stallReason = &reasons_[i * stride_];
    r.stallReasonCount = 0;
    r.functionName = nullptr;
    r.correlationId = 0;
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The records read so far, with names copied out of CUPTI's buffers.
//
// CUPTI's function-name strings are never freed here, although its header makes freeing
// them the client's job "once all records are processed": the same string may be shared
// with the activity API's records for that function, which kscope's collector may still be
// reading, and with later passes' records. Freeing it here could leave the collector or
// CUPTI with a dangling pointer inside the host program; keeping it costs one name per
// sampled kernel function.
class pc_sampling_reader {
 public:
  std::unordered_map<std::uint32_t, std::string> reason_names;  // CUPTI's index -> name
  std::vector<pc_stall_record> records;
  std::uint64_t total_samples = 0, dropped_samples = 0, non_user_samples = 0;

  void read(const pc_sampling_buffer& buffer);

 private:
  struct range_totals {
    std::uint64_t total = 0, dropped = 0, non_user = 0;
  };

  std::string function_name(const char* cupti_name);

  std::unordered_map<const char*, std::string> demangled_;  // demangled once per name
  std::map<std::uint64_t, range_totals> ranges_;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void pc_sampling_reader::read(const pc_sampling_buffer& buffer) {
  const CUpti_PCSamplingData& d = buffer.data();
  // A range's totals may come with each of several reads of it: the largest is kept.
  const std::uint64_t range = d.rangeId, total = d.totalSamples, dropped = d.droppedSamples,
                      non_user = d.nonUsrKernelsTotalSamples;
  range_totals& t = ranges_[range];
  total_samples += std::max(t.total, total) - t.total;
  dropped_samples += std::max(t.dropped, dropped) - t.dropped;
  non_user_samples += std::max(t.non_user, non_user) - t.non_user;
  t.total = std::max(t.total, total);
  t.dropped = std::max(t.dropped, dropped);
  t.non_user = std::max(t.non_user, non_user);
  // CUPTI's structs are packed: fields are copied out, never bound to references.
  const std::size_t filled = d.totalNumPcs, capacity = d.collectNumPcs;
  const std::size_t count = std::min(filled, capacity);
  for (std::size_t i = 0; i < count; ++i) {
    const CUpti_PCSamplingPCData& pc = d.pPcData[i];
    pc_stall_record r;
    r.function = function_name(pc.functionName);
    r.pc_offset = pc.pcOffset;
    r.correlation_id = pc.correlationId;
    if (pc.functionName != nullptr) r.symbol = pc.functionName;  // the cubin's name, for source lines
    r.cubin_crc = pc.cubinCrc;
    const std::size_t listed = pc.stallReasonCount;
    const std::size_t reasons = std::min(listed, buffer.reason_capacity());
    for (std::size_t j = 0; j < reasons; ++j) {
      const std::uint32_t index = pc.stallReason[j].pcSamplingStallReasonIndex;
      const std::uint32_t samples = pc.stallReason[j].samples;
      if (samples == 0) continue;
      const auto name = reason_names.find(index);
      r.stalls.emplace_back(name != reason_names.end() ? name->second : "stall reason #" + std::to_string(index),
                            samples);
    }
    records.push_back(std::move(r));
  }
}

KSCOPE_DECL std::string pc_sampling_reader::function_name(const char* cupti_name) {
  if (cupti_name == nullptr) return "(unknown function)";
  const auto it = demangled_.find(cupti_name);
  if (it != demangled_.end()) return it->second;
  return demangled_.emplace(cupti_name, demangle(cupti_name)).first->second;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// PC sampling left enabled on one context between passes (warp_stall_options::keep_enabled),
// with start/stop control: the stall reasons read once, and the buffer CUPTI flushes into,
// whose pointer it keeps while enabled. Touched only with counter_pass_mutex() held.
struct kept_pc_sampling {
  CUcontext context = nullptr;  // nullptr: nothing kept
  std::uint64_t context_id = 0;
  const pc_sampling_api* api = nullptr;
  std::size_t max_pcs = 0, scratch_buffer_bytes = 0, hardware_buffer_bytes = 0;
  std::vector<std::uint32_t> indexes;
  std::vector<std::string> names;
  std::unique_ptr<pc_sampling_buffer> end_buffer;
  std::uint64_t passes = 0;  // passes that left it kept

  // A pass with these options can reuse it (the buffer sizes are set at the enable only).
  [[nodiscard]] bool fits(const warp_stall_options& o) const noexcept {
    return o.max_pcs == max_pcs && o.scratch_buffer_bytes == scratch_buffer_bytes &&
           o.hardware_buffer_bytes == hardware_buffer_bytes;
  }
};

KSCOPE_DECL kept_pc_sampling& kept_pc_sampling_state();

// Disables a kept PC sampling (CUPTI joins its decoding threads), with counter_pass_mutex()
// held; the next pass enables it afresh. Registered as the kept_pc_sampling_releaser().
KSCOPE_DECL void release_kept_pc_sampling_locked() noexcept;

// The same, taking counter_pass_mutex() (false, nothing done, while a pass holds it): the
// activity collector's hook (cupti/detail/api.hpp: pc_sampling_release_for_activity).
KSCOPE_DECL bool release_kept_pc_sampling_unlocked() noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL kept_pc_sampling& kept_pc_sampling_state() {
  static lazy_global<kept_pc_sampling> state{lock_rank::init};  // fork-safe (core/detail/once.hpp)
  return state.get([] { return new kept_pc_sampling(); });
}

KSCOPE_DECL void release_kept_pc_sampling_locked() noexcept {
  kept_pc_sampling& kept = kept_pc_sampling_state();
  if (kept.context == nullptr) return;
  CUpti_PCSamplingDisableParams p{};
  p.size = CUpti_PCSamplingDisableParamsSize;
  p.ctx = kept.context;
  (void)kept.api->disable(&p);  // a context destroyed meanwhile has nothing left to disable
  kept.context = nullptr;
  kept.context_id = 0;
  kept.end_buffer.reset();
}

KSCOPE_DECL bool release_kept_pc_sampling_unlocked() noexcept {
  std::unique_lock<std::mutex> lock(counter_pass_mutex(), std::try_to_lock);
  if (!lock.owns_lock()) return false;
  release_kept_pc_sampling_locked();
  return true;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The hottest PCs of every profile and of the total get their source lines (or the reason
// why not), and the notes say how many and why; cubin store losses are noted too.
KSCOPE_DECL void add_source_lines(const warp_stall_options& options, module_watch watch, const cupti_api& api,
                             warp_stall_result& result);

// The pass itself (see the top of this header). `user_error` receives an exception the
// work threw; the caller rethrows it once sampling is disabled.
KSCOPE_DECL void run_warp_stall_pass_locked(counter_work_ref work, const warp_stall_options& options,
                                       warp_stall_result& result, std::exception_ptr& user_error);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void add_source_lines(const warp_stall_options& options, module_watch watch, const cupti_api& api,
                             warp_stall_result& result) {
  if (options.source_line_pcs == 0) return;
  std::vector<warp_stall_profile*> profiles;
  for (warp_stall_profile& k : result.kernels) profiles.push_back(&k);
  profiles.push_back(&result.total);
  cubin_store& store = cubin_store::global();
  std::string first_error;
  std::size_t errors = 0;
  const std::size_t lookups = resolve_source_lines(
      profiles, options.source_line_pcs, warp_stall_max_source_lookups, [&](const warp_stall_pc& pc) {
        std::string error;
        source_line line = find_source_line(
            store, watch, pc,
            [&api](const std::vector<char>& cubin, const std::string& symbol, std::uint64_t offset) {
              return cupti_sass_to_source(api, cubin, symbol, offset);
            },
            &error);
        if (!error.empty() && errors++ == 0) first_error = error;
        return line;
      });
  std::string note = source_line_note(result.total);
  if (!note.empty()) result.notes.push_back(note + " (" + result.module_loads + ")");
  if (errors > 0)
    result.notes.push_back(std::to_string(errors) + " source-line lookups failed, the first with: " + first_error);
  if (lookups == warp_stall_max_source_lookups)
    result.notes.push_back("source lines looked up for the first " + std::to_string(lookups) +
                           " distinct hot PCs only (warp_stall_max_source_lookups)");
  const cubin_store_counts c = store.counts();
  if (c.evicted > 0 || c.dropped > 0 || c.errors > 0)
    result.notes.push_back("cubin store (" + std::to_string(c.budget_bytes >> 20) + " MiB budget, " +
                           std::to_string(c.bytes >> 20) + " MiB in " + std::to_string(c.cubins) + " cubins): " +
                           std::to_string(c.evicted) + " evicted, " + std::to_string(c.dropped) +
                           " dropped (larger than the budget), " + std::to_string(c.errors) +
                           " module loads not captured (no CRC or out of memory)");
}

KSCOPE_DECL void run_warp_stall_pass_locked(counter_work_ref work, const warp_stall_options& options,
                                       warp_stall_result& result, std::exception_ptr& user_error) {
  const auto refuse = [&result](counter_state s, std::string why) {
    result.state = s;
    result.message = std::move(why);
  };
  const auto cuda_failed = [&refuse](cudaError_t e, const char* call) {
    (void)cudaGetLastError();  // kscope's own call failed: clear its error
    refuse(counter_state::failed,
           std::string("warp stalls unavailable: ") + call + " failed: " + cudaGetErrorString(e));
  };

  if (const gpu_availability& gpu = probe_gpu(); !gpu.available())
    return refuse(counter_state::unavailable, "warp stalls unavailable: " + gpu.reason);
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return cuda_failed(e, "cudaGetDevice");
  if (const cudaError_t e = cudaFree(nullptr); e != cudaSuccess) return cuda_failed(e, "cudaFree(nullptr)");
  CUcontext context = nullptr;
  std::string why;
  if (!current_cuda_context(context, why)) return refuse(counter_state::failed, "warp stalls unavailable: " + why);

  counter_libraries& libs = counter_library_state();
  if (!load_cupti(libs.cupti, options.cupti_library, why))
    return refuse(counter_state::unavailable, "warp stalls unavailable: " + why);
  result.cupti_version = libs.cupti.version;
  pc_sampling_api& api = pc_sampling_state();
  if (!api.resolved()) {
    const std::string missing = resolve_pc_sampling_symbols(libs.cupti.handle, api);
    if (!missing.empty())
      return refuse(counter_state::unavailable, "warp stalls unavailable: " + libs.cupti.path + " has no " + missing +
                                                    " (PC sampling needs CUDA 11.3 or later)");
  }
  const auto cupti_failed = [&refuse, &libs](CUptiResult r, const std::string& call) {
    const counter_state s = counter_state_for(r);
    const std::string advice = counter_error_advice(r);
    refuse(s == counter_state::collected ? counter_state::failed : s,
           "warp stalls unavailable: " + call + " failed with " + libs.cupti.result_name(r) +
               (advice.empty() ? std::string() : ": " + advice));
  };

  // cuptiProfilerDeviceSupported names why a device cannot be sampled (vGPU, MIG, WSL...)
  // before cuptiPCSamplingEnable fails with a less telling error. It needs the profiler
  // initialized; where the library lacks it, the enable below has the word.
  if (!libs.profiler.resolved()) (void)resolve_profiler_symbols(libs.cupti.handle, libs.profiler);
  if (libs.profiler.resolved() && !libs.profiler_initialized) {
    KSCOPE_CUPTI_PARAMS(CUpti_Profiler_Initialize_Params, init);
    mark_cupti_state_beyond_activity();  // the collector must not finalize CUPTI under it
    if (libs.profiler.initialize(&init) == CUPTI_SUCCESS) libs.profiler_initialized = true;  // never deinitialized
  }
  if (libs.profiler_initialized) {
    const device_support support = read_device_support(libs.profiler, device, CUPTI_PROFILER_PC_SAMPLING);
    if (support.unsupported && !support.reasons.empty())
      return refuse(counter_state::unsupported_device,
                    "warp stalls unavailable: CUPTI cannot sample this device (" + support.reasons + ")");
  }

  // Earlier work must not be sampled.
  if (const cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess)
    return cuda_failed(e, "cudaDeviceSynchronize (before sampling)");

  // Module loads watched while the work runs (its kernels' first launches load their
  // modules), for source lines: by the collector, or by a subscription of this pass held
  // until the work is done (subscribed before sampling is enabled, as CUPTI's own samples do).
  module_load_subscription modules(libs.cupti);
  result.module_loads = modules.how();

  pc_sampling_reader reader;
  kept_pc_sampling& kept = kept_pc_sampling_state();
  std::uint64_t context_id = 0;
  const bool id_known = current_cuda_context_id(context_id);
  // PC sampling stays enabled between passes (kept_pc_sampling says why). A kept one on
  // another context, or one whose buffers the options no longer fit, goes first.
  if (kept.context != nullptr &&
      (kept.context != context || !id_known || kept.context_id != context_id || !kept.fits(options) ||
       !options.keep_enabled))
    release_kept_pc_sampling_locked();
  const bool fresh = kept.context == nullptr;
  if (fresh) {
    CUpti_PCSamplingEnableParams enable{};
    enable.size = CUpti_PCSamplingEnableParamsSize;
    mark_cupti_state_beyond_activity();
    enable.ctx = context;
    if (const CUptiResult r = api.enable(&enable); r != CUPTI_SUCCESS) return cupti_failed(r, "cuptiPCSamplingEnable");
    kept.context = context;
    kept.context_id = id_known ? context_id : 0;
    kept.api = &api;
    kept.max_pcs = options.max_pcs;
    kept.scratch_buffer_bytes = options.scratch_buffer_bytes;
    kept.hardware_buffer_bytes = options.hardware_buffer_bytes;
    kept_pc_sampling_releaser().store(&release_kept_pc_sampling_locked, std::memory_order_release);
    pc_sampling_release_for_activity().store(&release_kept_pc_sampling_unlocked, std::memory_order_release);
  }
  // Every way out but a kept success lets it go (disable: CUPTI joins its threads).
  struct release_unless_kept {
    bool keep = false;
    ~release_unless_kept() {
      if (!keep) release_kept_pc_sampling_locked();
    }
  } releaser;

  if (fresh) {
    // The device's stall reasons: names and the indexes the records use (after the enable).
    std::size_t reason_count = 0;
    CUpti_PCSamplingGetNumStallReasonsParams count{};
    count.size = CUpti_PCSamplingGetNumStallReasonsParamsSize;
    count.ctx = context;
    count.numStallReasons = &reason_count;
    if (const CUptiResult r = api.get_num_stall_reasons(&count); r != CUPTI_SUCCESS)
      return cupti_failed(r, "cuptiPCSamplingGetNumStallReasons");
    std::vector<std::vector<char>> name_storage(reason_count, std::vector<char>(CUPTI_STALL_REASON_STRING_SIZE, '\0'));
    std::vector<char*> names(reason_count);
    kept.indexes.assign(reason_count, 0);
    for (std::size_t i = 0; i < reason_count; ++i) names[i] = name_storage[i].data();
    if (reason_count > 0) {
      CUpti_PCSamplingGetStallReasonsParams reasons{};
      reasons.size = CUpti_PCSamplingGetStallReasonsParamsSize;
      reasons.ctx = context;
      reasons.numStallReasons = reason_count;
      reasons.stallReasonIndex = kept.indexes.data();
      reasons.stallReasons = names.data();
      if (const CUptiResult r = api.get_stall_reasons(&reasons); r != CUPTI_SUCCESS)
        return cupti_failed(r, "cuptiPCSamplingGetStallReasons");
    }
    kept.names.clear();
    for (std::size_t i = 0; i < reason_count; ++i)
      kept.names.emplace_back(name_storage[i].data(), ::strnlen(name_storage[i].data(), CUPTI_STALL_REASON_STRING_SIZE));
    // The buffer CUPTI fills when it flushes (module loads, the disable): it keeps the
    // pointer while sampling is enabled, so it lives as long as the kept state.
    kept.end_buffer = std::make_unique<pc_sampling_buffer>(options.max_pcs, reason_count);
  }
  const std::size_t reason_count = kept.indexes.size();
  for (std::size_t i = 0; i < reason_count; ++i) {
    result.stall_reasons.push_back(kept.names[i]);
    reader.reason_names[kept.indexes[i]] = kept.names[i];
  }
  pc_sampling_buffer& end_buffer = *kept.end_buffer;
  pc_sampling_buffer read_buffer(options.max_pcs, reason_count);

  // One configuration call per pass (the collection mode and period are the pass's). A
  // plain array (at most 8 attributes are set): nvcc 13's front end fails (internal error)
  // on a std::vector of this struct in C++20.
  CUpti_PCSamplingConfigurationInfo config[9] = {};
  std::size_t configured = 0;
  const auto add = [&config, &configured](CUpti_PCSamplingConfigurationAttributeType type)
      -> CUpti_PCSamplingConfigurationInfo& {
    CUpti_PCSamplingConfigurationInfo& c = config[configured++];
    c.attributeType = type;
    return c;
  };
  if (options.sampling_period != 0)
    add(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD).attributeData.samplingPeriodData.samplingPeriod =
        options.sampling_period;
  if (reason_count > 0) {
    CUpti_PCSamplingConfigurationInfo& all = add(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON);
    all.attributeData.stallReasonData.stallReasonCount = reason_count;
    all.attributeData.stallReasonData.pStallReasonIndex = kept.indexes.data();
  }
  // Buffer sizes only when freshly enabled (kept.fits() checked they did not change).
  if (fresh && options.scratch_buffer_bytes != 0)
    add(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SCRATCH_BUFFER_SIZE)
        .attributeData.scratchBufferSizeData.scratchBufferSize = options.scratch_buffer_bytes;
  if (fresh && options.hardware_buffer_bytes != 0)
    add(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE)
        .attributeData.hardwareBufferSizeData.hardwareBufferSize = options.hardware_buffer_bytes;
  add(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE).attributeData.collectionModeData.collectionMode =
      options.collection == warp_stall_collection::continuous ? CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS
                                                              : CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED;
  add(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_OUTPUT_DATA_FORMAT)
      .attributeData.outputDataFormatData.outputDataFormat = CUPTI_PC_SAMPLING_OUTPUT_DATA_FORMAT_PARSED;
  add(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER)
      .attributeData.samplingDataBufferData.samplingDataBuffer = end_buffer.get();
  // Sampling only between cuptiPCSamplingStart and Stop: the enable outlives the pass.
  add(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL)
      .attributeData.enableStartStopControlData.enableStartStopControl = 1;
  CUpti_PCSamplingConfigurationInfoParams set{};
  set.size = CUpti_PCSamplingConfigurationInfoParamsSize;
  set.ctx = context;
  set.numAttributes = configured;
  set.pPCSamplingConfigurationInfo = config;
  if (const CUptiResult r = api.set_configuration(&set); r != CUPTI_SUCCESS) {
    // Name the attribute CUPTI refused, when it says which.
    std::string call = "cuptiPCSamplingSetConfigurationAttribute";
    for (std::size_t i = 0; i < configured; ++i)
      if (const CUpti_PCSamplingConfigurationInfo& c = config[i]; c.attributeStatus != CUPTI_SUCCESS) {
        call += " (attribute " + std::to_string(static_cast<int>(c.attributeType)) + ": " +
                libs.cupti.result_name(c.attributeStatus) + ")";
        break;
      }
    return cupti_failed(r, call);
  }
  {  // The period CUPTI chose (its default depends on the device), for the message.
    CUpti_PCSamplingConfigurationInfo period{};
    period.attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD;
    CUpti_PCSamplingConfigurationInfoParams get{};
    get.size = CUpti_PCSamplingConfigurationInfoParamsSize;
    get.ctx = context;
    get.numAttributes = 1;
    get.pPCSamplingConfigurationInfo = &period;
    if (api.get_configuration(&get) == CUPTI_SUCCESS && period.attributeStatus == CUPTI_SUCCESS)
      result.sampling_period = period.attributeData.samplingPeriodData.samplingPeriod;
  }
  // Whatever an earlier pass left in the end buffer is not this pass's.
  end_buffer.reset();

  CUpti_PCSamplingStartParams start{};
  start.size = CUpti_PCSamplingStartParamsSize;
  start.ctx = context;
  if (const CUptiResult r = api.start(&start); r != CUPTI_SUCCESS) return cupti_failed(r, "cuptiPCSamplingStart");

  // The work, and its kernels finished.
  try {
    work();
  } catch (...) {
    user_error = std::current_exception();
  }
  std::string run_error;
  // An error here is the work's (a faulting kernel): reported, and left for the program to see.
  if (const cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess)
    run_error = std::string("the sampled work failed: ") + cudaGetErrorString(e);
  CUpti_PCSamplingStopParams stop{};
  stop.size = CUpti_PCSamplingStopParamsSize;
  stop.ctx = context;
  const CUptiResult stopped = api.stop(&stop);
  modules.stop();  // CUPTI's subscriber is free again for the collector
  if (stopped != CUPTI_SUCCESS) return cupti_failed(stopped, "cuptiPCSamplingStop");

  // What CUPTI put in the end buffer during the work (it flushes there when modules load
  // or unload), then every record it holds, read until it has none left.
  if (end_buffer.data().totalNumPcs > 0) {
    reader.read(end_buffer);
    end_buffer.reset();
  }
  std::string read_error;
  bool hardware_full = false;
  constexpr std::size_t max_reads = 1 << 16;  // bounded: a CUPTI that never runs dry cannot hang the program
  std::size_t reads = 0;
  for (; reads < max_reads; ++reads) {
    read_buffer.reset();
    CUpti_PCSamplingGetDataParams get{};
    get.size = CUpti_PCSamplingGetDataParamsSize;
    get.ctx = context;
    get.pcSamplingData = read_buffer.get();
    const CUptiResult r = api.get_data(&get);
    if (r == CUPTI_ERROR_OUT_OF_MEMORY || read_buffer.data().hardwareBufferFull != 0) {
      hardware_full = true;
      break;
    }
    if (r != CUPTI_SUCCESS) {
      read_error = "cuptiPCSamplingGetData failed with " + libs.cupti.result_name(r);
      break;
    }
    reader.read(read_buffer);
    if (read_buffer.data().totalNumPcs == 0 && read_buffer.data().remainingNumPcs == 0) break;
  }
  if (end_buffer.data().totalNumPcs > 0) reader.read(end_buffer);
  if (const std::size_t lost = end_buffer.data().remainingNumPcs; lost > 0)
    result.notes.push_back(std::to_string(lost) + " PC records did not fit the end buffer and were lost: raise "
                           "warp_stall_options::max_pcs (" + std::to_string(options.max_pcs) + ")");
  end_buffer.reset();
  // Kept for the next pass unless something went wrong or the caller asked otherwise.
  releaser.keep = options.keep_enabled && !user_error && run_error.empty() && read_error.empty() && !hardware_full;
  if (releaser.keep) ++kept.passes;

  if (user_error) return refuse(counter_state::failed, "warp stalls not collected: the sampled work threw");
  if (!run_error.empty()) return refuse(counter_state::failed, "warp stalls not collected: " + run_error);
  if (!read_error.empty()) return refuse(counter_state::failed, "warp stalls not collected: " + read_error);

  result.kernels = build_warp_stall_profiles(reader.records);
  result.total = aggregate_warp_stalls(options.scope, result.kernels);
  result.cupti_total_samples = reader.total_samples;
  result.dropped_samples = reader.dropped_samples;
  result.non_user_samples = reader.non_user_samples;
  if (hardware_full)
    result.notes.push_back("the device's sample buffer filled and samples were lost: raise "
                           "warp_stall_options::hardware_buffer_bytes or sampling_period");
  if (reads == max_reads)
    result.notes.push_back("stopped reading after " + std::to_string(max_reads) + " reads of CUPTI's data");
  if (result.dropped_samples > 0)
    result.notes.push_back(count_text(result.dropped_samples) + " samples dropped by the hardware (back-pressure): "
                           "a larger sampling_period loses fewer");
  if (result.non_user_samples > 0)
    result.notes.push_back(count_text(result.non_user_samples) +
                           " samples fell in kernels CUPTI gives no PCs for: driver or library internals, or kernels "
                           "first launched while PC sampling was disabled between passes (a counter or PM-sampling "
                           "pass, or release_warp_stall_sampling(), let it go: CUPTI then names only the kernels "
                           "launched before the next enable or during a pass)");
  try {  // the samples stand without their lines
    add_source_lines(options, modules.watch(), libs.cupti, result);
  } catch (const std::exception& e) {
    result.notes.push_back(std::string("source lines not looked up: ") + e.what());
  }

  result.state = counter_state::collected;
  const std::uint64_t samples = result.total.total_samples();
  const bool continuous = options.collection == warp_stall_collection::continuous;
  const std::string period =
      result.sampling_period != 0 ? ", one sample per SM every 2^" + std::to_string(result.sampling_period) + " cycles"
                                  : std::string();
  result.message = "warp stalls: " + count_text(samples) + " samples in " + std::to_string(result.kernels.size()) +
                   (continuous ? " kernel functions" : " kernel launches") + " (" + to_string(options.collection) +
                   period + ", " + std::to_string(reason_count) + " stall reasons, CUPTI " +
                   std::to_string(result.cupti_version) + ")";
  if (result.kernels.empty()) {
    // Samples taken in code CUPTI cannot name are not "no kernel": say where they went.
    const std::uint64_t unnamed = result.non_user_samples + result.dropped_samples;
    if ((unnamed > 0 || result.cupti_total_samples > 0) &&
        counter_library_state().range_profiler_enabled.load(std::memory_order_relaxed))
      result.message += "; " + count_text(std::max(unnamed, result.cupti_total_samples)) +
                        " samples were taken but none in a kernel CUPTI gives PCs for: a hardware-counter pass "
                        "(range profiler) ran earlier in this process, and CUPTI's PC sampling then names no "
                        "kernel whose code was loaded before it; take warp stalls before counters";
    else if (unnamed > 0 || result.cupti_total_samples > 0)
      result.message += "; " + count_text(std::max(unnamed, result.cupti_total_samples)) +
                        " samples were taken but none in a kernel CUPTI gives PCs for (kernels first launched "
                        "while PC sampling was disabled between passes, or driver and library internals): none "
                        "can be attributed";
    else
      result.message += "; no kernel was sampled (none launched, or all shorter than the period)";
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#endif  // KSCOPE_HAS_PC_SAMPLING

KSCOPE_DECL warp_stall_result run_warp_stall_pass(counter_work_ref work, const warp_stall_options& options);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL warp_stall_result run_warp_stall_pass(counter_work_ref work, const warp_stall_options& options) {
  warp_stall_result result;
  result.total.name = options.scope;
  std::exception_ptr user_error;
  try {
    const std::string error = warp_stall_request_error(options);
    if (!error.empty()) {
      result.state = counter_state::invalid_request;
      result.message = "warp stalls not collected: " + error;
      return result;
    }
#if KSCOPE_HAS_PC_SAMPLING
    // The counters' lock: PC sampling and the range profiler cannot share the hardware.
    std::unique_lock<std::mutex> lock(counter_pass_mutex(), std::try_to_lock);
    if (!lock.owns_lock()) {
      result.state = counter_state::busy;
      result.message = "warp stalls not collected: a counter or warp-stall pass is already running in this process";
      return result;
    }
    release_kept_range_profiler();  // PC sampling cannot share the counters with a kept range profiler
    // (a kept PC sampling of this process is reused by the pass, not released)
    run_warp_stall_pass_locked(work, options, result, user_error);
#else
    (void)work;
    result.state = counter_state::disabled;
    result.message = "warp stalls unavailable: kscope was built without CUPTI's PC sampling and range profiler headers "
                     "(cupti_pcsampling.h, cupti_range_profiler.h: CUDA 12.6 or later)";
#endif
  } catch (const std::exception& e) {  // out of memory in kscope's own bookkeeping
    result.state = counter_state::failed;
    result.message = std::string("warp stalls not collected: ") + e.what();
  } catch (...) {
    result.state = counter_state::failed;
    result.message = "warp stalls not collected: unknown error";
  }
  if (user_error) std::rethrow_exception(user_error);
  return result;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

// Disables the PC sampling a warp-stall pass left enabled (warp_stall_options::keep_enabled)
// so that kernel launches stop paying for it; the next pass enables it again. Returns false,
// releasing nothing, while a counter or warp-stall pass runs.
//   kscope::release_warp_stall_sampling();   // profiling done: launches at full speed again
KSCOPE_DECL bool release_warp_stall_sampling();

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool release_warp_stall_sampling() {
#if KSCOPE_HAS_PC_SAMPLING
  return detail::release_kept_pc_sampling_unlocked();
#else
  return true;
#endif
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Samples the warps of the GPU work `work` launches and returns where they waited, per
// kernel launch. `work` is not called when sampling cannot start (result.message says why).
//   auto r = kscope::profile_warp_stalls([&] { k<<<g, b>>>(x); });
//   if (r.ok()) std::puts(kscope::dominant_stall(r.total).text.c_str());
template <class Work>
[[nodiscard]] warp_stall_result profile_warp_stalls(Work&& work, const warp_stall_options& options = {}) {
  using work_type = std::remove_reference_t<Work>;
  const detail::counter_work_ref ref{const_cast<void*>(static_cast<const void*>(std::addressof(work))),
                                     [](void* object) { (*static_cast<work_type*>(object))(); }};
  return detail::run_warp_stall_pass(ref, options);
}

}  // namespace kscope
