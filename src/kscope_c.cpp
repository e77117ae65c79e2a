// src/kscope_c.cpp — kscope's C interface (include/kscope/c/kscope_c.h) over the compiled
// mode: the one translation unit of libkscope_c.so besides kscope_compiled.cpp's object.
//
// Every entry point catches everything: no C++ exception reaches a C caller (a Python
// interpreter, through ctypes), and nothing here ends the process. A failure is a status
// and one line in the calling thread's last-error string.
//
// Scopes. A kscope::scope is an RAII object that cannot be moved; a C caller opens and
// closes it in two calls. Each thread keeps the scopes it opened, in opening order, in
// stable storage (a deque never moves its elements at the ends), and a handle names a
// thread and an opening: closing is then a check of the top of the stack. Closing out of
// order (Python generators or coroutines interleaving `with` blocks on one thread) closes
// the scopes above first, so the thread's current scope always stays the one on top and
// the call-path tree stays a tree.
//
// The GIL. Python calls the scope's open and close through ctypes.PyDLL, keeping the GIL
// (cheaper than letting it go and taking it back), so those calls must not block: the try
// functions refuse, with a "would block" answer and nothing done, whenever per-scope
// counters might profile the call (the counter hook is on; a profiled open or close runs
// CUPTI, a device synchronization and decoding), and Python makes the plain call through
// ctypes.CDLL, which lets the GIL go. The hook is read here, not a flag of the C
// interface's, because counters start from C++ and from KSCOPE_COUNTERS too.
//
// kscope's internals. This file is part of kscope's implementation, compiled with the
// library like src/kscope_compiled.cpp, not a consumer of it: it uses what kscope's own
// files use where no public name does the job (a call site, so a registered name opens like
// a C++ literal; a mutex the fork guard takes; the JSON reader for option objects; the one
// clock; the counter hook; the metric sampler's status). The `kscope` tool and the examples
// use public names only (tests/headers/check_layers.cmake).
#include "kscope/c/kscope_c.h"

#include <kscope/kscope.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

// ---- errors --------------------------------------------------------------------------

thread_local std::string last_error_text;

kscope_status fail(kscope_status status, std::string message) noexcept {
  try {
    last_error_text = std::move(message);
  } catch (...) {
    // Out of memory while copying the message: the status still says what kind it was.
  }
  return status;
}

// Runs `body` (which returns a kscope_status) with every exception turned into a status.
template <class Body>
kscope_status guarded(const char* where, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(KSCOPE_ERROR_LIMIT, std::string(where) + ": out of memory");
  } catch (const std::exception& e) {
    return fail(KSCOPE_ERROR_INTERNAL, std::string(where) + ": " + e.what());
  } catch (...) {
    return fail(KSCOPE_ERROR_INTERNAL, std::string(where) + ": unknown exception");
  }
}

// A buffer the caller frees with kscope_free (malloc'd: C callers may free it themselves).
kscope_status give_text(const std::string& text, char** out, std::size_t* size) {
  if (out == nullptr) return KSCOPE_OK;
  char* buffer = static_cast<char*>(std::malloc(text.size() + 1));
  if (buffer == nullptr) return fail(KSCOPE_ERROR_LIMIT, "out of memory for " + std::to_string(text.size()) + " bytes");
  std::memcpy(buffer, text.data(), text.size());
  buffer[text.size()] = '\0';
  *out = buffer;
  if (size != nullptr) *size = text.size();
  return KSCOPE_OK;
}

// Two texts to the caller's pointers that are not null: both or neither. The second failing
// frees the first, so nothing leaks and no output parameter changes.
kscope_status give_texts(const std::string& first, char** first_out, std::size_t* first_size,
                         const std::string& second, char** second_out, std::size_t* second_size) {
  char* first_buffer = nullptr;
  std::size_t first_length = 0;
  if (first_out != nullptr) {
    const kscope_status status = give_text(first, &first_buffer, &first_length);
    if (status != KSCOPE_OK) return status;
  }
  const kscope_status status = give_text(second, second_out, second_size);
  if (status != KSCOPE_OK) {
    std::free(first_buffer);
    return status;
  }
  if (first_out != nullptr) {
    *first_out = first_buffer;
    if (first_size != nullptr) *first_size = first_length;
  }
  return KSCOPE_OK;
}

std::string_view view_of(const char* data, std::size_t size) noexcept {
  return data == nullptr ? std::string_view() : std::string_view(data, size);
}

// ---- sites: a name registered once, found by id on every opening ------------------------

constexpr std::uint32_t max_sites = 65536;

// Names up to this length open like a string literal in C++ (KSCOPE_SCOPE("decode")):
// through a call site that caches the node per parent and the registered NVTX string. A
// kscope::scope takes that path for a constant character array, which `literal` is when
// read through a pointer to const: the name is kept in it with its terminating NUL, so
// reading it is reading an array of known size. Longer names (and names holding a NUL
// byte) are looked up by their text at each opening: correct, a little slower.
constexpr std::size_t max_literal_name = 255;

struct site_entry {
  std::string name;
  kscope::detail::call_site call;
  char literal[max_literal_name + 1] = {};
  bool is_literal = false;
};

// Constant-initialized (no guard a fork could catch half-built); the entries are leaked on
// purpose, like kscope's recorder: a scope may close in a static destructor.
struct site_registry {
  kscope::detail::fork_guarded_mutex mutex{kscope::detail::lock_rank::init};  // a leaf
  std::unordered_map<std::string, std::uint32_t>* ids = nullptr;                 // under mutex
  std::atomic<site_entry*> entries[max_sites + 1] = {};                          // [0] unused
  std::atomic<std::uint32_t> count{0};
};
site_registry sites;

site_entry* site_of(std::uint32_t site) noexcept {
  if (site == 0 || site > max_sites) return nullptr;
  return sites.entries[site].load(std::memory_order_acquire);
}

const std::string* site_name(std::uint32_t site) noexcept {
  const site_entry* e = site_of(site);
  return e ? &e->name : nullptr;
}

// ---- the scopes open on this thread ------------------------------------------------------

// Nesting deeper than this on one thread is taken for scopes that are never closed (a
// generator abandoned inside a `with` block): the memory stays bounded and it says so.
constexpr std::size_t max_open_scopes_per_thread = 4096;

std::atomic<std::uint32_t> next_thread_tag{1};

// handle = thread tag (11 bits) << 20 | opening number on that thread (20 bits): positive
// and under 2^31, an int for callers without prototypes (kscope_scope_handle). The number
// wraps after 2^20 - 1 openings and the tag after 2047 threads, so the checks below catch
// a stale or foreign handle with high probability, not certainty: they are there to name
// a mistake, and a correct caller never depends on them.
constexpr int handle_thread_shift = 20;
constexpr std::uint32_t handle_sequence_mask = (std::uint32_t{1} << handle_thread_shift) - 1;
constexpr std::uint32_t handle_thread_mask = 0x7ff;

