// The kernel registry: implementations of ops, keyed by (op, device type, dtype). kernels/
// registers them in groups with one macro; executors and node actors find them here only.
//
//   template <class T> struct SquareKernel {
//     static Status compute(KernelContext& ctx) {
//       Tensor* y;
//       TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, ctx.input(0).shape(), &y));
//       ...
//     }
//   };
//   TROUPE_REGISTER_KERNELS(square_cpu) {
//     registry.add_typed<SquareKernel, float, double>("Square", DeviceType::kCpu);
//   }
//
// Registration happens during static initialisation; afterwards lookups are thread-safe.
// A kernel runs on one thread at a time per node; it may be called again for the next step.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/device.h"
#include "runtime/graph.h"
#include "runtime/status.h"
#include "runtime/tensor.h"
#include "runtime/variable_store.h"

namespace troupe::runtime {

// State that lasts one run: the stacks on which a while loop pushes, iteration by iteration,
// the values its gradient pops in reverse (ops/control_flow_ops.h), by stack name.
using RunStacks = std::map<std::string, std::vector<Tensor>>;

// What a kernel sees for one execution of its node. The caller owns it and may reuse it.
class KernelContext {
 public:
  KernelContext(const Node& node, Allocator* allocator, VariableStore* variables)
      : node_(&node), allocator_(allocator), variables_(variables) {
    outputs_.resize(node.num_outputs());
  }

  const Node& node() const { return *node_; }
  template <class T>
  const T& attr(const std::string& name) const {
    return node_->attr<T>(name);
  }

  std::vector<Tensor>& inputs() { return inputs_; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  const Tensor& input(int i) const { return inputs_[i]; }
  // True when input i's buffer is held by nobody else, so the kernel may write into it.
  bool input_is_exclusive(int i) const { return inputs_[i].exclusively_owned(); }

  Status allocate_output(int i, const Shape& shape, Tensor** out);
  void set_output(int i, Tensor t) { outputs_[i] = std::move(t); }
  std::vector<Tensor>& outputs() { return outputs_; }

  Allocator* allocator() const { return allocator_; }
  // Variables of the graph; nullptr for executors without state.
  VariableStore* variables() const { return variables_; }
  // How many times this node ran before, in this executor: random kernels draw a new stream per
  // execution and stay reproducible for a fixed seed.
  uint64_t invocation() const { return invocation_; }
  void set_invocation(uint64_t n) { invocation_ = n; }
  // The run's stacks; nullptr where runs have none (runs without control flow).
  RunStacks* stacks() const { return stacks_; }
  void set_stacks(RunStacks* stacks) { stacks_ = stacks; }

 private:
  const Node* node_;
  Allocator* allocator_;
  VariableStore* variables_;
  uint64_t invocation_ = 0;
  RunStacks* stacks_ = nullptr;
  std::vector<Tensor> inputs_;
  std::vector<Tensor> outputs_;
};

using KernelFn = Status (*)(KernelContext&);

class KernelRegistry {
 public:
  void add(const std::string& op, DeviceType device, DType dtype, KernelFn fn);
  template <template <class> class Kernel, class... Ts>
  void add_typed(const std::string& op, DeviceType device) {
    (add(op, device, dtype_of<Ts>(), &Kernel<Ts>::compute), ...);
  }
  KernelFn find(const std::string& op, DeviceType device, DType dtype) const;
  bool has_any(const std::string& op, DeviceType device) const;
  std::vector<DType> dtypes(const std::string& op, DeviceType device) const;
  struct Entry {
    std::string op;
    DeviceType device;
    DType dtype;
    KernelFn fn;
  };
  const std::vector<Entry>& entries() const { return entries_; }

  // How many threads big kernels may use (RunConfig::threads): the kernel library that keeps
  // such threads (OpenBLAS) registers the setter. False when none did.
  void set_threads_fn(std::function<void(int)> fn) { threads_fn_ = std::move(fn); }
  bool set_compute_threads(int n) const {
    if (!threads_fn_ || n < 1) return false;
    threads_fn_(n);
    return true;
  }

 private:
  std::vector<Entry> entries_;
  std::function<void(int)> threads_fn_;
};

KernelRegistry& kernel_registry();

// The kernel that runs `node` on `device`, or an error that names the node and its dtype.
Result<KernelFn> find_kernel(const Node& node, DeviceType device);

struct KernelGroupRegistrar {
  explicit KernelGroupRegistrar(void (*fn)(KernelRegistry&)) { fn(kernel_registry()); }
};

// Runs one node's kernel on ctx.inputs(); errors come back naming the node and its op, and the
// nodes a fused node stands for (its "fused_from" attribute).
Status run_kernel(KernelFn fn, KernelContext& ctx);

}  // namespace troupe::runtime

// Defines a group of kernel registrations: a function body with `registry` in scope.
#define TROUPE_REGISTER_KERNELS(Group)                                                   \
  static void TROUPE_CONCAT(troupe_kernels_, Group)(::troupe::runtime::KernelRegistry&); \
  static ::troupe::runtime::KernelGroupRegistrar TROUPE_CONCAT(                          \
      troupe_kreg_, Group)(&TROUPE_CONCAT(troupe_kernels_, Group));                      \
  static void TROUPE_CONCAT(troupe_kernels_, Group)(::troupe::runtime::KernelRegistry & registry)
