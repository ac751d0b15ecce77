#include "runtime/variable_store.h"

namespace troupe::runtime {

Result<Tensor> VariableStore::read(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = values_.find(name);
  if (it == values_.end()) {
    return failed_precondition(
        "variable '", name, "' is not initialized (run the initializer or restore a checkpoint)");
  }
  return it->second;
}

std::optional<int64_t> int64_scalar(const Result<Tensor>& t) {
  if (!t.ok() || t->dtype() != DType::kInt64 || t->num_elements() != 1) return std::nullopt;
  return t->data<int64_t>()[0];
}

std::optional<int64_t> VariableStore::read_int64_scalar(const std::string& name) const {
  return int64_scalar(read(name));
}

bool VariableStore::contains(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  return values_.count(name) > 0;
}

void VariableStore::assign(const std::string& name, Tensor value) {
  std::lock_guard<std::mutex> lock(mu_);
  values_[name] = std::move(value);
}

void VariableStore::assign_local(const std::string& name, Tensor value) {
  std::lock_guard<std::mutex> lock(mu_);
  values_[name] = std::move(value);
  local_.insert(name);
}

Result<Tensor> VariableStore::for_update(const std::string& name, DType dtype, const Shape& shape) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = values_.find(name);
  if (it == values_.end()) {
    return failed_precondition("variable '", name, "' is not initialized");
  }
  Tensor& value = it->second;
  if (value.dtype() != dtype || value.shape() != shape) {
    return failed_precondition("variable '", name, "' holds ", dtype_name(value.dtype()),
                               value.shape(), ", the update is for ", dtype_name(dtype), shape);
  }
  // One reference is the store's own; any other is a reader that must keep the old value.
  if (value.buffer_use_count() > 1 || value.buffer()->borrowed()) value = value.clone();
  return value;
}

Result<Tensor> VariableStore::slot(const std::string& name, const std::string& slot,
                                   double initial_value, const Shape* shape) {
  const std::string key = name + "/" + slot;
  DType dtype;
  Shape expected;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto var = values_.find(name);
    if (var == values_.end()) {
      return failed_precondition("variable '", name, "' is not initialized");
    }
    dtype = var->second.dtype();
    expected = shape ? *shape : var->second.shape();
    if (!values_.count(key)) {
      Tensor t(dtype, expected);
      if (initial_value != 0) t.fill(initial_value);
      values_[key] = t;
    }
  }
  return for_update(key, dtype, expected);
}

std::vector<std::string> VariableStore::names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (auto& [k, v] : values_) {
    if (!local_.count(k)) out.push_back(k);
  }
  return out;
}

void VariableStore::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  values_.clear();
  local_.clear();
}

}  // namespace troupe::runtime
