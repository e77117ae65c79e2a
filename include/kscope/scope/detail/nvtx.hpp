// kscope/scope/detail/nvtx.hpp — scopes as NVTX ranges: the domain (scope/nvtx.hpp says who
// names it), registered names, categories and colours, and the declared work and tags a
// tool receives when a scope closes.
//
// NVTX3 is header-only: with no tool attached each call checks a null function pointer and
// returns (about a nanosecond), so ranges stay on in production. Whether a tool is attached
// is known from the domain itself: NVTX's no-tool domain creation returns null. Everything
// beyond the push and the pop (naming a category, copying a run-time name, the payload)
// runs only when it is not null, so with no tool a scope allocates nothing and calls
// nothing more than before. Without NVTX (CPU-only builds) the calls are empty, and the
// domain's name is still chosen and reported.
//
// Work and tags at the close. set_work and tag are usually called after the push, so they
// cannot ride on it. NVTX's payload extension has nvtxRangePopPayload, but it replaces the
// pop: a tool that takes core NVTX and not the extension (its slot left empty) would then
// never see the range end, and the range stack of that thread would be wrong from there on.
// So the close sends an nvtxDomainMarkEx of the scope's name, category and colour, carrying
// the values, just before the ordinary pop: every tool takes a mark, the mark sits at the
// range's end on the same thread, and a tool that ignores the payload loses only the payload.
// The payload is one static schema registered once per process ("kscope scope": flops and
// bytes as doubles, NaN when no work was declared, and this call's tags as one embedded
// string). When the tool does not register the schema (id 0: it does not implement the
// extension) or the header has no extension (<nvtx3/nvToolsExtPayload.h>, CUDA 12.x), the
// values go in the mark's message instead: "prefill flops=2e+09 bytes=1e+06 batch=8".
// With no tool kscope makes no payload call at all. (The extension would answer 0 anyway,
// but its first call initializes it: one more search for an injection library, a dlsym.)
#pragma once

#include "../../core/config.hpp"
#include "../../core/detail/once.hpp"
#include "../nvtx.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

// Under KSCOPE_SEPARATE_COMPILATION the NVTX header (whose implementation is compiled into
// every file that includes it: about half a second of g++ -O2) is included only where the
// definitions are: a push or pop is then one call more, next to NVTX's own indirect call.
#if KSCOPE_DETAIL_DEFINITIONS
#  include "switch_warnings.hpp"

// The fallback message's numbers: std::to_chars is what core/detail/number_format.hpp uses
// where the library has it, without that header's <cmath>, which alone cost every
// instrumented file about 0.1 s of g++ -fsyntax-only (a fifth of scope.hpp).
#  if defined(__has_include)
#    if __has_include(<version>)
#      include <version>
#    endif
#  endif
#  if defined(__cpp_lib_to_chars) && __cpp_lib_to_chars >= 201611L
#    include <charconv>
#    include <system_error>
#    define KSCOPE_DETAIL_NVTX_TO_CHARS 1
#  else
#    include "../../core/detail/number_format.hpp"
#    define KSCOPE_DETAIL_NVTX_TO_CHARS 0
#  endif
#  include <cstdio>
#  include <cstdlib>
#  include <cstring>
#  include <mutex>
#  include <new>
#  if KSCOPE_HAS_NVTX
#    include <nvtx3/nvToolsExt.h>
#    if defined(__has_include)
#      if __has_include(<nvtx3/nvToolsExtPayload.h>)
#        include <nvtx3/nvToolsExtPayload.h>
#        define KSCOPE_DETAIL_NVTX_PAYLOAD 1
#      endif
#    endif
#  endif
#  ifndef KSCOPE_DETAIL_NVTX_PAYLOAD
#    define KSCOPE_DETAIL_NVTX_PAYLOAD 0
#  endif
#endif
#include <type_traits>

#if KSCOPE_HAS_NVTX
// NVTX's opaque handle structs, declared as nvToolsExt.h declares them (at global scope), so
// that the handle types below are NVTX's own without its header.
struct nvtxStringRegistration_st;
struct nvtxDomainRegistration_st;
#endif

