// kscope/report/trace_merge.hpp — one Chrome trace from the traces of several ranks.
//
// With one process per GPU, each rank writes its own trace (session::write_trace, with
// rank_file_name for the file); merge_traces() puts them in one file that Perfetto opens,
// one group of processes per rank. Pure C++ on kscope's own JSON reader: no CUDA, no JSON
// library. Format and rules: docs/trace_format.md, "Merging the traces of several ranks".
//
//   std::vector<kscope::trace_merge_input> in = {{"run.rank0.trace.json", read(...)},
//                                                {"run.rank1.trace.json", read(...)}};
//   kscope::merged_trace m = kscope::merge_traces(in);
//   std::fputs(m.text().c_str(), stdout);      // per input: rank, host, pids, clock; errors
//   if (m.merged_count() > 0) kscope::write_text_file("run.trace.json", m.json);
//
// What it does with each input:
//   - pids: an input whose pids collide with an earlier input's is moved, all its pids by
//     one offset to a fresh block (trace_pid_block), so a rank's host and GPUs stay
//     together and in order; ids that bind events across processes (flow arrows, async
//     events: "id", "bind_id", "id2.global") are offset the same way, so the arrows of two
//     ranks never join;
//   - clocks: a kscope trace says where its clock comes from (otherData: host_name,
//     time_origin_ns, wall_clock_offset_ns). kscope's clock is the host's steady clock,
//     which every process of one host shares (one kernel, no time namespace assumed), so
//     the traces of one host are placed exactly on one time line. Hosts each have their
//     own steady clock (counting from their boot): their traces are kept as they are
//     (each host's time line starts at 0), with a note, unless `align_hosts_by_wall_clock`
//     lines hosts up by their wall clocks (as close as the hosts' clocks agree: NTP keeps
//     them within about a millisecond, which kscope cannot check). A trace without a
//     kscope clock base (another tool's) is kept as it is, with a note; so is one whose
//     clock base is out of range (origin outside [0, 2^62) ns, offset 2^62 ns or more
//     from 0), or whose place on the time line would carry a timestamp past 9e15 us;
//   - sort order and names: process_sort_index entries are renumbered so that ranks come
//     in order (inputs without a rank last, in the order given), each rank's processes
//     in their own order; another tool's processes get the file's name before their name;
//   - every event is kept (none added, none dropped): timestamps are rewritten in
//     microseconds with three decimals (nanoseconds), other top-level members than
//     traceEvents and otherData (stackFrames, samples, ...) are left out with a note.
// A bad input (not JSON, truncated, no traceEvents, an empty one, a malformed event: a
// ts or dur that is no number of microseconds below 9e15) gets one message naming it, and
// the others are still merged.
#pragma once

