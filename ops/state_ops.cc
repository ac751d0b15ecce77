#include "ops/state_ops.h"

#include <cmath>

#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/op_def_names.h"
#include "ops/random_ops.h"
#include "ops/strided_slice.h"

namespace troupe::ops {

namespace {

Status var_shape(InferenceContext& c) {
  const Shape& s = c.attr<Shape>("shape");
  // A local variable may leave dims unknown: each assign sets them (a contingency table grows).
  const auto local = c.node().attrs.find("local");
  if (!s.fully_defined() && (local == c.node().attrs.end() || !std::get<bool>(local->second))) {
    return c.error("variable shape ", s, " must be fully defined");
  }
  if (c.attr<std::string>("var").empty()) return c.error("variable has no name");
  c.set_output(0, c.attr<DType>("dtype"), s);
  return runtime::ok_status();
}

Status assign_shape(InferenceContext& c) {
  const Shape& s = c.attr<Shape>("shape");
  if (c.input_dtype(0) != c.attr<DType>("dtype")) {
    return c.error("variable '", c.attr<std::string>("var"), "' is ",
                   runtime::dtype_name(c.attr<DType>("dtype")), ", the value is ",
                   runtime::dtype_name(c.input_dtype(0)));
  }
  if (!c.input_shape(0).compatible_with(s)) {
    return c.error("variable '", c.attr<std::string>("var"), "' has shape ", s, ", the value has ",
                   c.input_shape(0));
  }
  c.set_output(0, c.attr<DType>("dtype"), s);
  return runtime::ok_status();
}

// Scatter<Op>(indices, updates): updates is [indices..., the variable's row dims].
Status scatter_shape(InferenceContext& c) {
  const Shape& s = c.attr<Shape>("shape");
  const std::string& var = c.attr<std::string>("var");
  const DType t = c.input_dtype(0);
  if (t != DType::kInt32 && t != DType::kInt64) {
    return c.error("indices must be int32 or int64, got ", runtime::dtype_name(t));
  }
  if (c.input_dtype(1) != c.attr<DType>("dtype")) {
    return c.error("variable '", var, "' is ", runtime::dtype_name(c.attr<DType>("dtype")),
                   ", the updates are ", runtime::dtype_name(c.input_dtype(1)));
  }
  if (!s.fully_defined() || s.rank() < 1) {
    return c.error("variable '", var, "' of shape ", s, " has no rows to scatter into");
  }
  const Shape& i = c.input_shape(0);
  if (i.rank_known()) {
    std::vector<int64_t> dims = i.dims();
    dims.insert(dims.end(), s.dims().begin() + 1, s.dims().end());
    if (!c.input_shape(1).compatible_with(Shape(dims))) {
      return c.error("updates of shape ", c.input_shape(1), " for indices ", i, " of variable '",
                     var, "' ", s, ": they must be ", Shape(dims));
    }
  }
  c.set_output(0, c.attr<DType>("dtype"), s);
  return runtime::ok_status();
}

const runtime::AttrMap kAssignDefaults{
    {"var", std::string()}, {"shape", Shape{}}, {"dtype", DType::kFloat32}};

// A node of `op` writing the variable `var` reads, on `inputs`.
Output on_variable(GraphBuilder& b, const char* op, Output var, const std::vector<Output>& inputs) {
  if (!var.valid()) return Output{};
  const Node& v = b.graph().node(var.node);
  if (v.op != "Variable") {
    b.record_error(runtime::invalid_argument(op, ": '", v.name, "' is not a variable"));
    return Output{};
  }
  return b.add(
      op, inputs,
      {{"var", variable_name(v)}, {"shape", v.output_shapes[0]}, {"dtype", v.output_dtypes[0]}});
}

// Keras' fans for a dense [in, out] or conv [h, w, in, out] kernel.
std::pair<double, double> fans(const Shape& s) {
  if (s.rank() < 1) return {1, 1};
  if (s.rank() == 1) return {double(s.dim(0)), double(s.dim(0))};
  double receptive = 1;
  for (int i = 0; i + 2 < s.rank(); ++i) receptive *= double(s.dim(i));
  return {s.dim(s.rank() - 2) * receptive, s.dim(s.rank() - 1) * receptive};
}

}  // namespace

TROUPE_REGISTER_OP(Variable)
    .output("value")
    .attrs(kAssignDefaults)
    .attr("trainable", true)
    .attr("local", false)
    .reads_variable()
    .shape_fn(var_shape)
    .no_gradient()
    .doc("value = the variable's current value in the store (a source: gradients stop here)");

// A read made where it is built, for reads that must see the writes before them in a step: in
// a loop's body, one per iteration (a read outside the loop enters it once).
TROUPE_REGISTER_OP(ReadVariable)
    .output("value")
    .attrs(kAssignDefaults)
    .reads_variable()
    .shape_fn(var_shape)
    .no_gradient()
    .doc("value = the variable's value when this node runs (a source: gradients stop here)");

// What a Gather of a Variable read becomes where the read runs on another task (the plan
// compiler makes it: actors/step_plan.h): the rows are gathered where the variable lives and only
// they travel, as TF colocates embedding_lookup's gathers with their params.
TROUPE_REGISTER_OP(VariableGather)
    .input("indices")
    .output("rows")
    .attrs(kAssignDefaults)
    .reads_variable()
    .shape_fn([](InferenceContext& c) {
      const Shape& s = c.attr<Shape>("shape");
      const DType t = c.input_dtype(0);
      if (t != DType::kInt32 && t != DType::kInt64) {
        return c.error("indices must be int32 or int64, got ", runtime::dtype_name(t));
      }
      if (!s.fully_defined() || s.rank() < 1) {
        return c.error("variable shape ", s, " must be fully defined, with rows");
      }
      if (c.attr<std::string>("var").empty()) return c.error("variable has no name");
      const Shape& i = c.input_shape(0);
      Shape out = Shape::unknown();
      if (i.rank_known()) {
        std::vector<int64_t> dims = i.dims();
        dims.insert(dims.end(), s.dims().begin() + 1, s.dims().end());
        out = Shape(dims);
      }
      c.set_output(0, c.attr<DType>("dtype"), out);
      return runtime::ok_status();
    })
    .no_gradient()
    .doc(
        "rows = the variable's rows at `indices` (a Gather of its read, run where it lives; its "
        "gradient was taken on the Gather); an index out of range is an error");

TROUPE_REGISTER_OP(Assign)
    .input("value")
    .output("new_value")
    .attrs(kAssignDefaults)
    .attr("local", false)  // a local variable's initializer (VariableStore::assign_local)
    .writes_variable()
    .shape_fn(assign_shape)
    .no_gradient()
    .doc("var = value; new_value = value");

TROUPE_REGISTER_OP(AssignAdd)
    .input("delta")
    .output("new_value")
    .attrs(kAssignDefaults)
    .writes_variable()
    .shape_fn(assign_shape)
    .no_gradient()
    .doc("var += delta; new_value = var");

TROUPE_REGISTER_OP(AssignSub)
    .input("delta")
    .output("new_value")
    .attrs(kAssignDefaults)
    .writes_variable()
    .shape_fn(assign_shape)
    .no_gradient()
    .doc("var -= delta; new_value = var");

// tf.scatter_*: rows of a variable updated in place, the rows not named left as they are;
// stateful, so not differentiated (as TF's). new_value = the variable after the update. Seven
// ops of one signature: one definition, registered under each name.
namespace {

runtime::OpDefBuilder scatter_op(const char* name, const char* doc) {
  return std::move(runtime::OpDefBuilder(name)
                       .input("indices")
                       .input("updates")
                       .output("new_value")
                       .attrs(kAssignDefaults)
                       .writes_variable()
                       .kernel_dtype_from_input(1)
                       .shape_fn(scatter_shape)
                       .no_gradient()
                       .doc(doc));
}

const runtime::OpRegistrar kScatterOps[] = {
    scatter_op("ScatterUpdate", "var[indices[j]] = updates[j] (rows named twice: the last wins)"),
    scatter_op("ScatterAdd", "var[indices[j]] += updates[j] (rows named twice add up)"),
    scatter_op("ScatterSub", "var[indices[j]] -= updates[j]"),
    scatter_op("ScatterMul", "var[indices[j]] *= updates[j]"),
    scatter_op("ScatterDiv", "var[indices[j]] /= updates[j]"),
    scatter_op("ScatterMin", "var[indices[j]] = min(var[indices[j]], updates[j])"),
    scatter_op("ScatterMax", "var[indices[j]] = max(var[indices[j]], updates[j])")};

}  // namespace

Output variable(GraphBuilder& b, const std::string& name, const Shape& shape, DType dtype,
                Output initial_value, bool trainable) {
  const std::string unique = b.unique_name(name);
  Output v;
  {
    // The read node is named after the variable; the scope was already applied by unique_name.
    std::vector<Output> out = b.add_node(
        "Variable", {},
        {{"var", unique}, {"shape", shape}, {"dtype", dtype}, {"trainable", trainable}}, name);
    if (out.empty()) return Output{};
    v = out[0];
  }
  Output init;
  {
    auto scope = b.name_scope(name);
    init = on_variable(b, "Assign", v, {initial_value});
  }
  if (!init.valid()) return Output{};
  b.graph().add_to_collection("variable_initializers", init.node);
  return v;
}

Output local_variable(GraphBuilder& b, const std::string& name, const Shape& shape, DType dtype,
                      Output initial_value) {
  const std::string unique = b.unique_name(name);
  const runtime::AttrMap attrs{{"var", unique}, {"shape", shape}, {"dtype", dtype}};
  runtime::AttrMap read = attrs;
  read["trainable"] = false;
  read["local"] = true;
  std::vector<Output> out = b.add_node("Variable", {}, std::move(read), name);
  if (out.empty()) return Output{};
  Output init;
  {
    auto scope = b.name_scope(name);
    runtime::AttrMap write = attrs;
    write["local"] = true;
    init = b.add("Assign", {initial_value}, std::move(write));
  }
  if (!init.valid()) return Output{};
  b.graph().add_to_collection("local_variable_initializers", init.node);
  return out[0];
}

std::vector<Output> variable_parts(GraphBuilder& b, const std::string& name, const Shape& shape,
                                   DType dtype, Output initial_value, int parts, bool trainable) {
  if (shape.rank() < 1 || !shape.fully_defined() || parts < 1) {
    b.record_error(runtime::invalid_argument("partitioned variable '", name, "': shape ", shape,
                                             " in ", parts, " parts"));
    return {};
  }
  const int64_t rows = shape.dim(0);
  const int64_t n = std::min<int64_t>(parts, std::max<int64_t>(rows, 1));
  if (n == 1) return {variable(b, name, shape, dtype, initial_value, trainable)};
  std::vector<Output> pieces;
  auto scope = b.name_scope(name);
  int64_t begin = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t size = rows / n + (i < rows % n ? 1 : 0);
    std::vector<int64_t> dims = shape.dims();
    dims[0] = size;
    std::vector<int64_t> from(shape.rank(), 0), count = dims;
    from[0] = begin;
    Output init = slice(b, initial_value, from, count);
    pieces.push_back(variable(b, "part_" + std::to_string(i), Shape(dims), dtype, init, trainable));
    begin += size;
  }
  return pieces;
}

