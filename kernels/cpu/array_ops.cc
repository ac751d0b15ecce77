// CPU kernels for the array ops: constants, reshapes (which share buffers), transpose, concat,
// split, slices, gather, tile, pad, one_hot, fill, range, broadcast and its reverse.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/eigen_util.h"
#include "kernels/cpu/kernel.h"
#include "kernels/cpu/variable_read.h"
#include "ops/strided_slice.h"

namespace troupe::kernels::cpu {

namespace {

// Kernels that only move bytes are written once per element size; strings go element-wise.
template <class T>
void copy_elems(const T* from, T* to, int64_t n) {
  if constexpr (std::is_trivially_copyable_v<T>) {
    if (n > 0) std::memcpy(to, from, n * sizeof(T));
  } else {
    std::copy(from, from + n, to);
  }
}

template <class T>
struct ConstKernel {
  static Status compute(KernelContext& ctx) {
    ctx.set_output(0, ctx.attr<Tensor>("value"));
    return runtime::ok_status();
  }
};

template <class T>
struct PlaceholderKernel {
  static Status compute(KernelContext& ctx) {
    return runtime::invalid_argument("placeholder '", ctx.node().name, "' must be fed a value (",
                                     runtime::dtype_name(ctx.node().output_dtypes[0]),
                                     ctx.node().output_shapes[0], ")");
  }
};

template <class T>
struct ForwardKernel {  // Identity, StopGradient, summaries, PlaceholderWithDefault
  static Status compute(KernelContext& ctx) {
    ctx.set_output(0, ctx.input(0));
    return runtime::ok_status();
  }
};

template <class T>
struct AssertInRangeKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const double lo = ctx.attr<double>("lo"), hi = ctx.attr<double>("hi");
    const T* p = x.data<T>();
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      const auto v = static_cast<double>(p[i]);
      if (!(v >= lo && v <= hi)) {
        return runtime::invalid_argument(ctx.attr<std::string>("what"), ": ", v, " at index ", i,
                                         " is outside [", lo, ", ", hi, "]");
      }
    }
    ctx.set_output(0, x);
    return runtime::ok_status();
  }
};

// The output's runtime shape for Reshape / ExpandDims / Squeeze: the static shape with unknown
// dims resolved from the input's element count.
Status resolve_shape(const KernelContext& ctx, const Tensor& x, Shape* out) {
  const auto& node = ctx.node();
  std::vector<int64_t> dims;
  if (node.op == "ReshapeLike") {
    *out = ctx.input(1).shape();
  } else if (node.op == "Reshape") {
    dims = ctx.attr<std::vector<int64_t>>("shape");
    int64_t known = 1;
    int unknown = -1;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] < 0) {
        unknown = static_cast<int>(i);
      } else {
        known *= dims[i];
      }
    }
    if (unknown >= 0) {
      if (known == 0 || x.num_elements() % known != 0) {
        return runtime::invalid_argument("cannot reshape ", x.shape(), " to ",
                                         runtime::attr_debug_string(dims));
      }
      dims[unknown] = x.num_elements() / known;
    }
    *out = Shape(dims);
  } else if (node.op == "ExpandDims") {
    int64_t axis = ctx.attr<int64_t>("axis");
    dims = x.shape().dims();
    if (axis < 0) axis += x.rank() + 1;
    if (axis < 0 || axis > x.rank()) return runtime::invalid_argument("axis out of range");
    dims.insert(dims.begin() + axis, 1);
    *out = Shape(dims);
  } else {  // Squeeze
    const auto& axes = ctx.attr<std::vector<int64_t>>("axes");
    for (int i = 0; i < x.rank(); ++i) {
      bool named = false;
      for (int64_t a : axes) named |= (a < 0 ? a + x.rank() : a) == i;
      if (axes.empty() ? x.dim(i) == 1 : named) {
        if (x.dim(i) != 1)
          return runtime::invalid_argument("cannot squeeze dim ", i, " of ", x.shape());
        continue;
      }
      dims.push_back(x.dim(i));
    }
    *out = Shape(dims);
  }
  if (out->num_elements() != x.num_elements()) {
    return runtime::invalid_argument("cannot reshape ", x.shape(), " (", x.num_elements(),
                                     " elements) to ", *out);
  }
  return runtime::ok_status();
}

template <class T>
struct ReshapeKernel {  // Reshape, ReshapeLike, ExpandDims, Squeeze: no copy
  static Status compute(KernelContext& ctx) {
    Shape s;
    TROUPE_RETURN_IF_ERROR(resolve_shape(ctx, ctx.input(0), &s));
    ctx.set_output(0, ctx.input(0).reshaped(s));
    return runtime::ok_status();
  }
};

template <class T>
struct TransposeKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const auto& perm = ctx.attr<std::vector<int64_t>>("perm");
    std::vector<int64_t> dims;
    for (int64_t p : perm) dims.push_back(x.dim(static_cast<int>(p)));
    Tensor* y;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, Shape(dims), &y));
    const T* in = x.data<T>();
    T* out = y->data<T>();
    const int r = x.rank();
    if (r == 2 && perm[0] == 1) {
      if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
        MatMap<T>(out, dims[0], dims[1]) = ConstMatMap<T>(in, x.dim(0), x.dim(1)).transpose();
        return runtime::ok_status();
      }
    }
    std::vector<int64_t> in_strides = strides_of(x.shape());
    std::vector<int64_t> step(r);  // input stride of each output dim
    for (int i = 0; i < r; ++i) step[i] = in_strides[perm[i]];
    std::vector<int64_t> index(r, 0);
    int64_t offset = 0;
    for (int64_t o = 0; o < y->num_elements(); ++o) {
      out[o] = in[offset];
      for (int d = r - 1; d >= 0; --d) {
        offset += step[d];
        if (++index[d] < dims[d]) break;
        offset -= step[d] * dims[d];
        index[d] = 0;
      }
    }
    return runtime::ok_status();
  }
};

