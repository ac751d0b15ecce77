// Preprocessing and pipelines as scikit-learn's: transformers fitted on the training data
// (StandardScaler, PCA), and a Pipeline that chains them before a model and is itself a Model,
// so that cross_val_score and the searches fit its steps on each fold's train rows only.
//
//   Pipeline pipe;
//   pipe.add("scaler", std::make_unique<StandardScaler>())
//       .add("pca", std::make_unique<PCA>(PCAOptions{.n_components = 10}))
//       .set_model("clf", std::make_unique<LinearClassifier>(LinearOptions{.n_classes = 10}));
//   TROUPE_RETURN_IF_ERROR(pipe.fit(x, y));
//   auto classes = pipe.predict(x_test);
//   GridSearchCV search(pipe, {{{"pca__n_components", {int64_t{5}, int64_t{10}}},
//                               {"clf__l2", {0.0, 0.01}}}});   // step__param, as scikit-learn
//
// Transformers take numbers [n, ...] (flattened to [n, d] float32) and give float32 [n, k].
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "estimators/canned/model.h"

namespace troupe::estimators {

class Transformer {
 public:
  virtual ~Transformer() = default;
  virtual std::string name() const = 0;
  virtual runtime::Status fit(const runtime::Tensor& x) = 0;
  // An error before fit, or for a width other than the fitted one.
  virtual runtime::Result<runtime::Tensor> transform(const runtime::Tensor& x) const = 0;
  virtual ParamMap get_params() const = 0;
  virtual runtime::Status set_params(const ParamMap& params) = 0;
  virtual std::unique_ptr<Transformer> clone() const = 0;  // same params, not fitted
};

// (x - mean) / std per column, from the training data (std 0 counts as 1, as scikit-learn).
struct StandardScalerOptions {
  bool with_mean = true;
  bool with_std = true;
  template <class Self, class F>
  static void fields(Self& o, Task, F&& f) {
    f("with_mean", o.with_mean);
    f("with_std", o.with_std);
  }
  runtime::Status validate(Task) const { return runtime::ok_status(); }
};

class StandardScaler final : public Transformer {
 public:
  explicit StandardScaler(StandardScalerOptions options = {}) : options_(options) {}
  std::string name() const override { return "StandardScaler"; }
  runtime::Status fit(const runtime::Tensor& x) override;
  runtime::Result<runtime::Tensor> transform(const runtime::Tensor& x) const override;
  ParamMap get_params() const override;
  runtime::Status set_params(const ParamMap& params) override;
  std::unique_ptr<Transformer> clone() const override;
  const std::vector<double>& mean() const { return mean_; }
  const std::vector<double>& scale() const { return scale_; }

 private:
  StandardScalerOptions options_;
  std::vector<double> mean_, scale_;
};

// Projection on the n_components directions of largest variance of the centred training
// data (eigenvectors of its covariance, each signed so that its largest loading is positive);
// whiten divides each by the square root of its variance.
struct PCAOptions {
  int64_t n_components = 2;
  bool whiten = false;
  template <class Self, class F>
  static void fields(Self& o, Task, F&& f) {
    f("n_components", o.n_components);
    f("whiten", o.whiten);
  }
  runtime::Status validate(Task) const;
};

class PCA final : public Transformer {
 public:
  explicit PCA(PCAOptions options = {}) : options_(options) {}
  std::string name() const override { return "PCA"; }
  runtime::Status fit(const runtime::Tensor& x) override;
  runtime::Result<runtime::Tensor> transform(const runtime::Tensor& x) const override;
  ParamMap get_params() const override;
  runtime::Status set_params(const ParamMap& params) override;
  std::unique_ptr<Transformer> clone() const override;
  // [n_components][d], and each one's variance, largest first.
  const std::vector<std::vector<double>>& components() const { return components_; }
  const std::vector<double>& explained_variance() const { return variance_; }

 private:
  PCAOptions options_;
  std::vector<double> mean_;
  std::vector<std::vector<double>> components_;
  std::vector<double> variance_;
};

class Pipeline final : public Model {
 public:
  Pipeline() = default;
  Pipeline& add(std::string name, std::unique_ptr<Transformer> step);
  Pipeline& set_model(std::string name, std::unique_ptr<Model> model);

  std::string name() const override { return "Pipeline"; }
  bool is_classifier() const override { return model_ && model_->is_classifier(); }
  runtime::Status fit(const runtime::Tensor& x, const runtime::Tensor& y) override;
  runtime::Result<runtime::Tensor> predict(const runtime::Tensor& x) override;
  runtime::Result<double> score(const runtime::Tensor& x, const runtime::Tensor& y) override;
  // Every step's params as step__param.
  ParamMap get_params() const override;
  runtime::Status set_params(const ParamMap& params) override;
  std::unique_ptr<Model> clone() const override;
  // x through every fitted transformer.
  runtime::Result<runtime::Tensor> transform(const runtime::Tensor& x) const;
  Model* model() const { return model_.get(); }

 private:
  std::vector<std::pair<std::string, std::unique_ptr<Transformer>>> steps_;
  std::string model_name_;
  std::unique_ptr<Model> model_;
};

}  // namespace troupe::estimators
