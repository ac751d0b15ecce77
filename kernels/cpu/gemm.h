// The one GEMM every CPU kernel calls: C = op(A) op(B) + beta C, row-major. float and double go
// to OpenBLAS (pthread build; its threads are the parallelism inside big kernels, DESIGN.md §3),
// integer types to Eigen.
//
//   gemm<float>(/*ta=*/false, /*tb=*/true, m, n, k, a, b, c);   // c = a · bᵀ
//
// Thread-safe; OpenBLAS decides its own thread count (OPENBLAS_NUM_THREADS).
#pragma once

#include <cblas.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <optional>
#include <type_traits>

#include "runtime/parallel_section.h"

namespace troupe::kernels::cpu {

template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, const T* b, T* c,
          T beta = T(0)) {
  const int64_t lda = ta ? m : k, ldb = tb ? k : n;
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (beta == T(0)) std::fill_n(c, m * n, T(0));
    return;
  }
  // One row times a matrix is a matrix-vector product: GEMV reads the matrix once, where GEMM
  // first copies it into packed panels (most of a one-example step's time in a DNN). A matrix
  // up to 2 MiB is read on this thread (Eigen): OpenBLAS's GEMV splits it over its threads, and
  // waking the other one costs more than it saves (784x256 floats: 8-9 us against 14-15 us on
  // two threads; bench/serve_bench predictor_latency). A larger one streams from memory, where
  // OpenBLAS's threads win (2048x2048: 181 us against 286-316 us on one).
  const bool gemv = m == 1 && !ta && !std::is_integral_v<T>;
  if (gemv && n * k * int64_t(sizeof(T)) <= (int64_t(2) << 20)) {
    using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using Row = Eigen::Matrix<T, 1, Eigen::Dynamic>;
    Eigen::Map<const Row> A(a, k);
    Eigen::Map<Row> C(c, n);
    if (beta == T(0)) {
      C.setZero();
    } else {
      C *= beta;
    }
    if (tb) {
      C.noalias() += A * Eigen::Map<const Mat>(b, n, k).transpose();
    } else {
      C.noalias() += A * Eigen::Map<const Mat>(b, k, n);
    }
    return;
  }
  // OpenBLAS runs a GEMM of more than 2^18 multiply-adds on all its threads: background work
  // steps aside for it when they take every core (runtime/parallel_section.h).
  std::optional<runtime::ParallelSection> busy;
  if (m * n * k > (int64_t(1) << 18) && !std::is_integral_v<T>) {
    busy.emplace(openblas_get_num_threads());
  }
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (gemv) {
      constexpr auto kRow = CblasRowMajor;
      // c = op(b)ᵀ a: b is stored [n, k] with tb, else [k, n].
      if constexpr (std::is_same_v<T, float>) {
        if (tb) {
          cblas_sgemv(kRow, CblasNoTrans, n, k, 1.0f, b, k, a, 1, beta, c, 1);
        } else {
          cblas_sgemv(kRow, CblasTrans, k, n, 1.0f, b, n, a, 1, beta, c, 1);
        }
      } else {
        if (tb) {
          cblas_dgemv(kRow, CblasNoTrans, n, k, 1.0, b, k, a, 1, beta, c, 1);
        } else {
          cblas_dgemv(kRow, CblasTrans, k, n, 1.0, b, n, a, 1, beta, c, 1);
        }
      }
      return;
    }
  }
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
                k, 1.0f, a, lda, b, ldb, beta, c, n);
  } else if constexpr (std::is_same_v<T, double>) {
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
                k, 1.0, a, lda, b, ldb, beta, c, n);
  } else {
    using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    Eigen::Map<const Mat> A(a, ta ? k : m, ta ? m : k);
    Eigen::Map<const Mat> B(b, tb ? n : k, tb ? k : n);
    Eigen::Map<Mat> C(c, m, n);
    Mat product;
    if (ta && tb) {
      product = A.transpose() * B.transpose();
    } else if (ta) {
      product = A.transpose() * B;
    } else if (tb) {
      product = A * B.transpose();
    } else {
      product = A * B;
    }
    C = beta == T(0) ? product : (C * beta + product).eval();
  }
}

}  // namespace troupe::kernels::cpu
