#include "runtime/sparse_tensor.h"

namespace troupe::runtime {

Status check_sparse(const SparseTensor& st, const std::string& what) {
  const Tensor& ix = st.indices;
  const Tensor& shape = st.dense_shape;
  if (!ix.valid() || !st.values.valid() || !shape.valid()) {
    return invalid_argument(what, ": a sparse tensor needs indices, values and dense_shape");
  }
  if (ix.dtype() != DType::kInt64 || shape.dtype() != DType::kInt64) {
    return invalid_argument(what, ": indices and dense_shape must be int64, got ",
                            dtype_name(ix.dtype()), " and ", dtype_name(shape.dtype()));
  }
  if (shape.rank() != 1 || st.values.rank() != 1 || ix.rank() != 2) {
    return invalid_argument(what, ": indices must be [nnz, rank], values [nnz] and dense_shape ",
                            "[rank], got ", ix.shape(), ", ", st.values.shape(), " and ",
                            shape.shape());
  }
  const int64_t rank = shape.dim(0);
  const int64_t nnz = st.values.dim(0);
  if (ix.dim(0) != nnz || ix.dim(1) != rank) {
    return invalid_argument(what, ": indices ", ix.shape(), " do not fit ", nnz, " values of rank ",
                            rank);
  }
  const int64_t* dims = shape.data<int64_t>();
  for (int64_t d = 0; d < rank; ++d) {
    if (dims[d] < 0) return invalid_argument(what, ": dense_shape has a negative dimension");
  }
  const int64_t* at = ix.data<int64_t>();
  for (int64_t i = 0; i < nnz; ++i) {
    const int64_t* row = at + i * rank;
    for (int64_t d = 0; d < rank; ++d) {
      if (row[d] < 0 || row[d] >= dims[d]) {
        return invalid_argument(what, ": index ", i, " has ", row[d], " in dimension ", d,
                                " of size ", dims[d]);
      }
    }
    if (i == 0) continue;
    const int64_t* prev = row - rank;
    int d = 0;
    while (d < rank && prev[d] == row[d]) ++d;
    if (d == rank || prev[d] > row[d]) {
      return invalid_argument(what, ": index ", i, (d == rank ? " repeats" : " is out of order"),
                              " (indices must be in row-major order)");
    }
  }
  return ok_status();
}

}  // namespace troupe::runtime
