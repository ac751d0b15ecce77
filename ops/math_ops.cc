#include "ops/math_ops.h"

#include <algorithm>

#include "ops/array_ops.h"
#include "ops/op_def_names.h"
#include "ops/shape_fns.h"

namespace troupe::ops {

namespace {

Output x_of(const Node& n) { return n.inputs[0]; }
Output y_of(const Node& n) { return n.inputs[1]; }
Output out_of(const Node& n) { return Output{n.id, 0}; }

constexpr double kTwoOverSqrtPi = 1.1283791670955126;  // erf's derivative at 0

// Gradients of z = f(x, y): each partial summed back to its operand's shape.
Grads unbroadcast(GraphBuilder& b, const Node& n, Output dx, Output dy) {
  return Grads{sum_to_shape_of(b, dx, x_of(n)), sum_to_shape_of(b, dy, y_of(n))};
}

// Cumsum's and Cumprod's: x's shape, and an axis within it.
Status cumulative_shape(InferenceContext& c) {
  TROUPE_RETURN_IF_ERROR(shape_fns::unchanged_numeric(c));
  const Shape& s = c.input_shape(0);
  const int64_t axis = c.attr<int64_t>("axis");
  if (s.rank_known() && (axis < -s.rank() || axis >= s.rank())) {
    return c.error("axis ", axis, " out of range for ", s);
  }
  return runtime::ok_status();
}

Status logical_binary(InferenceContext& c) {
  if (c.input_dtype(0) != DType::kBool || c.input_dtype(1) != DType::kBool) {
    return c.error("needs bool inputs");
  }
  return shape_fns::broadcast_binary(c);
}

}  // namespace

// ---- unary ----------------------------------------------------------------------------------

// y = -x; dx = -dy
TROUPE_REGISTER_OP(Neg)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_numeric)
    .gradient([](GraphBuilder& b, const Node&, const Grads& dy) { return Grads{neg(b, dy[0])}; })
    .doc("y = -x");

// y = |x|; dx = dy * sign(x)
TROUPE_REGISTER_OP(Abs)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_numeric)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{mul(b, dy[0], sign(b, x_of(n)))};
    })
    .doc("y = |x|");

TROUPE_REGISTER_OP(Sign)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_numeric)
    .no_gradient()
    .doc("y = -1, 0 or 1 as x is negative, zero or positive (zero gradient almost everywhere)");

// y = x^2; dx = 2 x dy
TROUPE_REGISTER_OP(Square)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_numeric)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{mul(b, dy[0], mul(b, x_of(n), 2.0))};
    })
    .doc("y = x * x");

// y = sqrt(x); dx = dy / (2 y)
TROUPE_REGISTER_OP(Sqrt)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{div(b, mul(b, dy[0], 0.5), out_of(n))};
    })
    .doc("y = sqrt(x)");

// y = x^-1/2; dx = -dy y^3 / 2
TROUPE_REGISTER_OP(Rsqrt)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      Output y = out_of(n);
      return Grads{mul(b, dy[0], mul(b, mul(b, y, square(b, y)), -0.5))};
    })
    .doc("y = 1 / sqrt(x)");

// y = e^x; dx = dy y
TROUPE_REGISTER_OP(Exp)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{mul(b, dy[0], out_of(n))};
    })
    .doc("y = e^x");

// y = ln x; dx = dy / x
TROUPE_REGISTER_OP(Log)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{div(b, dy[0], x_of(n))};
    })
    .doc("y = ln(x)");

// y = ln(1 + x); dx = dy / (1 + x)
TROUPE_REGISTER_OP(Log1p)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{div(b, dy[0], add(b, x_of(n), 1.0))};
    })
    .doc("y = ln(1 + x), accurate for small x");

// y = cos x; dx = -dy sin x
TROUPE_REGISTER_OP(Cos)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{neg(b, mul(b, dy[0], sin(b, x_of(n))))};
    })
    .doc("y = cos(x), x in radians");

// y = sin x; dx = dy cos x
TROUPE_REGISTER_OP(Sin)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{mul(b, dy[0], cos(b, x_of(n)))};
    })
    .doc("y = sin(x), x in radians");

// y = tan x; dx = dy (1 + y^2)
TROUPE_REGISTER_OP(Tan)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{mul(b, dy[0], add(b, square(b, out_of(n)), 1.0))};
    })
    .doc("y = tan(x), x in radians");

// y = asin x; dx = dy / sqrt(1 - x^2)
TROUPE_REGISTER_OP(Asin)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{
          mul(b, dy[0], rsqrt(b, sub(b, scalar_like(b, x_of(n), 1.0), square(b, x_of(n)))))};
    })
    .doc("y = arcsin(x), in [-pi/2, pi/2]");