// Views x as [outer, axis * inner] blocks for concat / split along `axis`.
int64_t outer_size(const Shape& s, int axis) {
  int64_t n = 1;
  for (int i = 0; i < axis; ++i) n *= s.dim(i);
  return n;
}
int64_t inner_size(const Shape& s, int axis) {
  int64_t n = 1;
  for (int i = axis + 1; i < s.rank(); ++i) n *= s.dim(i);
  return n;
}

template <class T>
struct ConcatKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& first = ctx.input(0);
    int axis;
    if (!first.shape().canonical_axis(ctx.attr<int64_t>("axis"), &axis)) {
      return runtime::invalid_argument("axis out of range for ", first.shape());
    }
    std::vector<int64_t> dims = first.shape().dims();
    dims[axis] = 0;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& t = ctx.input(i);
      if (t.rank() != first.rank())
        return runtime::invalid_argument("input ", i, " has shape ", t.shape());
      for (int d = 0; d < t.rank(); ++d) {
        if (d != axis && t.dim(d) != first.dim(d)) {
          return runtime::invalid_argument("input ", i, " has shape ", t.shape(), ", input 0 ",
                                           first.shape());
        }
      }
      dims[axis] += t.dim(axis);
    }
    Tensor* y;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, Shape(dims), &y));
    const int64_t outer = outer_size(first.shape(), axis);
    const int64_t inner = inner_size(first.shape(), axis);
    const int64_t row = dims[axis] * inner;
    T* out = y->data<T>();
    int64_t col = 0;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& t = ctx.input(i);
      const int64_t w = t.dim(axis) * inner;
      const T* in = t.data<T>();
      for (int64_t o = 0; o < outer; ++o) copy_elems(in + o * w, out + o * row + col, w);
      col += w;
    }
    return runtime::ok_status();
  }
};

// Split and SplitLike: parts of input 0 along axis with the given sizes.
template <class T>
Status split_into(KernelContext& ctx, const std::vector<int64_t>& sizes, int axis) {
  const Tensor& x = ctx.input(0);
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  if (total != x.dim(axis)) {
    return runtime::invalid_argument("parts of ", total, " along axis ", axis, " for ", x.shape());
  }
  const int64_t outer = outer_size(x.shape(), axis);
  const int64_t inner = inner_size(x.shape(), axis);
  const int64_t row = x.dim(axis) * inner;
  int64_t col = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<int64_t> dims = x.shape().dims();
    dims[axis] = sizes[i];
    Tensor* y;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(static_cast<int>(i), Shape(dims), &y));
    const int64_t w = sizes[i] * inner;
    for (int64_t o = 0; o < outer; ++o)
      copy_elems(x.data<T>() + o * row + col, y->data<T>() + o * w, w);
    col += w;
  }
  return runtime::ok_status();
}

template <class T>
struct SplitKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    int axis;
    if (!x.shape().canonical_axis(ctx.attr<int64_t>("axis"), &axis)) {
      return runtime::invalid_argument("axis out of range for ", x.shape());
    }
    int64_t num = ctx.attr<int64_t>("num_split");
    if (x.dim(axis) % num != 0) {
      return runtime::invalid_argument("dim ", axis, " of ", x.shape(), " does not split into ",
                                       num);
    }
    return split_into<T>(ctx, std::vector<int64_t>(num, x.dim(axis) / num), axis);
  }
};

template <class T>
struct SplitLikeKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    int axis;
    if (!x.shape().canonical_axis(ctx.attr<int64_t>("axis"), &axis)) {
      return runtime::invalid_argument("axis out of range for ", x.shape());
    }
    std::vector<int64_t> sizes;
    for (int i = 1; i < ctx.num_inputs(); ++i) {
      if (ctx.input(i).rank() != x.rank())
        return runtime::invalid_argument("reference ", i, " has the wrong rank");
      sizes.push_back(ctx.input(i).dim(axis));
    }
    return split_into<T>(ctx, sizes, axis);
  }
};

// Strided slice and its gradient walk the same plan: output element k reads input offset f(k).
template <class T, bool kScatter>
Status strided_slice(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  ops::StridedSlicePlan plan;
  TROUPE_RETURN_IF_ERROR(ops::plan_strided_slice(
      x.shape(), ops::strided_slice_spec_from_attrs(ctx.node().attrs), &plan));
  std::vector<int64_t> in_strides = strides_of(x.shape());
  const int r = x.rank();
  std::vector<int64_t> sizes(r), steps(r);
  int64_t base = 0, count = 1;
  for (int d = 0; d < r; ++d) {
    sizes[d] = plan.dims[d].size;
    steps[d] = plan.dims[d].stride * in_strides[d];
    base += plan.dims[d].begin * in_strides[d];
    count *= sizes[d];
  }
  Tensor* y;
  if constexpr (kScatter) {
    const Tensor& dy = ctx.input(1);
    if (dy.num_elements() != count) {
      return runtime::invalid_argument("dy has shape ", dy.shape(), ", the slice ",
                                       plan.output_shape);
    }
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, x.shape(), &y));
    std::fill_n(y->data<T>(), y->num_elements(), T(0));
  } else {
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, plan.output_shape, &y));
  }
  std::vector<int64_t> index(r, 0);
  int64_t offset = base;
  for (int64_t k = 0; k < count; ++k) {
    if constexpr (kScatter) {
      y->data<T>()[offset] = ctx.input(1).data<T>()[k];
    } else {
      y->data<T>()[k] = x.data<T>()[offset];
    }
    for (int d = r - 1; d >= 0; --d) {
      offset += steps[d];
      if (++index[d] < sizes[d]) break;
      offset -= steps[d] * sizes[d];
      index[d] = 0;
    }
  }
  return runtime::ok_status();
}