struct open_scope {
  alignas(kscope::scope) unsigned char storage[sizeof(kscope::scope)];
  kscope_scope_handle handle = 0;
  std::uint32_t site = 0;  // 0: opened by name
  bool profiled = false;   // its close may end a counter pass: never through kscope_scope_try_close
  kscope::scope& get() noexcept { return *std::launder(reinterpret_cast<kscope::scope*>(storage)); }
};

struct thread_scopes {
  std::deque<open_scope> stack;
  std::uint32_t thread_tag = 0;
  std::uint32_t next_sequence = 1;

  // Tag 0 is skipped so that no handle is 0.
  thread_scopes() : thread_tag(next_thread_tag.fetch_add(1, std::memory_order_relaxed) & handle_thread_mask) {
    if (thread_tag == 0) thread_tag = 1;
  }
  thread_scopes(const thread_scopes&) = delete;
  thread_scopes& operator=(const thread_scopes&) = delete;
  // A thread that ends with scopes open (a Python thread whose generator never finished)
  // ends them, innermost first, as leaving their blocks would have.
  ~thread_scopes() {
    while (!stack.empty()) pop();
  }

  void pop() noexcept {
    stack.back().get().~scope();
    stack.pop_back();
  }

  kscope_scope_handle next_handle() noexcept {
    const std::uint32_t h = (thread_tag << handle_thread_shift) | next_sequence;
    next_sequence = next_sequence == handle_sequence_mask ? 1 : next_sequence + 1;
    return static_cast<kscope_scope_handle>(h);
  }
};

thread_scopes& this_thread_scopes() {
  thread_local thread_scopes scopes;
  return scopes;
}

std::string quoted_name_of(const open_scope& s) {
  const std::string* name = site_name(s.site);
  return name ? "'" + kscope::printable_text(*name) + "'" : std::string("(a scope opened by name)");
}

// Opens a scope in a new slot: at the site's call site when it has a literal name, else by
// `name`, whose text must outlive the call only (the scope copies what it keeps).
kscope_scope_handle open_in_slot(std::uint32_t site, site_entry* entry, std::string_view name,
                                 const uintptr_t* stream) noexcept {
  if (!kscope::is_enabled()) return 0;
  try {
    thread_scopes& scopes = this_thread_scopes();
    if (scopes.stack.size() >= max_open_scopes_per_thread) {
      fail(KSCOPE_ERROR_LIMIT, "more than " + std::to_string(max_open_scopes_per_thread) +
                                   " scopes open on this thread: scopes are opened and never closed (a with-block "
                                   "left open by an abandoned generator?); this one is not recorded");
      return -1;
    }
    open_scope& slot = scopes.stack.emplace_back();
    if (entry != nullptr && entry->is_literal) {
      const site_entry& fixed = *entry;  // fixed.literal: const char[256], a constant name
      if (stream != nullptr)
        new (slot.storage) kscope::scope(entry->call, fixed.literal, reinterpret_cast<kscope::stream_t>(*stream));
      else
        new (slot.storage) kscope::scope(entry->call, fixed.literal);
    } else if (stream != nullptr) {
      new (slot.storage) kscope::scope(name, reinterpret_cast<kscope::stream_t>(*stream));
    } else {
      new (slot.storage) kscope::scope(name);
    }
    slot.site = site;
    slot.profiled = slot.get().profiled();
    slot.handle = scopes.next_handle();
    return slot.handle;
  } catch (const std::bad_alloc&) {
    fail(KSCOPE_ERROR_LIMIT, "out of memory opening a scope: not recorded");
  } catch (...) {
    fail(KSCOPE_ERROR_INTERNAL, "opening a scope failed: not recorded");
  }
  return -1;
}

// The handles that name no scope: disabled, an error, would block.
constexpr bool opened_nothing(kscope_scope_handle handle) noexcept {
  return handle == 0 || handle == -1 || handle == KSCOPE_SCOPE_WOULD_BLOCK;
}

// Whether a scope's open may block now: per-scope counters are on, so this call may be one
// they profile. One relaxed load, the one the scope's own open makes (scope.hpp:
// finish_open).
bool counters_on() noexcept {
  return kscope::detail::active_counter_hook.load(std::memory_order_relaxed) != nullptr;
}

kscope_scope_handle open_site(std::uint32_t site, const uintptr_t* stream) noexcept {
  site_entry* entry = site_of(site);
  if (entry == nullptr) {
    fail(KSCOPE_ERROR_NOT_FOUND, "site " + std::to_string(site) + " was never registered (kscope_site_register)");
    return -1;
  }
  return open_in_slot(site, entry, entry->name, stream);
}

// The open scope of `handle` on this thread, or null (with the reason set).
open_scope* find_open(kscope_scope_handle handle, kscope_status* status) {
  thread_scopes& scopes = this_thread_scopes();
  if (handle <= 0) {
    *status = fail(KSCOPE_ERROR_NOT_FOUND, "no scope: handle " + std::to_string(handle) + " opened nothing");
    return nullptr;
  }
  if ((static_cast<std::uint32_t>(handle) >> handle_thread_shift) != scopes.thread_tag) {
    *status = fail(KSCOPE_ERROR_NOT_FOUND,
                   "scope handle used on another thread than the one that opened it: a scope opens and closes on one "
                   "thread (kscope.start_range is for work that ends elsewhere)");
    return nullptr;
  }
  for (auto it = scopes.stack.rbegin(); it != scopes.stack.rend(); ++it)
    if (it->handle == handle) return &*it;
  *status = fail(KSCOPE_ERROR_NOT_FOUND,
                 "scope handle not open: closed twice, or already closed because a scope opened before it was "
                 "closed first");
  return nullptr;
}

// ---- options from JSON ------------------------------------------------------------------

using kscope::detail::json_value;

// Reads a JSON object, refusing anything but one.
bool parse_object(const char* text, const char* what, json_value& out, kscope_status* status) {
  kscope::detail::json_parse_result parsed = kscope::detail::parse_json(text, kscope::detail::json_limits{});
  if (!parsed.ok()) {
    *status = fail(KSCOPE_ERROR_INVALID_ARGUMENT, std::string(what) + ": not JSON: " + parsed.error);
    return false;
  }
  if (!parsed.value.is_object()) {
    *status = fail(KSCOPE_ERROR_INVALID_ARGUMENT, std::string(what) + ": expected a JSON object");
    return false;
  }
  out = std::move(parsed.value);
  return true;
}

std::string unknown_key(const char* what, const std::string& key, const char* known) {
  return std::string(what) + ": unknown option '" + kscope::printable_text(key) + "' (known: " + known + ")";
}

