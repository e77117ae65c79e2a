// kscope/evidence/detail/metric_names.hpp — the grammar of hardware-counter metric names and
// the distance between two names, for evidence/metrics.hpp's name checks and suggestions.
//
// A metric name is a base metric, a rollup and optionally a submetric:
//     dram__bytes_read . sum . per_second
//     sm__throughput   . avg . pct_of_peak_sustained_elapsed
//     lts__t_sector_hit_rate . pct          (a ratio metric: .pct, .ratio or .max_rate)
// A base name may carry a group prefix with a dot of its own ("TriageCompute.sm__throughput"
// was seen on GH100), so the split is not simply at the first dot: the base is everything
// before the first component that is a rollup or a ratio suffix.
//
// The profiler host API lists base metrics (cuptiProfilerHostGetBaseMetrics); a name is
// then valid when its base is listed and its suffix follows the grammar above. Exactly
// which submetrics a base has is the host API's to say (the CUPTI side builds a config
// with the name); this grammar catches the common mistakes — a missing rollup, a misspelt
// one — early, with a suggestion.
#pragma once

#include "../../core/config.hpp"
#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kscope {
namespace detail {

// A SASS instruction counter (sm__sass_*): counted by patching the kernels' code, which
// CUPTI does not do under user replay while its activity API traces (counters/collect.hpp).
inline bool is_sass_instruction_metric(std::string_view name) noexcept {
  return name.substr(0, 9) == "sm__sass_";
}

// Whether a metric group holds one: such a group is taken with kernel replay while the
// activity collector traces (counters/scope_counters.hpp).
inline bool has_sass_instruction_metric(const std::vector<std::string>& group) noexcept {
  return std::any_of(group.begin(), group.end(), [](const std::string& m) { return is_sass_instruction_metric(m); });
}

// The rollups of a counter or throughput metric, and the suffixes of a ratio metric.
inline constexpr std::string_view metric_rollups[] = {"sum", "avg", "min", "max"};
inline constexpr std::string_view metric_ratio_suffixes[] = {"pct", "ratio", "max_rate"};

// What may follow a rollup: the submetrics Nsight Compute documents for counters and
// throughputs ("Metrics Structure": peak_sustained*, per_cycle_*, per_second,
// pct_of_peak_sustained_*).
inline constexpr std::string_view metric_submetrics[] = {
    "peak_sustained",
    "peak_sustained_active",
    "peak_sustained_elapsed",
    "peak_sustained_region",
    "peak_sustained_frame",
    "per_cycle_active",
    "per_cycle_elapsed",
    "per_cycle_region",
    "per_cycle_frame",
    "per_second",
    "pct_of_peak_sustained_active",
    "pct_of_peak_sustained_elapsed",
    "pct_of_peak_sustained_region",
    "pct_of_peak_sustained_frame",
};

template <std::size_t N>
inline bool is_one_of(std::string_view word, const std::string_view (&list)[N]) noexcept {
  for (std::string_view w : list)
    if (w == word) return true;
  return false;
}

KSCOPE_DECL bool is_metric_rollup(std::string_view word) noexcept;
KSCOPE_DECL bool is_metric_ratio_suffix(std::string_view word) noexcept;
KSCOPE_DECL bool is_metric_submetric(std::string_view word) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL bool is_metric_rollup(std::string_view word) noexcept { return is_one_of(word, metric_rollups); }

KSCOPE_DECL bool is_metric_ratio_suffix(std::string_view word) noexcept { return is_one_of(word, metric_ratio_suffixes); }

KSCOPE_DECL bool is_metric_submetric(std::string_view word) noexcept { return is_one_of(word, metric_submetrics); }
#endif  // KSCOPE_DETAIL_DEFINITIONS

// A name cut into its base and the suffix after it (without the joining dot).
//   split_metric_name("dram__bytes_read.sum.per_second") -> {"dram__bytes_read", "sum.per_second"}
//   split_metric_name("TriageCompute.sm__throughput.avg") -> {"TriageCompute.sm__throughput", "avg"}
//   split_metric_name("dram__bytes_read") -> {"dram__bytes_read", ""}
struct metric_name_parts {
  std::string_view base;
  std::string_view suffix;
};

KSCOPE_DECL metric_name_parts split_metric_name(std::string_view name) noexcept;

// "" when `suffix` follows the grammar at the top of this header, else what is wrong.
//   metric_suffix_error("sum")                    -> ""
//   metric_suffix_error("avg.pct_of_peak_sustained_elapsed") -> ""
//   metric_suffix_error("")                       -> "needs a rollup: ..."
KSCOPE_DECL std::string metric_suffix_error(std::string_view suffix);

// Levenshtein distance (insert, delete, substitute: cost 1 each), two rows of memory.
//   edit_distance("dram__byte_read", "dram__bytes_read") == 1
KSCOPE_DECL std::size_t edit_distance(std::string_view a, std::string_view b);

KSCOPE_DECL std::size_t common_prefix_length(std::string_view a, std::string_view b) noexcept;

// Whether `candidate` is close enough to `query` to be worth suggesting: a few edits
// (a quarter of the query's length, at least 2: "dram__byte_read" for "dram__bytes_read",
// "sm__pipe_tensor_op_hmma_cycles_active" for "sm__pipe_tensor_cycles_active"), or a long
// shared beginning (two thirds of the query, at least 8 characters: a truncated name
// such as "dram__bytes" for "dram__bytes_read").
KSCOPE_DECL bool metric_names_close(std::string_view query, std::string_view candidate, std::size_t distance) noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL metric_name_parts split_metric_name(std::string_view name) noexcept {
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = name.find('.', start);
    if (dot == std::string_view::npos) return {name, {}};
    const std::size_t next = name.find('.', dot + 1);
    const std::string_view word = name.substr(dot + 1, next == std::string_view::npos ? std::string_view::npos
                                                                                     : next - dot - 1);
    if (is_metric_rollup(word) || is_metric_ratio_suffix(word)) return {name.substr(0, dot), name.substr(dot + 1)};
    start = dot + 1;
  }
}

