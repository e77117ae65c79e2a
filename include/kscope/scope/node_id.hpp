// kscope/scope/node_id.hpp — the name of a call-path node, alone, so that headers which only
// pass node ids around (a disabled scope, the CUPTI attribution) need nothing heavier.
//
//   kscope::scope s{"decode"};
//   kscope::node_id id = s.node();   // the same id a report's scope_report::id carries
#pragma once

#include <cstdint>

namespace kscope {

// Identifies a node of the call-path tree: an interned (parent, name) pair.
using node_id = std::uint32_t;

namespace detail {

// The root of the call-path tree: "no scope open".
inline constexpr node_id root_node = 0;

}  // namespace detail
}  // namespace kscope
