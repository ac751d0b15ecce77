#include "ops/strided_slice.h"

#include "ops/array_ops.h"
#include "ops/op_def_names.h"

namespace troupe::ops {

namespace {

bool bit(int64_t mask, size_t i) { return (mask >> i) & 1; }

Status plan_dim(int64_t n, int64_t b, int64_t e, int64_t s, bool b_masked, bool e_masked,
                bool shrink, size_t entry, SliceDim* d) {
  d->stride = s;
  d->shrink = shrink;
  if (shrink) {
    if (n >= 0) {
      int64_t i = b < 0 ? b + n : b;
      if (i < 0 || i >= n) {
        return runtime::invalid_argument("slice index ", b, " of entry ", entry,
                                         " is out of range for a dimension of size ", n);
      }
      d->begin = i;
    } else {
      d->begin = b;  // resolved when the dimension is known
    }
    d->stride = 1;
    d->size = 1;
    return runtime::ok_status();
  }
  if (n < 0) {
    d->begin = b_masked ? (s > 0 ? 0 : -1) : b;
    d->size = -1;
    return runtime::ok_status();
  }
  auto clamp = [](int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; };
  if (s > 0) {
    int64_t bb = b_masked ? 0 : clamp(b < 0 ? b + n : b, 0, n);
    int64_t ee = e_masked ? n : clamp(e < 0 ? e + n : e, 0, n);
    d->begin = bb;
    d->size = ee > bb ? (ee - bb + s - 1) / s : 0;
  } else {
    int64_t bb = b_masked ? n - 1 : clamp(b < 0 ? b + n : b, -1, n - 1);
    int64_t ee = e_masked ? -1 : clamp(e < 0 ? e + n : e, -1, n - 1);
    d->begin = bb;
    d->size = bb > ee ? (bb - ee + (-s) - 1) / (-s) : 0;
  }
  return runtime::ok_status();
}

}  // namespace

Status plan_strided_slice(const Shape& input, const StridedSliceSpec& spec, StridedSlicePlan* out) {
  const size_t n = spec.begin.size();
  if (spec.end.size() != n || spec.strides.size() != n) {
    return runtime::invalid_argument("strided slice: begin, end and strides have ", n, ", ",
                                     spec.end.size(), " and ", spec.strides.size(), " entries");
  }
  if (!input.rank_known()) return runtime::invalid_argument("strided slice needs a known rank");
  int ellipses = 0;
  int consuming = 0;
  for (size_t i = 0; i < n; ++i) {
    if (bit(spec.ellipsis_mask, i)) {
      ++ellipses;
    } else if (!bit(spec.new_axis_mask, i)) {
      ++consuming;
    }
  }
  if (ellipses > 1) return runtime::invalid_argument("strided slice: more than one ellipsis");
  if (consuming > input.rank()) {
    return runtime::invalid_argument("strided slice: ", consuming, " indices for a rank-",
                                     input.rank(), " tensor");
  }
  out->dims.clear();
  std::vector<int64_t> out_dims;
  auto full = [&](int dim) {
    SliceDim d;
    d.begin = 0;
    d.size = input.dim(dim);
    out->dims.push_back(d);
    out_dims.push_back(d.size);
  };
  int dim = 0;
  for (size_t i = 0; i < n; ++i) {
    if (bit(spec.ellipsis_mask, i)) {
      int covered = input.rank() - consuming;
      for (int k = 0; k < covered; ++k) full(dim++);
      continue;
    }
    if (bit(spec.new_axis_mask, i)) {
      out_dims.push_back(1);
      continue;
    }
    if (spec.strides[i] == 0) {
      return runtime::invalid_argument("strided slice: stride of entry ", i, " is zero");
    }
    SliceDim d;
    TROUPE_RETURN_IF_ERROR(plan_dim(input.dim(dim), spec.begin[i], spec.end[i], spec.strides[i],
                                    bit(spec.begin_mask, i), bit(spec.end_mask, i),
                                    bit(spec.shrink_axis_mask, i), i, &d));
    out->dims.push_back(d);
    if (!d.shrink) out_dims.push_back(d.size);
    ++dim;
  }
  while (dim < input.rank()) full(dim++);
  out->output_shape = Shape(std::move(out_dims));
  return runtime::ok_status();
}

StridedSliceSpec strided_slice_spec_from_attrs(const AttrMap& a) {
  StridedSliceSpec s;
  s.begin = runtime::attr_get<std::vector<int64_t>>(a, "begin");
  s.end = runtime::attr_get<std::vector<int64_t>>(a, "end");
  s.strides = runtime::attr_get<std::vector<int64_t>>(a, "strides");
  s.begin_mask = runtime::attr_get<int64_t>(a, "begin_mask");
  s.end_mask = runtime::attr_get<int64_t>(a, "end_mask");
  s.ellipsis_mask = runtime::attr_get<int64_t>(a, "ellipsis_mask");
  s.new_axis_mask = runtime::attr_get<int64_t>(a, "new_axis_mask");
  s.shrink_axis_mask = runtime::attr_get<int64_t>(a, "shrink_axis_mask");
  return s;
}

namespace {
AttrMap spec_attrs(const StridedSliceSpec& s) {
  return {{"begin", s.begin},
          {"end", s.end},
          {"strides", s.strides},
          {"begin_mask", s.begin_mask},
          {"end_mask", s.end_mask},
          {"ellipsis_mask", s.ellipsis_mask},
          {"new_axis_mask", s.new_axis_mask},
          {"shrink_axis_mask", s.shrink_axis_mask}};
}

const AttrMap kSliceAttrDefaults = spec_attrs(StridedSliceSpec{});
}  // namespace

// y = x[spec]; dx = StridedSliceGrad(x, dy): dy scattered into zeros shaped like x.
TROUPE_REGISTER_OP(StridedSlice)
    .attrs(kSliceAttrDefaults)
    .input("x")
    .output("y")
    .shape_fn([](InferenceContext& c) {
      StridedSlicePlan plan;
      Status s = plan_strided_slice(c.input_shape(0), strided_slice_spec_from_attrs(c.node().attrs),
                                    &plan);
      if (!s.ok()) return c.error(s.message());
      c.set_output(0, c.input_dtype(0), plan.output_shape);
      return runtime::ok_status();
    })
    .gradient([](GraphBuilder& b, const Node& n, const std::vector<Output>& dy) {
      return std::vector<Output>{b.add("StridedSliceGrad", {n.inputs[0], dy[0]}, n.attrs)};
    })
    .doc(
        "y = x[begin:end:strides] per dimension, with TF's begin/end/ellipsis/new-axis/"
        "shrink masks");

TROUPE_REGISTER_OP(StridedSliceGrad)
    .attrs(kSliceAttrDefaults)
    .input("x")
    .input("dy")
    .output("dx")
    .shape_fn([](InferenceContext& c) {
      c.set_output(0, c.input_dtype(1), c.input_shape(0));
      return runtime::ok_status();
    })
    .kernel_dtype_from_input(1)
    .no_gradient()
    .doc(
        "dx = zeros shaped like x, with dy written where StridedSlice read x (second "
        "derivatives are not supported)");

Output strided_slice(GraphBuilder& b, Output x, const StridedSliceSpec& spec,
                     const std::string& name) {
  return b.add("StridedSlice", {x}, spec_attrs(spec), name);
}

Output slice(GraphBuilder& b, Output x, const std::vector<int64_t>& begin,
             const std::vector<int64_t>& size, const std::string& name) {
  StridedSliceSpec s;
  s.begin = begin;
  s.strides.assign(begin.size(), 1);
  s.end.resize(begin.size());
  for (size_t i = 0; i < begin.size() && i < size.size(); ++i) {
    if (size[i] < 0) {
      s.end_mask |= int64_t(1) << i;
    } else {
      s.end[i] = begin[i] + size[i];
    }
  }
  if (size.size() != begin.size()) {
    b.record_error(
        runtime::invalid_argument("slice: ", begin.size(), " begins but ", size.size(), " sizes"));
    return Output{};
  }
  return strided_slice(b, x, s, name.empty() ? "Slice" : name);
}

}  // namespace troupe::ops
