// kscope/scope/scope.hpp — RAII scopes that mark the phases of a program.
//
//   void serve(request& r, cudaStream_t stream) {
//     KSCOPE_SCOPE("request");                   // host time + NVTX range
//     { KSCOPE_SCOPE("cpu_prep"); tokenize(r); }
//     {
//       kscope::scope s{"prefill", stream};      // + GPU time from events on `stream`
//       s.set_work({flops, bytes});              // roofline placement in the report
//       s.tag("batch", "8");
//       launch_prefill(r, stream);
//     }
//     KSCOPE_SCOPE_STYLED("sample", kscope::nvtx_color::rgb(0x76B900));   // NVTX colour
//   }
//
// A scope measures host (wall) time always; opens an NVTX range (in the "kscope" domain
// unless kscope::set_nvtx_domain or KSCOPE_NVTX_DOMAIN names another; with a category and
// a colour when given an nvtx_style: scope/nvtx.hpp) so Nsight Systems shows the phase, and
// hands a tool its declared work and tags when it closes; with a stream, records a CUDA
// event at entry and exit
// (from a pool, never created per scope) whose elapsed time the recorder reads later; and
// while open, is the node that kernels launched on this thread are attributed to.
// A scope cannot be copied or moved: it must close on the thread and in the block where
// it opened, so the call-path tree stays a tree. Its stream must outlive it (the exit
// records an event on it); a stream destroyed after the scope closed is fine, since the
// events are read later and outlive the stream.
//
// This is the header every instrumented file includes, so it stays light: it brings the
// recorder (recorder.hpp: standard containers, the clock, the CUDA runtime API and NVTX)
// and nothing of the statistics, devices, CUPTI or report printers. Reports come from
// session.hpp (kscope::session::global().report()), included where one is made.
//
// Cost (bench/scope_bench.cpp; numbers in bench/RESULTS.md): tens of nanoseconds host-only,
// a load and a branch when disabled at run time (KSCOPE=0 or kscope::set_enabled(false)),
// nothing at all when compiled with KSCOPE_DISABLE, which also reduces this header to the
// empty types (no CUDA, NVTX or recorder headers).
#pragma once

#include "../core/config.hpp"
#include "../core/work.hpp"
#include "node_id.hpp"
#include "nvtx.hpp"

#include <string>
#include <string_view>

// The stream type scopes take. CUDA's cudaStream_t is `struct CUstream_st*`; naming it by
// a forward declaration lets a KSCOPE_DISABLE build skip the CUDA runtime header entirely
// (the enabled build checks below that the two types are the same).
#if KSCOPE_HAS_CUDA
struct CUstream_st;
namespace kscope {
using stream_t = CUstream_st*;
}  // namespace kscope
#else
namespace kscope {
using stream_t = void*;  // CPU-only builds accept (and ignore) a stream argument
}  // namespace kscope
#endif

#if !defined(KSCOPE_DISABLE)

#include "../core/detail/clock.hpp"
#include "detail/counter_hook.hpp"
#include "detail/step_hook.hpp"
#include "detail/nvtx.hpp"
#include "detail/thread_state.hpp"
#include "recorder.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#if KSCOPE_HAS_CUDA
#  include <cuda_runtime_api.h>
#endif

namespace kscope {

#if KSCOPE_HAS_CUDA
static_assert(std::is_same<stream_t, cudaStream_t>::value, "kscope::stream_t must be cudaStream_t");
#endif

namespace detail {

// Finds the node for (parent, name) without the recorder's lock when this thread has seen
// it before. After the thread's exit (a scope in a late destructor) the recorder's
// locked intern() answers instead.
inline node_id find_node(node_id parent, std::string_view name) {
  recorder& rec = recorder::global();
  node_cache* cache = rec.this_thread_names();
  if (KSCOPE_UNLIKELY(cache == nullptr)) return rec.intern(parent, name);
  const std::uint64_t hash = hash_name(name, parent);
  node_id node = cache->find(parent, name, hash);
  if (node != node_cache::invalid) return node;
  node = rec.intern(parent, name);
  cache->insert(parent, name, hash, node);
  return node;
}

// One per KSCOPE_SCOPE(...) in the source: caches the node for the parent it was last
// opened under, and the registered NVTX string. Constant-initialized (no guard). It keeps
// no pointer to the name: the macro hands the name to every opening, so a name that does
// not outlive its call is never read later.
struct call_site {
  std::atomic<std::uint64_t> cached{0};  // (parent + 1) << 32 | node; 0 = empty
  std::atomic<nvtx_string> nvtx{nullptr};

