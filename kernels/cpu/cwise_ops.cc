// Elementwise CPU kernels: unary math and activations, broadcasting binary arithmetic,
// comparisons, logic, select, cast. Eigen array expressions vectorise each contiguous run.
#include <unsupported/Eigen/SpecialFunctions>

#include <cmath>
#include <limits>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/eigen_util.h"
#include "kernels/cpu/kernel.h"

namespace troupe::kernels::cpu {

namespace {

// Output 0 shaped like input `i`: reuses input i's buffer when nobody else holds it.
template <class T>
Status output_like_input(KernelContext& ctx, int i, Tensor** out) {
  if (ctx.input_is_exclusive(i) && ctx.input(i).dtype() == runtime::dtype_of<T>()) {
    ctx.set_output(0, ctx.input(i));
    *out = &ctx.outputs()[0];
    return runtime::ok_status();
  }
  return ctx.allocate_output(0, ctx.input(i).shape(), out);
}

// ---- unary ----------------------------------------------------------------------------------

template <const auto& F>
struct Unary {
  template <class T>
  struct Kernel {
    static Status compute(KernelContext& ctx) {
      const Tensor& x = ctx.input(0);
      Tensor* y;
      TROUPE_RETURN_IF_ERROR(output_like_input<T>(ctx, 0, &y));
      auto in = flat_in<T>(x);  // may alias the output: Eigen reads each element before writing
      flat_out<T>(*y) = F(in, ctx);
      return runtime::ok_status();
    }
  };
};

// Each maps an Eigen array expression x to the op's result, elementwise.
constexpr auto kNeg = [](const auto& x, const KernelContext&) { return -x; };
constexpr auto kAbs = [](const auto& x, const KernelContext&) { return x.abs(); };
constexpr auto kSign = [](const auto& x, const KernelContext&) { return x.sign(); };
constexpr auto kSquare = [](const auto& x, const KernelContext&) { return x.square(); };
constexpr auto kSqrt = [](const auto& x, const KernelContext&) { return x.sqrt(); };
constexpr auto kRsqrt = [](const auto& x, const KernelContext&) { return x.rsqrt(); };
constexpr auto kExp = [](const auto& x, const KernelContext&) { return x.exp(); };
constexpr auto kLog = [](const auto& x, const KernelContext&) { return x.log(); };
constexpr auto kLog1p = [](const auto& x, const KernelContext&) { return x.log1p(); };
constexpr auto kCos = [](const auto& x, const KernelContext&) { return x.cos(); };
constexpr auto kSin = [](const auto& x, const KernelContext&) { return x.sin(); };
constexpr auto kFloor = [](const auto& x, const KernelContext&) { return x.floor(); };
constexpr auto kCeil = [](const auto& x, const KernelContext&) { return x.ceil(); };
constexpr auto kTan = [](const auto& x, const KernelContext&) { return x.tan(); };
constexpr auto kAsin = [](const auto& x, const KernelContext&) { return x.asin(); };
constexpr auto kAcos = [](const auto& x, const KernelContext&) { return x.acos(); };
constexpr auto kAtan = [](const auto& x, const KernelContext&) { return x.atan(); };
constexpr auto kSinh = [](const auto& x, const KernelContext&) { return x.sinh(); };
constexpr auto kCosh = [](const auto& x, const KernelContext&) { return x.cosh(); };
constexpr auto kAsinh = [](const auto& x, const KernelContext&) { return x.asinh(); };
constexpr auto kAcosh = [](const auto& x, const KernelContext&) { return x.acosh(); };
constexpr auto kAtanh = [](const auto& x, const KernelContext&) { return x.atanh(); };
constexpr auto kErf = [](const auto& x, const KernelContext&) { return x.erf(); };
constexpr auto kErfc = [](const auto& x, const KernelContext&) { return x.erfc(); };
constexpr auto kLgamma = [](const auto& x, const KernelContext&) { return x.lgamma(); };
constexpr auto kDigamma = [](const auto& x, const KernelContext&) { return x.digamma(); };
constexpr auto kExpm1 = [](const auto& x, const KernelContext&) { return x.expm1(); };
constexpr auto kReciprocal = [](const auto& x, const KernelContext&) { return x.inverse(); };
constexpr auto kRound = [](const auto& x, const KernelContext&) { return x.rint(); };
constexpr auto kRelu = [](const auto& x, const KernelContext&) {
  using T = typename std::decay_t<decltype(x)>::Scalar;
  return x.max(T(0));
};
constexpr auto kRelu6 = [](const auto& x, const KernelContext&) {
  using T = typename std::decay_t<decltype(x)>::Scalar;
  return x.max(T(0)).min(T(6));
};
constexpr auto kElu = [](const auto& x, const KernelContext&) {
  using T = typename std::decay_t<decltype(x)>::Scalar;
  return (x > T(0)).select(x, x.exp() - T(1));
};
constexpr auto kSelu = [](const auto& x, const KernelContext&) {
  using T = typename std::decay_t<decltype(x)>::Scalar;
  return (x > T(0)).select(T(1.0507009873554804934193349852946) * x,
                           T(1.7580993408473768599402175208123) * (x.exp() - T(1)));
};
constexpr auto kLeakyRelu = [](const auto& x, const KernelContext& ctx) {
  using T = typename std::decay_t<decltype(x)>::Scalar;
  return (x > T(0)).select(x, x * T(ctx.attr<double>("alpha")));
};
constexpr auto kSigmoid = [](const auto& x, const KernelContext&) {
  using T = typename std::decay_t<decltype(x)>::Scalar;
  return (T(1) + (-x).exp()).inverse();
};
constexpr auto kTanh = [](const auto& x, const KernelContext&) { return x.tanh(); };
constexpr auto kSoftplus = [](const auto& x, const KernelContext&) {
  using T = typename std::decay_t<decltype(x)>::Scalar;
  return x.max(T(0)) + (-x.abs()).exp().log1p();
};
constexpr auto kSoftsign = [](const auto& x, const KernelContext&) {
  using T = typename std::decay_t<decltype(x)>::Scalar;
  return x / (T(1) + x.abs());
};

template <class T>
struct IsFiniteKernel {
  static Status compute(KernelContext& ctx) {
    Tensor* y;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, ctx.input(0).shape(), &y));
    flat_out<bool>(*y) = flat_in<T>(ctx.input(0)).isFinite();
    return runtime::ok_status();
  }
};

