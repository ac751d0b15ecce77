// Helpers for CPU kernels: Eigen views of tensor buffers and row-major strides. Eigen appears
// only in kernels/cpu, never in runtime/ headers.
//
//   auto x = flat_in<float>(ctx.input(0));        // Eigen::Map over the whole buffer
//   auto y = flat_out<float>(*out);
//   y = x.exp();
//
// Stateless; thread-safe.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <vector>

#include "runtime/tensor.h"

namespace troupe::kernels::cpu {

template <class T>
using ArrayX = Eigen::Array<T, Eigen::Dynamic, 1>;
template <class T>
using ConstVecMap = Eigen::Map<const ArrayX<T>>;
template <class T>
using VecMap = Eigen::Map<ArrayX<T>>;
template <class T>
using ConstMatMap =
    Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
template <class T>
using MatMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

template <class T>
ConstVecMap<T> flat_in(const runtime::Tensor& t) {
  return ConstVecMap<T>(t.data<T>(), t.num_elements());
}
template <class T>
VecMap<T> flat_out(runtime::Tensor& t) {
  return VecMap<T>(t.data<T>(), t.num_elements());
}

// Row-major element strides of `shape`.
inline std::vector<int64_t> strides_of(const runtime::Shape& shape) {
  std::vector<int64_t> s(shape.rank(), 1);
  for (int i = shape.rank() - 2; i >= 0; --i) s[i] = s[i + 1] * shape.dim(i + 1);
  return s;
}

}  // namespace troupe::kernels::cpu
