// SparseTensor: a tensor given by its entries that are present, as tf.SparseTensor. Features
// of varying length (a document's tags, the items a user clicked) batch into one: row i of a
// [batch, longest] sparse tensor holds example i's values, and nothing stands for the missing.
//
//   SparseTensor tags = SparseTensor::from_rows<std::string>({{"a", "b"}, {}, {"c"}});
//   // indices [[0, 0], [0, 1], [2, 0]], values ["a", "b", "c"], dense_shape [3, 2]
//   Status s = check_sparse(tags, "tags");   // an index outside dense_shape, out of order, ...
//   session.run({{sp.indices, tags.indices}, {sp.values, tags.values},
//                {sp.dense_shape, tags.dense_shape}}, ...);   // ops/sparse_ops.h feeds it
//
// `indices` is int64 [nnz, rank] in row-major order without repeats, `values` [nnz] of any
// dtype, `dense_shape` int64 [rank]. Plain values: the three tensors are handles.
#pragma once

#include <string>
#include <vector>

#include "runtime/status.h"
#include "runtime/tensor.h"

namespace troupe::runtime {

struct SparseTensor {
  Tensor indices;
  Tensor values;
  Tensor dense_shape;

  int64_t nnz() const { return values.valid() ? values.num_elements() : 0; }

  // A [rows, longest] sparse tensor with row i's values at columns 0, 1, ...
  template <class T>
  static SparseTensor from_rows(const std::vector<std::vector<T>>& rows) {
    std::vector<int64_t> indices, shape{static_cast<int64_t>(rows.size()), 0};
    std::vector<T> values;
    for (size_t i = 0; i < rows.size(); ++i) {
      for (size_t j = 0; j < rows[i].size(); ++j) {
        indices.push_back(static_cast<int64_t>(i));
        indices.push_back(static_cast<int64_t>(j));
        values.push_back(rows[i][j]);
      }
      shape[1] = std::max<int64_t>(shape[1], static_cast<int64_t>(rows[i].size()));
    }
    const auto nnz = static_cast<int64_t>(values.size());
    return {Tensor::from_vector(Shape{nnz, 2}, indices), Tensor::from_vector(Shape{nnz}, values),
            Tensor::from_vector(Shape{2}, shape)};
  }
};

// What is wrong with `st`, naming `what`: dtypes or ranks that do not fit together, a negative
// dimension, an index outside dense_shape, indices out of row-major order or repeated.
Status check_sparse(const SparseTensor& st, const std::string& what);

}  // namespace troupe::runtime
