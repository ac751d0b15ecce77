// The value of the variable a node reads (its "var", "dtype" and "shape" attributes), shared by
// the kernels that read one: Variable, and VariableGather, which gathers its rows.
//
//   TROUPE_ASSIGN_OR_RETURN(Tensor value, read_declared_variable(ctx));
//
// A store restored from a file or filled by a peer may hold another dtype or shape than the
// graph declares: that is a FailedPrecondition naming the variable, never a kernel reading past
// a buffer. Thread-safe as the store is.
#pragma once

#include "runtime/kernel_registry.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

namespace troupe::kernels::cpu {

runtime::Result<runtime::Tensor> read_declared_variable(const runtime::KernelContext& ctx);

}  // namespace troupe::kernels::cpu