  constexpr call_site() noexcept = default;

  node_id node_for(node_id parent, const char* name) noexcept {
    const std::uint64_t c = cached.load(std::memory_order_relaxed);
    if (KSCOPE_LIKELY((c >> 32) == static_cast<std::uint64_t>(parent) + 1)) return static_cast<node_id>(c);
    node_id node = root_node;
    try {
      node = find_node(parent, name);
    } catch (...) {
      return parent;  // out of memory: count the time under the parent
    }
    cached.store(((static_cast<std::uint64_t>(parent) + 1) << 32) | node, std::memory_order_relaxed);
    return node;
  }

  nvtx_string nvtx_handle(const char* name) noexcept {
    nvtx_string h = nvtx.load(std::memory_order_acquire);
    if (KSCOPE_UNLIKELY(h == nullptr)) {
      h = nvtx_register(name);  // a benign race registers the same string twice
      nvtx.store(h, std::memory_order_release);
    }
    return h;
  }
};

// Which names a call site may cache a node for: a constant character array (a string
// literal, __func__), whose text is the same at every opening. Anything else (a pointer,
// a std::string, a writable buffer) may change between openings, so it is looked up by
// its text each time.
template <class Name>
struct is_fixed_name
    : std::integral_constant<bool, std::is_array<std::remove_reference_t<Name>>::value &&
                                       std::is_same<std::remove_extent_t<std::remove_reference_t<Name>>, const char>::value> {};

inline std::string_view name_text(const char* name) noexcept { return name ? std::string_view(name) : std::string_view("(null)"); }
inline std::string_view name_text(std::nullptr_t) noexcept { return "(null)"; }
inline std::string_view name_text(std::string_view name) noexcept { return name; }
inline std::string_view name_text(const std::string& name) noexcept { return name; }

}  // namespace detail

// A timed phase; see the file comment. Non-copyable, non-movable.
class scope {
 public:
  // Host-only scope named at run time (the name is copied into the tree once).
  explicit scope(std::string_view name) noexcept { open_named(name, nullptr); }
  explicit scope(const char* name) noexcept { open_named(detail::name_text(name), nullptr); }
  explicit scope(const std::string& name) noexcept { open_named(name, nullptr); }
  // With a stream: GPU time between events recorded on `stream` at entry and exit.
  scope(std::string_view name, stream_t stream) noexcept { open_named(name, &stream); }
  scope(const char* name, stream_t stream) noexcept { open_named(detail::name_text(name), &stream); }
  scope(const std::string& name, stream_t stream) noexcept { open_named(name, &stream); }
  // With an NVTX category and colour (scope/nvtx.hpp), with or without a stream.
  scope(std::string_view name, const nvtx_style& style) noexcept { open_named(name, nullptr, &style); }
  scope(const char* name, const nvtx_style& style) noexcept { open_named(detail::name_text(name), nullptr, &style); }
  scope(const std::string& name, const nvtx_style& style) noexcept { open_named(name, nullptr, &style); }
  scope(std::string_view name, stream_t stream, const nvtx_style& style) noexcept { open_named(name, &stream, &style); }
  scope(const char* name, stream_t stream, const nvtx_style& style) noexcept {
    open_named(detail::name_text(name), &stream, &style);
  }
  scope(const std::string& name, stream_t stream, const nvtx_style& style) noexcept { open_named(name, &stream, &style); }
  // Used by the macros: for a constant name the call site caches the node and the NVTX
  // string; any other name is looked up by its text (see detail::is_fixed_name).
  template <class Name>
  scope(detail::call_site& site, Name&& name) noexcept {
    open_at(site, std::forward<Name>(name), nullptr, nullptr);
  }
  template <class Name>
  scope(detail::call_site& site, Name&& name, stream_t stream) noexcept {
    open_at(site, std::forward<Name>(name), &stream, nullptr);
  }
  template <class Name>
  scope(detail::call_site& site, Name&& name, const nvtx_style& style) noexcept {
    open_at(site, std::forward<Name>(name), nullptr, &style);
  }
  template <class Name>
  scope(detail::call_site& site, Name&& name, stream_t stream, const nvtx_style& style) noexcept {
    open_at(site, std::forward<Name>(name), &stream, &style);
  }