// dx = f(a, b) for the fused activation gradients; same shapes.
template <const auto& F>
struct GradPair {
  template <class T>
  struct Kernel {
    static Status compute(KernelContext& ctx) {
      const Tensor& a = ctx.input(0);
      const Tensor& c = ctx.input(1);
      if (a.shape() != c.shape()) {
        return runtime::invalid_argument("shapes differ: ", a.shape(), " and ", c.shape());
      }
      Tensor* y;
      TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, a.shape(), &y));
      flat_out<T>(*y) = F(flat_in<T>(a), flat_in<T>(c));
      return runtime::ok_status();
    }
  };
};

constexpr auto kReluGrad = [](const auto& dy, const auto& x) {  // (dy, x)
  using T = typename std::decay_t<decltype(x)>::Scalar;
  return (x > T(0)).select(dy, T(0));
};
constexpr auto kSigmoidGrad = [](const auto& y, const auto& dy) {  // (y, dy)
  using T = typename std::decay_t<decltype(y)>::Scalar;
  return dy * y * (T(1) - y);
};
constexpr auto kTanhGrad = [](const auto& y, const auto& dy) {  // (y, dy)
  using T = typename std::decay_t<decltype(y)>::Scalar;
  return dy * (T(1) - y.square());
};

// ---- binary with broadcasting ---------------------------------------------------------------

