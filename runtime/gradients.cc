#include "runtime/gradients.h"

#include <map>

namespace troupe::runtime {

namespace {

// The sum of several partial gradients of one output, or the one gradient there is.
Output sum_partials(GraphBuilder& b, const std::vector<Output>& parts) {
  if (parts.empty()) return Output{};
  if (parts.size() == 1) return parts[0];
  return b.add("AddN", parts);
}

}  // namespace

std::vector<Output> gradients(GraphBuilder& b, const std::vector<Output>& ys,
                              const std::vector<Output>& xs, const std::vector<Output>& grad_ys) {
  const Graph& g = b.graph();
  std::vector<Output> result(xs.size());
  if (!b.ok()) return result;
  for (const Output& o : ys) {
    if (!o.valid()) return result;
  }
  for (const Output& o : xs) {
    if (!o.valid()) return result;
  }
  if (!grad_ys.empty() && grad_ys.size() != ys.size()) {
    b.record_error(
        invalid_argument("gradients: ", grad_ys.size(), " grad_ys for ", ys.size(), " ys"));
    return result;
  }

  // Nodes that depend on some x, then those of them that some y depends on.
  const int n = g.num_nodes();
  std::vector<bool> from_x(n, false), needed(n, false);
  for (const Output& x : xs) from_x[x.node] = true;
  for (int id = 0; id < n; ++id) {
    if (from_x[id]) continue;
    for (const Output& in : g.node(id).inputs) {
      if (from_x[in.node]) {
        from_x[id] = true;
        break;
      }
    }
  }
  for (const Output& y : ys) needed[y.node] = from_x[y.node];
  for (int id = n - 1; id >= 0; --id) {
    if (!needed[id]) continue;
    for (const Output& in : g.node(id).inputs) {
      if (from_x[in.node]) needed[in.node] = true;
    }
  }

  auto scope = b.name_scope("gradients");
  std::map<Output, std::vector<Output>> pending;
  for (size_t i = 0; i < ys.size(); ++i) {
    Output dy = grad_ys.empty() || !grad_ys[i].valid() ? b.add("OnesLike", {ys[i]}) : grad_ys[i];
    pending[ys[i]].push_back(dy);
  }
  std::vector<bool> is_x(n, false);
  for (const Output& x : xs) is_x[x.node] = true;

  for (int id = n - 1; id >= 0 && b.ok(); --id) {
    if (!needed[id]) continue;
    const Node& node = g.node(id);
    // A node inside a cond's branch gets its gradient there too: what enters from outside
    // (the gradient of the cond's output) is live only when the branch was taken. A Switch
    // that took a value into a branch is differentiated where the value came from.
    const int context = b.context_of(id);
    auto in_node_context = b.enter_context(context);
    std::vector<Output> dys(node.num_outputs());
    bool any = false;
    for (int i = 0; i < node.num_outputs(); ++i) {
      auto it = pending.find(Output{id, i});
      if (it == pending.end()) continue;
      dys[i] = sum_partials(b, it->second);
      it->second = {dys[i]};  // an x that is also an inner node reads its total from here
      any = true;
    }
    if (!any || node.def->no_gradient) continue;
    if (!node.def->grad_fn) {
      b.record_error(unimplemented("no gradient defined for op ", node.op, " (node '", node.name,
                                   "'); wrap its input in StopGradient if none is wanted"));
      break;
    }
    bool has_upstream = false;
    for (const Output& in : node.inputs) has_upstream |= needed[in.node] || from_x[in.node];
    if (!has_upstream) continue;  // e.g. x itself is this node's output
    for (int i = 0; i < node.num_outputs(); ++i) {
      if (!dys[i].valid()) dys[i] = b.add("ZerosLike", {Output{id, i}});
    }
    auto node_scope = b.name_scope(node.name);
    auto in_grad_context =
        b.enter_context(node.op == "Switch" && context != 0 ? b.outer_context(context) : context);
    std::vector<Output> dxs = node.def->grad_fn(b, node, dys);
    for (size_t i = 0; i < dxs.size() && i < node.inputs.size(); ++i) {
      const Output& in = node.inputs[i];
      if (!dxs[i].valid() || !from_x[in.node] || !is_floating(g.dtype(in))) continue;
      pending[in].push_back(dxs[i]);
    }
  }
  for (size_t i = 0; i < xs.size() && b.ok(); ++i) {
    auto it = pending.find(xs[i]);
    if (it != pending.end()) result[i] = sum_partials(b, it->second);
  }
  return result;
}

}  // namespace troupe::runtime
