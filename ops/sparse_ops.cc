#include "ops/sparse_ops.h"

#include <algorithm>

#include "ops/array_ops.h"
#include "ops/feature_ops.h"
#include "ops/math_ops.h"
#include "ops/op_def_names.h"
#include "ops/strided_slice.h"
#include "runtime/op_registry.h"

namespace troupe::ops {

namespace {

bool is_id_dtype(DType t) { return t == DType::kInt32 || t == DType::kInt64; }

}  // namespace

TROUPE_REGISTER_OP(DenseToSparse)
    .input("dense")
    .output("indices")
    .output("values")
    .output("dense_shape")
    .output("positions")
    .kernel_dtype_from_input(0)
    .shape_fn([](InferenceContext& c) {
      const DType t = c.input_dtype(0);
      if (t != DType::kString && !is_id_dtype(t)) {
        return c.error("needs strings or integers, got ", runtime::dtype_name(t));
      }
      const Shape& in = c.input_shape(0);
      if (in.rank_known() && in.rank() != 1 && in.rank() != 2) {
        return c.error("needs [batch] or [batch, k], got ", in);
      }
      c.set_output(0, DType::kInt64, Shape{-1, 2});
      c.set_output(1, t, Shape{-1});
      c.set_output(2, DType::kInt64, Shape{2});
      c.set_output(3, DType::kInt64, Shape{-1});
      return runtime::ok_status();
    })
    .no_gradient()
    .doc(
        "the entries of a [batch] or [batch, k] tensor other than \"\" (strings) or -1 "
        "(integers) as a [batch, k] sparse tensor, and their flat positions in `dense`");

TROUPE_REGISTER_OP(SparseToDense)
    .input("indices")
    .input("values")
    .input("dense_shape")
    .input("default_value")
    .output("dense")
    .kernel_dtype_from_input(1)
    .shape_fn([](InferenceContext& c) {
      if (c.input_dtype(0) != DType::kInt64 || c.input_dtype(2) != DType::kInt64) {
        return c.error("indices and dense_shape must be int64");
      }
      if (c.input_dtype(1) != c.input_dtype(3)) {
        return c.error("default_value is ", runtime::dtype_name(c.input_dtype(3)), ", values ",
                       runtime::dtype_name(c.input_dtype(1)));
      }
      const Shape& shape = c.input_shape(2);
      const int64_t rank = shape.rank_known() && shape.rank() == 1 ? shape.dim(0) : -1;
      c.set_output(0, c.input_dtype(1),
                   rank < 0 ? Shape::unknown() : Shape(std::vector<int64_t>(rank, -1)));
      return runtime::ok_status();
    })
    .no_gradient()
    .doc("dense[indices[i]] = values[i], default_value elsewhere");

TROUPE_REGISTER_OP(UnsortedSegmentSum)
    .input("data")
    .input("segment_ids")
    .input("num_segments")
    .output("y")
    .kernel_dtype_from_input(0)
    .shape_fn([](InferenceContext& c) {
      if (!is_id_dtype(c.input_dtype(1)) || !is_id_dtype(c.input_dtype(2))) {
        return c.error("segment_ids and num_segments must be int32 or int64");
      }
      const Shape& data = c.input_shape(0);
      const Shape& ids = c.input_shape(1);
      if (ids.rank_known() && ids.rank() != 1) return c.error("segment_ids must be [n], got ", ids);
      if (!data.rank_known()) {
        c.set_output(0, c.input_dtype(0), Shape::unknown());
        return runtime::ok_status();
      }
      if (data.rank() < 1) return c.error("data needs a first dimension");
      if (ids.rank_known() && data.dim(0) >= 0 && ids.dim(0) >= 0 && data.dim(0) != ids.dim(0)) {
        return c.error("data has ", data.dim(0), " rows, segment_ids ", ids.dim(0));
      }
      std::vector<int64_t> dims = data.dims();
      dims[0] = -1;
      c.set_output(0, c.input_dtype(0), Shape(dims));
      return runtime::ok_status();
    })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{gather(b, dy[0], n.inputs[1]), Output{}, Output{}};
    })
    .doc("y[s] = sum of data[i] with segment_ids[i] == s; ids outside [0, num_segments) fail");

SparseOutput sparse_placeholder(GraphBuilder& b, DType dtype, const std::string& name,
                                int64_t rank) {
  return {placeholder(b, DType::kInt64, Shape{-1, rank}, name + kSparseParts[0]),
          placeholder(b, dtype, Shape{-1}, name + kSparseParts[1]),
          placeholder(b, DType::kInt64, Shape{rank}, name + kSparseParts[2])};
}

void feed_sparse(runtime::FeedList* feeds, const SparseOutput& placeholder,
                 const runtime::SparseTensor& value) {
  feeds->push_back({placeholder.indices, value.indices});
  feeds->push_back({placeholder.values, value.values});
  feeds->push_back({placeholder.dense_shape, value.dense_shape});
}

SparseOutput dense_to_sparse(GraphBuilder& b, Output dense, Output* positions,
                             const std::string& name) {
  std::vector<Output> out = b.add_node("DenseToSparse", {dense}, {}, name);
  if (out.size() != 4) return {};
  if (positions) *positions = out[3];
  return {out[0], out[1], out[2]};
}

Output sparse_to_dense(GraphBuilder& b, const SparseOutput& sp, Output default_value,
                       const std::string& name) {
  return b.add("SparseToDense", {sp.indices, sp.values, sp.dense_shape, default_value}, {}, name);
}

