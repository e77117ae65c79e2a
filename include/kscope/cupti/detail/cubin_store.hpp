// kscope/cupti/detail/cubin_store.hpp — copies of the cubins of loaded modules, kept so that
// the hottest PCs of a warp-stall pass can be given their source file and line.
//
// Why a store: cuptiGetSassToSourceCorrelation maps (cubin, function, PC offset) to a file
// and line, but CUPTI hands out a module's cubin only inside the resource callback
// CUPTI_CBID_RESOURCE_MODULE_LOADED (CUpti_ModuleResourceData: moduleId, cubinSize, pCubin,
// valid during the callback only). PC-sampling records name their module by a CRC
// (CUpti_PCSamplingPCData::cubinCrc, the value cuptiGetCubinCrc computes), so the store
// keeps one copy per CRC and looks it up after the pass.
//
// Who feeds it: CUPTI allows one callback subscriber per process. When kscope's activity
// collector holds it, the collector enables MODULE_LOADED and hands every module here
// (activity/collector.hpp, on_api_callback). Otherwise profile_warp_stalls subscribes for the
// duration of its work (module_load_subscription below). A module loaded while neither
// watched is never seen (CUDA's default lazy loading loads a module at the first launch of
// one of its kernels, so: before the collector started, or between two passes), and the
// report says so for its PCs.
//
// Bounded: at most budget_bytes() of cubins (64 MiB by default; set_budget_bytes, 0 keeps
// none). A new cubin makes room by evicting the least recently used ones (added or found);
// one larger than the whole budget is dropped. The CRCs of evicted and dropped cubins are
// remembered (up to 4096 of them), so a PC of such a module reads "dropped, over budget" rather
// than "never seen"; everything is counted (cubin_store_counts).
//
// Thread-safe with one leaf lock: nothing else is locked and no CUPTI or CUDA call is made
// while it is held; the CRC and the copy are made outside it. find() hands out a shared
// pointer, so an eviction while a lookup runs never frees the bytes in use.
//
//   detail::cubin_store& store = detail::cubin_store::global();
//   detail::cubin_ref cubin = store.find(pc.cubin_crc);
//   if (cubin) ... cuptiGetSassToSourceCorrelation(cubin.bytes->data(), ...);
//
// The store and the ELF check are plain C++, tested on the CPU with made-up CRCs
// (tests/warp_stalls_test.cpp; the lookup rules, find_source_line, are warp_stalls/collect.hpp's);
// the CUPTI calls are in the KSCOPE_HAS_CUBIN_CAPTURE part (cupti_pcsampling.h, CUDA 11.3 and
// later; functions resolved with dlsym, CUPTI never linked).
#pragma once

#include "../../core/detail/once.hpp"
#include "api.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#if KSCOPE_HAS_CUPTI && defined(__has_include)
#  if __has_include(<cupti_pcsampling.h>)
#    define KSCOPE_HAS_CUBIN_CAPTURE 1
#  endif
#endif
#ifndef KSCOPE_HAS_CUBIN_CAPTURE
#  define KSCOPE_HAS_CUBIN_CAPTURE 0
#endif

#if KSCOPE_HAS_CUBIN_CAPTURE
#  include <cupti_pcsampling.h>
#endif