bool read_number(const json_value& v, const std::string& key, const char* what, double& out, kscope_status* status) {
  if (!v.is_number()) {
    *status = fail(KSCOPE_ERROR_INVALID_ARGUMENT, std::string(what) + ": '" + key + "' must be a number");
    return false;
  }
  out = v.number;
  return true;
}

bool read_count(const json_value& v, const std::string& key, const char* what, std::size_t& out,
                kscope_status* status) {
  double x = 0;
  if (!read_number(v, key, what, x, status)) return false;
  if (!(x >= 0) || x > 1e15 || std::floor(x) != x) {
    *status = fail(KSCOPE_ERROR_INVALID_ARGUMENT,
                   std::string(what) + ": '" + key + "' must be a whole number >= 0");
    return false;
  }
  out = static_cast<std::size_t>(x);
  return true;
}

bool read_bool(const json_value& v, const std::string& key, const char* what, bool& out, kscope_status* status) {
  if (!v.is_bool()) {
    *status = fail(KSCOPE_ERROR_INVALID_ARGUMENT, std::string(what) + ": '" + key + "' must be true or false");
    return false;
  }
  out = v.boolean;
  return true;
}

bool read_names(const json_value& v, const std::string& key, const char* what, std::vector<std::string>& out,
                kscope_status* status) {
  if (!v.is_array()) {
    *status = fail(KSCOPE_ERROR_INVALID_ARGUMENT, std::string(what) + ": '" + key + "' must be an array of strings");
    return false;
  }
  std::vector<std::string> names;
  for (const json_value& item : v.items) {
    if (!item.is_string()) {
      *status = fail(KSCOPE_ERROR_INVALID_ARGUMENT, std::string(what) + ": '" + key + "' must hold strings only");
      return false;
    }
    names.push_back(item.string);
  }
  out = std::move(names);
  return true;
}

bool read_diagnose_options(const char* text, kscope::diagnose_options& o, kscope_status* status) {
  if (text == nullptr) return true;
  const char* what = "diagnose options";
  json_value doc;
  if (!parse_object(text, what, doc, status)) return false;
  // The members by name from their one declaration (verdict/diagnose.hpp).
  using field = kscope::diagnose_option_field;
  const std::vector<field>& fields = kscope::diagnose_option_fields();
  kscope::diagnose_options defaults;
  for (const auto& [key, v] : doc.members) {
    const auto f = std::find_if(fields.begin(), fields.end(), [&key](const field& x) { return key == x.name; });
    if (f == fields.end()) {
      std::string known;
      for (const field& x : fields) known += (known.empty() ? "" : ", ") + std::string(x.name);
      *status = fail(KSCOPE_ERROR_INVALID_ARGUMENT, unknown_key(what, key, known.c_str()));
      return false;
    }
    bool ok = true;
    switch (f->type) {
      case field::kind::names: ok = read_names(v, key, what, *f->names(o), status); break;
      case field::kind::number:
        // null: unknown, for a member whose default is unknown (NaN) too.
        if (v.is_null() && std::isnan(*f->number(defaults))) *f->number(o) = std::nan("");
        else ok = read_number(v, key, what, *f->number(o), status);
        break;
      case field::kind::count: {
        std::size_t n = 0;
        ok = read_count(v, key, what, n, status);
        if (ok) *f->count(o) = n;
        break;
      }
    }
    if (!ok) return false;
  }
  return true;
}

bool read_bench_options(const json_value& doc, kscope::bench_options& o, kscope_status* status) {
  const char* what = "bench options";
  // "burst" first: it is the base the other members change.
  if (const json_value* burst = doc.find("burst")) {
    bool on = false;
    if (!read_bool(*burst, "burst", what, on, status)) return false;
    if (on) o = kscope::bench_options::burst();
  }
  for (const auto& [key, v] : doc.members) {
    bool ok = true;
    if (key == "burst") continue;
    if (key == "cache") {
      if (v.is_string() && v.string == "hot") o.cache = kscope::cache_mode::hot;
      else if (v.is_string() && v.string == "cold") o.cache = kscope::cache_mode::cold;
      else {
        *status = fail(KSCOPE_ERROR_INVALID_ARGUMENT, "bench options: 'cache' must be \"hot\" or \"cold\"");
        return false;
      }
    } else if (key == "target_rel_ci") ok = read_number(v, key, what, o.target_rel_ci, status);
    else if (key == "level") ok = read_number(v, key, what, o.level, status);
    else if (key == "min_samples") ok = read_count(v, key, what, o.min_samples, status);
    else if (key == "min_time_s") ok = read_number(v, key, what, o.min_time_s, status);
    else if (key == "time_budget_s") ok = read_number(v, key, what, o.time_budget_s, status);
    else if (key == "max_samples") ok = read_count(v, key, what, o.max_samples, status);
    else if (key == "launches_per_sample") ok = read_count(v, key, what, o.launches_per_sample, status);
    else if (key == "min_sample_s") ok = read_number(v, key, what, o.min_sample_s, status);
    else if (key == "use_graphs") ok = read_bool(v, key, what, o.use_graphs, status);
    else if (key == "hold_launches") ok = read_bool(v, key, what, o.hold_launches, status);
    else if (key == "warmup_min_s") ok = read_number(v, key, what, o.warmup_min_s, status);
    else if (key == "warmup_min_calls") ok = read_count(v, key, what, o.warmup_min_calls, status);
    else if (key == "discard_throttled") ok = read_bool(v, key, what, o.discard_throttled, status);
    else {
      *status = fail(KSCOPE_ERROR_INVALID_ARGUMENT,
                     unknown_key(what, key,
                                 "burst, cache, target_rel_ci, level, min_samples, min_time_s, time_budget_s, "
                                 "max_samples, launches_per_sample, min_sample_s, use_graphs, hold_launches, "
                                 "warmup_min_s, warmup_min_calls, discard_throttled"));
      return false;
    }
    if (!ok) return false;
  }
  if (!(o.target_rel_ci > 0) || !(o.level > 0 && o.level < 1) || !(o.time_budget_s >= 0) || !(o.min_time_s >= 0)) {
    *status = fail(KSCOPE_ERROR_INVALID_ARGUMENT,
                   "bench options: target_rel_ci must be > 0, level in (0, 1), time_budget_s and min_time_s >= 0");
    return false;
  }
  return true;
}

}  // namespace

// ---- benchmarks ----------------------------------------------------------------------------

struct kscope_output_sink {
  std::vector<double> values;
};

struct kscope_bench {
  std::string name = "python";
  kscope::bench_metadata metadata;
  kscope::work declared{};
  kscope::bench_options options;
  kscope_bench_call call = nullptr;
  void* call_user = nullptr;
  kscope_bench_read_output read = nullptr;
  void* read_user = nullptr;
  double tolerance = std::numeric_limits<double>::quiet_NaN();
  bool has_stream = false;
  uintptr_t stream = 0;
  int device = -1;  // -1: the runtime's current device
  // The reference's definition, copied when it was set (kscope::bench::reference copies too).
  std::shared_ptr<const kscope_bench> reference;
};