// y = acos x; dx = -dy / sqrt(1 - x^2)
TROUPE_REGISTER_OP(Acos)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{neg(
          b, mul(b, dy[0], rsqrt(b, sub(b, scalar_like(b, x_of(n), 1.0), square(b, x_of(n))))))};
    })
    .doc("y = arccos(x), in [0, pi]");

// y = atan x; dx = dy / (1 + x^2)
TROUPE_REGISTER_OP(Atan)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{div(b, dy[0], add(b, square(b, x_of(n)), 1.0))};
    })
    .doc("y = arctan(x), in (-pi/2, pi/2)");

// y = sinh x; dx = dy cosh x
TROUPE_REGISTER_OP(Sinh)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{mul(b, dy[0], cosh(b, x_of(n)))};
    })
    .doc("y = sinh(x)");

// y = cosh x; dx = dy sinh x
TROUPE_REGISTER_OP(Cosh)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{mul(b, dy[0], sinh(b, x_of(n)))};
    })
    .doc("y = cosh(x)");

// y = asinh x; dx = dy / sqrt(x^2 + 1)
TROUPE_REGISTER_OP(Asinh)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{mul(b, dy[0], rsqrt(b, add(b, square(b, x_of(n)), 1.0)))};
    })
    .doc("y = arsinh(x)");

// y = acosh x; dx = dy / sqrt(x^2 - 1)
TROUPE_REGISTER_OP(Acosh)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{mul(b, dy[0], rsqrt(b, sub(b, square(b, x_of(n)), 1.0)))};
    })
    .doc("y = arcosh(x), x >= 1");

// y = atanh x; dx = dy / (1 - x^2)
TROUPE_REGISTER_OP(Atanh)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{div(b, dy[0], sub(b, scalar_like(b, x_of(n), 1.0), square(b, x_of(n))))};
    })
    .doc("y = artanh(x), |x| < 1");

// y = erf x; dx = dy 2/sqrt(pi) e^(-x^2)
TROUPE_REGISTER_OP(Erf)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{mul(b, mul(b, dy[0], exp(b, neg(b, square(b, x_of(n))))), kTwoOverSqrtPi)};
    })
    .doc("y = erf(x), the error function");

// y = erfc x = 1 - erf x; dx = -dy 2/sqrt(pi) e^(-x^2)
TROUPE_REGISTER_OP(Erfc)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{mul(b, mul(b, dy[0], exp(b, neg(b, square(b, x_of(n))))), -kTwoOverSqrtPi)};
    })
    .doc("y = erfc(x) = 1 - erf(x), accurate where erf(x) is near 1");

// y = ln |Gamma(x)|; dx = dy digamma(x)
TROUPE_REGISTER_OP(Lgamma)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{mul(b, dy[0], digamma(b, x_of(n)))};
    })
    .doc("y = ln |Gamma(x)|");

// y = digamma x = d/dx ln Gamma(x); dx = dy polygamma(1, x)
TROUPE_REGISTER_OP(Digamma)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{mul(b, dy[0], polygamma(b, scalar_like(b, x_of(n), 1.0), x_of(n)))};
    })
    .doc("y = digamma(x), the derivative of ln Gamma(x)");

// y = e^x - 1; dx = dy e^x
TROUPE_REGISTER_OP(Expm1)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{mul(b, dy[0], add(b, out_of(n), 1.0))};
    })
    .doc("y = e^x - 1, accurate for small x");

// y = 1 / x; dx = -dy y^2
TROUPE_REGISTER_OP(Reciprocal)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{neg(b, mul(b, dy[0], square(b, out_of(n))))};
    })
    .doc("y = 1 / x");

TROUPE_REGISTER_OP(Ceil)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .no_gradient()
    .doc("y = the smallest integer >= x (zero gradient almost everywhere)");

TROUPE_REGISTER_OP(Floor)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .no_gradient()
    .doc("y = the largest integer <= x (zero gradient almost everywhere)");

TROUPE_REGISTER_OP(Round)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .no_gradient()
    .doc("y = x rounded to the nearest integer, half to even (zero gradient almost everywhere)");

// ---- binary ---------------------------------------------------------------------------------

// z = atan2(y, x), the angle of (x, y); d/dy = x / (x^2 + y^2), d/dx = -y / (x^2 + y^2)
TROUPE_REGISTER_OP(Atan2)
    .input("y")
    .input("x")
    .output("z")
    .shape_fn(shape_fns::broadcast_binary)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dz) {
      Output y = x_of(n), x = y_of(n);
      Output scale = div(b, dz[0], add(b, square(b, x), square(b, y)));
      return unbroadcast(b, n, mul(b, scale, x), neg(b, mul(b, scale, y)));
    })
    .doc("z = atan2(y, x), in (-pi, pi]");

