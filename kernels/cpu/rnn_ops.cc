// LSTMBlockCell and its gradient (ops/rnn.h's fused LSTM step): one GEMM for the gates, then one
// pass over them for the activations and the new state, instead of a node for each.
#include <cmath>

#include "kernels/cpu/eigen_util.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernel.h"

namespace troupe::kernels::cpu {

namespace {

// x [batch, in], cs_prev and h_prev [batch, units], w [in + units, 4 units], b [4 units].
template <class T>
struct LstmBlockKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& cs_prev = ctx.input(1);
    const Tensor& h_prev = ctx.input(2);
    const Tensor& w = ctx.input(3);
    const Tensor& bias = ctx.input(4);
    if (x.rank() != 2 || w.rank() != 2 || w.dim(1) % 4 != 0) {
      return runtime::invalid_argument("LSTMBlockCell '", ctx.node().name, "': x ", x.shape(),
                                       " and w ", w.shape(),
                                       " are not [batch, in] and [in + "
                                       "units, 4 units]");
    }
    const int64_t batch = x.dim(0), in = x.dim(1), units = w.dim(1) / 4;
    const Shape state{batch, units};
    if (w.dim(0) != in + units || cs_prev.shape() != state || h_prev.shape() != state ||
        bias.num_elements() != 4 * units) {
      return runtime::invalid_argument("LSTMBlockCell '", ctx.node().name, "': x ", x.shape(),
                                       ", cs_prev ", cs_prev.shape(), ", h_prev ", h_prev.shape(),
                                       ", w ", w.shape(), " and b ", bias.shape(),
                                       " do not fit together");
    }
    // [x, h_prev] · w as x · w[:in] + h_prev · w[in:], into a buffer of the step's allocator
    // (no concatenated copy, and no fresh pages for a buffer of this size each step).
    runtime::Allocator* allocator = ctx.allocator() ? ctx.allocator() : runtime::cpu_allocator();
    TROUPE_ASSIGN_OR_RETURN(Tensor gates_tensor,
                            Tensor::empty(x.dtype(), Shape{batch, 4 * units}, allocator));
    T* gates_data = gates_tensor.data<T>();
    gemm<T>(false, false, batch, 4 * units, in, x.data<T>(), w.data<T>(), gates_data);
    gemm<T>(false, false, batch, 4 * units, units, h_prev.data<T>(), w.data<T>() + in * 4 * units,
            gates_data, T(1));
    Tensor* out[7];
    for (int k = 0; k < 7; ++k) TROUPE_RETURN_IF_ERROR(ctx.allocate_output(k, state, &out[k]));
    const T forget_bias = static_cast<T>(ctx.attr<double>("forget_bias"));
    const ConstVecMap<T> b(bias.data<T>(), 4 * units);
    auto sigmoid = [](const auto& v) { return (T(1) + (-v).exp()).inverse(); };
    // A row at a time, each gate a vector Eigen evaluates with its vectorized exp and tanh.
    for (int64_t r = 0; r < batch; ++r) {
      const T* g = gates_data + r * 4 * units;
      auto gate = [&](int k) {
        return ConstVecMap<T>(g + k * units, units) + b.segment(k * units, units);
      };
      auto row = [&](int k) { return VecMap<T>(out[k]->data<T>() + r * units, units); };
      row(0) = sigmoid(gate(0));                // i
      row(4) = gate(1).tanh();                  // ci
      row(2) = sigmoid(gate(2) + forget_bias);  // f
      row(3) = sigmoid(gate(3));                // o
      row(1) =
          row(2) * ConstVecMap<T>(cs_prev.data<T>() + r * units, units) + row(0) * row(4);  // cs
      row(5) = row(1).tanh();                                                               // co
      row(6) = row(3) * row(5);                                                             // h
    }
    return runtime::ok_status();
  }
};

// Inputs x, cs_prev, h_prev, w, i, cs, f, o, ci, co, cs_grad, h_grad: cs_prev's gradient and
// the gates' pre-activation gradients [batch, 4 units] in the order i, ci, f, o.
template <class T>
struct LstmBlockGradKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& cs_prev = ctx.input(1);
    const Shape& state = cs_prev.shape();
    for (int k = 4; k < 12; ++k) {
      if (ctx.input(k).shape() != state) {
        return runtime::invalid_argument("LSTMBlockCellGrad '", ctx.node().name, "': input ", k,
                                         " is ", ctx.input(k).shape(), ", not ", state);
      }
    }
    const int64_t batch = state.dim(0), units = state.dim(1);
    auto in = [&](int k) { return ctx.input(k).data<T>(); };
    const T *i = in(4), *f = in(6), *o = in(7), *ci = in(8), *co = in(9), *cs_grad = in(10),
            *h_grad = in(11), *c_prev = cs_prev.data<T>();
    Tensor *dc_prev, *dgates;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, state, &dc_prev));
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(1, Shape{batch, 4 * units}, &dgates));
    // A row at a time as Eigen vectors, so that the products vectorize.
    for (int64_t r = 0; r < batch; ++r) {
      auto row = [&](const T* p) { return ConstVecMap<T>(p + r * units, units); };
      T* d = dgates->data<T>() + r * 4 * units;
      auto part = [&](int k) { return VecMap<T>(d + k * units, units); };
      const ArrayX<T> dcs = row(h_grad) * row(o) * (T(1) - row(co).square()) + row(cs_grad);
      part(0) = dcs * row(ci) * row(i) * (T(1) - row(i));
      part(1) = dcs * row(i) * (T(1) - row(ci).square());
      part(2) = dcs * row(c_prev) * row(f) * (T(1) - row(f));
      part(3) = row(h_grad) * row(co) * row(o) * (T(1) - row(o));
      VecMap<T>(dc_prev->data<T>() + r * units, units) = dcs * row(f);
    }
    return runtime::ok_status();
  }
};

}  // namespace

TROUPE_REGISTER_KERNELS(rnn_cpu) {
  constexpr DeviceType kCpu = DeviceType::kCpu;
  registry.add_typed<LstmBlockKernel, float, double>("LSTMBlockCell", kCpu);
  registry.add_typed<LstmBlockGradKernel, float, double>("LSTMBlockCellGrad", kCpu);
}

}  // namespace troupe::kernels::cpu