namespace kscope {
namespace detail {

// ---- the domain's name (with or without NVTX) -----------------------------------------

inline constexpr std::size_t max_nvtx_domain_name_bytes = 128;
inline constexpr const char* default_nvtx_domain = "kscope";

enum class nvtx_name_problem { none, empty, too_long, control_character };

// Whether `raw`, trimmed of blanks at both ends (the trimmed text in `trimmed`), can name a
// domain: 1 to max_nvtx_domain_name_bytes bytes, no control character.
[[nodiscard]] KSCOPE_DECL nvtx_name_problem check_nvtx_domain_name(std::string_view raw, std::string_view& trimmed) noexcept;
// "it is empty", ...: the reason in a warning line.
[[nodiscard]] KSCOPE_DECL const char* nvtx_name_problem_words(nvtx_name_problem problem) noexcept;

// The domain's name from the program's choice (nullptr: none; else already checked) and the
// environment's value (nullptr: unset), and the line that says why the environment's value
// was not used ("" when it was, or there was none). Pure: the precedence in one place.
struct nvtx_domain_decision {
  std::string name;
  std::string warning;
};
[[nodiscard]] KSCOPE_DECL nvtx_domain_decision decide_nvtx_domain(const char* program_choice, const char* environment);

// Says `line` once per process: on stderr ("kscope: " in front) and in nvtx_warnings().
KSCOPE_DECL void nvtx_warn(const std::string& line) noexcept;
// Every line said so far, in order; the session report lists them among its warnings.
[[nodiscard]] KSCOPE_DECL std::vector<std::string> nvtx_warnings();

// The process's choice: written by set_nvtx_domain until the domain is created, final after.
// Constant-initialized (no guard: scope/detail/once.hpp says why); its lock is a leaf.
struct nvtx_domain_choice {
  fork_guarded_mutex mutex{lock_rank::init};
  bool created = false;             // the name below is the domain's, for good
  bool chosen_by_program = false;   // set_nvtx_domain gave `program_name`
  char program_name[max_nvtx_domain_name_bytes + 1] = {};
  char name_in_use[max_nvtx_domain_name_bytes + 1] = {};
};
[[nodiscard]] KSCOPE_DECL nvtx_domain_choice& nvtx_choice() noexcept;

// Makes the choice final: the name the domain is created with (written into `name`), after
// saying why the environment's value was not used, if it was not.
KSCOPE_DECL void freeze_nvtx_domain_name(char (&name)[max_nvtx_domain_name_bytes + 1]) noexcept;

// ---- what a tool receives when a scope closes -----------------------------------------

// A scope's or range's notes for the tool, kept only while a tool is attached: a run-time
// name (copied: its text may not outlive the open) and this call's tags, in order.
struct nvtx_notes {
  std::string name;
  std::string tags;  // "key=value key=value"
};
inline constexpr std::size_t max_nvtx_tag_text_bytes = 1024;  // more tags are dropped

// The payload's layout, which the registered schema describes field by field.
struct nvtx_scope_payload {
  double flops;  // NaN: no work declared
  double bytes;
  char tags[240];  // NUL-terminated, cut at a character boundary with "..."
};

// Fills `out` (pure).
KSCOPE_DECL void fill_nvtx_payload(nvtx_scope_payload& out, double flops, double bytes, std::string_view tags) noexcept;
// The mark's message when the tool takes no payload: "name flops=2e+09 bytes=1e+06 k=v" (pure).
[[nodiscard]] KSCOPE_DECL std::string nvtx_work_message(std::string_view name, double flops, double bytes, std::string_view tags);
// Adds key=value to `notes` (allocated on the first tag), within max_nvtx_tag_text_bytes.
KSCOPE_DECL void nvtx_note_tag(nvtx_notes*& notes, std::string_view key, std::string_view value) noexcept;

#if KSCOPE_HAS_NVTX
using nvtx_string = ::nvtxStringRegistration_st*;         // nvtxStringHandle_t
using nvtx_range_id = std::uint64_t;                      // nvtxRangeId_t
using nvtx_domain_handle = ::nvtxDomainRegistration_st*;  // nvtxDomainHandle_t

// One domain for the whole process, created on first use, null when no tool is attached.
// That first NVTX call also initializes NVTX (with a tool attached, it loads the tool's
// library): a fork while another thread is in it waits for it, so a child never inherits
// it half-done and waits on it forever (core/detail/once.hpp).
KSCOPE_DECL nvtx_domain_handle nvtx_domain() noexcept;

// Registering a string once lets the tool skip copying it on every push.
KSCOPE_DECL nvtx_string nvtx_register(const char* name) noexcept;
// The push of a call site: its registered name (`name` when the tool registered none).
// True when a tool sees the range (then the close goes through nvtx_pop_seen).
KSCOPE_DECL bool nvtx_push(nvtx_string registered, const char* name) noexcept;
KSCOPE_DECL bool nvtx_push(nvtx_string registered, const char* name, const nvtx_style& style) noexcept;
// A run-time name: with a tool attached, copied into `notes` (allocated here) and pushed;
// with none, nothing is done. 0: no range, 2: a range a tool sees.
KSCOPE_DECL std::uint8_t nvtx_push_copy(std::string_view name, const nvtx_style* style, nvtx_notes*& notes) noexcept;
KSCOPE_DECL void nvtx_pop() noexcept;
// The close of a range a tool sees: the mark with the work and tags, if any, then the pop;
// frees `notes`.
KSCOPE_DECL void nvtx_pop_seen(const char* name, std::uint32_t category, std::uint32_t argb, double flops, double bytes,
                               nvtx_notes* notes) noexcept;
// Start/end ranges may end on another thread (a request's life in a serving engine). With a
// tool attached the name is kept in `notes` for the end's mark; with none, nothing is done.
KSCOPE_DECL nvtx_range_id nvtx_start(std::string_view name, const nvtx_style& style, nvtx_notes*& notes) noexcept;
// The end of a range a tool saw (started with notes): the mark, then the end; frees `notes`.
KSCOPE_DECL void nvtx_end_seen(nvtx_range_id id, std::uint32_t category, std::uint32_t argb, double flops, double bytes,
                               nvtx_notes* notes) noexcept;
// The mark itself (nothing when there is neither work nor a tag).
KSCOPE_DECL void nvtx_mark_work(const char* name, std::uint32_t category, std::uint32_t argb, double flops, double bytes,
                                const nvtx_notes* notes) noexcept;
// The category id a range carries: 0 for none or an id out of range (said once); names the
// id in `domain` the first time it comes with a name.
KSCOPE_DECL std::uint32_t nvtx_category_id(nvtx_domain_handle domain, const nvtx_category& category) noexcept;
// The payload schema's id, registered once; 0 when the tool does not take payloads.
KSCOPE_DECL std::uint64_t nvtx_payload_schema() noexcept;
#else
using nvtx_string = const void*;
using nvtx_range_id = std::uint64_t;
inline nvtx_string nvtx_register(const char*) noexcept { return nullptr; }
inline bool nvtx_push(nvtx_string, const char*) noexcept { return false; }
inline bool nvtx_push(nvtx_string, const char*, const nvtx_style&) noexcept { return false; }
inline std::uint8_t nvtx_push_copy(std::string_view, const nvtx_style*, nvtx_notes*&) noexcept { return 0; }
inline void nvtx_pop() noexcept {}
inline void nvtx_pop_seen(const char*, std::uint32_t, std::uint32_t, double, double, nvtx_notes*) noexcept {}
inline nvtx_range_id nvtx_start(std::string_view, const nvtx_style&, nvtx_notes*&) noexcept { return 0; }
inline void nvtx_end_seen(nvtx_range_id, std::uint32_t, std::uint32_t, double, double, nvtx_notes*) noexcept {}
#endif

#if KSCOPE_DETAIL_DEFINITIONS

// ---- the domain's name ------------------------------------------------------------------

KSCOPE_DECL nvtx_name_problem check_nvtx_domain_name(std::string_view raw, std::string_view& trimmed) noexcept {
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  std::size_t begin = 0, end = raw.size();
  while (begin < end && blank(raw[begin])) ++begin;
  while (end > begin && blank(raw[end - 1])) --end;
  trimmed = raw.substr(begin, end - begin);
  if (trimmed.empty()) return nvtx_name_problem::empty;
  if (trimmed.size() > max_nvtx_domain_name_bytes) return nvtx_name_problem::too_long;
  for (char c : trimmed) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F) return nvtx_name_problem::control_character;
  }
  return nvtx_name_problem::none;
}