template <class T>
struct StridedSliceKernel {
  static Status compute(KernelContext& ctx) { return strided_slice<T, false>(ctx); }
};
template <class T>
struct StridedSliceGradKernel {
  static Status compute(KernelContext& ctx) { return strided_slice<T, true>(ctx); }
};

// Element j of an int32 or int64 tensor (indices: the shape functions checked the dtype).
int64_t int_at(const Tensor& t, int64_t j) {
  return t.dtype() == DType::kInt32 ? t.data<int32_t>()[j] : t.data<int64_t>()[j];
}

template <class I>
Status check_index(I i, int64_t n, int64_t position) {
  if (i < 0 || i >= n) {
    return runtime::invalid_argument("index ", int64_t(i), " at position ", position,
                                     " is out of range [0, ", n, ")");
  }
  return runtime::ok_status();
}

// Gather: y[o, i, k] = params[o, indices[i], k] viewing params as [outer, n, inner].
template <class T, bool kScatter>
Status gather(KernelContext& ctx, const Tensor& params, const Tensor& indices, int64_t axis_attr) {
  int axis;
  if (!params.shape().canonical_axis(axis_attr, &axis)) {
    return runtime::invalid_argument("axis out of range for ", params.shape());
  }
  const int64_t outer = outer_size(params.shape(), axis);
  const int64_t inner = inner_size(params.shape(), axis);
  const int64_t n = params.dim(axis);
  const int64_t k = indices.num_elements();
  auto index_at = [&](int64_t j) { return int_at(indices, j); };
  for (int64_t j = 0; j < k; ++j) TROUPE_RETURN_IF_ERROR(check_index(index_at(j), n, j));
  Tensor* y;
  if constexpr (kScatter) {
    const Tensor& dy = ctx.input(2);
    if (dy.num_elements() != outer * k * inner) {
      return runtime::invalid_argument("dy has shape ", dy.shape(), " for ", k, " indices");
    }
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, params.shape(), &y));
    T* out = y->data<T>();
    std::fill_n(out, y->num_elements(), T(0));
    const T* g = dy.data<T>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < k; ++j) {
        T* dst = out + (o * n + index_at(j)) * inner;
        const T* src = g + (o * k + j) * inner;
        for (int64_t i = 0; i < inner; ++i) dst[i] += src[i];
      }
    }
  } else {
    std::vector<int64_t> dims(params.shape().dims().begin(), params.shape().dims().begin() + axis);
    dims.insert(dims.end(), indices.shape().dims().begin(), indices.shape().dims().end());
    dims.insert(dims.end(), params.shape().dims().begin() + axis + 1, params.shape().dims().end());
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, Shape(dims), &y));
    const T* in = params.data<T>();
    T* out = y->data<T>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < k; ++j) {
        copy_elems(in + (o * n + index_at(j)) * inner, out + (o * k + j) * inner, inner);
      }
    }
  }
  return runtime::ok_status();
}

template <class T>
struct GatherKernel {
  static Status compute(KernelContext& ctx) {
    return gather<T, false>(ctx, ctx.input(0), ctx.input(1), ctx.attr<int64_t>("axis"));
  }
};
template <class T>
struct GatherGradKernel {
  static Status compute(KernelContext& ctx) {
    return gather<T, true>(ctx, ctx.input(0), ctx.input(1), ctx.attr<int64_t>("axis"));
  }
};
template <class T>
struct WriteRowKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& value = ctx.input(2);
    const int64_t rows = x.shape().rank() > 0 ? x.shape().dim(0) : 0;
    const int64_t row_size = rows > 0 ? x.num_elements() / rows : 0;
    const Tensor& index_t = ctx.input(1);
    if (index_t.num_elements() != 1) {
      return runtime::invalid_argument("WriteRow '", ctx.node().name,
                                       "': index must be a scalar, got ", index_t.shape());
    }
    const int64_t index =
        index_t.dtype() == DType::kInt32 ? index_t.data<int32_t>()[0] : index_t.data<int64_t>()[0];
    if (index < 0 || index >= rows || value.num_elements() != row_size) {
      return runtime::invalid_argument("WriteRow '", ctx.node().name, "': row ", index, " of ",
                                       x.shape(), " cannot take ", value.shape());
    }
    const bool in_place = ctx.input_is_exclusive(0);  // before y shares x's buffer
    Tensor y = x;
    if (!in_place) {  // someone else reads x: write a copy
      Tensor* copy;
      TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, x.shape(), &copy));
      copy_elems(x.data<T>(), copy->data<T>(), x.num_elements());
      y = *copy;
    }
    copy_elems(value.data<T>(), y.data<T>() + index * row_size, row_size);
    ctx.set_output(0, y);
    return runtime::ok_status();
  }
};
// A Gather of a variable's read, run where the variable lives (ops/state_ops.cc).
template <class T>
struct VariableGatherKernel {
  static Status compute(KernelContext& ctx) {
    TROUPE_ASSIGN_OR_RETURN(Tensor value, read_declared_variable(ctx));
    return gather<T, false>(ctx, value, ctx.input(0), 0);
  }
};

