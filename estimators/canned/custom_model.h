// A model_fn of your own as a Model (model.h): scikit-learn's protocol over an Estimator, so that
// GridSearchCV, RandomizedSearchCV, cross_val_score and Pipeline search and score it as they do
// a canned model. Its params are the model_fn's (handed to it as Params, as text) and FitParams'
// (batch_size, epochs, shuffle, warm_start).
//
//   CustomModel m(my_model_fn, {.classifier = true,
//                               .params = {{"learning_rate", 0.05}, {"hidden", int64_t{32}}}});
//   GridSearchCV search(m, {{{"learning_rate", {0.01, 0.1}}}}, {.cv = {.scoring = "f1_macro"}});
//
// fit(x, y) trains a new Estimator on feature "x" and label "y" (warm_start: the same one on);
// predict returns the model_fn's `prediction_key` prediction ("classes" for a classifier,
// "predictions" for a regressor unless told), a regressor's [n, 1] as [n].
#pragma once

#include <memory>
#include <string>

#include "estimators/canned/model.h"

namespace troupe::estimators {

struct CustomModelOptions {
  bool classifier = true;
  ParamMap params;             // the model_fn's, by name: the names a search may vary
  std::string prediction_key;  // "": classes or predictions
  FitParams fit;
  std::string name = "CustomModel";
};

class CustomModel final : public Model {
 public:
  CustomModel(ModelFn model_fn, CustomModelOptions options, RunConfig config = {});

  std::string name() const override { return options_.name; }
  bool is_classifier() const override { return options_.classifier; }
  runtime::Status fit(const runtime::Tensor& x, const runtime::Tensor& y) override;
  runtime::Result<runtime::Tensor> predict(const runtime::Tensor& x) override;
  runtime::Result<double> score(const runtime::Tensor& x, const runtime::Tensor& y) override;
  ParamMap get_params() const override;
  // A name that is neither the model_fn's nor FitParams' is an error naming it; a value is
  // converted to the kind the param has (2 for 2.0, "0.1" refused for a number).
  runtime::Status set_params(const ParamMap& params) override;
  std::unique_ptr<Model> clone() const override;
  // Null before fit.
  Estimator* estimator() { return estimator_.get(); }

 private:
  ModelFn model_fn_;
  CustomModelOptions options_;
  RunConfig config_;
  std::unique_ptr<Estimator> estimator_;
};

}  // namespace troupe::estimators
