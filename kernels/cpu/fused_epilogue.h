// The epilogue of the fused products (_FusedMatMul, _FusedConv2D): the bias along the last dim,
// then the activation, in one pass over a block of output while it is still in cache.
//
//   TROUPE_ASSIGN_OR_RETURN(bool relu, fused_relu(ctx));
//   TROUPE_RETURN_IF_ERROR(check_bias(bias, n));
//   ...product into y...
//   add_bias_and_activate(y, rows, n, bias.data<T>(), relu);   // y[rows, n]
//
// Each value is computed as the unfused BiasAdd and Relu kernels compute it (an add, then a max),
// so a fused plan gives the same bits as the chain it replaces. Stateless; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/cpu/eigen_util.h"
#include "runtime/kernel_registry.h"

namespace troupe::kernels::cpu {

// The node's "activation" attribute: true for "Relu", false for none, an error otherwise.
inline runtime::Result<bool> fused_relu(const runtime::KernelContext& ctx) {
  const std::string& activation = ctx.attr<std::string>("activation");
  if (activation.empty()) return false;
  if (activation == "Relu") return true;
  return runtime::invalid_argument("unknown activation \"", activation, "\"");
}

// The bias must be a vector of the product's `n` columns (channels, for a convolution).
inline runtime::Status check_bias(const runtime::Tensor& bias, int64_t n) {
  if (bias.rank() == 1 && bias.dim(0) == n) return runtime::ok_status();
  return runtime::invalid_argument("bias of shape ", bias.shape(), " for a product with ", n,
                                   " columns");
}

template <class T>
void add_bias_and_activate(T* y, int64_t rows, int64_t n, const T* bias, bool relu) {
  MatMap<T> out(y, rows, n);
  const auto b = ConstMatMap<T>(bias, 1, n).row(0);
  if (relu) {
    out = (out.rowwise() + b).cwiseMax(T(0));
  } else {
    out.rowwise() += b;
  }
}

}  // namespace troupe::kernels::cpu