// Whether `shape` starts with `prefix`; `rest` gets the dims after it.
bool split_prefix(const Shape& shape, const Shape& prefix, std::vector<int64_t>* rest) {
  if (prefix.rank() > shape.rank()) return false;
  for (int i = 0; i < prefix.rank(); ++i) {
    if (shape.dim(i) != prefix.dim(i)) return false;
  }
  rest->assign(shape.dims().begin() + prefix.rank(), shape.dims().end());
  return true;
}

template <class T>
struct DynamicPartitionKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& data = ctx.input(0);
    const Tensor& partitions = ctx.input(1);
    const int64_t num = ctx.attr<int64_t>("num_partitions");
    std::vector<int64_t> row_dims;
    if (!split_prefix(data.shape(), partitions.shape(), &row_dims)) {
      return runtime::invalid_argument("partitions ", partitions.shape(),
                                       " are not a prefix of data ", data.shape());
    }
    const int64_t n = partitions.num_elements();
    std::vector<int64_t> count(static_cast<size_t>(num), 0);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t p = int_at(partitions, j);
      if (p < 0 || p >= num) {
        return runtime::invalid_argument("partition ", p, " at position ", j, " is not in [0, ",
                                         num, ")");
      }
      ++count[p];
    }
    int64_t row = 1;
    for (int64_t d : row_dims) row *= d;
    std::vector<T*> out(static_cast<size_t>(num));
    for (int64_t i = 0; i < num; ++i) {
      std::vector<int64_t> dims{count[i]};
      dims.insert(dims.end(), row_dims.begin(), row_dims.end());
      Tensor* y;
      TROUPE_RETURN_IF_ERROR(ctx.allocate_output(static_cast<int>(i), Shape(dims), &y));
      out[i] = y->data<T>();
    }
    const T* in = data.data<T>();
    for (int64_t j = 0; j < n; ++j) {
      T*& to = out[int_at(partitions, j)];
      copy_elems(in + j * row, to, row);
      to += row;
    }
    return runtime::ok_status();
  }
};

template <class T>
struct DynamicStitchKernel {
  static Status compute(KernelContext& ctx) {
    const int m = ctx.num_inputs() / 2;
    std::vector<int64_t> row_dims;
    int64_t rows = 0;
    for (int i = 0; i < m; ++i) {
      const Tensor& indices = ctx.input(i);
      std::vector<int64_t> rest;
      if (!split_prefix(ctx.input(m + i).shape(), indices.shape(), &rest) ||
          (i > 0 && rest != row_dims)) {
        return runtime::invalid_argument("data ", i, " ", ctx.input(m + i).shape(),
                                         " is not indices ", indices.shape(), " by rows ",
                                         i > 0 ? Shape(row_dims) : Shape(rest));
      }
      row_dims = std::move(rest);
      for (int64_t j = 0; j < indices.num_elements(); ++j) {
        const int64_t k = int_at(indices, j);
        if (k < 0 || k == std::numeric_limits<int64_t>::max()) {
          return runtime::invalid_argument("index ", k, " at position ", j, " of indices ", i,
                                           " is out of range");
        }
        rows = std::max(rows, k + 1);
      }
    }
    std::vector<int64_t> dims{rows};
    dims.insert(dims.end(), row_dims.begin(), row_dims.end());
    Tensor* y;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, Shape(dims), &y));
    T* out = y->data<T>();
    std::fill_n(out, y->num_elements(), T());
    const int64_t row = rows == 0 ? 0 : y->num_elements() / rows;
    for (int i = 0; i < m; ++i) {
      const Tensor& indices = ctx.input(i);
      const T* in = ctx.input(m + i).data<T>();
      for (int64_t j = 0; j < indices.num_elements(); ++j) {
        copy_elems(in + j * row, out + int_at(indices, j) * row, row);
      }
    }
    return runtime::ok_status();
  }
};

template <class T>
struct RangeLikeKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    if (x.num_elements() > std::numeric_limits<T>::max()) {
      return runtime::invalid_argument(x.num_elements(), " positions do not fit ",
                                       runtime::dtype_name(runtime::dtype_of<T>()));
    }
    Tensor* y;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, x.shape(), &y));
    std::iota(y->data<T>(), y->data<T>() + y->num_elements(), T(0));
    return runtime::ok_status();
  }
};