  scope(const scope&) = delete;
  scope& operator=(const scope&) = delete;
  scope(scope&&) = delete;
  scope& operator=(scope&&) = delete;

  // Opening at a call site and closing are forced inline, the rare paths (counters,
  // an event pool miss, a full ring) kept out of line: the object then lives in registers
  // and a disabled scope (kscope off at run time) costs a load and a branch. Left to
  // itself the compiler called the close once the counter hook made it longer; the
  // object's address escaped, every member was stored first, and a disabled scope cost
  // 2-3 ns instead of under 1, a host-only one ~5 ns more (bench/RESULTS.md).
  KSCOPE_FORCE_INLINE ~scope() noexcept {
    if (active_) close();
  }

  // Declares the work this call does (summed per node; the report places it on the
  // roofline). May be called any time before the scope closes; the last call wins.
  void set_work(work w) noexcept {
    flops_ = w.flops;
    bytes_ = w.bytes;
  }

  // Attaches key=value (shape, dtype, batch size...); the report lists distinct values
  // with counts, and an NVTX tool gets this call's tags when the scope closes. Takes the
  // recorder's lock: use on phases, not in tight loops.
  void tag(std::string_view key, std::string_view value) noexcept {
    if (!active_) return;
    if (KSCOPE_UNLIKELY(nvtx_ == nvtx_seen)) detail::nvtx_note_tag(nvtx_notes_, key, value);
    try {
      recorder::global().add_tag(node_, key, value);
    } catch (...) {
    }
  }

  [[nodiscard]] node_id node() const noexcept { return node_; }
  [[nodiscard]] bool active() const noexcept { return active_; }
  // Whether the per-scope counters (session::enable_counters) profile this call, or it is
  // open inside a call they profile: its time is kept out of the statistics, and the close
  // of a profiled call ends the counter pass (a device synchronization and decoding; a
  // caller that holds a lock across the close, such as Python's GIL, lets it go first:
  // kscope_scope_try_close in src/kscope_c.cpp).
  [[nodiscard]] bool profiled() const noexcept { return hook_ != nullptr; }

 private:
  KSCOPE_FORCE_INLINE void close() noexcept {
    const std::int64_t end_ticks = detail::ticks();
    if (KSCOPE_UNLIKELY(hook_ != nullptr)) close_profiled(hook_, node_, parent_);
#if KSCOPE_HAS_CUDA
    if (slot_ < detail::profiled_call_slot) {  // an event pair (not none, not a profiled call)
      if (cudaEventRecord(end_event_, stream_) != cudaSuccess) {
        clear_our_error();
        recorder::global().release_events(slot_);
        slot_ = detail::no_events;
      }
    }
#endif
    if (nvtx_ != nvtx_none) {
      // With a tool attached, the work and tags go to it first (detail/nvtx.hpp: a mark at
      // the range's end); out of line, with the values as arguments, so that `this` stays
      // in registers.
      if (KSCOPE_LIKELY(nvtx_ == nvtx_pushed)) detail::nvtx_pop();
      else detail::nvtx_pop_seen(nvtx_name_, nvtx_category_, nvtx_argb_, flops_, bytes_, nvtx_notes_);
    }
    detail::thread_state& ts = detail::this_thread_state();
    ts.current = parent_;
    const detail::scope_record record{node_, slot_, start_ticks_, end_ticks, flops_, bytes_};
    // A step may have ended (step_hook.hpp): after the record, so a pause there never
    // delays it. Outermost scopes only: one compare on every other close.
    if (KSCOPE_UNLIKELY(parent_ == detail::root_node)) {
      push_record(ts, record);
      if (const detail::outermost_close_hook_fn hook = detail::outermost_close_hook.load(std::memory_order_acquire))
        hook(node_);
      return;
    }
    push_record(ts, record);
  }

