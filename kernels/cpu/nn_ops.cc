// Softmax, log-softmax and the fused cross-entropy kernels on the CPU, all along the last dim and
// shifted by the row maximum so that large logits cannot overflow.
#include <cmath>

#include "kernels/cpu/eigen_util.h"
#include "kernels/cpu/kernel.h"

namespace troupe::kernels::cpu {

namespace {

template <class T>
using Rows = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
template <class T>
using OutRows = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

template <bool kLog>
struct SoftmaxKernel {
  template <class T>
  struct Kernel {
    static Status compute(KernelContext& ctx) {
      const Tensor& x = ctx.input(0);
      if (x.rank() < 1) return runtime::invalid_argument("needs rank >= 1, got a scalar");
      const int64_t c = x.dim(x.rank() - 1);
      const int64_t rows = c ? x.num_elements() / c : 0;
      Tensor* y;
      TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, x.shape(), &y));
      Rows<T> in(x.data<T>(), rows, c);
      OutRows<T> out(y->data<T>(), rows, c);
      // Each row is worked on in an aligned buffer of its own: Eigen splits a row into scalar
      // and packet parts (std::exp or its polynomial, and the sum's order) by the row's address,
      // so a row in place would get other bits in a batch than alone (a server batching
      // requests promises the same answer either way; with 8-float packets, 10 classes differ).
      Eigen::Array<T, 1, Eigen::Dynamic> row(c);
      for (int64_t r = 0; r < rows; ++r) {
        row = in.row(r) - in.row(r).maxCoeff();
        if constexpr (kLog) {
          row -= std::log(row.exp().sum());
        } else {
          row = row.exp();
          row /= row.sum();
        }
        out.row(r) = row;
      }
      return runtime::ok_status();
    }
  };
};

// loss[i] = logsumexp(f_i) - sum_j labels[i,j] f_ij; backprop = softmax(f) - labels (dense) or
// softmax(f) - onehot(label) (sparse).
template <bool kSparse>
struct CrossEntropyKernel {
  template <class T>
  struct Kernel {
    static Status compute(KernelContext& ctx) {
      const Tensor& f = ctx.input(0);
      const Tensor& labels = ctx.input(1);
      if (f.rank() != 2)
        return runtime::invalid_argument("logits must be [batch, classes], got ", f.shape());
      const int64_t rows = f.dim(0), c = f.dim(1);
      if (kSparse ? (labels.rank() != 1 || labels.dim(0) != rows) : labels.shape() != f.shape()) {
        return runtime::invalid_argument("labels of shape ", labels.shape(),
                                         " for logits of shape ", f.shape());
      }
      Tensor *loss, *backprop;
      TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, Shape{rows}, &loss));
      TROUPE_RETURN_IF_ERROR(ctx.allocate_output(1, f.shape(), &backprop));
      Rows<T> in(f.data<T>(), rows, c);
      OutRows<T> bp(backprop->data<T>(), rows, c);
      for (int64_t r = 0; r < rows; ++r) {
        T max = in.row(r).maxCoeff();
        bp.row(r) = (in.row(r) - max).exp();
        T sum = bp.row(r).sum();
        T log_sum = std::log(sum) + max;
        bp.row(r) /= sum;
        if constexpr (kSparse) {
          int64_t k = labels.dtype() == DType::kInt32 ? labels.data<int32_t>()[r]
                                                      : labels.data<int64_t>()[r];
          if (k < 0 || k >= c) {
            return runtime::invalid_argument("label ", k, " at row ", r, " is outside [0, ", c,
                                             ")");
          }
          loss->data<T>()[r] = log_sum - in(r, k);
          bp(r, k) -= T(1);
        } else {
          Rows<T> lab(labels.data<T>(), rows, c);
          loss->data<T>()[r] = (lab.row(r) * (log_sum - in.row(r))).sum();
          bp.row(r) -= lab.row(r);
        }
      }
      return runtime::ok_status();
    }
  };
};

}  // namespace

TROUPE_REGISTER_KERNELS(nn_cpu) {
  constexpr DeviceType kCpu = DeviceType::kCpu;
  registry.add_typed<SoftmaxKernel<false>::Kernel, float, double>("Softmax", kCpu);
  registry.add_typed<SoftmaxKernel<true>::Kernel, float, double>("LogSoftmax", kCpu);
  registry.add_typed<CrossEntropyKernel<false>::Kernel, float, double>(
      "SoftmaxCrossEntropyWithLogits", kCpu);
  registry.add_typed<CrossEntropyKernel<true>::Kernel, float, double>(
      "SparseSoftmaxCrossEntropyWithLogits", kCpu);
}

}  // namespace troupe::kernels::cpu