// Tile: out index (i_d) reads x at (i_d mod x.dim(d)); TileGrad sums back the other way.
template <class T, bool kGrad>
Status tile(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto& m = ctx.attr<std::vector<int64_t>>("multiples");
  if (static_cast<int>(m.size()) != x.rank())
    return runtime::invalid_argument("multiples do not match rank");
  std::vector<int64_t> big(x.rank());
  for (int d = 0; d < x.rank(); ++d) {
    if (m[d] < 0 || __builtin_mul_overflow(x.dim(d), m[d], &big[d])) {
      return runtime::invalid_argument("multiple ", m[d], " of dim ", d, " of ", x.shape());
    }
  }
  Shape big_shape(big);
  Tensor* y;
  if constexpr (kGrad) {
    if (ctx.input(1).shape() != big_shape) {
      return runtime::invalid_argument("dy has shape ", ctx.input(1).shape(), ", expected ",
                                       big_shape);
    }
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, x.shape(), &y));
    std::fill_n(y->data<T>(), y->num_elements(), T(0));
  } else {
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, big_shape, &y));
  }
  const int r = x.rank();
  std::vector<int64_t> xs = strides_of(x.shape());
  std::vector<int64_t> index(r, 0);
  const int64_t n = big_shape.num_elements();
  for (int64_t o = 0; o < n; ++o) {
    int64_t off = 0;
    for (int d = 0; d < r; ++d) off += (index[d] % x.dim(d)) * xs[d];
    if constexpr (kGrad) {
      y->data<T>()[off] += ctx.input(1).data<T>()[o];
    } else {
      y->data<T>()[o] = x.data<T>()[off];
    }
    for (int d = r - 1; d >= 0; --d) {
      if (++index[d] < big[d]) break;
      index[d] = 0;
    }
  }
  return runtime::ok_status();
}

template <class T>
struct TileKernel {
  static Status compute(KernelContext& ctx) { return tile<T, false>(ctx); }
};
template <class T>
struct TileGradKernel {
  static Status compute(KernelContext& ctx) { return tile<T, true>(ctx); }
};

template <class T>
struct PadKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const auto& p = ctx.attr<std::vector<int64_t>>("paddings");
    const int r = x.rank();
    std::vector<int64_t> dims(r);
    if (static_cast<int>(p.size()) != 2 * r) {
      return runtime::invalid_argument("paddings has ", p.size() / 2, " pairs for ", x.shape());
    }
    for (int d = 0; d < r; ++d) {
      if (p[2 * d] < 0 || p[2 * d + 1] < 0 ||
          __builtin_add_overflow(x.dim(d), p[2 * d], &dims[d]) ||
          __builtin_add_overflow(dims[d], p[2 * d + 1], &dims[d])) {
        return runtime::invalid_argument("padding of dim ", d, " of ", x.shape());
      }
    }
    Tensor* y;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, Shape(dims), &y));
    std::fill_n(y->data<T>(), y->num_elements(),
                static_cast<T>(ctx.attr<double>("constant_value")));
    if (x.num_elements() == 0) return runtime::ok_status();
    std::vector<int64_t> ys = strides_of(y->shape());
    std::vector<int64_t> index(r, 0);
    const int64_t row = r ? x.dim(r - 1) : 1;
    for (int64_t o = 0; o < x.num_elements(); o += row) {
      int64_t off = 0;
      for (int d = 0; d < r; ++d) off += (index[d] + p[2 * d]) * ys[d];
      copy_elems(x.data<T>() + o, y->data<T>() + off, row);
      for (int d = r - 2; d >= 0; --d) {
        if (++index[d] < x.dim(d)) break;
        index[d] = 0;
      }
    }
    return runtime::ok_status();
  }
};

template <class T>
struct OneHotKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& idx = ctx.input(0);
    const int64_t depth = ctx.attr<int64_t>("depth");
    int64_t axis = ctx.attr<int64_t>("axis");
    if (axis == -1) axis = idx.rank();
    std::vector<int64_t> dims = idx.shape().dims();
    dims.insert(dims.begin() + axis, depth);
    Tensor* y;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, Shape(dims), &y));
    const T on = static_cast<T>(ctx.attr<double>("on_value"));
    const T off = static_cast<T>(ctx.attr<double>("off_value"));
    std::fill_n(y->data<T>(), y->num_elements(), off);
    // Indices viewed as [outer, inner] around the new axis.
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < idx.rank(); ++i) (i < axis ? outer : inner) *= idx.dim(i);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        int64_t j = o * inner + i;
        int64_t k = idx.dtype() == DType::kInt32   ? idx.data<int32_t>()[j]
                    : idx.dtype() == DType::kInt64 ? idx.data<int64_t>()[j]
                                                   : idx.data<uint8_t>()[j];
        if (k >= 0 && k < depth) y->data<T>()[(o * depth + k) * inner + i] = on;
      }
    }
    return runtime::ok_status();
  }
};

template <class T>
struct FillKernel {
  static Status compute(KernelContext& ctx) {
    Tensor* y;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, ctx.attr<Shape>("shape"), &y));
    y->fill(ctx.attr<double>("value"));
    return runtime::ok_status();
  }
};

template <int kValue>
struct FillLikeKernel {
  template <class T>
  struct Kernel {
    static Status compute(KernelContext& ctx) {
      Tensor* y;
      TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, ctx.input(0).shape(), &y));
      y->fill(kValue);
      return runtime::ok_status();
    }
  };
};

template <class T>
struct RangeKernel {
  static Status compute(KernelContext& ctx) {
    Tensor* y;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, ctx.node().output_shapes[0], &y));
    double start = ctx.attr<double>("start"), delta = ctx.attr<double>("delta");
    for (int64_t i = 0; i < y->num_elements(); ++i)
      y->data<T>()[i] = static_cast<T>(start + i * delta);
    return runtime::ok_status();
  }
};

