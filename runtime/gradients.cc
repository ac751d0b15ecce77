#include "runtime/gradients.h"

#include <functional>
#include <map>
#include <set>

namespace troupe::runtime {

namespace {

// The sum of several partial gradients of one output, or the one gradient there is.
Output sum_partials(GraphBuilder& b, const std::vector<Output>& parts) {
  if (parts.empty()) return Output{};
  if (parts.size() == 1) return parts[0];
  return b.add("AddN", parts);
}

}  // namespace

namespace {

// Nodes that depend on some x, then those of them that some y depends on. A loop's back edge
// runs from a later node to an earlier one: both passes go round until nothing changes. Within
// a body, an iteration's values reach the next one's through the loop, which differentiates
// that step itself: back edges are not followed.
void reach(const Graph& g, const std::vector<Output>& ys, const std::vector<Output>& xs, int body,
           std::vector<bool>* from_x, std::vector<bool>* needed) {
  const int n = g.num_nodes();
  from_x->assign(n, false);
  needed->assign(n, false);
  for (const Output& x : xs) (*from_x)[x.node] = true;
  for (bool changed = true; changed;) {
    changed = false;
    for (int id = 0; id < n; ++id) {
      if ((*from_x)[id]) continue;
      const Node& node = g.node(id);
      for (size_t k = 0; k < node.inputs.size(); ++k) {
        if (body != 0 && g.is_back_edge(node, static_cast<int>(k))) continue;
        if ((*from_x)[node.inputs[k].node]) {
          (*from_x)[id] = changed = true;
          break;
        }
      }
    }
  }
  for (const Output& y : ys) (*needed)[y.node] = (*from_x)[y.node];
  for (bool changed = true; changed;) {
    changed = false;
    for (int id = n - 1; id >= 0; --id) {
      if (!(*needed)[id]) continue;
      for (const Output& in : g.node(id).inputs) {
        if ((*from_x)[in.node] && !(*needed)[in.node]) (*needed)[in.node] = changed = true;
      }
    }
  }
}

// gradients(), and a loop's body's (body: its context, differentiated where the builder is).
std::vector<Output> differentiate(GraphBuilder& b, const std::vector<Output>& ys,
                                  const std::vector<Output>& xs, const std::vector<Output>& grad_ys,
                                  int body) {
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

  const int n = g.num_nodes();
  std::vector<bool> from_x, needed;
  reach(g, ys, xs, body, &from_x, &needed);

  auto scope = b.name_scope("gradients");
  std::map<Output, std::vector<Output>> pending;
  for (size_t i = 0; i < ys.size(); ++i) {
    Output dy = grad_ys.empty() || !grad_ys[i].valid() ? b.add("OnesLike", {ys[i]}) : grad_ys[i];
    pending[ys[i]].push_back(dy);
  }
  std::vector<bool> is_x(n, false);
  for (const Output& x : xs) is_x[x.node] = true;
  auto give = [&](const Output& in, const Output& dx) {
    if (dx.valid() && from_x[in.node] && is_floating(g.dtype(in))) pending[in].push_back(dx);
  };

  // The context a node's gradient is built in: where the gradients are asked for, for a node of
  // the body (or of the graph); a cond's own branch outside loops. In a loop's body, a cond's
  // branch has a branch of the gradient's loop, made when first needed.
  const int here = b.current_context();
  std::map<int, int> branches;
  std::function<int(int)> grad_context_of = [&](int c) -> int {
    if (c == body) return here;
    if (body == 0 || b.loop_around(c) != body) return c;
    auto it = branches.find(c);
    if (it != branches.end()) return it->second;
    const int outer = grad_context_of(b.outer_context(c));
    auto in_outer = b.enter_context(outer);
    const int made = b.context(c).gradient_branch(b);
    if (made == 0) {
      b.record_error(internal_error("no gradient branch for ", b.context(c).name()));
      return outer;
    }
    return branches[c] = made;
  };
  auto mapped = b.map_gradient_contexts(grad_context_of);
  std::set<int> loops_done;
  for (int id = n - 1; id >= 0 && b.ok(); --id) {
    if (!needed[id]) continue;
    const Node& node = g.node(id);
    const int context = b.context_of(id);
    // A while loop is differentiated whole, at its Exits: a loop that runs its body's gradient
    // backwards (ops/control_flow_ops.h). Its own nodes are that loop's to differentiate.
    if (node.op == "Exit") {
      const int loop = b.context_of(node.inputs[0].node);
      if (loop != 0 && b.context(loop).is_loop()) {
        if (!loops_done.insert(loop).second) continue;
        auto around = b.enter_context(grad_context_of(context));
        const std::vector<Output> exits = b.context(loop).loop_exits();
        std::vector<Output> d_exits(exits.size());
        for (size_t i = 0; i < exits.size(); ++i) {
          auto it = pending.find(exits[i]);
          if (it != pending.end()) d_exits[i] = sum_partials(b, it->second);
        }
        for (const auto& [in, dx] : b.context(loop).loop_gradient(b, d_exits)) give(in, dx);
        continue;
      }
    }
    if (b.loop_around(context) != body) continue;  // a nested loop's, at that loop's Exits
    // A node inside a cond's branch gets its gradient in that branch (or its gradient branch):
    // what enters from outside (the gradient of the cond's output) is live only when the branch
    // was taken. A Switch that took a value into a branch is differentiated where the value came
    // from. A loop's body is differentiated inside the loop that runs it backwards.
    const int grad_context = grad_context_of(context);
    if (!b.ok()) break;
    const bool into_branch = node.op == "Switch" && context != body;
    auto in_node_context = b.enter_context(grad_context);
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
    auto node_scope = b.name_scope(node.name);
    for (int i = 0; i < node.num_outputs(); ++i) {
      if (dys[i].valid()) continue;
      if (into_branch && grad_context != context) {
        // In a gradient branch, the forward output not taken was dead whenever the branch ran:
        // its zeros are live in the iterations the branch was not taken.
        auto around = b.enter_context(b.outer_context(grad_context));
        dys[i] = b.context(grad_context).untaken_zeros(b, node.inputs[0]);
      } else {
        dys[i] = b.add("ZerosLike", {Output{id, i}});
      }
    }
    auto in_grad_context =
        b.enter_context(into_branch ? b.outer_context(grad_context) : grad_context);
    std::vector<Output> dxs = node.def->grad_fn(b, node, dys);
    for (size_t i = 0; i < dxs.size() && i < node.inputs.size(); ++i) give(node.inputs[i], dxs[i]);
  }
  for (size_t i = 0; i < xs.size() && b.ok(); ++i) {
    auto it = pending.find(xs[i]);
    if (it != pending.end()) result[i] = sum_partials(b, it->second);
  }
  return result;
}

}  // namespace

std::vector<Output> gradients(GraphBuilder& b, const std::vector<Output>& ys,
                              const std::vector<Output>& xs, const std::vector<Output>& grad_ys) {
  return differentiate(b, ys, xs, grad_ys, /*body=*/0);
}

std::vector<Output> body_gradients(GraphBuilder& b, const std::vector<Output>& ys,
                                   const std::vector<Output>& xs,
                                   const std::vector<Output>& grad_ys, int body) {
  return differentiate(b, ys, xs, grad_ys, body);
}

}  // namespace troupe::runtime
