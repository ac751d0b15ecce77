// Variables and their initializers. A variable's value lives outside the graph, in a
// VariableStore (a ParameterShardActor's, or the local executor's); the graph holds a Variable
// node that reads it and Assign nodes that write it, as TensorFlow 1.x does.
//
//   Output w = variable(b, "dense/kernel", Shape{784, 256}, DType::kFloat32,
//                       glorot_uniform(b, Shape{784, 256}));
//   int init = global_variables_initializer(b);   // run once as a target, or restore instead
//   Output count = local_variable(b, "count", Shape{}, DType::kFloat64, scalar(b, 0.0));
//   Output step = global_step(b);                 // int64, not trainable
//   Output rows = scatter(b, Scatter::kAdd, w, ids, deltas);   // tf.scatter_add
//
// Not thread-safe (builders).
#pragma once

#include <string>
#include <vector>

#include "ops/builder_names.h"

namespace troupe::ops {

// Adds a variable named `name` and its initializer (`initial_value`, shaped like the variable);
// its shape must be fully defined.
Output variable(GraphBuilder& b, const std::string& name, const Shape& shape, DType dtype,
                Output initial_value, bool trainable = true);
// tf.local_variable: a variable of this session alone (a streaming metric's counts). It is never
// saved, restored, exported or placed on a ps (runtime::Graph::variables() leaves it out, and
// VariableStore::names() its value), nor trained; local_variables_initializer() sets it to
// `initial_value`, as an Estimator does before each evaluation. Its shape may leave dims unknown
// (as TF's validate_shape=False): each assign then sets them, as a contingency table grows.
Output local_variable(GraphBuilder& b, const std::string& name, const Shape& shape, DType dtype,
                      Output initial_value);
// A variable split along dimension 0 into `parts` variables "<name>/part_<i>" (the first rows
// % parts of them one row longer), each initialised with its rows of `initial_value`, so that a
// cluster's placement spreads them over ps tasks (runtime/placement.h), as TF's partitioners
// do. Returns their concatenation: reads gather the parts, gradients split over them, and each
// part's update is applied where it lives.
Output partitioned_variable(GraphBuilder& b, const std::string& name, const Shape& shape,
                            DType dtype, Output initial_value, int parts, bool trainable = true);
// partitioned_variable's parts themselves (one: the variable `name`), for reads that gather rows
// from each where it lives (ops::embedding_lookup).
std::vector<Output> variable_parts(GraphBuilder& b, const std::string& name, const Shape& shape,
                                   DType dtype, Output initial_value, int parts,
                                   bool trainable = true);
// The node's variable name: the name its value has in the store.
const std::string& variable_name(const runtime::Node& variable_node);
// tf.Variable.read_value for a variable `var` reads: the value when this node runs. Inside a
// loop's body it reads once per iteration, after the writes before it (ordered by control
// edges), where `var` itself, read outside, enters the loop once. Its gradient is the
// variable's, summed over the iterations that read it (a floating variable is also read where
// `var` is, once a step, for that). The read is placed with the variable.
Output read_value(GraphBuilder& b, Output var);
// Writes `value` into the variable read by `var` (a Variable output); returns the new value.
Output assign(GraphBuilder& b, Output var, Output value);
Output assign_add(GraphBuilder& b, Output var, Output value);
Output assign_sub(GraphBuilder& b, Output var, Output value);
// tf.scatter_update, scatter_add, _sub, _mul, _div, _min and _max: the rows `indices` (int32
// or int64, any shape) of the variable `var` reads are replaced by, or combined with, `updates`
// ([indices..., the variable's row dims]); other rows stay. A row named twice takes each
// update in turn (kUpdate: the last). An index out of range is the step's error, and nothing
// is written. Returns the variable's new value.
enum class Scatter { kUpdate, kAdd, kSub, kMul, kDiv, kMin, kMax };
Output scatter(GraphBuilder& b, Scatter how, Output var, Output indices, Output updates);
// A NoOp that runs every variable's initializer: a run target. The local ones have their own.
int global_variables_initializer(GraphBuilder& b);
int local_variables_initializer(GraphBuilder& b);
// The graph's int64 step counter, created (at 0) on first use.
Output global_step(GraphBuilder& b);

// Initial values (Keras' defaults). `seed` 0 draws from the graph seed.
Output glorot_uniform(GraphBuilder& b, const Shape& shape, DType dtype = DType::kFloat32,
                      int64_t seed = 0);
Output he_normal(GraphBuilder& b, const Shape& shape, DType dtype = DType::kFloat32,
                 int64_t seed = 0);

}  // namespace troupe::ops