  static KSCOPE_FORCE_INLINE void push_record(detail::thread_state& ts, const detail::scope_record& record) noexcept {
    // Fast path: the thread's ring, reached through the thread state, with no lock.
    auto* log = static_cast<detail::thread_log*>(ts.scope_log);
    if (KSCOPE_LIKELY(log != nullptr) && KSCOPE_LIKELY(log->try_push(record))) return;
    if (log) recorder::global().log_full(log, record);
    else recorder::global().log(record);
  }

  void open_named(std::string_view name, stream_t* stream, const nvtx_style* style = nullptr) noexcept {
    if (!detail::enabled()) return;
    detail::thread_state& ts = detail::this_thread_state();
    parent_ = ts.current;
    try {
      node_ = detail::find_node(parent_, name);
    } catch (...) {
      return;  // out of memory: this scope is not recorded
    }
    if (detail::nvtx_enabled.load(std::memory_order_relaxed)) {
      // A run-time name may not outlive this call: with a tool attached it is copied into
      // the notes, which the close needs anyway; with none nothing is pushed or copied.
      nvtx_ = detail::nvtx_push_copy(name, style, nvtx_notes_);
      if (nvtx_notes_) nvtx_name_ = nvtx_notes_->name.c_str();
      if (style) keep_look(*style);
    }
    finish_open(ts, stream);
  }

  template <class Name>
  void open_at(detail::call_site& site, Name&& name, stream_t* stream, const nvtx_style* style) noexcept {
    if constexpr (detail::is_fixed_name<Name>::value) {
      open_site(site, name, stream, style);
    } else {
      (void)site;
      open_named(detail::name_text(name), stream, style);
    }
  }

  // `style` is a constant null for the plain macros: the unstyled push is all that remains.
  KSCOPE_FORCE_INLINE void open_site(detail::call_site& site, const char* name, stream_t* stream,
                                     const nvtx_style* style) noexcept {
    if (!detail::enabled()) return;
    detail::thread_state& ts = detail::this_thread_state();
    parent_ = ts.current;
    node_ = site.node_for(parent_, name);
    if (detail::nvtx_enabled.load(std::memory_order_relaxed)) {
      const bool seen = style ? detail::nvtx_push(site.nvtx_handle(name), name, *style)
                              : detail::nvtx_push(site.nvtx_handle(name), name);
      nvtx_ = seen ? nvtx_seen : nvtx_pushed;
      nvtx_name_ = name;  // a constant array: it outlives the scope
      if (style) keep_look(*style);
    }
    finish_open(ts, stream);
  }

  // The category and colour the close's mark repeats (the category's name was given at the push).
  void keep_look(const nvtx_style& style) noexcept {
    nvtx_category_ = style.category.id <= max_nvtx_category_id ? style.category.id : 0;
    nvtx_argb_ = style.color.value;
  }

  KSCOPE_FORCE_INLINE void finish_open(detail::thread_state& ts, stream_t* stream) noexcept {
    if (KSCOPE_UNLIKELY(detail::active_counter_hook.load(std::memory_order_relaxed) != nullptr ||
                        detail::profiled_depth > 0)) {
      hook_ = open_profiled(node_);
      if (hook_) slot_ = detail::profiled_call_slot;
    }
#if KSCOPE_HAS_CUDA
    if (stream && hook_ == nullptr) open_events(*stream);
#else
    (void)stream;
#endif
    ts.current = node_;
    active_ = true;
    start_ticks_ = detail::ticks();
  }

#if KSCOPE_HAS_CUDA
  // The stream's device, remembered per thread for the last stream seen: asking the
  // runtime costs more than the rest of the scope. (A stream destroyed and re-created at
  // the same address on another device makes the event record fail: that sample is
  // lost, the program is unharmed.)
  static int device_of(cudaStream_t stream) noexcept {
    struct last_stream {
      cudaStream_t stream;
      int device;
      bool valid;
    };
    thread_local last_stream last{nullptr, 0, false};
    if (KSCOPE_LIKELY(last.valid && last.stream == stream)) return last.device;
    int device = -1;
    if (cudaStreamGetDevice(stream, &device) != cudaSuccess) {
      clear_our_error();
      return -1;
    }
    last = last_stream{stream, device, true};
    return device;
  }

