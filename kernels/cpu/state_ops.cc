// Variable reads and writes, and the optimizers' update rules, against the executor's
// VariableStore. Updates write in place: VariableStore::for_update() copies first only when a
// reader of this step still holds the old value.
#include <algorithm>
#include <cmath>
#include <utility>

#include "kernels/cpu/eigen_util.h"
#include "kernels/cpu/kernel.h"
#include "kernels/cpu/variable_read.h"

namespace troupe::kernels::cpu {

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
    TROUPE_ASSIGN_OR_RETURN(Tensor value, read_declared_variable(ctx));
    ctx.set_output(0, value);
    return runtime::ok_status();
  }
};

template <class T>
Status check_value(const KernelContext& ctx, const Tensor& v) {
  // A local variable's declared shape may leave dims unknown; each assign sets them.
  if (v.dtype() != runtime::dtype_of<T>() || !v.shape().compatible_with(ctx.attr<Shape>("shape"))) {
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
    if (ctx.attr<bool>("local")) {
      store->assign_local(var_name(ctx), ctx.input(0));
    } else {
      store->assign(var_name(ctx), ctx.input(0));
    }
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

// The rows `indices` (int32 or int64) name, each checked against the variable's `rows`: one
// outside [0, rows) is the error, naming its position and the variable.
Status rows_of(const KernelContext& ctx, const Tensor& indices, int64_t rows,
               std::vector<int64_t>* out) {
  out->resize(static_cast<size_t>(indices.num_elements()));
  for (int64_t j = 0; j < indices.num_elements(); ++j) {
    const int64_t i =
        indices.dtype() == DType::kInt32 ? indices.data<int32_t>()[j] : indices.data<int64_t>()[j];
    if (i < 0 || i >= rows) {
      return runtime::invalid_argument("row ", i, " at position ", j, " is out of range [0, ", rows,
                                       ") of variable '", var_name(ctx), "'");
    }
    (*out)[static_cast<size_t>(j)] = i;
  }
  return runtime::ok_status();
}

// Scatter<Op>: the rows at `indices` combined with `updates`, one index after another. Every
// index is checked before anything is written, so a bad one leaves the variable as it was.
enum class Combine { kUpdate, kAdd, kSub, kMul, kDiv, kMin, kMax };

template <Combine C>
struct ScatterUpdate {
  template <class T>
  struct Kernel {
    static Status compute(KernelContext& ctx) {
      const Shape& shape = ctx.attr<Shape>("shape");
      const Tensor& indices = ctx.input(0);
      const Tensor& updates = ctx.input(1);
      const int64_t rows = shape.dim(0);
      const int64_t row = rows == 0 ? 0 : shape.num_elements() / rows;
      const int64_t k = indices.num_elements();
      if (updates.dtype() != runtime::dtype_of<T>() || updates.num_elements() != k * row) {
        return runtime::invalid_argument("updates of ", runtime::dtype_name(updates.dtype()),
                                         updates.shape(), " for ", k, " rows of variable '",
                                         var_name(ctx), "' ", shape);
      }
      std::vector<int64_t> at;
      TROUPE_RETURN_IF_ERROR(rows_of(ctx, indices, rows, &at));
      VariableStore* store;
      TROUPE_RETURN_IF_ERROR(store_of(ctx, &store));
      TROUPE_ASSIGN_OR_RETURN(Tensor var,
                              store->for_update(var_name(ctx), runtime::dtype_of<T>(), shape));
      T* v = var.data<T>();
      const T* u = updates.data<T>();
      for (int64_t j = 0; j < k; ++j) {
        T* dst = v + at[j] * row;
        const T* src = u + j * row;
        for (int64_t e = 0; e < row; ++e) {
          if constexpr (C == Combine::kUpdate) dst[e] = src[e];
          if constexpr (C == Combine::kAdd) dst[e] += src[e];
          if constexpr (C == Combine::kSub) dst[e] -= src[e];
          if constexpr (C == Combine::kMul) dst[e] *= src[e];
          if constexpr (C == Combine::kDiv) dst[e] /= src[e];
          if constexpr (C == Combine::kMin) dst[e] = std::min(dst[e], src[e]);
          if constexpr (C == Combine::kMax) dst[e] = std::max(dst[e], src[e]);
        }
      }
      ctx.set_output(0, var);
      return runtime::ok_status();
    }
  };
};

// What every update rule gets: the variable (writable) and the learning rate.
template <class T>
struct Update {
  VariableStore* store;
  Tensor var;
  T lr;
};

// `shape` is what the gradient says the variable is; lr is input `lr_input`.
template <class T>
Status begin_update(KernelContext& ctx, const Shape& shape, int lr_input, Update<T>* u) {
  TROUPE_RETURN_IF_ERROR(store_of(ctx, &u->store));
  // The kernel is chosen by the gradient's dtype; the variable and the learning rate come from
  // elsewhere (a store restored from a file, a peer's call) and must agree with it.
  TROUPE_ASSIGN_OR_RETURN(u->var,
                          u->store->for_update(var_name(ctx), runtime::dtype_of<T>(), shape));
  const Tensor& lr = ctx.input(lr_input);
  if (lr.dtype() != runtime::dtype_of<T>() || lr.num_elements() != 1) {
    return runtime::invalid_argument("learning rate must be a ",
                                     runtime::dtype_name(runtime::dtype_of<T>()), " scalar, got ",
                                     runtime::dtype_name(lr.dtype()), lr.shape());
  }
  u->lr = lr.data<T>()[0];
  return runtime::ok_status();
}

template <class T>
Status slot(Update<T>& u, const KernelContext& ctx, const char* name, double init, Tensor* out,
            const Shape* shape = nullptr) {
  TROUPE_ASSIGN_OR_RETURN(*out, u.store->slot(var_name(ctx), name, init, shape));
  return runtime::ok_status();
}

// Elements [at, at + n) of a variable or of one of its slots (shaped like it).
template <class T>
VecMap<T> range(Tensor& t, int64_t at, int64_t n) {
  return VecMap<T>(t.data<T>() + at, n);
}

// The update rules. Each reads its slots and constants once per step in init() and then
// updates a range of the variable's elements with their gradient in apply(): the whole variable
// for a dense gradient, each touched row for a sparse one (TF's SparseApply*, which leave the
// other rows and their slots as they are).
template <class T>
struct SgdRule {
  Status init(KernelContext&, Update<T>&) { return runtime::ok_status(); }
  void apply(Update<T>& u, int64_t at, ConstVecMap<T> g) {
    range<T>(u.var, at, g.size()) -= u.lr * g;
  }
};

template <class T>
struct MomentumRule {
  Tensor accum;
  T m;
  bool nesterov;
  Status init(KernelContext& ctx, Update<T>& u) {
    m = T(ctx.attr<double>("momentum"));
    nesterov = ctx.attr<bool>("use_nesterov");
    return slot(u, ctx, "Momentum", 0, &accum);
  }
  void apply(Update<T>& u, int64_t at, ConstVecMap<T> g) {
    auto a = range<T>(accum, at, g.size());
    a = a * m + g;
    if (nesterov) {
      range<T>(u.var, at, g.size()) -= u.lr * (g + m * a);
    } else {
      range<T>(u.var, at, g.size()) -= u.lr * a;
    }
  }
};

template <class T>
struct AdagradRule {
  Tensor accum;
  T eps;
  Status init(KernelContext& ctx, Update<T>& u) {
    eps = T(ctx.attr<double>("epsilon"));
    return slot(u, ctx, "Adagrad", ctx.attr<double>("initial_accumulator_value"), &accum);
  }
  void apply(Update<T>& u, int64_t at, ConstVecMap<T> g) {
    auto a = range<T>(accum, at, g.size());
    a += g.square();
    range<T>(u.var, at, g.size()) -= u.lr * g / (a.sqrt() + eps);
  }
};

// Sparse, it is TF's LazyAdam: m and v of untouched rows neither decay nor move.
template <class T>
struct AdamRule {
  Tensor m, v;
  T b1, b2, eps, lr_t;
  Status init(KernelContext& ctx, Update<T>& u) {
    Tensor t;
    const Shape scalar;
    TROUPE_RETURN_IF_ERROR(slot(u, ctx, "Adam_m", 0, &m));
    TROUPE_RETURN_IF_ERROR(slot(u, ctx, "Adam_v", 0, &v));
    TROUPE_RETURN_IF_ERROR(slot(u, ctx, "Adam_t", 0, &t, &scalar));
    b1 = T(ctx.attr<double>("beta1"));
    b2 = T(ctx.attr<double>("beta2"));
    eps = T(ctx.attr<double>("epsilon"));
    T& step = t.data<T>()[0];
    step += T(1);
    lr_t = u.lr * std::sqrt(T(1) - std::pow(b2, step)) / (T(1) - std::pow(b1, step));
    return runtime::ok_status();
  }
  void apply(Update<T>& u, int64_t at, ConstVecMap<T> g) {
    auto mm = range<T>(m, at, g.size());
    auto vv = range<T>(v, at, g.size());
    mm = b1 * mm + (T(1) - b1) * g;
    vv = b2 * vv + (T(1) - b2) * g.square();
    range<T>(u.var, at, g.size()) -= lr_t * mm / (vv.sqrt() + eps);
  }
};

template <class T>
struct RMSPropRule {
  Tensor ms, mom, mg;
  T decay, momentum, eps;
  bool centered;
  Status init(KernelContext& ctx, Update<T>& u) {
    decay = T(ctx.attr<double>("decay"));
    momentum = T(ctx.attr<double>("momentum"));
    eps = T(ctx.attr<double>("epsilon"));
    centered = ctx.attr<bool>("centered");
    TROUPE_RETURN_IF_ERROR(slot(u, ctx, "RMSProp_ms", 0, &ms));
    TROUPE_RETURN_IF_ERROR(slot(u, ctx, "RMSProp_mom", 0, &mom));
    return centered ? slot(u, ctx, "RMSProp_mg", 0, &mg) : runtime::ok_status();
  }
  void apply(Update<T>& u, int64_t at, ConstVecMap<T> g) {
    auto s = range<T>(ms, at, g.size());
    s = decay * s + (T(1) - decay) * g.square();
    ArrayX<T> denom = s;
    if (centered) {
      auto g_avg = range<T>(mg, at, g.size());
      g_avg = decay * g_avg + (T(1) - decay) * g;
      denom -= g_avg.square();
    }
    auto mo = range<T>(mom, at, g.size());
    mo = momentum * mo + u.lr * g / (denom + eps).sqrt();
    range<T>(u.var, at, g.size()) -= mo;
  }
};

template <class T>
struct FtrlRule {
  Tensor accum, linear;
  T l1, l2, p;
  Status init(KernelContext& ctx, Update<T>& u) {
    if (u.lr <= T(0)) return runtime::invalid_argument("FTRL needs a positive learning rate");
    l1 = T(ctx.attr<double>("l1"));
    l2 = T(ctx.attr<double>("l2"));
    p = T(-ctx.attr<double>("lr_power"));
    TROUPE_RETURN_IF_ERROR(
        slot(u, ctx, "Ftrl_accum", ctx.attr<double>("initial_accumulator_value"), &accum));
    return slot(u, ctx, "Ftrl_linear", 0, &linear);
  }
  void apply(Update<T>& u, int64_t at, ConstVecMap<T> g) {
    T* a = accum.data<T>() + at;
    T* lin = linear.data<T>() + at;
    T* w = u.var.template data<T>() + at;
    for (int64_t i = 0; i < g.size(); ++i) {
      const T a_new = a[i] + g[i] * g[i];
      const T sigma = (std::pow(a_new, p) - std::pow(a[i], p)) / u.lr;
      lin[i] += g[i] - sigma * w[i];
      const T quadratic = std::pow(a_new, p) / u.lr + T(2) * l2;
      w[i] = std::abs(lin[i]) > l1 ? ((lin[i] > 0 ? l1 : -l1) - lin[i]) / quadratic : T(0);
      a[i] = a_new;
    }
  }
};

// Apply<Rule>: inputs grad (shaped like the variable) and lr.
template <template <class> class Rule>
struct DenseApply {
  template <class T>
  struct Kernel {
    static Status compute(KernelContext& ctx) {
      Update<T> u;
      TROUPE_RETURN_IF_ERROR(begin_update(ctx, ctx.input(0).shape(), 1, &u));
      Rule<T> rule;
      TROUPE_RETURN_IF_ERROR(rule.init(ctx, u));
      rule.apply(u, 0, flat_in<T>(ctx.input(0)));
      ctx.set_output(0, u.var);
      return runtime::ok_status();
    }
  };
};

// SparseApply<Rule>: inputs values, indices and lr; values holds one row of the variable (its
// elements past dimension 0) per index. Rows named more than once get the sum of their values,
// as TF deduplicates IndexedSlices before an update.
template <template <class> class Rule>
struct SparseApply {
  template <class T>
  struct Kernel {
    static Status compute(KernelContext& ctx) {
      const Shape& shape = ctx.attr<Shape>("shape");
      const Tensor& values = ctx.input(0);
      const Tensor& indices = ctx.input(1);
      if (shape.rank() < 1) {
        return runtime::invalid_argument("variable '", var_name(ctx), "' of shape ", shape,
                                         " has no rows to update");
      }
      const int64_t rows = shape.dim(0);
      const int64_t row = rows == 0 ? 0 : shape.num_elements() / rows;
      const int64_t k = indices.num_elements();
      if (values.num_elements() != k * row) {
        return runtime::invalid_argument("values of shape ", values.shape(), " for ", k,
                                         " rows of variable '", var_name(ctx), "' ", shape);
      }
      std::vector<int64_t> at;
      TROUPE_RETURN_IF_ERROR(rows_of(ctx, indices, rows, &at));
      std::vector<std::pair<int64_t, int64_t>> order(k);  // (row index, position in values)
      for (int64_t j = 0; j < k; ++j) order[j] = {at[j], j};
      std::sort(order.begin(), order.end());
      Update<T> u;
      TROUPE_RETURN_IF_ERROR(begin_update(ctx, shape, 2, &u));
      Rule<T> rule;
      TROUPE_RETURN_IF_ERROR(rule.init(ctx, u));
      ArrayX<T> sum(row);
      for (int64_t j = 0; j < k;) {
        const int64_t i = order[j].first;
        sum = ConstVecMap<T>(values.data<T>() + order[j].second * row, row);
        for (++j; j < k && order[j].first == i; ++j) {
          sum += ConstVecMap<T>(values.data<T>() + order[j].second * row, row);
        }
        rule.apply(u, i * row, ConstVecMap<T>(sum.data(), row));
      }
      ctx.set_output(0, u.var);
      return runtime::ok_status();
    }
  };
};

template <template <class> class Rule>
void add_rule(runtime::KernelRegistry& registry, const std::string& name) {
  registry.add_typed<DenseApply<Rule>::template Kernel, float, double>("Apply" + name,
                                                                       DeviceType::kCpu);
  registry.add_typed<SparseApply<Rule>::template Kernel, float, double>("SparseApply" + name,
                                                                        DeviceType::kCpu);
}

// SyncReplicasBarrier in one process: no other replica to wait for.
template <class T>
struct PassStepKernel {
  static Status compute(KernelContext& ctx) {
    ctx.set_output(0, ctx.input(0));
    return runtime::ok_status();
  }
};

}  // namespace

runtime::Result<Tensor> read_declared_variable(const KernelContext& ctx) {
  VariableStore* store;
  TROUPE_RETURN_IF_ERROR(store_of(ctx, &store));
  TROUPE_ASSIGN_OR_RETURN(Tensor value, store->read(var_name(ctx)));
  const DType dtype = ctx.attr<DType>("dtype");
  const Shape& shape = ctx.attr<Shape>("shape");
  if (value.dtype() != dtype || !value.shape().compatible_with(shape)) {
    return runtime::failed_precondition("variable '", var_name(ctx), "' holds ",
                                        runtime::dtype_name(value.dtype()), value.shape(),
                                        ", the graph declares ", runtime::dtype_name(dtype), shape);
  }
  return value;
}

TROUPE_REGISTER_KERNELS(state_cpu) {
  constexpr DeviceType kCpu = DeviceType::kCpu;
  for (const char* op : {"Variable", "ReadVariable"})
    registry.add_typed<VariableKernel, float, double, int32_t, int64_t>(op, kCpu);
  registry.add_typed<AssignKernel, float, double, int32_t, int64_t>("Assign", kCpu);
  registry.add_typed<AssignUpdate<1>::Kernel, float, double, int32_t, int64_t>("AssignAdd", kCpu);
  registry.add_typed<AssignUpdate<-1>::Kernel, float, double, int32_t, int64_t>("AssignSub", kCpu);
  // Integer division by zero would end the process: ScatterDiv divides floats only.
  registry.add_typed<ScatterUpdate<Combine::kUpdate>::Kernel, float, double, int32_t, int64_t>(
      "ScatterUpdate", kCpu);
  registry.add_typed<ScatterUpdate<Combine::kAdd>::Kernel, float, double, int32_t, int64_t>(
      "ScatterAdd", kCpu);
  registry.add_typed<ScatterUpdate<Combine::kSub>::Kernel, float, double, int32_t, int64_t>(
      "ScatterSub", kCpu);
  registry.add_typed<ScatterUpdate<Combine::kMul>::Kernel, float, double, int32_t, int64_t>(
      "ScatterMul", kCpu);
  registry.add_typed<ScatterUpdate<Combine::kDiv>::Kernel, float, double>("ScatterDiv", kCpu);
  registry.add_typed<ScatterUpdate<Combine::kMin>::Kernel, float, double, int32_t, int64_t>(
      "ScatterMin", kCpu);
  registry.add_typed<ScatterUpdate<Combine::kMax>::Kernel, float, double, int32_t, int64_t>(
      "ScatterMax", kCpu);
  add_rule<SgdRule>(registry, "GradientDescent");
  add_rule<MomentumRule>(registry, "Momentum");
  add_rule<AdagradRule>(registry, "Adagrad");
  add_rule<AdamRule>(registry, "Adam");
  add_rule<RMSPropRule>(registry, "RMSProp");
  add_rule<FtrlRule>(registry, "Ftrl");
  registry.add_typed<PassStepKernel, int64_t>("SyncReplicasBarrier", kCpu);
}

}  // namespace troupe::kernels::cpu
