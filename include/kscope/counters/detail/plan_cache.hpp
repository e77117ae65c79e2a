// kscope/counters/detail/plan_cache.hpp — the per-scope counters' one-pass metric groups
// kept on disk between runs. Planning them asks CUPTI's host API one question per
// candidate group (~600 questions of ~3 ms for the default set on GH100: 2-5 s), and the
// answer depends only on the chip, the CUPTI and driver versions, the device's counter
// availability and the metrics asked for; so a run that finds a plan made for exactly
// those reads it in microseconds instead.
//
//   KSCOPE_CACHE_DIR=/path   where plans are kept; "" or "0": never read nor written
//   (unset)                  $XDG_CACHE_HOME/kscope, else $HOME/.cache/kscope
//
// A file is one plan in lines ("kscope counter plan 1", the key's lines, "group" lines,
// "note" lines, "end"); one that is not exactly that for this key (another key, a line
// not understood, a truncated write, a name with a blank in it) is ignored and the plan is
// made afresh and written over it. Writes go to a temporary file renamed into place, so a
// reader never sees half a plan. Pure text functions apart from the file ones, so the
// format is tested without a GPU (tests/counters_test.cpp).
#pragma once

#include "../../core/config.hpp"
#include "../../evidence/metrics.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace kscope {
namespace detail {

// What a plan was made for.
struct plan_cache_key {
  std::string chip;
  int cupti_version = 0;
  int driver_version = 0;
  std::uint64_t availability_hash = 0;  // of the device's counter-availability image
  std::vector<std::string> metrics;     // as asked for, in order
};

inline constexpr std::string_view plan_cache_header = "kscope counter plan 1";
inline constexpr std::size_t plan_cache_max_bytes = 1u << 20;

// FNV-1a of a byte image (the counter availability): stable across runs and builds.
[[nodiscard]] inline std::uint64_t plan_cache_hash(const std::vector<std::uint8_t>& bytes) noexcept {
  std::uint64_t h = 1469598103934665603ull;
  for (std::uint8_t b : bytes) {
    h ^= b;
    h *= 1099511628211ull;
  }
  return h;
}

// A metric name as the file holds it: printable, no blank (CUPTI's names are [a-z0-9_.]).
[[nodiscard]] inline bool plan_cache_name_ok(std::string_view name) noexcept {
  if (name.empty() || name.size() > 256) return false;
  for (char c : name)
    if (c <= ' ' || c == 0x7f) return false;
  return true;
}

// The key's lines, the groups and the notes as the file holds them; empty when a name
// cannot be written (it is then never kept).
[[nodiscard]] KSCOPE_DECL std::string plan_cache_text(const plan_cache_key& key, const one_pass_plan& plan);

// The plan in `text` when it was made for `key` and is whole; false (out untouched) otherwise.
[[nodiscard]] KSCOPE_DECL bool parse_plan_cache(std::string_view text, const plan_cache_key& key, one_pass_plan& out);

// Where plans are kept (KSCOPE_CACHE_DIR, else the user's cache directory); "" when off.
[[nodiscard]] KSCOPE_DECL std::string plan_cache_directory();

// The file for `key` in `directory`: one per key, named by a hash of its lines.
[[nodiscard]] KSCOPE_DECL std::string plan_cache_path(const std::string& directory, const plan_cache_key& key);

// Reads the plan for `key` (false when there is none, or none usable); writes it (quietly
// nothing when the directory cannot be made or written: the plan is only slower next time).
[[nodiscard]] KSCOPE_DECL bool read_plan_cache(const plan_cache_key& key, one_pass_plan& out, std::string* path = nullptr);
KSCOPE_DECL void write_plan_cache(const plan_cache_key& key, const one_pass_plan& plan);

#if KSCOPE_DETAIL_DEFINITIONS
namespace plan_cache_lines {
inline std::string key_lines(const plan_cache_key& key) {
  std::string out;
  out += "chip " + key.chip + "\n";
  out += "cupti " + std::to_string(key.cupti_version) + "\n";
  out += "driver " + std::to_string(key.driver_version) + "\n";
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(key.availability_hash));
  out += std::string("availability ") + hex + "\n";
  for (const std::string& m : key.metrics) out += "request " + m + "\n";
  return out;
}
}  // namespace plan_cache_lines