  void open_events(cudaStream_t stream) noexcept {
    const int device = device_of(stream);
    if (device < 0) return;
    detail::event_pair pair;
    if (!recorder::global().acquire_events(device, slot_, pair)) {
      slot_ = detail::no_events;
      return;
    }
    if (cudaEventRecord(pair.start, stream) != cudaSuccess) {
      clear_our_error();
      recorder::global().release_events(slot_);
      slot_ = detail::no_events;
      return;
    }
    stream_ = stream;
    end_event_ = pair.end;
  }
  // kscope's own failed call must not surface later in the host program's error checks.
  static void clear_our_error() noexcept { cudaGetLastError(); }

  cudaStream_t stream_ = nullptr;
  cudaEvent_t end_event_ = nullptr;
#endif
  // Per-scope counters (counter_hook.hpp): the hook of a call that is profiled, or
  // detail::inside_profiled_call for a scope inside one; null otherwise. Either way a
  // profiled record carries profiled_call_slot and no CUDA events. Static and out of line
  // (the object's address never escapes), so with counters off the scope stays in registers.
  static KSCOPE_NOINLINE const detail::counter_hook* open_profiled(node_id node) noexcept {
    const detail::counter_hook* hook = nullptr;
    if (detail::profiled_depth > 0) {
      hook = &detail::inside_profiled_call;
      detail::note_profiled_step_open(node);  // a scope nested in a profiled step: its calls counted
      if (const detail::step_range_switch_fn next = detail::step_range_switch.load(std::memory_order_relaxed)) next(node);
    } else if (const detail::counter_hook* active = detail::active_counter_hook.load(std::memory_order_acquire)) {
      if (active->open(node)) hook = active;
    }
    if (hook) ++detail::profiled_depth;
    return hook;
  }
  static KSCOPE_NOINLINE void close_profiled(const detail::counter_hook* hook, node_id node, node_id parent) noexcept {
    --detail::profiled_depth;
    hook->close(node);
    // A scope nested in a profiled step closes: the step's range follows to its parent.
    if (hook == &detail::inside_profiled_call)
      if (const detail::step_range_switch_fn next = detail::step_range_switch.load(std::memory_order_relaxed))
        next(parent);
  }

  node_id node_ = detail::root_node;
  node_id parent_ = detail::root_node;
  std::uint32_t slot_ = detail::no_events;
  const detail::counter_hook* hook_ = nullptr;
  bool active_ = false;
  // The NVTX range: none, pushed (no tool attached: the pop is all the close does), or seen
  // by a tool (the close sends it the work and tags first).
  static constexpr std::uint8_t nvtx_none = 0, nvtx_pushed = 1, nvtx_seen = 2;
  std::uint8_t nvtx_ = nvtx_none;
  std::uint32_t nvtx_category_ = 0;
  std::uint32_t nvtx_argb_ = 0;
  std::int64_t start_ticks_ = 0;
  double flops_ = std::numeric_limits<double>::quiet_NaN();
  double bytes_ = std::numeric_limits<double>::quiet_NaN();
  const char* nvtx_name_ = nullptr;            // the name the close's mark carries
  detail::nvtx_notes* nvtx_notes_ = nullptr;   // with a tool only: a run-time name, this call's tags
};

// A range that may start on one thread and end on another: a request's life in a
// serving engine (enqueued by one thread, finished by another). Its node is a child of
// the scope open where it started; it is not on any thread's stack, so kernels are not
// attributed to it and its time is not subtracted from its parent's exclusive time.
//
//   kscope::range r = kscope::start_range("request");   // on the accepting thread
//   queue.push({std::move(r), payload});
//   ...                                                 // on a worker thread:
//   kscope::end_range(std::move(item.r));
//
// A range still open when its handle is destroyed ends there.
class range {
 public:
  range() noexcept = default;
  range(const range&) = delete;
  range& operator=(const range&) = delete;
  range(range&& other) noexcept { take(other); }
  range& operator=(range&& other) noexcept {
    if (this != &other) {
      end();
      take(other);
    }
    return *this;
  }
  ~range() noexcept { end(); }