KSCOPE_DECL const char* nvtx_name_problem_words(nvtx_name_problem problem) noexcept {
  switch (problem) {
    case nvtx_name_problem::none: return "it is usable";
    case nvtx_name_problem::empty: return "it is empty";
    case nvtx_name_problem::too_long: return "it is longer than 128 bytes";
    case nvtx_name_problem::control_character: return "it holds a control character";
  }
  return "it is not usable";
}

KSCOPE_DECL nvtx_domain_decision decide_nvtx_domain(const char* program_choice, const char* environment) {
  nvtx_domain_decision out;
  out.name = program_choice ? program_choice : default_nvtx_domain;
  if (environment == nullptr) return out;
  std::string_view from_environment;
  const nvtx_name_problem problem = check_nvtx_domain_name(environment, from_environment);
  if (problem == nvtx_name_problem::empty) return out;  // empty or blank: as if unset
  if (problem != nvtx_name_problem::none) {
    out.warning = value_warning("KSCOPE_NVTX_DOMAIN", environment, nvtx_name_problem_words(problem),
                                "ranges use the NVTX domain \"" + printable_name(out.name) + "\"");
  } else if (program_choice == nullptr) {
    out.name = std::string(from_environment);
  } else if (from_environment != program_choice) {
    out.warning = value_warning("KSCOPE_NVTX_DOMAIN", environment,
                                "the program named the NVTX domain \"" + printable_name(out.name) +
                                    "\" (kscope::set_nvtx_domain), which comes first",
                                "ranges use that one");
  }
  return out;
}

