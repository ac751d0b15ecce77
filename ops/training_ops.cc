#include "ops/training_ops.h"

#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/op_def_names.h"
#include "ops/state_ops.h"
#include "runtime/gradients.h"

namespace troupe::ops {

namespace {

// Inputs: grad, lr (a scalar of the variable's dtype). Output: the updated variable.
Status apply_shape(InferenceContext& c) {
  TROUPE_RETURN_IF_ERROR(c.expect_floating(0));
  TROUPE_RETURN_IF_ERROR(c.expect_same_dtype(0, 1));
  const Shape& s = c.attr<Shape>("shape");
  if (c.input_dtype(0) != c.attr<DType>("dtype")) {
    return c.error("gradient is ", runtime::dtype_name(c.input_dtype(0)), ", variable '",
                   c.attr<std::string>("var"), "' is ",
                   runtime::dtype_name(c.attr<DType>("dtype")));
  }
  if (!c.input_shape(0).compatible_with(s)) {
    return c.error("gradient of shape ", c.input_shape(0), " for variable '",
                   c.attr<std::string>("var"), "' of shape ", s);
  }
  if (c.input_shape(1).rank_known() && c.input_shape(1).rank() != 0) {
    return c.error("learning rate must be a scalar, got ", c.input_shape(1));
  }
  c.set_output(0, c.attr<DType>("dtype"), s);
  return runtime::ok_status();
}

// Inputs: values (rows of the variable), indices (one per row), lr. Output: the variable.
Status sparse_apply_shape(InferenceContext& c) {
  TROUPE_RETURN_IF_ERROR(c.expect_floating(0));
  TROUPE_RETURN_IF_ERROR(c.expect_same_dtype(0, 2));
  const Shape& s = c.attr<Shape>("shape");
  const std::string& var = c.attr<std::string>("var");
  if (c.input_dtype(0) != c.attr<DType>("dtype")) {
    return c.error("values are ", runtime::dtype_name(c.input_dtype(0)), ", variable '", var,
                   "' is ", runtime::dtype_name(c.attr<DType>("dtype")));
  }
  if (c.input_dtype(1) != DType::kInt32 && c.input_dtype(1) != DType::kInt64) {
    return c.error("indices must be int32 or int64, got ", runtime::dtype_name(c.input_dtype(1)));
  }
  if (!s.rank_known() || s.rank() < 1) {
    return c.error("variable '", var, "' of shape ", s, " has no rows");
  }
  const Shape& v = c.input_shape(0);
  const Shape& i = c.input_shape(1);
  if (v.fully_defined() && i.fully_defined() && s.fully_defined() &&
      v.num_elements() != i.num_elements() * (s.num_elements() / std::max<int64_t>(s.dim(0), 1))) {
    return c.error("values of shape ", v, " for ", i.num_elements(), " rows of variable '", var,
                   "' ", s);
  }
  if (c.input_shape(2).rank_known() && c.input_shape(2).rank() != 0) {
    return c.error("learning rate must be a scalar, got ", c.input_shape(2));
  }
  c.set_output(0, c.attr<DType>("dtype"), s);
  return runtime::ok_status();
}

const AttrMap kApplyDefaults{
    {"var", std::string()}, {"shape", Shape{}}, {"dtype", DType::kFloat32}};

}  // namespace

// Where replicas of synchronous training meet (actors/sync_rounds.h): placed on the ps that
// holds the global step, it answers once the step read at the start (`step`) has been left
// behind by the round all replicas' updates closed; its output is the new global step. Run
// anywhere else it has nothing to wait for and passes `step` on.
TROUPE_REGISTER_OP(SyncReplicasBarrier)
    .input("step")
    .output("global_step")
    .shape_fn([](InferenceContext& c) {
      if (c.input_dtype(0) != DType::kInt64) return c.error("the step must be int64");
      c.set_output(0, DType::kInt64, Shape{});
      return runtime::ok_status();
    })
    .no_gradient()
    .doc("waits for the round of synchronous replicas that step `step` belongs to");

// Each update rule is two ops: Apply<Rule> takes a gradient shaped like the variable,
// SparseApply<Rule> takes rows of it (IndexedSlices: values and indices) and updates those rows
// and their slots only.
const AttrMap kMomentumAttrs{{"momentum", 0.9}, {"use_nesterov", false}};
const AttrMap kAdagradAttrs{{"initial_accumulator_value", 0.1}, {"epsilon", 1e-7}};
const AttrMap kAdamAttrs{{"beta1", 0.9}, {"beta2", 0.999}, {"epsilon", 1e-7}};
const AttrMap kRMSPropAttrs{
    {"decay", 0.9}, {"momentum", 0.0}, {"epsilon", 1e-7}, {"centered", false}};
const AttrMap kFtrlAttrs{
    {"l1", 0.0}, {"l2", 0.0}, {"lr_power", -0.5}, {"initial_accumulator_value", 0.1}};

TROUPE_REGISTER_OP(ApplyGradientDescent)
    .input("grad")
    .input("lr")
    .output("var")
    .attrs(kApplyDefaults)
    .writes_variable()
    .shape_fn(apply_shape)
    .no_gradient()
    .doc("var -= lr * grad");

TROUPE_REGISTER_OP(ApplyMomentum)
    .input("grad")
    .input("lr")
    .output("var")
    .attrs(kApplyDefaults)
    .attrs(kMomentumAttrs)
    .writes_variable()
    .shape_fn(apply_shape)
    .no_gradient()
    .doc(
        "accum = momentum * accum + grad; var -= lr * accum, or with Nesterov "
        "var -= lr * (grad + momentum * accum)");

TROUPE_REGISTER_OP(ApplyAdagrad)
    .input("grad")
    .input("lr")
    .output("var")
    .attrs(kApplyDefaults)
    .attrs(kAdagradAttrs)
    .writes_variable()
    .shape_fn(apply_shape)
    .no_gradient()
    .doc("accum += grad^2; var -= lr * grad / (sqrt(accum) + epsilon)");

TROUPE_REGISTER_OP(ApplyAdam)
    .input("grad")
    .input("lr")
    .output("var")
    .attrs(kApplyDefaults)
    .attrs(kAdamAttrs)
    .writes_variable()
    .shape_fn(apply_shape)
    .no_gradient()
    .doc(
        "t += 1; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; "
        "var -= lr sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + epsilon)");

TROUPE_REGISTER_OP(ApplyRMSProp)
    .input("grad")
    .input("lr")
    .output("var")
    .attrs(kApplyDefaults)
    .attrs(kRMSPropAttrs)
    .writes_variable()
    .shape_fn(apply_shape)
    .no_gradient()
    .doc(
        "ms = decay ms + (1-decay) g^2; (centered: mg = decay mg + (1-decay) g, "
        "denominator ms - mg^2); mom = momentum mom + lr g / sqrt(denominator + epsilon); "
        "var -= mom");

TROUPE_REGISTER_OP(ApplyFtrl)
    .input("grad")
    .input("lr")
    .output("var")
    .attrs(kApplyDefaults)
    .attrs(kFtrlAttrs)
    .writes_variable()
    .shape_fn(apply_shape)
    .no_gradient()
    .doc(
        "FTRL-proximal (McMahan et al. 2013), as TF's ApplyFtrl: accum_new = accum + g^2; "
        "linear += g - (accum_new^-p - accum^-p)/lr * var; quadratic = accum_new^-p/lr + 2 l2; "
        "var = |linear| > l1 ? (sign(linear) l1 - linear) / quadratic : 0");

TROUPE_REGISTER_OP(SparseApplyGradientDescent)
    .input("values")
    .input("indices")
    .input("lr")
    .output("var")
    .attrs(kApplyDefaults)
    .writes_variable()
    .shape_fn(sparse_apply_shape)
    .no_gradient()
    .doc("var[indices] -= lr * values");

TROUPE_REGISTER_OP(SparseApplyMomentum)
    .input("values")
    .input("indices")
    .input("lr")
    .output("var")
    .attrs(kApplyDefaults)
    .attrs(kMomentumAttrs)
    .writes_variable()
    .shape_fn(sparse_apply_shape)
    .no_gradient()
    .doc("ApplyMomentum on the rows `indices` of var and accum");

TROUPE_REGISTER_OP(SparseApplyAdagrad)
    .input("values")
    .input("indices")
    .input("lr")
    .output("var")
    .attrs(kApplyDefaults)
    .attrs(kAdagradAttrs)
    .writes_variable()
    .shape_fn(sparse_apply_shape)
    .no_gradient()
    .doc("ApplyAdagrad on the rows `indices` of var and accum");

TROUPE_REGISTER_OP(SparseApplyAdam)
    .input("values")
    .input("indices")
    .input("lr")
    .output("var")
    .attrs(kApplyDefaults)
    .attrs(kAdamAttrs)
    .writes_variable()
    .shape_fn(sparse_apply_shape)
    .no_gradient()
    .doc("ApplyAdam on the rows `indices` of var, m and v (TF's LazyAdam); t counts steps");

TROUPE_REGISTER_OP(SparseApplyRMSProp)
    .input("values")
    .input("indices")
    .input("lr")
    .output("var")
    .attrs(kApplyDefaults)
    .attrs(kRMSPropAttrs)
    .writes_variable()
    .shape_fn(sparse_apply_shape)
    .no_gradient()
    .doc("ApplyRMSProp on the rows `indices` of var and its slots");

TROUPE_REGISTER_OP(SparseApplyFtrl)
    .input("values")
    .input("indices")
    .input("lr")
    .output("var")
    .attrs(kApplyDefaults)
    .attrs(kFtrlAttrs)
    .writes_variable()
    .shape_fn(sparse_apply_shape)
    .no_gradient()
    .doc("ApplyFtrl on the rows `indices` of var, accum and linear");

Optimizer Optimizer::sgd(double lr) {
  Optimizer o;
  o.learning_rate = lr;
  return o;
}
Optimizer Optimizer::momentum_sgd(double lr, double momentum, bool nesterov) {
  Optimizer o;
  o.kind = Kind::kMomentum;
  o.learning_rate = lr;
  o.momentum = momentum;
  o.nesterov = nesterov;
  return o;
}
Optimizer Optimizer::adagrad(double lr) {
  Optimizer o;
  o.kind = Kind::kAdagrad;
  o.learning_rate = lr;
  return o;
}
Optimizer Optimizer::adam(double lr) {
  Optimizer o;
  o.kind = Kind::kAdam;
  o.learning_rate = lr;
  return o;
}
Optimizer Optimizer::rmsprop(double lr) {
  Optimizer o;
  o.kind = Kind::kRmsProp;
  o.learning_rate = lr;
  return o;
}
Optimizer Optimizer::ftrl(double lr, double l1, double l2) {
  Optimizer o;
  o.kind = Kind::kFtrl;
  o.learning_rate = lr;
  o.l1 = l1;
  o.l2 = l2;
  return o;
}

std::string Optimizer::name() const {
  switch (kind) {
    case Kind::kSgd:
      return "GradientDescent";
    case Kind::kMomentum:
      return "Momentum";
    case Kind::kAdagrad:
      return "Adagrad";
    case Kind::kAdam:
      return "Adam";
    case Kind::kRmsProp:
      return "RMSProp";
    case Kind::kFtrl:
      return "Ftrl";
  }
  return "Optimizer";
}

namespace {

// A dense gradient is applied by Apply<Rule>, rows of one by SparseApply<Rule>.
Output apply_update(GraphBuilder& b, const Optimizer& opt, const Node& var, Output grad,
                    const IndexedSlices& rows, Output lr) {
  AttrMap attrs{{"var", variable_name(var)},
                {"shape", var.output_shapes[0]},
                {"dtype", var.output_dtypes[0]}};
  const char* op = "ApplyGradientDescent";
  switch (opt.kind) {
    case Optimizer::Kind::kSgd:
      break;
    case Optimizer::Kind::kMomentum:
      op = "ApplyMomentum";
      attrs["momentum"] = opt.momentum;
      attrs["use_nesterov"] = opt.nesterov;
      break;
    case Optimizer::Kind::kAdagrad:
      op = "ApplyAdagrad";
      attrs["initial_accumulator_value"] = opt.initial_accumulator_value;
      attrs["epsilon"] = opt.epsilon;
      break;
    case Optimizer::Kind::kAdam:
      op = "ApplyAdam";
      attrs["beta1"] = opt.beta1;
      attrs["beta2"] = opt.beta2;
      attrs["epsilon"] = opt.epsilon;
      break;
    case Optimizer::Kind::kRmsProp:
      op = "ApplyRMSProp";
      attrs["decay"] = opt.decay;
      attrs["momentum"] = opt.momentum;
      attrs["epsilon"] = opt.epsilon;
      attrs["centered"] = opt.centered;
      break;
    case Optimizer::Kind::kFtrl:
      op = "ApplyFtrl";
      attrs["l1"] = opt.l1;
      attrs["l2"] = opt.l2;
      attrs["lr_power"] = opt.lr_power;
      attrs["initial_accumulator_value"] = opt.initial_accumulator_value;
      break;
  }
  // Updates run where the variable lives (on its parameter server), as TF colocates them.
  auto device = b.device(var.device);
  if (rows.valid()) {
    return b.add(std::string("Sparse") + op, {rows.values, rows.indices, lr}, attrs,
                 var.name + "/" + opt.name());
  }
  return b.add(op, {grad, lr}, attrs, var.name + "/" + opt.name());
}

}  // namespace

IndexedSlices indexed_slices_of(GraphBuilder& b, Output grad, int var) {
  if (!grad.valid() || !b.ok()) return {};
  const Node& n = b.graph().node(grad.node);
  std::vector<Output> parts;
  if (n.op == "GatherGrad") {
    parts.push_back(grad);
  } else if (n.op == "AddN") {
    parts = n.inputs;
  } else {
    return {};
  }
  for (const Output& p : parts) {
    const Node& g = b.graph().node(p.node);
    if (g.op != "GatherGrad" || g.attr<int64_t>("axis") != 0 || g.inputs[0].node != var) return {};
  }
  if (parts.size() == 1) {
    const Node& g = b.graph().node(parts[0].node);
    return {g.inputs[2], g.inputs[1]};
  }
  // Gathers from one variable in several places: their rows, concatenated.
  const Shape& shape = b.graph().node(var).output_shapes[0];
  if (!shape.fully_defined() || shape.rank() < 1) return {};
  const int64_t row = shape.dim(0) == 0 ? 0 : shape.num_elements() / shape.dim(0);
  std::vector<Output> values, indices;
  for (const Output& p : parts) {
    const Node& g = b.graph().node(p.node);
    values.push_back(reshape(b, g.inputs[2], {-1, row}));
    indices.push_back(cast(b, reshape(b, g.inputs[1], {-1}), DType::kInt64));
  }
  return {concat(b, values, 0), concat(b, indices, 0)};
}

namespace {

// What apply_gradients gets per variable: a dense gradient, or rows of one.
struct Gradient {
  Output dense;
  IndexedSlices rows;
};

std::vector<Gradient> gradients_of(GraphBuilder& b, const std::vector<Output>& grads,
                                   const std::vector<int>& vars) {
  std::vector<Gradient> out;
  for (size_t i = 0; i < vars.size() && i < grads.size(); ++i) {
    out.push_back({grads[i], indexed_slices_of(b, grads[i], vars[i])});
  }
  return out;
}

// The update nodes of `opt` on `vars`, gradients clipped first when it says so.
std::vector<int> updates(GraphBuilder& b, std::vector<Gradient> grads, const std::vector<int>& vars,
                         const Optimizer& opt) {
  std::vector<int> nodes;
  if (!b.ok()) return nodes;
  auto scope = b.name_scope(opt.name());
  if (opt.clip_norm > 0) {
    // As TF's clip_by_global_norm, rows count by their values (a row named twice, twice).
    std::vector<Output*> present;
    for (Gradient& g : grads) {
      if (g.dense.valid()) present.push_back(g.rows.valid() ? &g.rows.values : &g.dense);
    }
    std::vector<Output> values;
    for (Output* p : present) values.push_back(*p);
    std::vector<Output> clipped = clip_by_global_norm(b, values, opt.clip_norm);
    for (size_t k = 0; k < present.size(); ++k) *present[k] = clipped[k];
  }
  // A scheduled rate is built once, in float32, and cast to each variable's dtype.
  Output scheduled;
  if (!is_constant(opt.schedule)) {
    Output base = opt.learning_rate_tensor.valid()
                      ? cast(b, opt.learning_rate_tensor, DType::kFloat32)
                      : scalar(b, opt.learning_rate, DType::kFloat32, "learning_rate");
    scheduled = scheduled_rate(b, base, opt.schedule, global_step(b));
  }
  std::vector<Output> lr_by_dtype(8);
  for (size_t i = 0; i < vars.size() && i < grads.size(); ++i) {
    if (!grads[i].dense.valid()) continue;
    const Node& var = b.graph().node(vars[i]);
    DType t = var.output_dtypes[0];
    Output& lr = lr_by_dtype[static_cast<int>(t)];
    if (!lr.valid()) {
      lr = scheduled.valid()                  ? cast(b, scheduled, t)
           : opt.learning_rate_tensor.valid() ? cast(b, opt.learning_rate_tensor, t)
                                              : scalar(b, opt.learning_rate, t, "learning_rate");
    }
    Output u = apply_update(b, opt, var, grads[i].dense, grads[i].rows, lr);
    if (u.valid()) nodes.push_back(u.node);
  }
  return nodes;
}

// After every update: global_step += 1; the NoOp to run as the training target.
int step_after(GraphBuilder& b, const std::vector<int>& updates) {
  if (!b.ok()) return -1;
  Output step = global_step(b);
  Output inc;
  {
    auto deps = b.control_dependencies(updates);
    inc = assign_add(b, step, scalar(b, 1, DType::kInt64));
  }
  if (!inc.valid()) return -1;
  return no_op(b, {inc.node}, "train");
}

}  // namespace

int apply_gradients(GraphBuilder& b, const std::vector<Output>& grads, const std::vector<int>& vars,
                    const Optimizer& opt) {
  Optimizer given = opt;
  given.clip_norm = 0;  // the caller computed these gradients; clipping them is theirs too
  return step_after(b, updates(b, gradients_of(b, grads, vars), vars, given));
}

int minimize(GraphBuilder& b, Output loss, const Optimizer& opt, std::vector<int> vars) {
  return minimize(b, loss, {OptimizerPart{opt, std::move(vars)}});
}

int minimize(GraphBuilder& b, Output loss, const std::vector<OptimizerPart>& parts) {
  if (!loss.valid() || parts.empty()) return -1;
  std::vector<std::vector<int>> vars;
  std::vector<Output> xs;
  for (const OptimizerPart& p : parts) {
    vars.push_back(p.vars.empty() ? b.graph().variables(/*trainable_only=*/true) : p.vars);
    for (int v : vars.back()) xs.push_back(Output{v, 0});
  }
  // One backward pass for all parts.
  const std::vector<Output> grads = runtime::gradients(b, {loss}, xs);
  std::vector<int> nodes;
  size_t at = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::vector<Output> mine(grads.begin() + at, grads.begin() + at + vars[i].size());
    at += vars[i].size();
    std::vector<int> u = updates(b, gradients_of(b, mine, vars[i]), vars[i], parts[i].optimizer);
    nodes.insert(nodes.end(), u.begin(), u.end());
  }
  return step_after(b, nodes);
}