template <class T, class R, const auto& F>
void binary_run(const T* a, int64_t sa, const T* c, int64_t sc, R* out, int64_t n) {
  VecMap<R> o(out, n);
  if (sa && sc) {
    o = F(ConstVecMap<T>(a, n), ConstVecMap<T>(c, n));
  } else if (sa) {
    o = F(ConstVecMap<T>(a, n), ArrayX<T>::Constant(n, *c));
  } else if (sc) {
    o = F(ArrayX<T>::Constant(n, *a), ConstVecMap<T>(c, n));
  } else {
    o = F(ArrayX<T>::Constant(n, *a), ArrayX<T>::Constant(n, *c));
  }
}

template <class T, class R, const auto& F>
Status binary(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& c = ctx.input(1);
  BroadcastPlan plan;
  if (!plan_broadcast({&a.shape(), &c.shape()}, &plan)) {
    return runtime::invalid_argument("shapes ", a.shape(), " and ", c.shape(),
                                     " cannot be broadcast together");
  }
  Tensor* out;
  if (std::is_same_v<T, R> && a.shape() == plan.out_shape && ctx.input_is_exclusive(0)) {
    ctx.set_output(0, a);
    out = &ctx.outputs()[0];
  } else {
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, plan.out_shape, &out));
  }
  const T* pa = a.data<T>();
  const T* pc = c.data<T>();
  R* po = out->data<R>();
  plan.for_each_run([&](int64_t o, const int64_t* in, const int64_t* step, int64_t n) {
    binary_run<T, R, F>(pa + in[0], step[0], pc + in[1], step[1], po + o, n);
  });
  return runtime::ok_status();
}

template <const auto& F>
struct Binary {
  template <class T>
  struct Kernel {
    static Status compute(KernelContext& ctx) { return binary<T, T, F>(ctx); }
  };
};
template <const auto& F>
struct Compare {
  template <class T>
  struct Kernel {
    static Status compute(KernelContext& ctx) { return binary<T, bool, F>(ctx); }
  };
};

// Each maps two Eigen array expressions of equal length to the op's result, elementwise.
constexpr auto kAdd = [](const auto& x, const auto& y) { return x + y; };
constexpr auto kSub = [](const auto& x, const auto& y) { return x - y; };
constexpr auto kMul = [](const auto& x, const auto& y) { return x * y; };
constexpr auto kDiv = [](const auto& x, const auto& y) { return x / y; };
constexpr auto kMax = [](const auto& x, const auto& y) { return x.max(y); };
constexpr auto kMin = [](const auto& x, const auto& y) { return x.min(y); };
constexpr auto kPow = [](const auto& x, const auto& y) {
  return x.binaryExpr(y, [](auto p, auto q) { return std::pow(p, q); });
};
constexpr auto kAtan2 = [](const auto& y, const auto& x) {
  return y.binaryExpr(x, [](auto p, auto q) { return std::atan2(p, q); });
};
constexpr auto kSquaredDifference = [](const auto& x, const auto& y) { return (x - y).square(); };
constexpr auto kPolygamma = [](const auto& a, const auto& x) {
  return a.binaryExpr(x, [](auto n, auto v) { return Eigen::numext::polygamma(n, v); });
};
// Python's // and %: the quotient rounded down, the remainder with the divisor's sign.
constexpr auto kFloorDiv = [](const auto& x, const auto& y) {
  return x.binaryExpr(y, [](auto p, auto q) {
    if constexpr (std::is_integral_v<decltype(p)>) {
      const auto t = p / q;
      return (p % q != 0 && ((p < 0) != (q < 0))) ? t - 1 : t;
    } else {
      return std::floor(p / q);
    }
  });
};
constexpr auto kFloorMod = [](const auto& x, const auto& y) {
  return x.binaryExpr(y, [](auto p, auto q) {
    if constexpr (std::is_integral_v<decltype(p)>) {
      const auto r = p % q;
      return (r != 0 && ((r < 0) != (q < 0))) ? r + q : r;
    } else {
      const auto r = std::fmod(p, q);
      return (r != 0 && ((r < 0) != (q < 0))) ? r + q : r;
    }
  });
};
constexpr auto kEqual = [](const auto& x, const auto& y) { return x == y; };
constexpr auto kNotEqual = [](const auto& x, const auto& y) { return x != y; };
constexpr auto kLess = [](const auto& x, const auto& y) { return x < y; };
constexpr auto kLessEqual = [](const auto& x, const auto& y) { return x <= y; };
constexpr auto kGreater = [](const auto& x, const auto& y) { return x > y; };
constexpr auto kGreaterEqual = [](const auto& x, const auto& y) { return x >= y; };
constexpr auto kAnd = [](const auto& x, const auto& y) { return x && y; };
constexpr auto kOr = [](const auto& x, const auto& y) { return x || y; };

