#include "ops/control_flow_ops.h"

#include <map>
#include <memory>

#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/op_def_names.h"
#include "ops/shape_fns.h"

namespace troupe::ops {

namespace {

// The shape every one of `shapes` has: a dimension they disagree on is unknown, and so is the
// rank when that differs.
Shape common_shape(const std::vector<Shape>& shapes) {
  Shape out = shapes[0];
  for (const Shape& s : shapes) {
    if (!out.rank_known()) break;
    if (!s.rank_known() || s.rank() != out.rank()) return Shape::unknown();
    std::vector<int64_t> dims;
    for (int d = 0; d < out.rank(); ++d) {
      dims.push_back(out.dim(d) == s.dim(d) ? out.dim(d) : Shape::kUnknownDim);
    }
    out = Shape(dims);
  }
  return out;
}

Status scalar_predicate(InferenceContext& c, int i) {
  if (c.input_dtype(i) != DType::kBool) {
    return c.error("the predicate must be bool, got ", dtype_name(c.input_dtype(i)));
  }
  if (c.input_shape(i).rank_known() && c.input_shape(i).rank() != 0) {
    return c.error("the predicate must be a scalar, got shape ", c.input_shape(i));
  }
  return runtime::ok_status();
}

// A loop's gradient needs the forward values of every iteration, kept on stacks: not built yet.
Grads no_loop_gradient(GraphBuilder& b, const Node& n, const Grads&) {
  b.record_error(
      runtime::unimplemented("no gradient through a while loop yet (", n.op, " '", n.name,
                             "'): wrap the loop's outputs in StopGradient, or unroll the loop"));
  return {};
}

}  // namespace

// (output_false, output_true) = pred ? (dead, data) : (data, dead)
// d data = Merge(d output_false, d output_true): the gradient of the branch taken
TROUPE_REGISTER_OP(Switch)
    .input("data")
    .input("pred")
    .output("output_false")
    .output("output_true")
    .shape_fn([](InferenceContext& c) -> Status {
      TROUPE_RETURN_IF_ERROR(scalar_predicate(c, 1));
      c.set_output(0, c.input_dtype(0), c.input_shape(0));
      c.set_output(1, c.input_dtype(0), c.input_shape(0));
      return runtime::ok_status();
    })
    .gradient([](GraphBuilder& b, const Node&, const Grads& dy) {
      return Grads{merge(b, {dy[0], dy[1]}).first, Output{}};
    })
    .doc(
        "(output_false, output_true): data down the output pred picks, a dead tensor down the "
        "other");

// output = the first live input; value_index = its position
// d input_i = d output, through input i's branch (live only when it was taken)
TROUPE_REGISTER_OP(Merge)
    .variadic_input("inputs", 1)
    .output("output")
    .output("value_index")
    .attr("shape_invariant", Shape::unknown())
    .attr("has_shape_invariant", false)
    .shape_fn([](InferenceContext& c) -> Status {
      std::vector<Shape> shapes;
      for (int i = 0; i < c.num_inputs(); ++i) {
        if (c.input_dtype(i) != c.input_dtype(0)) {
          return c.error("inputs of dtypes ", dtype_name(c.input_dtype(0)), " and ",
                         dtype_name(c.input_dtype(i)));
        }
        shapes.push_back(c.input_shape(i));
      }
      Shape shape = common_shape(shapes);
      if (c.attr<bool>("has_shape_invariant")) {
        const Shape& invariant = c.attr<Shape>("shape_invariant");
        if (!shape.compatible_with(invariant)) {
          return c.error("an input of shape ", shape, " where the invariant is ", invariant);
        }
        shape = invariant;
      }
      c.set_output(0, c.input_dtype(0), shape);
      c.set_output(1, DType::kInt32, Shape{});
      return runtime::ok_status();
    })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      // Each input's branch takes dy in through its Switch on the predicate: live only when
      // that branch was the one taken.
      Grads dx;
      for (const Output& in : n.inputs) {
        auto in_branch = b.enter_context(b.gradient_context(b.context_of(in.node)));
        dx.push_back(b.capture(dy[0]));
      }
      return dx;
    })
    .doc("output = the first of inputs that is live; value_index = which (dead when all are)");

TROUPE_REGISTER_OP(Enter)
    .input("data")
    .output("output")
    .required_attr<std::string>("frame_name")
    .attr("is_constant", false)
    .attr("parallel_iterations", int64_t{10})
    .shape_fn(shape_fns::unchanged)
    .gradient(no_loop_gradient)
    .doc(
        "output = data, in the child frame frame_name: at its first iteration, or at every "
        "one when is_constant");

TROUPE_REGISTER_OP(Exit)
    .input("data")
    .output("output")
    .shape_fn(shape_fns::unchanged)
    .gradient(no_loop_gradient)
    .doc("output = data, in the frame around data's");

TROUPE_REGISTER_OP(NextIteration)
    .input("data")
    .output("output")
    .shape_fn(shape_fns::unchanged)
    .gradient(no_loop_gradient)
    .doc("output = data, at the next iteration of its frame");

