// Raw Eigen SGEMM as a peer, in its best configuration: OpenMP with one thread per core
// (measured 1.9x its single-thread rate here). Its own translation unit, so that -fopenmp stays
// out of everything else.
#include <Eigen/Core>

namespace troupe::bench {

void eigen_sgemm(int n, const float* a, const float* b, float* c, int threads) {
  Eigen::setNbThreads(threads);
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<const Mat> A(a, n, n), B(b, n, n);
  Eigen::Map<Mat> C(c, n, n);
  C.noalias() = A * B;
}

}  // namespace troupe::bench
