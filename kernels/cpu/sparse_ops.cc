// Sparse tensor kernels (ops/sparse_ops.h): a padded dense feature to its entries, entries back
// to a dense tensor, and segment sums, which embedding_lookup_sparse combines rows with.
#include <string>
#include <type_traits>

#include "kernels/cpu/kernel.h"
#include "runtime/sparse_tensor.h"

namespace troupe::kernels::cpu {

namespace {

template <class T>
bool missing(const T& v) {
  if constexpr (std::is_same_v<T, std::string>) {
    return v.empty();
  } else {
    return v == T(-1);
  }
}

template <class T>
struct DenseToSparseKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& in = ctx.input(0);
    if (in.rank() != 1 && in.rank() != 2) {
      return runtime::invalid_argument("needs [batch] or [batch, k], got ", in.shape());
    }
    const int64_t batch = in.dim(0);
    const int64_t k = in.rank() == 2 ? in.dim(1) : 1;
    const T* v = in.data<T>();
    int64_t nnz = 0;
    for (int64_t j = 0; j < in.num_elements(); ++j) nnz += missing(v[j]) ? 0 : 1;
    Tensor *indices, *values, *shape, *positions;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, Shape{nnz, 2}, &indices));
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(1, Shape{nnz}, &values));
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(2, Shape{2}, &shape));
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(3, Shape{nnz}, &positions));
    int64_t* at = indices->data<int64_t>();
    T* out = values->data<T>();
    int64_t* pos = positions->data<int64_t>();
    for (int64_t j = 0, i = 0; j < in.num_elements(); ++j) {
      if (missing(v[j])) continue;
      at[2 * i] = j / k;
      at[2 * i + 1] = j % k;
      out[i] = v[j];
      pos[i++] = j;
    }
    shape->data<int64_t>()[0] = batch;
    shape->data<int64_t>()[1] = k;
    return runtime::ok_status();
  }
};

template <class T>
struct SparseToDenseKernel {
  static Status compute(KernelContext& ctx) {
    runtime::SparseTensor st{ctx.input(0), ctx.input(1), ctx.input(2)};
    TROUPE_RETURN_IF_ERROR(runtime::check_sparse(st, "SparseToDense"));
    const Tensor& fill = ctx.input(3);
    if (fill.num_elements() != 1) {
      return runtime::invalid_argument("default_value must be a scalar, got ", fill.shape());
    }
    const int64_t rank = st.dense_shape.dim(0);
    const int64_t* dims = st.dense_shape.data<int64_t>();
    Tensor* y;
    TROUPE_RETURN_IF_ERROR(
        ctx.allocate_output(0, Shape(std::vector<int64_t>(dims, dims + rank)), &y));
    T* out = y->data<T>();
    std::fill_n(out, y->num_elements(), fill.data<T>()[0]);
    const int64_t* at = st.indices.data<int64_t>();
    const T* v = st.values.data<T>();
    for (int64_t i = 0; i < st.nnz(); ++i) {
      int64_t flat = 0;
      for (int64_t d = 0; d < rank; ++d) flat = flat * dims[d] + at[i * rank + d];
      out[flat] = v[i];
    }
    return runtime::ok_status();
  }
};

int64_t id_at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kInt32 ? t.data<int32_t>()[i] : t.data<int64_t>()[i];
}

template <class T>
struct UnsortedSegmentSumKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& data = ctx.input(0);
    const Tensor& ids = ctx.input(1);
    const Tensor& num = ctx.input(2);
    if (data.rank() < 1 || ids.rank() != 1 || ids.dim(0) != data.dim(0)) {
      return runtime::invalid_argument("segment_ids ", ids.shape(), " do not fit data ",
                                       data.shape());
    }
    if (num.num_elements() != 1 || id_at(num, 0) < 0) {
      return runtime::invalid_argument("num_segments must be a scalar >= 0");
    }
    const int64_t segments = id_at(num, 0);
    std::vector<int64_t> dims = data.shape().dims();
    dims[0] = segments;
    Tensor* y;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, Shape(dims), &y));
    const int64_t n = data.dim(0);
    const int64_t inner = n == 0 ? 0 : data.num_elements() / n;
    T* out = y->data<T>();
    std::fill_n(out, y->num_elements(), T(0));
    const T* in = data.data<T>();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t s = id_at(ids, i);
      if (s < 0 || s >= segments) {
        return runtime::invalid_argument("segment id ", s, " at position ", i, " is outside [0, ",
                                         segments, ")");
      }
      T* dst = out + s * inner;
      const T* src = in + i * inner;
      for (int64_t j = 0; j < inner; ++j) dst[j] += src[j];
    }
    return runtime::ok_status();
  }
};

}  // namespace

TROUPE_REGISTER_KERNELS(sparse_cpu) {
  constexpr DeviceType kCpu = DeviceType::kCpu;
  registry.add_typed<DenseToSparseKernel, std::string, int32_t, int64_t>("DenseToSparse", kCpu);
  registry.add_typed<SparseToDenseKernel, float, double, int32_t, int64_t, std::string>(
      "SparseToDense", kCpu);
  registry.add_typed<UnsortedSegmentSumKernel, float, double, int32_t, int64_t>(
      "UnsortedSegmentSum", kCpu);
}

}  // namespace troupe::kernels::cpu
