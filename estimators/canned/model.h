// The scikit-learn protocol that model selection and pipelines compose (Model), and the one
// shape every canned model has (CannedModel): typed options in, an Estimator underneath.
//
//   std::unique_ptr<Model> m = std::make_unique<DNNClassifier>(DNNOptions{.n_classes = 3});
//   TROUPE_RETURN_IF_ERROR(m->fit(x, y));                 // x [n, ...] numbers, y [n]
//   Result<Tensor> classes = m->predict(x);
//   Result<double> accuracy = m->score(x, y);             // R^2 for regressors
//   ParamMap p = m->get_params();                         // {"learning_rate": 0.05, ...}
//   std::unique_ptr<Model> fresh = m->clone();            // same params, not fitted
//
// fit(x, y) trains a new model each call (unless the param warm_start is true), as
// scikit-learn's fit does; a RunConfig with a model_dir makes it continue from the checkpoint
// there, as tf.estimator's train does. The Estimator underneath (estimator()) trains, evaluates,
// predicts and exports datasets with every option Estimator has.
#pragma once

#include <memory>
#include <string>

#include "estimators/canned/params.h"
#include "estimators/estimator.h"

namespace troupe::estimators {

class Model {
 public:
  virtual ~Model() = default;
  virtual std::string name() const = 0;
  virtual bool is_classifier() const = 0;
  virtual runtime::Status fit(const runtime::Tensor& x, const runtime::Tensor& y) = 0;
  // Classes (int64 [n]) of a classifier; values of a regressor ([n], or [n, d] for d > 1).
  virtual runtime::Result<runtime::Tensor> predict(const runtime::Tensor& x) = 0;
  // Mean accuracy of a classifier, R^2 of a regressor, as scikit-learn's score.
  virtual runtime::Result<double> score(const runtime::Tensor& x, const runtime::Tensor& y) = 0;
  virtual ParamMap get_params() const = 0;
  // Unknown names and bad values are errors naming them; nothing changes then.
  virtual runtime::Status set_params(const ParamMap& params) = 0;
  // A model with the same params that has not been fitted (scikit-learn's clone); it trains in
  // memory (no model_dir), so that clones in parallel trials never share a directory.
  virtual std::unique_ptr<Model> clone() const = 0;
};

// The share of y_pred equal to y_true, and the coefficient of determination; both name a
// length mismatch.
runtime::Result<double> accuracy_score(const runtime::Tensor& y_true,
                                       const runtime::Tensor& y_pred);
runtime::Result<double> r2_score(const runtime::Tensor& y_true, const runtime::Tensor& y_pred);

// How fit(x, y) walks through in-memory arrays; params of every canned model.
struct FitParams {
  int64_t batch_size = 128;  // at most the number of examples
  // Passes over the data; 0: at least 10 and enough for 2000 steps, at most 500, so that a
  // small table gets as many steps as a large one (troupe train's default too).
  int64_t epochs = 0;
  bool shuffle = true;
  bool warm_start = false;  // fit continues the fitted model instead of starting anew

  template <class Self, class F>
  static void fields(Self& o, F&& f) {
    f("batch_size", o.batch_size);
    f("epochs", o.epochs);
    f("shuffle", o.shuffle);
    f("warm_start", o.warm_start);
  }
  runtime::Status validate(const std::string& model) const;
  int64_t epochs_for(int64_t examples) const;
  // (x, y) as the dataset fit trains on: feature "x", label "y", these batches and passes.
  runtime::Result<input::Dataset> dataset(const runtime::Tensor& x, const runtime::Tensor& y,
                                          int64_t seed) const;
};

// One prediction of `estimator` for every row of x, stacked: what predict() of a model
// trained on arrays returns.
runtime::Result<runtime::Tensor> predict_rows(Estimator& estimator, const runtime::Tensor& x,
                                              const std::string& key);

// Options: a struct with fields(o, task, f) and validate(task) (params.h), a FitParams `fit`,
// model_fn(task) and the names kClassifierName / kRegressorName.
template <class Options, Task kTask>
class CannedModel final : public Model {
 public:
  explicit CannedModel(Options options = {}, RunConfig config = {});

  std::string name() const override;
  bool is_classifier() const override { return kTask == Task::kClassifier; }
  runtime::Status fit(const runtime::Tensor& x, const runtime::Tensor& y) override;
  runtime::Result<runtime::Tensor> predict(const runtime::Tensor& x) override;
  // Class probabilities [n, n_classes]; an error for regressors.
  runtime::Result<runtime::Tensor> predict_proba(const runtime::Tensor& x);
  runtime::Result<double> score(const runtime::Tensor& x, const runtime::Tensor& y) override;
  ParamMap get_params() const override;
  runtime::Status set_params(const ParamMap& params) override;
  // From text, as a CLI flag or a model's info file has them.
  runtime::Status set_params_text(const TextParams& params);
  std::unique_ptr<Model> clone() const override;

  // The dataset path: Estimator::train, evaluate with their options.
  runtime::Result<TrainResult> fit(const input::Dataset& data, TrainOptions options = {});
  runtime::Result<Metrics> evaluate(const input::Dataset& data, EvalOptions options = {});
  const Options& options() const { return options_; }
  const RunConfig& config() const { return config_; }
  Estimator& estimator() { return *estimator_; }

 private:
  runtime::Status check_labels(const runtime::Tensor& x, const runtime::Tensor& y) const;

  Options options_;
  RunConfig config_;
  std::unique_ptr<Estimator> estimator_;
};

}  // namespace troupe::estimators