struct kscope_report {
  kscope::session_report report;
};

struct kscope_range {
  kscope::range range;
};

namespace {

thread_local std::string callback_error_text;

// The callable as the harness sees it: a failing C callback becomes an exception the
// harness catches (it never leaves the harness: bench::run catches what a callable throws).
std::function<void(kscope::bench_stream)> call_of(const kscope_bench& b) {
  const kscope_bench_call call = b.call;
  void* const user = b.call_user;
  return [call, user](kscope::bench_stream stream) {
    callback_error_text.clear();
    const int result = call(user, reinterpret_cast<uintptr_t>(stream));
    if (result != 0)
      throw std::runtime_error(callback_error_text.empty()
                                   ? "the callable failed (returned " + std::to_string(result) + ")"
                                   : callback_error_text);
  };
}

std::function<std::vector<double>()> output_of(const kscope_bench& b) {
  if (b.read == nullptr) return {};
  const kscope_bench_read_output read = b.read;
  void* const user = b.read_user;
  return [read, user]() {
    kscope_output_sink sink;
    callback_error_text.clear();
    const int result = read(user, &sink);
    if (result != 0)
      throw std::runtime_error(callback_error_text.empty()
                                   ? "the output reader failed (returned " + std::to_string(result) + ")"
                                   : callback_error_text);
    return std::move(sink.values);
  };
}

kscope::bench make_bench(const kscope_bench& b) {
  kscope::bench out{b.name, call_of(b)};
  out.shape(b.metadata.shape).dtype(b.metadata.dtype).strides(b.metadata.strides);
  for (const auto& [key, value] : b.metadata.params) out.param(key, value);
  out.set_work(b.declared).options(b.options);
  if (b.has_stream) out.stream(reinterpret_cast<kscope::bench_stream>(b.stream));
  if (b.read != nullptr) out.output(output_of(b), b.tolerance);
  return out;
}

// Times Python (or any host) callables with the steady clock: the same sampler, warm-up
// detection, stopping rule and reference comparison as the CUDA timer, for work that runs
// on the host (a tokenizer, a sampler on the CPU) or where there is no GPU. It knows no
// empty-call time, so the "no work reached the stream" check does not apply.
class host_bench_timer final : public kscope::bench_timer {
 public:
  explicit host_bench_timer(std::vector<std::function<void(kscope::bench_stream)>> targets)
      : targets_(std::move(targets)) {}

  kscope::timed_sample time(std::size_t which, std::size_t launches) override {
    const auto& fn = targets_.at(which);
    const std::int64_t start = kscope::detail::now_ns();
    try {
      for (std::size_t i = 0; i < launches; ++i) fn(nullptr);
    } catch (const std::exception& e) {
      note_once(std::string("the benchmark threw: ") + e.what());
      return {};
    }
    const std::int64_t end = kscope::detail::now_ns();
    return {static_cast<double>(end - start) * 1e-9, std::numeric_limits<double>::quiet_NaN()};
  }

  void execute(std::size_t which) override { targets_.at(which)(nullptr); }

  std::vector<std::string> notes() const override {
    std::vector<std::string> n{"timed on the host (steady clock around each batch of calls), not with CUDA events"};
    n.insert(n.end(), notes_.begin(), notes_.end());
    return n;
  }

 private:
  void note_once(const std::string& note) {
    if (std::find(notes_.begin(), notes_.end(), note) == notes_.end()) notes_.push_back(note);
  }
  std::vector<std::function<void(kscope::bench_stream)>> targets_;
  std::vector<std::string> notes_;
};

// Makes `device` this runtime's current device for the life of the object, then sets the
// previous one back. The program's device (torch's current one, for Python) may not be this
// runtime's: the harness's events and stream must be on the device the work runs on. A
// device < 0 changes nothing.
class device_switch {
 public:
  explicit device_switch(int device) noexcept {
#if KSCOPE_HAS_CUDA
    if (device < 0 || cudaGetDevice(&previous_) != cudaSuccess || previous_ == device) {
      (void)cudaGetLastError();  // no driver: the harness says so itself
      previous_ = -1;
      return;
    }
    if (cudaSetDevice(device) != cudaSuccess) {
      (void)cudaGetLastError();
      previous_ = -1;
      ok_ = false;
    }
#else
    (void)device;
#endif
  }
  ~device_switch() {
#if KSCOPE_HAS_CUDA
    if (previous_ >= 0) (void)cudaSetDevice(previous_);
    (void)cudaGetLastError();
#endif
  }
  device_switch(const device_switch&) = delete;
  device_switch& operator=(const device_switch&) = delete;
  [[nodiscard]] bool ok() const noexcept { return ok_; }