namespace kscope {
namespace detail {

// Whether a cubin carries a line table: .debug_line is there with -lineinfo (and -G), absent
// otherwise. unknown: not a 64-bit little-endian ELF kscope can read.
enum class cubin_line_info : std::uint8_t { unknown, present, absent };

// Reads the section names of an ELF64 cubin, every offset checked against `size`.
//   cubin_line_table(cubin.data(), cubin.size()) == cubin_line_info::absent  // built without -lineinfo
[[nodiscard]] KSCOPE_DECL cubin_line_info cubin_line_table(const void* data, std::size_t size) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL cubin_line_info cubin_line_table(const void* data, std::size_t size) noexcept {
  const auto* b = static_cast<const unsigned char*>(data);
  if (b == nullptr || size < 64 || b[0] != 0x7f || b[1] != 'E' || b[2] != 'L' || b[3] != 'F') return cubin_line_info::unknown;
  if (b[4] != 2 || b[5] != 1) return cubin_line_info::unknown;  // ELFCLASS64, little endian: what nvcc writes
  const auto read = [b](std::size_t at, int bytes) {  // callers check at + bytes <= size
    std::uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | b[at + static_cast<std::size_t>(i)];
    return v;
  };
  const std::uint64_t section_table = read(0x28, 8);
  const std::uint64_t entry_size = read(0x3A, 2);
  std::uint64_t sections = read(0x3C, 2);
  std::uint64_t names_index = read(0x3E, 2);
  if (entry_size < 64 || section_table == 0 || section_table > size || size - section_table < entry_size)
    return cubin_line_info::unknown;
  // Extended numbering: more than 0xff00 sections keep their count in section 0's sh_size
  // and the name table's index in its sh_link.
  if (sections == 0) sections = read(section_table + 0x20, 8);
  if (names_index == 0xffff) names_index = read(section_table + 0x28, 4);
  if (sections == 0 || names_index >= sections || sections > (size - section_table) / entry_size)
    return cubin_line_info::unknown;
  const auto header = [&](std::uint64_t i) { return static_cast<std::size_t>(section_table + i * entry_size); };
  const std::uint64_t names_at = read(header(names_index) + 0x18, 8), names_size = read(header(names_index) + 0x20, 8);
  if (names_at > size || names_size > size - names_at) return cubin_line_info::unknown;
  constexpr char wanted[] = ".debug_line";
  constexpr std::size_t wanted_size = sizeof(wanted);  // with its NUL
  for (std::uint64_t i = 0; i < sections; ++i) {
    const std::uint64_t name = read(header(i), 4);
    if (name >= names_size || names_size - name < wanted_size) continue;
    if (std::char_traits<char>::compare(reinterpret_cast<const char*>(b + names_at + name), wanted, wanted_size) == 0)
      return cubin_line_info::present;
  }
  return cubin_line_info::absent;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// What the store did and holds.
struct cubin_store_counts {
  std::uint64_t added = 0;       // cubins handed in (module loads seen with a CRC)
  std::uint64_t stored = 0;      // kept under a new CRC
  std::uint64_t duplicates = 0;  // a CRC already held: the same module on another device, or loaded again
  std::uint64_t evicted = 0;     // removed to make room for a newer cubin
  std::uint64_t dropped = 0;     // never kept: larger than the whole budget, or the budget is 0
  std::uint64_t errors = 0;      // module loads not captured: no CRC, no cubin, out of memory
  std::uint64_t lookups = 0, hits = 0;
  std::size_t cubins = 0;        // held now
  std::size_t bytes = 0;         // held now
  std::size_t budget_bytes = 0;
};

// A cubin found in the store; empty when not held.
struct cubin_ref {
  std::shared_ptr<const std::vector<char>> bytes;
  cubin_line_info line_info = cubin_line_info::unknown;
  explicit operator bool() const noexcept { return bytes != nullptr; }
};

// The process-wide store (global()), or a local one in the tests.
class cubin_store {
 public:
  static constexpr std::size_t default_budget_bytes = std::size_t{64} << 20;
  static constexpr std::size_t remembered_losses = 4096;

  enum class outcome : std::uint8_t { stored, duplicate, dropped };

  // Never destroyed: CUPTI may report a module load during exit, after static destructors.
  [[nodiscard]] static cubin_store& global();

  explicit cubin_store(std::size_t budget_bytes = default_budget_bytes) noexcept;
  cubin_store(const cubin_store&) = delete;
  cubin_store& operator=(const cubin_store&) = delete;

  // Keeps a copy of `size` bytes at `data` under `crc`, evicting the least recently used
  // cubins until it fits. Throws std::bad_alloc only (the CUPTI callback counts it).
  outcome add(std::uint64_t crc, const void* data, std::size_t size);

  // The cubin with this CRC (a hit counts as a use), or an empty ref.
  [[nodiscard]] cubin_ref find(std::uint64_t crc);

  // Whether a cubin with this CRC was handed in and then evicted or dropped (the first
  // remembered_losses such CRCs are remembered; later ones are only counted).
  [[nodiscard]] bool lost(std::uint64_t crc) const;

  // A new budget; cubins beyond it are evicted now. 0 keeps none.
  void set_budget_bytes(std::size_t bytes);

  [[nodiscard]] std::size_t budget_bytes() const;

  // A module load that could not be captured (no CRC, no cubin, out of memory).
  void note_error() noexcept;

  [[nodiscard]] cubin_store_counts counts() const;

  // Whether kscope's activity collector has its module-load callback on (then it feeds the
  // store, and a warp-stall pass need not, and cannot, subscribe its own).
  void set_collector_watching(bool on) noexcept;
  [[nodiscard]] bool collector_watching() const noexcept;

 private:
  struct entry {
    std::shared_ptr<const std::vector<char>> bytes;
    cubin_line_info line_info = cubin_line_info::unknown;
    std::uint64_t last_use = 0;
  };

  outcome drop_locked(std::uint64_t crc);

  void remember_loss_locked(std::uint64_t crc);

  // Evicts the least recently used cubins until at most `limit` bytes are held. A scan per
  // eviction: the store holds tens to hundreds of cubins, and evictions are rare.
  void shrink_locked(std::size_t limit);

  mutable std::mutex mutex_;
  std::unordered_map<std::uint64_t, entry> entries_;
  std::unordered_set<std::uint64_t> lost_;
  std::size_t budget_;
  std::size_t bytes_ = 0;
  std::uint64_t uses_ = 0;
  cubin_store_counts counts_;
  std::atomic<std::uint64_t> errors_{0};
  std::atomic<bool> collector_watching_{false};
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void cubin_store::note_error() noexcept { errors_.fetch_add(1, std::memory_order_relaxed); }

KSCOPE_DECL void cubin_store::set_collector_watching(bool on) noexcept { collector_watching_.store(on, std::memory_order_release); }

KSCOPE_DECL bool cubin_store::collector_watching() const noexcept { return collector_watching_.load(std::memory_order_acquire); }

KSCOPE_DECL void cubin_store::remember_loss_locked(std::uint64_t crc) {
  if (lost_.size() < remembered_losses) lost_.insert(crc);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL cubin_store& cubin_store::global() {
  // A fork never catches it half-built (core/detail/once.hpp).
  static lazy_global<cubin_store> instance{lock_rank::init};
  return instance.get([] {
    auto* s = new cubin_store();
    // A leaf lock: no other kscope lock is taken while it is held, so a rank above every
    // lock held when it is taken (a module load's callback may come inside a PTX load)
    // keeps the fork handler's order (fork_guard.hpp).
    guard_across_fork(s->mutex_, lock_rank::cubin_store);
    return s;
  });
}

KSCOPE_DECL cubin_store::cubin_store(std::size_t budget_bytes) noexcept : budget_(budget_bytes) {}

KSCOPE_DECL auto cubin_store::add(std::uint64_t crc, const void* data, std::size_t size) -> outcome {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++counts_.added;
    if (const auto it = entries_.find(crc); it != entries_.end()) {
      ++counts_.duplicates;
      it->second.last_use = ++uses_;
      return outcome::duplicate;
    }
    if (size == 0 || size > budget_) return drop_locked(crc);
  }
  // Copied and checked outside the lock: a module load elsewhere does not wait for it.
  auto copy = std::make_shared<const std::vector<char>>(static_cast<const char*>(data),
                                                         static_cast<const char*>(data) + size);
  const cubin_line_info line_info = cubin_line_table(copy->data(), copy->size());
  std::lock_guard<std::mutex> lock(mutex_);
  if (const auto it = entries_.find(crc); it != entries_.end()) {  // another thread won the race
    ++counts_.duplicates;
    it->second.last_use = ++uses_;
    return outcome::duplicate;
  }
  if (size > budget_) return drop_locked(crc);  // the budget shrank meanwhile
  shrink_locked(budget_ - size);
  entries_.emplace(crc, entry{std::move(copy), line_info, ++uses_});
  bytes_ += size;
  ++counts_.stored;
  lost_.erase(crc);
  return outcome::stored;
}

KSCOPE_DECL cubin_ref cubin_store::find(std::uint64_t crc) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_.lookups;
  const auto it = entries_.find(crc);
  if (it == entries_.end()) return {};
  ++counts_.hits;
  it->second.last_use = ++uses_;
  return {it->second.bytes, it->second.line_info};
}

KSCOPE_DECL bool cubin_store::lost(std::uint64_t crc) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lost_.count(crc) != 0;
}

KSCOPE_DECL void cubin_store::set_budget_bytes(std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  budget_ = bytes;
  shrink_locked(bytes);
}

KSCOPE_DECL std::size_t cubin_store::budget_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return budget_;
}

KSCOPE_DECL cubin_store_counts cubin_store::counts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  cubin_store_counts c = counts_;
  c.errors = errors_.load(std::memory_order_relaxed);
  c.cubins = entries_.size();
  c.bytes = bytes_;
  c.budget_bytes = budget_;
  return c;
}

