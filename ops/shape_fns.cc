#include "ops/shape_fns.h"

#include <algorithm>

namespace troupe::ops::shape_fns {

using runtime::DType;
using runtime::Shape;

Status unchanged(InferenceContext& c) {
  c.set_output(0, c.input_dtype(0), c.input_shape(0));
  return runtime::ok_status();
}

Status unchanged_floating(InferenceContext& c) {
  TROUPE_RETURN_IF_ERROR(c.expect_floating(0));
  return unchanged(c);
}

Status unchanged_numeric(InferenceContext& c) {
  if (!runtime::is_numeric(c.input_dtype(0))) {
    return c.error("needs a numeric input, got ", runtime::dtype_name(c.input_dtype(0)));
  }
  return unchanged(c);
}

namespace {
Status broadcast(InferenceContext& c, DType out_dtype) {
  TROUPE_RETURN_IF_ERROR(c.expect_same_dtype(0, 1));
  Shape out;
  if (!runtime::broadcast_shapes(c.input_shape(0), c.input_shape(1), &out)) {
    return c.error("shapes ", c.input_shape(0), " and ", c.input_shape(1),
                   " cannot be broadcast together");
  }
  c.set_output(0, out_dtype, out);
  return runtime::ok_status();
}
}  // namespace

Status broadcast_binary(InferenceContext& c) { return broadcast(c, c.input_dtype(0)); }
Status broadcast_compare(InferenceContext& c) { return broadcast(c, DType::kBool); }

bool reduced_shape(const Shape& in, const std::vector<int64_t>& axes, bool keep_dims, Shape* out) {
  if (!in.rank_known()) {
    *out = Shape::unknown();
    return true;
  }
  std::vector<bool> reduce(in.rank(), axes.empty());
  for (int64_t a : axes) {
    int ax;
    if (!in.canonical_axis(a, &ax)) return false;
    reduce[ax] = true;
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < in.rank(); ++i) {
    if (!reduce[i]) {
      dims.push_back(in.dim(i));
    } else if (keep_dims) {
      dims.push_back(1);
    }
  }
  *out = Shape(std::move(dims));
  return true;
}

Status reduction(InferenceContext& c) {
  Shape out;
  const auto& axes = c.attr<std::vector<int64_t>>("axes");
  if (!reduced_shape(c.input_shape(0), axes, c.attr<bool>("keep_dims"), &out)) {
    return c.error("an axis in [", runtime::attr_debug_string(axes), "] is out of range for shape ",
                   c.input_shape(0));
  }
  c.set_output(0, c.input_dtype(0), out);
  return runtime::ok_status();
}

Status like_input1(InferenceContext& c) {
  c.set_output(0, c.input_dtype(0), c.input_shape(1));
  return runtime::ok_status();
}

Status matmul(InferenceContext& c) {
  TROUPE_RETURN_IF_ERROR(c.expect_same_dtype(0, 1));
  TROUPE_RETURN_IF_ERROR(c.expect_rank(0, 2));
  TROUPE_RETURN_IF_ERROR(c.expect_rank(1, 2));
  const Shape& a = c.input_shape(0);
  const Shape& b = c.input_shape(1);
  const bool ta = c.attr<bool>("transpose_a"), tb = c.attr<bool>("transpose_b");
  const int64_t m = a.rank_known() ? a.dim(ta ? 1 : 0) : -1;
  const int64_t k1 = a.rank_known() ? a.dim(ta ? 0 : 1) : -1;
  const int64_t k2 = b.rank_known() ? b.dim(tb ? 1 : 0) : -1;
  const int64_t n = b.rank_known() ? b.dim(tb ? 0 : 1) : -1;
  if (k1 >= 0 && k2 >= 0 && k1 != k2) {
    return c.error("inner dimensions differ: a is ", a, (ta ? " (transposed)" : ""), ", b is ", b,
                   (tb ? " (transposed)" : ""));
  }
  c.set_output(0, c.input_dtype(0), Shape{m, n});
  return runtime::ok_status();
}

Status fused_bias_activation(InferenceContext& c, int bias) {
  TROUPE_RETURN_IF_ERROR(c.expect_same_dtype(0, bias));
  TROUPE_RETURN_IF_ERROR(c.expect_rank(bias, 1));
  const std::string& activation = c.attr<std::string>("activation");
  if (!activation.empty() && activation != "Relu") {
    return c.error("activation must be \"\" or \"Relu\", got \"", activation, "\"");
  }
  const Shape& out = c.output_shapes()[0];
  const Shape& b = c.input_shape(bias);
  const int64_t n = out.rank_known() && out.rank() > 0 ? out.dim(out.rank() - 1) : -1;
  if (b.rank_known() && n >= 0 && b.dim(0) >= 0 && n != b.dim(0)) {
    return c.error("bias of shape ", b, " for a product with ", n, " columns");
  }
  return runtime::ok_status();
}

Status no_outputs(InferenceContext&) { return runtime::ok_status(); }

}  // namespace troupe::ops::shape_fns