KSCOPE_DECL nvtx_domain_choice& nvtx_choice() noexcept {
  static nvtx_domain_choice choice;  // constant-initialized: no guard
  return choice;
}

// The lines said so far. Leaked on purpose, like kscope's singletons: a scope in a static
// destructor may still warn.
struct nvtx_warning_list {
  fork_guarded_mutex mutex{lock_rank::init};
  std::vector<std::string>* lines = nullptr;
};
KSCOPE_DECL nvtx_warning_list& nvtx_warning_lines() noexcept {
  static nvtx_warning_list list;  // constant-initialized: no guard
  return list;
}

KSCOPE_DECL void nvtx_warn(const std::string& line) noexcept {
  nvtx_warning_list& list = nvtx_warning_lines();
  try {
    std::lock_guard<fork_guarded_mutex> lock(list.mutex);
    if (list.lines == nullptr) list.lines = new std::vector<std::string>();
    for (const std::string& said : *list.lines)
      if (said == line) return;
    list.lines->push_back(line);
    const std::string shown = "kscope: " + line + "\n";
    std::fputs(shown.c_str(), stderr);
  } catch (...) {  // out of memory: the line is lost, the program is not
  }
}

KSCOPE_DECL std::vector<std::string> nvtx_warnings() {
  nvtx_warning_list& list = nvtx_warning_lines();
  std::lock_guard<fork_guarded_mutex> lock(list.mutex);
  return list.lines ? *list.lines : std::vector<std::string>{};
}