KSCOPE_DECL auto cubin_store::drop_locked(std::uint64_t crc) -> outcome {
  ++counts_.dropped;
  remember_loss_locked(crc);
  return outcome::dropped;
}

KSCOPE_DECL void cubin_store::shrink_locked(std::size_t limit) {
  while (bytes_ > limit && !entries_.empty()) {
    auto oldest = entries_.begin();
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (it->second.last_use < oldest->second.last_use) oldest = it;
    bytes_ -= oldest->second.bytes->size();
    remember_loss_locked(oldest->first);
    entries_.erase(oldest);
    ++counts_.evicted;
  }
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// How module loads were watched while a pass ran.
enum class module_watch : std::uint8_t {
  watched,      // by kscope's collector or by the pass's own subscription
  not_watched,  // neither could (another tool holds CUPTI's subscriber)
  unavailable,  // no cuptiGetCubinCrc / cuptiGetSassToSourceCorrelation, or the store's budget is 0
};

// What a SASS-to-source lookup answered (CUPTI's, or a fake in the tests).
struct sass_source {
  bool ok = false;         // the call succeeded
  std::string file;        // "" when the line table has no line for the PC
  std::uint32_t line = 0;  // 0 likewise
  std::string error;       // why the call failed
};

// A file name from CUPTI's two parts: the directory is prepended to a relative file.
[[nodiscard]] KSCOPE_DECL std::string join_source_path(const char* dir, const char* file);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string join_source_path(const char* dir, const char* file) {
  if (file == nullptr || *file == '\0') return {};
  if (*file == '/' || dir == nullptr || *dir == '\0') return file;
  std::string out = dir;
  if (out.back() != '/') out += '/';
  return out + file;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_HAS_CUBIN_CAPTURE

// The two CUPTI entry points, resolved once from the libcupti already loaded (the
// collector's or the counters': load_cupti() finds the same library).
struct cubin_capture_api {
  std::atomic<decltype(&::cuptiGetCubinCrc)> get_cubin_crc{nullptr};
  std::atomic<decltype(&::cuptiGetSassToSourceCorrelation)> sass_to_source{nullptr};
};

KSCOPE_DECL cubin_capture_api& cubin_capture_state();

// true when both entry points are known (resolved now or earlier).
KSCOPE_DECL bool resolve_cubin_capture(void* handle) noexcept;

// Inside CUPTI's MODULE_LOADED callback (the cubin is valid only there): the cubin's CRC,
// then a copy into the store. Never throws into CUDA; what goes wrong is counted.
KSCOPE_DECL void capture_loaded_module(const CUpti_ResourceData& resource) noexcept;

// The callback of the pass's own subscription: module loads only.
KSCOPE_DECL void CUPTIAPI on_module_loaded(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* cbdata);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL cubin_capture_api& cubin_capture_state() {
  static lazy_global<cubin_capture_api> state{lock_rank::init};  // never destroyed; fork-safe (once.hpp)
  return state.get([] { return new cubin_capture_api(); });
}

KSCOPE_DECL bool resolve_cubin_capture(void* handle) noexcept {
  cubin_capture_api& api = cubin_capture_state();
  if (handle != nullptr) {
    decltype(&::cuptiGetCubinCrc) crc = nullptr;
    decltype(&::cuptiGetSassToSourceCorrelation) correlate = nullptr;
    if (api.get_cubin_crc.load(std::memory_order_acquire) == nullptr && resolve_symbol(handle, "cuptiGetCubinCrc", crc))
      api.get_cubin_crc.store(crc, std::memory_order_release);
    if (api.sass_to_source.load(std::memory_order_acquire) == nullptr &&
        resolve_symbol(handle, "cuptiGetSassToSourceCorrelation", correlate))
      api.sass_to_source.store(correlate, std::memory_order_release);
  }
  return api.get_cubin_crc.load(std::memory_order_acquire) != nullptr &&
         api.sass_to_source.load(std::memory_order_acquire) != nullptr;
}

KSCOPE_DECL void capture_loaded_module(const CUpti_ResourceData& resource) noexcept {
  cubin_store& store = cubin_store::global();
  try {
    if (store.budget_bytes() == 0) return;  // the store is off: no CRC, no copy
    const auto* module = static_cast<const CUpti_ModuleResourceData*>(resource.resourceDescriptor);
    if (module == nullptr || module->pCubin == nullptr || module->cubinSize == 0) return store.note_error();
    const auto get_crc = cubin_capture_state().get_cubin_crc.load(std::memory_order_acquire);
    if (get_crc == nullptr) return store.note_error();
    CUpti_GetCubinCrcParams crc{};
    crc.size = CUpti_GetCubinCrcParamsSize;
    crc.cubinSize = module->cubinSize;
    crc.cubin = module->pCubin;
    if (get_crc(&crc) != CUPTI_SUCCESS) return store.note_error();
    (void)store.add(crc.cubinCrc, module->pCubin, module->cubinSize);
  } catch (...) {  // out of memory for the copy, a lock that failed
    store.note_error();
  }
}

KSCOPE_DECL void CUPTIAPI on_module_loaded(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* cbdata) {
  if (domain != CUPTI_CB_DOMAIN_RESOURCE || cbid != CUPTI_CBID_RESOURCE_MODULE_LOADED || cbdata == nullptr) return;
  capture_loaded_module(*static_cast<const CUpti_ResourceData*>(cbdata));
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Module loads watched for one warp-stall pass: by the collector when it has its callback
// on, else by a subscription of the pass's own (MODULE_LOADED only), ended by stop() or
// the destructor. how() says which, or why neither.
class module_load_subscription {
 public:
  explicit module_load_subscription(const cupti_api& api);
  ~module_load_subscription() { stop(); }
  module_load_subscription(const module_load_subscription&) = delete;
  module_load_subscription& operator=(const module_load_subscription&) = delete;

  // Unsubscribes (the callback stops); the watch state stays what it was during the work.
  void stop() noexcept;

  [[nodiscard]] module_watch watch() const noexcept { return watch_; }
  [[nodiscard]] const std::string& how() const noexcept { return how_; }

 private:
  const cupti_api& api_;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  module_watch watch_ = module_watch::not_watched;
  std::string how_;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL module_load_subscription::module_load_subscription(const cupti_api& api) : api_(api) {
  cubin_store& store = cubin_store::global();
  if (!resolve_cubin_capture(api_.handle)) {
    watch_ = module_watch::unavailable;
    how_ = api_.path + " has no cuptiGetCubinCrc / cuptiGetSassToSourceCorrelation";
    return;
  }
  if (store.budget_bytes() == 0) {
    watch_ = module_watch::unavailable;
    how_ = "kscope keeps no cubins (kscope::set_cubin_store_budget_bytes(0))";
    return;
  }
  if (store.collector_watching()) {
    watch_ = module_watch::watched;
    how_ = "module loads watched by kscope's activity collector";
    return;
  }
  std::string holder;
  CUptiResult r = api_.subscribe_named(subscriber_, &on_module_loaded, nullptr, "kscope warp-stall pass", holder);
  if (r != CUPTI_SUCCESS) {
    how_ = "module loads not watched: cuptiSubscribe failed with " + api_.result_name(r) +
           (holder.empty() ? std::string() : " (held by " + holder + ")");
    return;
  }
  r = api_.enable_callback(1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED);
  if (r != CUPTI_SUCCESS) {
    how_ = "module loads not watched: cuptiEnableCallback(MODULE_LOADED) failed with " + api_.result_name(r);
    stop();
    return;
  }
  watch_ = module_watch::watched;
  how_ = "module loads watched during the pass";
}

KSCOPE_DECL void module_load_subscription::stop() noexcept {
  if (subscriber_ == nullptr) return;
  (void)api_.unsubscribe(subscriber_);
  subscriber_ = nullptr;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// cuptiGetSassToSourceCorrelation on a stored cubin; CUPTI's strings are freed here.
KSCOPE_DECL sass_source cupti_sass_to_source(const cupti_api& api, const std::vector<char>& cubin, const std::string& symbol,
                                        std::uint64_t pc_offset);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL sass_source cupti_sass_to_source(const cupti_api& api, const std::vector<char>& cubin, const std::string& symbol,
                                        std::uint64_t pc_offset) {
  sass_source out;
  const auto correlate = cubin_capture_state().sass_to_source.load(std::memory_order_acquire);
  if (correlate == nullptr) {
    out.error = "cuptiGetSassToSourceCorrelation not found";
    return out;
  }
  CUpti_GetSassToSourceCorrelationParams p{};
  p.size = CUpti_GetSassToSourceCorrelationParamsSize;
  p.cubin = cubin.data();
  p.cubinSize = cubin.size();
  p.functionName = symbol.c_str();
  p.pcOffset = pc_offset;
  const CUptiResult r = correlate(&p);
  if (r != CUPTI_SUCCESS) {  // CUPTI allocates the strings on success only: none to free
    out.error = "cuptiGetSassToSourceCorrelation failed with " + api.result_name(r);
    return out;
  }
  // CUPTI malloc()s both strings and leaves freeing them to the caller.
  struct c_free {
    void operator()(char* text) const noexcept { std::free(text); }
  };
  const std::unique_ptr<char, c_free> file(p.fileName), dir(p.dirName);
  out.ok = true;
  out.file = join_source_path(dir.get(), file.get());
  out.line = p.lineNumber;
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#elif KSCOPE_HAS_CUPTI

// A toolkit without cupti_pcsampling.h: no capture (the collector's hook stays a no-op).
inline bool resolve_cubin_capture(void*) noexcept { return false; }
inline void capture_loaded_module(const CUpti_ResourceData&) noexcept {}

#endif  // KSCOPE_HAS_CUBIN_CAPTURE

}  // namespace detail
}  // namespace kscope