// z = (x - y)^2; dx = 2 dz (x - y), dy = -dx
TROUPE_REGISTER_OP(SquaredDifference)
    .input("x")
    .input("y")
    .output("z")
    .shape_fn(shape_fns::broadcast_binary)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dz) {
      Output dx = mul(b, mul(b, dz[0], sub(b, x_of(n), y_of(n))), 2.0);
      return unbroadcast(b, n, dx, neg(b, dx));
    })
    .doc("z = (x - y)^2");

TROUPE_REGISTER_OP(FloorDiv)
    .input("x")
    .input("y")
    .output("z")
    .shape_fn(shape_fns::broadcast_binary)
    .no_gradient()
    .doc("z = floor(x / y) (integers: toward negative infinity; a zero divisor is an error)");

// z = x - floor(x / y) y; dx = dz, dy = -dz floor(x / y)
TROUPE_REGISTER_OP(FloorMod)
    .input("x")
    .input("y")
    .output("z")
    .shape_fn(shape_fns::broadcast_binary)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dz) {
      return unbroadcast(b, n, dz[0], neg(b, mul(b, dz[0], floor_div(b, x_of(n), y_of(n)))));
    })
    .doc(
        "z = x - floor(x / y) * y, the sign of y's (Python's %); a zero integer divisor is an "
        "error");

// z = polygamma(a, x), the a-th derivative of digamma; dx = dz polygamma(a + 1, x). a is an
// order, not differentiable.
TROUPE_REGISTER_OP(Polygamma)
    .input("a")
    .input("x")
    .output("z")
    .shape_fn(shape_fns::broadcast_binary)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dz) {
      Output dx = mul(b, dz[0], polygamma(b, add(b, x_of(n), 1.0), y_of(n)));
      return Grads{zeros_like(b, x_of(n)), sum_to_shape_of(b, dx, y_of(n))};
    })
    .doc("z = polygamma(a, x) for integer orders a >= 0 (a = 0: digamma)");

// z = x + y; dx = dy, dy = dy
TROUPE_REGISTER_OP(Add)
    .input("x")
    .input("y")
    .output("z")
    .shape_fn(shape_fns::broadcast_binary)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dz) {
      return unbroadcast(b, n, dz[0], dz[0]);
    })
    .doc("z = x + y");

// z = x - y; dx = dz, dy = -dz
TROUPE_REGISTER_OP(Sub)
    .input("x")
    .input("y")
    .output("z")
    .shape_fn(shape_fns::broadcast_binary)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dz) {
      return unbroadcast(b, n, dz[0], neg(b, dz[0]));
    })
    .doc("z = x - y");

// z = x y; dx = dz y, dy = dz x
TROUPE_REGISTER_OP(Mul)
    .input("x")
    .input("y")
    .output("z")
    .shape_fn(shape_fns::broadcast_binary)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dz) {
      return unbroadcast(b, n, mul(b, dz[0], y_of(n)), mul(b, dz[0], x_of(n)));
    })
    .doc("z = x * y");

// z = x / y; dx = dz / y, dy = -dz x / y^2
TROUPE_REGISTER_OP(Div)
    .input("x")
    .input("y")
    .output("z")
    .shape_fn(shape_fns::broadcast_binary)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dz) {
      Output dx = div(b, dz[0], y_of(n));
      Output dy = neg(b, div(b, mul(b, dz[0], x_of(n)), square(b, y_of(n))));
      return unbroadcast(b, n, dx, dy);
    })
    .doc("z = x / y (integers: truncated, and a zero divisor is an error)");

// z = x^y; dx = dz y x^(y-1), dy = dz z ln(x) where x > 0, else 0
TROUPE_REGISTER_OP(Pow)
    .input("x")
    .input("y")
    .output("z")
    .shape_fn([](InferenceContext& c) {
      TROUPE_RETURN_IF_ERROR(c.expect_floating(0));
      return shape_fns::broadcast_binary(c);
    })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dz) {
      Output x = x_of(n), y = y_of(n), z = out_of(n);
      Output dx = mul(b, dz[0], mul(b, y, pow(b, x, sub(b, y, 1.0))));
      Output positive = greater(b, x, scalar_like(b, x, 0.0));
      Output safe_x = select(b, positive, x, ones_like(b, x));
      Output log_x = select(b, positive, log(b, safe_x), zeros_like(b, x));
      Output dy = mul(b, dz[0], mul(b, z, log_x));
      return unbroadcast(b, n, dx, dy);
    })
    .doc("z = x ^ y");

// z = max(x, y); the gradient goes to x where x >= y, else to y
TROUPE_REGISTER_OP(Maximum)
    .input("x")
    .input("y")
    .output("z")
    .shape_fn(shape_fns::broadcast_binary)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dz) {
      Output mask = cast(b, greater_equal(b, x_of(n), y_of(n)), b.dtype(dz[0]));
      Output dx = mul(b, dz[0], mask);
      return unbroadcast(b, n, dx, sub(b, dz[0], dx));
    })
    .doc("z = max(x, y)");

