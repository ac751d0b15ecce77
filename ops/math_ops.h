// Math ops: elementwise arithmetic with numpy broadcasting, comparisons and logic, matrix
// products and reductions. Gradients are defined next to each op in math_ops.cc.
//
//   Output h = add(b, matmul(b, x, w), bias);          // x·w + bias
//   Output m = reduce_mean(b, square(b, sub(b, y, t)));  // scalar
//   Output s = mul(b, x, 0.5);                         // a scalar operand of x's dtype
//   Output k = argmax(b, logits, 1);                   // int64 class ids
//
// Shape and dtype errors are recorded in the builder. Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "ops/builder_names.h"

namespace troupe::ops {

// y = f(x), elementwise.
Output neg(GraphBuilder& b, Output x);
Output abs(GraphBuilder& b, Output x);
Output sign(GraphBuilder& b, Output x);
Output square(GraphBuilder& b, Output x);
Output sqrt(GraphBuilder& b, Output x);
Output rsqrt(GraphBuilder& b, Output x);
Output exp(GraphBuilder& b, Output x);
Output log(GraphBuilder& b, Output x);
Output log1p(GraphBuilder& b, Output x);
Output cos(GraphBuilder& b, Output x);  // radians
Output sin(GraphBuilder& b, Output x);
Output floor(GraphBuilder& b, Output x);
// Rounds half to even, as TF and numpy do.
Output round(GraphBuilder& b, Output x);
Output ceil(GraphBuilder& b, Output x);
// tf.math's trigonometric and hyperbolic functions and their inverses (radians).
Output tan(GraphBuilder& b, Output x);
Output asin(GraphBuilder& b, Output x);
Output acos(GraphBuilder& b, Output x);
Output atan(GraphBuilder& b, Output x);
Output sinh(GraphBuilder& b, Output x);
Output cosh(GraphBuilder& b, Output x);
Output asinh(GraphBuilder& b, Output x);
Output acosh(GraphBuilder& b, Output x);
Output atanh(GraphBuilder& b, Output x);
// The error function, its complement, ln |Gamma|, its derivative (digamma), e^x - 1, 1 / x.
Output erf(GraphBuilder& b, Output x);
Output erfc(GraphBuilder& b, Output x);
Output lgamma(GraphBuilder& b, Output x);
Output digamma(GraphBuilder& b, Output x);
Output expm1(GraphBuilder& b, Output x);
Output reciprocal(GraphBuilder& b, Output x);
// The a-th derivative of digamma (a: whole numbers as floats, not differentiated).
Output polygamma(GraphBuilder& b, Output a, Output x);

// z = f(x, y), elementwise with broadcasting; x and y share a dtype.
Output add(GraphBuilder& b, Output x, Output y);
Output sub(GraphBuilder& b, Output x, Output y);
Output mul(GraphBuilder& b, Output x, Output y);
// Integer division truncates toward zero and fails on a zero divisor.
Output div(GraphBuilder& b, Output x, Output y);
Output pow(GraphBuilder& b, Output x, Output y);
Output maximum(GraphBuilder& b, Output x, Output y);
Output minimum(GraphBuilder& b, Output x, Output y);
// The angle of the point (x, y), in (-pi, pi]: note y first, as tf.math.atan2.
Output atan2(GraphBuilder& b, Output y, Output x);
Output squared_difference(GraphBuilder& b, Output x, Output y);  // (x - y)^2
// Division rounded toward negative infinity, and its remainder (with the divisor's sign, as
// Python's // and %); integer divisors of zero are an error.
Output floor_div(GraphBuilder& b, Output x, Output y);
Output floor_mod(GraphBuilder& b, Output x, Output y);
// With a scalar of x's dtype as the second operand.
Output add(GraphBuilder& b, Output x, double y);
Output sub(GraphBuilder& b, Output x, double y);
Output mul(GraphBuilder& b, Output x, double y);
Output div(GraphBuilder& b, Output x, double y);

// Bool results, with broadcasting.
Output equal(GraphBuilder& b, Output x, Output y);
Output not_equal(GraphBuilder& b, Output x, Output y);
Output less(GraphBuilder& b, Output x, Output y);
Output less_equal(GraphBuilder& b, Output x, Output y);
Output greater(GraphBuilder& b, Output x, Output y);
Output greater_equal(GraphBuilder& b, Output x, Output y);
Output logical_and(GraphBuilder& b, Output x, Output y);
Output logical_or(GraphBuilder& b, Output x, Output y);
Output logical_not(GraphBuilder& b, Output x);

// a·c of rank-2 tensors, either transposed first.
Output matmul(GraphBuilder& b, Output a, Output c, bool transpose_a = false,
              bool transpose_b = false, const std::string& name = "");
// Batched a·c over leading dims (broadcast), either adjoint (transposed) first.
Output batch_matmul(GraphBuilder& b, Output a, Output c, bool adj_x = false, bool adj_y = false,
                    const std::string& name = "");

// Reductions over `axes` (empty: all); `keep_dims` keeps reduced dims as size 1.
Output reduce_sum(GraphBuilder& b, Output x, const std::vector<int64_t>& axes = {},
                  bool keep_dims = false);
Output reduce_mean(GraphBuilder& b, Output x, const std::vector<int64_t>& axes = {},
                   bool keep_dims = false);
Output reduce_max(GraphBuilder& b, Output x, const std::vector<int64_t>& axes = {},
                  bool keep_dims = false);
Output reduce_min(GraphBuilder& b, Output x, const std::vector<int64_t>& axes = {},
                  bool keep_dims = false);
Output reduce_prod(GraphBuilder& b, Output x, const std::vector<int64_t>& axes = {},
                   bool keep_dims = false);
// log(sum(exp(x))) computed stably (shifted by the max).
Output reduce_logsumexp(GraphBuilder& b, Output x, const std::vector<int64_t>& axes = {},
                        bool keep_dims = false);
// tf.clip_by_value: min(max(x, lo), hi), elementwise; the gradient passes where x is inside.
Output clip_by_value(GraphBuilder& b, Output x, double lo, double hi);

// tf.math.cumsum: the running sum along `axis`; `exclusive` leaves each element out of its
// own sum, `reverse` sums from the end.
Output cumsum(GraphBuilder& b, Output x, int64_t axis = 0, bool exclusive = false,
              bool reverse = false);
// tf.math.cumprod: the running product, likewise (its gradient divides by x: x nonzero).
Output cumprod(GraphBuilder& b, Output x, int64_t axis = 0, bool exclusive = false,
               bool reverse = false);

// Index of the largest (smallest) value along `axis`, as `out` (int32 or int64).
Output argmax(GraphBuilder& b, Output x, int64_t axis, DType out = DType::kInt64);
Output argmin(GraphBuilder& b, Output x, int64_t axis, DType out = DType::kInt64);

}  // namespace troupe::ops
