// Eigen matrices and vectors as dataset columns, for input::arrays: one example per row.
//
//   Eigen::MatrixXf x(1000, 4);  Eigen::VectorXi y(1000);
//   auto d = input::arrays({{"x", input::column(x)}, {"y", input::column(y)}}, "y");
//
// Header-only: only code that uses it needs Eigen. A matrix becomes [rows, cols] (rows first
// whatever the storage order), a vector [rows]. Element types: float, double, int32, int64,
// uint8, bool.
#pragma once

#include <Eigen/Core>

#include "runtime/tensor.h"

namespace troupe::estimators::input {

template <class Derived>
runtime::Tensor column(const Eigen::MatrixBase<Derived>& m) {
  using T = typename Derived::Scalar;
  const int64_t rows = m.rows(), cols = m.cols();
  const bool vector = Derived::ColsAtCompileTime == 1;
  runtime::Tensor t(runtime::dtype_of<T>(),
                    vector ? runtime::Shape{rows} : runtime::Shape{rows, cols});
  T* out = t.data<T>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = m(r, c);
  }
  return t;
}

}  // namespace troupe::estimators::input
