// Reductions on the CPU. A reduction is the transpose of a broadcast: the output (with reduced
// dims kept as 1) broadcasts to the input, so the broadcast walker visits the input in runs that
// either map onto a row of outputs (kept inner dim) or into one output (reduced inner dim).
#include <algorithm>
#include <limits>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/eigen_util.h"
#include "kernels/cpu/kernel.h"

namespace troupe::kernels::cpu {

namespace {

// The shape with reduced dims kept as 1, and the shape the op outputs.
Status reduced_shapes(const Shape& in, const std::vector<int64_t>& axes, bool keep_dims,
                      Shape* kept, Shape* out) {
  std::vector<bool> reduce(in.rank(), axes.empty());
  for (int64_t a : axes) {
    int ax;
    if (!in.canonical_axis(a, &ax))
      return runtime::invalid_argument("axis ", a, " out of range for ", in);
    reduce[ax] = true;
  }
  std::vector<int64_t> k, o;
  for (int i = 0; i < in.rank(); ++i) {
    k.push_back(reduce[i] ? 1 : in.dim(i));
    if (!reduce[i]) {
      o.push_back(in.dim(i));
    } else if (keep_dims) {
      o.push_back(1);
    }
  }
  *kept = Shape(k);
  *out = Shape(o);
  return runtime::ok_status();
}

enum class Reduce { kSum, kMean, kMax, kMin, kProd };

template <class T, Reduce R>
struct ReduceKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    Shape kept, out_shape;
    TROUPE_RETURN_IF_ERROR(reduced_shapes(x.shape(), ctx.attr<std::vector<int64_t>>("axes"),
                                          ctx.attr<bool>("keep_dims"), &kept, &out_shape));
    Tensor* y;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, out_shape, &y));
    T init = R == Reduce::kMax    ? std::numeric_limits<T>::lowest()
             : R == Reduce::kMin  ? std::numeric_limits<T>::max()
             : R == Reduce::kProd ? T(1)
                                  : T(0);
    if constexpr (std::numeric_limits<T>::has_infinity) {
      if (R == Reduce::kMax) init = -std::numeric_limits<T>::infinity();
      if (R == Reduce::kMin) init = std::numeric_limits<T>::infinity();
    }
    T* out = y->data<T>();
    std::fill_n(out, y->num_elements(), init);
    BroadcastPlan plan;
    plan_broadcast_to(kept, x.shape(), &plan);
    const T* in = x.data<T>();
    plan.for_each_run([&](int64_t o, const int64_t* off, const int64_t* step, int64_t n) {
      ConstVecMap<T> run(in + o, n);
      if (step[0]) {  // a row of outputs
        VecMap<T> acc(out + off[0], n);
        if constexpr (R == Reduce::kSum || R == Reduce::kMean) acc += run;
        if constexpr (R == Reduce::kMax) acc = acc.max(run);
        if constexpr (R == Reduce::kMin) acc = acc.min(run);
        if constexpr (R == Reduce::kProd) acc *= run;
      } else {  // all into one output
        T& acc = out[off[0]];
        if constexpr (R == Reduce::kSum || R == Reduce::kMean) acc += run.sum();
        if constexpr (R == Reduce::kMax) acc = std::max(acc, run.maxCoeff());
        if constexpr (R == Reduce::kMin) acc = std::min(acc, run.minCoeff());
        if constexpr (R == Reduce::kProd) acc *= run.prod();
      }
    });
    if constexpr (R == Reduce::kMean) {
      int64_t count = y->num_elements() ? x.num_elements() / y->num_elements() : 0;
      if (count > 0) {
        flat_out<T>(*y) /= static_cast<T>(count);
      } else if (std::numeric_limits<T>::has_quiet_NaN) {
        flat_out<T>(*y) = std::numeric_limits<T>::quiet_NaN();  // mean of nothing, as numpy
      }
    }
    return runtime::ok_status();
  }
};

template <Reduce R>
struct Reducer {
  template <class T>
  using Kernel = ReduceKernel<T, R>;
};

// dx_i = dy * (product of the other elements in x_i's slice), exact when x has zeros.
template <class T>
struct ProdGradKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& dy = ctx.input(1);
    Shape kept, unused;
    TROUPE_RETURN_IF_ERROR(
        reduced_shapes(x.shape(), ctx.attr<std::vector<int64_t>>("axes"), true, &kept, &unused));
    if (dy.num_elements() != kept.num_elements()) {
      return runtime::invalid_argument("dy has shape ", dy.shape(), ", expected ", kept);
    }
    const int64_t slots = kept.num_elements();
    std::vector<T> nonzero_prod(slots, T(1));
    std::vector<int64_t> zeros(slots, 0);
    BroadcastPlan plan;
    plan_broadcast_to(kept, x.shape(), &plan);
    const T* in = x.data<T>();
    auto for_each = [&](auto&& f) {
      plan.for_each_run([&](int64_t o, const int64_t* off, const int64_t* step, int64_t n) {
        for (int64_t i = 0; i < n; ++i) f(o + i, off[0] + i * step[0]);
      });
    };
    for_each([&](int64_t i, int64_t s) {
      if (in[i] == T(0)) {
        ++zeros[s];
      } else {
        nonzero_prod[s] *= in[i];
      }
    });
    Tensor* dx;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, x.shape(), &dx));
    T* out = dx->data<T>();
    const T* g = dy.data<T>();
    for_each([&](int64_t i, int64_t s) {
      T others = zeros[s] == 0                    ? nonzero_prod[s] / in[i]
                 : zeros[s] == 1 && in[i] == T(0) ? nonzero_prod[s]
                                                  : T(0);
      out[i] = g[s] * others;
    });
    return runtime::ok_status();
  }
};

