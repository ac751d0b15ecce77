// CPU kernels for the control-flow ops: they move tensors, never copy them. Which outputs are
// dead, and which frame and iteration a value goes to, is the executor's (runtime/executor.h):
// a Switch leaves the output its predicate does not pick unset, and a Merge is given its dead
// inputs unset.
#include "kernels/cpu/kernel.h"

namespace troupe::kernels::cpu {

namespace {

Status forward(KernelContext& ctx) {  // Enter, Exit, NextIteration, LoopCond
  ctx.set_output(0, ctx.input(0));
  return runtime::ok_status();
}

Status switch_kernel(KernelContext& ctx) {
  const Tensor& pred = ctx.input(1);
  if (pred.num_elements() != 1) {
    return runtime::invalid_argument("Switch '", ctx.node().name,
                                     "': the predicate must be a scalar, got ", pred.shape());
  }
  ctx.set_output(pred.data<bool>()[0] ? 1 : 0, ctx.input(0));
  return runtime::ok_status();
}

Status merge_kernel(KernelContext& ctx) {
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.input(i).valid()) continue;
    ctx.set_output(0, ctx.input(i));
    Tensor* index;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(1, Shape{}, &index));
    index->data<int32_t>()[0] = i;
    return runtime::ok_status();
  }
  return runtime::internal_error("Merge '", ctx.node().name, "': run with no live input");
}

}  // namespace

TROUPE_REGISTER_KERNELS(control_flow_cpu) {
  constexpr DeviceType kCpu = DeviceType::kCpu;
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64, DType::kUInt8,
                  DType::kBool, DType::kString}) {
    for (const char* op : {"Enter", "Exit", "NextIteration"}) registry.add(op, kCpu, t, forward);
    registry.add("Switch", kCpu, t, switch_kernel);
    registry.add("Merge", kCpu, t, merge_kernel);
  }
  registry.add("LoopCond", kCpu, DType::kBool, forward);
}

}  // namespace troupe::kernels::cpu