Output unsorted_segment_sum(GraphBuilder& b, Output data, Output segment_ids, Output num_segments,
                            const std::string& name) {
  return b.add("UnsortedSegmentSum", {data, segment_ids, num_segments}, {}, name);
}

Output sum_by_row(GraphBuilder& b, Output values, const SparseOutput& sp) {
  Output rows = reshape(b, slice(b, sp.indices, {0, 0}, {-1, 1}), {-1});
  Output batch = reshape(b, slice(b, sp.dense_shape, {0}, {1}), {});
  return unsorted_segment_sum(b, values, rows, batch);
}

Output embedding_lookup(GraphBuilder& b, const std::vector<Output>& parts, Output ids,
                        const std::string& name) {
  if (!b.ok()) return {};
  if (parts.size() == 1) return gather(b, parts[0], ids, 0, name);
  if (parts.empty() || !ids.valid()) {
    b.record_error(runtime::invalid_argument("embedding_lookup: no parts or no ids"));
    return {};
  }
  // Part i holds rows [starts[i], starts[i + 1]): an id's part is the number of later starts at
  // or below it, its row there the id less that part's start.
  std::vector<int64_t> starts;
  std::vector<double> boundaries;
  int64_t rows = 0;
  const Shape row_shape = b.shape(parts[0]);
  for (const Output& p : parts) {
    const Shape& s = b.shape(p);
    if (!s.rank_known() || s.rank() < 1 || s.dim(0) < 0 || s.rank() != row_shape.rank()) {
      b.record_error(runtime::invalid_argument("embedding_lookup: part ", starts.size(),
                                               " has shape ", s, ", not a block of rows"));
      return {};
    }
    if (!starts.empty()) boundaries.push_back(static_cast<double>(rows));
    starts.push_back(rows);
    rows += s.dim(0);
  }
  auto scope = b.name_scope(name.empty() ? "embedding_lookup" : name);
  const int64_t n = static_cast<int64_t>(parts.size());
  Output flat = reshape(b, ids, {-1});
  if (b.ok() && b.dtype(flat) != DType::kInt64) flat = cast(b, flat, DType::kInt64);
  Output part = bucketize(b, flat, boundaries);
  Output local = sub(b, flat, gather(b, constant(b, Tensor::from_vector(Shape{n}, starts)), part));
  std::vector<Output> part_ids = dynamic_partition(b, local, part, n);
  std::vector<Output> positions = dynamic_partition(b, range_like(b, flat), part, n);
  if (!b.ok()) return {};
  std::vector<Output> found;
  for (int64_t i = 0; i < n; ++i) found.push_back(gather(b, parts[i], part_ids[i]));
  Output stitched = dynamic_stitch(b, positions, found);
  // Back to ids' shape: its dims, then a row's.
  const Shape& id_shape = b.shape(ids);
  if (id_shape.rank_known() && id_shape.rank() == 1) return stitched;
  std::vector<int64_t> dims = id_shape.rank_known() ? id_shape.dims() : std::vector<int64_t>{};
  if (!id_shape.rank_known() || std::count(dims.begin(), dims.end(), -1) > 1) {
    b.record_error(runtime::invalid_argument("embedding_lookup: ids of shape ", id_shape,
                                             " (at most one unknown dim)"));
    return {};
  }
  dims.insert(dims.end(), row_shape.dims().begin() + 1, row_shape.dims().end());
  return reshape(b, stitched, dims);
}

Output embedding_lookup_sparse(GraphBuilder& b, Output params, const SparseOutput& sp_ids,
                               Output weights, const std::string& combiner,
                               const std::string& name) {
  return embedding_lookup_sparse(b, std::vector<Output>{params}, sp_ids, weights, combiner, name);
}

Output embedding_lookup_sparse(GraphBuilder& b, const std::vector<Output>& parts,
                               const SparseOutput& sp_ids, Output weights,
                               const std::string& combiner, const std::string& name) {
  if (combiner != "sum" && combiner != "mean" && combiner != "sqrtn") {
    b.record_error(runtime::invalid_argument("embedding_lookup_sparse: combiner '", combiner,
                                             "' is not sum, mean or sqrtn"));
    return {};
  }
  auto scope = b.name_scope(name.empty() ? "embedding_lookup_sparse" : name);
  Output found = embedding_lookup(b, parts, sp_ids.values);
  if (!b.ok()) return {};  // shape() of an invalid output reads nothing
  const int rank = b.shape(found).rank();
  if (weights.valid()) {
    // [nnz] weights against [nnz, dim...] rows.
    Output w = weights;
    for (int d = 1; d < rank; ++d) w = expand_dims(b, w, -1);
    found = mul(b, found, w);
  }
  Output sum = sum_by_row(b, found, sp_ids);
  if (combiner == "sum") return sum;
  Output w = weights.valid() ? weights : ones_like(b, cast(b, sp_ids.values, DType::kFloat32));
  Output norm = sum_by_row(b, combiner == "mean" ? w : square(b, w), sp_ids);
  if (combiner == "sqrtn") norm = sqrt(b, norm);
  for (int d = 1; d < rank; ++d) norm = expand_dims(b, norm, -1);
  // A row without ids (or whose weights sum to 0) gets zeros, not NaN.
  return div(b, sum, maximum(b, norm, scalar(b, 1e-12, DType::kFloat32)));
}

}  // namespace troupe::ops
