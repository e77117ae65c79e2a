// kscope/warp_stalls/stalls.hpp — where warps wait: PC-sampling stall reasons per kernel and
// per scope, what each reason means, what to try, and the hottest instructions.
//
// Pure arithmetic and text, no CUDA: the samples come from CUPTI's PC sampling
// (warp_stalls/collect.hpp) or, in the tests, from synthetic records.
//
//   std::vector<kscope::warp_stall_profile> k = kscope::build_warp_stall_profiles(records);
//   kscope::warp_stall_finding d = kscope::dominant_stall(k[0]);
//   std::puts(d.text.c_str());
//   // "long scoreboard: 61% of 12,345 samples (7,531): warps wait for the result of ... ; try: ..."
//   std::fputs(kscope::format_warp_stalls(k[0]).c_str(), stdout);   // the table
//
// How the samples are counted (each rule tested in tests/warp_stalls_test.cpp):
// - Every few thousand cycles each SM records one warp: its PC and why it did not issue.
//   CUPTI names the reasons "smsp__pcsamp_warps_issue_stalled_<reason>" (Ampere, Hopper;
//   "smsp__pcsamp_warp_stall_<reason>" is accepted too). Each reason also has a
//   "<name>_not_issued" twin counting the subset of its samples taken in a cycle where the
//   warp's scheduler issued nothing at all; it is kept beside its reason (not_issued) and
//   never added to the totals, which would count those samples twice.
// - "selected" means the sampled warp issued an instruction: work, not a stall. It counts
//   in the total (so shares are of all samples, the time the warps spent), it is printed
//   as "selected (issued)", and it can never be the dominant stall. "not selected" (the warp
//   was ready but another one issued) is a stall reason, and a benign one: its advice says so.
// - An unknown name (a newer GPU or CUPTI) is kept under its own key with category
//   "other", a meaning that says kscope does not know it, and it still counts.
// - A share is samples / all samples of the profile, 0 when there are none: never NaN.
// - The dominant stall is the stall reason (not "selected") with the most samples; ties go
//   to the reason listed first in stall_reason_table(). Its text names the share, the
//   sample counts, the meaning and the advice.
// - Per scope: profiles add reason by reason and PC by PC (same function and offset).
// - Source lines: a looked-up PC carries file:line when kscope kept its module's cubin and
//   the kernel was built with -lineinfo; otherwise its line_status says which of those failed
//   ("no source line: module loaded before kscope saw it; ..."), and the printers say so.
#pragma once

#include "../evidence/metrics.hpp"
#include "../core/detail/json_writer.hpp"
#include "../core/detail/number_format.hpp"
#include "../core/detail/once.hpp"
#include "../core/detail/text_escape.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kscope {

// ---------------------------------------------------------------------------------------
// The stall-reason table

// What kind of wait a reason is, for grouping and for tests that ask "is it memory?".
enum class stall_category : std::uint8_t {
  issued,             // "selected": the warp issued (not a stall)
  memory,             // waits on or throttled by the memory system (L1TEX, MIO, LSU, constants)
  synchronization,    // barriers, fences, warpgroup arrives, sleeping
  execution,          // math pipes, fixed-latency dependencies, dispatch, not selected
  instruction_fetch,  // no instruction, branch resolving
  other,              // misc and reasons kscope does not know
};

[[nodiscard]] constexpr const char* to_string(stall_category c) noexcept {
  switch (c) {
    case stall_category::issued: return "issued";
    case stall_category::memory: return "memory";
    case stall_category::synchronization: return "synchronization";
    case stall_category::execution: return "execution";
    case stall_category::instruction_fetch: return "instruction fetch";
    case stall_category::other: return "other";
  }
  return "other";
}

// One stall reason: the key is CUPTI's name without its prefix and "_not_issued" suffix.
//   const kscope::stall_reason_info* r = kscope::find_stall_reason("barrier");
//   std::printf("%s: %s\n", r->label.data(), r->advice.data());
struct stall_reason_info {
  std::string_view key;       // "long_scoreboard"
  std::string_view label;     // "long scoreboard"
  stall_category category;
  std::string_view meaning;   // one line: what the warp waits for
  std::string_view advice;    // one line: what to try
};