#include "../core/config.hpp"
#include "../core/detail/checked_math.hpp"
#include "../core/detail/json_reader.hpp"
#include "../core/detail/json_writer.hpp"
#include "../core/detail/number_format.hpp"
#include "../core/detail/text_escape.hpp"
#include "trace.hpp"  // trace_schema, trace_pid_block, detail::trace_us

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kscope {

// otherData.schema of a merged trace.
inline constexpr const char* merged_trace_schema = "kscope.merged_trace/1";
// Distinct pids one input may hold (a kscope trace has one per GPU plus one); more is refused.
inline constexpr std::size_t trace_merge_max_processes = std::size_t{1} << 16;
// JSON values in one event (its args included).
inline constexpr std::size_t trace_merge_max_values_per_event = std::size_t{1} << 16;
// The largest |ts| and |dur| of an event, in microseconds (285 years): a timestamp in
// nanoseconds then fits in int64 with room for a clock shift, and an input whose shift
// would carry a timestamp past it keeps its times as they are, so a merged trace merges
// again.
inline constexpr double trace_merge_max_time_us = 9e15;

// What a JSON document is, by its content: how `kscope merge` tells traces from reports.
enum class document_kind : std::uint8_t {
  chrome_trace,     // an object with "traceEvents", or a JSON array (the array form of the format)
  kscope_document,  // an object whose "schema" starts with "kscope." (a report, a merged report, ...)
  other_json,       // valid JSON, neither
  not_json,         // not JSON, or cut short before anything told what it is
};

// Reads only as far as it needs to decide (traceEvents or schema come first in the files
// kscope writes), never throws.
//   if (kscope::identify_document(text) == kscope::document_kind::chrome_trace) ...
[[nodiscard]] KSCOPE_DECL document_kind identify_document(std::string_view text) noexcept;

// One trace to merge: its name (shown in messages, and before another tool's process
// names) and its contents.
struct trace_merge_input {
  std::string name;
  std::string text;
};

struct trace_merge_options {
  // Line up the traces of different hosts by their wall clocks (otherData.
  // wall_clock_offset_ns) instead of starting each host's time line at 0.
  bool align_hosts_by_wall_clock = false;
};

// What became of one input.
struct merged_trace_input {
  std::string name;
  std::string error;          // why it was not merged; "" when it was
  bool kscope_trace = false;  // its otherData is kscope's (kscope.trace/1)
  int rank = -1;              // -1: not known
  long long process_id = 0;   // the OS process id; 0: not known
  std::string host_name;
  std::size_t events = 0;
  std::optional<std::int64_t> time_origin_ns;        // its clock base (steady_clock ns)
  std::optional<std::int64_t> wall_clock_offset_ns;  // system_clock - steady_clock
  std::int64_t shift_ns = 0;  // added to each of its timestamps
  std::string clock;          // how its time line was placed, in words
  std::vector<std::pair<long long, long long>> pids;  // (in the input, in the merged trace), by input pid
};

// The merged trace and what happened to each input.
struct merged_trace {
  std::string json;  // the merged trace; "" when no input could be merged
  std::vector<merged_trace_input> inputs;  // in the order given
  std::vector<std::string> notes;          // clock alignment, left-out members, repeated ranks
  std::size_t events = 0;                  // events in the merged trace (the inputs' sum)

  [[nodiscard]] std::size_t merged_count() const noexcept;
  // "2 of 3 traces merged (1234 events)", one line per input (rank, host, pid, events,
  // pids, clock), then the errors and the notes.
  [[nodiscard]] std::string text() const;
};

// Merges the traces, in the order given (the first keeps its pids). Never throws for bad
// input: each bad one gets its error and is left out.
[[nodiscard]] KSCOPE_DECL merged_trace merge_traces(const std::vector<trace_merge_input>& inputs,
                                                    const trace_merge_options& options = {});

namespace detail {

// What the first reading of an input found: enough to place it before it is copied.
struct trace_scan {
  std::set<long long> pids;
  std::optional<std::int64_t> min_ts_ns, max_ts_ns;  // over the events' "ts"
  std::map<long long, double> sort_index;  // pid -> its process_sort_index
  std::optional<std::uint64_t> min_id, max_id;  // over the ids that bind across processes
  json_value other_data;
  std::vector<std::string> left_out;  // top-level members not carried
  bool array_form = false;
};

// An id that binds events across processes ("id" of flow, async and object events,
// "bind_id", "id2.global"): a whole number, or a string of hex digits ("0x1f", as the
// format allows). Anything else is not renumbered.
[[nodiscard]] KSCOPE_DECL std::optional<std::uint64_t> trace_binding_id(const json_value& v) noexcept;
// An event's "ts" or "dur" (microseconds) in nanoseconds, rounded; nullopt when it is not
// a number or not below trace_merge_max_time_us in magnitude.
[[nodiscard]] KSCOPE_DECL std::optional<std::int64_t> trace_time_ns(const json_value& v) noexcept;
// Whether an event's "id" binds across processes (by its phase).
[[nodiscard]] KSCOPE_DECL bool trace_phase_binds_id(std::string_view phase) noexcept;
// Reads the input once: checks every event, collects pids, sort indices, ids, otherData.
// Throws json_syntax_error or json_field_error with what is wrong.
KSCOPE_DECL void scan_trace(std::string_view text, trace_scan& out, std::size_t& events);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::optional<std::uint64_t> trace_binding_id(const json_value& v) noexcept {
  constexpr double limit = 9007199254740992.0;  // 2^53: every whole double below it is exact
  if (v.is_number()) {
    if (std::isfinite(v.number) && v.number >= 0 && v.number < limit && v.number == std::floor(v.number))
      return static_cast<std::uint64_t>(v.number);
    return std::nullopt;
  }
  if (!v.is_string()) return std::nullopt;
  std::string_view s = v.string;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  // At most 14 hex digits (< 2^56): an offset added to it cannot overflow.
  if (s.empty() || s.size() > 14) return std::nullopt;
  std::uint64_t value = 0;
  for (const char c : s) {
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (digit < 0) return std::nullopt;
    value = value * 16 + static_cast<std::uint64_t>(digit);
  }
  return value;
}

KSCOPE_DECL std::optional<std::int64_t> trace_time_ns(const json_value& v) noexcept {
  if (!v.is_number()) return std::nullopt;
  return rounded_int64(v.number * 1000, trace_merge_max_time_us * 1000);
}

KSCOPE_DECL bool trace_phase_binds_id(std::string_view phase) noexcept {
  // Flow (s t f), async (b e n, S T p F) and object (N O D) events.
  return phase.size() == 1 && std::string_view("stfbenSTpFNOD").find(phase[0]) != std::string_view::npos;
}

KSCOPE_DECL void scan_trace(std::string_view text, trace_scan& out, std::size_t& events) {
  json_cursor c(text);
  events = 0;
  const auto read_events = [&] {
    c.begin_array();
    while (c.next_item()) {
      const std::string where = "traceEvents[" + std::to_string(events) + "]: ";
      json_value e;
      c.read_value(e, trace_merge_max_values_per_event);
      if (!e.is_object()) throw json_field_error(where + "an event must be an object, got " + describe_json_value(e));
      long long pid = 0;
      bool has_pid = false;
      if (const json_value* p = e.find("pid")) {
        try {
          pid = json_integer<long long>(*p, "pid", -(1LL << 53), 1LL << 53);
        } catch (const json_field_error& bad) {
          throw json_field_error(where + bad.what());
        }
        has_pid = true;
        out.pids.insert(pid);
        if (out.pids.size() > trace_merge_max_processes)
          throw json_field_error("more than " + std::to_string(trace_merge_max_processes) + " processes (pids)");
      }
      // ts is turned into int64 nanoseconds and shifted, dur is copied: both are bounded,
      // so that neither a timestamp nor its shift can overflow (trace_merge_max_time_us).
      const auto time_ns = [&](const char* field) -> std::optional<std::int64_t> {
        const json_value* time = e.find(field);
        if (time == nullptr) return std::nullopt;
        const std::optional<std::int64_t> ns = trace_time_ns(*time);
        if (!ns)
          throw json_field_error(where + "field \"" + field + "\" must be a number of microseconds, got " +
                                 describe_json_value(*time) +
                                 (time->is_number() ? " (beyond 9e15 us, 285 years, either way)" : ""));
        return ns;
      };
      if (const std::optional<std::int64_t> ts = time_ns("ts")) {
        out.min_ts_ns = out.min_ts_ns ? std::min(*out.min_ts_ns, *ts) : *ts;
        out.max_ts_ns = out.max_ts_ns ? std::max(*out.max_ts_ns, *ts) : *ts;
      }
      (void)time_ns("dur");
      const std::string phase = e.member_string("ph", "");
      const auto note_id = [&](const json_value* id) {
        if (id == nullptr) return;
        if (const std::optional<std::uint64_t> value = trace_binding_id(*id)) {
          out.min_id = out.min_id ? std::min(*out.min_id, *value) : *value;
          out.max_id = out.max_id ? std::max(*out.max_id, *value) : *value;
        }
      };
      if (trace_phase_binds_id(phase)) note_id(e.find("id"));
      note_id(e.find("bind_id"));
      if (const json_value* id2 = e.find("id2")) note_id(id2->find("global"));
      if (phase == "M" && has_pid && e.member_string("name", "") == "process_sort_index") {
        if (const json_value* args = e.find("args"))
          out.sort_index[pid] = args->member_number("sort_index", 0);
      }
      ++events;
    }
  };
  const json_type top = c.peek();
  if (top == json_type::array) {
    out.array_form = true;
    read_events();
  } else if (top == json_type::object) {
    c.begin_object();
    std::string key;
    bool seen_events = false;
    std::string schema;
    while (c.next_member(key)) {
      if (key == "traceEvents") {
        if (seen_events) throw json_field_error("two \"traceEvents\" members");
        if (c.peek() != json_type::array) {
          json_value v;
          c.read_value(v, 1 << 16);
          throw json_field_error("\"traceEvents\" must be an array, got " + describe_json_value(v));
        }
        read_events();
        seen_events = true;
      } else if (key == "otherData") {
        c.read_value(out.other_data, trace_merge_max_values_per_event);
      } else if (key == "schema" && c.peek() == json_type::string) {
        json_value v;
        c.read_value(v, 1);
        schema = v.string;
      } else {
        c.skip_value();
        if (key != "displayTimeUnit") out.left_out.push_back(key);
      }
    }
    c.finish();
    if (!seen_events) {
      if (schema.rfind("kscope.", 0) == 0)
        throw json_field_error("is a " + printable_name(schema) + " document, not a trace");
      throw json_field_error("not a Chrome trace: JSON without a \"traceEvents\" array");
    }
  } else {
    json_value v;
    c.read_value(v, 1);
    c.finish();
    throw json_field_error("not a Chrome trace: the JSON is " + describe_json_value(v) +
                           ", not an object with a \"traceEvents\" array");
  }
  if (events == 0) throw json_field_error("no trace events (an empty \"traceEvents\" array)");
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL document_kind identify_document(std::string_view text) noexcept {
  try {
    detail::json_cursor c(text);
    const detail::json_type top = c.peek();
    if (top == detail::json_type::array) return document_kind::chrome_trace;
    if (top != detail::json_type::object) {
      c.skip_value();
      c.finish();
      return document_kind::other_json;
    }
    c.begin_object();
    std::string key;
    while (c.next_member(key)) {
      if (key == "traceEvents") return document_kind::chrome_trace;
      if (key == "schema" && c.peek() == detail::json_type::string) {
        detail::json_value v;
        c.read_value(v, 1);
        if (v.string.rfind("kscope.", 0) == 0) return document_kind::kscope_document;
        continue;
      }
      c.skip_value();
    }
    c.finish();
    return document_kind::other_json;
  } catch (...) {
    return document_kind::not_json;
  }
}

KSCOPE_DECL std::size_t merged_trace::merged_count() const noexcept {
  std::size_t n = 0;
  for (const merged_trace_input& in : inputs) n += in.error.empty() ? 1 : 0;
  return n;
}

KSCOPE_DECL std::string merged_trace::text() const {
  std::string out = std::to_string(merged_count()) + " of " + std::to_string(inputs.size()) + " traces merged (" +
                    std::to_string(events) + " events)\n";
  const auto pad = [](std::string s, std::size_t width) {
    if (s.size() < width) s.append(width - s.size(), ' ');
    return s + "  ";
  };
  if (merged_count() > 0) {
    out += pad("input", 5) + pad("rank", 4) + pad("host", 12) + pad("pid", 8) + pad("events", 8) +
           pad("trace pids", 22) + "clock\n";
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const merged_trace_input& in = inputs[i];
      if (!in.error.empty()) continue;
      std::string pids;
      if (!in.pids.empty()) {
        const auto range = [](long long lo, long long hi) {
          return lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi);
        };
        pids = range(in.pids.front().first, in.pids.back().first);
        bool moved = false;
        for (const auto& [from, to] : in.pids) moved = moved || from != to;
        if (moved) pids += " -> " + range(in.pids.front().second, in.pids.back().second);
      }
      std::string shift = "+" + detail::format_fixed(static_cast<double>(in.shift_ns) / 1e6, 3) + " ms";
      out += pad(std::to_string(i), 5) + pad(in.rank >= 0 ? std::to_string(in.rank) : "-", 4) +
             pad(in.host_name.empty() ? "-" : detail::printable_name(in.host_name), 12) +
             pad(in.process_id > 0 ? std::to_string(in.process_id) : "-", 8) + pad(std::to_string(in.events), 8) +
             pad(pids, 22) + in.clock + (in.shift_ns != 0 ? ", " + shift : "") + "\n";
    }
  }
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].error.empty())
      out += "error: input " + std::to_string(i) + " (" + detail::printable_name(inputs[i].name) +
             "): " + detail::printable_name(inputs[i].error) + "\n";
  for (const std::string& note : notes) out += "note: " + detail::printable_name(note) + "\n";
  return out;
}

