// Graph <-> Cap'n Proto (schema/graph.capnp), for export, checkpoints and peers. Decoding rebuilds
// the graph through a GraphBuilder, so every node is checked again as if a user had built it.
//
//   std::vector<char> blob;
//   TROUPE_RETURN_IF_ERROR(encode_graph(graph, &blob));
//   Graph copy;
//   TROUPE_RETURN_IF_ERROR(decode_graph(std::make_shared<const std::vector<char>>(blob), &copy));
//
// Thread-safe: no shared state.
#pragma once

#include <memory>
#include <vector>

#include "runtime/graph.h"
#include "runtime/status.h"

namespace troupe::runtime {

Status encode_graph(const Graph& graph, std::vector<char>* out);
// `out` must be empty; errors name the node that could not be rebuilt.
Status decode_graph(std::shared_ptr<const std::vector<char>> bytes, Graph* out);

}  // namespace troupe::runtime