  // Ends the range now (idempotent).
  void end() noexcept {
    if (!active_) return;
    active_ = false;
    const std::int64_t end_ticks = detail::ticks();
    // Only a range a tool saw was started (detail::nvtx_start): it ends with the mark of
    // its work, on the ending thread, then the end.
    if (nvtx_notes_) {
      detail::nvtx_end_seen(nvtx_id_, nvtx_category_, nvtx_argb_, flops_, bytes_, nvtx_notes_);
      nvtx_notes_ = nullptr;
    }
    recorder::global().log(detail::scope_record{node_, detail::no_events, start_ticks_, end_ticks, flops_, bytes_});
  }
  void set_work(work w) noexcept {
    flops_ = w.flops;
    bytes_ = w.bytes;
  }
  [[nodiscard]] bool active() const noexcept { return active_; }
  [[nodiscard]] node_id node() const noexcept { return node_; }

 private:
  friend range start_range(std::string_view name, const nvtx_style& style) noexcept;
  void take(range& other) noexcept {
    node_ = other.node_;
    nvtx_id_ = other.nvtx_id_;
    nvtx_notes_ = other.nvtx_notes_;
    nvtx_category_ = other.nvtx_category_;
    nvtx_argb_ = other.nvtx_argb_;
    start_ticks_ = other.start_ticks_;
    flops_ = other.flops_;
    bytes_ = other.bytes_;
    active_ = other.active_;
    other.active_ = false;
    other.nvtx_notes_ = nullptr;
  }
  node_id node_ = detail::root_node;
  detail::nvtx_range_id nvtx_id_{};
  detail::nvtx_notes* nvtx_notes_ = nullptr;  // with a tool attached: the name, for the end's mark
  std::uint32_t nvtx_category_ = 0;
  std::uint32_t nvtx_argb_ = 0;
  std::int64_t start_ticks_ = 0;
  double flops_ = std::numeric_limits<double>::quiet_NaN();
  double bytes_ = std::numeric_limits<double>::quiet_NaN();
  bool active_ = false;
};

// Starts a cross-thread range under the scope open on the calling thread; `style` gives
// its NVTX category and colour (scope/nvtx.hpp).
[[nodiscard]] inline range start_range(std::string_view name, const nvtx_style& style = {}) noexcept {
  range r;
  if (!detail::enabled()) return r;
  try {
    r.node_ = recorder::global().intern(detail::current_node(), name, /*cross_thread=*/true);
  } catch (...) {
    return r;
  }
  if (detail::nvtx_enabled.load(std::memory_order_relaxed)) {
    r.nvtx_id_ = detail::nvtx_start(name, style, r.nvtx_notes_);
    r.nvtx_category_ = style.category.id <= max_nvtx_category_id ? style.category.id : 0;
    r.nvtx_argb_ = style.color.value;
  }
  r.start_ticks_ = detail::ticks();
  r.active_ = true;
  return r;
}

// Ends a range started with start_range (on any thread).
inline void end_range(range&& r) noexcept { r.end(); }

// The name may be anything a scope takes (a literal, a std::string, a pointer, even null);
// a literal is the fast case (see detail::is_fixed_name).
#define KSCOPE_SCOPE(name)                                                                   \
  static ::kscope::detail::call_site KSCOPE_DETAIL_CONCAT(kscope_site_, __LINE__);           \
  ::kscope::scope KSCOPE_DETAIL_CONCAT(kscope_scope_, __LINE__) {                            \
    KSCOPE_DETAIL_CONCAT(kscope_site_, __LINE__), name                                       \
  }
#define KSCOPE_SCOPE_STREAM(name, stream)                                                    \
  static ::kscope::detail::call_site KSCOPE_DETAIL_CONCAT(kscope_site_, __LINE__);           \
  ::kscope::scope KSCOPE_DETAIL_CONCAT(kscope_scope_, __LINE__) {                            \
    KSCOPE_DETAIL_CONCAT(kscope_site_, __LINE__), name, (stream)                             \
  }
#define KSCOPE_FUNCTION() KSCOPE_SCOPE(__func__)
// With an NVTX category and/or colour: the arguments after the name (and stream) build a
// kscope::nvtx_style, e.g. KSCOPE_SCOPE_STYLED("prefill", attention, kscope::nvtx_color::rgb(0x76B900)).
#define KSCOPE_SCOPE_STYLED(name, ...)                                                       \
  static ::kscope::detail::call_site KSCOPE_DETAIL_CONCAT(kscope_site_, __LINE__);           \
  ::kscope::scope KSCOPE_DETAIL_CONCAT(kscope_scope_, __LINE__) {                            \
    KSCOPE_DETAIL_CONCAT(kscope_site_, __LINE__), name, ::kscope::nvtx_style { __VA_ARGS__ } \
  }
#define KSCOPE_SCOPE_STREAM_STYLED(name, stream, ...)                                                    \
  static ::kscope::detail::call_site KSCOPE_DETAIL_CONCAT(kscope_site_, __LINE__);                       \
  ::kscope::scope KSCOPE_DETAIL_CONCAT(kscope_scope_, __LINE__) {                                        \
    KSCOPE_DETAIL_CONCAT(kscope_site_, __LINE__), name, (stream), ::kscope::nvtx_style { __VA_ARGS__ } \
  }

// Run-time switch for every scope in the process (also KSCOPE=0 in the environment).
inline void set_enabled(bool on) noexcept { recorder::global().set_enabled(on); }
[[nodiscard]] inline bool is_enabled() noexcept { return detail::enabled(); }

}  // namespace kscope