KSCOPE_DECL void freeze_nvtx_domain_name(char (&name)[max_nvtx_domain_name_bytes + 1]) noexcept {
  nvtx_domain_choice& choice = nvtx_choice();
  std::string warning;
  {
    std::lock_guard<fork_guarded_mutex> lock(choice.mutex);
    if (!choice.created) {
      const char* program = choice.chosen_by_program ? choice.program_name : nullptr;
      std::string decided = program ? program : default_nvtx_domain;
      try {
        nvtx_domain_decision decision = decide_nvtx_domain(program, std::getenv("KSCOPE_NVTX_DOMAIN"));
        decided = std::move(decision.name);
        warning = std::move(decision.warning);
      } catch (...) {  // out of memory: the program's choice or the default, unexplained
      }
      const std::size_t n = decided.size() < max_nvtx_domain_name_bytes ? decided.size() : max_nvtx_domain_name_bytes;
      std::memcpy(choice.name_in_use, decided.data(), n);
      choice.name_in_use[n] = '\0';
      choice.created = true;
    }
    std::memcpy(name, choice.name_in_use, sizeof name);
  }
  if (!warning.empty()) nvtx_warn(warning);
}


// ---- the payload and its fallback -------------------------------------------------------

KSCOPE_DECL void fill_nvtx_payload(nvtx_scope_payload& out, double flops, double bytes, std::string_view tags) noexcept {
  out.flops = flops;
  out.bytes = bytes;
  constexpr std::size_t room = sizeof out.tags - 1;
  std::size_t n = tags.size();
  if (n > room) {
    n = room - 3;  // room for "..."
    // Back to the start of a UTF-8 character, so the cut never splits one.
    while (n > 0 && (static_cast<unsigned char>(tags[n]) & 0xC0) == 0x80) --n;
  }
  std::memcpy(out.tags, tags.data(), n);
  if (n < tags.size()) {
    std::memcpy(out.tags + n, "...", 3);
    n += 3;
  }
  std::memset(out.tags + n, 0, sizeof out.tags - n);
}

// printf's "%.6g" in the "C" locale, whatever the program's locale.
inline std::string nvtx_number(double value) {
#if KSCOPE_DETAIL_NVTX_TO_CHARS
  char text[32];
  const std::to_chars_result r = std::to_chars(text, text + sizeof text, value, std::chars_format::general, 6);
  return std::string(text, r.ec == std::errc() ? r.ptr : text);
#else
  return format_general(value, 6);
#endif
}

KSCOPE_DECL std::string nvtx_work_message(std::string_view name, double flops, double bytes, std::string_view tags) {
  std::string out(name);
  if (flops == flops) out += " flops=" + nvtx_number(flops);  // NaN: not declared
  if (bytes == bytes) out += " bytes=" + nvtx_number(bytes);
  if (!tags.empty()) {
    out += ' ';
    out += tags;
  }
  return out;
}

KSCOPE_DECL void nvtx_note_tag(nvtx_notes*& notes, std::string_view key, std::string_view value) noexcept {
  try {
    if (notes == nullptr) notes = new nvtx_notes();
    std::string& text = notes->tags;
    const std::size_t adds = (text.empty() ? 0 : 1) + key.size() + 1 + value.size();
    if (text.size() + adds > max_nvtx_tag_text_bytes) return;
    if (!text.empty()) text += ' ';
    text.append(key.data(), key.size()).append(1, '=').append(value.data(), value.size());
  } catch (...) {  // out of memory: the tool misses this tag, the report keeps it
  }
}

#if KSCOPE_HAS_NVTX
static_assert(std::is_same<nvtx_string, nvtxStringHandle_t>::value, "NVTX's string handle type changed");
static_assert(std::is_same<nvtx_range_id, nvtxRangeId_t>::value, "NVTX's range id type changed");
static_assert(std::is_same<nvtx_domain_handle, nvtxDomainHandle_t>::value, "NVTX's domain handle type changed");

// Every push and pop reads it: the flag and the handle are two independent loads, as with
// a function-local static's guard.
KSCOPE_DECL nvtx_domain_handle nvtx_domain() noexcept {
  static nvtxDomainHandle_t created = nullptr;  // written once, before `once` is done
  static fork_safe_once once{lock_rank::init_code_loading};
  if (KSCOPE_UNLIKELY(!once.done())) {
    once.call([] {
      char name[max_nvtx_domain_name_bytes + 1];
      freeze_nvtx_domain_name(name);
      created = nvtxDomainCreateA(name);
    });
  }
  return created;
}

