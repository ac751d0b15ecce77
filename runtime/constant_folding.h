// Constant folding for a plan: the nodes whose values are fixed before any step runs, computed
// once. A node is fixed when its op is pure and each input is a constant, another fixed node,
// or an input the op reads only for its shape, which the graph knows in full. The gradient of
// a mean, for one: ones_like(loss), expand_dims, broadcast to the input's shape, divide by the
// count; with a known batch size all of it is one constant. A runtime binds the values into
// the consumers like constants: no kernel, no message per step. Inside a loop or a branch, a
// constant waits for its frame's pivot (a control edge) and still counts as one; a runtime
// that runs frames keeps a folded node there as a constant of its frame.
//
//   auto folded = fold_constants(graph, order, fed);    // node id -> its outputs' values
//   if (folded.count(id)) { ... bind folded[id][index] ... }
//
// Nodes that fail to evaluate are left alone: their error belongs to the step that runs them.
#pragma once

#include <map>
#include <vector>

#include "runtime/graph.h"
#include "runtime/tensor.h"

namespace troupe::runtime {

// `order` is a plan's nodes in topological order, `fed` the outputs it feeds (never folded).
// Constants ("Const") are not in the result; they carry their value already.
std::map<int, std::vector<Tensor>> fold_constants(const Graph& graph, const std::vector<int>& order,
                                                  const std::vector<Output>& fed);

}  // namespace troupe::runtime