// x's elements seen along the node's "axis" attribute as [outer, n, inner].
struct AxisLayout {
  int axis = 0;
  int64_t outer = 1, n = 1, inner = 1;
};

Status axis_layout(const KernelContext& ctx, const Tensor& x, AxisLayout* l) {
  if (!x.shape().canonical_axis(ctx.attr<int64_t>("axis"), &l->axis)) {
    return runtime::invalid_argument("axis ", ctx.attr<int64_t>("axis"), " out of range for ",
                                     x.shape());
  }
  l->n = x.dim(l->axis);
  for (int i = 0; i < x.rank(); ++i) {
    if (i < l->axis) l->outer *= x.dim(i);
    if (i > l->axis) l->inner *= x.dim(i);
  }
  return runtime::ok_status();
}

// Index of the extreme value along an axis; the first one on ties, as TF and numpy.
template <bool kMax>
struct ArgReduce {
  template <class T>
  struct Kernel {
    static Status compute(KernelContext& ctx) {
      const Tensor& x = ctx.input(0);
      AxisLayout l;
      TROUPE_RETURN_IF_ERROR(axis_layout(ctx, x, &l));
      const auto [axis, outer, n, inner] = l;
      if (n == 0)
        return runtime::invalid_argument("cannot take an arg-reduction over an empty axis");
      std::vector<int64_t> dims = x.shape().dims();
      dims.erase(dims.begin() + axis);
      Tensor* y;
      TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, Shape(dims), &y));
      const T* in = x.data<T>();
      const bool i32 = y->dtype() == DType::kInt32;
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          const T* p = in + o * n * inner + i;
          int64_t best = 0;
          for (int64_t j = 1; j < n; ++j) {
            if (kMax ? p[j * inner] > p[best * inner] : p[j * inner] < p[best * inner]) best = j;
          }
          if (i32) {
            y->data<int32_t>()[o * inner + i] = static_cast<int32_t>(best);
          } else {
            y->data<int64_t>()[o * inner + i] = best;
          }
        }
      }
      return runtime::ok_status();
    }
  };
};

// The running sum (or product) along an axis, as [outer, n, inner] of the input's elements;
// accumulated in the element type, as TF's.
template <bool kProduct>
struct Cumulative {
  template <class T>
  struct Kernel {
    static Status compute(KernelContext& ctx) {
      const Tensor& x = ctx.input(0);
      AxisLayout l;
      TROUPE_RETURN_IF_ERROR(axis_layout(ctx, x, &l));
      const int64_t outer = l.outer, n = l.n, inner = l.inner;
      const bool exclusive = ctx.attr<bool>("exclusive"), reverse = ctx.attr<bool>("reverse");
      Tensor* y;
      TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, x.shape(), &y));
      const T* in = x.data<T>();
      T* out = y->data<T>();
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          T sum = kProduct ? T(1) : T(0);
          for (int64_t k = 0; k < n; ++k) {
            const int64_t j = reverse ? n - 1 - k : k;
            const int64_t at = (o * n + j) * inner + i;
            if (exclusive) out[at] = sum;
            if constexpr (kProduct) {
              sum *= in[at];
            } else {
              sum += in[at];
            }
            if (!exclusive) out[at] = sum;
          }
        }
      }
      return runtime::ok_status();
    }
  };
};

}  // namespace

TROUPE_REGISTER_KERNELS(reduction_cpu) {
  constexpr DeviceType kCpu = DeviceType::kCpu;
  registry.add_typed<Reducer<Reduce::kSum>::Kernel, float, double, int32_t, int64_t>("Sum", kCpu);
  registry.add_typed<Reducer<Reduce::kMean>::Kernel, float, double, int32_t, int64_t>("Mean", kCpu);
  registry.add_typed<Reducer<Reduce::kMax>::Kernel, float, double, int32_t, int64_t>("Max", kCpu);
  registry.add_typed<Reducer<Reduce::kMin>::Kernel, float, double, int32_t, int64_t>("Min", kCpu);
  registry.add_typed<Reducer<Reduce::kProd>::Kernel, float, double, int32_t, int64_t>("Prod", kCpu);
  registry.add_typed<ProdGradKernel, float, double>("ProdGrad", kCpu);
  registry.add_typed<Cumulative<false>::Kernel, float, double, int32_t, int64_t>("Cumsum", kCpu);
  registry.add_typed<Cumulative<true>::Kernel, float, double, int32_t, int64_t>("Cumprod", kCpu);
  registry.add_typed<ArgReduce<true>::Kernel, float, double, int32_t, int64_t, uint8_t>("ArgMax",
                                                                                        kCpu);
  registry.add_typed<ArgReduce<false>::Kernel, float, double, int32_t, int64_t, uint8_t>("ArgMin",
                                                                                         kCpu);
}

}  // namespace troupe::kernels::cpu