inline nvtxEventAttributes_t nvtx_attributes() noexcept {
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  return attributes;
}

inline void set_nvtx_look(nvtxEventAttributes_t& attributes, std::uint32_t category, std::uint32_t argb) noexcept {
  attributes.category = category;
  if (argb != 0) {
    attributes.colorType = NVTX_COLOR_ARGB;
    attributes.color = argb;
  }
}

KSCOPE_DECL std::uint32_t nvtx_category_id(nvtx_domain_handle domain, const nvtx_category& category) noexcept {
  if (category.id == 0) return 0;
  if (category.id > max_nvtx_category_id) {
    static std::atomic<bool> said{false};  // one line per process, not one per range
    if (!said.exchange(true, std::memory_order_relaxed)) {
      try {
        nvtx_warn("NVTX category " + std::to_string(category.id) + " not used: ids go from 1 to " +
                  std::to_string(max_nvtx_category_id) + "; such ranges have no category");
      } catch (...) {
      }
    }
    return 0;
  }
  if (category.name != nullptr && domain != nullptr) {
    // One bit per id: named once, by whichever thread sets the bit.
    static std::atomic<std::uint64_t> named[(max_nvtx_category_id + 64) / 64] = {};
    std::atomic<std::uint64_t>& word = named[category.id / 64];
    const std::uint64_t bit = std::uint64_t{1} << (category.id % 64);
    if ((word.load(std::memory_order_relaxed) & bit) == 0 && (word.fetch_or(bit, std::memory_order_relaxed) & bit) == 0)
      nvtxDomainNameCategoryA(domain, category.id, category.name);
  }
  return category.id;
}

KSCOPE_DECL nvtx_string nvtx_register(const char* name) noexcept {
  return nvtxDomainRegisterStringA(nvtx_domain(), name);
}

KSCOPE_DECL bool nvtx_push(nvtx_string registered, const char* name) noexcept {
  nvtxDomainHandle_t domain = nvtx_domain();
  nvtxEventAttributes_t attributes = nvtx_attributes();
  if (KSCOPE_LIKELY(registered != nullptr) || domain == nullptr) {
    attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    attributes.message.registered = registered;
  } else {  // a tool that registers no strings still gets the name
    attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attributes.message.ascii = name;
  }
  nvtxDomainRangePushEx(domain, &attributes);
  return domain != nullptr;
}

KSCOPE_DECL bool nvtx_push(nvtx_string registered, const char* name, const nvtx_style& style) noexcept {
  nvtxDomainHandle_t domain = nvtx_domain();
  const std::uint32_t category = nvtx_category_id(domain, style.category);
  if (domain == nullptr) return false;  // no tool: the push would do nothing
  nvtxEventAttributes_t attributes = nvtx_attributes();
  if (registered != nullptr) {
    attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    attributes.message.registered = registered;
  } else {
    attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attributes.message.ascii = name;
  }
  set_nvtx_look(attributes, category, style.color.value);
  nvtxDomainRangePushEx(domain, &attributes);
  return true;
}

KSCOPE_DECL std::uint8_t nvtx_push_copy(std::string_view name, const nvtx_style* style, nvtx_notes*& notes) noexcept {
  nvtxDomainHandle_t domain = nvtx_domain();
  const std::uint32_t category = style ? nvtx_category_id(domain, style->category) : 0;
  if (domain == nullptr) return 0;  // no tool: no copy, no push, no pop
  try {
    notes = new nvtx_notes();
    notes->name.assign(name.data(), name.size());
  } catch (...) {
    delete notes;
    notes = nullptr;
    return 0;  // out of memory: this call has no range
  }
  nvtxEventAttributes_t attributes = nvtx_attributes();
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = notes->name.c_str();
  if (style) set_nvtx_look(attributes, category, style->color.value);
  nvtxDomainRangePushEx(domain, &attributes);
  return 2;
}

KSCOPE_DECL void nvtx_pop() noexcept { nvtxDomainRangePop(nvtx_domain()); }

