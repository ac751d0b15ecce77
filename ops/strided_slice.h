// StridedSlice: numpy's basic indexing, x[b:e:s, ..., None, i], with TensorFlow's masks; slice()
// is the begin/size special case. The plan below is shared by the shape function, the kernel and
// the gradient, so the three can never disagree about what a spec selects.
//
//   StridedSliceSpec s;                     // x[:, 1]
//   s.begin = {0, 1}; s.end = {0, 2}; s.strides = {1, 1};
//   s.begin_mask = 1; s.end_mask = 1; s.shrink_axis_mask = 2;
//   Output col = strided_slice(b, x, s);
//   Output part = slice(b, x, {0, 2}, {-1, 3});     // size -1: to the end
//
// Plain functions; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/builder_names.h"

namespace troupe::ops {

using runtime::Status;

struct StridedSliceSpec {
  std::vector<int64_t> begin, end, strides;
  int64_t begin_mask = 0, end_mask = 0, ellipsis_mask = 0, new_axis_mask = 0, shrink_axis_mask = 0;
};

// What a spec selects from one input dimension.
struct SliceDim {
  int64_t begin = 0;
  int64_t stride = 1;
  int64_t size = -1;  // elements taken; -1 when the input dimension is not known yet
  bool shrink = false;
};

struct StridedSlicePlan {
  std::vector<SliceDim> dims;  // one per input dimension
  Shape output_shape;          // with new axes added and shrunk axes dropped
};

// Fails (naming what is wrong) for a zero stride, an index out of range or a malformed spec.
Status plan_strided_slice(const Shape& input, const StridedSliceSpec& spec, StridedSlicePlan* out);
StridedSliceSpec strided_slice_spec_from_attrs(const runtime::AttrMap& attrs);

Output strided_slice(GraphBuilder& b, Output x, const StridedSliceSpec& spec,
                     const std::string& name = "");
// x[begin[i] : begin[i] + size[i]] in each dimension; size -1 takes the rest.
Output slice(GraphBuilder& b, Output x, const std::vector<int64_t>& begin,
             const std::vector<int64_t>& size, const std::string& name = "");

}  // namespace troupe::ops