Output partitioned_variable(GraphBuilder& b, const std::string& name, const Shape& shape,
                            DType dtype, Output initial_value, int parts, bool trainable) {
  std::vector<Output> pieces =
      variable_parts(b, name, shape, dtype, initial_value, parts, trainable);
  if (pieces.empty()) return Output{};
  return pieces.size() == 1 ? pieces[0] : concat(b, pieces, 0);
}

const std::string& variable_name(const Node& n) { return n.attr<std::string>("var"); }

Output read_value(GraphBuilder& b, Output var) {
  Output now = on_variable(b, "ReadVariable", var, {});
  if (!now.valid()) return now;
  // The read runs where the variable lives, as placement puts a variable's readers; what
  // follows, where the caller builds.
  const std::string& home = b.graph().node(var.node).device;
  if (!home.empty()) b.graph().set_device(now.node, home);
  if (!runtime::is_floating(b.dtype(var))) return now;
  // Differentiated as the variable is: its gradient flows to `var` (read where it was made, in a
  // loop entered once and summed over the iterations) through a term that is exactly 0.
  return add(b, now, sub(b, var, stop_gradient(b, var)));
}

Output assign(GraphBuilder& b, Output var, Output value) {
  return on_variable(b, "Assign", var, {value});
}
Output assign_add(GraphBuilder& b, Output var, Output value) {
  return on_variable(b, "AssignAdd", var, {value});
}
Output assign_sub(GraphBuilder& b, Output var, Output value) {
  return on_variable(b, "AssignSub", var, {value});
}