 private:
  int previous_ = -1;
  bool ok_ = true;
};

bool read_bench_spec(const char* text, kscope_bench& b, kscope_status* status) {
  if (text == nullptr) return true;
  const char* what = "bench spec";
  json_value doc;
  if (!parse_object(text, what, doc, status)) return false;
  for (const auto& [key, v] : doc.members) {
    if (key == "name" || key == "dtype") {
      if (!v.is_string()) {
        *status = fail(KSCOPE_ERROR_INVALID_ARGUMENT, "bench spec: '" + key + "' must be a string");
        return false;
      }
      (key == "name" ? b.name : b.metadata.dtype) = v.string;
    } else if (key == "shape" || key == "strides") {
      std::vector<long long> dims;
      bool ok = v.is_array();
      for (const json_value& d : v.items) {
        ok = ok && d.is_number() && std::floor(d.number) == d.number && std::fabs(d.number) < 9e15;
        if (ok) dims.push_back(static_cast<long long>(d.number));
      }
      if (!ok) {
        *status = fail(KSCOPE_ERROR_INVALID_ARGUMENT, "bench spec: '" + key + "' must be an array of integers");
        return false;
      }
      (key == "shape" ? b.metadata.shape : b.metadata.strides) = std::move(dims);
    } else if (key == "params") {
      if (!v.is_object()) {
        *status = fail(KSCOPE_ERROR_INVALID_ARGUMENT, "bench spec: 'params' must be an object");
        return false;
      }
      for (const auto& [name, value] : v.members) {
        if (value.is_string()) {
          b.metadata.params.emplace_back(name, kscope::param_value(value.string));
        } else if (value.is_number()) {
          const bool whole = std::floor(value.number) == value.number && std::fabs(value.number) < 9e15;
          b.metadata.params.emplace_back(name, whole ? kscope::param_value(static_cast<long long>(value.number))
                                                     : kscope::param_value(value.number));
        } else {
          *status = fail(KSCOPE_ERROR_INVALID_ARGUMENT,
                         "bench spec: param '" + kscope::printable_text(name) + "' must be a number or a string");
          return false;
        }
      }
    } else if (key == "work") {
      if (!v.is_array() || v.items.size() != 2 || !(v.at(0).is_number() || v.at(0).is_null()) ||
          !(v.at(1).is_number() || v.at(1).is_null())) {
        *status = fail(KSCOPE_ERROR_INVALID_ARGUMENT, "bench spec: 'work' must be [flops, bytes]");
        return false;
      }
      b.declared = kscope::work{v.at(0).number_or(std::numeric_limits<double>::quiet_NaN()),
                                v.at(1).number_or(std::numeric_limits<double>::quiet_NaN())};
    } else if (key == "options") {
      if (!v.is_object()) {
        *status = fail(KSCOPE_ERROR_INVALID_ARGUMENT, "bench spec: 'options' must be an object");
        return false;
      }
      if (!read_bench_options(v, b.options, status)) return false;
    } else {
      *status = fail(KSCOPE_ERROR_INVALID_ARGUMENT,
                     unknown_key(what, key, "name, dtype, shape, strides, params, work, options"));
      return false;
    }
  }
  return true;
}

std::vector<std::string> split_lines(const char* text) {
  std::vector<std::string> out;
  if (text == nullptr) return out;
  std::string_view rest(text);
  while (!rest.empty()) {
    const std::size_t end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    if (!line.empty()) out.emplace_back(line);
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
  return out;
}

}  // namespace

extern "C" {

// ---- the library ------------------------------------------------------------------------

int kscope_c_abi_version(void) { return KSCOPE_C_ABI_VERSION; }

const char* kscope_c_version(void) { return KSCOPE_VERSION_STRING; }

const char* kscope_last_error(void) { return last_error_text.c_str(); }

void kscope_free(void* buffer) { std::free(buffer); }

// ---- scopes -----------------------------------------------------------------------------

kscope_status kscope_site_register(const char* name, size_t size, uint32_t* site) {
  return guarded("kscope_site_register", [&] {
    if (site == nullptr || (name == nullptr && size != 0))
      return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_site_register: null name or site pointer");
    std::string text(view_of(name, size));
    std::lock_guard<kscope::detail::fork_guarded_mutex> lock(sites.mutex);
    if (sites.ids == nullptr) sites.ids = new std::unordered_map<std::string, std::uint32_t>();
    const auto found = sites.ids->find(text);
    if (found != sites.ids->end()) {
      *site = found->second;
      return KSCOPE_OK;
    }
    const std::uint32_t id = sites.count.load(std::memory_order_relaxed) + 1;
    if (id > max_sites)
      return fail(KSCOPE_ERROR_LIMIT, "more than " + std::to_string(max_sites) +
                                          " distinct scope names: names made from data (request ids, sizes) belong "
                                          "in tags; open this one by name");
    auto entry = std::make_unique<site_entry>();
    entry->name = text;
    entry->is_literal = text.size() <= max_literal_name && text.find('\0') == std::string::npos;
    if (entry->is_literal) std::memcpy(entry->literal, text.data(), text.size());
    sites.ids->emplace(std::move(text), id);
    sites.entries[id].store(entry.release(), std::memory_order_release);
    sites.count.store(id, std::memory_order_relaxed);
    *site = id;
    return KSCOPE_OK;
  });
}

kscope_scope_handle kscope_scope_open(uint32_t site) { return open_site(site, nullptr); }

kscope_scope_handle kscope_scope_open_stream(uint32_t site, uintptr_t stream) { return open_site(site, &stream); }

// Counters turned on between counters_on() and the scope's own load, nanoseconds apart,
// profile that one open here, with the caller's lock held; its close, which knows
// (open_scope::profiled), still goes to kscope_scope_close.
kscope_scope_handle kscope_scope_try_open(uint32_t site) {
  return counters_on() ? KSCOPE_SCOPE_WOULD_BLOCK : open_site(site, nullptr);
}

kscope_scope_handle kscope_scope_try_open_stream(uint32_t site, uintptr_t stream) {
  return counters_on() ? KSCOPE_SCOPE_WOULD_BLOCK : open_site(site, &stream);
}

kscope_scope_handle kscope_scope_open_named(const char* name, size_t size, int has_stream, uintptr_t stream) {
  if (name == nullptr && size != 0) {
    fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_scope_open_named: null name");
    return -1;
  }
  return open_in_slot(0, nullptr, view_of(name, size), has_stream ? &stream : nullptr);
}

kscope_status kscope_scope_close(kscope_scope_handle scope) {
  if (opened_nothing(scope)) return KSCOPE_OK;
  return guarded("kscope_scope_close", [&] {
    thread_scopes& scopes = this_thread_scopes();
    // The usual case: the innermost scope (profiled or not: this call may block).
    if (!scopes.stack.empty() && scopes.stack.back().handle == scope) {
      scopes.pop();
      return KSCOPE_OK;
    }
    kscope_status status = KSCOPE_OK;
    open_scope* target = find_open(scope, &status);
    if (target == nullptr) return status;
    std::string closed_early;
    while (scopes.stack.back().handle != scope) {
      closed_early += (closed_early.empty() ? "" : ", ") + quoted_name_of(scopes.stack.back());
      scopes.pop();
    }
    const std::string name = quoted_name_of(scopes.stack.back());
    scopes.pop();
    return fail(KSCOPE_ERROR_ORDER,
                "scope " + name + " closed while scopes opened after it were open (" + closed_early +
                    "): they were closed first, here. Blocks that interleave on one thread (generators, "
                    "coroutines) need kscope.start_range");
  });
}

// Only the innermost scope, unprofiled: everything else (a profiled call's close, which ends
// its counter pass; a close out of order; a mistake to name) is kscope_scope_close's.
kscope_status kscope_scope_try_close(kscope_scope_handle scope) {
  if (opened_nothing(scope)) return KSCOPE_OK;
  return guarded("kscope_scope_try_close", [&] {
    thread_scopes& scopes = this_thread_scopes();
    if (scopes.stack.empty() || scopes.stack.back().handle != scope || scopes.stack.back().profiled)
      return KSCOPE_WOULD_BLOCK;
    // The outermost scope's close may end a window of steps (the collector pauses or resumes
    // CUPTI, flushing its records: scope/detail/step_hook.hpp): not with the caller's lock held.
    if (scopes.stack.size() == 1 && scopes.stack.back().get().active() &&
        kscope::detail::outermost_close_hook.load(std::memory_order_acquire) != nullptr)
      return KSCOPE_WOULD_BLOCK;
    scopes.pop();
    return KSCOPE_OK;
  });
}

kscope_status kscope_scope_set_work(kscope_scope_handle scope, double flops, double bytes) {
  return guarded("kscope_scope_set_work", [&] {
    kscope_status status = KSCOPE_OK;
    open_scope* s = find_open(scope, &status);
    if (s == nullptr) return status;
    s->get().set_work({flops, bytes});
    return KSCOPE_OK;
  });
}

kscope_status kscope_scope_tag(kscope_scope_handle scope, const char* key, size_t key_size, const char* value,
                               size_t value_size) {
  return guarded("kscope_scope_tag", [&] {
    if ((key == nullptr && key_size != 0) || (value == nullptr && value_size != 0))
      return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_scope_tag: null key or value");
    kscope_status status = KSCOPE_OK;
    open_scope* s = find_open(scope, &status);
    if (s == nullptr) return status;
    s->get().tag(view_of(key, key_size), view_of(value, value_size));
    return KSCOPE_OK;
  });
}

// ---- cross-thread ranges ----------------------------------------------------------------

kscope_status kscope_range_start(uint32_t site, kscope_range** range) {
  return guarded("kscope_range_start", [&] {
    if (range == nullptr) return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_range_start: null range pointer");
    const std::string* name = site_name(site);
    if (name == nullptr)
      return fail(KSCOPE_ERROR_NOT_FOUND,
                  "site " + std::to_string(site) + " was never registered (kscope_site_register)");
    *range = nullptr;
    if (!kscope::is_enabled()) return KSCOPE_OK;
    auto r = std::make_unique<kscope_range>();
    r->range = kscope::start_range(*name);
    *range = r.release();
    return KSCOPE_OK;
  });
}

kscope_status kscope_range_set_work(kscope_range* range, double flops, double bytes) {
  if (range == nullptr) return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_range_set_work: null range");
  range->range.set_work({flops, bytes});
  return KSCOPE_OK;
}

kscope_status kscope_range_end(kscope_range* range) {
  if (range == nullptr) return KSCOPE_OK;
  range->range.end();
  delete range;
  return KSCOPE_OK;
}

// ---- run-time switches ------------------------------------------------------------------

void kscope_set_enabled(int on) { kscope::set_enabled(on != 0); }

int kscope_is_enabled(void) { return kscope::is_enabled() ? 1 : 0; }

void kscope_set_nvtx(int on) { kscope::session::global().set_nvtx(on != 0); }

// ---- the session ------------------------------------------------------------------------

kscope_status kscope_enable_cupti(const char* options) {
  return guarded("kscope_enable_cupti", [&] {
    kscope::cupti_options o;
    if (options != nullptr) {
      const std::vector<std::string> problems = kscope::apply_cupti_options_text(options, o, "cupti options");
      if (!problems.empty()) return fail(KSCOPE_ERROR_INVALID_ARGUMENT, problems.front() + "; CUPTI not started");
    }
    if (kscope::session::global().enable_cupti(o)) return KSCOPE_OK;
    const std::string why = kscope::cupti_collector::global().status().message;
    return fail(KSCOPE_ERROR_UNAVAILABLE, why.empty() ? std::string("CUPTI could not start") : why);
  });
}

kscope_status kscope_enable_production(void) {
  return guarded("kscope_enable_production", [&] {
    if (kscope::session::global().enable_production()) return KSCOPE_OK;
    const std::string why = kscope::cupti_collector::global().status().message;
    return fail(KSCOPE_ERROR_UNAVAILABLE, why.empty() ? std::string("the activity collector could not start") : why);
  });
}

kscope_status kscope_pause_tracing(void) {
  return guarded("kscope_pause_tracing", [&] {
    kscope::cupti_collector& c = kscope::cupti_collector::global();
    if (!c.running()) return fail(KSCOPE_ERROR_UNAVAILABLE, "the activity collector is not running; nothing to pause");
    (void)c.pause_tracing();
    if (!c.tracing()) return KSCOPE_OK;
    return fail(KSCOPE_ERROR_UNAVAILABLE, "CUPTI refused to pause tracing; it goes on");
  });
}

kscope_status kscope_resume_tracing(void) {
  return guarded("kscope_resume_tracing", [&] {
    kscope::cupti_collector& c = kscope::cupti_collector::global();
    if (!c.running()) return fail(KSCOPE_ERROR_UNAVAILABLE, "the activity collector is not running; nothing to resume");
    (void)c.resume_tracing();
    if (c.tracing()) return KSCOPE_OK;
    return fail(KSCOPE_ERROR_UNAVAILABLE, "CUPTI refused to resume tracing");
  });
}

kscope_status kscope_enable_metric_sampling(const char* step_scopes) {
  return guarded("kscope_enable_metric_sampling", [&] {
    kscope::session& s = kscope::session::global();
    if (s.enable_metric_sampling({}, split_lines(step_scopes))) return KSCOPE_OK;
    std::string why = "metric sampling could not start";
    if (const auto f = std::dynamic_pointer_cast<kscope::detail::pm_sampling_feature>(s.find_feature("pm_sampling")))
      if (!f->sampling()->status().message.empty()) why = f->sampling()->status().message;
    return fail(KSCOPE_ERROR_UNAVAILABLE, why);
  });
}

void kscope_disable_metric_sampling(void) {
  (void)guarded("kscope_disable_metric_sampling", [] {
    kscope::session::global().disable_metric_sampling();
    return KSCOPE_OK;
  });
}

namespace {
kscope_status enable_counters_as(const char* what, int kernel_replay, int whole_steps, const char* step_scope) {
  return guarded(what, [&] {
    kscope::scope_counter_options o;
    o.kernel_replay = kernel_replay != 0;
    o.whole_steps = whole_steps != 0;
    if (step_scope != nullptr) o.step_scope = step_scope;
    if (!o.whole_steps && !o.step_scope.empty())
      return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "a step scope ('" + o.step_scope +
                                                     "') names what a whole step is: it needs whole_steps");
    if (kscope::session::global().enable_counters(o)) return KSCOPE_OK;
    const std::string why = kscope::scope_counter_sampler::global().snapshot().status;
    return fail(KSCOPE_ERROR_UNAVAILABLE, why.empty() ? std::string("per-scope counters could not start") : why);
  });
}
}  // namespace

kscope_status kscope_enable_counters(int kernel_replay) {
  return enable_counters_as("kscope_enable_counters", kernel_replay, 1, nullptr);
}

kscope_status kscope_enable_counters_steps(int kernel_replay, int whole_steps, const char* step_scope) {
  return enable_counters_as("kscope_enable_counters_steps", kernel_replay, whole_steps, step_scope);
}

void kscope_disable_counters(void) { kscope::session::global().disable_counters(); }

void kscope_session_reset(void) { kscope::session::global().reset(); }

kscope_status kscope_session_warn(const char* message, size_t size) {
  return guarded("kscope_session_warn", [&] {
    if (message == nullptr && size != 0)
      return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_session_warn: null message");
    kscope::session::global().warn(std::string(view_of(message, size)));
    return KSCOPE_OK;
  });
}

kscope_status kscope_write_trace(const char* path) {
  return guarded("kscope_write_trace", [&] {
    if (path == nullptr || *path == '\0') return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_write_trace: no path");
    std::string error;
    if (kscope::session::global().write_trace(path, &error)) return KSCOPE_OK;
    return fail(KSCOPE_ERROR_IO, error.empty() ? "the trace could not be written to " + std::string(path) : error);
  });
}

// ---- reports ----------------------------------------------------------------------------

kscope_status kscope_report_create(kscope_report** report) {
  return guarded("kscope_report_create", [&] {
    if (report == nullptr) return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_report_create: null report pointer");
    auto r = std::make_unique<kscope_report>();
    r->report = kscope::session::global().report();
    *report = r.release();
    return KSCOPE_OK;
  });
}

kscope_status kscope_report_parse(const char* json, size_t size, kscope_report** report) {
  return guarded("kscope_report_parse", [&] {
    if (report == nullptr || (json == nullptr && size != 0))
      return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_report_parse: null text or report pointer");
    std::string error;
    std::optional<kscope::session_report> parsed = kscope::parse_report(view_of(json, size), &error);
    if (!parsed) return fail(KSCOPE_ERROR_INVALID_ARGUMENT, error.empty() ? std::string("not a kscope report") : error);
    auto r = std::make_unique<kscope_report>();
    r->report = std::move(*parsed);
    *report = r.release();
    return KSCOPE_OK;
  });
}

void kscope_report_destroy(kscope_report* report) { delete report; }

kscope_status kscope_report_format(const kscope_report* report, int format, char** text, size_t* size) {
  return guarded("kscope_report_format", [&] {
    if (report == nullptr || text == nullptr)
      return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_report_format: null report or text pointer");
    const kscope::session_report& r = report->report;
    switch (format) {
      case KSCOPE_FORMAT_TEXT: return give_text(r.text(), text, size);
      case KSCOPE_FORMAT_JSON: return give_text(r.json(), text, size);
      case KSCOPE_FORMAT_CSV: return give_text(r.csv(), text, size);
      case KSCOPE_FORMAT_HTML: return give_text(r.html(), text, size);
      case KSCOPE_FORMAT_OPENMETRICS: return give_text(kscope::openmetrics(r), text, size);
      default:
        return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_report_format: unknown format " + std::to_string(format));
    }
  });
}

kscope_status kscope_report_write(const kscope_report* report, int format, const char* path) {
  return guarded("kscope_report_write", [&] {
    if (report == nullptr || path == nullptr || *path == '\0')
      return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_report_write: null report or no path");
    const kscope::session_report& r = report->report;
    std::string error;
    bool written = false;
    switch (format) {
      case KSCOPE_FORMAT_TEXT: written = kscope::write_text_file(path, r.text(), &error); break;
      case KSCOPE_FORMAT_JSON: written = r.write_json(path, &error); break;
      case KSCOPE_FORMAT_CSV: written = kscope::write_text_file(path, r.csv(), &error); break;
      case KSCOPE_FORMAT_HTML: written = r.write_html(path, &error); break;
      case KSCOPE_FORMAT_OPENMETRICS: written = kscope::write_text_file(path, kscope::openmetrics(r), &error); break;
      default:
        return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_report_write: unknown format " + std::to_string(format));
    }
    if (written) return KSCOPE_OK;
    return fail(KSCOPE_ERROR_IO, error.empty() ? "could not write " + std::string(path) : error);
  });
}

kscope_status kscope_report_verdict(const kscope_report* report, const char* path, size_t path_size, char** json,
                                    size_t* json_size) {
  return guarded("kscope_report_verdict", [&] {
    if (report == nullptr || json == nullptr || (path == nullptr && path_size != 0))
      return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_report_verdict: null report, path or json pointer");
    const std::string wanted(view_of(path, path_size));
    const kscope::scope_report* s = report->report.find(wanted);
    if (s == nullptr)
      return fail(KSCOPE_ERROR_NOT_FOUND, "kscope_report_verdict: the report has no scope \"" +
                                              kscope::printable_text(wanted) + "\"");
    std::string out;
    kscope::detail::json_writer w(out);
    if (s->verdict) kscope::detail::write_verdict_json(w, *s->verdict); else w.value(nullptr);
    return give_text(out, json, json_size);
  });
}

namespace {
// A section a C or Python caller adds to a report: its text and JSON as given.
class given_section final : public kscope::report_section {
 public:
  given_section(std::string key, std::string heading, std::string text, std::string json)
      : key_(std::move(key)), heading_(std::move(heading)), text_(std::move(text)), json_(std::move(json)) {}
  std::string key() const override { return key_; }
  std::string heading() const override { return heading_; }
  std::string text(const kscope::session_report&) const override { return text_; }
  std::string json() const override { return json_; }

