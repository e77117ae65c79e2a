// kscope/activity/detail/graph_events.hpp — CUPTI's graph-node resource callbacks -> the capture table.
//
// The collector subscribes to two resource-domain callbacks (graph_nodes.hpp says why):
//   CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED  a node was added to a graph (stream capture,
//                                          cudaGraphAdd*Node), on the creating thread:
//                                          the scope open there built it;
//   CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED   cudaGraphInstantiate / cudaGraphClone copied a
//                                          node: the copy was built where its original was.
// In both, cbdata is a CUpti_ResourceData whose resourceDescriptor is a CUpti_GraphData
// (node, originalNode for clones). Node ids come from cuptiGetGraphNodeId, passed in so
// that the CPU tests drive this function with fake nodes and a fake id lookup.
//
// Every node type is recorded: kernel, memcpy and memset nodes are the ones activity
// records name, and the others (empty, event, host nodes) are few; filtering on nodeType
// would trust a field CUPTI documents only loosely for clones.
#pragma once

#include "../../core/config.hpp"
#include "../../cupti/detail/api.hpp"

#if KSCOPE_HAS_CUPTI

#include "../graph_nodes.hpp"

#include <cstdint>

namespace kscope {
namespace detail {

using graph_node_id_function = decltype(&::cuptiGetGraphNodeId);

enum class graph_node_event : std::uint8_t {
  recorded,          // the node (or the clone) now maps to its capture-time scope
  clone_of_unknown,  // a clone whose original was never seen: stays unknown
  no_id,             // no descriptor, no node, or cuptiGetGraphNodeId failed
  ignored,           // another resource callback
};

// One resource callback. `scope`: the node open on the calling thread (the collector
// passes detail::current_node()); used for CREATED only.
//
//   detail::record_graph_node_event(table, cbid, *resource, api.get_graph_node_id, detail::current_node());
KSCOPE_DECL graph_node_event record_graph_node_event(graph_node_table& table, CUpti_CallbackId cbid,
                                                const CUpti_ResourceData& data, graph_node_id_function get_id,
                                                node_id scope);

#if KSCOPE_DETAIL_DEFINITIONS
KSCOPE_DECL graph_node_event record_graph_node_event(graph_node_table& table, CUpti_CallbackId cbid,
                                                const CUpti_ResourceData& data, graph_node_id_function get_id,
                                                node_id scope) {
  if (cbid != CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED && cbid != CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) {
    return graph_node_event::ignored;
  }
  const auto* graph = static_cast<const CUpti_GraphData*>(data.resourceDescriptor);
  if (get_id == nullptr || graph == nullptr || graph->node == nullptr) return graph_node_event::no_id;
  std::uint64_t id = 0;
  if (get_id(graph->node, &id) != CUPTI_SUCCESS || id == 0) return graph_node_event::no_id;
  if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) {
    table.record_created(id, scope);
    return graph_node_event::recorded;
  }
  std::uint64_t original = 0;
  if (graph->originalNode == nullptr || get_id(graph->originalNode, &original) != CUPTI_SUCCESS || original == 0) {
    return graph_node_event::no_id;
  }
  return table.record_cloned(id, original) ? graph_node_event::recorded : graph_node_event::clone_of_unknown;
}
#endif  // KSCOPE_DETAIL_DEFINITIONS

}  // namespace detail
}  // namespace kscope

#endif  // KSCOPE_HAS_CUPTI
