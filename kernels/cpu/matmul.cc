// Matrix products on the CPU: float and double go to OpenBLAS (measured the fastest GEMM on these
// machines, and as fast inside node actors as in a plain loop); integer types use Eigen.
// BiasAdd and its gradient live here too, since they follow every dense layer's product, and
// _FusedMatMul, which is the three in one.
#include "kernels/cpu/eigen_util.h"
#include "kernels/cpu/fused_epilogue.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernel.h"

namespace troupe::kernels::cpu {

namespace {

// A node marked batch_invariant computes each row of its product on its own, so that a row's
// value does not depend on the rows beside it: OpenBLAS picks its kernels, and with them the
// order of the additions, by the matrices' sizes and by a row's place among them. A server that
// batches requests marks its products so (estimators/export/predictor.h).
bool batch_invariant(const KernelContext& ctx) {
  auto it = ctx.node().attrs.find("batch_invariant");
  const bool* on = it == ctx.node().attrs.end() ? nullptr : std::get_if<bool>(&it->second);
  return on && *on;
}

// Output 0 = op(input 0) · op(input 1), op = transpose or not by the node's attributes.
template <class T>
Status product_to_output(KernelContext& ctx, Tensor** c) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.rank() != 2 || b.rank() != 2) {
    return runtime::invalid_argument("needs matrices, got ", a.shape(), " and ", b.shape());
  }
  const bool ta = ctx.attr<bool>("transpose_a"), tb = ctx.attr<bool>("transpose_b");
  const int64_t m = a.dim(ta ? 1 : 0), k = a.dim(ta ? 0 : 1);
  const int64_t k2 = b.dim(tb ? 1 : 0), n = b.dim(tb ? 0 : 1);
  if (k != k2) {
    return runtime::invalid_argument("inner dimensions differ: ", a.shape(), " and ", b.shape());
  }
  TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, Shape{m, n}, c));
  if (!ta && batch_invariant(ctx)) {
    // Row by row, each a GEMV (gemm.h): measured as fast per row as a hand-tiled invariant
    // product over blocks of rows, and faster for the lone row a request most often is.
    for (int64_t r = 0; r < m; ++r) {
      gemm<T>(false, tb, 1, n, k, a.data<T>() + r * k, b.data<T>(), (*c)->data<T>() + r * n);
    }
    return runtime::ok_status();
  }
  gemm<T>(ta, tb, m, n, k, a.data<T>(), b.data<T>(), (*c)->data<T>());
  return runtime::ok_status();
}

template <class T>
struct MatMulKernel {
  static Status compute(KernelContext& ctx) {
    Tensor* c;
    return product_to_output<T>(ctx, &c);
  }
};

// The bias and the activation go over the product in one pass (fused_epilogue.h).
template <class T>
struct FusedMatMulKernel {
  static Status compute(KernelContext& ctx) {
    TROUPE_ASSIGN_OR_RETURN(const bool relu, fused_relu(ctx));
    Tensor* y;
    TROUPE_RETURN_IF_ERROR(product_to_output<T>(ctx, &y));
    const int64_t m = y->dim(0), n = y->dim(1);
    const Tensor& bias = ctx.input(2);
    TROUPE_RETURN_IF_ERROR(check_bias(bias, n));
    add_bias_and_activate(y->data<T>(), m, n, bias.data<T>(), relu);
    return runtime::ok_status();
  }
};