// Integer division truncates like C++ and TF; a zero divisor is an error, not a crash.
template <const auto& F>
struct IntDiv {
  template <class T>
  struct Kernel {
    static Status compute(KernelContext& ctx) {
      const Tensor& d = ctx.input(1);
      const T* p = d.data<T>();
      for (int64_t i = 0; i < d.num_elements(); ++i) {
        if (p[i] == 0) return runtime::invalid_argument("integer division by zero");
      }
      return binary<T, T, F>(ctx);
    }
  };
};

template <class T>
struct LogicalNotKernel {
  static Status compute(KernelContext& ctx) {
    Tensor* y;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, ctx.input(0).shape(), &y));
    const bool* x = ctx.input(0).data<bool>();
    bool* o = y->data<bool>();
    for (int64_t i = 0; i < y->num_elements(); ++i) o[i] = !x[i];
    return runtime::ok_status();
  }
};

// y = cond ? a : c, all three broadcast.
template <class T>
struct SelectKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& cond = ctx.input(0);
    const Tensor& a = ctx.input(1);
    const Tensor& c = ctx.input(2);
    BroadcastPlan plan;
    if (!plan_broadcast({&cond.shape(), &a.shape(), &c.shape()}, &plan)) {
      return runtime::invalid_argument("shapes ", cond.shape(), ", ", a.shape(), " and ", c.shape(),
                                       " cannot be broadcast together");
    }
    Tensor* out;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, plan.out_shape, &out));
    const bool* pc = cond.data<bool>();
    const T* pa = a.data<T>();
    const T* pb = c.data<T>();
    T* po = out->data<T>();
    plan.for_each_run([&](int64_t o, const int64_t* in, const int64_t* step, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        po[o + i] = pc[in[0] + i * step[0]] ? pa[in[1] + i * step[1]] : pb[in[2] + i * step[2]];
      }
    });
    return runtime::ok_status();
  }
};

// ---- cast -----------------------------------------------------------------------------------

template <class From, class To>
void convert(const From* in, To* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<To, bool>) {
      out[i] = in[i] != From(0);
    } else {
      out[i] = static_cast<To>(in[i]);
    }
  }
}

template <class From>
struct CastKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    DType to = ctx.attr<DType>("dtype");
    if (to == x.dtype()) {
      ctx.set_output(0, x);
      return runtime::ok_status();
    }
    Tensor* y;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, x.shape(), &y));
    const From* in = x.data<From>();
    int64_t n = x.num_elements();
    bool converted =
        runtime::visit_numeric(to, [&](auto zero) { convert(in, y->data<decltype(zero)>(), n); });
    if (!converted) return runtime::invalid_argument("cannot cast to ", runtime::dtype_name(to));
    return runtime::ok_status();
  }
};

}  // namespace

