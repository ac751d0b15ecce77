// What a CPU kernel file starts from: the kernel registry, and in troupe::kernels::cpu the
// runtime names every kernel is written with (its context, tensors, shapes, dtypes, statuses and
// the device it registers for), declared once rather than at the top of each file.
//
//   #include "kernels/cpu/kernel.h"
//   namespace troupe::kernels::cpu {
//   Status negate(KernelContext& ctx) { ... }
//   TROUPE_REGISTER_KERNELS(my_cpu) { registry.add("Negate", DeviceType::kCpu, ...); }
//   }
#pragma once

#include "runtime/kernel_registry.h"

namespace troupe::kernels::cpu {

using runtime::DeviceType;
using runtime::DType;
using runtime::KernelContext;
using runtime::Shape;
using runtime::Status;
using runtime::Tensor;

}  // namespace troupe::kernels::cpu