TROUPE_REGISTER_OP(LoopCond)
    .input("input")
    .output("output")
    .shape_fn([](InferenceContext& c) -> Status {
      TROUPE_RETURN_IF_ERROR(scalar_predicate(c, 0));
      c.set_output(0, DType::kBool, Shape{});
      return runtime::ok_status();
    })
    .no_gradient()
    .doc("output = input, a loop's condition: whether its variables go round again");

// A loop's gradient pushes forward values inside a cond's branch too: the loop's next iteration
// waits for those pushes through a ControlTrigger, which a branch not taken does not kill.
TROUPE_REGISTER_OP(ControlTrigger)
    .shape_fn(shape_fns::no_outputs)
    .no_gradient()
    .doc("Does nothing; runs once its control inputs have come, dead or live, and is never dead");

// A while loop's gradient reads the forward values of every iteration from stacks: each
// iteration pushes, and the gradient's loop pops them in reverse (while_loop.cc).
TROUPE_REGISTER_OP(StackPush)
    .input("value")
    .output("output")
    .required_attr<std::string>("stack")
    .shape_fn(shape_fns::unchanged)
    .no_gradient()
    .doc("pushes value on the run's stack named stack; output = value");

TROUPE_REGISTER_OP(StackPop)
    .output("value")
    .required_attr<std::string>("stack")
    .required_attr<DType>("dtype")
    .attr("shape", Shape::unknown())
    .shape_fn([](InferenceContext& c) -> Status {
      c.set_output(0, c.attr<DType>("dtype"), c.attr<Shape>("shape"));
      return runtime::ok_status();
    })
    .no_gradient()
    .doc("value = the last value pushed on the run's stack named stack, taken off it");

std::pair<Output, Output> switch_(GraphBuilder& b, Output data, Output pred,
                                  const std::string& name) {
  std::vector<Output> outs = b.add_node("Switch", {data, pred}, {}, name);
  if (outs.size() != 2) return {};
  return {outs[0], outs[1]};
}

std::pair<Output, Output> merge(GraphBuilder& b, const std::vector<Output>& inputs,
                                const std::string& name) {
  std::vector<Output> outs = b.add_node("Merge", inputs, {}, name);
  if (outs.size() != 2) return {};
  return {outs[0], outs[1]};
}

Output enter(GraphBuilder& b, Output data, const std::string& frame, bool is_constant,
             int64_t parallel_iterations, const std::string& name) {
  return b.add("Enter", {data},
               {{"frame_name", frame},
                {"is_constant", is_constant},
                {"parallel_iterations", parallel_iterations}},
               name);
}

Output exit(GraphBuilder& b, Output data, const std::string& name) {
  return b.add("Exit", {data}, {}, name);
}

Output next_iteration(GraphBuilder& b, Output data, const std::string& name) {
  return b.add("NextIteration", {data}, {}, name);
}

Output loop_cond(GraphBuilder& b, Output pred, const std::string& name) {
  return b.add("LoopCond", {pred}, {}, name);
}

int control_trigger(GraphBuilder& b, const std::vector<int>& deps, const std::string& name) {
  auto scope = b.control_dependencies(deps);
  b.add_node("ControlTrigger", {}, {}, name);
  return b.ok() ? b.graph().num_nodes() - 1 : -1;
}

namespace {

// The pivot of a branch taken when `pred` is `branch`, built in the current context: the
// predicate's live side, which a node of the branch without inputs waits for.
Output branch_pivot(GraphBuilder& b, Output pred, bool branch) {
  auto [pf, pt] = switch_(b, pred, pred, branch ? "pivot_switch_t" : "pivot_switch_f");
  return identity(b, branch ? pt : pf, branch ? "pivot_t" : "pivot_f");
}

// A branch of a cond: outer values enter through a Switch on the predicate, live only when the
// branch is taken.
class CondContext : public runtime::ControlFlowContext {
 public:
  CondContext(std::string name, Output pred, bool branch, int pivot)
      : name_(std::move(name)), pred_(pred), branch_(branch), pivot_(pivot) {}
  Output capture(GraphBuilder& b, Output outer) override {
    auto it = captured_.find(outer);
    if (it != captured_.end()) return it->second;
    auto [f, t] = switch_(b, outer, pred_, branch_ ? "switch_t" : "switch_f");
    return captured_[outer] = branch_ ? t : f;
  }
  int pivot() const override { return pivot_; }
  std::string name() const override { return "cond '" + name_ + "'"; }
  bool is_loop() const override { return false; }
  int gradient_branch(GraphBuilder& b) override;

  int id = 0;

 protected:
  const std::string name_;
  const Output pred_;
  const bool branch_;