// BroadcastTo / BroadcastToShapeOf: x repeated to the target shape.
template <class T>
struct BroadcastKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    Shape target = ctx.num_inputs() > 1 ? ctx.input(1).shape() : ctx.attr<Shape>("shape");
    if (x.shape() == target) {
      ctx.set_output(0, x);
      return runtime::ok_status();
    }
    BroadcastPlan plan;
    if (!plan_broadcast_to(x.shape(), target, &plan)) {
      return runtime::invalid_argument("cannot broadcast ", x.shape(), " to ", target);
    }
    Tensor* y;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, target, &y));
    const T* in = x.data<T>();
    T* out = y->data<T>();
    plan.for_each_run([&](int64_t o, const int64_t* off, const int64_t* step, int64_t n) {
      if (step[0]) {
        copy_elems(in + off[0], out + o, n);
      } else {
        std::fill_n(out + o, n, in[off[0]]);
      }
    });
    return runtime::ok_status();
  }
};

// SumToShapeOf: the transpose of broadcasting; accumulates x's runs into ref's shape.
template <class T>
struct SumToShapeKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Shape& target = ctx.input(1).shape();
    if (x.shape() == target) {
      ctx.set_output(0, x);
      return runtime::ok_status();
    }
    BroadcastPlan plan;
    if (!plan_broadcast_to(target, x.shape(), &plan)) {
      return runtime::invalid_argument("cannot sum ", x.shape(), " down to ", target);
    }
    Tensor* y;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, target, &y));
    T* out = y->data<T>();
    std::fill_n(out, y->num_elements(), T(0));
    const T* in = x.data<T>();
    plan.for_each_run([&](int64_t o, const int64_t* off, const int64_t* step, int64_t n) {
      if (step[0]) {
        VecMap<T>(out + off[0], n) += ConstVecMap<T>(in + o, n);
      } else {
        out[off[0]] += ConstVecMap<T>(in + o, n).sum();
      }
    });
    return runtime::ok_status();
  }
};

template <class T>
struct AddNKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& first = ctx.input(0);
    for (int i = 1; i < ctx.num_inputs(); ++i) {
      if (ctx.input(i).shape() != first.shape()) {
        return runtime::invalid_argument("input ", i, " has shape ", ctx.input(i).shape(),
                                         ", input 0 has ", first.shape());
      }
    }
    Tensor* y;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, first.shape(), &y));
    auto out = flat_out<T>(*y);
    out = flat_in<T>(first);
    for (int i = 1; i < ctx.num_inputs(); ++i) out += flat_in<T>(ctx.input(i));
    return runtime::ok_status();
  }
};

template <class T>
struct SizeKernel {
  static Status compute(KernelContext& ctx) {
    Tensor* y;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, Shape{}, &y));
    y->data<int64_t>()[0] = ctx.input(0).num_elements();
    return runtime::ok_status();
  }
};

template <class T>
struct ShapeKernel {
  static Status compute(KernelContext& ctx) {
    const Shape& s = ctx.input(0).shape();
    Tensor* y;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, Shape{s.rank()}, &y));
    for (int d = 0; d < s.rank(); ++d) y->data<int64_t>()[d] = s.dim(d);
    return runtime::ok_status();
  }
};

template <class T>
struct RankKernel {
  static Status compute(KernelContext& ctx) {
    Tensor* y;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, Shape{}, &y));
    y->data<int64_t>()[0] = ctx.input(0).rank();
    return runtime::ok_status();
  }
};

template <class T>
struct ReverseKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const int r = x.rank();
    std::vector<bool> flip(r, false);
    for (int64_t a : ctx.attr<std::vector<int64_t>>("axes")) {
      int axis;
      if (!x.shape().canonical_axis(a, &axis)) {
        return runtime::invalid_argument("ReverseV2 '", ctx.node().name, "': axis ", a,
                                         " out of range for ", x.shape());
      }
      flip[axis] = !flip[axis];
    }
    Tensor* y;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, x.shape(), &y));
    const std::vector<int64_t> strides = strides_of(x.shape());
    std::vector<int64_t> index(r, 0);
    const T* in = x.data<T>();
    T* out = y->data<T>();
    for (int64_t o = 0; o < x.num_elements(); ++o) {
      int64_t from = 0;
      for (int d = 0; d < r; ++d)
        from += (flip[d] ? x.dim(d) - 1 - index[d] : index[d]) * strides[d];
      out[o] = in[from];
      for (int d = r - 1; d >= 0; --d) {
        if (++index[d] < x.dim(d)) break;
        index[d] = 0;
      }
    }
    return runtime::ok_status();
  }
};

template <class T>
struct ReverseSequenceKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& lengths = ctx.input(1);
    const auto seq = static_cast<int>(ctx.attr<int64_t>("seq_axis"));
    const auto batch = static_cast<int>(ctx.attr<int64_t>("batch_axis"));
    if (seq >= x.rank() || batch >= x.rank() || lengths.num_elements() != x.dim(batch)) {
      return runtime::invalid_argument("ReverseSequence '", ctx.node().name,
                                       "': ", lengths.num_elements(), " lengths for x ", x.shape(),
                                       " with batch_axis ", batch);
    }
    std::vector<int64_t> length(static_cast<size_t>(x.dim(batch)));
    for (int64_t i = 0; i < x.dim(batch); ++i) {
      length[i] = lengths.dtype() == DType::kInt32 ? lengths.data<int32_t>()[i]
                                                   : lengths.data<int64_t>()[i];
      if (length[i] < 0 || length[i] > x.dim(seq)) {
        return runtime::invalid_argument("ReverseSequence '", ctx.node().name, "': length ",
                                         length[i], " of row ", i, " is outside [0, ", x.dim(seq),
                                         "]");
      }
    }
    Tensor* y;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, x.shape(), &y));
    const std::vector<int64_t> strides = strides_of(x.shape());
    std::vector<int64_t> index(x.rank(), 0);
    const T* in = x.data<T>();
    T* out = y->data<T>();
    for (int64_t o = 0; o < x.num_elements(); ++o) {
      const int64_t n = length[index[batch]], t = index[seq];
      out[o] = in[o + (t < n ? (n - 1 - 2 * t) * strides[seq] : 0)];
      for (int d = x.rank() - 1; d >= 0; --d) {
        if (++index[d] < x.dim(d)) break;
        index[d] = 0;
      }
    }
    return runtime::ok_status();
  }
};

