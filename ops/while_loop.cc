// while_loop (ops/control_flow_ops.h), and its gradient, as TF 1.x builds them: the gradient is a
// second loop that runs as many iterations as the first did, each one differentiating the body
// backwards, with the forward values it needs popped from stacks the forward loop pushed them
// on, iteration by iteration.
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "ops/array_ops.h"
#include "ops/control_flow_ops.h"
#include "ops/math_ops.h"
#include "ops/op_def_names.h"
#include "runtime/gradients.h"

namespace troupe::ops {

namespace {

// Whether `got` is as specific as `invariant` wherever the invariant is known.
bool keeps_invariant(const Shape& got, const Shape& invariant) {
  if (!invariant.rank_known()) return true;
  if (!got.rank_known() || got.rank() != invariant.rank()) return false;
  for (int d = 0; d < got.rank(); ++d) {
    if (invariant.dim(d) != Shape::kUnknownDim && got.dim(d) != invariant.dim(d)) return false;
  }
  return true;
}

// The frame of a while loop, and what its gradient needs to know of it. Outer values enter it
// as constants of every iteration; input-less nodes wait for the pivot: the first variable's
// Merge in the condition, its Switch's live side in the body.
class WhileContext : public runtime::ControlFlowContext {
 public:
  WhileContext(std::string name, int64_t parallel_iterations)
      : name_(std::move(name)), parallel_iterations_(parallel_iterations) {}
  Output capture(GraphBuilder& b, Output outer) override {
    auto it = captured_.find(outer);
    if (it != captured_.end()) return it->second;
    return captured_[outer] = enter(b, outer, frame, /*is_constant=*/true, parallel_iterations_);
  }
  int pivot() const override { return pivot_; }
  std::string name() const override { return "while '" + name_ + "'"; }
  bool is_loop() const override { return true; }
  std::vector<Output> loop_exits() const override { return exits; }
  std::vector<std::pair<Output, Output>> loop_gradient(GraphBuilder& b,
                                                       const std::vector<Output>& d) override;

  void set_pivot(int pivot) { pivot_ = pivot; }
  const std::string& loop_name() const { return name_; }
  int64_t parallel_iterations() const { return parallel_iterations_; }

  // Set as the loop is built (build_loop), by variable: what entered, the Merge at the top,
  // the body's input and result, the Exit; and the condition steering the Switches.
  int id = 0;
  std::string frame;
  Output go_on;
  std::vector<Output> vars, merges, body_inputs, results, exits;
  std::vector<Shape> invariants;
  // The gradient's: the values pushed each iteration, and those pushed inside a cond's branch
  // in the iterations it ran (the iteration count's NextIteration waits for them all).
  std::vector<int> pushes, branch_pushes;

 protected:
  std::map<Output, Output> captured_;  // an outer value -> its Enter

 private:
  const std::string name_;
  const int64_t parallel_iterations_;
  int pivot_ = -1;
};

// The loop that runs a loop's gradient: besides outer values, it takes the forward loop's, from
// a stack each iteration of the forward loop pushed them on.
class WhileGradContext : public WhileContext {
 public:
  WhileGradContext(WhileContext& forward, std::string name)
      : WhileContext(std::move(name), forward.parallel_iterations()), forward_(forward) {}
  bool imports_from(int from) const override { return from == forward_.id; }
  Output capture(GraphBuilder& b, Output value) override {
    if (b.context_of(value.node) != forward_.id) return WhileContext::capture(b, value);
    return pop_forward(b, value, id);
  }
  Output pop_forward(GraphBuilder& b, Output value, int into) override {
    auto it = popped_.find(value);
    if (it != popped_.end()) return it->second;
    const int where = b.context_of(value.node);
    Output pushed;
    {
      auto in_forward = b.enter_context(where);
      pushed = b.add("StackPush", {value}, {{"stack", std::string()}}, "stack_push");
      if (!pushed.valid()) return {};
      b.graph().set_attr(pushed.node, "stack", b.graph().node(pushed.node).name);
      (where == forward_.id ? forward_.pushes : forward_.branch_pushes).push_back(pushed.node);
    }
    auto here = b.enter_context(into);  // a pop without inputs waits for that context's pivot
    return popped_[value] = b.add("StackPop", {},
                                  {{"stack", b.graph().node(pushed.node).name},
                                   {"dtype", b.dtype(value)},
                                   {"shape", b.shape(value)}},
                                  "stack_pop");
  }