KSCOPE_DECL std::uint64_t nvtx_payload_schema() noexcept {
#if KSCOPE_DETAIL_NVTX_PAYLOAD
  static std::uint64_t id = 0;  // written once, before `once` is done
  static fork_safe_once once{lock_rank::init_code_loading};
  if (KSCOPE_UNLIKELY(!once.done())) {
    // Taken first: the domain's own initialization has the same rank, and two never nest.
    nvtxDomainHandle_t domain = nvtx_domain();
    once.call([domain] {
      // The first payload call initializes the extension: NVTX asks the tool's library for
      // InitializeInjectionNvtxExtension; a tool without it leaves every slot empty and
      // the registration answers 0.
      static const nvtxPayloadSchemaEntry_t entries[] = {
          {0, NVTX_PAYLOAD_ENTRY_TYPE_DOUBLE, "flops", "operations declared with set_work (NaN: none)", 0,
           offsetof(nvtx_scope_payload, flops), nullptr, nullptr},
          {0, NVTX_PAYLOAD_ENTRY_TYPE_DOUBLE, "bytes", "bytes declared with set_work (NaN: none)", 0,
           offsetof(nvtx_scope_payload, bytes), nullptr, nullptr},
          {0, NVTX_PAYLOAD_ENTRY_TYPE_CSTRING_UTF8, "tags", "this call's tags, key=value", sizeof(nvtx_scope_payload::tags),
           offsetof(nvtx_scope_payload, tags), nullptr, nullptr},
      };
      nvtxPayloadSchemaAttr_t schema{};
      schema.fieldMask = NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NAME | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_TYPE |
                         NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_ENTRIES | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NUM_ENTRIES |
                         NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_STATIC_SIZE;
      schema.name = "kscope scope";
      schema.type = NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
      schema.entries = entries;
      schema.numEntries = sizeof entries / sizeof entries[0];
      schema.payloadStaticSize = sizeof(nvtx_scope_payload);
      id = nvtxPayloadSchemaRegister(domain, &schema);
    });
  }
  return id;
#else
  return 0;
#endif
}

KSCOPE_DECL void nvtx_mark_work(const char* name, std::uint32_t category, std::uint32_t argb, double flops, double bytes,
                                const nvtx_notes* notes) noexcept {
  const std::string_view tags = notes ? std::string_view(notes->tags) : std::string_view();
  if (flops != flops && bytes != bytes && tags.empty()) return;  // NaN: no work declared
  nvtxDomainHandle_t domain = nvtx_domain();
  if (domain == nullptr) return;
  nvtxEventAttributes_t attributes = nvtx_attributes();
  set_nvtx_look(attributes, category, argb);
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
#if KSCOPE_DETAIL_NVTX_PAYLOAD
  if (const std::uint64_t schema = nvtx_payload_schema()) {
    nvtx_scope_payload payload;
    fill_nvtx_payload(payload, flops, bytes, tags);
    const nvtxPayloadData_t data{schema, sizeof payload, &payload};
    attributes.payloadType = NVTX_PAYLOAD_TYPE_EXT;
    attributes.reserved0 = 1;  // the number of nvtxPayloadData_t at payload.ullValue
    attributes.payload.ullValue = NVTX_POINTER_AS_PAYLOAD_ULLVALUE(&data);
    attributes.message.ascii = name;
    nvtxDomainMarkEx(domain, &attributes);
    return;
  }
#endif
  try {
    const std::string message = nvtx_work_message(name, flops, bytes, tags);
    attributes.message.ascii = message.c_str();
    nvtxDomainMarkEx(domain, &attributes);
  } catch (...) {  // out of memory: no mark
  }
}

KSCOPE_DECL void nvtx_pop_seen(const char* name, std::uint32_t category, std::uint32_t argb, double flops, double bytes,
                               nvtx_notes* notes) noexcept {
  nvtx_mark_work(name ? name : "", category, argb, flops, bytes, notes);
  nvtxDomainRangePop(nvtx_domain());
  delete notes;
}