// The slices GatherNd and ScatterNd move: `indices`' last dimension of depth D indexes the first
// D dimensions of `whole`; each tuple names a slice of `slice` elements at `offsets[i]`.
struct NdSlices {
  std::vector<int64_t> offsets;
  int64_t slice = 1;
};
Status nd_slices(const KernelContext& ctx, const Shape& whole, const Tensor& indices,
                 NdSlices* out) {
  if (indices.rank() < 1) {
    return runtime::invalid_argument(ctx.node().op, " '", ctx.node().name,
                                     "': indices need a last dimension, got ", indices.shape());
  }
  const int64_t depth = indices.dim(indices.rank() - 1);
  if (depth > whole.rank()) {
    return runtime::invalid_argument(ctx.node().op, " '", ctx.node().name, "': indices of depth ",
                                     depth, " index more dimensions than ", whole, " has");
  }
  for (int d = static_cast<int>(depth); d < whole.rank(); ++d) out->slice *= whole.dim(d);
  const int64_t tuples = depth == 0 ? indices.num_elements() : indices.num_elements() / depth;
  out->offsets.assign(static_cast<size_t>(tuples), 0);
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t offset = 0;
    for (int64_t k = 0; k < depth; ++k) {
      const int64_t at = t * depth + k;
      const int64_t i = indices.dtype() == DType::kInt32 ? indices.data<int32_t>()[at]
                                                         : indices.data<int64_t>()[at];
      if (i < 0 || i >= whole.dim(static_cast<int>(k))) {
        return runtime::invalid_argument(ctx.node().op, " '", ctx.node().name, "': index ", i,
                                         " of tuple ", t, " is out of range for dimension ", k,
                                         " of ", whole);
      }
      offset = offset * whole.dim(static_cast<int>(k)) + i;
    }
    out->offsets[static_cast<size_t>(t)] = offset * out->slice;
  }
  return runtime::ok_status();
}

template <class T>
struct GatherNdKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& params = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    NdSlices s;
    TROUPE_RETURN_IF_ERROR(nd_slices(ctx, params.shape(), indices, &s));
    std::vector<int64_t> dims(indices.shape().dims().begin(), indices.shape().dims().end() - 1);
    const int64_t depth = indices.dim(indices.rank() - 1);
    dims.insert(dims.end(), params.shape().dims().begin() + depth, params.shape().dims().end());
    Tensor* y;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, Shape(dims), &y));
    for (size_t t = 0; t < s.offsets.size(); ++t) {
      std::copy_n(params.data<T>() + s.offsets[t], s.slice, y->data<T>() + t * s.slice);
    }
    return runtime::ok_status();
  }
};

// Adds input `from`'s slices into a zero tensor of `whole` at the slices of indices (input `at`).
template <class T>
Status scatter_nd_into(KernelContext& ctx, const Shape& whole, int at, int from) {
  const Tensor& updates = ctx.input(from);
  NdSlices s;
  TROUPE_RETURN_IF_ERROR(nd_slices(ctx, whole, ctx.input(at), &s));
  if (updates.num_elements() != static_cast<int64_t>(s.offsets.size()) * s.slice) {
    return runtime::invalid_argument(ctx.node().op, " '", ctx.node().name, "': ", updates.shape(),
                                     " holds not ", s.offsets.size(), " slices of ", s.slice,
                                     " elements");
  }
  Tensor* y;
  TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, whole, &y));
  std::fill_n(y->data<T>(), y->num_elements(), T(0));
  for (size_t t = 0; t < s.offsets.size(); ++t) {
    T* to = y->data<T>() + s.offsets[t];
    const T* u = updates.data<T>() + t * s.slice;
    for (int64_t e = 0; e < s.slice; ++e) to[e] += u[e];
  }
  return runtime::ok_status();
}

template <class T>
struct GatherNdGradKernel {
  static Status compute(KernelContext& ctx) {
    return scatter_nd_into<T>(ctx, ctx.input(0).shape(), 1, 2);
  }
};

template <class T>
struct ScatterNdKernel {
  static Status compute(KernelContext& ctx) {
    const auto& dims = ctx.attr<std::vector<int64_t>>("shape");
    for (int64_t d : dims) {
      if (d < 0) {
        return runtime::invalid_argument("ScatterNd '", ctx.node().name, "': shape ", Shape(dims),
                                         " has a negative dimension");
      }
    }
    return scatter_nd_into<T>(ctx, Shape(dims), 0, 1);
  }
};

Status no_op(KernelContext&) { return runtime::ok_status(); }

}  // namespace

