// Sparse tensors in graphs, as tf.SparseTensor and tf.nn.embedding_lookup_sparse: a sparse
// value is three outputs (runtime/sparse_tensor.h says what each holds), fed, fetched and sent
// across the wire as three tensors.
//
//   SparseOutput tags = sparse_placeholder(b, DType::kString, "tags");
//   SparseOutput ids{tags.indices, vocabulary_lookup(b, tags.values, vocab, 1, "tags"),
//                    tags.dense_shape};
//   Output table = variable(b, "emb", Shape{vocab_size + 1, 8}, ...);
//   Output x = embedding_lookup_sparse(b, table, ids, Output{}, "mean");   // [batch, 8]
//   runtime::FeedList feeds;
//   feed_sparse(&feeds, tags, SparseTensor::from_rows<std::string>({{"a", "b"}, {}, {"c"}}));
//
// Rows without entries combine to zeros (as tf.nn.safe_embedding_lookup_sparse). A table may be
// held in parts (ops::variable_parts), each gathering its own rows. The gradient
// of embedding_lookup_sparse for `params` is a Gather's, which optimizers apply to the rows
// looked up only (ops/training_ops.h IndexedSlices).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "ops/builder_names.h"
#include "runtime/executor.h"
#include "runtime/sparse_tensor.h"

namespace troupe::ops {

// Where a sparse value travels as three tensors (a batch, a model's features, an export's
// inputs, sparse_placeholder), they are named <name>/indices, <name>/values and
// <name>/dense_shape: these suffixes, in that order.
constexpr std::array<const char*, 3> kSparseParts{"/indices", "/values", "/dense_shape"};

struct SparseOutput {
  Output indices;      // int64 [nnz, rank]
  Output values;       // [nnz]
  Output dense_shape;  // int64 [rank]
  bool valid() const { return indices.valid() && values.valid() && dense_shape.valid(); }
};

// Three placeholders, <name>/indices, <name>/values and <name>/dense_shape, for a sparse value
// of `rank` dimensions.
SparseOutput sparse_placeholder(GraphBuilder& b, DType dtype, const std::string& name,
                                int64_t rank = 2);
// Adds the three feeds of `value` to `feeds`.
void feed_sparse(runtime::FeedList* feeds, const SparseOutput& placeholder,
                 const runtime::SparseTensor& value);

// The entries of `dense` ([batch] or [batch, k]: strings or integers) other than the missing
// value ("" for strings, -1 for integers), as TF's feature columns read a padded dense feature.
// `positions`, when given, gets each entry's flat position in `dense`, so that a tensor of the
// same shape (the entries' weights) follows with gather(reshape(w, {-1}), positions).
SparseOutput dense_to_sparse(GraphBuilder& b, Output dense, Output* positions = nullptr,
                             const std::string& name = "");
// The dense tensor: `default_value` (a scalar of the values' dtype) where no entry is.
Output sparse_to_dense(GraphBuilder& b, const SparseOutput& sp, Output default_value,
                       const std::string& name = "");
// out[s] = sum of data[i] over the i with segment_ids[i] == s, for s in [0, num_segments);
// data [n, ...], segment_ids [n] int32 or int64, num_segments a scalar. An id outside
// [0, num_segments) is an error (TF drops negative ones silently).
Output unsorted_segment_sum(GraphBuilder& b, Output data, Output segment_ids, Output num_segments,
                            const std::string& name = "");
// Row r of the result sums values[i] ([nnz, ...], one per entry of `sp`) over the entries i in
// row r of `sp`: [dense_shape[0], ...], zeros for rows without entries.
Output sum_by_row(GraphBuilder& b, Output values, const SparseOutput& sp);
// Row r of the result [dense_shape[0], dim] combines params' rows at the ids in row r of
// `sp_ids` (a [batch, k] sparse tensor of int32 or int64 ids), each scaled by its weight from
// `weights` (the values of the weights' sparse tensor, [nnz] float32; invalid: all 1):
// "sum", "mean" (sum / sum of weights) or "sqrtn" (sum / sqrt(sum of squared weights)).
Output embedding_lookup_sparse(GraphBuilder& b, Output params, const SparseOutput& sp_ids,
                               Output weights, const std::string& combiner,
                               const std::string& name = "");
// The same over a table held in blocks of rows (`parts`, in order: ops::variable_parts).
Output embedding_lookup_sparse(GraphBuilder& b, const std::vector<Output>& parts,
                               const SparseOutput& sp_ids, Output weights,
                               const std::string& combiner, const std::string& name = "");
// The rows at `ids` (int32 or int64, any shape) of a table held in blocks of rows: [ids..., row
// dims]. Each part gathers its own ids, so that a part on a parameter server sends only those
// rows (the plan runs such a gather there) and its gradient updates only them, as TF's
// embedding_lookup with partition_strategy "div". One part is a plain gather.
Output embedding_lookup(GraphBuilder& b, const std::vector<Output>& parts, Output ids,
                        const std::string& name = "");

}  // namespace troupe::ops
