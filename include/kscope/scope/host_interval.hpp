// kscope/scope/host_interval.hpp — one execution of a host scope on one thread, on the ns
// clock: what the session hands the trace writer and the GPU-time accounting.
//
//   kscope::host_interval h{"decode", node, thread_index, start_ns, end_ns};
#pragma once

#include "node_id.hpp"

#include <cstdint>
#include <string_view>

namespace kscope {

// `name` must stay valid while the interval is used. node: the scope's call-path node
// (detail::root_node, "(unscoped)", when none).
struct host_interval {
  std::string_view name;
  node_id node = detail::root_node;
  std::uint32_t thread_index = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

}  // namespace kscope