 private:
  const int pivot_;
  std::map<Output, Output> captured_;
};

// The gradient's branch of a cond's branch inside a loop's body, in the gradient's loop: its
// predicate is the one the forward iteration took, popped from a stack, and the forward
// branch's values it reads are popped from stacks that branch pushed them on when it ran.
class CondGradContext : public CondContext {
 public:
  CondGradContext(std::string name, Output pred, bool branch, int pivot, int forward)
      : CondContext(std::move(name), pred, branch, pivot), forward_(forward) {}
  bool imports_from(int from) const override { return from == forward_; }
  Output capture(GraphBuilder& b, Output value) override {
    if (b.context_of(value.node) != forward_) return CondContext::capture(b, value);
    return b.context(b.loop_around(id)).pop_forward(b, value, id);
  }
  int gradient_branch(GraphBuilder&) override { return 0; }
  Output untaken_zeros(GraphBuilder& b, Output like) override {
    // A known shape costs nothing to remember; an unknown one is the forward value's, popped.
    Output zeros = b.shape(like).fully_defined() ? ops::zeros(b, b.shape(like), b.dtype(like))
                                                 : zeros_like(b, b.capture(like));
    auto [f, t] = switch_(b, zeros, pred_, "untaken_zeros");
    return branch_ ? f : t;
  }

 private:
  const int forward_;
};

int CondContext::gradient_branch(GraphBuilder& b) {
  Output pred = b.capture(pred_);  // each iteration's, from the forward loop's stack
  if (!pred.valid()) return 0;
  auto scope = b.name_scope(name_ + "_grad");
  Output pivot = branch_pivot(b, pred, branch_);
  if (!b.ok()) return 0;
  auto context = std::make_unique<CondGradContext>(name_ + "_grad", pred, branch_, pivot.node, id);
  CondGradContext& made = *context;
  made.id = b.add_context(std::move(context));
  b.set_context(pivot.node, made.id);
  return made.id;
}

// One branch's outputs, each a value of the branch (an outer value the branch returns as it is
// enters it, so that the Merge sees it dead when the other branch is taken).
std::vector<Output> build_branch(GraphBuilder& b, Output pred, bool branch,
                                 const std::string& cond_name, const BranchFn& fn) {
  Output pivot = branch_pivot(b, pred, branch);
  if (!b.ok()) return {};
  auto context = std::make_unique<CondContext>(cond_name, pred, branch, pivot.node);
  CondContext& made = *context;
  made.id = b.add_context(std::move(context));
  b.set_context(pivot.node, made.id);
  auto inside = b.enter_context(made.id);
  std::vector<Output> outs = fn(b);
  for (Output& o : outs) {
    if (o.valid() && b.context_of(o.node) != made.id) o = identity(b, o);
  }
  return outs;
}

}  // namespace

std::vector<Output> cond(GraphBuilder& b, Output pred, const BranchFn& then_fn,
                         const BranchFn& else_fn, const std::string& name) {
  if (!b.ok() || !pred.valid()) return {};
  pred = b.capture(pred);  // a predicate from outside the loop the cond is in enters it
  if (b.dtype(pred) != DType::kBool || (b.shape(pred).rank_known() && b.shape(pred).rank() != 0)) {
    b.record_error(runtime::invalid_argument("cond '", name,
                                             "': the predicate must be a bool "
                                             "scalar, got ",
                                             dtype_name(b.dtype(pred)), b.shape(pred)));
    return {};
  }
  auto scope = b.name_scope(name);
  std::vector<Output> then_outs = build_branch(b, pred, true, name, then_fn);
  std::vector<Output> else_outs = build_branch(b, pred, false, name, else_fn);
  if (!b.ok()) return {};
  if (then_outs.size() != else_outs.size()) {
    b.record_error(runtime::invalid_argument("cond '", name, "': the true branch returns ",
                                             then_outs.size(), " outputs, the false branch ",
                                             else_outs.size()));
    return {};
  }
  std::vector<Output> outs;
  for (size_t i = 0; i < then_outs.size(); ++i) {
    if (b.dtype(then_outs[i]) != b.dtype(else_outs[i])) {
      b.record_error(runtime::invalid_argument(
          "cond '", name, "': output ", i, " is ", dtype_name(b.dtype(then_outs[i])),
          " in the true branch and ", dtype_name(b.dtype(else_outs[i])), " in the false one"));
      return {};
    }
    // Input 0 is the false branch's, as TF's: the gradient routes by it.
    outs.push_back(merge(b, {else_outs[i], then_outs[i]}).first);
  }
  return outs;
}

std::vector<Output> case_(GraphBuilder& b, const std::vector<std::pair<Output, BranchFn>>& pairs,
                          const BranchFn& default_fn, const std::string& name) {
  if (pairs.empty()) return default_fn(b);
  auto scope = b.name_scope(name);
  // Branch i runs when its predicate is true and none before it is.
  std::function<std::vector<Output>(GraphBuilder&, size_t)> from = [&](GraphBuilder& b, size_t i) {
    if (i == pairs.size()) return default_fn(b);
    return cond(
        b, pairs[i].first, pairs[i].second, [&, i](GraphBuilder& b) { return from(b, i + 1); },
        "case_" + std::to_string(i));
  };
  return from(b, 0);
}

}  // namespace troupe::ops