KSCOPE_DECL std::string metric_suffix_error(std::string_view suffix) {
  if (suffix.empty())
    return "needs a rollup: .sum, .avg, .min or .max (a ratio metric: .pct, .ratio or .max_rate)";
  const std::size_t dot = suffix.find('.');
  const std::string_view first = suffix.substr(0, dot);
  const std::string_view rest = dot == std::string_view::npos ? std::string_view() : suffix.substr(dot + 1);
  if (is_metric_ratio_suffix(first)) {
    if (rest.empty()) return {};
    return "'." + std::string(first) + "' ends a ratio metric; nothing may follow it";
  }
  if (!is_metric_rollup(first))
    return "'" + std::string(first) + "' is not a rollup (.sum, .avg, .min, .max) or a ratio suffix (.pct, .ratio, "
           ".max_rate)";
  if (rest.empty() || is_metric_submetric(rest)) return {};
  return "'" + std::string(rest) + "' is not a submetric (peak_sustained*, per_cycle_*, per_second, "
         "pct_of_peak_sustained_*)";
}

KSCOPE_DECL std::size_t edit_distance(std::string_view a, std::string_view b) {
  if (a.size() < b.size()) std::swap(a, b);  // b is the shorter: the rows are its length
  std::vector<std::size_t> previous(b.size() + 1), current(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitute = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitute});
    }
    std::swap(previous, current);
  }
  return previous[b.size()];
}

KSCOPE_DECL std::size_t common_prefix_length(std::string_view a, std::string_view b) noexcept {
  std::size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

KSCOPE_DECL bool metric_names_close(std::string_view query, std::string_view candidate, std::size_t distance) noexcept {
  const std::size_t edits_allowed = std::max<std::size_t>(2, query.size() / 4);
  if (distance <= edits_allowed) return true;
  const std::size_t prefix_needed = std::max<std::size_t>(8, (2 * query.size() + 2) / 3);
  return common_prefix_length(query, candidate) >= prefix_needed;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
