// kscope/verdict/diagnose.hpp — what is wrong with a serving loop, from its report alone.
//
// diagnose() reads a session_report (plain data: a report made by the session, read back,
// or built by hand) and returns findings, each with the numbers it rests on, a sentence
// that names them, what to try, and what it costs. Nothing is said without evidence: a
// rule whose inputs are missing or not finite stays silent, and a healthy report gives no
// finding.
//
//   const kscope::session_report r = kscope::session::global().report();
//   const std::vector<kscope::diagnosis> found = kscope::diagnose(r);
//   std::fputs(kscope::diagnosis_text(found, r).c_str(), stdout);
//
// The rules (thresholds: the named constants below; scope roles: diagnose_options' names):
//   1. GPU idle (gpu_time.busy_share < diagnose_low_busy_share) while a step's GPU work
//      fills less than that share of its host time. The scope open on the host during
//      most of the GPU's idle time (gpu_time.idle_by_scope) says why — with a step, the
//      scope in the step's subtree (idle time outside the step, in a prefill before the
//      loop or a library's start-up, is not the step's; the cost counts the loop's idle
//      time only):
//      - host_sync: that scope copies device to host in every call (≥ 1 D2H copy per
//        call, pageable copies left to rule 5) or has a sync role: the host blocked there
//        until the GPU drained, then the GPU waited for the host's next launches — unless
//        its synchronizes waited under diagnose_sync_wait_share of its idle time while the
//        GPU idled between its own launches (the GPU had drained already: launch-bound);
//      - cpu_launch_bound: otherwise (host work, or launches slower than the kernels):
//        the scope, its idle time, the gaps between its own kernels, launches per step.
//      A synchronize shows through its CUPTI synchronization record (host_sync). A scope
//      that blocks only through pageable copies is rule 5's finding, not this one.
//   1b. host_sync, whatever the busy share: a scope inside the step that is not a sync
//      point (diagnose_options::sync_names) blocks the host in every call — ≥ 1
//      synchronize (CUPTI synchronization records) or non-pageable D2H copy per call — and
//      the GPU idled while the host was in it for ≥ diagnose_sync_idle_share of the wall
//      time — unless its synchronizes waited under diagnose_sync_wait_share of that idle
//      time while the GPU idled between the scope's own launches (launch-bound: rule 1's).
//      The one sync per step that hands sampled tokens to the host belongs to a sync
//      point and is not a finding; a synchronize after every layer is.
//   2. prefill_stall: a step's p99 ≥ diagnose_step_tail_ratio × its p50, a prefill scope
//      inside the step ran in at most diagnose_prefill_max_step_share of the steps, and
//      its GPU time per call (the p90 of its calls' GPU busy time when the rings hold at
//      least min_step_calls of them, else the mean) explains at least
//      diagnose_prefill_explains of p99 − p50.
//   3. decode memory-bound: the GPU busy ≥ diagnose_busy_share_high, a decode scope (or a
//      scope inside it) with ≥ diagnose_decode_min_gpu_share of the GPU time is
//      memory-bound — by its hardware counters when profiled, else by its sampled
//      metrics, else by its declared-work roofline placement (under the ridge and at
//      ≥ counters_at_roof_pct of the memory roof). Decode at small batch is memory-bound
//      from its weights alone, so the KV cache is named only on evidence:
//      - kv_cache_traffic when the memory-bound scope reads the KV cache (a kv role,
//        diagnose_options::kv_names: "kv", "kv_cache", "attention"), or when declared
//        bytes put the KV cache at ≥ diagnose_kv_bytes_share of decode's bytes;
//      - decode_memory_bound otherwise: "weight reads set the pace" when declared bytes
//        say so, else "(weights and KV cache)" with how to declare them apart.
//      Declared bytes separate them when scopes in decode's subtree with a kv role
//      declare bytes (set_work) and either scopes with a weights role declare the rest or
//      the decode scope declares its whole work (as its roofline placement needs):
//        { kscope::scope decode{"decode", stream}; decode.set_work({flops, all_bytes});
//          ...  { kscope::scope kv{"kv", stream}; kv.set_work({attn_flops, kv_bytes}); attention(); } }
//   4. communication: NCCL kernels ≥ diagnose_comm_share of all kernel time.
//   5. pageable_copy: every scope in the step (every scope with ≥ min_step_calls of them,
//      without a step scope) whose copies have a side in pageable host memory (CUPTI's
//      srcKind / dstKind): bytes per call, the achieved rate (bytes / copy time) and what
//      pinned memory gives (diagnose_options::host_link_bytes_per_s when known).
//   6. sync_copy: a scope in the step that is not a sync point issues ≥
//      diagnose_sync_copies_per_step synchronous cudaMemcpy / cudaMemset per step (CUPTI's
//      async flag absent; pageable copies are rule 5's), unless rule 1 or 1b named it.
//
// How it is built: each rule is one function (detail::rule_*, in detail::diagnose_rules()'s
// order) that reads the report and what every rule shares (detail::diagnose_context: the
// step, what a share of the wall time costs per step, the loop's scopes, the scopes whose
// copies go through pageable memory), never another rule's finding. One arbiter
// (detail::arbitrate) merges the findings that name the same time ("unless rule 1 or 1b
// named it", "rule 5's" above) and orders them by cost.
//
// Severity: every finding states what it costs (diagnosis::cost_ms_per_step, cost_share,
// cost_basis), as evidence ("cost.ms_per_step", "cost.share_of_…") and at the end of its
// text: the GPU's idle time for rules 1 and 1b and the memory-bound scope's GPU time for
// rule 3 (shares of the wall time, × the step's mean host time per step); p99 − p50 for
// rule 2 (share of the step's p99); the NCCL time not overlapped with compute for rule 4;
// the copies' time for rules 5 and 6 (shares of the step's total host time). diagnose()
// returns the findings by cost_share, largest first (then cost_ms_per_step; unknown last).
#pragma once

#include "../evidence/metrics.hpp"
#include "../evidence/pm_samples.hpp"
#include "../report/report.hpp"
#include "scope_verdict.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kscope {

// GPU busy under this share of the wall time (and of a step's host time): the GPU waits.
inline constexpr double diagnose_low_busy_share = 0.5;
// A step whose p99 is this many times its p50 has stalls worth explaining.
inline constexpr double diagnose_step_tail_ratio = 2.0;
// Prefill in at most this share of the steps: it is what some steps have and others lack.
inline constexpr double diagnose_prefill_max_step_share = 0.5;
// Prefill's GPU time per call must cover this share of (step p99 − p50) to be the cause.
inline constexpr double diagnose_prefill_explains = 0.5;
// Fewer step calls than this: no tail to speak of.
inline constexpr std::uint64_t diagnose_min_step_calls = 10;
// GPU busy at least this share of the wall: the GPU, not the host, sets the pace.
inline constexpr double diagnose_busy_share_high = 0.8;
// A decode phase with at least this share of the GPU time matters for throughput.
inline constexpr double diagnose_decode_min_gpu_share = 0.3;
// NCCL kernels with at least this share of all kernel time.
inline constexpr double diagnose_comm_share = 0.3;
// The GPU idle, while the host sits in a synchronizing scope, for at least this share of
// the wall time: the synchronizations cost the GPU real time.
inline constexpr double diagnose_sync_idle_share = 0.05;
// A synchronizing scope whose host waited in its synchronizes for less than this share of
// the GPU's idle time in it, while the GPU idled between the scope's own launches: the GPU
// had drained before the host blocked (the host, not the synchronize, kept it waiting), so
// the idle time is the launches' (rule 1), not the synchronize's. An eager PyTorch decode
// (H100): 7 us of waiting per call against 1.8 ms of idle between 84 kernels.
inline constexpr double diagnose_sync_wait_share = 0.1;
// Synchronous cudaMemcpy / cudaMemset calls per step (per call of the scope without a
// step scope) from which a scope is a finding: one in every step is a habit, not an accident.
inline constexpr double diagnose_sync_copies_per_step = 1.0;
// The KV cache's share of decode's declared bytes from which it, not the weights, sets the pace.
inline constexpr double diagnose_kv_bytes_share = 0.5;

// The kinds keep their JSON names (to_string) once published; new kinds are added at the end.
enum class diagnosis_kind : std::uint8_t {
  cpu_launch_bound,
  host_sync,
  prefill_stall,
  kv_cache_traffic,
  communication,
  decode_memory_bound,
  pageable_copy,
  sync_copy,
};