// z = min(x, y); the gradient goes to x where x <= y, else to y
TROUPE_REGISTER_OP(Minimum)
    .input("x")
    .input("y")
    .output("z")
    .shape_fn(shape_fns::broadcast_binary)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dz) {
      Output mask = cast(b, less_equal(b, x_of(n), y_of(n)), b.dtype(dz[0]));
      Output dx = mul(b, dz[0], mask);
      return unbroadcast(b, n, dx, sub(b, dz[0], dx));
    })
    .doc("z = min(x, y)");

TROUPE_REGISTER_OP(Equal)
    .input("x")
    .input("y")
    .output("z")
    .kernel_dtype_from_input(0)
    .shape_fn(shape_fns::broadcast_compare)
    .no_gradient()
    .doc("z = x == y, elementwise with broadcasting");
TROUPE_REGISTER_OP(NotEqual)
    .input("x")
    .input("y")
    .output("z")
    .kernel_dtype_from_input(0)
    .shape_fn(shape_fns::broadcast_compare)
    .no_gradient()
    .doc("z = x != y, elementwise with broadcasting");
TROUPE_REGISTER_OP(Less)
    .input("x")
    .input("y")
    .output("z")
    .kernel_dtype_from_input(0)
    .shape_fn(shape_fns::broadcast_compare)
    .no_gradient()
    .doc("z = x < y, elementwise with broadcasting");
TROUPE_REGISTER_OP(LessEqual)
    .input("x")
    .input("y")
    .output("z")
    .kernel_dtype_from_input(0)
    .shape_fn(shape_fns::broadcast_compare)
    .no_gradient()
    .doc("z = x <= y, elementwise with broadcasting");
TROUPE_REGISTER_OP(Greater)
    .input("x")
    .input("y")
    .output("z")
    .kernel_dtype_from_input(0)
    .shape_fn(shape_fns::broadcast_compare)
    .no_gradient()
    .doc("z = x > y, elementwise with broadcasting");
TROUPE_REGISTER_OP(GreaterEqual)
    .input("x")
    .input("y")
    .output("z")
    .kernel_dtype_from_input(0)
    .shape_fn(shape_fns::broadcast_compare)
    .no_gradient()
    .doc("z = x >= y, elementwise with broadcasting");

TROUPE_REGISTER_OP(IsFinite)
    .input("x")
    .output("y")
    .kernel_dtype_from_input(0)
    .shape_fn([](InferenceContext& c) {
      TROUPE_RETURN_IF_ERROR(c.expect_floating(0));
      c.set_output(0, DType::kBool, c.input_shape(0));
      return runtime::ok_status();
    })
    .no_gradient()
    .doc("y = x is neither infinite nor NaN");

TROUPE_REGISTER_OP(LogicalAnd)
    .input("x")
    .input("y")
    .output("z")
    .shape_fn(logical_binary)
    .no_gradient()
    .doc("z = x && y, with broadcasting");
TROUPE_REGISTER_OP(LogicalOr)
    .input("x")
    .input("y")
    .output("z")
    .shape_fn(logical_binary)
    .no_gradient()
    .doc("z = x || y, with broadcasting");
TROUPE_REGISTER_OP(LogicalNot)
    .input("x")
    .output("y")
    .shape_fn([](InferenceContext& c) {
      if (c.input_dtype(0) != DType::kBool) return c.error("needs a bool input");
      return shape_fns::unchanged(c);
    })
    .no_gradient()
    .doc("y = !x");

// ---- matrix products ------------------------------------------------------------------------

// C = op(A) op(B), op = transpose or not. With C = A B: dA = dC B^T, dB = A^T dC; the transposed
// cases follow by swapping roles (TF's MatMulGrad).
TROUPE_REGISTER_OP(MatMul)
    .input("a")
    .input("b")
    .output("product")
    .attr("transpose_a", false)
    .attr("transpose_b", false)
    .shape_fn(shape_fns::matmul)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      bool ta = n.attr<bool>("transpose_a"), tb = n.attr<bool>("transpose_b");
      Output a = n.inputs[0], c = n.inputs[1], g = dy[0];
      if (!ta && !tb) return Grads{matmul(b, g, c, false, true), matmul(b, a, g, true, false)};
      if (!ta && tb) return Grads{matmul(b, g, c, false, false), matmul(b, g, a, true, false)};
      if (ta && !tb) return Grads{matmul(b, c, g, false, true), matmul(b, a, g, false, false)};
      return Grads{matmul(b, c, g, true, true), matmul(b, g, a, true, true)};
    })
    .doc("product = op(a) · op(b) for rank-2 a and b");

TROUPE_REGISTER_OP(BatchMatMul)
    .input("x")
    .input("y")
    .output("z")
    .attr("adj_x", false)
    .attr("adj_y", false)
    .shape_fn([](InferenceContext& c) {
      TROUPE_RETURN_IF_ERROR(c.expect_same_dtype(0, 1));
      const Shape& x = c.input_shape(0);
      const Shape& y = c.input_shape(1);
      if (!x.rank_known() || !y.rank_known()) {
        c.set_output(0, c.input_dtype(0), Shape::unknown());
        return runtime::ok_status();
      }
      if (x.rank() < 2 || y.rank() < 2) return c.error("needs rank >= 2, got ", x, " and ", y);
      bool ax = c.attr<bool>("adj_x"), ay = c.attr<bool>("adj_y");
      int64_t m = x.dim(x.rank() - (ax ? 1 : 2)), k1 = x.dim(x.rank() - (ax ? 2 : 1));
      int64_t k2 = y.dim(y.rank() - (ay ? 1 : 2)), n = y.dim(y.rank() - (ay ? 2 : 1));
      if (k1 >= 0 && k2 >= 0 && k1 != k2) {
        return c.error("inner dimensions differ: ", x, " and ", y);
      }
      Shape bx(std::vector<int64_t>(x.dims().begin(), x.dims().end() - 2));
      Shape by(std::vector<int64_t>(y.dims().begin(), y.dims().end() - 2));
      Shape batch;
      if (!runtime::broadcast_shapes(bx, by, &batch)) {
        return c.error("batch dimensions of ", x, " and ", y, " cannot be broadcast");
      }
      std::vector<int64_t> dims = batch.dims();
      dims.push_back(m);
      dims.push_back(n);
      c.set_output(0, c.input_dtype(0), Shape(dims));
      return runtime::ok_status();
    })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dz) {
      bool ax = n.attr<bool>("adj_x"), ay = n.attr<bool>("adj_y");
      Output x = n.inputs[0], y = n.inputs[1], g = dz[0];
      Output dx, dy;
      if (!ax && !ay) {
        dx = batch_matmul(b, g, y, false, true);
        dy = batch_matmul(b, x, g, true, false);
      } else if (!ax && ay) {
        dx = batch_matmul(b, g, y, false, false);
        dy = batch_matmul(b, g, x, true, false);
      } else if (ax && !ay) {
        dx = batch_matmul(b, y, g, false, true);
        dy = batch_matmul(b, x, g, false, false);
      } else {
        dx = batch_matmul(b, y, g, true, true);
        dy = batch_matmul(b, g, x, true, true);
      }
      return Grads{sum_to_shape_of(b, dx, x), sum_to_shape_of(b, dy, y)};
    })
    .doc("z[..., :, :] = op(x[..., :, :]) · op(y[..., :, :]) with broadcast batch dims");

// ---- reductions -----------------------------------------------------------------------------

namespace {

const std::vector<int64_t>& axes_of(const Node& n) { return n.attr<std::vector<int64_t>>("axes"); }

// dy reshaped so that it broadcasts against the reduction's input: the reduced dims back as 1.
Output keep_dims_grad(GraphBuilder& b, const Node& n, Output dy) {
  if (n.attr<bool>("keep_dims")) return dy;
  const Shape& in = b.shape(n.inputs[0]);
  if (!in.rank_known()) {
    b.record_error(
        runtime::invalid_argument(n.op, " '", n.name, "': the gradient needs the input's rank"));
    return Output{};
  }
  std::vector<int> axes;
  for (int64_t a : axes_of(n)) {
    int ax;
    in.canonical_axis(a, &ax);
    axes.push_back(ax);
  }
  if (axes_of(n).empty()) {
    for (int i = 0; i < in.rank(); ++i) axes.push_back(i);
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  for (int ax : axes) dy = expand_dims(b, dy, ax);
  return dy;
}

runtime::AttrMap reduce_attrs(const std::vector<int64_t>& axes, bool keep_dims) {
  return {{"axes", axes}, {"keep_dims", keep_dims}};
}

const runtime::AttrMap kReduceDefaults = reduce_attrs({}, false);

}  // namespace

// y = sum x over axes; dx = dy broadcast back
TROUPE_REGISTER_OP(Sum)
    .input("x")
    .output("y")
    .attrs(kReduceDefaults)
    .shape_fn(shape_fns::reduction)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{broadcast_to_shape_of(b, keep_dims_grad(b, n, dy[0]), n.inputs[0])};
    })
    .doc("y = the sum of x over `axes` (all when empty)");

// y = mean x over axes; dx = dy broadcast back / (elements per output)
TROUPE_REGISTER_OP(Mean)
    .input("x")
    .output("y")
    .attrs(kReduceDefaults)
    .shape_fn(shape_fns::reduction)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      Output x = n.inputs[0];
      Output spread = broadcast_to_shape_of(b, keep_dims_grad(b, n, dy[0]), x);
      const Shape& in = b.shape(x);
      const Shape& out = n.output_shapes[0];
      if (in.fully_defined() && out.fully_defined() && out.num_elements() > 0) {
        // Known sizes: the count is a constant, not four nodes computing it every step.
        return Grads{div(b, spread, double(in.num_elements()) / double(out.num_elements()))};
      }
      DType t = b.dtype(x);
      Output count = div(b, cast(b, size(b, x), t), cast(b, size(b, Output{n.id, 0}), t));
      return Grads{div(b, spread, count)};
    })
    .doc("y = the mean of x over `axes` (all when empty)");

namespace {
// For max and min: the gradient is shared equally among the elements that attain the extreme.
Grads extreme_grad(GraphBuilder& b, const Node& n, const Grads& dy) {
  Output x = n.inputs[0];
  Output y = keep_dims_grad(b, n, Output{n.id, 0});
  Output g = keep_dims_grad(b, n, dy[0]);
  Output hits = cast(b, equal(b, x, y), b.dtype(x));
  Output count = b.add("Sum", {hits}, reduce_attrs(axes_of(n), true));
  return Grads{mul(b, div(b, hits, count), g)};
}
}  // namespace

TROUPE_REGISTER_OP(Max)
    .input("x")
    .output("y")
    .attrs(kReduceDefaults)
    .shape_fn(shape_fns::reduction)
    .gradient(extreme_grad)
    .doc("y = the maximum of x over `axes`; ties share the gradient");

TROUPE_REGISTER_OP(Min)
    .input("x")
    .output("y")
    .attrs(kReduceDefaults)
    .shape_fn(shape_fns::reduction)
    .gradient(extreme_grad)
    .doc("y = the minimum of x over `axes`; ties share the gradient");

// y = prod x over axes; dx_i = dy * prod_{j != i} x_j, computed without dividing by x_i so that
// zeros are exact (ProdGrad).
TROUPE_REGISTER_OP(Prod)
    .input("x")
    .output("y")
    .attrs(kReduceDefaults)
    .shape_fn(shape_fns::reduction)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      Output g = keep_dims_grad(b, n, dy[0]);
      return Grads{b.add("ProdGrad", {n.inputs[0], g}, {{"axes", axes_of(n)}})};
    })
    .doc("y = the product of x over `axes`");

TROUPE_REGISTER_OP(ProdGrad)
    .input("x")
    .input("dy")
    .output("dx")
    .attr("axes", std::vector<int64_t>{})
    .shape_fn(shape_fns::unchanged)
    .no_gradient()
    .doc(
        "dx_i = dy * (product of the other elements of x_i's reduced slice); dy has the "
        "reduced dims kept (second derivatives are not supported)");

namespace {
Status arg_reduction(InferenceContext& c) {
  if (!runtime::is_numeric(c.input_dtype(0))) return c.error("needs a numeric input");
  DType out = c.attr<DType>("output_type");
  if (out != DType::kInt32 && out != DType::kInt64)
    return c.error("output_type must be int32 or int64");
  Shape s;
  if (!shape_fns::reduced_shape(c.input_shape(0), {c.attr<int64_t>("axis")}, false, &s)) {
    return c.error("axis ", c.attr<int64_t>("axis"), " out of range for ", c.input_shape(0));
  }
  c.set_output(0, out, s);
  return runtime::ok_status();
}
}  // namespace

// y = the running sum of x along `axis` (exclusive: without the element itself; reverse: from
// the end); dx = the running sum of dy the other way.
TROUPE_REGISTER_OP(Cumsum)
    .input("x")
    .output("y")
    .attr("axis", int64_t{0})
    .attr("exclusive", false)
    .attr("reverse", false)
    .shape_fn(cumulative_shape)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{cumsum(b, dy[0], n.attr<int64_t>("axis"), n.attr<bool>("exclusive"),
                          !n.attr<bool>("reverse"))};
    })
    .doc("y = the running sum of x along `axis` (tf.math.cumsum)");

// y = the running product; dx = cumsum(y dy, the other way) / x (x nonzero, as TF's).
TROUPE_REGISTER_OP(Cumprod)
    .input("x")
    .output("y")
    .attr("axis", int64_t{0})
    .attr("exclusive", false)
    .attr("reverse", false)
    .shape_fn(cumulative_shape)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      const int64_t axis = n.attr<int64_t>("axis");
      const bool exclusive = n.attr<bool>("exclusive"), reverse = n.attr<bool>("reverse");
      Output sums = cumsum(b, mul(b, out_of(n), dy[0]), axis, exclusive, !reverse);
      return Grads{div(b, sums, x_of(n))};
    })
    .doc("y = the running product of x along `axis` (tf.math.cumprod)");

TROUPE_REGISTER_OP(ArgMax)
    .input("x")
    .output("index")
    .attr("axis", int64_t{0})
    .attr("output_type", DType::kInt64)
    .kernel_dtype_from_input(0)
    .shape_fn(arg_reduction)
    .no_gradient()
    .doc("index = the position of the largest value along `axis` (the first on ties)");

TROUPE_REGISTER_OP(ArgMin)
    .input("x")
    .output("index")
    .attr("axis", int64_t{0})
    .attr("output_type", DType::kInt64)
    .kernel_dtype_from_input(0)
    .shape_fn(arg_reduction)
    .no_gradient()
    .doc("index = the position of the smallest value along `axis` (the first on ties)");

// ---- builders -------------------------------------------------------------------------------

Output neg(GraphBuilder& b, Output x) { return b.add("Neg", {x}); }
Output abs(GraphBuilder& b, Output x) { return b.add("Abs", {x}); }
Output sign(GraphBuilder& b, Output x) { return b.add("Sign", {x}); }
Output square(GraphBuilder& b, Output x) { return b.add("Square", {x}); }
Output sqrt(GraphBuilder& b, Output x) { return b.add("Sqrt", {x}); }
Output rsqrt(GraphBuilder& b, Output x) { return b.add("Rsqrt", {x}); }
Output exp(GraphBuilder& b, Output x) { return b.add("Exp", {x}); }
Output log(GraphBuilder& b, Output x) { return b.add("Log", {x}); }
Output log1p(GraphBuilder& b, Output x) { return b.add("Log1p", {x}); }
Output clip_by_value(GraphBuilder& b, Output x, double lo, double hi) {
  if (lo > hi) {
    b.record_error(runtime::invalid_argument("clip_by_value: lo ", lo, " is above hi ", hi));
    return Output{};
  }
  auto scope = b.name_scope("clip_by_value");
  return minimum(b, maximum(b, x, scalar_like(b, x, lo)), scalar_like(b, x, hi));
}

Output cos(GraphBuilder& b, Output x) { return b.add("Cos", {x}); }
Output sin(GraphBuilder& b, Output x) { return b.add("Sin", {x}); }
Output floor(GraphBuilder& b, Output x) { return b.add("Floor", {x}); }
Output round(GraphBuilder& b, Output x) { return b.add("Round", {x}); }
Output tan(GraphBuilder& b, Output x) { return b.add("Tan", {x}); }
Output asin(GraphBuilder& b, Output x) { return b.add("Asin", {x}); }
Output acos(GraphBuilder& b, Output x) { return b.add("Acos", {x}); }
Output atan(GraphBuilder& b, Output x) { return b.add("Atan", {x}); }
Output sinh(GraphBuilder& b, Output x) { return b.add("Sinh", {x}); }
Output cosh(GraphBuilder& b, Output x) { return b.add("Cosh", {x}); }
Output asinh(GraphBuilder& b, Output x) { return b.add("Asinh", {x}); }
Output acosh(GraphBuilder& b, Output x) { return b.add("Acosh", {x}); }
Output atanh(GraphBuilder& b, Output x) { return b.add("Atanh", {x}); }
Output erf(GraphBuilder& b, Output x) { return b.add("Erf", {x}); }
Output erfc(GraphBuilder& b, Output x) { return b.add("Erfc", {x}); }
Output lgamma(GraphBuilder& b, Output x) { return b.add("Lgamma", {x}); }
Output digamma(GraphBuilder& b, Output x) { return b.add("Digamma", {x}); }
Output expm1(GraphBuilder& b, Output x) { return b.add("Expm1", {x}); }
Output reciprocal(GraphBuilder& b, Output x) { return b.add("Reciprocal", {x}); }
Output ceil(GraphBuilder& b, Output x) { return b.add("Ceil", {x}); }
Output atan2(GraphBuilder& b, Output y, Output x) { return b.add("Atan2", {y, x}); }
Output squared_difference(GraphBuilder& b, Output x, Output y) {
  return b.add("SquaredDifference", {x, y});
}
Output floor_div(GraphBuilder& b, Output x, Output y) { return b.add("FloorDiv", {x, y}); }
Output floor_mod(GraphBuilder& b, Output x, Output y) { return b.add("FloorMod", {x, y}); }
Output polygamma(GraphBuilder& b, Output a, Output x) { return b.add("Polygamma", {a, x}); }

Output add(GraphBuilder& b, Output x, Output y) { return b.add("Add", {x, y}); }
Output sub(GraphBuilder& b, Output x, Output y) { return b.add("Sub", {x, y}); }
Output mul(GraphBuilder& b, Output x, Output y) { return b.add("Mul", {x, y}); }
Output div(GraphBuilder& b, Output x, Output y) { return b.add("Div", {x, y}); }
Output pow(GraphBuilder& b, Output x, Output y) { return b.add("Pow", {x, y}); }
Output maximum(GraphBuilder& b, Output x, Output y) { return b.add("Maximum", {x, y}); }
Output minimum(GraphBuilder& b, Output x, Output y) { return b.add("Minimum", {x, y}); }
Output add(GraphBuilder& b, Output x, double y) { return add(b, x, scalar_like(b, x, y)); }
Output sub(GraphBuilder& b, Output x, double y) { return sub(b, x, scalar_like(b, x, y)); }
Output mul(GraphBuilder& b, Output x, double y) { return mul(b, x, scalar_like(b, x, y)); }
Output div(GraphBuilder& b, Output x, double y) { return div(b, x, scalar_like(b, x, y)); }

Output equal(GraphBuilder& b, Output x, Output y) { return b.add("Equal", {x, y}); }
Output not_equal(GraphBuilder& b, Output x, Output y) { return b.add("NotEqual", {x, y}); }
Output less(GraphBuilder& b, Output x, Output y) { return b.add("Less", {x, y}); }
Output less_equal(GraphBuilder& b, Output x, Output y) { return b.add("LessEqual", {x, y}); }
Output greater(GraphBuilder& b, Output x, Output y) { return b.add("Greater", {x, y}); }
Output greater_equal(GraphBuilder& b, Output x, Output y) { return b.add("GreaterEqual", {x, y}); }
Output logical_and(GraphBuilder& b, Output x, Output y) { return b.add("LogicalAnd", {x, y}); }
Output logical_or(GraphBuilder& b, Output x, Output y) { return b.add("LogicalOr", {x, y}); }
Output logical_not(GraphBuilder& b, Output x) { return b.add("LogicalNot", {x}); }

Output matmul(GraphBuilder& b, Output a, Output c, bool transpose_a, bool transpose_b,
              const std::string& name) {
  return b.add("MatMul", {a, c}, {{"transpose_a", transpose_a}, {"transpose_b", transpose_b}},
               name);
}
Output batch_matmul(GraphBuilder& b, Output a, Output c, bool adj_x, bool adj_y,
                    const std::string& name) {
  return b.add("BatchMatMul", {a, c}, {{"adj_x", adj_x}, {"adj_y", adj_y}}, name);
}

Output reduce_sum(GraphBuilder& b, Output x, const std::vector<int64_t>& axes, bool keep_dims) {
  return b.add("Sum", {x}, reduce_attrs(axes, keep_dims));
}
Output reduce_mean(GraphBuilder& b, Output x, const std::vector<int64_t>& axes, bool keep_dims) {
  return b.add("Mean", {x}, reduce_attrs(axes, keep_dims));
}
Output reduce_max(GraphBuilder& b, Output x, const std::vector<int64_t>& axes, bool keep_dims) {
  return b.add("Max", {x}, reduce_attrs(axes, keep_dims));
}
Output reduce_min(GraphBuilder& b, Output x, const std::vector<int64_t>& axes, bool keep_dims) {
  return b.add("Min", {x}, reduce_attrs(axes, keep_dims));
}
Output reduce_prod(GraphBuilder& b, Output x, const std::vector<int64_t>& axes, bool keep_dims) {
  return b.add("Prod", {x}, reduce_attrs(axes, keep_dims));
}
Output reduce_logsumexp(GraphBuilder& b, Output x, const std::vector<int64_t>& axes,
                        bool keep_dims) {
  auto scope = b.name_scope("logsumexp");
  Output m = stop_gradient(b, reduce_max(b, x, axes, true));
  // A row of -inf would give inf - inf; shift by 0 there instead, as TF does.
  Output finite = b.add("IsFinite", {m});
  m = select(b, finite, m, zeros_like(b, m));
  Output y = add(b, log(b, reduce_sum(b, exp(b, sub(b, x, m)), axes, true)), m);
  if (keep_dims || !y.valid()) return y;
  std::vector<int64_t> all = axes;
  for (int i = 0; all.empty() && i < b.shape(x).rank(); ++i) all.push_back(i);
  return squeeze(b, y, all);
}
Output cumprod(GraphBuilder& b, Output x, int64_t axis, bool exclusive, bool reverse) {
  return b.add("Cumprod", {x}, {{"axis", axis}, {"exclusive", exclusive}, {"reverse", reverse}});
}
Output cumsum(GraphBuilder& b, Output x, int64_t axis, bool exclusive, bool reverse) {
  return b.add("Cumsum", {x}, {{"axis", axis}, {"exclusive", exclusive}, {"reverse", reverse}});
}
Output argmax(GraphBuilder& b, Output x, int64_t axis, DType out) {
  return b.add("ArgMax", {x}, {{"axis", axis}, {"output_type", out}});
}
Output argmin(GraphBuilder& b, Output x, int64_t axis, DType out) {
  return b.add("ArgMin", {x}, {{"axis", axis}, {"output_type", out}});
}

}  // namespace troupe::ops
