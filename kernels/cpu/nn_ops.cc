// Softmax, log-softmax and the fused cross-entropy kernels on the CPU, all along the last dim and
// shifted by the row maximum so that large logits cannot overflow; top_k and in_top_k.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

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

// The k largest of each row, largest first, ties to the lower index (a stable partial sort).
template <class T>
struct TopKKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const int64_t k = ctx.attr<int64_t>("k");
    if (x.rank() < 1) return runtime::invalid_argument("TopKV2: needs rank >= 1, got a scalar");
    const int64_t n = x.dim(x.rank() - 1);
    if (k < 0 || k > n) {
      return runtime::invalid_argument("TopKV2 '", ctx.node().name, "': k ", k,
                                       " is not within the last dimension of ", x.shape());
    }
    std::vector<int64_t> dims = x.shape().dims();
    dims.back() = k;
    Tensor *values, *indices;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, Shape(dims), &values));
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(1, Shape(dims), &indices));
    const int64_t rows = n ? x.num_elements() / n : 0;
    std::vector<int32_t> order(static_cast<size_t>(n));
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = x.data<T>() + r * n;
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [row](int32_t a, int32_t b) {
        return row[a] > row[b] || (!(row[b] > row[a]) && a < b);
      });
      for (int64_t j = 0; j < k; ++j) {
        values->data<T>()[r * k + j] = row[order[j]];
        indices->data<int32_t>()[r * k + j] = order[j];
      }
    }
    return runtime::ok_status();
  }
};

template <class T>
struct TopKGradKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    const Tensor& dvalues = ctx.input(2);
    const int64_t n = x.rank() > 0 ? x.dim(x.rank() - 1) : 0;
    const int64_t k = indices.rank() > 0 ? indices.dim(indices.rank() - 1) : 0;
    Tensor* dx;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, x.shape(), &dx));
    std::fill_n(dx->data<T>(), dx->num_elements(), T(0));
    const int64_t rows = n ? x.num_elements() / n : 0;
    if (dvalues.num_elements() != rows * k || indices.num_elements() != rows * k) {
      return runtime::invalid_argument("TopKGrad: ", dvalues.shape(), " does not match ",
                                       indices.shape());
    }
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < k; ++j) {
        const int32_t at = indices.data<int32_t>()[r * k + j];
        if (at < 0 || at >= n) return runtime::invalid_argument("TopKGrad: index ", at);
        dx->data<T>()[r * n + at] += dvalues.data<T>()[r * k + j];
      }
    }
    return runtime::ok_status();
  }
};

template <class T>
struct InTopKKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& p = ctx.input(0);
    const Tensor& targets = ctx.input(1);
    const int64_t k = ctx.attr<int64_t>("k");
    if (p.rank() != 2 || targets.rank() != 1 || targets.dim(0) != p.dim(0)) {
      return runtime::invalid_argument("InTopK '", ctx.node().name, "': predictions ", p.shape(),
                                       " and targets ", targets.shape(), " do not match");
    }
    const int64_t rows = p.dim(0), classes = p.dim(1);
    Tensor* out;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, Shape{rows}, &out));
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t t = targets.dtype() == DType::kInt32 ? targets.data<int32_t>()[r]
                                                         : targets.data<int64_t>()[r];
      const T* row = p.data<T>() + r * classes;
      bool in = t >= 0 && t < classes && std::isfinite(row[t]);
      if (in) {
        int64_t above = 0;  // entries strictly larger than the target's
        for (int64_t c = 0; c < classes; ++c) {
          if (!std::isfinite(row[c])) {
            in = false;
            break;
          }
          above += row[c] > row[t] ? 1 : 0;
        }
        in = in && above < k;
      }
      out->data<bool>()[r] = in;
    }
    return runtime::ok_status();
  }
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
  registry.add_typed<TopKKernel, float, double>("TopKV2", kCpu);
  registry.add_typed<TopKGradKernel, float, double>("TopKGrad", kCpu);
  registry.add_typed<InTopKKernel, float, double>("InTopK", kCpu);
}

}  // namespace troupe::kernels::cpu