TROUPE_REGISTER_KERNELS(cwise_cpu) {
  constexpr DeviceType kCpu = DeviceType::kCpu;
  registry.add_typed<Unary<kNeg>::Kernel, float, double, int32_t, int64_t>("Neg", kCpu);
  registry.add_typed<Unary<kAbs>::Kernel, float, double, int32_t, int64_t>("Abs", kCpu);
  registry.add_typed<Unary<kSign>::Kernel, float, double, int32_t, int64_t>("Sign", kCpu);
  registry.add_typed<Unary<kSquare>::Kernel, float, double, int32_t, int64_t>("Square", kCpu);
  registry.add_typed<Unary<kSqrt>::Kernel, float, double>("Sqrt", kCpu);
  registry.add_typed<Unary<kRsqrt>::Kernel, float, double>("Rsqrt", kCpu);
  registry.add_typed<Unary<kExp>::Kernel, float, double>("Exp", kCpu);
  registry.add_typed<Unary<kLog>::Kernel, float, double>("Log", kCpu);
  registry.add_typed<Unary<kLog1p>::Kernel, float, double>("Log1p", kCpu);
  registry.add_typed<Unary<kCos>::Kernel, float, double>("Cos", kCpu);
  registry.add_typed<Unary<kSin>::Kernel, float, double>("Sin", kCpu);
  registry.add_typed<Unary<kFloor>::Kernel, float, double>("Floor", kCpu);
  registry.add_typed<Unary<kCeil>::Kernel, float, double>("Ceil", kCpu);
  registry.add_typed<Unary<kTan>::Kernel, float, double>("Tan", kCpu);
  registry.add_typed<Unary<kAsin>::Kernel, float, double>("Asin", kCpu);
  registry.add_typed<Unary<kAcos>::Kernel, float, double>("Acos", kCpu);
  registry.add_typed<Unary<kAtan>::Kernel, float, double>("Atan", kCpu);
  registry.add_typed<Unary<kSinh>::Kernel, float, double>("Sinh", kCpu);
  registry.add_typed<Unary<kCosh>::Kernel, float, double>("Cosh", kCpu);
  registry.add_typed<Unary<kAsinh>::Kernel, float, double>("Asinh", kCpu);
  registry.add_typed<Unary<kAcosh>::Kernel, float, double>("Acosh", kCpu);
  registry.add_typed<Unary<kAtanh>::Kernel, float, double>("Atanh", kCpu);
  registry.add_typed<Unary<kErf>::Kernel, float, double>("Erf", kCpu);
  registry.add_typed<Unary<kErfc>::Kernel, float, double>("Erfc", kCpu);
  registry.add_typed<Unary<kLgamma>::Kernel, float, double>("Lgamma", kCpu);
  registry.add_typed<Unary<kDigamma>::Kernel, float, double>("Digamma", kCpu);
  registry.add_typed<Unary<kExpm1>::Kernel, float, double>("Expm1", kCpu);
  registry.add_typed<Unary<kReciprocal>::Kernel, float, double>("Reciprocal", kCpu);
  registry.add_typed<Unary<kRound>::Kernel, float, double>("Round", kCpu);
  registry.add_typed<Unary<kRelu>::Kernel, float, double, int32_t, int64_t>("Relu", kCpu);
  registry.add_typed<Unary<kRelu6>::Kernel, float, double, int32_t, int64_t>("Relu6", kCpu);
  registry.add_typed<Unary<kElu>::Kernel, float, double>("Elu", kCpu);
  registry.add_typed<Unary<kSelu>::Kernel, float, double>("Selu", kCpu);
  registry.add_typed<Unary<kLeakyRelu>::Kernel, float, double>("LeakyRelu", kCpu);
  registry.add_typed<Unary<kSigmoid>::Kernel, float, double>("Sigmoid", kCpu);
  registry.add_typed<Unary<kTanh>::Kernel, float, double>("Tanh", kCpu);
  registry.add_typed<Unary<kSoftplus>::Kernel, float, double>("Softplus", kCpu);
  registry.add_typed<Unary<kSoftsign>::Kernel, float, double>("Softsign", kCpu);
  registry.add_typed<IsFiniteKernel, float, double>("IsFinite", kCpu);
  registry.add_typed<GradPair<kReluGrad>::Kernel, float, double>("ReluGrad", kCpu);
  registry.add_typed<GradPair<kSigmoidGrad>::Kernel, float, double>("SigmoidGrad", kCpu);
  registry.add_typed<GradPair<kTanhGrad>::Kernel, float, double>("TanhGrad", kCpu);

  registry.add_typed<Binary<kAdd>::Kernel, float, double, int32_t, int64_t>("Add", kCpu);
  registry.add_typed<Binary<kSub>::Kernel, float, double, int32_t, int64_t>("Sub", kCpu);
  registry.add_typed<Binary<kMul>::Kernel, float, double, int32_t, int64_t>("Mul", kCpu);
  registry.add_typed<Binary<kDiv>::Kernel, float, double>("Div", kCpu);
  registry.add_typed<IntDiv<kDiv>::Kernel, int32_t, int64_t>("Div", kCpu);
  registry.add_typed<Binary<kFloorDiv>::Kernel, float, double>("FloorDiv", kCpu);
  registry.add_typed<IntDiv<kFloorDiv>::Kernel, int32_t, int64_t>("FloorDiv", kCpu);
  registry.add_typed<Binary<kFloorMod>::Kernel, float, double>("FloorMod", kCpu);
  registry.add_typed<IntDiv<kFloorMod>::Kernel, int32_t, int64_t>("FloorMod", kCpu);
  registry.add_typed<Binary<kAtan2>::Kernel, float, double>("Atan2", kCpu);
  registry.add_typed<Binary<kSquaredDifference>::Kernel, float, double, int32_t, int64_t>(
      "SquaredDifference", kCpu);
  registry.add_typed<Binary<kPolygamma>::Kernel, float, double>("Polygamma", kCpu);
  registry.add_typed<Binary<kPow>::Kernel, float, double>("Pow", kCpu);
  registry.add_typed<Binary<kMax>::Kernel, float, double, int32_t, int64_t>("Maximum", kCpu);
  registry.add_typed<Binary<kMin>::Kernel, float, double, int32_t, int64_t>("Minimum", kCpu);
  registry.add_typed<Compare<kEqual>::Kernel, float, double, int32_t, int64_t, uint8_t, bool>(
      "Equal", kCpu);
  registry.add_typed<Compare<kNotEqual>::Kernel, float, double, int32_t, int64_t, uint8_t, bool>(
      "NotEqual", kCpu);
  registry.add_typed<Compare<kLess>::Kernel, float, double, int32_t, int64_t, uint8_t>("Less",
                                                                                       kCpu);
  registry.add_typed<Compare<kLessEqual>::Kernel, float, double, int32_t, int64_t, uint8_t>(
      "LessEqual", kCpu);
  registry.add_typed<Compare<kGreater>::Kernel, float, double, int32_t, int64_t, uint8_t>("Greater",
                                                                                          kCpu);
  registry.add_typed<Compare<kGreaterEqual>::Kernel, float, double, int32_t, int64_t, uint8_t>(
      "GreaterEqual", kCpu);
  registry.add_typed<Binary<kAnd>::Kernel, bool>("LogicalAnd", kCpu);
  registry.add_typed<Binary<kOr>::Kernel, bool>("LogicalOr", kCpu);
  registry.add_typed<LogicalNotKernel, bool>("LogicalNot", kCpu);
  registry.add_typed<SelectKernel, float, double, int32_t, int64_t, uint8_t, bool>("Select", kCpu);
  registry.add_typed<CastKernel, float, double, int32_t, int64_t, uint8_t, bool>("Cast", kCpu);
}

}  // namespace troupe::kernels::cpu