std::vector<Output> clip_by_global_norm(GraphBuilder& b, const std::vector<Output>& tensors,
                                        double clip_norm) {
  std::vector<Output> out;
  if (tensors.empty() || !b.ok()) return out;
  auto scope = b.name_scope("clip_by_global_norm");
  DType t = b.dtype(tensors[0]);
  std::vector<Output> sums;
  for (const Output& x : tensors) sums.push_back(cast(b, reduce_sum(b, square(b, x)), t));
  Output norm = sqrt(b, add_n(b, sums));
  Output limit = scalar(b, clip_norm, t);
  Output scale = div(b, limit, maximum(b, norm, limit));
  for (const Output& x : tensors) out.push_back(mul(b, x, cast(b, scale, b.dtype(x))));
  out.push_back(norm);
  return out;
}

int sync_replicas_barrier(GraphBuilder& b, Output global_step, int train_op) {
  auto deps = b.control_dependencies({train_op});
  return b.add("SyncReplicasBarrier", {global_step}, {}).node;
}

runtime::Status stamp_updates(GraphBuilder& b) {
  runtime::Graph& g = b.graph();
  const int step = g.find("global_step");
  if (step < 0 || g.node(step).op != "Variable") return runtime::ok_status();  // no step to read
  for (int id = 0; id < g.num_nodes(); ++id) {
    const runtime::Node& n = g.node(id);
    if (!runtime::is_update(*n.def) || b.context_of(id) != 0) continue;
    if (id < step) {
      return runtime::failed_precondition("stamp_updates: '", n.name,
                                          "' was built before the global step, whose read it must "
                                          "wait for: build the global step first (global_step)");
    }
    TROUPE_RETURN_IF_ERROR(g.add_control_input(id, step));
  }
  return runtime::ok_status();
}

}  // namespace troupe::ops