KSCOPE_DECL nvtx_range_id nvtx_start(std::string_view name, const nvtx_style& style, nvtx_notes*& notes) noexcept {
  nvtxDomainHandle_t domain = nvtx_domain();
  const std::uint32_t category = nvtx_category_id(domain, style.category);
  if (domain == nullptr) return 0;  // no tool: the start would do nothing
  try {
    notes = new nvtx_notes();
    notes->name.assign(name.data(), name.size());
  } catch (...) {
    delete notes;
    notes = nullptr;
    return 0;
  }
  nvtxEventAttributes_t attributes = nvtx_attributes();
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = notes->name.c_str();
  set_nvtx_look(attributes, category, style.color.value);
  return nvtxDomainRangeStartEx(domain, &attributes);
}

KSCOPE_DECL void nvtx_end_seen(nvtx_range_id id, std::uint32_t category, std::uint32_t argb, double flops, double bytes,
                               nvtx_notes* notes) noexcept {
  nvtx_mark_work(notes ? notes->name.c_str() : "", category, argb, flops, bytes, notes);
  nvtxDomainRangeEnd(nvtx_domain(), id);
  delete notes;
}
#endif  // KSCOPE_HAS_NVTX

#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

// ---- the public calls (scope/nvtx.hpp) --------------------------------------------------

#if KSCOPE_DETAIL_DEFINITIONS && !defined(KSCOPE_DISABLE)

KSCOPE_DECL bool set_nvtx_domain(std::string_view name) noexcept {
  detail::nvtx_domain_choice& choice = detail::nvtx_choice();
  std::string_view trimmed;
  const detail::nvtx_name_problem problem = detail::check_nvtx_domain_name(name, trimmed);
  std::string warning;
  bool used = false;
  try {
    std::lock_guard<detail::fork_guarded_mutex> lock(choice.mutex);
    if (problem != detail::nvtx_name_problem::none) {
      const std::string current =
          choice.created ? std::string(choice.name_in_use)
                         : detail::decide_nvtx_domain(choice.chosen_by_program ? choice.program_name : nullptr,
                                                      std::getenv("KSCOPE_NVTX_DOMAIN"))
                               .name;
      warning = "kscope::set_nvtx_domain(\"" + detail::shown_value(name) +
                "\") not used: " + detail::nvtx_name_problem_words(problem) + "; the NVTX domain stays \"" +
                detail::printable_name(current) + "\"";
    } else if (choice.created) {
      used = trimmed == choice.name_in_use;
      if (!used)
        warning = "kscope::set_nvtx_domain(\"" + detail::shown_value(trimmed) +
                  "\") came after the first NVTX range: ranges stay in the NVTX domain \"" +
                  detail::printable_name(choice.name_in_use) + "\"";
    } else {
      std::memcpy(choice.program_name, trimmed.data(), trimmed.size());
      choice.program_name[trimmed.size()] = '\0';
      choice.chosen_by_program = true;
      used = true;
    }
  } catch (...) {  // out of memory building the line: nothing changed, nothing said
    return false;
  }
  if (!warning.empty()) detail::nvtx_warn(warning);
  return used;
}

KSCOPE_DECL std::string nvtx_domain_name() {
  detail::nvtx_domain_choice& choice = detail::nvtx_choice();
  std::string program;
  {
    std::lock_guard<detail::fork_guarded_mutex> lock(choice.mutex);
    if (choice.created) return choice.name_in_use;
    if (choice.chosen_by_program) program = choice.program_name;
  }
  return detail::decide_nvtx_domain(program.empty() ? nullptr : program.c_str(), std::getenv("KSCOPE_NVTX_DOMAIN")).name;
}

#endif  // KSCOPE_DETAIL_DEFINITIONS && !KSCOPE_DISABLE

}  // namespace kscope

#if defined(KSCOPE_DETAIL_NVTX_PAYLOAD)
#  undef KSCOPE_DETAIL_NVTX_PAYLOAD
#endif
#if defined(KSCOPE_DETAIL_NVTX_TO_CHARS)
#  undef KSCOPE_DETAIL_NVTX_TO_CHARS
#endif