 private:
  WhileContext& forward_;
  std::map<Output, Output> popped_;
};

using Fail = std::function<void(const std::string&)>;

// Builds the loop of `context` around `vars` (in the current context), each keeping its
// invariant: Enter, Merge, the condition, Switch, the body, NextIteration and Exit. The Exits,
// or nothing after an error (recorded). Errors number the variables after the first `hidden`
// (a counter the user did not ask for).
std::vector<Output> build_loop(GraphBuilder& b, std::unique_ptr<WhileContext> owned,
                               const LoopCondFn& cond_fn, const LoopBodyFn& body_fn,
                               const std::vector<Output>& vars,
                               const std::vector<Shape>& invariants, size_t hidden,
                               const Fail& fail) {
  WhileContext& ctx = *owned;
  ctx.vars = vars;
  ctx.invariants = invariants;
  ctx.id = b.add_context(std::move(owned));
  std::vector<Output> switches_false;
  {
    auto inside = b.enter_context(ctx.id);
    // The frame is named after its first Enter, whose name the graph keeps unique.
    std::vector<Output> enters;
    for (const Output& v : vars) {
      enters.push_back(enter(b, v, ctx.frame, false, ctx.parallel_iterations()));
      if (!b.ok()) return {};
      if (ctx.frame.empty()) {
        ctx.frame = b.graph().node(enters[0].node).name;
        b.graph().set_attr(enters[0].node, "frame_name", ctx.frame);
      }
    }
    for (size_t i = 0; i < vars.size(); ++i) {
      std::vector<Output> m =
          b.add_node("Merge", {enters[i], enters[i]},
                     {{"shape_invariant", invariants[i]}, {"has_shape_invariant", true}});
      if (m.empty()) return {};
      ctx.merges.push_back(m[0]);
    }
    ctx.set_pivot(ctx.merges[0].node);
    Output pred = cond_fn(b, ctx.merges);
    if (!b.ok() || !pred.valid()) return {};
    if (b.dtype(pred) != DType::kBool ||
        (b.shape(pred).rank_known() && b.shape(pred).rank() != 0)) {
      fail("the condition must be a bool scalar, got " + std::string(dtype_name(b.dtype(pred))) +
           b.shape(pred).to_string());
      return {};
    }
    ctx.go_on = loop_cond(b, pred);
    for (const Output& m : ctx.merges) {
      auto [f, t] = switch_(b, m, ctx.go_on);
      switches_false.push_back(f);
      ctx.body_inputs.push_back(identity(b, t));
    }
    if (!b.ok()) return {};
    ctx.set_pivot(ctx.body_inputs[0].node);
    std::vector<Output> results = body_fn(b, ctx.body_inputs);
    if (!b.ok()) return {};
    if (results.size() != vars.size()) {
      fail("the body returns " + std::to_string(results.size() - hidden) + " values for " +
           std::to_string(vars.size() - hidden) + " loop variables");
      return {};
    }
    for (size_t i = 0; i < results.size(); ++i) {
      Output r = results[i];
      if (!r.valid()) return {};
      if (b.dtype(r) != b.dtype(ctx.merges[i])) {
        fail("the body turns loop variable " + std::to_string(i - hidden) + " from " +
             dtype_name(b.dtype(ctx.merges[i])) + " into " + dtype_name(b.dtype(r)));
        return {};
      }
      if (!keeps_invariant(b.shape(r), invariants[i])) {
        fail("the body changes loop variable " + std::to_string(i - hidden) + "'s shape from " +
             invariants[i].to_string() + " to " + b.shape(r).to_string() +
             "; give it a shape invariant (WhileOptions::shape_invariants) that allows both");
        return {};
      }
      if (b.context_of(r.node) != ctx.id) r = identity(b, r);  // an outer value, entered
      ctx.results.push_back(r);
      Output next = next_iteration(b, r);
      if (!b.ok()) return {};
      if (Status s = b.graph().set_back_edge(ctx.merges[i].node, 1, next); !s.ok()) {
        b.record_error(s);
        return {};
      }
    }
  }
  for (const Output& f : switches_false) ctx.exits.push_back(exit(b, f));
  return b.ok() ? ctx.exits : std::vector<Output>{};
}

}  // namespace

std::vector<Output> while_loop(GraphBuilder& b, const LoopCondFn& cond_fn,
                               const LoopBodyFn& body_fn, const std::vector<Output>& loop_vars,
                               const WhileOptions& options, const std::string& name) {
  if (!b.ok()) return {};
  const Fail fail = [&](const std::string& why) {
    b.record_error(runtime::invalid_argument("while '", name, "': ", why));
  };
  if (loop_vars.empty()) {
    fail("no loop variables");
    return {};
  }
  if (!options.shape_invariants.empty() && options.shape_invariants.size() != loop_vars.size()) {
    fail(std::to_string(options.shape_invariants.size()) + " shape invariants for " +
         std::to_string(loop_vars.size()) + " loop variables");
    return {};
  }
  if (options.parallel_iterations < 1) {
    fail("parallel_iterations below 1");
    return {};
  }
  auto scope = b.name_scope(name);
  std::vector<Output> vars;
  std::vector<Shape> invariants;
  // maximum_iterations: a counter goes round with the variables, and the condition checks it.
  const bool counted = options.maximum_iterations >= 0;
  if (counted) {
    vars.push_back(scalar(b, 0, DType::kInt64, "iteration"));
    invariants.push_back(Shape{});
  }
  for (size_t i = 0; i < loop_vars.size(); ++i) {
    if (!loop_vars[i].valid()) return {};
    vars.push_back(b.capture(loop_vars[i]));  // from outside an enclosing loop: through it
    invariants.push_back(options.shape_invariants.empty() ? b.shape(loop_vars[i])
                                                          : options.shape_invariants[i]);
    if (!b.shape(loop_vars[i]).compatible_with(invariants.back())) {
      fail("loop variable " + std::to_string(i) + " has shape " +
           b.shape(loop_vars[i]).to_string() + ", which its invariant " +
           invariants.back().to_string() + " does not allow");
      return {};
    }
  }
  if (!b.ok()) return {};
  const size_t skip = counted ? 1 : 0;
  auto user = [skip](const std::vector<Output>& all) {
    return std::vector<Output>(all.begin() + skip, all.end());
  };
  const LoopCondFn cond = [&](GraphBuilder& b, const std::vector<Output>& v) {
    Output pred = cond_fn(b, user(v));
    if (!counted || !pred.valid() || b.dtype(pred) != DType::kBool) return pred;
    return logical_and(b, less(b, v[0], scalar(b, options.maximum_iterations, DType::kInt64)),
                       pred);
  };
  const LoopBodyFn body = [&](GraphBuilder& b, const std::vector<Output>& v) {
    std::vector<Output> out = body_fn(b, user(v));
    if (counted) out.insert(out.begin(), add(b, v[0], scalar(b, 1, DType::kInt64)));
    return out;
  };
  std::vector<Output> exits =
      build_loop(b, std::make_unique<WhileContext>(name, options.parallel_iterations), cond, body,
                 vars, invariants, skip, fail);
  return exits.empty() ? exits : user(exits);
}

std::vector<std::pair<Output, Output>> WhileContext::loop_gradient(
    GraphBuilder& b, const std::vector<Output>& d_exits) {
  bool any = false;
  for (const Output& d : d_exits) any |= d.valid();
  if (!any) return {};
  auto scope = b.name_scope(name_ + "_grad");
  const int outer = b.outer_context(id);

  // How many iterations ran: a counter added to the forward loop, whose next iteration waits
  // for what the gradient pushes (below, once the gradient is built).
  Output count_start, count_merge, count_next_value, count_exit;
  {
    auto around = b.enter_context(outer);
    count_start = scalar(b, 0, DType::kInt64, "count_start");
  }
  {
    auto inside = b.enter_context(id);
    Output e = enter(b, count_start, frame, false, parallel_iterations_);
    std::vector<Output> m = b.add_node("Merge", {e, e}, {}, "count");
    if (m.empty()) return {};
    count_merge = m[0];
    auto [f, t] = switch_(b, count_merge, go_on);
    count_next_value = add(b, identity(b, t), scalar(b, 1, DType::kInt64));
    auto around = b.enter_context(outer);
    count_exit = exit(b, f);
  }
  if (!b.ok()) return {};

  // The gradient loop's variables: the iterations left, d(each floating variable), and the sum
  // over iterations of d(each floating outer value the body read).
  std::vector<size_t> carried;
  for (size_t i = 0; i < vars.size(); ++i) {
    if (runtime::is_floating(b.dtype(vars[i]))) carried.push_back(i);
  }
  std::vector<std::pair<Output, Output>> constants;  // (outer value, its Enter)
  for (const auto& [outer_value, entered] : captured_) {
    if (runtime::is_floating(b.dtype(outer_value))) constants.push_back({outer_value, entered});
  }
  std::vector<Output> init{b.capture(count_exit)};
  std::vector<Shape> shapes{Shape{}};
  for (size_t i : carried) {
    init.push_back(d_exits[i].valid() ? d_exits[i] : zeros_like(b, exits[i]));
    shapes.push_back(invariants[i]);
  }
  for (const auto& c : constants) {
    init.push_back(zeros_like(b, c.first));
    shapes.push_back(b.shape(c.first));
  }
  if (!b.ok()) return {};
  const size_t nc = carried.size();
  const LoopCondFn cond = [](GraphBuilder& b, const std::vector<Output>& v) {
    return greater(b, v[0], scalar(b, 0, DType::kInt64));
  };
  const LoopBodyFn body = [&](GraphBuilder& b, const std::vector<Output>& v) {
    std::vector<Output> ys, dys, xs;
    for (size_t k = 0; k < nc; ++k) {
      ys.push_back(results[carried[k]]);
      dys.push_back(v[1 + k]);
      xs.push_back(body_inputs[carried[k]]);
    }
    for (const auto& c : constants) xs.push_back(c.second);
    const std::vector<Output> dx = runtime::body_gradients(b, ys, xs, dys, id);
    std::vector<Output> out{sub(b, v[0], scalar(b, 1, DType::kInt64))};
    for (size_t k = 0; k < nc; ++k) {
      out.push_back(dx.size() > k && dx[k].valid() ? dx[k] : zeros_like(b, v[1 + k]));
    }
    for (size_t j = 0; j < constants.size(); ++j) {
      const Output d = dx.size() > nc + j ? dx[nc + j] : Output{};
      out.push_back(d.valid() ? add(b, v[1 + nc + j], d) : v[1 + nc + j]);
    }
    return out;
  };
  const Fail fail = [&](const std::string& why) {
    b.record_error(runtime::internal_error("gradient of while '", name_, "': ", why));
  };
  std::vector<Output> grads =
      build_loop(b, std::make_unique<WhileGradContext>(*this, name_ + "_grad"), cond, body, init,
                 shapes, /*hidden=*/0, fail);
  if (grads.empty()) return {};

  {
    auto inside = b.enter_context(id);
    std::vector<int> pushed = pushes;
    if (!branch_pushes.empty()) pushed.push_back(control_trigger(b, branch_pushes, "pushed"));
    auto after_pushes = b.control_dependencies(pushed);
    Output next = next_iteration(b, count_next_value, "count_next");
    if (!b.ok()) return {};
    if (Status s = b.graph().set_back_edge(count_merge.node, 1, next); !s.ok()) {
      b.record_error(s);
      return {};
    }
  }
  std::vector<std::pair<Output, Output>> out;
  for (size_t k = 0; k < nc; ++k) out.push_back({vars[carried[k]], grads[1 + k]});
  for (size_t j = 0; j < constants.size(); ++j) {
    out.push_back({constants[j].first, grads[1 + nc + j]});
  }
  return out;
}

}  // namespace troupe::ops
