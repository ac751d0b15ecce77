#include "estimators/best_value.h"

namespace troupe::estimators {

bool BestValue::offer(double value, int64_t step, const runtime::VariableStore& variables) {
  const bool better = !has_best_ || (options_.maximize ? value > best_ + options_.min_delta
                                                       : value < best_ - options_.min_delta);
  if (!better) {
    ++waited_;
    return false;
  }
  has_best_ = true;
  best_ = value;
  best_step_ = step;
  waited_ = 0;
  weights_.clear();
  for (const std::string& name : variables.names()) {
    auto t = variables.read(name);
    if (t.ok() && name != "global_step") weights_[name] = *t;
  }
  return true;
}

bool BestValue::restore(runtime::VariableStore& variables) const {
  if (weights_.empty()) return false;
  for (const auto& [name, t] : weights_) variables.assign(name, t);
  return true;
}

}  // namespace troupe::estimators
