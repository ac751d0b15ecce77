#include "estimators/canned/custom_model.h"

#include <type_traits>
#include <variant>

namespace troupe::estimators {

CustomModel::CustomModel(ModelFn model_fn, CustomModelOptions options, RunConfig config)
    : model_fn_(std::move(model_fn)), options_(std::move(options)), config_(std::move(config)) {}

runtime::Status CustomModel::fit(const runtime::Tensor& x, const runtime::Tensor& y) {
  TROUPE_RETURN_IF_ERROR(options_.fit.validate(name()));
  if (!options_.fit.warm_start || !estimator_) {
    estimator_.reset();
    estimator_ = std::make_unique<Estimator>(model_fn_, config_, to_text(options_.params));
  }
  TROUPE_ASSIGN_OR_RETURN(input::Dataset d, options_.fit.dataset(x, y, config_.tf_random_seed));
  return estimator_->train(d).status();
}

runtime::Result<runtime::Tensor> CustomModel::predict(const runtime::Tensor& x) {
  if (!estimator_) return runtime::failed_precondition(name(), ": fit it before predict");
  const std::string key = !options_.prediction_key.empty() ? options_.prediction_key
                          : options_.classifier            ? "classes"
                                                           : "predictions";
  TROUPE_ASSIGN_OR_RETURN(runtime::Tensor values, predict_rows(*estimator_, x, key));
  if (!options_.classifier && values.rank() == 2 && values.dim(1) == 1) {
    return values.reshaped({values.dim(0)});
  }
  return values;
}

runtime::Result<double> CustomModel::score(const runtime::Tensor& x, const runtime::Tensor& y) {
  TROUPE_ASSIGN_OR_RETURN(runtime::Tensor predicted, predict(x));
  return options_.classifier ? accuracy_score(y, predicted) : r2_score(y, predicted);
}

ParamMap CustomModel::get_params() const {
  ParamMap p = options_.params;
  FitParams::fields(options_.fit, [&p](const char* name, const auto& field) {
    p[name] = params_detail::value_of(field);
  });
  return p;
}

runtime::Status CustomModel::set_params(const ParamMap& params) {
  CustomModelOptions next = options_;
  for (const auto& entry : params) {
    // Named, not structured bindings: a lambda may not capture those before C++20.
    const std::string& param = entry.first;
    const ParamValue& value = entry.second;
    bool fit_param = false, converted = false;
    FitParams::fields(next.fit, [&](const char* field_name, auto& field) {
      if (param != field_name) return;
      fit_param = true;
      converted = params_detail::assign(&field, value);
    });
    if (!fit_param) {
      auto it = next.params.find(param);
      if (it == next.params.end()) return params_detail::no_such_param(name(), param);
      // Kept in the kind it was given, so that the model_fn reads what it expects.
      std::visit(
          [&, &current = it->second](const auto& like) {
            auto kept = like;
            converted = params_detail::assign(&kept, value);
            if (converted) current = kept;
          },
          it->second);
    }
    if (!converted) return params_detail::bad_value(name(), param, to_text(value));
  }
  options_ = std::move(next);
  return runtime::ok_status();
}

std::unique_ptr<Model> CustomModel::clone() const {
  RunConfig config = config_;
  config.model_dir.clear();  // clones train side by side, each in memory
  return std::make_unique<CustomModel>(model_fn_, options_, config);
}

}  // namespace troupe::estimators
