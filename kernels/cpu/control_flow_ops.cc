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

Status control_trigger(KernelContext&) { return runtime::ok_status(); }

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

// A while loop's gradient's stacks live for one run (KernelContext::stacks).
Status stack_push(KernelContext& ctx) {
  if (!ctx.stacks()) {
    return runtime::failed_precondition("StackPush '", ctx.node().name,
                                        "': runs only inside a while loop, in runtime::Executor");
  }
  (*ctx.stacks())[ctx.attr<std::string>("stack")].push_back(ctx.input(0));
  ctx.set_output(0, ctx.input(0));
  return runtime::ok_status();
}

Status stack_pop(KernelContext& ctx) {
  const std::string& name = ctx.attr<std::string>("stack");
  std::vector<Tensor>* stack = nullptr;
  if (ctx.stacks()) {
    auto it = ctx.stacks()->find(name);
    if (it != ctx.stacks()->end() && !it->second.empty()) stack = &it->second;
  }
  if (!stack) {
    return runtime::internal_error("StackPop '", ctx.node().name, "': stack '", name,
                                   "' is empty: more pops than the forward loop pushed");
  }
  ctx.set_output(0, std::move(stack->back()));
  stack->pop_back();
  return runtime::ok_status();
}

}  // namespace

TROUPE_REGISTER_KERNELS(control_flow_cpu) {
  constexpr DeviceType kCpu = DeviceType::kCpu;
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64, DType::kUInt8,
                  DType::kBool, DType::kString}) {
    for (const char* op : {"Enter", "Exit", "NextIteration"}) registry.add(op, kCpu, t, forward);
    registry.add("Switch", kCpu, t, switch_kernel);
    registry.add("Merge", kCpu, t, merge_kernel);
    registry.add("StackPush", kCpu, t, stack_push);
    registry.add("StackPop", kCpu, t, stack_pop);
  }
  registry.add("LoopCond", kCpu, DType::kBool, forward);
  registry.add("ControlTrigger", kCpu, DType::kInvalid, control_trigger);
}

}  // namespace troupe::kernels::cpu
