// kscope/scope/detail/node_cache.hpp — a per-thread map (parent, name) -> node, so that a
// scope named at run time finds its node without the recorder's lock.
//
// Call sites (KSCOPE_SCOPE) cache their node themselves; this cache serves scopes whose
// name is a run-time string, which would otherwise take the lock on every opening.
//
//   const std::uint64_t h = detail::hash_name(name, parent);
//   node_id n = cache.find(parent, name, h);   // each thread's cache: recorder.hpp
//   if (n == detail::node_cache::invalid) { /* intern under the lock, then insert */ }
#pragma once

#include "../../core/config.hpp"
#include "thread_state.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kscope {
namespace detail {

// FNV-1a: names are short; this is cheaper than std::hash's setup and stable.
inline std::uint64_t hash_name(std::string_view s, node_id parent) noexcept {
  std::uint64_t h = 1469598103934665603ull ^ (static_cast<std::uint64_t>(parent) * 0x9E3779B97F4A7C15ull);
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// Open addressing; grows at half load.
class node_cache {
 public:
  static constexpr node_id invalid = 0xffffffffu;

  node_id find(node_id parent, std::string_view name, std::uint64_t hash) const noexcept {
    if (slots_.empty()) return invalid;
    for (std::size_t i = hash & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      const slot& s = slots_[i];
      if (s.node == invalid) return invalid;
      if (s.hash == hash && s.parent == parent && s.name == name) return s.node;
    }
  }
  void insert(node_id parent, std::string_view name, std::uint64_t hash, node_id node);
  void clear() noexcept {
    slots_.clear();
    used_ = 0;
  }

 private:
  struct slot {
    std::uint64_t hash = 0;
    node_id parent = 0;
    node_id node = invalid;
    std::string name;
  };
  void rehash(std::size_t n);
  std::vector<slot> slots_;
  std::size_t used_ = 0;
};

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL void node_cache::insert(node_id parent, std::string_view name, std::uint64_t hash, node_id node) {
  if ((used_ + 1) * 2 > slots_.size()) rehash(slots_.empty() ? 64 : slots_.size() * 2);
  for (std::size_t i = hash & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
    slot& s = slots_[i];
    if (s.node == invalid) {
      s = slot{hash, parent, node, std::string(name)};
      ++used_;
      return;
    }
  }
}

KSCOPE_DECL void node_cache::rehash(std::size_t n) {
  std::vector<slot> old = std::move(slots_);
  slots_.assign(n, slot{});
  used_ = 0;
  for (slot& s : old)
    if (s.node != invalid) insert(s.parent, s.name, s.hash, s.node);
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope
