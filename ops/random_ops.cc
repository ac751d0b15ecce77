#include "ops/random_ops.h"

#include "ops/math_ops.h"
#include "ops/op_def_names.h"

namespace troupe::ops {

namespace {

const runtime::AttrMap kRandomDefaults{
    {"shape", Shape{}}, {"dtype", DType::kFloat32}, {"seed", int64_t{0}}, {"seed2", int64_t{0}}};

// Shape from the attribute, or from the optional `like` input at run time.
Status random_shape(InferenceContext& c) {
  DType t = c.attr<DType>("dtype");
  if (!runtime::is_floating(t)) return c.error("dtype must be float32 or float64");
  if (c.num_inputs() > 1) return c.error("takes at most one input (a tensor to take the shape of)");
  if (c.num_inputs() == 1) {
    c.set_output(0, t, c.input_shape(0));
    return runtime::ok_status();
  }
  const Shape& s = c.attr<Shape>("shape");
  if (!s.fully_defined()) return c.error("shape ", s, " must be fully defined");
  c.set_output(0, t, s);
  return runtime::ok_status();
}

Output random(GraphBuilder& b, const char* op, const Shape& shape, DType dtype, int64_t seed,
              Output like = Output{}) {
  auto [s1, s2] = b.random_seeds(seed);
  runtime::AttrMap attrs{{"dtype", dtype}, {"seed", s1}, {"seed2", s2}};
  if (like.valid()) return b.add(op, {like}, attrs);
  attrs["shape"] = shape;
  return b.add(op, {}, attrs);
}

// y = x * scale + shift, skipped where it would be the identity.
Output affine(GraphBuilder& b, Output x, double scale, double shift) {
  if (scale != 1) x = mul(b, x, scale);
  if (shift != 0) x = add(b, x, shift);
  return x;
}

}  // namespace

TROUPE_REGISTER_OP(RandomUniform)
    .variadic_input("like", 0)
    .output("y")
    .attrs(kRandomDefaults)
    .shape_fn(random_shape)
    .no_gradient()
    .doc("y ~ U[0, 1), elementwise");

TROUPE_REGISTER_OP(RandomNormal)
    .variadic_input("like", 0)
    .output("y")
    .attrs(kRandomDefaults)
    .shape_fn(random_shape)
    .no_gradient()
    .doc("y ~ N(0, 1), elementwise");

TROUPE_REGISTER_OP(TruncatedNormal)
    .variadic_input("like", 0)
    .output("y")
    .attrs(kRandomDefaults)
    .shape_fn(random_shape)
    .no_gradient()
    .doc("y ~ N(0, 1) restricted to [-2, 2] (values outside are drawn again)");

Output random_uniform(GraphBuilder& b, const Shape& shape, double minval, double maxval,
                      DType dtype, int64_t seed) {
  return affine(b, random(b, "RandomUniform", shape, dtype, seed), maxval - minval, minval);
}
Output random_normal(GraphBuilder& b, const Shape& shape, double mean, double stddev, DType dtype,
                     int64_t seed) {
  return affine(b, random(b, "RandomNormal", shape, dtype, seed), stddev, mean);
}
Output truncated_normal(GraphBuilder& b, const Shape& shape, double mean, double stddev,
                        DType dtype, int64_t seed) {
  return affine(b, random(b, "TruncatedNormal", shape, dtype, seed), stddev, mean);
}
Output random_uniform_like(GraphBuilder& b, Output x, int64_t seed) {
  if (!x.valid()) return Output{};
  return random(b, "RandomUniform", Shape{}, b.dtype(x), seed, x);
}

}  // namespace troupe::ops
