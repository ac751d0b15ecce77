#include "runtime/constant_folding.h"

#include <algorithm>
#include <set>
#include <string>

#include "runtime/executor.h"
#include "runtime/variable_store.h"

namespace troupe::runtime {

namespace {

// Ops whose outputs depend on their inputs alone: no state, no randomness, no variables.
const std::set<std::string>& pure_ops() {
  static const std::set<std::string> ops = {
      "Identity",     "StopGradient", "Cast",      "Reshape",  "ReshapeLike", "ExpandDims",
      "Squeeze",      "Fill",         "ZerosLike", "OnesLike", "BroadcastTo", "BroadcastToShapeOf",
      "SumToShapeOf", "Size",         "Neg",       "Add",      "Sub",         "Mul",
      "Div",          "Square",       "Sqrt",      "Maximum",  "Minimum"};
  return ops;
}

// Inputs that an op reads only for their shape.
bool shape_only(const std::string& op, size_t input) {
  if (op == "OnesLike" || op == "ZerosLike" || op == "Size") return input == 0;
  if (op == "BroadcastToShapeOf" || op == "ReshapeLike" || op == "SumToShapeOf") return input == 1;
  return false;
}

}  // namespace

std::map<int, std::vector<Tensor>> fold_constants(const Graph& g, const std::vector<int>& order,
                                                  const std::vector<Output>& fed) {
  auto is_fed = [&](int node) {
    return std::any_of(fed.begin(), fed.end(), [&](const Output& o) { return o.node == node; });
  };
  std::vector<bool> fixed(g.num_nodes(), false);
  std::vector<int> folded;
  FeedList shapes;  // stand-ins for the inputs read for their shape alone, and pivoted constants
  std::set<std::pair<int, int>> stood_in;
  for (int id : order) {
    const Node& n = g.node(id);
    if (is_fed(id)) continue;
    if (n.op == "Const") {
      fixed[id] = true;
      continue;
    }
    if (!pure_ops().count(n.op) || !n.control_inputs.empty()) continue;
    bool ok = true;
    for (size_t i = 0; ok && i < n.inputs.size(); ++i) {
      const Output& in = n.inputs[i];
      if (fixed[in.node] && !is_fed(in.node)) continue;
      ok = shape_only(n.op, i) && g.shape(in).fully_defined() && g.dtype(in) != DType::kString;
    }
    if (!ok) continue;
    fixed[id] = true;
    folded.push_back(id);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const Output& in = n.inputs[i];
      const Node& from = g.node(in.node);
      // A constant inside a loop or a branch waits for its frame's pivot: given, it is cut off.
      const bool pivoted = from.op == "Const" && !from.control_inputs.empty();
      if ((fixed[in.node] && !pivoted) || !stood_in.insert({in.node, in.index}).second) continue;
      shapes.push_back(
          {in, pivoted ? from.attr<Tensor>("value") : Tensor(g.dtype(in), g.shape(in))});
    }
  }
  std::map<int, std::vector<Tensor>> out;
  if (folded.empty()) return out;
  std::vector<Output> fetches;
  for (int id : folded) {
    for (int k = 0; k < g.node(id).num_outputs(); ++k) fetches.push_back(Output{id, k});
  }
  VariableStore none;
  Executor executor(g, {.variables = &none});
  auto values = executor.run(shapes, fetches);
  if (!values.ok()) return out;  // the step that runs these nodes reports the error
  size_t at = 0;
  for (int id : folded) {
    std::vector<Tensor>& v = out[id];
    for (int k = 0; k < g.node(id).num_outputs(); ++k) v.push_back((*values)[at++]);
  }
  return out;
}

}  // namespace troupe::runtime
