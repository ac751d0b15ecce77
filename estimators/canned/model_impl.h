// The members of CannedModel (model.h), for the .cc file of each canned model to instantiate
// its own (`template class CannedModel<DNNOptions, Task::kClassifier>;`). Include nowhere else.
#pragma once

#include <algorithm>
#include <cmath>

#include "estimators/canned/model.h"
#include "estimators/metrics.h"

namespace troupe::estimators {

template <class Options, Task kTask>
CannedModel<Options, kTask>::CannedModel(Options options, RunConfig config)
    : options_(std::move(options)),
      config_(std::move(config)),
      estimator_(std::make_unique<Estimator>(options_.model_fn(kTask), config_)) {}

template <class Options, Task kTask>
std::string CannedModel<Options, kTask>::name() const {
  return model_name<Options>(kTask);
}

template <class Options, Task kTask>
ParamMap CannedModel<Options, kTask>::get_params() const {
  return params_of(options_, kTask);
}

template <class Options, Task kTask>
runtime::Status CannedModel<Options, kTask>::set_params(const ParamMap& params) {
  TROUPE_RETURN_IF_ERROR(assign_params(options_, kTask, params, name()));
  estimator_->set_model_fn(options_.model_fn(kTask));
  return runtime::ok_status();
}

template <class Options, Task kTask>
runtime::Status CannedModel<Options, kTask>::set_params_text(const TextParams& params) {
  TROUPE_RETURN_IF_ERROR(assign_params(options_, kTask, params, name()));
  estimator_->set_model_fn(options_.model_fn(kTask));
  return runtime::ok_status();
}

template <class Options, Task kTask>
std::unique_ptr<Model> CannedModel<Options, kTask>::clone() const {
  RunConfig in_memory = config_;
  in_memory.model_dir.clear();
  return std::make_unique<CannedModel>(options_, in_memory);
}

template <class Options, Task kTask>
runtime::Status CannedModel<Options, kTask>::check_labels(const runtime::Tensor& x,
                                                          const runtime::Tensor& y) const {
  if (x.rank() < 1 || y.rank() < 1 || x.dim(0) != y.dim(0)) {
    return runtime::invalid_argument(name(), ".fit: ", x.rank() ? x.dim(0) : 0, " examples but ",
                                     y.rank() ? y.dim(0) : 0, " labels");
  }
  if (x.dim(0) == 0) return runtime::invalid_argument(name(), ".fit: no examples");
  if (kTask != Task::kClassifier) return runtime::ok_status();
  const std::vector<double> labels = as_doubles(y);
  for (size_t i = 0; i < labels.size(); ++i) {
    const double v = labels[i];
    if (!(v >= 0 && v < static_cast<double>(options_.n_classes)) || v != std::floor(v)) {
      return runtime::invalid_argument(name(), ".fit: label ", v, " of row ", i,
                                       " is not a class of n_classes ", options_.n_classes);
    }
  }
  return runtime::ok_status();
}

template <class Options, Task kTask>
runtime::Status CannedModel<Options, kTask>::fit(const runtime::Tensor& x,
                                                 const runtime::Tensor& y) {
  TROUPE_RETURN_IF_ERROR(check_labels(x, y));
  if (!options_.fit.warm_start) {
    estimator_.reset();
    estimator_ = std::make_unique<Estimator>(options_.model_fn(kTask), config_);
  }
  TROUPE_ASSIGN_OR_RETURN(input::Dataset d, options_.fit.dataset(x, y, config_.tf_random_seed));
  return estimator_->train(d).status();
}

template <class Options, Task kTask>
runtime::Result<TrainResult> CannedModel<Options, kTask>::fit(const input::Dataset& data,
                                                              TrainOptions options) {
  return estimator_->train(data, std::move(options));
}

template <class Options, Task kTask>
runtime::Result<Metrics> CannedModel<Options, kTask>::evaluate(const input::Dataset& data,
                                                               EvalOptions options) {
  return estimator_->evaluate(data, std::move(options));
}

template <class Options, Task kTask>
runtime::Result<runtime::Tensor> CannedModel<Options, kTask>::predict(const runtime::Tensor& x) {
  if (kTask == Task::kClassifier) return predict_rows(*estimator_, x, "classes");
  TROUPE_ASSIGN_OR_RETURN(runtime::Tensor values, predict_rows(*estimator_, x, "predictions"));
  if (values.rank() == 2 && values.dim(1) == 1) return values.reshaped({values.dim(0)});
  return values;
}

template <class Options, Task kTask>
runtime::Result<runtime::Tensor> CannedModel<Options, kTask>::predict_proba(
    const runtime::Tensor& x) {
  if (kTask != Task::kClassifier) {
    return runtime::invalid_argument(name(), " is a regressor: it has no predict_proba");
  }
  return predict_rows(*estimator_, x, "probabilities");
}

template <class Options, Task kTask>
runtime::Result<double> CannedModel<Options, kTask>::score(const runtime::Tensor& x,
                                                           const runtime::Tensor& y) {
  TROUPE_ASSIGN_OR_RETURN(runtime::Tensor predicted, predict(x));
  return kTask == Task::kClassifier ? accuracy_score(y, predicted) : r2_score(y, predicted);
}

}  // namespace troupe::estimators
