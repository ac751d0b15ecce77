// Array ops: constants and placeholders, casts, and ops that move or reshape data without
// arithmetic (reshape, transpose, concat, split, gather, tile, pad, one_hot, fill, range,
// broadcast, select). Each function adds one node (or a few) and returns its output.
//
//   Output x = placeholder(b, DType::kFloat32, Shape{-1, 28, 28}, "images");
//   Output flat = reshape(b, x, {-1, 784});
//   Output y = one_hot(b, labels, 10);
//   Output parts = concat(b, {a, c}, /*axis=*/1);
//
// Shape errors are recorded in the builder (see runtime/graph_builder.h). Not thread-safe.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ops/builder_names.h"
#include "runtime/tensor.h"

namespace troupe::ops {

using runtime::Tensor;

Output constant(GraphBuilder& b, const Tensor& value, const std::string& name = "");
// A scalar constant of `dtype`.
Output scalar(GraphBuilder& b, double value, DType dtype, const std::string& name = "");
// A scalar constant of x's dtype.
Output scalar_like(GraphBuilder& b, Output x, double value);
// A value the caller feeds at each step; `shape` may have unknown (-1) dims.
Output placeholder(GraphBuilder& b, DType dtype, const Shape& shape, const std::string& name = "");

Output identity(GraphBuilder& b, Output x, const std::string& name = "");
// x, once every element is checked to lie in [lo, hi] (a NaN does not): otherwise the step's
// error, "`what`: VALUE at index I is outside [lo, hi]", as tf.debugging's asserts stop a step.
Output assert_in_range(GraphBuilder& b, Output x, double lo, double hi, const std::string& what);
// Passes x through but blocks gradients (tf.stop_gradient).
Output stop_gradient(GraphBuilder& b, Output x, const std::string& name = "");
Output cast(GraphBuilder& b, Output x, DType dtype, const std::string& name = "");

// At most one dim of `shape` may be -1: it takes what the element count leaves.
Output reshape(GraphBuilder& b, Output x, const std::vector<int64_t>& shape,
               const std::string& name = "");
// x's elements with ref's (runtime) shape.
Output reshape_like(GraphBuilder& b, Output x, Output ref);
Output expand_dims(GraphBuilder& b, Output x, int64_t axis, const std::string& name = "");
// Removes the given size-1 axes, or every size-1 axis when `axes` is empty.
Output squeeze(GraphBuilder& b, Output x, const std::vector<int64_t>& axes = {},
               const std::string& name = "");
// Permutes dims; an empty `perm` reverses them.
Output transpose(GraphBuilder& b, Output x, const std::vector<int64_t>& perm = {},
                 const std::string& name = "");
Output concat(GraphBuilder& b, const std::vector<Output>& values, int64_t axis,
              const std::string& name = "");
// `num` equal parts along `axis`.
std::vector<Output> split(GraphBuilder& b, Output x, int num, int64_t axis,
                          const std::string& name = "");
// Parts of x along `axis` with the sizes of each ref along that axis (concat's inverse).
std::vector<Output> split_like(GraphBuilder& b, Output x, const std::vector<Output>& refs,
                               int64_t axis);
// x with row `index` (a scalar) replaced by `value`, written in place when nothing else holds
// x: a loop filling a [time, ...] result a row each iteration (ops/rnn.h).
Output write_row(GraphBuilder& b, Output x, Output index, Output value);
// params gathered along `axis` at `indices` (int32 or int64; out of range is an error).
Output gather(GraphBuilder& b, Output params, Output indices, int64_t axis = 0,
              const std::string& name = "");
// The rows of `data` (indexed by partitions' dims, int32 or int64) split by partition:
// `num_partitions` outputs, each holding its rows in their order (tf.dynamic_partition).
std::vector<Output> dynamic_partition(GraphBuilder& b, Output data, Output partitions,
                                      int64_t num_partitions, const std::string& name = "");
// merged[indices[m][k]] = data[m][k] (tf.dynamic_stitch): dynamic_partition's inverse when
// `indices` are the partitioned positions (range_like of the partitions).
Output dynamic_stitch(GraphBuilder& b, const std::vector<Output>& indices,
                      const std::vector<Output>& data, const std::string& name = "");
Output tile(GraphBuilder& b, Output x, const std::vector<int64_t>& multiples,
            const std::string& name = "");
// Pads each dim with (before, after) copies of `value`.
Output pad(GraphBuilder& b, Output x, const std::vector<std::pair<int64_t, int64_t>>& paddings,
           double value = 0, const std::string& name = "");
Output one_hot(GraphBuilder& b, Output indices, int64_t depth, double on_value = 1,
               double off_value = 0, int64_t axis = -1, DType dtype = DType::kFloat32,
               const std::string& name = "");
Output fill(GraphBuilder& b, const Shape& shape, double value, DType dtype,
            const std::string& name = "");
Output zeros(GraphBuilder& b, const Shape& shape, DType dtype, const std::string& name = "");
Output ones(GraphBuilder& b, const Shape& shape, DType dtype, const std::string& name = "");
Output zeros_like(GraphBuilder& b, Output x);
Output ones_like(GraphBuilder& b, Output x);
// [start, start + delta, ...) up to `limit`, as np.arange.
Output range(GraphBuilder& b, double start, double limit, double delta = 1,
             DType dtype = DType::kInt32, const std::string& name = "");
// 0, 1, 2, ... in x's (run-time) shape: the positions of x's elements.
Output range_like(GraphBuilder& b, Output x, DType dtype = DType::kInt64);
Output broadcast_to(GraphBuilder& b, Output x, const Shape& shape, const std::string& name = "");
Output broadcast_to_shape_of(GraphBuilder& b, Output x, Output ref);
// Sums x over the axes along which ref was broadcast to x's shape: the gradient of broadcasting.
Output sum_to_shape_of(GraphBuilder& b, Output x, Output ref);
// Elementwise cond ? a : c, broadcasting all three (tf.where).
Output select(GraphBuilder& b, Output cond, Output a, Output c, const std::string& name = "");
Output add_n(GraphBuilder& b, const std::vector<Output>& values, const std::string& name = "");
// tf.stack: the values (each of one shape) along a new axis; tf.unstack: x's slices along
// `axis`, which must have a known size.
Output stack(GraphBuilder& b, const std::vector<Output>& values, int64_t axis = 0);
std::vector<Output> unstack(GraphBuilder& b, Output x, int64_t axis = 0);
// The element count of x, as a scalar int64.
Output size(GraphBuilder& b, Output x);
// x's dimensions at run time (an int64 vector) and its number of dimensions (an int64 scalar).
Output shape(GraphBuilder& b, Output x);
Output rank(GraphBuilder& b, Output x);
// x with each of `axes` in reverse order (tf.reverse).
Output reverse(GraphBuilder& b, Output x, const std::vector<int64_t>& axes);
// tf.reverse_sequence: in each row b (along batch_axis), the first seq_lengths[b] entries along
// seq_axis reversed, the rest left; a length outside [0, that axis's size] is an error.
Output reverse_sequence(GraphBuilder& b, Output x, Output seq_lengths, int64_t seq_axis = 1,
                        int64_t batch_axis = 0);
// tf.gather_nd: indices' last dimension holds index tuples into params' first dimensions;
// y[i...] = params[indices[i..., :]]. Its gradient scatters (repeats summed).
Output gather_nd(GraphBuilder& b, Output params, Output indices);
// tf.scatter_nd: a tensor of `shape`, zeros but where each update is added at its index tuple.
Output scatter_nd(GraphBuilder& b, Output indices, Output updates, const Shape& shape);
// A node that does nothing but wait for `deps`; returns its node id (a run target).
int no_op(GraphBuilder& b, const std::vector<int>& deps, const std::string& name = "");

}  // namespace troupe::ops