TROUPE_REGISTER_KERNELS(array_cpu) {
  constexpr DeviceType kCpu = DeviceType::kCpu;
  registry.add_typed<ConstKernel, float, double, int32_t, int64_t, uint8_t, bool, std::string>(
      "Const", kCpu);
  registry
      .add_typed<PlaceholderKernel, float, double, int32_t, int64_t, uint8_t, bool, std::string>(
          "Placeholder", kCpu);
  // Summaries pass their tensor on for the SummarySaverHook to fetch (ops/summary_ops.h); a
  // PlaceholderWithDefault its default, when it is not fed (ops/parsing_ops.h).
  for (const char* op : {"Identity", "StopGradient", "ScalarSummary", "HistogramSummary",
                         "ImageSummary", "TextSummary", "PlaceholderWithDefault"}) {
    registry.add_typed<ForwardKernel, float, double, int32_t, int64_t, uint8_t, bool, std::string>(
        op, kCpu);
  }
  registry.add_typed<AssertInRangeKernel, float, double, int32_t, int64_t, uint8_t>("AssertInRange",
                                                                                    kCpu);
  for (const char* op : {"Reshape", "ReshapeLike", "ExpandDims", "Squeeze"}) {
    registry.add_typed<ReshapeKernel, float, double, int32_t, int64_t, uint8_t, bool, std::string>(
        op, kCpu);
  }
  registry.add_typed<TransposeKernel, float, double, int32_t, int64_t, uint8_t, bool>("Transpose",
                                                                                      kCpu);
  registry.add_typed<ConcatKernel, float, double, int32_t, int64_t, uint8_t, bool, std::string>(
      "Concat", kCpu);
  registry.add_typed<SplitKernel, float, double, int32_t, int64_t, uint8_t, bool>("Split", kCpu);
  registry.add_typed<SplitLikeKernel, float, double, int32_t, int64_t>("SplitLike", kCpu);
  registry
      .add_typed<StridedSliceKernel, float, double, int32_t, int64_t, uint8_t, bool, std::string>(
          "StridedSlice", kCpu);
  registry.add_typed<StridedSliceGradKernel, float, double>("StridedSliceGrad", kCpu);
  registry.add_typed<GatherKernel, float, double, int32_t, int64_t, uint8_t, bool, std::string>(
      "Gather", kCpu);
  registry.add_typed<GatherGradKernel, float, double>("GatherGrad", kCpu);
  registry.add_typed<WriteRowKernel, float, double, int32_t, int64_t>("WriteRow", kCpu);
  registry.add_typed<DynamicPartitionKernel, float, double, int32_t, int64_t, uint8_t, bool,
                     std::string>("DynamicPartition", kCpu);
  registry
      .add_typed<DynamicStitchKernel, float, double, int32_t, int64_t, uint8_t, bool, std::string>(
          "DynamicStitch", kCpu);
  registry.add_typed<RangeLikeKernel, int32_t, int64_t>("RangeLike", kCpu);
  registry.add_typed<VariableGatherKernel, float, double, int32_t, int64_t>("VariableGather", kCpu);
  registry.add_typed<TileKernel, float, double, int32_t, int64_t, uint8_t, bool>("Tile", kCpu);
  registry.add_typed<TileGradKernel, float, double>("TileGrad", kCpu);
  registry.add_typed<PadKernel, float, double, int32_t, int64_t>("Pad", kCpu);
  registry.add_typed<OneHotKernel, float, double, int32_t, int64_t>("OneHot", kCpu);
  registry.add_typed<FillKernel, float, double, int32_t, int64_t, uint8_t, bool>("Fill", kCpu);
  registry.add_typed<FillLikeKernel<0>::Kernel, float, double, int32_t, int64_t>("ZerosLike", kCpu);
  registry.add_typed<FillLikeKernel<1>::Kernel, float, double, int32_t, int64_t>("OnesLike", kCpu);
  registry.add_typed<RangeKernel, float, double, int32_t, int64_t>("Range", kCpu);
  for (const char* op : {"BroadcastTo", "BroadcastToShapeOf"}) {
    registry.add_typed<BroadcastKernel, float, double, int32_t, int64_t, bool>(op, kCpu);
  }
  registry.add_typed<SumToShapeKernel, float, double, int32_t, int64_t>("SumToShapeOf", kCpu);
  registry.add_typed<AddNKernel, float, double, int32_t, int64_t>("AddN", kCpu);
  registry.add_typed<SizeKernel, int64_t>("Size", kCpu);
  registry.add_typed<ShapeKernel, int64_t>("Shape", kCpu);
  registry.add_typed<RankKernel, int64_t>("Rank", kCpu);
  registry.add_typed<ReverseSequenceKernel, float, double, int32_t, int64_t, uint8_t, bool>(
      "ReverseSequence", kCpu);
  registry.add_typed<ReverseKernel, float, double, int32_t, int64_t, uint8_t, bool>("ReverseV2",
                                                                                    kCpu);
  registry.add_typed<GatherNdKernel, float, double, int32_t, int64_t, uint8_t, bool>("GatherNd",
                                                                                     kCpu);
  registry.add_typed<GatherNdGradKernel, float, double>("GatherNdGrad", kCpu);
  registry.add_typed<ScatterNdKernel, float, double, int32_t, int64_t>("ScatterNd", kCpu);
  registry.add("NoOp", kCpu, DType::kInvalid, &no_op);
}

}  // namespace troupe::kernels::cpu