 private:
  std::string key_, heading_, text_, json_;
};
}  // namespace

kscope_status kscope_report_add_section(kscope_report* report, const char* key, const char* heading, const char* text,
                                        size_t text_size, const char* json, size_t json_size) {
  return guarded("kscope_report_add_section", [&] {
    if (report == nullptr || key == nullptr || (text == nullptr && text_size != 0) ||
        (json == nullptr && json_size != 0))
      return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_report_add_section: null report, key, text or json");
    const std::string name(key);
    if (!kscope::valid_report_section_key(name))
      return fail(KSCOPE_ERROR_INVALID_ARGUMENT,
                  "kscope_report_add_section: \"" + kscope::printable_text(name) +
                      "\" is not a section key (1-64 of a-z 0-9 _ -, not a name of the report's own sections)");
    for (const std::shared_ptr<const kscope::report_section>& s : report->report.sections)
      if (s != nullptr && s->key() == name)
        return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_report_add_section: the report has a section \"" + name +
                                                       "\" already");
    const std::string data(view_of(json, json_size));
    const kscope::detail::json_parse_result parsed = kscope::detail::parse_json(data);
    if (!parsed.ok())
      return fail(KSCOPE_ERROR_INVALID_ARGUMENT,
                  "kscope_report_add_section: the json of section \"" + name + "\" is not one JSON value: " + parsed.error);
    report->report.sections.push_back(std::make_shared<given_section>(
        name, heading == nullptr ? std::string() : std::string(heading), std::string(view_of(text, text_size)), data));
    return KSCOPE_OK;
  });
}