#else  // KSCOPE_DISABLE: every scope is an empty object the optimizer removes.

namespace kscope {

class scope {
 public:
  explicit scope(std::string_view) noexcept {}
  explicit scope(const char*) noexcept {}
  explicit scope(const std::string&) noexcept {}
  scope(std::string_view, stream_t) noexcept {}
  scope(const char*, stream_t) noexcept {}
  scope(const std::string&, stream_t) noexcept {}
  scope(std::string_view, const nvtx_style&) noexcept {}
  scope(const char*, const nvtx_style&) noexcept {}
  scope(const std::string&, const nvtx_style&) noexcept {}
  scope(std::string_view, stream_t, const nvtx_style&) noexcept {}
  scope(const char*, stream_t, const nvtx_style&) noexcept {}
  scope(const std::string&, stream_t, const nvtx_style&) noexcept {}
  scope(const scope&) = delete;
  scope& operator=(const scope&) = delete;
  void set_work(work) noexcept {}
  void tag(std::string_view, std::string_view) noexcept {}
  [[nodiscard]] node_id node() const noexcept { return detail::root_node; }
  [[nodiscard]] bool active() const noexcept { return false; }
};

class range {
 public:
  void end() noexcept {}
  void set_work(work) noexcept {}
  [[nodiscard]] bool active() const noexcept { return false; }
  [[nodiscard]] node_id node() const noexcept { return detail::root_node; }
};
[[nodiscard]] inline range start_range(std::string_view, const nvtx_style& = {}) noexcept { return {}; }
inline void end_range(range&&) noexcept {}

#define KSCOPE_SCOPE(name) static_cast<void>(0)
#define KSCOPE_SCOPE_STREAM(name, stream) static_cast<void>(0)
#define KSCOPE_FUNCTION() static_cast<void>(0)
#define KSCOPE_SCOPE_STYLED(name, ...) static_cast<void>(0)
#define KSCOPE_SCOPE_STREAM_STYLED(name, stream, ...) static_cast<void>(0)

// Scopes in a translation unit compiled with KSCOPE_DISABLE never record, whatever the
// run-time switch says: here it reads as off, and setting it does nothing. (The switch
// itself lives in the recorder, which this build does not include; session.hpp's
// session::set_enabled still reaches it for the rest of the program.)
inline void set_enabled(bool) noexcept {}
[[nodiscard]] inline bool is_enabled() noexcept { return false; }

}  // namespace kscope

#endif  // KSCOPE_DISABLE