KSCOPE_DECL std::string plan_cache_text(const plan_cache_key& key, const one_pass_plan& plan) {
  if (!plan_cache_name_ok(key.chip) || plan.groups.empty()) return {};
  for (const std::string& m : key.metrics)
    if (!plan_cache_name_ok(m)) return {};
  std::string out(plan_cache_header);
  out += "\n" + plan_cache_lines::key_lines(key);
  for (const std::vector<std::string>& group : plan.groups) {
    if (group.empty()) return {};
    out += "group";
    for (const std::string& m : group) {
      if (!plan_cache_name_ok(m)) return {};
      out += " " + m;
    }
    out += "\n";
  }
  for (std::string note : plan.notes) {
    for (char& c : note)
      if (c == '\n' || c == '\r') c = ' ';
    out += "note " + note + "\n";
  }
  out += "end\n";
  return out;
}

KSCOPE_DECL bool parse_plan_cache(std::string_view text, const plan_cache_key& key, one_pass_plan& out) {
  if (text.size() > plan_cache_max_bytes) return false;
  const std::string expected_head = std::string(plan_cache_header) + "\n" + plan_cache_lines::key_lines(key);
  if (text.substr(0, expected_head.size()) != expected_head) return false;
  std::string_view rest = text.substr(expected_head.size());
  one_pass_plan plan;
  bool ended = false;
  while (!rest.empty()) {
    const std::size_t eol = rest.find('\n');
    if (eol == std::string_view::npos || ended) return false;  // a line without its end, or after "end"
    const std::string_view line = rest.substr(0, eol);
    rest.remove_prefix(eol + 1);
    if (line == "end") {
      ended = true;
    } else if (line.rfind("group ", 0) == 0) {
      std::vector<std::string> group;
      std::string_view names = line.substr(6);
      while (!names.empty()) {
        const std::size_t space = names.find(' ');
        const std::string_view name = names.substr(0, space);
        if (!plan_cache_name_ok(name)) return false;
        group.emplace_back(name);
        if (space == std::string_view::npos) break;
        names.remove_prefix(space + 1);
      }
      if (group.empty()) return false;
      plan.groups.push_back(std::move(group));
    } else if (line.rfind("note ", 0) == 0) {
      plan.notes.emplace_back(line.substr(5));
    } else {
      return false;
    }
  }
  if (!ended || plan.groups.empty()) return false;
  out = std::move(plan);
  return true;
}

KSCOPE_DECL std::string plan_cache_directory() {
  if (const char* dir = std::getenv("KSCOPE_CACHE_DIR")) {
    const std::string_view d(dir);
    return d.empty() || d == "0" ? std::string() : std::string(d);
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/kscope";
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] == '/') return std::string(home) + "/.cache/kscope";
  return {};
}

KSCOPE_DECL std::string plan_cache_path(const std::string& directory, const plan_cache_key& key) {
  const std::string lines = plan_cache_lines::key_lines(key);
  char name[48];
  std::snprintf(name, sizeof name, "/counter_plan_%016llx.txt",
                static_cast<unsigned long long>(plan_cache_hash(std::vector<std::uint8_t>(lines.begin(), lines.end()))));
  return directory + name;
}

KSCOPE_DECL bool read_plan_cache(const plan_cache_key& key, one_pass_plan& out, std::string* path) {
  const std::string directory = plan_cache_directory();
  if (directory.empty()) return false;
  const std::string file = plan_cache_path(directory, key);
  std::FILE* f = std::fopen(file.c_str(), "rb");
  if (f == nullptr) return false;
  std::string text(plan_cache_max_bytes + 1, '\0');
  const std::size_t n = std::fread(text.data(), 1, text.size(), f);
  std::fclose(f);
  text.resize(n);
  if (!parse_plan_cache(text, key, out)) return false;
  if (path != nullptr) *path = file;
  return true;
}

KSCOPE_DECL void write_plan_cache(const plan_cache_key& key, const one_pass_plan& plan) {
  const std::string directory = plan_cache_directory();
  const std::string text = plan_cache_text(key, plan);
  if (directory.empty() || text.empty()) return;
  // The directory and its parent (~/.cache may not exist yet), private to the user.
  if (const std::size_t slash = directory.rfind('/'); slash != std::string::npos && slash > 0)
    (void)::mkdir(directory.substr(0, slash).c_str(), 0700);
  (void)::mkdir(directory.c_str(), 0700);
  const std::string file = plan_cache_path(directory, key);
  const std::string temporary = file + ".tmp." + std::to_string(static_cast<long>(::getpid()));
  std::FILE* f = std::fopen(temporary.c_str(), "wb");
  if (f == nullptr) return;
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed || std::rename(temporary.c_str(), file.c_str()) != 0) (void)std::remove(temporary.c_str());
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