kscope_status kscope_diagnose(const kscope_report* report, const char* options, char** json, size_t* json_size,
                              char** text, size_t* text_size) {
  return guarded("kscope_diagnose", [&] {
    if (report == nullptr) return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_diagnose: null report");
    kscope::diagnose_options o;
    kscope_status status = KSCOPE_OK;
    if (!read_diagnose_options(options, o, &status)) return status;
    const std::vector<kscope::diagnosis> found = kscope::diagnose(report->report, o);
    // Both texts are made before either buffer is handed out, so a failure leaks nothing.
    const std::string as_json = json ? kscope::diagnosis_json(found) : std::string();
    const std::string as_text = text ? kscope::diagnosis_text(found, report->report, o) : std::string();
    return give_texts(as_json, json, json_size, as_text, text, text_size);
  });
}

kscope_status kscope_diagnose_options(char** json, size_t* json_size) {
  return guarded("kscope_diagnose_options", [&] {
    if (json == nullptr) return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_diagnose_options: null json pointer");
    return give_text(kscope::diagnose_options_json(), json, json_size);
  });
}

// ---- benchmarks -------------------------------------------------------------------------

kscope_status kscope_bench_create(const char* spec, kscope_bench_call call, void* user, kscope_bench** bench) {
  return guarded("kscope_bench_create", [&] {
    if (call == nullptr || bench == nullptr)
      return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_bench_create: null callable or bench pointer");
    auto b = std::make_unique<kscope_bench>();
    b->call = call;
    b->call_user = user;
    kscope_status status = KSCOPE_OK;
    if (!read_bench_spec(spec, *b, &status)) return status;
    *bench = b.release();
    return KSCOPE_OK;
  });
}

