// GraphBuilder: adds checked nodes to a Graph. Shape and dtype errors are found here, when the
// user builds the node, and kept as the builder's status (as TF's C++ Scope does): the failing
// call returns an invalid Output, later calls that use it add nothing, and status() tells what
// went wrong first and where.
//
//   Graph g;
//   GraphBuilder b(&g);
//   {
//     auto scope = b.name_scope("dense");
//     Output y = b.add_node("MatMul", {x, w}, {{"transpose_b", true}})[0];  // "dense/MatMul"
//   }
//   if (!b.status().ok()) std::cerr << b.status().to_string();
//
// ops/ wraps add_node in typed functions (ops::matmul(b, x, w)); most code calls those.
// Not thread-safe: one builder, one thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/graph.h"
#include "runtime/op_registry.h"
#include "runtime/status.h"

namespace troupe::runtime {

// Undoes a scope (name, device, control dependencies) when it goes out of scope.
class ScopeGuard {
 public:
  explicit ScopeGuard(std::function<void()> undo) : undo_(std::move(undo)) {}
  ScopeGuard(ScopeGuard&& o) noexcept : undo_(std::move(o.undo_)) { o.undo_ = nullptr; }
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;
  ~ScopeGuard() {
    if (undo_) undo_();
  }

 private:
  std::function<void()> undo_;
};

class GraphBuilder;

// A control-flow context that nodes are built in (ops/control_flow_ops.h: a branch of a cond,
// the frame of a while loop). An input built outside it enters through capture(), which adds
// the entering node (a Switch, an Enter) in the outer context; a node with no inputs waits for
// the pivot, so that it runs only on its branch, once per iteration.
class ControlFlowContext {
 public:
  virtual ~ControlFlowContext() = default;
  // `outer`, a value of the enclosing context, as a value of this one.
  virtual Output capture(GraphBuilder& b, Output outer) = 0;
  virtual int pivot() const = 0;
  // How errors name it: "cond 'cond'", "while 'while'".
  virtual std::string name() const = 0;
  // A while loop's frame (a control input from outside would cross frames into it), not a
  // cond's branch (where one may stand).
  virtual bool is_loop() const = 0;
  // Whether capture() also takes values of context `from`, which is not around this one: the
  // loop that runs a loop's gradient takes the forward loop's values from stacks.
  virtual bool imports_from(int /*from*/) const { return false; }
  // A while loop's Exits, and its gradient (runtime/gradients.h asks at the Exits): given
  // d(each Exit), invalid where none, the loop that runs the body's gradient backwards, and
  // d(each value that entered the loop) as (value, gradient) pairs. Not loops: none.
  virtual std::vector<Output> loop_exits() const { return {}; }
  virtual std::vector<std::pair<Output, Output>> loop_gradient(GraphBuilder& /*b*/,
                                                               const std::vector<Output>& /*d*/) {
    return {};
  }
  // A loop's gradient's loop: `value`, of the forward loop's body or of a cond's branch inside
  // it, pushed there each time it is computed and popped in context `into` (this loop, or a
  // branch inside it that runs in the iterations the value's branch ran, backwards). Others:
  // invalid.
  virtual Output pop_forward(GraphBuilder& /*b*/, Output /*value*/, int /*into*/) { return {}; }
  // A cond's branch inside a loop's body, when the body is differentiated: a branch of the
  // gradient's loop, built in the current context (the gradient's of this one's outer context),
  // taken in the iterations this one was: its number. Not a cond's branch: 0.
  virtual int gradient_branch(GraphBuilder& /*b*/) { return 0; }
  // Such a gradient branch: zeros shaped as the forward value `like` (of the context around
  // its cond), live only in the iterations the branch was not taken; built in the current
  // context, the one around this. Others: invalid.
  virtual Output untaken_zeros(GraphBuilder& /*b*/, Output /*like*/) { return {}; }
};

class GraphBuilder {
 public:
  explicit GraphBuilder(Graph* graph) : graph_(graph) {}

