// Variable reads and writes, and the optimizers' update rules, against the executor's
// VariableStore. Updates write in place: VariableStore::for_update() copies first only when a
// reader of this step still holds the old value.
#include <cmath>

#include "kernels/cpu/eigen_util.h"
#include "runtime/kernel_registry.h"

namespace troupe::kernels::cpu {

using runtime::DeviceType;
using runtime::KernelContext;
using runtime::Shape;
using runtime::Status;
using runtime::Tensor;
using runtime::VariableStore;

namespace {

Status store_of(const KernelContext& ctx, VariableStore** store) {
  *store = ctx.variables();
  if (!*store) return runtime::failed_precondition("this executor has no variable store");
  return runtime::ok_status();
}

const std::string& var_name(const KernelContext& ctx) { return ctx.attr<std::string>("var"); }

template <class T>
struct VariableKernel {
  static Status compute(KernelContext& ctx) {
    VariableStore* store;
    TROUPE_RETURN_IF_ERROR(store_of(ctx, &store));
    TROUPE_ASSIGN_OR_RETURN(Tensor value, store->read(var_name(ctx)));
    if (value.dtype() != ctx.node().output_dtypes[0] || value.shape() != ctx.attr<Shape>("shape")) {
      return runtime::failed_precondition(
          "variable '", var_name(ctx), "' holds ", runtime::dtype_name(value.dtype()),
          value.shape(), ", the graph declares ", runtime::dtype_name(ctx.node().output_dtypes[0]),
          ctx.attr<Shape>("shape"));
    }
    ctx.set_output(0, value);
    return runtime::ok_status();
  }
};

template <class T>
Status check_value(const KernelContext& ctx, const Tensor& v) {
  if (v.dtype() != runtime::dtype_of<T>() || v.shape() != ctx.attr<Shape>("shape")) {
    return runtime::invalid_argument(
        "value of ", runtime::dtype_name(v.dtype()), v.shape(), " for variable '", var_name(ctx),
        "' of ", runtime::dtype_name(runtime::dtype_of<T>()), ctx.attr<Shape>("shape"));
  }
  return runtime::ok_status();
}

template <class T>
struct AssignKernel {
  static Status compute(KernelContext& ctx) {
    VariableStore* store;
    TROUPE_RETURN_IF_ERROR(store_of(ctx, &store));
    TROUPE_RETURN_IF_ERROR(check_value<T>(ctx, ctx.input(0)));
    store->assign(var_name(ctx), ctx.input(0));
    ctx.set_output(0, ctx.input(0));
    return runtime::ok_status();
  }
};

template <int kSign>
struct AssignUpdate {
  template <class T>
  struct Kernel {
    static Status compute(KernelContext& ctx) {
      VariableStore* store;
      TROUPE_RETURN_IF_ERROR(store_of(ctx, &store));
      TROUPE_RETURN_IF_ERROR(check_value<T>(ctx, ctx.input(0)));
      TROUPE_ASSIGN_OR_RETURN(Tensor var, store->for_update(var_name(ctx), runtime::dtype_of<T>(),
                                                            ctx.attr<Shape>("shape")));
      if (kSign > 0) {
        flat_out<T>(var) += flat_in<T>(ctx.input(0));
      } else {
        flat_out<T>(var) -= flat_in<T>(ctx.input(0));
      }
      ctx.set_output(0, var);
      return runtime::ok_status();
    }
  };
};

// What every update rule gets: the variable (writable), its gradient and the learning rate.
template <class T>
struct Update {
  VariableStore* store;
  Tensor var;
  ConstVecMap<T> g{nullptr, 0};
  T lr;
};

template <class T>
Status begin_update(KernelContext& ctx, Update<T>* u) {
  TROUPE_RETURN_IF_ERROR(store_of(ctx, &u->store));
  const Tensor& grad = ctx.input(0);
  // The kernel is chosen by the gradient's dtype; the variable and the learning rate come from
  // elsewhere (a store restored from a file, a peer's call) and must agree with it.
  TROUPE_ASSIGN_OR_RETURN(
      u->var, u->store->for_update(var_name(ctx), runtime::dtype_of<T>(), grad.shape()));
  if (ctx.input(1).dtype() != runtime::dtype_of<T>() || ctx.input(1).num_elements() != 1) {
    return runtime::invalid_argument("learning rate must be a ", runtime::dtype_name(grad.dtype()),
                                     " scalar, got ", runtime::dtype_name(ctx.input(1).dtype()),
                                     ctx.input(1).shape());
  }
  new (&u->g) ConstVecMap<T>(grad.data<T>(), grad.num_elements());
  u->lr = ctx.input(1).data<T>()[0];
  return runtime::ok_status();
}

template <class T>
Status slot(Update<T>& u, const KernelContext& ctx, const char* name, double init, Tensor* out,
            const Shape* shape = nullptr) {
  TROUPE_ASSIGN_OR_RETURN(*out, u.store->slot(var_name(ctx), name, init, shape));
  return runtime::ok_status();
}

template <class T>
struct GradientDescentKernel {
  static Status compute(KernelContext& ctx) {
    Update<T> u;
    TROUPE_RETURN_IF_ERROR(begin_update(ctx, &u));
    flat_out<T>(u.var) -= u.lr * u.g;
    ctx.set_output(0, u.var);
    return runtime::ok_status();
  }
};

template <class T>
struct MomentumKernel {
  static Status compute(KernelContext& ctx) {
    Update<T> u;
    TROUPE_RETURN_IF_ERROR(begin_update(ctx, &u));
    Tensor accum;
    TROUPE_RETURN_IF_ERROR(slot(u, ctx, "Momentum", 0, &accum));
    const T m = T(ctx.attr<double>("momentum"));
    auto a = flat_out<T>(accum);
    a = a * m + u.g;
    if (ctx.attr<bool>("use_nesterov")) {
      flat_out<T>(u.var) -= u.lr * (u.g + m * a);
    } else {
      flat_out<T>(u.var) -= u.lr * a;
    }
    ctx.set_output(0, u.var);
    return runtime::ok_status();
  }
};

template <class T>
struct AdagradKernel {
  static Status compute(KernelContext& ctx) {
    Update<T> u;
    TROUPE_RETURN_IF_ERROR(begin_update(ctx, &u));
    Tensor accum;
    TROUPE_RETURN_IF_ERROR(
        slot(u, ctx, "Adagrad", ctx.attr<double>("initial_accumulator_value"), &accum));
    auto a = flat_out<T>(accum);
    a += u.g.square();
    flat_out<T>(u.var) -= u.lr * u.g / (a.sqrt() + T(ctx.attr<double>("epsilon")));
    ctx.set_output(0, u.var);
    return runtime::ok_status();
  }
};

template <class T>
struct AdamKernel {
  static Status compute(KernelContext& ctx) {
    Update<T> u;
    TROUPE_RETURN_IF_ERROR(begin_update(ctx, &u));
    Tensor m, v, t;
    const Shape scalar;
    TROUPE_RETURN_IF_ERROR(slot(u, ctx, "Adam_m", 0, &m));
    TROUPE_RETURN_IF_ERROR(slot(u, ctx, "Adam_v", 0, &v));
    TROUPE_RETURN_IF_ERROR(slot(u, ctx, "Adam_t", 0, &t, &scalar));
    const T b1 = T(ctx.attr<double>("beta1")), b2 = T(ctx.attr<double>("beta2"));
    const T eps = T(ctx.attr<double>("epsilon"));
    T& step = t.data<T>()[0];
    step += T(1);
    const T lr_t = u.lr * std::sqrt(T(1) - std::pow(b2, step)) / (T(1) - std::pow(b1, step));
    auto mm = flat_out<T>(m);
    auto vv = flat_out<T>(v);
    mm = b1 * mm + (T(1) - b1) * u.g;
    vv = b2 * vv + (T(1) - b2) * u.g.square();
    flat_out<T>(u.var) -= lr_t * mm / (vv.sqrt() + eps);
    ctx.set_output(0, u.var);
    return runtime::ok_status();
  }
};

template <class T>
struct RMSPropKernel {
  static Status compute(KernelContext& ctx) {
    Update<T> u;
    TROUPE_RETURN_IF_ERROR(begin_update(ctx, &u));
    Tensor ms, mom;
    TROUPE_RETURN_IF_ERROR(slot(u, ctx, "RMSProp_ms", 0, &ms));
    TROUPE_RETURN_IF_ERROR(slot(u, ctx, "RMSProp_mom", 0, &mom));
    const T decay = T(ctx.attr<double>("decay")), momentum = T(ctx.attr<double>("momentum"));
    const T eps = T(ctx.attr<double>("epsilon"));
    auto s = flat_out<T>(ms);
    s = decay * s + (T(1) - decay) * u.g.square();
    ArrayX<T> denom = s;
    if (ctx.attr<bool>("centered")) {
      Tensor mg;
      TROUPE_RETURN_IF_ERROR(slot(u, ctx, "RMSProp_mg", 0, &mg));
      auto g_avg = flat_out<T>(mg);
      g_avg = decay * g_avg + (T(1) - decay) * u.g;
      denom -= g_avg.square();
    }
    auto mo = flat_out<T>(mom);
    mo = momentum * mo + u.lr * u.g / (denom + eps).sqrt();
    flat_out<T>(u.var) -= mo;
    ctx.set_output(0, u.var);
    return runtime::ok_status();
  }
};

template <class T>
struct FtrlKernel {
  static Status compute(KernelContext& ctx) {
    Update<T> u;
    TROUPE_RETURN_IF_ERROR(begin_update(ctx, &u));
    if (u.lr <= T(0)) return runtime::invalid_argument("FTRL needs a positive learning rate");
    Tensor accum, linear;
    TROUPE_RETURN_IF_ERROR(
        slot(u, ctx, "Ftrl_accum", ctx.attr<double>("initial_accumulator_value"), &accum));
    TROUPE_RETURN_IF_ERROR(slot(u, ctx, "Ftrl_linear", 0, &linear));
    const T l1 = T(ctx.attr<double>("l1")), l2 = T(ctx.attr<double>("l2"));
    const T p = T(-ctx.attr<double>("lr_power"));
    auto a = flat_out<T>(accum);
    auto lin = flat_out<T>(linear);
    auto w = flat_out<T>(u.var);
    for (int64_t i = 0; i < w.size(); ++i) {
      const T g = u.g[i];
      const T a_new = a[i] + g * g;
      const T sigma = (std::pow(a_new, p) - std::pow(a[i], p)) / u.lr;
      lin[i] += g - sigma * w[i];
      const T quadratic = std::pow(a_new, p) / u.lr + T(2) * l2;
      w[i] = std::abs(lin[i]) > l1 ? ((lin[i] > 0 ? l1 : -l1) - lin[i]) / quadratic : T(0);
      a[i] = a_new;
    }
    ctx.set_output(0, u.var);
    return runtime::ok_status();
  }
};

// SyncReplicasBarrier in one process: no other replica to wait for.
template <class T>
struct PassStepKernel {
  static Status compute(KernelContext& ctx) {
    ctx.set_output(0, ctx.input(0));
    return runtime::ok_status();
  }
};

}  // namespace

TROUPE_REGISTER_KERNELS(state_cpu) {
  constexpr DeviceType kCpu = DeviceType::kCpu;
  registry.add_typed<VariableKernel, float, double, int32_t, int64_t>("Variable", kCpu);
  registry.add_typed<AssignKernel, float, double, int32_t, int64_t>("Assign", kCpu);
  registry.add_typed<AssignUpdate<1>::Kernel, float, double, int32_t, int64_t>("AssignAdd", kCpu);
  registry.add_typed<AssignUpdate<-1>::Kernel, float, double, int32_t, int64_t>("AssignSub", kCpu);
  registry.add_typed<GradientDescentKernel, float, double>("ApplyGradientDescent", kCpu);
  registry.add_typed<MomentumKernel, float, double>("ApplyMomentum", kCpu);
  registry.add_typed<AdagradKernel, float, double>("ApplyAdagrad", kCpu);
  registry.add_typed<AdamKernel, float, double>("ApplyAdam", kCpu);
  registry.add_typed<RMSPropKernel, float, double>("ApplyRMSProp", kCpu);
  registry.add_typed<FtrlKernel, float, double>("ApplyFtrl", kCpu);
  registry.add_typed<PassStepKernel, int64_t>("SyncReplicasBarrier", kCpu);
}

}  // namespace troupe::kernels::cpu