KSCOPE_DECL merged_trace merge_traces(const std::vector<trace_merge_input>& inputs,
                                      const trace_merge_options& options) {
  merged_trace result;
  std::vector<detail::trace_scan> scans(inputs.size());
  // Inputs whose clock base was refused, with a note already: no second note for them.
  std::vector<bool> clock_refused(inputs.size(), false);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    merged_trace_input in;
    in.name = inputs[i].name;
    try {
      detail::scan_trace(inputs[i].text, scans[i], in.events);
    } catch (const detail::json_syntax_error& e) {
      in.error = std::string("not valid JSON: ") + e.what();
    } catch (const detail::json_field_error& e) {
      in.error = e.what();
    } catch (const std::bad_alloc&) {
      in.error = "out of memory while reading it";
    }
    if (in.error.empty()) {
      const detail::json_value& other = scans[i].other_data;
      in.kscope_trace = other.member_string("schema", "") == trace_schema;
      if (in.kscope_trace) {
        // What is malformed here is ignored, not fatal: the events are what matters, and a
        // trace without a clock base is merged as it is.
        const auto integer = [&other](const char* key) -> std::optional<std::int64_t> {
          const detail::json_value* v = other.find(key);
          if (v == nullptr || !v->is_number() || !(std::fabs(v->number) < 9.2e18) || v->number != std::floor(v->number))
            return std::nullopt;
          return static_cast<std::int64_t>(v->number);
        };
        if (const auto rank = integer("rank"); rank && *rank >= 0 && *rank <= 2147483647) in.rank = static_cast<int>(*rank);
        if (const auto pid = integer("process_id"); pid && *pid > 0) in.process_id = static_cast<long long>(*pid);
        in.host_name = other.member_string("host_name", "");
        // The clock base is added and subtracted below: an origin in [0, 2^62) and an
        // offset below 2^62 in magnitude keep every sum in int64 (a real steady clock
        // counts from boot; a real offset is about 1.8e18 ns). Anything else present makes
        // the trace's clock unknown, with a note: a half-trusted clock base would place it
        // wrongly without a word.
        const auto clock_field = [&](const char* key, std::int64_t lo) -> std::optional<std::int64_t> {
          const detail::json_value* v = other.find(key);
          if (v == nullptr || v->is_null()) return std::nullopt;
          try {
            return detail::json_integer<std::int64_t>(*v, key, lo, detail::max_input_time_ns - 1);
          } catch (const detail::json_field_error& bad) {
            if (!clock_refused[i])
              result.notes.push_back(in.name + ": otherData " + bad.what() +
                                     ": its clock is unknown, its times are kept as they are");
            clock_refused[i] = true;
            return std::nullopt;
          }
        };
        in.time_origin_ns = clock_field("time_origin_ns", 0);
        in.wall_clock_offset_ns = clock_field("wall_clock_offset_ns", 1 - detail::max_input_time_ns);
        if (clock_refused[i]) {
          in.time_origin_ns.reset();
          in.wall_clock_offset_ns.reset();
        }
      }
      for (const std::string& key : scans[i].left_out)
        result.notes.push_back(in.name + ": top-level member \"" + key + "\" left out (its ids are the file's own)");
    }
    result.inputs.push_back(std::move(in));
  }

  // ---- clocks: one time line per host (its steady clock); hosts by wall clock on request.
  struct host_group {
    std::int64_t origin_ns = std::numeric_limits<std::int64_t>::max();  // the earliest origin
    std::optional<std::int64_t> wall_ns;  // the wall-clock time of origin_ns
    std::int64_t shift_ns = 0;            // added to the whole group
  };
  std::map<std::string, host_group> hosts;
  for (merged_trace_input& in : result.inputs) {
    if (!in.error.empty() || !in.time_origin_ns || in.host_name.empty()) continue;
    host_group& g = hosts[in.host_name];
    if (*in.time_origin_ns < g.origin_ns) {
      g.origin_ns = *in.time_origin_ns;
      g.wall_ns.reset();
    }
    // Both within max_input_time_ns: checked_add always has a value here.
    if (*in.time_origin_ns == g.origin_ns && in.wall_clock_offset_ns && !g.wall_ns)
      g.wall_ns = detail::checked_add(g.origin_ns, *in.wall_clock_offset_ns);
  }
  // A group whose earliest trace had no offset takes another member's: one host, one offset.
  for (merged_trace_input& in : result.inputs) {
    if (!in.error.empty() || !in.time_origin_ns || in.host_name.empty() || !in.wall_clock_offset_ns) continue;
    host_group& g = hosts[in.host_name];
    if (!g.wall_ns) g.wall_ns = detail::checked_add(g.origin_ns, *in.wall_clock_offset_ns);
  }
  const bool by_wall = options.align_hosts_by_wall_clock && hosts.size() > 1;
  if (by_wall) {
    std::optional<std::int64_t> earliest;
    for (const auto& [name, g] : hosts)
      if (g.wall_ns) earliest = earliest ? std::min(*earliest, *g.wall_ns) : *g.wall_ns;
    std::vector<std::string> unaligned, too_far;
    for (auto& [name, g] : hosts) {
      if (!g.wall_ns) {
        unaligned.push_back(name);
        continue;
      }
      // Two wall clocks more than 2^62 ns (146 years) apart are no clocks of one run; the
      // bound also keeps each input's shift below (its origin's distance added) in int64.
      const std::optional<std::int64_t> shift = detail::checked_sub(*g.wall_ns, *earliest);
      if (shift && *shift < detail::max_input_time_ns) g.shift_ns = *shift;
      else too_far.push_back(name);
    }
    result.notes.push_back(std::to_string(hosts.size()) +
                           " hosts lined up by their wall clocks: as close as the hosts' clocks agree (NTP: about a "
                           "millisecond; kscope cannot check)");
    for (const std::string& name : unaligned)
      result.notes.push_back("host " + name + ": its traces carry no wall-clock offset: its time line starts at 0");
    for (const std::string& name : too_far)
      result.notes.push_back("host " + name + ": its wall clock is more than 2^62 ns (146 years) from the earliest "
                             "host's: its time line starts at 0");
  } else if (hosts.size() > 1) {
    result.notes.push_back(std::to_string(hosts.size()) +
                           " hosts: each host's steady clock counts from its own boot, so each host's traces are "
                           "aligned with each other and start at 0, not with the other hosts' (kscope merge "
                           "--wall-clock lines them up by wall clock)");
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    merged_trace_input& in = result.inputs[i];
    if (!in.error.empty()) continue;
    const auto keep_as_it_is = [&in](std::string why) {
      in.clock = "as it is (" + std::move(why) + ")";
      in.shift_ns = 0;
    };
    if (!in.time_origin_ns || in.host_name.empty()) {
      if (clock_refused[i]) {
        keep_as_it_is("its clock base is out of range");  // the note is written already
        continue;
      }
      keep_as_it_is("no kscope clock base");
      result.notes.push_back(in.name + ": " +
                             (in.kscope_trace ? std::string("no host name or time origin") : "not written by kscope") +
                             ": its times are kept as they are");
      continue;
    }
    const host_group& g = hosts[in.host_name];
    // origin - g.origin is in [0, 2^62), g.shift_ns too: the sum fits, checked all the same.
    const std::optional<std::int64_t> from_origin = detail::checked_sub(*in.time_origin_ns, g.origin_ns);
    const std::optional<std::int64_t> shift = from_origin ? detail::checked_add(*from_origin, g.shift_ns) : std::nullopt;
    // Every shifted timestamp stays within trace_merge_max_time_us, so that the merged
    // trace is a trace that merges again (1 us to spare: written with three decimals, a
    // timestamp reads back rounded to the nearest double, 1 us apart up there); an input
    // that would pass it keeps its times.
    const auto within = [](std::optional<std::int64_t> ns) {
      return ns && std::fabs(static_cast<double>(*ns)) < (trace_merge_max_time_us - 1) * 1000;
    };
    const detail::trace_scan& scan = scans[i];
    if (!shift || (scan.min_ts_ns && !within(detail::checked_add(*scan.min_ts_ns, *shift))) ||
        (scan.max_ts_ns && !within(detail::checked_add(*scan.max_ts_ns, *shift)))) {
      keep_as_it_is("its place on the time line is out of range");
      result.notes.push_back(in.name + ": placed on its host's time line, its timestamps would pass 9e15 us (285 "
                             "years): its times are kept as they are");
      continue;
    }
    in.shift_ns = *shift;
    in.clock = "steady clock of " + in.host_name + (by_wall ? " (hosts by wall clock)" : "");
  }

  // ---- pids: an input that collides with an earlier one moves to a fresh block.
  std::set<long long> used;
  std::map<int, std::size_t> rank_count;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    merged_trace_input& in = result.inputs[i];
    if (!in.error.empty()) continue;
    if (in.rank >= 0) ++rank_count[in.rank];
    const std::set<long long>& pids = scans[i].pids;
    bool collides = false;
    for (const long long pid : pids) collides = collides || used.count(pid) != 0;
    if (!collides) {
      for (const long long pid : pids) in.pids.emplace_back(pid, pid);
    } else {
      constexpr long long block = trace_pid_block;
      const auto floor_block = [](long long v) { return (v >= 0 ? v : v - (block - 1)) / block * block; };
      const long long base = floor_block(*used.rbegin()) + block;
      const long long delta = base - floor_block(*pids.begin());
      if (*pids.rbegin() + delta <= 2147483647LL) {
        for (const long long pid : pids) in.pids.emplace_back(pid, pid + delta);
      } else {
        // No block left below 2^31: the smallest free pids, one by one.
        long long next = 1;
        for (const long long pid : pids) {
          while (used.count(next) != 0) ++next;
          in.pids.emplace_back(pid, next++);
        }
      }
    }
    for (const auto& entry : in.pids) used.insert(entry.second);
  }
  for (const auto& [rank, count] : rank_count)
    if (count > 1)
      result.notes.push_back("rank " + std::to_string(rank) + " appears in " + std::to_string(count) +
                             " inputs (their pids are kept apart)");

  // ---- sort order: ranks in order (unknown last), each input's processes in their order.
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (result.inputs[i].error.empty()) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&result](std::size_t a, std::size_t b) {
    const int ra = result.inputs[a].rank, rb = result.inputs[b].rank;
    if ((ra < 0) != (rb < 0)) return ra >= 0;
    return ra < rb;
  });
  std::vector<std::map<long long, long long>> new_sort_index(inputs.size());
  for (std::size_t position = 0; position < order.size(); ++position) {
    const std::size_t i = order[position];
    std::vector<std::pair<double, long long>> by_index;
    for (const auto& [pid, index] : scans[i].sort_index) by_index.emplace_back(index, pid);
    std::sort(by_index.begin(), by_index.end());
    for (std::size_t j = 0; j < by_index.size(); ++j)
      new_sort_index[i][by_index[j].second] =
          static_cast<long long>(position) * static_cast<long long>(trace_merge_max_processes) + static_cast<long long>(j);
  }

  // ---- ids that bind across processes: each input after the ids of those before it.
  std::vector<std::uint64_t> id_offset(inputs.size(), 0);
  std::optional<std::uint64_t> highest_id;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const detail::trace_scan& scan = scans[i];
    if (!result.inputs[i].error.empty() || !scan.min_id) continue;
    if (highest_id && *scan.min_id <= *highest_id) id_offset[i] = *highest_id + 1 - *scan.min_id;
    highest_id = std::max(highest_id.value_or(0), *scan.max_id + id_offset[i]);
  }

  if (order.empty()) return result;

  // ---- the merged trace: every input's events, rewritten. Other tools' pids and ids are
  // integers: whole numbers are written back as integers (1000, never 1e3).
  constexpr detail::json_whole_numbers integers = detail::json_whole_numbers::as_integer;
  std::size_t capacity = 1024;
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (result.inputs[i].error.empty()) capacity += inputs[i].text.size() + inputs[i].text.size() / 8;
  std::string out;
  out.reserve(capacity);
  detail::json_writer w(out);
  w.begin_object();
  w.key("traceEvents").begin_array();
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    merged_trace_input& in = result.inputs[i];
    if (!in.error.empty()) continue;
    const std::map<long long, long long> pid_map(in.pids.begin(), in.pids.end());
    const std::uint64_t offset = id_offset[i];
    const auto write_id = [&w, offset](const detail::json_value& id) {
      const std::optional<std::uint64_t> value = detail::trace_binding_id(id);
      if (!value || offset == 0) {
        detail::write_json_value(w, id, integers);
      } else if (id.is_number()) {
        w.value(static_cast<unsigned long long>(*value + offset));
      } else {
        char hex[32];
        std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(*value + offset));
        w.value(hex);
      }
    };
    // The file's name before another tool's process names ("run.json: python3").
    const std::string name_prefix = in.kscope_trace ? std::string() : in.name + ": ";
    detail::json_cursor c(inputs[i].text);
    if (!scans[i].array_form) {
      c.begin_object();
      std::string key;
      while (c.next_member(key) && key != "traceEvents") c.skip_value();
    }
    c.begin_array();
    while (c.next_item()) {
      detail::json_value e;
      c.read_value(e, trace_merge_max_values_per_event);
      const std::string phase = e.member_string("ph", "");
      const std::string event_name = e.member_string("name", "");
      const detail::json_value* pid_value = e.find("pid");
      long long pid = 0;
      if (pid_value != nullptr) pid = static_cast<long long>(pid_value->number);
      w.begin_object();
      for (const auto& [key, value] : e.members) {
        w.key(key);
        if (key == "pid") {
          w.value(pid_map.at(pid));
        } else if (key == "ts") {
          // Checked when the input was read and placed (scan_trace, the clocks above): a
          // value here; were it not, the timestamp is kept as it was rather than made up.
          const std::optional<std::int64_t> ns = detail::trace_time_ns(value);
          const std::optional<std::int64_t> shifted = ns ? detail::checked_add(*ns, in.shift_ns) : std::nullopt;
          if (shifted) w.raw(detail::trace_us(*shifted));
          else detail::write_json_value(w, value, integers);
        } else if ((key == "id" && detail::trace_phase_binds_id(phase)) || key == "bind_id") {
          write_id(value);
        } else if (key == "id2" && value.is_object()) {
          w.begin_object();
          for (const auto& [id_key, id_value] : value.members) {
            w.key(id_key);
            if (id_key == "global") write_id(id_value);
            else detail::write_json_value(w, id_value, integers);
          }
          w.end_object();
        } else if (key == "args" && value.is_object() && phase == "M" && pid_value != nullptr &&
                   (event_name == "process_sort_index" || (event_name == "process_name" && !name_prefix.empty()))) {
          w.begin_object();
          for (const auto& [arg_key, arg] : value.members) {
            w.key(arg_key);
            if (event_name == "process_sort_index" && arg_key == "sort_index")
              w.value(new_sort_index[i].at(pid));
            else if (event_name == "process_name" && arg_key == "name" && arg.is_string())
              w.value(name_prefix + arg.string);
            else
              detail::write_json_value(w, arg, integers);
          }
          w.end_object();
        } else {
          detail::write_json_value(w, value, integers);
        }
      }
      w.end_object();
      ++result.events;
    }
  }
  w.end_array();
  w.member("displayTimeUnit", "ns");
  w.key("otherData").begin_object();
  w.member("schema", merged_trace_schema);
  w.member("producer", "kscope " KSCOPE_VERSION_STRING);
  w.member("kscope_version", KSCOPE_VERSION_STRING);
  w.member("clock_alignment", by_wall ? "steady clock per host; hosts lined up by wall clock"
                                      : "steady clock per host; each host's time line starts at 0");
  w.key("inputs").begin_array();
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const merged_trace_input& in = result.inputs[i];
    if (!in.error.empty()) continue;
    w.begin_object();
    w.member("name", in.name);
    if (in.rank >= 0) w.member("rank", in.rank);
    else w.key("rank").value(nullptr);
    w.member("process_id", in.process_id);
    w.member("host_name", in.host_name);
    w.member("kscope_trace", in.kscope_trace);
    if (in.time_origin_ns) w.member("time_origin_ns", static_cast<long long>(*in.time_origin_ns));
    else w.key("time_origin_ns").value(nullptr);
    if (in.wall_clock_offset_ns) w.member("wall_clock_offset_ns", static_cast<long long>(*in.wall_clock_offset_ns));
    else w.key("wall_clock_offset_ns").value(nullptr);
    w.member("shift_ns", static_cast<long long>(in.shift_ns));
    w.member("clock", in.clock);
    w.member("events", static_cast<unsigned long long>(in.events));
    if (const detail::json_value* devices = scans[i].other_data.find("devices")) {
      w.key("devices");
      detail::write_json_value(w, *devices, integers);
    }
    w.key("pids").begin_array();
    for (const auto& [from, to] : in.pids) w.begin_array().value(from).value(to).end_array();
    w.end_array();
    w.end_object();
  }
  w.end_array();
  w.key("notes").begin_array();
  for (const std::string& note : result.notes) w.value(note);
  w.end_array();
  w.end_object();
  w.end_object();
  result.json = std::move(out);
  return result;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace kscope
