// kscope/report/rank.hpp — which rank this process is, and per-rank report file names.
//
// With one process per GPU (torchrun, mpirun, srun), every process writes its own report;
// putting the rank in the file name keeps them apart, and `kscope merge` (merge.hpp)
// combines them. Pure C++: reads the environment only, no MPI or NCCL needed.
//
//   kscope::set_rank(my_rank);                               // optional: else from the environment
//   auto r = kscope::session::global().report();
//   kscope::write_json_for_rank(r, "run.json");              // -> run.rank3.json
#pragma once

#include "../core/config.hpp"

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

namespace kscope {

// The environment variables detect_rank() reads, in this order; the first one that is set
// AND holds a valid rank wins. RANK (torchrun, torch.distributed, DeepSpeed) is the global
// rank; LOCAL_RANK is torchrun's rank on this node, used only when RANK is absent; then
// Open MPI, then MPICH/Intel MPI (PMI_RANK), then Slurm's srun (SLURM_PROCID).
inline constexpr const char* rank_environment_variables[] = {
    "RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"};

namespace detail {

// A rank is a decimal integer in [0, INT_MAX], surrounding blanks allowed. Anything else
// ("", "-1", "3x", "1e3", "99999999999") is not a rank: the result is empty.
[[nodiscard]] KSCOPE_DECL std::optional<int> parse_rank(const char* text) noexcept;

// set_rank()'s value; -1: not set. Atomic because any thread may ask.
KSCOPE_DECL std::atomic<int>& rank_override() noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::optional<int> parse_rank(const char* text) noexcept {
  if (text == nullptr) return std::nullopt;
  const char* p = text;
  while (*p == ' ' || *p == '\t') ++p;
  if (*p < '0' || *p > '9') return std::nullopt;  // also rejects '+', '-' and ""
  long long value = 0;
  while (*p >= '0' && *p <= '9') {
    value = value * 10 + (*p - '0');
    if (value > INT_MAX) return std::nullopt;
    ++p;
  }
  while (*p == ' ' || *p == '\t' || *p == '\n') ++p;
  if (*p != '\0') return std::nullopt;
  return static_cast<int>(value);
}

KSCOPE_DECL std::atomic<int>& rank_override() noexcept {
  static std::atomic<int> value{-1};
  return value;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail

// The rank from the environment (see rank_environment_variables for the order); empty when
// none is set or every one that is set is malformed (a malformed value is skipped, so a
// valid variable later in the order still counts).
//
//   if (auto r = kscope::detect_rank()) std::printf("rank %d\n", *r);
[[nodiscard]] KSCOPE_DECL std::optional<int> detect_rank() noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::optional<int> detect_rank() noexcept {
  for (const char* name : rank_environment_variables) {
    if (auto rank = detail::parse_rank(std::getenv(name))) return rank;
  }
  return std::nullopt;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Overrides the environment (e.g. with MPI_Comm_rank's or torch.distributed's rank). A
// negative value clears the override.
//
//   kscope::set_rank(dist_rank);
KSCOPE_DECL void set_rank(int rank) noexcept;
KSCOPE_DECL void clear_rank() noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void set_rank(int rank) noexcept { detail::rank_override().store(rank < 0 ? -1 : rank); }

KSCOPE_DECL void clear_rank() noexcept { detail::rank_override().store(-1); }
#endif  // KSCOPE_DETAIL_DEFINITIONS

// set_rank()'s value if set, else detect_rank().
//
//   auto r = kscope::current_rank();
[[nodiscard]] KSCOPE_DECL std::optional<int> current_rank() noexcept;

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::optional<int> current_rank() noexcept {
  const int forced = detail::rank_override().load();
  if (forced >= 0) return forced;
  return detect_rank();
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// "run.json" -> "run.rank3.json": ".rank<N>" goes before the extension of the last path
// component ("out/run" -> "out/run.rank3", "dir.d/run" -> "dir.d/run.rank3",
// ".hidden" -> ".hidden.rank3"). Without a rank the name is returned unchanged.
//
//   std::string file = kscope::rank_file_name("run.json");            // current_rank()
//   std::string file0 = kscope::rank_file_name("run.json", 0);        // "run.rank0.json"
[[nodiscard]] KSCOPE_DECL std::string rank_file_name(std::string_view base, std::optional<int> rank);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string rank_file_name(std::string_view base, std::optional<int> rank) {
  if (!rank || *rank < 0) return std::string(base);
  const std::size_t slash = base.find_last_of("/\\");
  const std::size_t name_start = slash == std::string_view::npos ? 0 : slash + 1;
  std::size_t dot = base.rfind('.');
  // No dot in the last component, or only a leading one (".hidden"): append.
  if (dot == std::string_view::npos || dot <= name_start) dot = base.size();
  std::string out(base.substr(0, dot));
  out += ".rank" + std::to_string(*rank);
  out += base.substr(dot);
  return out;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS
[[nodiscard]] KSCOPE_DECL std::string rank_file_name(std::string_view base);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL std::string rank_file_name(std::string_view base) {
  return rank_file_name(base, current_rank());
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

// Writes `report.write_json()` to rank_file_name(base); returns the file name written, or
// "" when it could not be written (nothing thrown; *error, when given, says why:
// "cannot write run.rank3.json: No space left on device"). The write is all or nothing
// (session_report::write_json, core/detail/atomic_file.hpp): a failure leaves the previous
// file of that rank intact. Works with any type that has
// `bool write_json(const std::string&) const` (session_report); with `error`, with
// `bool write_json(const std::string&, std::string*) const`.
//
//   std::string why;
//   std::string file = kscope::write_json_for_rank(kscope::session::global().report(), "run.json", &why);
template <class Report>
std::string write_json_for_rank(const Report& report, std::string_view base) noexcept {
  try {
    std::string file = rank_file_name(base);
    return report.write_json(file) ? file : std::string();
  } catch (...) {
    return std::string();
  }
}
template <class Report>
std::string write_json_for_rank(const Report& report, std::string_view base, std::string* error) noexcept {
  try {
    std::string file = rank_file_name(base);
    return report.write_json(file, error) ? file : std::string();
  } catch (...) {
    return std::string();
  }
}

}  // namespace kscope
