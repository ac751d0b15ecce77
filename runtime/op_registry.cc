#include "runtime/op_registry.h"

#include <map>
#include <memory>
#include <mutex>

namespace troupe::runtime {

namespace {
struct Registry {
  std::mutex mu;
  std::map<std::string, std::unique_ptr<OpDef>> ops;
};
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}
}  // namespace

void InferenceContext::set_output(int i, DType dtype, Shape shape) {
  if (static_cast<int>(out_dtypes_.size()) <= i) {
    out_dtypes_.resize(i + 1, DType::kInvalid);
    out_shapes_.resize(i + 1);
  }
  out_dtypes_[i] = dtype;
  out_shapes_[i] = std::move(shape);
}

Status InferenceContext::expect_floating(int i) const {
  if (is_floating(in_dtypes_[i])) return ok_status();
  return error("input ", i, " must be float32 or float64, got ", dtype_name(in_dtypes_[i]));
}

Status InferenceContext::expect_same_dtype(int i, int j) const {
  if (in_dtypes_[i] == in_dtypes_[j]) return ok_status();
  return error("inputs ", i, " and ", j, " must have the same dtype, got ",
               dtype_name(in_dtypes_[i]), " and ", dtype_name(in_dtypes_[j]));
}

Status InferenceContext::expect_rank(int i, int rank) const {
  const Shape& s = in_shapes_[i];
  if (!s.rank_known() || s.rank() == rank) return ok_status();
  return error("input ", i, " must have rank ", rank, ", got shape ", s);
}

OpDefBuilder&& OpDefBuilder::input(const char* name) && {
  def_.inputs.push_back(name);
  def_.min_inputs = static_cast<int>(def_.inputs.size());
  return std::move(*this);
}
OpDefBuilder&& OpDefBuilder::variadic_input(const char* name, int min) && {
  def_.inputs.push_back(name);
  def_.variadic = true;
  def_.min_inputs = static_cast<int>(def_.inputs.size()) - 1 + min;
  return std::move(*this);
}
OpDefBuilder&& OpDefBuilder::output(const char* name) && {
  def_.outputs.push_back(name);
  return std::move(*this);
}
OpDefBuilder&& OpDefBuilder::attr(const char* name, AttrValue default_value) && {
  def_.attr_defaults[name] = std::move(default_value);
  return std::move(*this);
}
OpDefBuilder&& OpDefBuilder::attrs(const AttrMap& defaults) && {
  for (const auto& [name, value] : defaults) def_.attr_defaults[name] = value;
  return std::move(*this);
}
OpDefBuilder&& OpDefBuilder::shape_fn(ShapeFn fn) && {
  def_.shape_fn = std::move(fn);
  return std::move(*this);
}
OpDefBuilder&& OpDefBuilder::gradient(GradFn fn) && {
  def_.grad_fn = std::move(fn);
  return std::move(*this);
}
OpDefBuilder&& OpDefBuilder::no_gradient() && {
  def_.no_gradient = true;
  return std::move(*this);
}
OpDefBuilder&& OpDefBuilder::reads_variable() && {
  def_.variable_access = VariableAccess::kRead;
  return std::move(*this);
}
OpDefBuilder&& OpDefBuilder::writes_variable() && {
  def_.variable_access = VariableAccess::kWrite;
  return std::move(*this);
}
OpDefBuilder&& OpDefBuilder::kernel_dtype_from_input(int i) && {
  def_.kernel_dtype_input = i;
  return std::move(*this);
}
OpDefBuilder&& OpDefBuilder::doc(const char* text) && {
  def_.doc = text;
  return std::move(*this);
}

OpRegistrar::OpRegistrar(OpDefBuilder&& builder) {
  auto def = std::make_unique<OpDef>(std::move(builder).release());
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  assert(!r.ops.count(def->name) && "op registered twice");
  std::string name = def->name;
  r.ops[name] = std::move(def);
}

const OpDef* find_op(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.ops.find(name);
  return it == r.ops.end() ? nullptr : it->second.get();
}

std::vector<const OpDef*> registered_ops() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<const OpDef*> out;
  for (auto& [name, def] : r.ops) out.push_back(def.get());
  return out;
}

}  // namespace troupe::runtime