// Every reason kscope describes, in the order tables list them when counts tie: the
// issued state, the memory waits, synchronization, execution, fetch, the rest.
[[nodiscard]] KSCOPE_DECL const std::vector<stall_reason_info>& stall_reason_table();

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const std::vector<stall_reason_info>& stall_reason_table() {
  // Kept by a lazy_global, not a function-local static, whose guard a fork could catch
  // held (core/detail/once.hpp). Built outside its lock: two first callers may both build
  // it, one copy is kept.
  static detail::lazy_global<const std::vector<stall_reason_info>> kept{detail::lock_rank::init};
  if (const std::vector<stall_reason_info>* built = kept.get_if_built()) return *built;
  using c = stall_category;
  std::vector<stall_reason_info> table = {
      {"selected", "selected (issued)", c::issued,
       "the warp issued an instruction in the sampled cycle: work, not a stall",
       "nothing to fix at the warp level; a large share means the schedulers are busy issuing, so only fewer "
       "instructions per result make it faster"},
      {"long_scoreboard", "long scoreboard", c::memory,
       "warps wait for the result of an L1TEX operation: a global, local, texture or surface memory access",
       "load less and coalesce what is loaded (reuse data from shared memory or registers, 128-bit loads), check "
       "for local-memory spills, and keep more loads in flight (independent loads per thread, more resident warps)"},
      {"lg_throttle", "LG throttle", c::memory,
       "the local/global memory instruction queue is full: the warps issue more global or local memory "
       "instructions than the load/store unit takes",
       "issue fewer, wider global accesses (float4, 128-bit), remove local-memory spills, and reuse loaded values "
       "instead of loading them again"},
      {"mio_throttle", "MIO throttle", c::memory,
       "the MIO instruction queue is full: too many shared-memory, special-function, shuffle or similar "
       "instructions in flight",
       "use fewer and wider shared-memory accesses, remove bank conflicts, and mix other instructions in between"},
      {"short_scoreboard", "short scoreboard", c::memory,
       "warps wait for the result of an MIO operation: a shared-memory access, a special-function (MUFU) math "
       "instruction, a shuffle",
       "remove shared-memory bank conflicts (padding, swizzling), use fewer special-function instructions, and "
       "put independent work between a shared-memory load and its use"},
      {"tex_throttle", "TEX throttle", c::memory,
       "the texture unit's instruction queue is full: texture or surface operations arrive faster than it "
       "drains them",
       "issue fewer texture or surface fetches per result: reuse fetched values and combine fetches"},
      {"imc_miss", "IMC miss", c::memory,
       "warps wait for the immediate constant cache: a __constant__ or kernel-parameter value that is not cached",
       "keep constant-memory reads uniform across the warp and the constant working set small; per-thread "
       "indices into a table belong in global memory"},
      {"drain", "drain", c::memory,
       "the warp has exited and waits for its outstanding memory writes to complete",
       "usually small; a large share means short warps that end with many stores: give each thread more work or "
       "write fewer, wider values"},
      {"barrier", "barrier", c::synchronization,
       "warps wait at a block barrier (__syncthreads, bar.sync) for the other warps of their block",
       "balance the work of the warps between barriers, drop barriers that are not needed, and keep slow "
       "divergent paths out of synchronized loops; smaller blocks wait for fewer warps"},
      {"membar", "memory barrier", c::synchronization,
       "warps wait for a memory fence (__threadfence, fence) to complete",
       "use fewer fences and the narrowest correct scope (block rather than device or system)"},
      {"warpgroup_arrive", "warpgroup arrive", c::synchronization,
       "warps wait at a warpgroup arrive (Hopper wgmma) for the other warps of their warpgroup",
       "keep the four warps of a warpgroup in step: balance the work each does before the arrive"},
      {"sleeping", "sleeping", c::synchronization,
       "all threads of the warp are blocked, yielded or sleeping (__nanosleep, a spin-wait)",
       "look at spin-waits and their back-off: a warp waiting on other blocks or on the host shows here"},
      {"math_pipe_throttle", "math pipe throttle", c::execution,
       "the math pipe the next instruction needs is busy with earlier instructions",
       "the kernel is bound by a math pipe: move work to a faster pipe (tensor cores, packed half2), spread it "
       "over different pipes, or execute fewer instructions"},
      {"wait", "wait", c::execution,
       "a fixed-latency dependency: the warp waits a fixed number of cycles for an earlier arithmetic result",
       "put independent instructions between dependent ones (unroll, several accumulators) or run more warps "
       "to hide the latency"},
      {"not_selected", "not selected", c::execution,
       "the warp was ready to issue, but the scheduler picked another ready warp",
       "not a latency problem: there are ready warps to spare; only fewer instructions per result help, and "
       "fewer warps per SM would not hurt"},
      {"dispatch_stall", "dispatch stall", c::execution,
       "the dispatcher could not send the selected instruction on (a pipeline or register-file conflict)",
       "rarely the main cause; when it is, look for very high register or pipe pressure in the hot loop"},
      {"no_instructions", "no instruction", c::instruction_fetch,
       "the warp waits for instructions: an instruction-cache miss, or a fetch after a jump",
       "shrink the hot code (less unrolling, fewer inlined paths); very short kernels show this at start-up"},
      {"branch_resolving", "branch resolving", c::instruction_fetch,
       "the warp waits for a branch target to be computed and its PC updated",
       "make branches uniform across the warp, or turn short branches into predicated or select instructions"},
      {"misc", "misc", c::other, "a miscellaneous hardware reason",
       "nothing specific: look at the instructions at the hottest PCs"},
  };
  return kept.get([&table] {
    auto* built = new std::vector<stall_reason_info>;
    *built = std::move(table);
    return built;
  });
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

namespace detail {

// Names that spell a reason of the table differently (the metric form drops the "s").
KSCOPE_DECL std::string_view stall_reason_alias(std::string_view key) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string_view stall_reason_alias(std::string_view key) noexcept {
  if (key == "no_instruction") return "no_instructions";
  return key;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

inline constexpr std::string_view unknown_stall_meaning =
    "a stall reason kscope's table does not describe (a newer GPU or CUPTI)";
inline constexpr std::string_view unknown_stall_advice =
    "look the name up in the profiling documentation of this GPU; the hottest PCs show where it happens";

}  // namespace detail

// The table entry for a key or a full CUPTI name, or nullptr when unknown.
[[nodiscard]] inline const stall_reason_info* find_stall_reason(std::string_view key_or_name);

// A CUPTI stall-reason name taken apart.
//   auto n = kscope::parse_stall_reason_name("smsp__pcsamp_warps_issue_stalled_barrier_not_issued");
//   // n.key == "barrier", n.not_issued == true, n.known_prefix == true
struct stall_reason_name {
  std::string key;            // the reason; the whole name when the prefix is unknown
  bool not_issued = false;    // the "_not_issued" twin (a subset of the reason's samples)
  bool known_prefix = false;  // one of CUPTI's PC-sampling prefixes was removed
};

[[nodiscard]] KSCOPE_DECL stall_reason_name parse_stall_reason_name(std::string_view name);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL stall_reason_name parse_stall_reason_name(std::string_view name) {
  static constexpr std::string_view prefixes[] = {
      "smsp__pcsamp_warps_issue_stalled_",  // Volta to Hopper
      "smsp__pcsamp_warp_stall_",           // also listed by libnvperf_host of CUDA 13
      "smsp__warps_issue_stalled_",         // the metric spelling, for hand-made input
  };
  static constexpr std::string_view suffix = "_not_issued";
  stall_reason_name out;
  for (std::string_view p : prefixes) {
    if (name.size() > p.size() && name.substr(0, p.size()) == p) {
      name.remove_prefix(p.size());
      out.known_prefix = true;
      break;
    }
  }
  if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix) {
    name.remove_suffix(suffix.size());
    out.not_issued = true;
  }
  out.key = std::string(detail::stall_reason_alias(name));
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

inline const stall_reason_info* find_stall_reason(std::string_view key_or_name) {
  const std::string key = parse_stall_reason_name(key_or_name).key;
  for (const stall_reason_info& r : stall_reason_table())
    if (r.key == key) return &r;
  return nullptr;
}

// The label of a key: the table's, or the key itself when unknown.
[[nodiscard]] KSCOPE_DECL std::string stall_reason_label(std::string_view key);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string stall_reason_label(std::string_view key) {
  const stall_reason_info* r = find_stall_reason(key);
  return r != nullptr ? std::string(r->label) : std::string(key);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

[[nodiscard]] KSCOPE_DECL stall_category stall_reason_category(std::string_view key);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL stall_category stall_reason_category(std::string_view key) {
  const stall_reason_info* r = find_stall_reason(key);
  return r != nullptr ? r->category : stall_category::other;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// ---------------------------------------------------------------------------------------
// Samples

// One sampled PC of one kernel launch as the collector reads it from CUPTI: the stall
// reasons under their full CUPTI names ("smsp__pcsamp_warps_issue_stalled_barrier").
//   kscope::pc_stall_record r{"gemm", 0x1a0, 7, {{"smsp__pcsamp_warps_issue_stalled_long_scoreboard", 42}}};
struct pc_stall_record {
  std::string function;             // the function the PC belongs to (demangled when known)
  std::uint64_t pc_offset = 0;      // bytes from the start of the function
  std::uint32_t correlation_id = 0; // the kernel launch (kernel-serialized sampling); 0 when unknown
  std::vector<std::pair<std::string, std::uint64_t>> stalls;
  std::string symbol{};             // the function's name in its cubin (mangled), for source lines
  std::uint64_t cubin_crc = 0;      // CUPTI's CRC of the module's cubin; 0 when unknown
  // (Both with initializers: aggregate initialization that stops at `stalls` stays warning-free.)
};

// The samples of one reason: all of them, and the subset taken while the scheduler issued
// nothing (the "_not_issued" twin).
struct reason_samples {
  std::uint64_t samples = 0;
  std::uint64_t not_issued = 0;
};

using stall_counts = std::map<std::string, reason_samples, std::less<>>;

namespace detail {

KSCOPE_DECL std::uint64_t sum_samples(const stall_counts& counts) noexcept;

// Position in the table (ties), unknown reasons after every known one.
KSCOPE_DECL std::size_t stall_rank(std::string_view key);

// Whether reason a is listed before b: more samples first, then the table's order, then the name.
KSCOPE_DECL bool stall_before(const std::pair<std::string, reason_samples>& a,
                         const std::pair<std::string, reason_samples>& b);

KSCOPE_DECL void add_counts(stall_counts& into, const stall_counts& from);

KSCOPE_DECL void add_cupti_sample(stall_counts& into, std::string_view cupti_name, std::uint64_t samples);

// 12345 -> "12,345": sample counts are read by people.
KSCOPE_DECL std::string count_text(std::uint64_t n);

KSCOPE_DECL double share_of(std::uint64_t part, std::uint64_t whole) noexcept;

KSCOPE_DECL std::string hex_offset(std::uint64_t v);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::uint64_t sum_samples(const stall_counts& counts) noexcept {
  std::uint64_t n = 0;
  for (const auto& [key, c] : counts) n += c.samples;
  return n;
}

KSCOPE_DECL std::size_t stall_rank(std::string_view key) {
  const auto& t = stall_reason_table();
  for (std::size_t i = 0; i < t.size(); ++i)
    if (t[i].key == key) return i;
  return t.size();
}

KSCOPE_DECL bool stall_before(const std::pair<std::string, reason_samples>& a,
                         const std::pair<std::string, reason_samples>& b) {
  if (a.second.samples != b.second.samples) return a.second.samples > b.second.samples;
  const std::size_t ra = stall_rank(a.first), rb = stall_rank(b.first);
  if (ra != rb) return ra < rb;
  return a.first < b.first;
}

KSCOPE_DECL void add_counts(stall_counts& into, const stall_counts& from) {
  for (const auto& [key, c] : from) {
    reason_samples& r = into[key];
    r.samples += c.samples;
    r.not_issued += c.not_issued;
  }
}

KSCOPE_DECL void add_cupti_sample(stall_counts& into, std::string_view cupti_name, std::uint64_t samples) {
  const stall_reason_name n = parse_stall_reason_name(cupti_name);
  reason_samples& r = into[n.key];
  (n.not_issued ? r.not_issued : r.samples) += samples;
}

KSCOPE_DECL std::string count_text(std::uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  const std::size_t first = digits.size() % 3 == 0 ? 3 : digits.size() % 3;
  out.append(digits, 0, first);
  for (std::size_t i = first; i < digits.size(); i += 3) {
    out += ',';
    out.append(digits, i, 3);
  }
  return out;
}

KSCOPE_DECL double share_of(std::uint64_t part, std::uint64_t whole) noexcept {
  return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

KSCOPE_DECL std::string hex_offset(std::uint64_t v) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  do {
    out.insert(out.begin(), digits[v & 0xF]);
    v >>= 4;
  } while (v != 0);
  return "0x" + out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

// Whether a PC's source line was found, and if not, why. When copies of one PC merge, a
// line beats a reason and a reason beats not_looked_up (warp_stall_pc::adopt_source_line).
enum class source_line_status : std::uint8_t {
  not_looked_up,       // not asked for: beyond warp_stall_options::source_line_pcs, or made-up records
  resolved,            // file and line
  no_line_info,        // its cubin has no line table: the kernel was not built with -lineinfo
  no_line_for_pc,      // its cubin has a line table, without a line for this instruction
  module_not_seen,     // its module was loaded while kscope watched no module loads (before it started)
  module_not_watched,  // kscope could not watch module loads during the pass (CUPTI's one subscriber taken)
  module_dropped,      // seen, but its cubin was not kept: kscope's cubin store was over its budget
  lookup_failed,       // CUPTI could not map the PC (cuptiGetSassToSourceCorrelation failed)
  unavailable,         // this libcupti cannot map PCs, the record has no cubin CRC, or the store is off
};

// The JSON key of a status ("no_lineinfo", "module_not_seen", ...).
[[nodiscard]] constexpr const char* to_string(source_line_status s) noexcept {
  switch (s) {
    case source_line_status::not_looked_up: return "not_looked_up";
    case source_line_status::resolved: return "resolved";
    case source_line_status::no_line_info: return "no_lineinfo";
    case source_line_status::no_line_for_pc: return "no_line_for_pc";
    case source_line_status::module_not_seen: return "module_not_seen";
    case source_line_status::module_not_watched: return "module_not_watched";
    case source_line_status::module_dropped: return "module_dropped";
    case source_line_status::lookup_failed: return "lookup_failed";
    case source_line_status::unavailable: return "unavailable";
  }
  return "unavailable";
}

// Why a PC has no source line, in words, with what to do; "" for resolved and not_looked_up.
//   kscope::source_line_reason(kscope::source_line_status::no_line_info)
//   // "no source line: kernel not built with -lineinfo (add nvcc -lineinfo)"
[[nodiscard]] KSCOPE_DECL std::string_view source_line_reason(source_line_status s) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string_view source_line_reason(source_line_status s) noexcept {
  switch (s) {
    case source_line_status::not_looked_up:
    case source_line_status::resolved: return {};
    case source_line_status::no_line_info: return "no source line: kernel not built with -lineinfo (add nvcc -lineinfo)";
    case source_line_status::no_line_for_pc:
      return "no source line: the module's line table has none for this instruction";
    case source_line_status::module_not_seen:
      return "no source line: module loaded before kscope saw it; start the collector first, or launch the kernel "
             "first inside profile_warp_stalls";
    case source_line_status::module_not_watched:
      return "no source line: kscope could not watch module loads (another tool holds CUPTI's callback subscriber)";
    case source_line_status::module_dropped:
      return "no source line: module cubin dropped, kscope's cubin store over budget "
             "(kscope::set_cubin_store_budget_bytes)";
    case source_line_status::lookup_failed:
      return "no source line: CUPTI could not map this PC (cuptiGetSassToSourceCorrelation failed)";
    case source_line_status::unavailable: return "no source line: this libcupti cannot map PCs to lines";
  }
  return {};
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// One instruction: where it is, its samples per reason and, when known, its source line.
struct warp_stall_pc {
  std::string function;
  std::uint64_t pc_offset = 0;
  stall_counts reasons;
  std::string file;        // source file (the path the compiler saw), "" when not resolved
  std::uint32_t line = 0;  // 0 when not resolved
  source_line_status line_status = source_line_status::not_looked_up;
  std::string symbol{};          // the function's name in its cubin (mangled); "" when unknown
  std::uint64_t cubin_crc = 0;   // CUPTI's CRC of its module's cubin; 0 when unknown

  [[nodiscard]] std::uint64_t samples() const noexcept;

  // The reason with the most samples at this PC ("" when none), "selected" included: at a
  // PC that mostly issues, that is the honest answer.
  [[nodiscard]] std::string top_reason() const;

  // "gemm+0x1a0"
  [[nodiscard]] std::string where() const;

  // "kernels.cu:42" when the line is known, else "".
  [[nodiscard]] std::string source() const;

  // Takes the source line of another copy of this PC when it knows more (merges, lookups).
  void adopt_source_line(const warp_stall_pc& other);
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::uint64_t warp_stall_pc::samples() const noexcept { return detail::sum_samples(reasons); }

KSCOPE_DECL std::string warp_stall_pc::where() const { return function + "+" + detail::hex_offset(pc_offset); }
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string warp_stall_pc::top_reason() const {
  std::pair<std::string, reason_samples> best;
  for (const auto& [key, c] : reasons) {
    if (c.samples == 0) continue;
    std::pair<std::string, reason_samples> candidate{key, c};
    if (best.second.samples == 0 || detail::stall_before(candidate, best)) best = std::move(candidate);
  }
  return best.first;
}

KSCOPE_DECL std::string warp_stall_pc::source() const { return file.empty() ? std::string() : file + ":" + std::to_string(line); }

KSCOPE_DECL void warp_stall_pc::adopt_source_line(const warp_stall_pc& other) {
  if (symbol.empty()) symbol = other.symbol;
  if (cubin_crc == 0) cubin_crc = other.cubin_crc;
  if (line_status == source_line_status::resolved || other.line_status == source_line_status::not_looked_up) return;
  if (line_status != source_line_status::not_looked_up && other.line_status != source_line_status::resolved) return;
  file = other.file;
  line = other.line;
  line_status = other.line_status;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The stall breakdown of one kernel launch, one kernel function, or one scope.
//   auto rows = profile.breakdown();                  // largest first
//   auto hot = profile.hottest_pcs(5);
struct warp_stall_profile {
  std::string name;            // kernel (demangled) or scope name
  std::uint64_t launches = 0;  // kernel launches in it; 0 when not known (continuous sampling)
  stall_counts reasons;        // by key
  std::vector<warp_stall_pc> pcs;

  // All samples, "selected" included: the denominator of every share.
  [[nodiscard]] std::uint64_t total_samples() const noexcept;
  [[nodiscard]] std::uint64_t issued_samples() const noexcept;
  [[nodiscard]] std::uint64_t stall_samples() const noexcept;
  [[nodiscard]] std::uint64_t samples_of(std::string_view key) const noexcept;
  // samples_of(key) / total_samples(), 0 when there are no samples.
  [[nodiscard]] double share_of(std::string_view key) const noexcept;

  // Reasons with samples, largest first (ties: table order).
  [[nodiscard]] std::vector<std::pair<std::string, reason_samples>> breakdown() const;

  // The n PCs with the most samples (ties: function, then offset).
  [[nodiscard]] std::vector<warp_stall_pc> hottest_pcs(std::size_t n) const;

  // Adds another profile's samples (same kernel again, or another kernel of a scope):
  // reasons add, PCs with the same function and offset add, launches add.
  void merge(const warp_stall_profile& other);

  // Adds the samples of one PC (to an existing entry when function and offset match).
  void add_pc(const warp_stall_pc& p);
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::uint64_t warp_stall_profile::total_samples() const noexcept { return detail::sum_samples(reasons); }

KSCOPE_DECL std::uint64_t warp_stall_profile::stall_samples() const noexcept { return total_samples() - issued_samples(); }

KSCOPE_DECL double warp_stall_profile::share_of(std::string_view key) const noexcept {
  return detail::share_of(samples_of(key), total_samples());
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::uint64_t warp_stall_profile::issued_samples() const noexcept {
  const auto it = reasons.find(std::string_view("selected"));
  return it == reasons.end() ? 0 : it->second.samples;
}

KSCOPE_DECL std::uint64_t warp_stall_profile::samples_of(std::string_view key) const noexcept {
  const auto it = reasons.find(key);
  return it == reasons.end() ? 0 : it->second.samples;
}

KSCOPE_DECL std::vector<std::pair<std::string, reason_samples>> warp_stall_profile::breakdown() const {
  std::vector<std::pair<std::string, reason_samples>> rows;
  for (const auto& [key, c] : reasons)
    if (c.samples > 0 || c.not_issued > 0) rows.emplace_back(key, c);
  std::stable_sort(rows.begin(), rows.end(), detail::stall_before);
  return rows;
}

KSCOPE_DECL std::vector<warp_stall_pc> warp_stall_profile::hottest_pcs(std::size_t n) const {
  std::vector<const warp_stall_pc*> order;
  for (const warp_stall_pc& p : pcs) order.push_back(&p);
  std::stable_sort(order.begin(), order.end(), [](const warp_stall_pc* a, const warp_stall_pc* b) {
    const std::uint64_t sa = a->samples(), sb = b->samples();
    if (sa != sb) return sa > sb;
    if (a->function != b->function) return a->function < b->function;
    return a->pc_offset < b->pc_offset;
  });
  std::vector<warp_stall_pc> out;
  for (std::size_t i = 0; i < order.size() && i < n; ++i) out.push_back(*order[i]);
  return out;
}

KSCOPE_DECL void warp_stall_profile::merge(const warp_stall_profile& other) {
  launches += other.launches;
  detail::add_counts(reasons, other.reasons);
  for (const warp_stall_pc& p : other.pcs) add_pc(p);
}

KSCOPE_DECL void warp_stall_profile::add_pc(const warp_stall_pc& p) {
  for (warp_stall_pc& mine : pcs) {
    if (mine.pc_offset == p.pc_offset && mine.function == p.function) {
      detail::add_counts(mine.reasons, p.reasons);
      if (mine.file.empty() && !p.file.empty()) {
        mine.file = p.file;
        mine.line = p.line;
      }
      mine.adopt_source_line(p);
      return;
    }
  }
  pcs.push_back(p);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Profiles from raw records: one per kernel launch (records with a correlation id, in
// launch order), then one per function for records without one (continuous sampling,
// launches = 0). A launch is named after the function with most samples among its
// records (its kernel; a non-inlined device function it calls has its own PCs).
[[nodiscard]] KSCOPE_DECL std::vector<warp_stall_profile> build_warp_stall_profiles(
    const std::vector<pc_stall_record>& records);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::vector<warp_stall_profile> build_warp_stall_profiles(const std::vector<pc_stall_record>& records) {
  std::map<std::uint32_t, warp_stall_profile> launches;       // ordered: launch order
  std::vector<warp_stall_profile> by_function;                // first-seen order
  std::map<std::uint32_t, std::map<std::string, std::uint64_t>> launch_functions;
  for (const pc_stall_record& r : records) {
    warp_stall_pc pc;
    pc.function = r.function;
    pc.pc_offset = r.pc_offset;
    pc.symbol = r.symbol;
    pc.cubin_crc = r.cubin_crc;
    for (const auto& [name, samples] : r.stalls) detail::add_cupti_sample(pc.reasons, name, samples);
    warp_stall_profile* into = nullptr;
    if (r.correlation_id != 0) {
      into = &launches[r.correlation_id];
      into->launches = 1;
      launch_functions[r.correlation_id][r.function] += pc.samples();
    } else {
      for (warp_stall_profile& p : by_function)
        if (p.name == r.function) into = &p;
      if (into == nullptr) {
        by_function.emplace_back();
        into = &by_function.back();
        into->name = r.function;
      }
    }
    detail::add_counts(into->reasons, pc.reasons);
    into->add_pc(pc);
  }
  std::vector<warp_stall_profile> out;
  for (auto& [id, profile] : launches) {
    const auto& functions = launch_functions[id];
    const std::pair<const std::string, std::uint64_t>* best = nullptr;
    for (const auto& f : functions)
      if (best == nullptr || f.second > best->second) best = &f;
    profile.name = best != nullptr ? best->first : std::string();
    out.push_back(std::move(profile));
  }
  for (warp_stall_profile& p : by_function) out.push_back(std::move(p));
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// What a lookup of one PC's source line answered.
struct source_line {
  source_line_status status = source_line_status::not_looked_up;
  std::string file;
  std::uint32_t line = 0;
};

// Gives the `per_profile` hottest PCs of each profile a source line. `lookup(pc)` returns a
// source_line; it is asked once per distinct PC (module, function, offset) and at most
// `max_lookups` times in all (a lookup parses the module's line table: the bound keeps a
// pass with many kernels quick). Every copy of a looked-up PC in the profiles gets the
// answer, so a kernel's table and its scope's agree. Returns the number of lookups.
//   kscope::resolve_source_lines({&k, &total}, 10, 1000, [](const kscope::warp_stall_pc& pc) { ... });
template <class Lookup>
std::size_t resolve_source_lines(const std::vector<warp_stall_profile*>& profiles, std::size_t per_profile,
                                 std::size_t max_lookups, Lookup&& lookup) {
  using key = std::pair<std::pair<std::uint64_t, std::uint64_t>, std::string>;  // (crc, offset), function
  std::map<key, source_line> answers;
  std::size_t lookups = 0;
  for (warp_stall_profile* p : profiles) {
    if (p == nullptr) continue;
    for (const warp_stall_pc& pc : p->hottest_pcs(per_profile)) {
      key k{{pc.cubin_crc, pc.pc_offset}, pc.function};
      if (answers.count(k) != 0 || lookups >= max_lookups) continue;
      ++lookups;
      answers.emplace(std::move(k), lookup(pc));
    }
  }
  for (warp_stall_profile* p : profiles) {
    if (p == nullptr) continue;
    for (warp_stall_pc& pc : p->pcs) {
      const auto it = answers.find(key{{pc.cubin_crc, pc.pc_offset}, pc.function});
      if (it == answers.end() || it->second.status == source_line_status::not_looked_up) continue;
      warp_stall_pc answer;
      answer.file = it->second.status == source_line_status::resolved ? it->second.file : std::string();
      answer.line = it->second.status == source_line_status::resolved ? it->second.line : 0;
      answer.line_status = it->second.status;
      pc.adopt_source_line(answer);
    }
  }
  return lookups;
}

// One line for a result's notes: how many looked-up PCs of `p` have a line, and why the
// others have none ("" when none was looked up).
//   "source lines: 3 of 5 looked-up PCs resolved; 2 without: module loaded before kscope saw it; ..."
[[nodiscard]] KSCOPE_DECL std::string source_line_note(const warp_stall_profile& p);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string source_line_note(const warp_stall_profile& p) {
  std::map<source_line_status, std::size_t> by_status;
  std::size_t looked_up = 0;
  for (const warp_stall_pc& pc : p.pcs) {
    if (pc.line_status == source_line_status::not_looked_up) continue;
    ++looked_up;
    ++by_status[pc.line_status];
  }
  if (looked_up == 0) return {};
  const std::size_t resolved = by_status[source_line_status::resolved];
  std::string out = "source lines: " + std::to_string(resolved) + " of " + std::to_string(looked_up) +
                    " looked-up PCs resolved";
  constexpr std::string_view prefix = "no source line: ";
  for (const auto& [status, n] : by_status) {
    if (status == source_line_status::resolved || n == 0) continue;
    std::string_view why = source_line_reason(status);
    if (why.substr(0, prefix.size()) == prefix) why.remove_prefix(prefix.size());
    out += "; " + std::to_string(n) + " without: " + std::string(why);
  }
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Launches of the same kernel function merged into one profile each (first-seen order).
[[nodiscard]] KSCOPE_DECL std::vector<warp_stall_profile> merge_by_kernel(const std::vector<warp_stall_profile>& profiles);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::vector<warp_stall_profile> merge_by_kernel(const std::vector<warp_stall_profile>& profiles) {
  std::vector<warp_stall_profile> out;
  for (const warp_stall_profile& p : profiles) {
    warp_stall_profile* into = nullptr;
    for (warp_stall_profile& q : out)
      if (q.name == p.name) into = &q;
    if (into == nullptr) {
      out.emplace_back();
      into = &out.back();
      into->name = p.name;
    }
    into->merge(p);
  }
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// One scope's profile: all the given kernels together, named after the scope.
//   auto decode = kscope::aggregate_warp_stalls("decode", kernels_launched_in_decode);
[[nodiscard]] KSCOPE_DECL warp_stall_profile aggregate_warp_stalls(std::string_view scope,
                                                              const std::vector<warp_stall_profile>& kernels);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL warp_stall_profile aggregate_warp_stalls(std::string_view scope,
                                                              const std::vector<warp_stall_profile>& kernels) {
  warp_stall_profile out;
  out.name = std::string(scope);
  for (const warp_stall_profile& k : kernels) out.merge(k);
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// A kernel profile and the scope (a caller-chosen name or id) it belongs to.
struct scoped_warp_stalls {
  std::string scope;
  warp_stall_profile kernel;
};

// One profile per scope, in first-seen order.
[[nodiscard]] KSCOPE_DECL std::vector<warp_stall_profile> aggregate_warp_stalls_by_scope(
    const std::vector<scoped_warp_stalls>& kernels);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::vector<warp_stall_profile> aggregate_warp_stalls_by_scope(const std::vector<scoped_warp_stalls>& kernels) {
  std::vector<warp_stall_profile> out;
  for (const scoped_warp_stalls& k : kernels) {
    warp_stall_profile* into = nullptr;
    for (warp_stall_profile& q : out)
      if (q.name == k.scope) into = &q;
    if (into == nullptr) {
      out.emplace_back();
      into = &out.back();
      into->name = k.scope;
    }
    into->merge(k.kernel);
  }
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The stall shares classify() (evidence/metrics.hpp) takes as evidence: every stall reason,
// "selected" left out, as a share of all samples.
[[nodiscard]] KSCOPE_DECL std::vector<stall_share> to_stall_shares(const warp_stall_profile& p);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::vector<stall_share> to_stall_shares(const warp_stall_profile& p) {
  std::vector<stall_share> out;
  for (const auto& [key, c] : p.breakdown())
    if (key != "selected" && c.samples > 0) {
      const stall_reason_info* info = find_stall_reason(key);
      out.emplace_back(key, p.share_of(key), info != nullptr ? std::string(info->meaning) : std::string());
    }
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// ---------------------------------------------------------------------------------------
// Findings

// One stall reason with the numbers behind it and what to do.
struct warp_stall_finding {
  bool found = false;
  std::string reason;                        // key: "long_scoreboard"
  std::string label;                         // "long scoreboard"
  stall_category category = stall_category::other;
  std::uint64_t samples = 0;                 // of this reason
  std::uint64_t not_issued = 0;              // of those, taken while the scheduler issued nothing
  std::uint64_t total_samples = 0;           // of the profile, "selected" included
  double percent = 0;                        // 100 * samples / total_samples; 0 when no samples
  std::string text;                          // one line: numbers, meaning, advice
};

namespace detail {

KSCOPE_DECL warp_stall_finding stall_finding(const warp_stall_profile& p, const std::string& key, const reason_samples& c);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL warp_stall_finding stall_finding(const warp_stall_profile& p, const std::string& key, const reason_samples& c) {
  warp_stall_finding f;
  f.found = true;
  f.reason = key;
  f.label = stall_reason_label(key);
  f.category = stall_reason_category(key);
  f.samples = c.samples;
  f.not_issued = c.not_issued;
  f.total_samples = p.total_samples();
  f.percent = 100.0 * share_of(c.samples, f.total_samples);
  const stall_reason_info* info = find_stall_reason(key);
  const std::string_view meaning = info != nullptr ? info->meaning : unknown_stall_meaning;
  const std::string_view advice = info != nullptr ? info->advice : unknown_stall_advice;
  f.text = f.label + ": " + pct_text(f.percent) + " of " + count_text(f.total_samples) + " samples (" +
           count_text(f.samples) + "): " + std::string(meaning) + "; try: " + std::string(advice);
  return f;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

// The stall reason with the most samples ("selected" is not a stall), or found == false
// with a text that says why there is none.
//   auto d = kscope::dominant_stall(profile);
//   if (d.found && d.reason == "barrier") ...
[[nodiscard]] KSCOPE_DECL warp_stall_finding dominant_stall(const warp_stall_profile& p);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL warp_stall_finding dominant_stall(const warp_stall_profile& p) {
  for (const auto& [key, c] : p.breakdown()) {
    if (key == "selected" || c.samples == 0) continue;
    return detail::stall_finding(p, key, c);  // breakdown() is sorted: the first stall wins
  }
  warp_stall_finding none;
  none.total_samples = p.total_samples();
  none.text = none.total_samples == 0
                  ? "no warp samples: nothing to conclude (no kernel ran while sampling, or it was shorter than the "
                    "sampling period)"
                  : "every one of " + detail::count_text(none.total_samples) +
                        " samples found its warp issuing: no stall to explain";
  return none;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Every stall reason with at least min_percent of the samples, largest first.
[[nodiscard]] KSCOPE_DECL std::vector<warp_stall_finding> stall_findings(const warp_stall_profile& p,
                                                                    double min_percent = 5.0);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::vector<warp_stall_finding> stall_findings(const warp_stall_profile& p,
                                                                    double min_percent) {
  std::vector<warp_stall_finding> out;
  for (const auto& [key, c] : p.breakdown()) {
    if (key == "selected" || c.samples == 0) continue;
    warp_stall_finding f = detail::stall_finding(p, key, c);
    if (f.percent >= min_percent) out.push_back(std::move(f));
  }
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// ---------------------------------------------------------------------------------------
// Printers

// What the table shows.
//   kscope::warp_stall_print_options o;
//   o.prefix = "WARPSTALL ";   // every line starts with it (grep-able logs)
struct warp_stall_print_options {
  std::string prefix;
  std::size_t top_pcs = 5;       // hottest PCs listed; 0: none
  bool meanings = true;          // one line of meaning per reason row
  double advice_min_percent = 5; // advice lines for reasons at or above this share
};

// The table of one profile: header, one row per reason (samples, share, not-issued,
// meaning), the dominant stall, advice for each large reason, the hottest PCs.
[[nodiscard]] KSCOPE_DECL std::string format_warp_stalls(const warp_stall_profile& p,
                                                    const warp_stall_print_options& o = {});

// One profile as a JSON object (reasons largest first, the dominant stall or null, the
// hottest PCs). Shares are 0..1 of all samples and never NaN.
KSCOPE_DECL void write_warp_stalls_json(detail::json_writer& w, const warp_stall_profile& p, std::size_t top_pcs = 10);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string format_warp_stalls(const warp_stall_profile& p,
                                                    const warp_stall_print_options& o) {
  std::string out;
  const auto line = [&out, &o](const std::string& text) {
    out += o.prefix;
    out += text;
    out += '\n';
  };
  const auto pad = [](std::string s, std::size_t width, bool right) {
    if (s.size() >= width) return s;
    return right ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
  };
  const std::uint64_t total = p.total_samples();
  line("warp stalls: " + detail::printable_name(p.name) + ": " + detail::count_text(total) + " samples, " +
       detail::count_text(p.issued_samples()) + " issued" +
       (p.launches > 0 ? ", " + detail::count_text(p.launches) + (p.launches == 1 ? " launch" : " launches") : ""));
  if (total == 0) {
    line("  " + dominant_stall(p).text);
    return out;
  }
  line("  " + pad("reason", 20, false) + pad("samples", 12, true) + pad("share", 8, true) +
       pad("not issued", 12, true) + "  " + (o.meanings ? "meaning" : ""));
  for (const auto& [key, c] : p.breakdown()) {
    const stall_reason_info* info = find_stall_reason(key);
    std::string meaning;
    if (o.meanings && key == "selected") meaning = "not a stall";
    else if (o.meanings) meaning = std::string(info != nullptr ? info->meaning : detail::unknown_stall_meaning);
    const std::string share = detail::pct_text(100.0 * detail::share_of(c.samples, total));
    line("  " + pad(detail::printable_name(stall_reason_label(key)), 20, false) +
         pad(detail::count_text(c.samples), 12, true) + pad(share, 8, true) +
         pad(key == "selected" ? "-" : detail::count_text(c.not_issued), 12, true) + "  " + meaning);
  }
  const warp_stall_finding d = dominant_stall(p);
  line("  dominant stall: " + detail::printable_text(d.text));
  for (const warp_stall_finding& f : stall_findings(p, o.advice_min_percent))
    if (f.reason != d.reason) line("  also: " + detail::printable_text(f.text));
  if (o.top_pcs > 0) {
    const std::vector<warp_stall_pc> hot = p.hottest_pcs(o.top_pcs);
    if (!hot.empty()) line("  hottest PCs:");
    for (const warp_stall_pc& pc : hot) {
      const std::uint64_t n = pc.samples();
      std::string text = "    " + detail::printable_name(pc.where());
      if (const std::string source = pc.source(); !source.empty()) text += " (" + detail::printable_name(source) + ")";
      text += "  " + detail::count_text(n) + " samples (" + detail::pct_text(100.0 * detail::share_of(n, total)) + ")";
      const std::string top = pc.top_reason();
      if (!top.empty()) text += ", mostly " + detail::printable_name(stall_reason_label(top));
      if (const std::string_view why = source_line_reason(pc.line_status); !why.empty()) text += "; " + std::string(why);
      line(text);
    }
  }
  return out;
}

KSCOPE_DECL void write_warp_stalls_json(detail::json_writer& w, const warp_stall_profile& p, std::size_t top_pcs) {
  const std::uint64_t total = p.total_samples();
  w.begin_object();
  w.member("name", p.name);
  w.member("launches", static_cast<unsigned long long>(p.launches));
  w.member("total_samples", static_cast<unsigned long long>(total));
  w.member("issued_samples", static_cast<unsigned long long>(p.issued_samples()));
  w.member("stall_samples", static_cast<unsigned long long>(p.stall_samples()));
  w.key("reasons").begin_array();
  for (const auto& [key, c] : p.breakdown()) {
    w.begin_object();
    w.member("reason", key);
    w.member("label", stall_reason_label(key));
    w.member("category", to_string(stall_reason_category(key)));
    w.member("known", find_stall_reason(key) != nullptr);
    w.member("samples", static_cast<unsigned long long>(c.samples));
    w.member("not_issued_samples", static_cast<unsigned long long>(c.not_issued));
    w.member("share", detail::share_of(c.samples, total));
    w.end_object();
  }
  w.end_array();
  const warp_stall_finding d = dominant_stall(p);
  w.key("dominant");
  if (d.found) {
    w.begin_object();
    w.member("reason", d.reason);
    w.member("samples", static_cast<unsigned long long>(d.samples));
    w.member("share", d.percent / 100.0);
    w.member("text", d.text);
    w.end_object();
  } else {
    w.value(nullptr);
  }
  w.key("hottest_pcs").begin_array();
  for (const warp_stall_pc& pc : p.hottest_pcs(top_pcs)) {
    w.begin_object();
    w.member("function", pc.function);
    w.member("pc_offset", static_cast<unsigned long long>(pc.pc_offset));
    w.member("samples", static_cast<unsigned long long>(pc.samples()));
    w.member("top_reason", pc.top_reason());
    w.member("file", pc.file);
    w.member("line", static_cast<unsigned long long>(pc.line));
    w.member("source", pc.source());                    // "file:line", "" when not known
    w.member("line_status", to_string(pc.line_status));  // why not, as a key
    w.member("line_note", std::string(source_line_reason(pc.line_status)));
    w.end_object();
  }
  w.end_array();
  w.end_object();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

namespace detail {

// Text for a Markdown table cell: printable, '|' escaped; `code` puts it in a code span
// (kernel names hold <, >, * that Markdown would read).
KSCOPE_DECL std::string warp_stall_markdown_cell(std::string_view text, bool code);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string warp_stall_markdown_cell(std::string_view text, bool code) {
  std::string out = markdown_table_cell(text);
  if (!code) return out;
  const std::string fence = out.find('`') != std::string::npos ? "``" : "`";
  return fence + (fence.size() > 1 ? " " + out + " " : out) + fence;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

// The same as format_warp_stalls, as Markdown: a heading line, the reason table, the
// dominant stall, and the hottest PCs with their source line (or why there is none).
//   std::string md = kscope::format_warp_stalls_markdown(r.kernels[0]);
[[nodiscard]] KSCOPE_DECL std::string format_warp_stalls_markdown(const warp_stall_profile& p,
                                                             const warp_stall_print_options& o = {});

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string format_warp_stalls_markdown(const warp_stall_profile& p,
                                                             const warp_stall_print_options& o) {
  using detail::warp_stall_markdown_cell;
  const std::uint64_t total = p.total_samples();
  std::string out = "**warp stalls: " + warp_stall_markdown_cell(p.name, true) + "**: " + detail::count_text(total) +
                    " samples, " + detail::count_text(p.issued_samples()) + " issued" +
                    (p.launches > 0 ? ", " + detail::count_text(p.launches) + (p.launches == 1 ? " launch" : " launches")
                                    : "") +
                    "\n\n";
  if (total == 0) return out + warp_stall_markdown_cell(dominant_stall(p).text, false) + "\n";
  out += "| reason | samples | share | not issued |\n|---|--:|--:|--:|\n";
  for (const auto& [key, c] : p.breakdown())
    out += "| " + warp_stall_markdown_cell(stall_reason_label(key), false) + " | " + detail::count_text(c.samples) +
           " | " + detail::pct_text(100.0 * detail::share_of(c.samples, total)) + " | " +
           (key == "selected" ? std::string("-") : detail::count_text(c.not_issued)) + " |\n";
  out += "\n**dominant stall:** " + warp_stall_markdown_cell(dominant_stall(p).text, false) + "\n";
  const std::vector<warp_stall_pc> hot = o.top_pcs > 0 ? p.hottest_pcs(o.top_pcs) : std::vector<warp_stall_pc>();
  if (hot.empty()) return out;
  out += "\n| hottest PC | source line | samples | share | mostly |\n|---|---|--:|--:|---|\n";
  for (const warp_stall_pc& pc : hot) {
    const std::uint64_t n = pc.samples();
    const std::string source = pc.source();
    out += "| " + warp_stall_markdown_cell(pc.where(), true) + " | " +
           (source.empty() ? warp_stall_markdown_cell(source_line_reason(pc.line_status), false)
                           : warp_stall_markdown_cell(source, true)) +
           " | " + detail::count_text(n) + " | " + detail::pct_text(100.0 * detail::share_of(n, total)) + " | " +
           warp_stall_markdown_cell(stall_reason_label(pc.top_reason()), false) + " |\n";
  }
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// A JSON array of profiles.
//   std::string json = kscope::warp_stalls_json(result.kernels);
[[nodiscard]] KSCOPE_DECL std::string warp_stalls_json(const std::vector<warp_stall_profile>& profiles,
                                                  std::size_t top_pcs = 10);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string warp_stalls_json(const std::vector<warp_stall_profile>& profiles,
                                                  std::size_t top_pcs) {
  std::string out;
  detail::json_writer w(out);
  w.begin_array();
  for (const warp_stall_profile& p : profiles) write_warp_stalls_json(w, p, top_pcs);
  w.end_array();
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
