// Shape functions shared by several ops: elementwise, broadcasting, reductions. Each infers the
// output dtypes and static shapes from the inputs and attributes and names the node on error.
//
//   TROUPE_REGISTER_OP(Exp).input("x").output("y").shape_fn(shape_fns::unchanged_floating);
//
// Stateless; thread-safe.
#pragma once

#include <vector>

#include "runtime/op_registry.h"

namespace troupe::ops::shape_fns {

using runtime::InferenceContext;
using runtime::Status;

// y has x's dtype and shape.
Status unchanged(InferenceContext& c);
// The same, and x must be float32 or float64.
Status unchanged_floating(InferenceContext& c);
// The same, and x must be numeric (no bool, no string).
Status unchanged_numeric(InferenceContext& c);
// z = f(x, y) with numpy broadcasting; x and y share a dtype, z has it.
Status broadcast_binary(InferenceContext& c);
// The same, with a bool result (comparisons).
Status broadcast_compare(InferenceContext& c);
// Reduces input 0 over attr "axes" (empty: all) keeping the reduced dims as 1 when "keep_dims".
Status reduction(InferenceContext& c);
// The reduction's output shape for `in`; false when an axis is out of range.
bool reduced_shape(const runtime::Shape& in, const std::vector<int64_t>& axes, bool keep_dims,
                   runtime::Shape* out);
// Output 0 is shaped like input 1 (the reference) with input 0's dtype.
Status like_input1(InferenceContext& c);
// op(a) · op(b) for rank-2 a and b, op = transpose when attr "transpose_a" / "transpose_b".
Status matmul(InferenceContext& c);
// For a fused product (_FusedMatMul, _FusedConv2D) after its product's shape function has set
// output 0: input `bias` is a vector of the output's last dim, attr "activation" "" or "Relu".
Status fused_bias_activation(InferenceContext& c, int bias);
// No outputs (NoOp, control-only nodes).
Status no_outputs(InferenceContext& c);

}  // namespace troupe::ops::shape_fns