Output scatter(GraphBuilder& b, Scatter how, Output var, Output indices, Output updates) {
  static const char* const kOps[] = {"ScatterUpdate", "ScatterAdd", "ScatterSub", "ScatterMul",
                                     "ScatterDiv",    "ScatterMin", "ScatterMax"};
  return on_variable(b, kOps[static_cast<int>(how)], var, {indices, updates});
}

int global_variables_initializer(GraphBuilder& b) {
  return no_op(b, b.graph().collection("variable_initializers"), "init");
}

int local_variables_initializer(GraphBuilder& b) {
  return no_op(b, b.graph().collection("local_variable_initializers"), "init_locals");
}

Output global_step(GraphBuilder& b) {
  auto root = b.root_name_scope();
  int id = b.graph().find("global_step");
  if (id >= 0 && b.graph().node(id).op == "Variable") return Output{id, 0};
  return variable(b, "global_step", Shape{}, DType::kInt64, scalar(b, 0, DType::kInt64), false);
}

Output glorot_uniform(GraphBuilder& b, const Shape& shape, DType dtype, int64_t seed) {
  auto [fan_in, fan_out] = fans(shape);
  double limit = std::sqrt(6.0 / (fan_in + fan_out));
  return random_uniform(b, shape, -limit, limit, dtype, seed);
}

Output he_normal(GraphBuilder& b, const Shape& shape, DType dtype, int64_t seed) {
  double stddev = std::sqrt(2.0 / fans(shape).first) / 0.87962566103423978;
  return truncated_normal(b, shape, 0.0, stddev, dtype, seed);
}

}  // namespace troupe::ops