  // Adds a node of `op`; returns its outputs, or an empty vector after an error.
  std::vector<Output> add_node(const std::string& op, const std::vector<Output>& inputs,
                               AttrMap attrs = {}, const std::string& name = "");
  // The same, for ops with one output: that output, or an invalid Output.
  Output add(const std::string& op, const std::vector<Output>& inputs, AttrMap attrs = {},
             const std::string& name = "");

  const Status& status() const { return status_; }
  bool ok() const { return status_.ok(); }
  // Records an error found by a builder function (the first one wins).
  void record_error(Status s);

  Graph& graph() { return *graph_; }
  const Graph& graph() const { return *graph_; }
  DType dtype(Output o) const { return graph_->dtype(o); }
  const Shape& shape(Output o) const { return graph_->shape(o); }

  [[nodiscard]] ScopeGuard name_scope(const std::string& scope);
  [[nodiscard]] ScopeGuard device(const std::string& device);
  [[nodiscard]] ScopeGuard control_dependencies(const std::vector<int>& nodes);
  // Leaves every name scope until the guard ends: for graph-wide nodes such as global_step.
  [[nodiscard]] ScopeGuard root_name_scope();
  // A unique node name under the current scope: "dense/MatMul", then "dense/MatMul_1".
  std::string unique_name(const std::string& base);

  // Op-level seeds for random ops, following tf.set_random_seed's rules: with a graph seed and
  // no op seed, the op gets a seed derived from the node count, so that reruns repeat.
  std::pair<int64_t, int64_t> random_seeds(int64_t op_seed) const;

  // Control-flow contexts (ops/control_flow_ops.h), numbered from 1; 0 is the graph outside
  // every one. A node belongs to the context current when it was built. The control-flow ops
  // themselves take their inputs as given: cond and while_loop wire them.
  // A new context inside the current one: its number.
  int add_context(std::unique_ptr<ControlFlowContext> context);
  [[nodiscard]] ScopeGuard enter_context(int id);
  int current_context() const { return current_context_; }
  int context_of(int node) const {
    return node >= 0 && node < static_cast<int>(node_context_.size()) ? node_context_[node] : 0;
  }
  // `node`, built outside context `id`, belongs to it (a pivot, a loop's Merge).
  void set_context(int node, int id);
  ControlFlowContext& context(int id) { return *contexts_[id - 1]; }
  const ControlFlowContext& context(int id) const { return *contexts_[id - 1]; }
  int outer_context(int id) const { return outer_of_[id]; }
  // `o` as a value of the current context: a value from outside enters it, through every
  // context between; invalid, with the error recorded, when `o` was built inside a context the
  // current one is not within.
  Output capture(Output o);
  // The innermost while loop's context around context `id` (itself when a loop), or 0.
  int loop_around(int id) const;

  // While a gradient is built (runtime/gradients.cc), the context in which the gradient of a
  // node of context `forward` is built: a cond's branch inside a loop's body has a branch of
  // its own in the gradient's loop. Outside a gradient: `forward` itself.
  int gradient_context(int forward) {
    return gradient_context_ ? gradient_context_(forward) : forward;
  }
  [[nodiscard]] ScopeGuard map_gradient_contexts(std::function<int(int)> map);

 private:
  // `in` as a value of the current context: captured into it, context by context, when it was
  // built outside; an error when it was built inside a context the current one is not within.
  Status bring_in(Output* in);

  Graph* graph_;
  Status status_;
  std::vector<std::string> scopes_;
  std::vector<std::string> devices_;
  std::vector<std::vector<int>> control_deps_;
  std::vector<std::unique_ptr<ControlFlowContext>> contexts_;
  std::vector<int> outer_of_{0};   // by context number
  std::vector<int> node_context_;  // by node id; nodes beyond it were built outside any
  int current_context_ = 0;
  std::function<int(int)> gradient_context_;
};

}  // namespace troupe::runtime