template <class T>
struct BatchMatMulKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& y = ctx.input(1);
    if (x.rank() < 2 || y.rank() < 2) {
      return runtime::invalid_argument("needs rank >= 2, got ", x.shape(), " and ", y.shape());
    }
    const bool ax = ctx.attr<bool>("adj_x"), ay = ctx.attr<bool>("adj_y");
    const int rx = x.rank(), ry = y.rank();
    const int64_t m = x.dim(rx - (ax ? 1 : 2)), k = x.dim(rx - (ax ? 2 : 1));
    const int64_t k2 = y.dim(ry - (ay ? 1 : 2)), n = y.dim(ry - (ay ? 2 : 1));
    if (k != k2) {
      return runtime::invalid_argument("inner dimensions differ: ", x.shape(), " and ", y.shape());
    }
    Shape bx(std::vector<int64_t>(x.shape().dims().begin(), x.shape().dims().end() - 2));
    Shape by(std::vector<int64_t>(y.shape().dims().begin(), y.shape().dims().end() - 2));
    Shape batch;
    if (!runtime::broadcast_shapes(bx, by, &batch)) {
      return runtime::invalid_argument("batch dims of ", x.shape(), " and ", y.shape(), " differ");
    }
    std::vector<int64_t> dims = batch.dims();
    dims.push_back(m);
    dims.push_back(n);
    Tensor* z;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, Shape(dims), &z));
    // Walk the batch index; each operand advances only along dims it does not broadcast.
    const int rb = batch.rank();
    auto batch_strides = [&](const Shape& s) {
      std::vector<int64_t> st(rb, 0);
      int64_t stride = 1;
      for (int i = s.rank() - 1; i >= 0; --i) {
        int d = rb - s.rank() + i;
        if (s.dim(i) != 1) st[d] = stride;
        stride *= s.dim(i);
      }
      return st;
    };
    std::vector<int64_t> sx = batch_strides(bx), sy = batch_strides(by), index(rb, 0);
    const int64_t mx = m * k, my = k * n, mz = m * n;
    int64_t ox = 0, oy = 0;
    for (int64_t i = 0; i < batch.num_elements(); ++i) {
      gemm<T>(ax, ay, m, n, k, x.data<T>() + ox * mx, y.data<T>() + oy * my, z->data<T>() + i * mz);
      for (int d = rb - 1; d >= 0; --d) {
        ox += sx[d];
        oy += sy[d];
        if (++index[d] < batch.dim(d)) break;
        ox -= sx[d] * batch.dim(d);
        oy -= sy[d] * batch.dim(d);
        index[d] = 0;
      }
    }
    return runtime::ok_status();
  }
};

template <class T>
struct BiasAddKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& v = ctx.input(0);
    const Tensor& bias = ctx.input(1);
    if (v.rank() < 1 || bias.rank() != 1 || v.dim(v.rank() - 1) != bias.dim(0)) {
      return runtime::invalid_argument("bias of shape ", bias.shape(), " for value ", v.shape());
    }
    Tensor* y;
    if (ctx.input_is_exclusive(0)) {
      ctx.set_output(0, v);
      y = &ctx.outputs()[0];
    } else {
      TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, v.shape(), &y));
    }
    const int64_t c = bias.dim(0);
    const int64_t rows = c ? v.num_elements() / c : 0;
    MatMap<T>(y->data<T>(), rows, c) = ConstMatMap<T>(v.data<T>(), rows, c).rowwise() +
                                       ConstMatMap<T>(bias.data<T>(), 1, c).row(0);
    return runtime::ok_status();
  }
};

template <class T>
struct BiasAddGradKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& dy = ctx.input(0);
    if (dy.rank() < 1) return runtime::invalid_argument("dy must have rank >= 1");
    const int64_t c = dy.dim(dy.rank() - 1);
    const int64_t rows = c ? dy.num_elements() / c : 0;
    Tensor* db;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, Shape{c}, &db));
    if (rows == 0) {
      std::fill_n(db->data<T>(), c, T(0));
    } else {
      MatMap<T>(db->data<T>(), 1, c) = ConstMatMap<T>(dy.data<T>(), rows, c).colwise().sum();
    }
    return runtime::ok_status();
  }
};

}  // namespace

TROUPE_REGISTER_KERNELS(matmul_cpu) {
  constexpr DeviceType kCpu = DeviceType::kCpu;
  registry.add_typed<MatMulKernel, float, double, int32_t, int64_t>("MatMul", kCpu);
  registry.add_typed<BatchMatMulKernel, float, double, int32_t, int64_t>("BatchMatMul", kCpu);
  registry.add_typed<BiasAddKernel, float, double, int32_t, int64_t>("BiasAdd", kCpu);
  registry.add_typed<BiasAddGradKernel, float, double, int32_t, int64_t>("BiasAddGrad", kCpu);
  registry.add_typed<FusedMatMulKernel, float, double, int32_t, int64_t>("_FusedMatMul", kCpu);
  registry.set_threads_fn([](int n) { openblas_set_num_threads(n); });
}

}  // namespace troupe::kernels::cpu