// "cpu/launch-bound", "host sync in step", "decode stalls behind prefill", "KV-cache
// traffic", "communication", "decode memory-bound", "pageable copies", "synchronous
// memcpy/memset".
[[nodiscard]] KSCOPE_DECL const char* to_string(diagnosis_kind k) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL const char* to_string(diagnosis_kind k) noexcept {
  switch (k) {
    case diagnosis_kind::cpu_launch_bound: return "cpu/launch-bound";
    case diagnosis_kind::host_sync: return "host sync in step";
    case diagnosis_kind::prefill_stall: return "decode stalls behind prefill";
    case diagnosis_kind::kv_cache_traffic: return "KV-cache traffic";
    case diagnosis_kind::communication: return "communication";
    case diagnosis_kind::decode_memory_bound: return "decode memory-bound";
    case diagnosis_kind::pageable_copy: return "pageable copies";
    case diagnosis_kind::sync_copy: return "synchronous memcpy/memset";
  }
  return "unknown";
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// One finding: `evidence` holds the numbers (evidence/metrics.hpp's evidence: a name such as
// "gpu_time.busy_share", a value, a unit); `text` names them; `suggestion` says what to try.
// What it costs: `cost_ms_per_step`, milliseconds per step (for a tail finding, what a step
// at the p99 pays over the median one), and `cost_share`, the share of `cost_basis` it
// takes: "wall time" (the GPU-time window), "step time" (the step scope's total host
// time), "step p99" or "kernel time". NaN (basis "") when the report lacks the numbers.
//
//   for (const kscope::diagnosis& d : kscope::diagnose(r))
//     std::printf("%s: %.2f ms per step\n", d.title.c_str(), d.cost_ms_per_step);
struct diagnosis {
  diagnosis_kind kind = diagnosis_kind::cpu_launch_bound;
  std::string title;
  std::vector<kscope::evidence> evidence;
  std::string text;
  std::string suggestion;
  double cost_ms_per_step = std::numeric_limits<double>::quiet_NaN();
  double cost_share = std::numeric_limits<double>::quiet_NaN();
  std::string cost_basis;
};

// Every option of diagnose(), declared once: the struct diagnose_options below, the table
// diagnose_option_fields() that the C interface reads JSON options by (src/kscope_c.cpp)
// and its defaults (diagnose_options_json(), kscope_diagnose_options()), from which
// Python's keyword arguments come (python/kscope/_diagnose.py), all expand this list.
// Each entry: NAMES(member, (default names...)), NUMBER(member, default) or
// COUNT(member, default).
//   step_names ... weight_names   which scopes play which role: a scope whose name, or
//                                 whose "phase" tag, equals one of the names. kv_names and
//                                 weight_names: scopes (inside decode) whose memory traffic
//                                 is the KV cache, and the weights; their declared bytes
//                                 tell the two apart (rule 3)
//   low_busy_share ... kv_bytes_share   the thresholds (the constants above)
//   host_link_bytes_per_s         the host link's rate (bytes/s) that a copy from pinned
//                                 memory reaches, measured (a pinned cudaMemcpyAsync of tens
//                                 of MB) or rated (PCIe, NVLink-C2C). The report's device
//                                 description holds no host-link bandwidth, so only this sets
//                                 it; NaN: unknown, and the pageable-copy finding names no
//                                 pinned rate
#define KSCOPE_DIAGNOSE_OPTIONS(NAMES, NUMBER, COUNT)                     \
  NAMES(step_names, ("step"))                                              \
  NAMES(prefill_names, ("prefill"))                                        \
  NAMES(decode_names, ("decode"))                                          \
  NAMES(sync_names, ("d2h", "sampling"))                                   \
  NAMES(kv_names, ("kv", "kv_cache", "attention"))                         \
  NAMES(weight_names, ("weights"))                                         \
  NUMBER(low_busy_share, diagnose_low_busy_share)                          \
  NUMBER(step_tail_ratio, diagnose_step_tail_ratio)                        \
  NUMBER(prefill_max_step_share, diagnose_prefill_max_step_share)          \
  NUMBER(prefill_explains, diagnose_prefill_explains)                      \
  COUNT(min_step_calls, diagnose_min_step_calls)                           \
  NUMBER(busy_share_high, diagnose_busy_share_high)                        \
  NUMBER(decode_min_gpu_share, diagnose_decode_min_gpu_share)              \
  NUMBER(comm_share, diagnose_comm_share)                                  \
  NUMBER(sync_idle_share, diagnose_sync_idle_share)                        \
  NUMBER(sync_copies_per_step, diagnose_sync_copies_per_step)              \
  NUMBER(kv_bytes_share, diagnose_kv_bytes_share)                          \
  NUMBER(host_link_bytes_per_s, std::numeric_limits<double>::quiet_NaN())

#define KSCOPE_DETAIL_UNPAREN(...) __VA_ARGS__
#define KSCOPE_DETAIL_DIAGNOSE_NAMES_MEMBER(member, defaults) \
  std::vector<std::string> member{KSCOPE_DETAIL_UNPAREN defaults};
#define KSCOPE_DETAIL_DIAGNOSE_NUMBER_MEMBER(member, default_value) double member = default_value;
#define KSCOPE_DETAIL_DIAGNOSE_COUNT_MEMBER(member, default_value) std::uint64_t member = default_value;

//   kscope::diagnose_options o;
//   o.step_names = {"iteration"};
//   o.host_link_bytes_per_s = 53e9;  // measured: pinned cudaMemcpyAsync of 64 MB, PCIe Gen5 x16
struct diagnose_options {
  KSCOPE_DIAGNOSE_OPTIONS(KSCOPE_DETAIL_DIAGNOSE_NAMES_MEMBER, KSCOPE_DETAIL_DIAGNOSE_NUMBER_MEMBER,
                          KSCOPE_DETAIL_DIAGNOSE_COUNT_MEMBER)
};

// One member of diagnose_options by name, for the interfaces that take options as text.
//   for (const kscope::diagnose_option_field& f : kscope::diagnose_option_fields())
//     if (f.type == kscope::diagnose_option_field::kind::number) *f.number(options) = 0.5;
struct diagnose_option_field {
  enum class kind : std::uint8_t { names, number, count };
  const char* name;
  kind type;
  // The member of an options object. Functions, not pointers to members: nvcc writes a
  // pointer-to-member declaration back in parentheses, which g++ 13 fails (-Wparentheses).
  std::vector<std::string>* (*names)(diagnose_options&);  // set for kind::names
  double* (*number)(diagnose_options&);                   // kind::number
  std::uint64_t* (*count)(diagnose_options&);             // kind::count
};

// Every member, in the struct's order.
[[nodiscard]] KSCOPE_DECL const std::vector<diagnose_option_field>& diagnose_option_fields();

// The options as a JSON object, every member (the defaults when given none); NaN is null.
[[nodiscard]] KSCOPE_DECL std::string diagnose_options_json(const diagnose_options& o = diagnose_options{});

namespace detail {

KSCOPE_DECL bool plays_role(const scope_report& s, const std::vector<std::string>& names);

// Index one past the subtree of scopes[i] (depth-first order).
KSCOPE_DECL std::size_t subtree_end(const std::vector<scope_report>& scopes, std::size_t i);

// Own GPU time (busy + copies) of the subtree at i, from the CUPTI aggregates.
KSCOPE_DECL double subtree_gpu_ns(const std::vector<scope_report>& scopes, std::size_t i);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool plays_role(const scope_report& s, const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    if (s.name == n) return true;
    for (const tag_count& t : s.tags)
      if (t.key == "phase" && t.value == n) return true;
  }
  return false;
}

KSCOPE_DECL std::size_t subtree_end(const std::vector<scope_report>& scopes, std::size_t i) {
  std::size_t j = i + 1;
  while (j < scopes.size() && scopes[j].depth > scopes[i].depth) ++j;
  return j;
}

KSCOPE_DECL double subtree_gpu_ns(const std::vector<scope_report>& scopes, std::size_t i) {
  double sum = 0;
  for (std::size_t j = i; j < subtree_end(scopes, i); ++j) sum += own_gpu_ns(scopes[j]);
  return sum;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

KSCOPE_DECL double finite_or(double v, double fallback);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double finite_or(double v, double fallback) { return std::isfinite(v) ? v : fallback; }
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The step scope with the most calls; npos when none.
KSCOPE_DECL std::size_t find_role(const std::vector<scope_report>& scopes, const std::vector<std::string>& names);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::size_t find_role(const std::vector<scope_report>& scopes, const std::vector<std::string>& names) {
  std::size_t best = std::string::npos;
  for (std::size_t i = 0; i < scopes.size(); ++i)
    if (plays_role(scopes[i], names) && (best == std::string::npos || scopes[i].calls > scopes[best].calls)) best = i;
  return best;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

inline std::string pct(double share) { return share_text(share); }

// Whether a scope is memory-bound: by its one verdict (scope_report::verdict, decided by
// scope_verdict.hpp: its counters', else its sampled metrics', else its declared-work
// roofline placement); for a report built without verdicts, by the same evidence in the
// same order (`source` says which decided).
// False when the deciding verdict is another one, or when none decides.
// `facts` receives the deciding verdict's numbers (counters or sampled metrics).
KSCOPE_DECL bool memory_bound(const session_report& r, const scope_report& s, std::string& source, double& fraction,
                         std::vector<evidence>& facts);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool memory_bound(const session_report& r, const scope_report& s, std::string& source, double& fraction,
                         std::vector<evidence>& facts) {
  fraction = std::numeric_limits<double>::quiet_NaN();
  facts.clear();
  // The declared-work placement counts as memory-bound only at the roof by the same measure
  // as counters and samples (counters_at_roof_pct): under the ridge is not yet "memory
  // traffic sets the pace" (the healthy serving loop's decode sat at 54 % of the roof).
  const auto declared_memory_bound = [&](bottleneck kind) {
    source = "declared-work roofline";
    fraction = s.roofline->fraction_of_roof;
    return kind == bottleneck::memory && std::isfinite(fraction) && fraction * 100 >= counters_at_roof_pct;
  };
  // The scope's one verdict; a report built without verdicts gets it decided here, by the
  // same rules (scope_verdict.hpp), so there is one place that weighs the evidence.
  std::optional<scope_verdict> decided = s.verdict;
  if (!decided) {
    scope_evidence e;
    e.scope = &s;
    if (r.sampled_metrics) {
      e.sampled = r.sampled_metrics->data.find(static_cast<sampled_node>(s.id));
      if (e.sampled != nullptr) e.sampled_metrics = &r.sampled_metrics->data.metrics;
    }
    decided = decide_verdict(e);
  }
  if (!decided) return false;
  if (decided->basis == "declared work" && s.roofline) return declared_memory_bound(decided->verdict.kind);
  source = decided->basis;
  facts = decided->verdict.facts;
  return decided->verdict.kind == bottleneck::memory;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The step's mean host time per call (its median when the mean is unknown); NaN when neither is known.
KSCOPE_DECL double step_time_ns(const scope_report& step);

// Pageable copies over the subtree at i: every direction, and device to host alone.
KSCOPE_DECL copy_totals subtree_pageable(const std::vector<scope_report>& scopes, std::size_t i, bool d2h_only);

// The GPU's idle time (and its gaps) while the host was in `s` (gpu_time.idle_by_scope).
KSCOPE_DECL double idle_in_scope(const gpu_time_report& t, const scope_report& s, std::uint64_t* gaps = nullptr);

// The GPU idled between the scope's own launches: ≥ 2 kernels per call and the gaps between
// them (median per call) at least their busy time. False without per-call data.
KSCOPE_DECL bool gaps_between_own_kernels(const scope_gpu_time* g);

// The scope synchronizes in every call, but its synchronizes waited under
// diagnose_sync_wait_share of the GPU's idle time per call in it while the GPU idled between
// its own launches: the GPU had drained before the host blocked, so the launches, not the
// synchronizes, kept it waiting (rules 1 and 1b leave it to the launch-bound finding).
KSCOPE_DECL bool drained_before_sync(const scope_report& s, const scope_gpu_time* g, double idle_per_call_ns);

// The calls to divide a scope's CUPTI aggregates by: its calls, or NaN when the collector
// traced in windows (evidence/trace_windows.hpp): the aggregates then hold the windows'
// work only, and a call across a window's edge was traced in part, so no per-call figure
// comes out of them (the rules that need one say nothing; the GPU-time account's per-call
// figures, from calls whole inside a window, still count).
KSCOPE_DECL double aggregate_calls(const session_report& r, const scope_report& s) noexcept;

// Whether declared bytes tell decode's KV-cache traffic from the rest (rule 3): kv-role
// scopes inside decode (at `dec`) declared `kv_bytes` > 0, and either weight-role scopes
// declared the rest or the decode scope declared its whole work (≥ kv_bytes), whose
// remainder is the rest. `other_bytes` is NaN when they are not told apart.
KSCOPE_DECL bool declared_kv_split(const std::vector<scope_report>& scopes, std::size_t dec,
                                   const diagnose_options& o, double& kv_bytes, double& other_bytes);

// Sets d's cost (see diagnosis); a non-finite or negative value stays unknown (NaN).
KSCOPE_DECL void set_cost(diagnosis& d, double ms_per_step, double share, const char* basis);

// The cost as evidence entries and as the closing clause of d.text ("" when unknown).
KSCOPE_DECL void state_cost(diagnosis& d);

// "device-to-host", "host-to-device and device-to-host": the directions with copies.
KSCOPE_DECL std::string directions_text(const std::array<copy_totals, copy_direction_count>& by_direction);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL double step_time_ns(const scope_report& step) {
  if (std::isfinite(step.host_ns.mean) && step.host_ns.mean > 0) return step.host_ns.mean;
  if (std::isfinite(step.host_ns.median) && step.host_ns.median > 0) return step.host_ns.median;
  return std::numeric_limits<double>::quiet_NaN();
}

KSCOPE_DECL copy_totals subtree_pageable(const std::vector<scope_report>& scopes, std::size_t i, bool d2h_only) {
  copy_totals sum;
  for (std::size_t j = i; j < subtree_end(scopes, i); ++j) {
    if (!scopes[j].gpu_activity) continue;
    const node_gpu_activity& a = *scopes[j].gpu_activity;
    const copy_totals c =
        d2h_only ? a.memcpy_pageable[static_cast<std::size_t>(copy_direction::d2h)] : a.pageable_copies();
    sum.count += c.count;
    sum.bytes += c.bytes;
    sum.ns += c.ns;
  }
  return sum;
}

KSCOPE_DECL bool gaps_between_own_kernels(const scope_gpu_time* g) {
  return g != nullptr && g->calls_seen > 0 && g->kernels_per_call >= 2 &&
         g->gaps_per_call_ns.median >= g->busy_per_call_ns.median;
}

KSCOPE_DECL double aggregate_calls(const session_report& r, const scope_report& s) noexcept {
  return s.calls > 0 && !r.trace_windows.windowed ? static_cast<double>(s.calls) : std::numeric_limits<double>::quiet_NaN();
}

KSCOPE_DECL bool drained_before_sync(const scope_report& s, const scope_gpu_time* g, double idle_per_call_ns) {
  if (!s.gpu_activity || s.calls == 0) return false;
  const double calls = static_cast<double>(s.calls);
  const double syncs = static_cast<double>(s.gpu_activity->host_sync.count) / calls;
  const double wait = static_cast<double>(s.gpu_activity->host_sync.ns) / calls;
  return syncs >= 1 && gaps_between_own_kernels(g) && wait < diagnose_sync_wait_share * idle_per_call_ns;
}

KSCOPE_DECL double idle_in_scope(const gpu_time_report& t, const scope_report& s, std::uint64_t* gaps) {
  double idle = 0;
  std::uint64_t n = 0;
  for (const gpu_idle_by_scope& b : t.idle_by_scope)
    if (b.scope == s.id || (b.scope == 0 && !b.path.empty() && b.path == s.path)) {
      idle += b.ns;
      n += b.gaps;
    }
  if (gaps != nullptr) *gaps = n;
  return idle;
}

KSCOPE_DECL bool declared_kv_split(const std::vector<scope_report>& scopes, std::size_t dec,
                                   const diagnose_options& o, double& kv_bytes, double& other_bytes) {
  kv_bytes = 0;
  other_bytes = std::numeric_limits<double>::quiet_NaN();
  double weight_bytes = 0;
  for (std::size_t j = dec + 1; j < subtree_end(scopes, dec); ++j) {
    const double b = scopes[j].declared.bytes;
    if (!std::isfinite(b) || !(b > 0)) continue;
    if (plays_role(scopes[j], o.kv_names)) kv_bytes += b;
    else if (plays_role(scopes[j], o.weight_names)) weight_bytes += b;
  }
  if (!(kv_bytes > 0)) return false;
  if (weight_bytes > 0) {
    other_bytes = weight_bytes;
    return true;
  }
  const double whole = scopes[dec].declared.bytes;
  if (std::isfinite(whole) && whole >= kv_bytes) {
    other_bytes = whole - kv_bytes;
    return true;
  }
  return false;
}

KSCOPE_DECL void set_cost(diagnosis& d, double ms_per_step, double share, const char* basis) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  d.cost_ms_per_step = std::isfinite(ms_per_step) && ms_per_step >= 0 ? ms_per_step : nan;
  d.cost_share = std::isfinite(share) && share >= 0 ? share : nan;
  d.cost_basis = std::isfinite(d.cost_share) ? basis : "";
}

KSCOPE_DECL void state_cost(diagnosis& d) {
  const bool ms = std::isfinite(d.cost_ms_per_step), share = std::isfinite(d.cost_share);
  if (ms) d.evidence.push_back({"cost.ms_per_step", d.cost_ms_per_step, "ms"});
  if (share) {
    std::string name = "cost.share_of_" + d.cost_basis;
    std::replace(name.begin(), name.end(), ' ', '_');
    d.evidence.push_back({name, d.cost_share, "share"});
  }
  if (!ms && !share) return;
  const std::string duration = ms ? format_duration_ns(d.cost_ms_per_step * 1e6) : std::string();
  std::string clause = "; cost: ";
  if (d.cost_basis == "step p99") {
    clause += (ms ? duration + " in a p99 step" : std::string("a share of the p99 step")) +
              (share ? " (" + pct(d.cost_share) + " of it)" : std::string());
  } else if (ms) {
    clause += duration + " per step" +
              (share ? " (" + pct(d.cost_share) + " of the " + d.cost_basis + ")" : std::string());
  } else {
    clause += pct(d.cost_share) + " of the " + d.cost_basis;
  }
  // A memory-bound decode wastes nothing by itself: its cost is the time the bytes take.
  if (d.kind == diagnosis_kind::kv_cache_traffic || d.kind == diagnosis_kind::decode_memory_bound)
    clause += ", GPU time at the memory roof";
  d.text += clause;
}

KSCOPE_DECL std::string directions_text(const std::array<copy_totals, copy_direction_count>& by_direction) {
  static const char* const words[copy_direction_count] = {"host-to-device", "device-to-host", "device-to-device",
                                                          "host-to-host or other"};
  std::vector<std::string> seen;
  for (std::size_t d = 0; d < copy_direction_count; ++d)
    if (by_direction[d].count > 0) seen.emplace_back(words[d]);
  std::string out;
  for (std::size_t i = 0; i < seen.size(); ++i)
    out += (i == 0 ? "" : i + 1 == seen.size() ? " and " : ", ") + seen[i];
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

namespace detail {

// What every rule reads besides the report: the options, the step scope and what a share
// of the wall time costs per step, the loop's scopes, and which of them copy through
// pageable host memory. That last one is evidence, not a finding: rules 1 and 1b leave a
// scope that blocks only through such copies to rule 5 (one cause, one finding).
struct diagnose_context {
  diagnose_context(const session_report& report, const diagnose_options& options);
  const session_report& r;
  const diagnose_options& o;
  std::size_t step;          // std::string::npos: no step scope
  const gpu_time_report* t;  // nullptr: no GPU timeline
  double step_ns = std::numeric_limits<double>::quiet_NaN();        // the step's time per call
  double step_calls = std::numeric_limits<double>::quiet_NaN();
  double step_total_ns = std::numeric_limits<double>::quiet_NaN();  // its host time in all
  std::size_t loop_first = 0, loop_last = 0;  // the step's subtree, or every scope without one
  std::vector<bool> pageable_found;           // per scope of the loop (rule 5's scopes)
  // A finding's cost as a share of the wall time: that share of the step's time per step.
  void wall_cost(diagnosis& d, double share) const;
  [[nodiscard]] bool pageable_in_subtree(std::size_t i) const;
  // Whether a scope path lies inside the loop (the step's subtree; every path without one).
  [[nodiscard]] bool in_loop(const std::string& path) const;
};

// A rule's finding and the scope it names, which the arbiter merges by.
struct diagnose_finding {
  diagnosis d;
  const scope_report* names_scope = nullptr;  // set by the host_sync and sync_copy rules
};

// The GPU's idle time inside the loop and the scope (by open host scope) holding most of it.
struct loop_idle {
  const gpu_idle_by_scope* top = nullptr;
  double total = 0;    // all idle time, the loop's and the rest
  double in_loop = 0;
};
KSCOPE_DECL loop_idle idle_of_loop(const diagnose_context& c);

// What the scope holding most of the loop's idle time did per call (rule 1).
struct waiting_scope {
  std::string name;  // its path, "(no scope)" when none was open
  const scope_report* scope = nullptr;
  const scope_gpu_time* gpu = nullptr;
  double d2h = 0;    // device-to-host copies per call, less the pageable ones
  double syncs = 0;  // host synchronizes per call
  bool own_kernel_gaps = false;  // the GPU waits between the scope's own kernels
  bool blocks = false;           // the host blocks there (a copy, a synchronize, a sync role)
  bool pageable_only = false;    // blocked only by pageable copies: rule 5's
};
KSCOPE_DECL waiting_scope waiting_scope_of(const diagnose_context& c, const gpu_idle_by_scope& top);

// The rules, one function per pathology (the numbers at the top of this file). Each reads
// the report and the context only, never another rule's finding, and returns at most a
// few findings; arbitrate() decides between those that name the same time.
using diagnose_rule = std::vector<diagnose_finding> (*)(const diagnose_context&);
KSCOPE_DECL std::vector<diagnose_finding> rule_gpu_waits(const diagnose_context& c);
KSCOPE_DECL std::vector<diagnose_finding> rule_host_blocks(const diagnose_context& c);
KSCOPE_DECL std::vector<diagnose_finding> rule_prefill_stall(const diagnose_context& c);
KSCOPE_DECL std::vector<diagnose_finding> rule_decode_memory_bound(const diagnose_context& c);
KSCOPE_DECL std::vector<diagnose_finding> rule_communication(const diagnose_context& c);
KSCOPE_DECL std::vector<diagnose_finding> rule_pageable_copies(const diagnose_context& c);
KSCOPE_DECL std::vector<diagnose_finding> rule_sync_copies(const diagnose_context& c);
// In the order their findings are listed before the sort by cost (1, 1b, 2, 3, 4, 5, 6).
KSCOPE_DECL const std::vector<diagnose_rule>& diagnose_rules();

// One finding per cause, then by cost, largest first: the host_sync findings all name the
// GPU's idle time while the host blocked, so the first (rule 1's, from where the loop
// idled most) stands and a later one (rule 1b's) does not; a synchronous copy (rule 6) in
// the scope a standing host_sync finding names is the cause that finding gives already.
KSCOPE_DECL std::vector<diagnosis> arbitrate(std::vector<diagnose_finding> found);

}  // namespace detail

// The findings for `r` (see the rules at the top), by cost, largest first. Empty for a
// healthy report, an empty one, or one without the data a rule needs (no CUPTI: rules 1,
// 3, 4, 5 and 6 need its records).
[[nodiscard]] KSCOPE_DECL std::vector<diagnosis> diagnose(const session_report& r, const diagnose_options& o = {});

#if KSCOPE_DETAIL_DEFINITIONS
namespace detail {

KSCOPE_DECL diagnose_context::diagnose_context(const session_report& report, const diagnose_options& options)
    : r(report), o(options), step(find_role(report.scopes, options.step_names)),
      t(report.gpu_time ? &*report.gpu_time : nullptr) {
  const std::vector<scope_report>& scopes = r.scopes;
  if (step != std::string::npos) {
    step_ns = step_time_ns(scopes[step]);
    if (scopes[step].calls > 0) step_calls = static_cast<double>(scopes[step].calls);
    if (std::isfinite(scopes[step].host_inclusive_ns) && scopes[step].host_inclusive_ns > 0)
      step_total_ns = scopes[step].host_inclusive_ns;
    loop_first = step;
    loop_last = subtree_end(scopes, step);
  } else {
    loop_last = scopes.size();
  }
  pageable_found.assign(scopes.size(), false);
  for (std::size_t j = loop_first; j < loop_last; ++j) {
    const scope_report& s = scopes[j];
    if (!s.gpu_activity) continue;
    const std::uint64_t n = s.gpu_activity->pageable_copies().count;
    pageable_found[j] = n > 0 && (step != std::string::npos || n >= o.min_step_calls);
  }
}

KSCOPE_DECL void diagnose_context::wall_cost(diagnosis& d, double share) const {
  set_cost(d, share * step_ns / 1e6, share, "wall time");
}

KSCOPE_DECL bool diagnose_context::pageable_in_subtree(std::size_t i) const {
  for (std::size_t j = i; j < subtree_end(r.scopes, i); ++j)
    if (pageable_found[j]) return true;
  return false;
}

KSCOPE_DECL bool diagnose_context::in_loop(const std::string& path) const {
  // With a step, only the GPU's idle time while the host was inside the step says why the
  // step waits: idle time during a prefill outside the step, start-up (a library's first
  // call) or between steps is not the step's (a PyTorch loop idled most in its first
  // prefill, which then took the finding). Without a step, every scope is the loop.
  // By path, not by the scope list: an idle entry's path names its scope even where the
  // report's list does not hold it.
  if (step == std::string::npos) return true;
  const std::string& root = r.scopes[step].path;
  return path == root ||
         (path.size() > root.size() && path.compare(0, root.size(), root) == 0 && path[root.size()] == '/');
}

KSCOPE_DECL loop_idle idle_of_loop(const diagnose_context& c) {
  loop_idle idle;
  for (const gpu_idle_by_scope& g : c.t->idle_by_scope) {
    idle.total += g.ns;
    if (!c.in_loop(g.path)) continue;
    idle.in_loop += g.ns;
    if (idle.top == nullptr || g.ns > idle.top->ns) idle.top = &g;
  }
  return idle;
}

KSCOPE_DECL waiting_scope waiting_scope_of(const diagnose_context& c, const gpu_idle_by_scope& top) {
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<scope_report>& scopes = c.r.scopes;
  waiting_scope w;
  w.name = top.path.empty() ? std::string("(no scope)") : top.path;
  w.scope = top.path.empty() ? nullptr : c.r.find(top.path);
  const std::size_t at = w.scope != nullptr ? static_cast<std::size_t>(w.scope - scopes.data()) : 0;
  w.gpu = w.scope != nullptr ? c.t->find(w.scope->id) : nullptr;
  // Its D2H copies per call, less the pageable ones (rule 5's).
  const double calls = w.scope != nullptr ? aggregate_calls(c.r, *w.scope) : nan;
  const auto pageable_per_call = [&](bool d2h_only) {
    return std::isfinite(calls) ? static_cast<double>(subtree_pageable(scopes, at, d2h_only).count) / calls : 0.0;
  };
  const double pageable_d2h = pageable_per_call(true), pageable_any = pageable_per_call(false);
  w.d2h = w.gpu != nullptr && w.gpu->calls_seen > 0 ? std::max(0.0, finite_or(w.gpu->d2h_per_call, 0) - pageable_d2h)
                                                    : 0;
  // The host blocks in the scope where the GPU idles: it copies device to host in every
  // call (the copy, or the synchronize before it, waits for the GPU to drain), or it is a
  // scope the user marked as a sync point.
  w.syncs = w.scope != nullptr && w.scope->gpu_activity && std::isfinite(calls)
                ? static_cast<double>(w.scope->gpu_activity->host_sync.count) / calls
                : 0;
  w.own_kernel_gaps = gaps_between_own_kernels(w.gpu);
  const bool drained = w.scope != nullptr && std::isfinite(calls) && drained_before_sync(*w.scope, w.gpu, top.ns / calls);
  w.blocks = (w.scope != nullptr && plays_role(*w.scope, c.o.sync_names)) || (!drained && (w.d2h >= 1 || w.syncs >= 1));
  // Blocked only by its pageable copies (a sync point's role says where the host waits,
  // not why): rule 5 names the scope, with this idle time.
  w.pageable_only = w.d2h < 1 && w.syncs < 1 && pageable_any >= 1 && w.scope != nullptr && c.pageable_in_subtree(at);
  return w;
}

// 1. The GPU waits (a low busy share while the step's GPU work fills less than that share
// of its host time): a host sync where the host blocks in the scope holding most of the
// loop's idle time, else launch/CPU-bound.
KSCOPE_DECL std::vector<diagnose_finding> rule_gpu_waits(const diagnose_context& c) {
  using detail::pct;
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  const diagnose_options& o = c.o;
  const std::size_t step = c.step;
  const gpu_time_report* t = c.t;
  std::vector<diagnose_finding> found;
  if (t == nullptr || !std::isfinite(t->busy_share) || !(t->busy_share < o.low_busy_share) || !(t->wall_ns > 0))
    return found;
  // The step's own GPU share, when there is a step: its busy per call over its host time.
  double step_busy = nan, step_host = nan, kernels_per_step = nan;
  const std::string step_path = step != std::string::npos ? c.r.scopes[step].path : std::string();
  if (step != std::string::npos) {
    step_host = c.r.scopes[step].host_ns.median;
    if (const scope_gpu_time* g = t->find(c.r.scopes[step].id); g != nullptr && g->calls_seen > 0) {
      step_busy = g->busy_per_call_ns.median;
      kernels_per_step = g->kernels_per_call;
    }
  }
  const bool step_waits = step == std::string::npos || (std::isfinite(step_busy) && std::isfinite(step_host) &&
                                                        step_host > 0 && step_busy < o.low_busy_share * step_host);
  const loop_idle idle = idle_of_loop(c);
  const gpu_idle_by_scope* top = idle.top;
  if (!step_waits || top == nullptr || !(top->ns > 0) || !std::isfinite(idle.total) || !(idle.total > 0)) return found;
  const waiting_scope w = waiting_scope_of(c, *top);
  if (w.pageable_only) return found;  // rule 5's (above)
  diagnosis d;
  d.evidence.push_back({"gpu_time.busy_share", t->busy_share, "share"});
  d.evidence.push_back({"gpu_time.wall_ns", t->wall_ns, "ns"});
  d.evidence.push_back({"idle.top_scope_ns", top->ns, "ns"});
  d.evidence.push_back({"idle.top_scope_share", top->ns / idle.total, "share"});
  if (std::isfinite(step_host)) d.evidence.push_back({"step.host_median_ns", step_host, "ns"});
  if (std::isfinite(step_busy)) d.evidence.push_back({"step.gpu_busy_median_ns", step_busy, "ns"});
  if (std::isfinite(kernels_per_step)) d.evidence.push_back({"step.kernels_per_call", kernels_per_step, "kernels"});
  std::string gaps_text;  // the loop's longest gaps (idle_gaps is sorted, longest first)
  std::size_t gaps_named = 0;
  for (std::size_t i = 0; i < t->idle_gaps.size() && gaps_named < 3; ++i) {
    if (!c.in_loop(t->idle_gaps[i].open_path)) continue;
    gaps_text += (gaps_named++ ? ", " : "") + format_duration_ns(static_cast<double>(t->idle_gaps[i].ns)) + " in " +
                 (t->idle_gaps[i].open_path.empty() ? std::string("(no scope)") : t->idle_gaps[i].open_path);
  }
  std::string base = "GPU busy " + pct(t->busy_share) + " of " + format_duration_ns(t->wall_ns);
  if (std::isfinite(step_busy) && std::isfinite(step_host))
    base += "; step '" + step_path + "': GPU busy " + format_duration_ns(step_busy) + " of " +
            format_duration_ns(step_host) + " per call (medians)";
  base += "; the GPU idled " + format_duration_ns(top->ns) + " (" + pct(top->ns / idle.total) + " of its idle time, " +
          std::to_string(top->gaps) + (top->gaps == 1 ? " gap" : " gaps") + ") while the host was in '" + w.name + "'";
  if (!gaps_text.empty()) base += "; longest idle gaps: " + gaps_text;
  if (w.blocks) {
    d.kind = diagnosis_kind::host_sync;
    d.title = "the host blocks on the GPU inside the step, then the GPU waits for the host";
    d.evidence.push_back({"waiting_scope.d2h_copies_per_call", w.d2h, "copies"});
    d.evidence.push_back({"waiting_scope.host_syncs_per_call", w.syncs, "calls"});
    d.text = base + "; '" + w.name + "' " +
             (w.d2h >= 1     ? "copies device to host " + format_general(w.d2h, 3) + " times per call"
              : w.syncs >= 1 ? "synchronizes " + format_general(w.syncs, 3) + " times per call"
                             : std::string("is a sync point (diagnose_options::sync_names)")) +
             ": the host waits there for the GPU to drain, and the GPU then waits for the host's next launches";
    d.suggestion = "take the synchronization out of the step: copy asynchronously into pinned memory "
                   "(cudaMemcpyAsync, an event to wait on only when the data is needed), drop debugging "
                   "synchronizes, overlap the copy with the next step's launches";
    c.wall_cost(d, top->ns / t->wall_ns);  // the GPU's idle time while the host was blocked there
    found.push_back({std::move(d), w.scope});
    return found;
  }
  d.kind = diagnosis_kind::cpu_launch_bound;
  d.title = "the GPU waits for the CPU: launch/CPU-bound";
  std::string where;
  if (w.own_kernel_gaps)
    where = "; in '" + w.name + "' the GPU waits between its own " + format_general(w.gpu->kernels_per_call, 3) +
            " kernels per call (gaps " + format_duration_ns(w.gpu->gaps_per_call_ns.median) + ", busy " +
            format_duration_ns(w.gpu->busy_per_call_ns.median) + " per call)";
  d.text = base + where +
           (std::isfinite(kernels_per_step) && kernels_per_step > 0
                ? "; " + format_general(kernels_per_step, 3) + " kernel launches per step"
                : std::string());
  d.suggestion = "launch less from the CPU and keep host work off the critical path: capture the step in a "
                 "CUDA graph, fuse small kernels, batch more requests per step, move host work (scheduling, "
                 "detokenizing) to another thread or overlap it with the GPU";
  // All of the GPU's idle time inside the loop: the host, not the GPU, sets the pace.
  c.wall_cost(d, idle.in_loop / t->wall_ns);
  found.push_back({std::move(d), nullptr});
  return found;
}

// 1b. The host blocks inside the step in every call (whatever the busy share).
KSCOPE_DECL std::vector<diagnose_finding> rule_host_blocks(const diagnose_context& c) {
  using detail::pct;
  const diagnose_options& o = c.o;
  const std::vector<scope_report>& scopes = c.r.scopes;
  const std::size_t step = c.step;
  const gpu_time_report* t = c.t;
  std::vector<diagnose_finding> found;
  // Not on an account with holes (gpu_time_report::unknown_reason): its idle time may be
  // records it never got.
  if (t != nullptr && t->wall_ns > 0 && t->unknown_reason.empty()) {
    const std::size_t first = step != std::string::npos ? step + 1 : 0;
    const std::size_t last = step != std::string::npos ? detail::subtree_end(scopes, step) : scopes.size();
    const scope_report* worst = nullptr;
    double worst_idle = 0, worst_syncs = 0, worst_d2h = 0, worst_wait = 0;
    std::uint64_t worst_gaps = 0;
    for (std::size_t j = first; j < last; ++j) {
      const scope_report& s = scopes[j];
      if (s.calls == 0 || detail::plays_role(s, o.sync_names)) continue;
      // Traced in windows: per-call waits from the aggregates are unknown (aggregate_calls).
      const double calls = detail::aggregate_calls(c.r, s);
      if (!std::isfinite(calls)) continue;
      const double syncs = s.gpu_activity ? static_cast<double>(s.gpu_activity->host_sync.count) / calls : 0;
      const double wait = s.gpu_activity ? static_cast<double>(s.gpu_activity->host_sync.ns) / calls : 0;
      const scope_gpu_time* g = t->find(s.id);
      // Pageable D2H copies are rule 5's: only the others count here.
      const double pageable_d2h = static_cast<double>(detail::subtree_pageable(scopes, j, true).count) / calls;
      const double d2h =
          g != nullptr && g->calls_seen > 0 ? std::max(0.0, detail::finite_or(g->d2h_per_call, 0) - pageable_d2h) : 0;
      if (syncs < 1 && d2h < 1) continue;
      std::uint64_t gaps = 0;
      const double idle = detail::idle_in_scope(*t, s, &gaps);
      if (!(idle >= o.sync_idle_share * t->wall_ns) || idle <= worst_idle) continue;
      if (detail::drained_before_sync(s, g, idle / calls)) continue;  // launch-bound, not blocked
      worst = &s;
      worst_idle = idle;
      worst_syncs = syncs;
      worst_d2h = d2h;
      worst_wait = wait;
      worst_gaps = gaps;
    }
    if (worst != nullptr) {
      diagnosis d;
      d.kind = diagnosis_kind::host_sync;
      d.title = "the host blocks on the GPU inside the step, then the GPU waits for the host";
      d.evidence = {{"gpu_time.wall_ns", t->wall_ns, "ns"},
                    {"scope.host_syncs_per_call", worst_syncs, "calls"},
                    {"scope.host_sync_wait_per_call_ns", worst_wait, "ns"},
                    {"scope.d2h_copies_per_call", worst_d2h, "copies"},
                    {"scope.gpu_idle_ns", worst_idle, "ns"},
                    {"scope.gpu_idle_share_of_wall", worst_idle / t->wall_ns, "share"}};
      if (std::isfinite(t->busy_share)) d.evidence.push_back({"gpu_time.busy_share", t->busy_share, "share"});
      std::string what;
      if (worst_syncs >= 1) {
        const host_sync_totals& h = worst->gpu_activity->host_sync;
        what = detail::format_general(worst_syncs, 3) + " synchronizes per call (" + std::to_string(h.context) +
               " device/context, " + std::to_string(h.stream) + " stream, " + std::to_string(h.event) +
               " event in all), the host waiting " + format_duration_ns(worst_wait) + " per call";
      }
      if (worst_d2h >= 1)
        what += (what.empty() ? "" : ", and ") + detail::format_general(worst_d2h, 3) + " device-to-host copies per call";
      d.text = "'" + worst->path + "' blocks the host in every call: " + what + "; the GPU idled " +
               format_duration_ns(worst_idle) + " (" + pct(worst_idle / t->wall_ns) + " of " +
               format_duration_ns(t->wall_ns) + ", " + std::to_string(worst_gaps) +
               (worst_gaps == 1 ? " gap" : " gaps") + ") while the host was in it" +
               (std::isfinite(t->busy_share) ? "; GPU busy " + pct(t->busy_share) + " overall" : std::string());
      d.suggestion = "take the synchronization out of the step: drop debugging synchronizes, wait on an event only "
                     "where the data is needed, copy asynchronously into pinned memory (cudaMemcpyAsync) and "
                     "overlap the copy with the next step's launches";
      c.wall_cost(d, worst_idle / t->wall_ns);
      found.push_back({std::move(d), worst});
    }
  }

  return found;
}

// 2. Decode steps stall behind long prefills.
KSCOPE_DECL std::vector<diagnose_finding> rule_prefill_stall(const diagnose_context& c) {
  using detail::pct;
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  const diagnose_options& o = c.o;
  const std::vector<scope_report>& scopes = c.r.scopes;
  const std::size_t step = c.step;
  const gpu_time_report* t = c.t;
  std::vector<diagnose_finding> found;
  if (step != std::string::npos) {
    const scope_report& s = scopes[step];
    const double p50 = s.host_ns.median, p99 = s.host_ns.p99;
    if (s.calls >= o.min_step_calls && std::isfinite(p50) && std::isfinite(p99) && p50 > 0 &&
        p99 >= o.step_tail_ratio * p50) {
      for (std::size_t j = step + 1; j < detail::subtree_end(scopes, step); ++j) {
        const scope_report& p = scopes[j];
        if (!detail::plays_role(p, o.prefill_names) || p.calls == 0) continue;
        const double share = static_cast<double>(p.calls) / static_cast<double>(s.calls);
        double per_call = nan;
        const double gpu = detail::subtree_gpu_ns(scopes, j);
        if (gpu > 0) per_call = gpu / static_cast<double>(p.calls);
        else if (p.gpu_calls > 0) per_call = p.gpu_ns.median;
        // The step tail comes from the longest prefills, not the average one: with enough
        // calls in the rings, the p90 of the prefill calls' GPU busy time is the measure.
        std::string basis = "mean";
        std::uint64_t basis_calls = p.calls;
        if (t != nullptr)
          if (const scope_gpu_time* pg = t->find(p.id);
              pg != nullptr && pg->calls_seen >= o.min_step_calls && std::isfinite(pg->busy_per_call_ns.p90) &&
              (!std::isfinite(per_call) || pg->busy_per_call_ns.p90 > per_call)) {
            per_call = pg->busy_per_call_ns.p90;
            basis = "p90";
            basis_calls = pg->calls_seen;
          }
        if (!(share <= o.prefill_max_step_share) || !std::isfinite(per_call) ||
            per_call < o.prefill_explains * (p99 - p50))
          continue;
        diagnosis d;
        d.kind = diagnosis_kind::prefill_stall;
        d.title = "decode steps stall behind long prefills";
        d.evidence = {{"step.p50_ns", p50, "ns"},
                      {"step.p99_ns", p99, "ns"},
                      {"step.p99_over_p50", p99 / p50, "ratio"},
                      {"prefill.steps_share", share, "share"},
                      {basis == "p90" ? "prefill.gpu_busy_per_call_p90_ns" : "prefill.gpu_ns_per_call", per_call, "ns"}};
        d.text = "step '" + s.path + "': p99 " + format_duration_ns(p99) + " is " +
                 detail::format_general(p99 / p50, 3) + "x its p50 " + format_duration_ns(p50) + "; '" + p.path +
                 "' ran in " + pct(share) + " of the steps (" + std::to_string(p.calls) + " of " +
                 std::to_string(s.calls) + ") with " + format_duration_ns(per_call) + " of GPU time per call (" +
                 (basis == "p90" ? "p90 of " + std::to_string(basis_calls) + " calls" : std::string("mean")) +
                 "), enough to explain the tail: decode waits while a whole prompt is prefilled";
        d.suggestion = "cap the tokens per step (a token budget) and split long prompts into chunks (chunked "
                       "prefill) so every step's prefill share is small";
        // What a step at the p99 pays over the median one: a tail of 3x p50 costs it 2/3
        // of its time, one of 10x 9/10.
        detail::set_cost(d, (p99 - p50) / 1e6, (p99 - p50) / p99, "step p99");
        found.push_back({std::move(d), nullptr});
        break;
      }
    }
  }

  return found;
}

// 3. Decode memory-bound: the KV cache named only on evidence.
KSCOPE_DECL std::vector<diagnose_finding> rule_decode_memory_bound(const diagnose_context& c) {
  using detail::pct;
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  const session_report& r = c.r;
  const diagnose_options& o = c.o;
  const std::vector<scope_report>& scopes = c.r.scopes;
  const gpu_time_report* t = c.t;
  std::vector<diagnose_finding> found;
  if (t != nullptr && std::isfinite(t->busy_share) && t->busy_share >= o.busy_share_high) {
    double total = 0;
    for (const scope_report& s : scopes) total += detail::own_gpu_ns(s);
    const std::size_t dec = detail::find_role(scopes, o.decode_names);
    if (dec != std::string::npos && total > 0) {
      const double share = detail::subtree_gpu_ns(scopes, dec) / total;
      std::string source;
      double fraction = nan;
      std::vector<evidence> facts;
      std::size_t bound_at = std::string::npos;
      if (share >= o.decode_min_gpu_share) {
        for (std::size_t j = dec; j < detail::subtree_end(scopes, dec) && bound_at == std::string::npos; ++j) {
          std::string src;
          double f = nan;
          std::vector<evidence> found_facts;
          if (detail::memory_bound(r, scopes[j], src, f, found_facts)) {
            bound_at = j;
            source = src;
            fraction = f;
            facts = std::move(found_facts);
          }
        }
      }
      if (bound_at != std::string::npos) {
        const scope_report& bound_scope = scopes[bound_at];
        double kv_bytes = 0, other_bytes = nan;
        const bool separated = detail::declared_kv_split(scopes, dec, o, kv_bytes, other_bytes);
        const double kv_share = separated ? kv_bytes / (kv_bytes + other_bytes) : nan;
        const bool reads_kv = detail::plays_role(bound_scope, o.kv_names);
        diagnosis d;
        d.evidence = {{"gpu_time.busy_share", t->busy_share, "share"}, {"decode.share_of_gpu", share, "share"}};
        if (std::isfinite(fraction)) d.evidence.push_back({"roofline.fraction_of_roof", fraction, "share"});
        std::string numbers;
        for (const evidence& e : facts) {
          d.evidence.push_back(e);
          if (e.unit == "%" && std::isfinite(e.value))
            numbers += ", " + e.metric + " = " + detail::format_general(e.value, 3) + " %";
          else if (e.unit == "samples" && std::isfinite(e.value))
            numbers += ", " + detail::format_general(e.value, 6) + " samples";
        }
        if (separated) {
          d.evidence.push_back({"decode.kv_declared_bytes", kv_bytes, "bytes"});
          d.evidence.push_back({"decode.other_declared_bytes", other_bytes, "bytes"});
          d.evidence.push_back({"decode.kv_share_of_declared_bytes", kv_share, "share"});
        }
        const std::string declared =
            separated ? pct(kv_share) + " of decode's declared bytes (" + detail::format_si(kv_bytes, "B") + " of " +
                            detail::format_si(kv_bytes + other_bytes, "B") + ")"
                      : std::string();
        std::string why;
        const std::string kv_suggestion =
            "move fewer KV bytes per token: grouped-query attention, a quantized KV cache (fp8/int8), shorter "
            "context or a sliding window, larger decode batches to reuse weights";
        if (reads_kv || (separated && kv_share >= o.kv_bytes_share)) {
          d.kind = diagnosis_kind::kv_cache_traffic;
          d.title = "decode is memory-bound: KV-cache traffic sets the pace";
          why = reads_kv ? ": each decode step reads the KV cache from DRAM"
                         : ": the KV cache is " + declared + ", so each decode step's KV-cache reads set its pace";
          d.suggestion = kv_suggestion;
        } else if (separated) {
          d.kind = diagnosis_kind::decode_memory_bound;
          d.title = "decode is memory-bound: weight reads set the pace";
          why = ": the KV cache is only " + declared + "; the weights, read once per step whatever the batch, set "
                "the pace";
          d.suggestion = "read the weights for more tokens at once: larger decode batches (more requests per "
                         "step), weight quantization (fp8, int4), speculative decoding";
        } else {
          d.kind = diagnosis_kind::decode_memory_bound;
          d.title = "decode memory-bound (weights and KV cache)";
          why = ": each decode step reads the weights and the KV cache from DRAM, and the report does not say which "
                "dominates (at small batch the weights alone make decode memory-bound)";
          d.suggestion = "larger decode batches amortize the weight reads; a quantized KV cache (fp8/int8), "
                         "grouped-query attention or a shorter context cut the KV reads. To see which dominates, "
                         "declare the KV bytes inside decode (whose set_work declares the whole step): "
                         "{ kscope::scope kv{\"kv\", stream}; kv.set_work({attention_flops, kv_bytes}); "
                         "attention(...); } (or name the attention scope \"attention\", or give the weight GEMMs "
                         "a \"weights\" scope with their bytes)";
        }
        d.text = "GPU busy " + pct(t->busy_share) + " of the wall time; '" + scopes[dec].path + "' takes " +
                 pct(share) + " of the GPU time and '" + bound_scope.path + "' is memory-bound (" + source +
                 numbers + (std::isfinite(fraction) ? ", " + pct(fraction) + " of the roof" : std::string()) + ")" +
                 why;
        // The memory-bound scope's GPU time: what moving fewer bytes shortens.
        c.wall_cost(d, total > 0 ? detail::subtree_gpu_ns(scopes, bound_at) / total * t->busy_share : nan);
        found.push_back({std::move(d), nullptr});
      }
    }
  }

  return found;
}

// 4. Communication takes a large share of the GPU time.
KSCOPE_DECL std::vector<diagnose_finding> rule_communication(const diagnose_context& c) {
  using detail::pct;
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  const diagnose_options& o = c.o;
  const std::vector<scope_report>& scopes = c.r.scopes;
  const gpu_time_report* t = c.t;
  const double step_calls = c.step_calls;
  std::vector<diagnose_finding> found;
  {
    double kernel_ns = 0, comm_ns = 0, exposed_ns = 0;
    const scope_report* top = nullptr;
    for (const scope_report& s : scopes) {
      if (!s.gpu_activity) continue;
      const node_gpu_activity& a = *s.gpu_activity;
      kernel_ns += static_cast<double>(a.kernel_ns);
      comm_ns += static_cast<double>(a.comm_ns);
      // The part not overlapped with this scope's compute: what communication adds.
      const double overlapped =
          a.comm_busy_ns > 0 ? std::clamp(static_cast<double>(a.comm_busy_ns + a.compute_busy_ns - a.busy_ns) /
                                              static_cast<double>(a.comm_busy_ns),
                                          0.0, 1.0)
                             : 0.0;
      exposed_ns += static_cast<double>(a.comm_ns) * (1 - overlapped);
      if (a.comm_ns > 0 && (top == nullptr || a.comm_ns > top->gpu_activity->comm_ns)) top = &s;
    }
    if (kernel_ns > 0 && top != nullptr && comm_ns / kernel_ns >= o.comm_share) {
      const node_gpu_activity& a = *top->gpu_activity;
      const double overlap = a.comm_busy_ns > 0
                                 ? static_cast<double>(a.comm_busy_ns + a.compute_busy_ns - a.busy_ns) /
                                       static_cast<double>(a.comm_busy_ns)
                                 : nan;
      diagnosis d;
      d.kind = diagnosis_kind::communication;
      d.title = "communication takes a large share of the GPU time";
      d.evidence = {{"comm_share_of_kernel_time", comm_ns / kernel_ns, "share"},
                    {"comm_ns", comm_ns, "ns"},
                    {"comm_not_overlapped_ns", exposed_ns, "ns"},
                    {"top_scope.comm_ns", static_cast<double>(a.comm_ns), "ns"}};
      if (std::isfinite(overlap)) d.evidence.push_back({"top_scope.comm_overlap_share", overlap, "share"});
      d.text = "NCCL kernels are " + pct(comm_ns / kernel_ns) + " of all kernel time (" + format_duration_ns(comm_ns) +
               "); most in '" + top->path + "' (" + format_duration_ns(static_cast<double>(a.comm_ns)) + ")" +
               (std::isfinite(overlap) ? ", " + pct(overlap) + " of it overlapped with compute" : std::string());
      d.suggestion = "overlap collectives with compute (separate streams, bucketed all-reduce), send fewer or "
                     "larger messages, check the parallel layout (tensor vs pipeline parallel) and the links";
      // NCCL time not overlapped with compute: of the wall time when the timeline says how
      // busy the GPU was, else of the kernel time.
      const double ms = exposed_ns / step_calls / 1e6;
      if (t != nullptr && std::isfinite(t->busy_share))
        detail::set_cost(d, ms, exposed_ns / kernel_ns * t->busy_share, "wall time");
      else
        detail::set_cost(d, ms, exposed_ns / kernel_ns, "kernel time");
      found.push_back({std::move(d), nullptr});
    }
  }

  return found;
}

// 5. Copies to or from pageable host memory.
KSCOPE_DECL std::vector<diagnose_finding> rule_pageable_copies(const diagnose_context& c) {
  using detail::pct;
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  const session_report& report = c.r;
  const diagnose_options& o = c.o;
  const std::vector<scope_report>& scopes = c.r.scopes;
  const gpu_time_report* t = c.t;
  const double step_calls = c.step_calls, step_total_ns = c.step_total_ns;
  const std::size_t loop_first = c.loop_first, loop_last = c.loop_last;
  std::vector<diagnose_finding> found;
  for (std::size_t j = loop_first; j < loop_last; ++j) {
    if (!c.pageable_found[j]) continue;
    const scope_report& s = scopes[j];
    const node_gpu_activity& a = *s.gpu_activity;
    const copy_totals pageable = a.pageable_copies();
    const double count = static_cast<double>(pageable.count), bytes = static_cast<double>(pageable.bytes);
    const double copy_ns = std::max(0.0, static_cast<double>(pageable.ns));
    const double calls = detail::aggregate_calls(report, s);
    const double bytes_per_call = bytes / calls, ns_per_call = copy_ns / calls;
    // Bytes over copy time; a copy timed at 0 ns has no rate.
    const double rate = copy_ns > 0 ? bytes / (copy_ns / 1e9) : nan;
    const double link =
        std::isfinite(o.host_link_bytes_per_s) && o.host_link_bytes_per_s > 0 ? o.host_link_bytes_per_s : nan;
    std::uint64_t idle_gaps = 0;
    const double idle = t != nullptr ? detail::idle_in_scope(*t, s, &idle_gaps) : 0;
    diagnosis d;
    d.kind = diagnosis_kind::pageable_copy;
    d.title = "copies to or from pageable host memory block the host";
    d.evidence = {{"scope.pageable_copies", count, "copies"},
                  {"scope.pageable_bytes", bytes, "bytes"},
                  {"scope.pageable_copy_ns", copy_ns, "ns"},
                  {"scope.pageable_bytes_per_copy", bytes / count, "bytes"}};
    if (std::isfinite(calls)) {
      d.evidence.push_back({"scope.pageable_copies_per_call", count / calls, "copies"});
      d.evidence.push_back({"scope.pageable_bytes_per_call", bytes_per_call, "bytes"});
      d.evidence.push_back({"scope.pageable_copy_ns_per_call", ns_per_call, "ns"});
    }
    if (std::isfinite(rate)) d.evidence.push_back({"scope.pageable_bytes_per_s", rate, "bytes/s"});
    if (std::isfinite(link)) d.evidence.push_back({"host_link.bytes_per_s", link, "bytes/s"});
    if (idle > 0) d.evidence.push_back({"scope.gpu_idle_ns", idle, "ns"});
    std::string per_call;
    if (std::isfinite(calls))
      per_call = detail::format_si(bytes_per_call, "B") + " per call (" + detail::format_general(count / calls, 3) +
                 (count == calls ? " copy" : " copies") + " of " + detail::format_si(bytes / count, "B") + "), ";
    d.text = "'" + s.path + "' copies " + per_call + detail::directions_text(a.memcpy_pageable) +
             ", to or from pageable host memory (" + std::to_string(pageable.count) + " copies, " +
             detail::format_si(bytes, "B") + " in all)" +
             (std::isfinite(rate) ? ", at " + detail::format_si(rate, "B/s") + " (" +
                                        format_duration_ns(std::isfinite(calls) ? ns_per_call : copy_ns) +
                                        (std::isfinite(calls) ? " per call)" : " in all)")
                                  : std::string(", at a rate CUPTI could not time (copies of 0 ns)")) +
             "; the driver stages a pageable copy through a pinned buffer of its own and the host waits for it, "
             "so it cannot overlap the GPU's work" +
             (idle > 0 && t->wall_ns > 0 ? "; the GPU idled " + format_duration_ns(idle) + " (" +
                                               pct(idle / t->wall_ns) + " of " + format_duration_ns(t->wall_ns) +
                                               ") while the host was in it"
                                         : std::string());
    if (std::isfinite(link)) {
      const double pinned_ns = bytes_per_call / link * 1e9;
      d.evidence.push_back({"scope.pinned_copy_ns_per_call", pinned_ns, "ns"});
      d.text += "; pinned host memory typically reaches the host link's rate: at " + detail::format_si(link, "B/s") +
                (std::isfinite(pinned_ns) ? " the copy would take about " + format_duration_ns(pinned_ns) +
                                                " per call, asynchronously"
                                          : std::string(", asynchronously"));
    } else {
      d.text += "; pinned memory (cudaHostAlloc / cudaHostRegister) lets the copy run asynchronously at the link's "
                "rate (PCIe or NVLink-C2C)";
    }
    d.suggestion = "allocate the host buffer pinned (cudaHostAlloc / cudaMallocHost, or cudaHostRegister the "
                   "existing buffer once at start-up), copy with cudaMemcpyAsync on the step's stream and wait on "
                   "an event only where the host reads the data";
    // The copies' own time: what the host waits for in every step.
    detail::set_cost(d, copy_ns / step_calls / 1e6, copy_ns / step_total_ns, "step time");
    found.push_back({std::move(d), nullptr});
  }

  return found;
}

// 6. Synchronous cudaMemcpy / cudaMemset inside the step.
KSCOPE_DECL std::vector<diagnose_finding> rule_sync_copies(const diagnose_context& c) {
  using detail::pct;
  const diagnose_options& o = c.o;
  const std::vector<scope_report>& scopes = c.r.scopes;
  const std::size_t step = c.step;
  const gpu_time_report* t = c.t;
  const double step_calls = c.step_calls, step_total_ns = c.step_total_ns;
  const std::size_t loop_first = c.loop_first, loop_last = c.loop_last;
  std::vector<diagnose_finding> found;
  for (std::size_t j = loop_first; j < loop_last; ++j) {
    const scope_report& s = scopes[j];
    if (!s.gpu_activity || s.calls == 0 || detail::plays_role(s, o.sync_names)) continue;
    const node_gpu_activity& a = *s.gpu_activity;
    const double copies = static_cast<double>(a.memcpy_sync.count), sets = static_cast<double>(a.memset_sync.count);
    // Per step, or per call of the scope without a step scope. Traced in windows, the
    // aggregates hold the windows' copies only: no count per step comes out of them.
    if (c.r.trace_windows.windowed) continue;
    const double per = std::isfinite(step_calls) ? step_calls : static_cast<double>(s.calls);
    if (!((copies + sets) / per >= o.sync_copies_per_step) ||
        (step == std::string::npos && a.memcpy_sync.count + a.memset_sync.count < o.min_step_calls))
      continue;
    const double sync_ns = std::max(0.0, static_cast<double>(a.memcpy_sync.ns + a.memset_sync.ns));
    const char* unit = std::isfinite(step_calls) ? " per step" : " per call";
    diagnosis d;
    d.kind = diagnosis_kind::sync_copy;
    d.title = "synchronous cudaMemcpy / cudaMemset inside the step";
    d.evidence = {{"scope.sync_memcpy_per_step", copies / per, "copies"},
                  {"scope.sync_memset_per_step", sets / per, "memsets"},
                  {"scope.sync_bytes_per_step", static_cast<double>(a.memcpy_sync.bytes + a.memset_sync.bytes) / per,
                   "bytes"},
                  {"scope.sync_ns_per_step", sync_ns / per, "ns"}};
    std::uint64_t idle_gaps = 0;
    const double idle = t != nullptr ? detail::idle_in_scope(*t, s, &idle_gaps) : 0;
    if (idle > 0) d.evidence.push_back({"scope.gpu_idle_ns", idle, "ns"});
    std::string what;
    if (copies > 0)
      what = detail::format_general(copies / per, 3) + " synchronous cudaMemcpy" + unit + " (" +
             detail::format_si(static_cast<double>(a.memcpy_sync.bytes) / copies, "B") + " each)";
    if (sets > 0)
      what += (what.empty() ? "" : " and ") + detail::format_general(sets / per, 3) + " synchronous cudaMemset" + unit;
    d.text = "'" + s.path + "' issues " + what + ", " + format_duration_ns(sync_ns / per) + unit +
             " of GPU time; the synchronous API runs on the default stream, and a copy to or from host memory "
             "returns only when it is done, so the host cannot run ahead of the GPU" +
             (idle > 0 && t->wall_ns > 0 ? "; the GPU idled " + format_duration_ns(idle) + " (" +
                                               pct(idle / t->wall_ns) + " of " + format_duration_ns(t->wall_ns) +
                                               ") while the host was in it"
                                         : std::string());
    d.suggestion = "use cudaMemcpyAsync / cudaMemsetAsync on the step's stream (with pinned host buffers for host "
                   "copies) and synchronize only where the host needs the result";
    // Their own time, a lower bound: the host also waits for the work queued before them.
    detail::set_cost(d, sync_ns / step_calls / 1e6, sync_ns / step_total_ns, "step time");
    found.push_back({std::move(d), &s});
  }

  return found;
}

KSCOPE_DECL const std::vector<diagnose_rule>& diagnose_rules() {
  static const std::vector<diagnose_rule> rules{rule_gpu_waits,           rule_host_blocks,   rule_prefill_stall,
                                                rule_decode_memory_bound, rule_communication, rule_pageable_copies,
                                                rule_sync_copies};
  return rules;
}

KSCOPE_DECL std::vector<diagnosis> arbitrate(std::vector<diagnose_finding> found) {
  const diagnose_finding* host_sync = nullptr;
  for (const diagnose_finding& f : found)
    if (f.d.kind == diagnosis_kind::host_sync) {
      host_sync = &f;
      break;
    }
  std::vector<diagnosis> out;
  for (diagnose_finding& f : found) {
    if (f.d.kind == diagnosis_kind::host_sync && &f != host_sync) continue;
    if (f.d.kind == diagnosis_kind::sync_copy && host_sync != nullptr && host_sync->names_scope != nullptr &&
        f.names_scope == host_sync->names_scope)
      continue;
    out.push_back(std::move(f.d));
  }
  for (diagnosis& d : out) state_cost(d);
  std::stable_sort(out.begin(), out.end(), [](const diagnosis& a, const diagnosis& b) {
    const auto key = [](double v) { return std::isfinite(v) ? v : -1.0; };
    if (key(a.cost_share) != key(b.cost_share)) return key(a.cost_share) > key(b.cost_share);
    return key(a.cost_ms_per_step) > key(b.cost_ms_per_step);
  });
  return out;
}

}  // namespace detail

KSCOPE_DECL std::vector<diagnosis> diagnose(const session_report& r, const diagnose_options& o) {
  const detail::diagnose_context c(r, o);
  std::vector<detail::diagnose_finding> found;
  for (const detail::diagnose_rule rule : detail::diagnose_rules())
    for (detail::diagnose_finding& f : rule(c)) found.push_back(std::move(f));
  return detail::arbitrate(std::move(found));
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The findings as text: one paragraph each (title, text, what to try); with none, "no
// problem found" and the numbers that say so, or why nothing could be checked.
// `o`: the options diagnose() was given, so that "nothing found" names what was checked.
[[nodiscard]] KSCOPE_DECL std::string diagnosis_text(const std::vector<diagnosis>& found, const session_report& r,
                                                     const diagnose_options& o = {});

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string diagnosis_text(const std::vector<diagnosis>& found, const session_report& r,
                                       const diagnose_options& o) {
  std::string out = "\nDiagnosis\n";
  // The rules that rest on the GPU-time account stay silent when it has holes: say so.
  const std::string holes = r.gpu_time && !r.gpu_time->unknown_reason.empty()
                                ? "the GPU-time account has holes (" + r.gpu_time->unknown_reason +
                                      "): the GPU-idle, host-sync and memory-bound-decode checks did not run"
                                : std::string();
  if (found.empty()) {
    if (!holes.empty()) {
      out += detail::wrap("no finding from what could be checked; " + holes, 98);
    } else if (r.gpu_time && std::isfinite(r.gpu_time->busy_share)) {
      // Only what the rules checked: the decode rule looks at a busy GPU, and at a decode at its
      // memory roof, so a decode the verdict calls memory-bound further under it, or on a GPU
      // that idles, is not denied here.
      const bool busy = r.gpu_time->busy_share >= o.busy_share_high;
      out += detail::wrap("no problem found: GPU busy " + detail::share_text(r.gpu_time->busy_share) + " of " +
                              format_duration_ns(r.gpu_time->wall_ns) + "; no step tail explained by prefill, " +
                              (busy ? "no decode at its memory roof setting the pace, " : std::string()) +
                              "no dominant communication, no pageable or synchronous copy in the step" +
                              (busy ? std::string()
                                    : " (decode's memory traffic was not weighed: that check needs the GPU busy " +
                                          detail::share_text(o.busy_share_high) + " or more)"),
                          98);
    } else if (r.scopes.empty()) {
      out += "nothing to diagnose: no scopes recorded\n";
    } else {
      out += detail::wrap("no problem found from the host times; without a GPU timeline (CUPTI: KSCOPE_CUPTI=1 or "
                          "session::enable_cupti()) the launch, sync, copy, memory-bound decode and communication "
                          "checks cannot run",
                          98);
    }
    return detail::printable_text(out);
  }
  for (const diagnosis& d : found) {
    out += detail::wrap(std::string("[") + to_string(d.kind) + "] " + d.title, 98);
    out += detail::wrap("  " + d.text, 98);
    out += detail::wrap("  try: " + d.suggestion, 98);
  }
  if (!holes.empty()) out += detail::wrap("note: " + holes, 98);
  return detail::printable_text(out);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// The findings as JSON: {"schema": "kscope.diagnosis/1", "findings": [{"kind", "title",
// "text", "suggestion", "cost_ms_per_step", "cost_share", "cost_basis", "evidence":
// [{"metric", "value", "unit"}]}]}, largest cost first (docs/report_schema.md). An unknown
// cost is null.
[[nodiscard]] KSCOPE_DECL std::string diagnosis_json(const std::vector<diagnosis>& found);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string diagnosis_json(const std::vector<diagnosis>& found) {
  std::string out;
  detail::json_writer w(out);
  w.begin_object();
  w.member("schema", "kscope.diagnosis/1");
  w.key("findings").begin_array();
  for (const diagnosis& d : found) {
    w.begin_object();
    w.member("kind", to_string(d.kind)).member("title", d.title).member("text", d.text);
    w.member("suggestion", d.suggestion);
    w.member("cost_ms_per_step", d.cost_ms_per_step).member("cost_share", d.cost_share);
    w.member("cost_basis", d.cost_basis);
    w.key("evidence").begin_array();
    for (const evidence& e : d.evidence) w.begin_object().member("metric", e.metric).member("value", e.value).member("unit", e.unit).end_object();
    w.end_array();
    w.end_object();
  }
  w.end_array();
  w.end_object();
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

#if KSCOPE_DETAIL_DEFINITIONS
#define KSCOPE_DETAIL_DIAGNOSE_NAMES_FIELD(member, defaults)                                                 \
  {#member, diagnose_option_field::kind::names, [](diagnose_options& o) { return &o.member; }, nullptr, nullptr},
#define KSCOPE_DETAIL_DIAGNOSE_NUMBER_FIELD(member, default_value)                                           \
  {#member, diagnose_option_field::kind::number, nullptr, [](diagnose_options& o) { return &o.member; }, nullptr},
#define KSCOPE_DETAIL_DIAGNOSE_COUNT_FIELD(member, default_value)                                            \
  {#member, diagnose_option_field::kind::count, nullptr, nullptr, [](diagnose_options& o) { return &o.member; }},
KSCOPE_DECL const std::vector<diagnose_option_field>& diagnose_option_fields() {
  static const std::vector<diagnose_option_field> fields{
      KSCOPE_DIAGNOSE_OPTIONS(KSCOPE_DETAIL_DIAGNOSE_NAMES_FIELD, KSCOPE_DETAIL_DIAGNOSE_NUMBER_FIELD,
                              KSCOPE_DETAIL_DIAGNOSE_COUNT_FIELD)};
  return fields;
}
#undef KSCOPE_DETAIL_DIAGNOSE_NAMES_FIELD
#undef KSCOPE_DETAIL_DIAGNOSE_NUMBER_FIELD
#undef KSCOPE_DETAIL_DIAGNOSE_COUNT_FIELD

KSCOPE_DECL std::string diagnose_options_json(const diagnose_options& given) {
  diagnose_options o = given;  // the fields reach members of a non-const object
  std::string out;
  detail::json_writer w(out);
  w.begin_object();
  for (const diagnose_option_field& f : diagnose_option_fields()) {
    switch (f.type) {
      case diagnose_option_field::kind::names:
        w.key(f.name).begin_array();
        for (const std::string& name : *f.names(o)) w.value(name);
        w.end_array();
        break;
      case diagnose_option_field::kind::number: w.member(f.name, *f.number(o)); break;
      case diagnose_option_field::kind::count:
        w.member(f.name, static_cast<unsigned long long>(*f.count(o)));
        break;
    }
  }
  w.end_object();
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
