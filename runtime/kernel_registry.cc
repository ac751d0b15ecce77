#include "runtime/kernel_registry.h"

#include <exception>
#include <variant>

namespace troupe::runtime {

Status KernelContext::allocate_output(int i, const Shape& shape, Tensor** out) {
  Result<Tensor> t = Tensor::empty(node_->output_dtypes[i], shape, allocator_);
  if (!t.ok()) return t.status();
  outputs_[i] = std::move(t).value();
  *out = &outputs_[i];
  return ok_status();
}

void KernelRegistry::add(const std::string& op, DeviceType device, DType dtype, KernelFn fn) {
  assert(!find(op, device, dtype) && "kernel registered twice");
  entries_.push_back(Entry{op, device, dtype, fn});
}

KernelFn KernelRegistry::find(const std::string& op, DeviceType device, DType dtype) const {
  for (const Entry& e : entries_) {
    if (e.device == device && e.dtype == dtype && e.op == op) return e.fn;
  }
  return nullptr;
}

bool KernelRegistry::has_any(const std::string& op, DeviceType device) const {
  for (const Entry& e : entries_) {
    if (e.device == device && e.op == op) return true;
  }
  return false;
}

std::vector<DType> KernelRegistry::dtypes(const std::string& op, DeviceType device) const {
  std::vector<DType> out;
  for (const Entry& e : entries_) {
    if (e.device == device && e.op == op) out.push_back(e.dtype);
  }
  return out;
}

KernelRegistry& kernel_registry() {
  static KernelRegistry* r = new KernelRegistry();
  return *r;
}

Result<KernelFn> find_kernel(const Node& node, DeviceType device) {
  KernelFn fn = kernel_registry().find(node.op, device, node.kernel_dtype);
  if (!fn) {
    return unimplemented(node.op, " '", node.name, "': no ", device_type_name(device),
                         " kernel for dtype ", dtype_name(node.kernel_dtype));
  }
  return fn;
}

Status run_kernel(KernelFn fn, KernelContext& ctx) {
  Status s;
  try {
    s = fn(ctx);
  } catch (const std::exception& e) {  // e.g. bad_alloc: never let it cross an actor boundary
    s = internal_error("kernel threw: ", e.what());
  }
  if (s.ok()) return s;
  const Node& n = ctx.node();
  std::string where = n.op + " '" + n.name + "'";
  // A node that a runtime put in place of others (runtime/remapper.h) names them: they are
  // what the user's graph has.
  auto from = n.attrs.find("fused_from");
  if (from != n.attrs.end() && std::holds_alternative<std::string>(from->second)) {
    const std::string& names = std::get<std::string>(from->second);
    if (!names.empty()) where += " (" + names + ", fused)";
  }
  return s.with_context(where);
}

}  // namespace troupe::runtime
