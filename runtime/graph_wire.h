// Nodes and attributes inside Cap'n Proto messages, shared by the graph codec and the wire codecs
// of actors/ (a shard call carries one node). For codec code only.
//
//   TROUPE_RETURN_IF_ERROR(write_node(graph, node, msg.initNode(), builder.getOrphanage()));
//   AttrMap attrs;
//   TROUPE_RETURN_IF_ERROR(read_attrs(reader.getNode().getAttrs(), keep_alive, &attrs));
//
// Thread-safe: no shared state.
#pragma once

#include <memory>

#include "runtime/attr.h"
#include "runtime/graph.h"
#include "runtime/status.h"
#include "schema/graph.capnp.h"

namespace troupe::runtime {

Status write_node(const Graph& graph, const Node& node, schema::NodeDef::Builder msg,
                  capnp::Orphanage orphanage);
Status read_attrs(capnp::List<schema::Attr>::Reader attrs, std::shared_ptr<const void> keep_alive,
                  AttrMap* out);

}  // namespace troupe::runtime