kscope_status kscope_bench_set_stream(kscope_bench* bench, uintptr_t stream) {
  if (bench == nullptr) return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_bench_set_stream: null bench");
  bench->has_stream = true;
  bench->stream = stream;
  return KSCOPE_OK;
}

kscope_status kscope_bench_set_device(kscope_bench* bench, int device) {
  if (bench == nullptr) return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_bench_set_device: null bench");
  if (device < 0) return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_bench_set_device: negative device");
  bench->device = device;
  return KSCOPE_OK;
}

kscope_status kscope_bench_set_output(kscope_bench* bench, kscope_bench_read_output read, void* user,
                                      double tolerance) {
  if (bench == nullptr) return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_bench_set_output: null bench");
  bench->read = read;
  bench->read_user = user;
  bench->tolerance = tolerance;
  return KSCOPE_OK;
}

kscope_status kscope_bench_set_reference(kscope_bench* bench, const kscope_bench* reference) {
  return guarded("kscope_bench_set_reference", [&] {
    if (bench == nullptr || reference == nullptr)
      return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_bench_set_reference: null bench or reference");
    if (bench == reference)
      return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_bench_set_reference: a bench is not its own reference");
    auto copy = std::make_shared<kscope_bench>(*reference);
    copy->reference.reset();  // a reference's own reference is not part of this comparison
    bench->reference = std::move(copy);
    return KSCOPE_OK;
  });
}

kscope_status kscope_bench_run(kscope_bench* bench, int timer, char** json, size_t* json_size, char** text,
                               size_t* text_size) {
  return guarded("kscope_bench_run", [&] {
    if (bench == nullptr) return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_bench_run: null bench");
    if (timer != KSCOPE_TIMER_CUDA && timer != KSCOPE_TIMER_HOST)
      return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_bench_run: unknown timer " + std::to_string(timer));
    kscope::bench b = make_bench(*bench);
    if (bench->reference) b.reference(make_bench(*bench->reference));
    kscope::bench_report report;
    if (timer == KSCOPE_TIMER_HOST) {
      report.context = kscope::describe_bench_context();
      std::vector<std::function<void(kscope::bench_stream)>> targets{call_of(*bench)};
      if (bench->reference) targets.push_back(call_of(*bench->reference));
      host_bench_timer host(std::move(targets));
      report.results.push_back(b.run(host));
    } else {
      device_switch on_device(bench->device);
      if (!on_device.ok())
        return fail(KSCOPE_ERROR_INVALID_ARGUMENT,
                    "kscope_bench_run: cannot use CUDA device " + std::to_string(bench->device));
      report.context = kscope::describe_bench_context();
      report.results.push_back(b.run());
    }
    const std::string as_json = json ? report.json(true) : std::string();
    const std::string as_text = text ? report.markdown() : std::string();
    return give_texts(as_json, json, json_size, as_text, text, text_size);
  });
}

void kscope_bench_destroy(kscope_bench* bench) { delete bench; }

void kscope_bench_callback_error(const char* message, size_t size) {
  try {
    callback_error_text.assign(view_of(message, size));
  } catch (...) {
  }
}

kscope_status kscope_output_put(kscope_output_sink* sink, const double* values, size_t count) {
  return guarded("kscope_output_put", [&] {
    if (sink == nullptr || (values == nullptr && count != 0))
      return fail(KSCOPE_ERROR_INVALID_ARGUMENT, "kscope_output_put: null sink or values");
    sink->values.insert(sink->values.end(), values, values + count);
    return KSCOPE_OK;
  });
}

// ---- attached at the driver's start ------------------------------------------------------
// CUDA_INJECTION64_PATH=<this library> makes the driver load it inside cuInit and call this,
// before the program's first CUDA call returns: the activity collector subscribes there, at
// the driver's start, where CUPTI costs a launch less and leaves nothing once switched off
// (bench/RESULTS.md, sessions 22-23). `python -m kscope run --attach driver` sets it up.
// KSCOPE_INJECTION says what to start: `cupti` (the collector, KSCOPE_CUPTI_OPTIONS applied)
// or `production` (the production preset's collector options; the preset's PM sampling is
// started by the program, after: it cannot start inside cuInit); anything else starts
// nothing. Nothing here makes a CUDA call (it would re-enter cuInit). Both variables are
// removed from the environment once read, so that child processes do not inherit them.
// Returns 1 (the driver ignores it).
KSCOPE_C_API int InitializeInjection(void) {
  try {
    const char* mode = std::getenv("KSCOPE_INJECTION");
    const std::string what = mode != nullptr ? mode : "";
    ::unsetenv("KSCOPE_INJECTION");
    ::unsetenv("CUDA_INJECTION64_PATH");
    kscope::cupti_options options;
    if (what == "production") {
      options = kscope::production_preset().cupti;
    } else if (what != "cupti" && what != "1") {
      kscope::session::global().warn(
          "CUDA_INJECTION64_PATH named kscope's library but KSCOPE_INJECTION was " +
          (what.empty() ? std::string("not set") : "'" + what + "'") +
          " (cupti or production): the collector was not started at the driver's start");
      return 1;
    }
    (void)kscope::cupti_collector::global().start_in_driver_initialization(options);
  } catch (...) {
  }
  return 1;
}

}  // extern "C"
