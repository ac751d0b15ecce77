// KMeans: mini-batch k-means as a graph the Estimator trains, as TF's KMeansClustering and
// scikit-learn's MiniBatchKMeans, with scikit-learn's protocol (model.h).
//
//   KMeans km({.n_clusters = 3}, config);
//   TROUPE_RETURN_IF_ERROR(km.fit(x, {}));                 // labels are not used
//   auto ids = km.predict(x);                               // int64 [n]: the nearest center
//   auto d = km.transform(x);                               // [n, k] distances to each center
//   double inertia = *km.inertia(x);                        // sum of squared distances
//   double ari = *adjusted_rand_score(y, *ids);             // against known classes
//
// fit draws the starting centers from (up to 20000 rows of) the data by k-means++ (or at
// random), then trains: each step assigns a batch to its nearest centers and moves every center
// to the running mean of the points it was given, c = (c n + sum) / (n + m), n counting the
// points it took so far (1 for its starting point). The centers and counts are the variables
// kmeans/centers and kmeans/counts; the loss is the mean squared distance to the nearest center.
#pragma once

#include <string>
#include <vector>

#include "estimators/canned/input_layer.h"
#include "estimators/canned/model.h"
#include "estimators/canned/params.h"
#include "estimators/metrics.h"

namespace troupe::estimators {

struct KMeansOptions {
  int64_t n_clusters = 8;
  std::string init = "k-means++";  // or "random": distinct rows drawn at random
  std::vector<std::string> feature_keys;
  FitParams fit;
  // The starting centers, [n_clusters, width] row-major: fit() draws them; empty, the graph
  // starts at zero (then restored from a checkpoint). Data, not a param.
  std::vector<float> initial_centers;

  template <class Self, class F>
  static void fields(Self& o, Task, F&& f) {
    f("n_clusters", o.n_clusters);
    f("init", o.init);
    f("feature_keys", o.feature_keys);
    FitParams::fields(o.fit, f);
  }
  runtime::Status validate(Task) const;
  ModelFn model_fn() const;
};

// Starting centers for `o` from (up to 20000 rows of) x, [n_clusters * width], by o.init.
runtime::Result<std::vector<float>> kmeans_initial_centers(const runtime::Tensor& x,
                                                           const KMeansOptions& o, uint64_t seed);

class KMeans final : public Model {
 public:
  explicit KMeans(KMeansOptions options = {}, RunConfig config = {});

  std::string name() const override { return "KMeans"; }
  bool is_classifier() const override { return false; }
  // y is not used (it may be a null tensor).
  runtime::Status fit(const runtime::Tensor& x, const runtime::Tensor& y) override;
  runtime::Result<runtime::Tensor> predict(const runtime::Tensor& x) override;
  // Minus the inertia of x, as scikit-learn's KMeans.score (higher is better); y is not used.
  runtime::Result<double> score(const runtime::Tensor& x, const runtime::Tensor& y) override;
  ParamMap get_params() const override { return params_of(options_, Task::kRegressor); }
  runtime::Status set_params(const ParamMap& params) override;
  std::unique_ptr<Model> clone() const override;

  runtime::Result<runtime::Tensor> transform(const runtime::Tensor& x);
  runtime::Result<double> inertia(const runtime::Tensor& x);
  runtime::Result<runtime::Tensor> cluster_centers() const;
  const KMeansOptions& options() const { return options_; }
  Estimator& estimator() { return *estimator_; }

 private:
  KMeansOptions options_;
  RunConfig config_;
  std::unique_ptr<Estimator> estimator_;
};

}  // namespace troupe::estimators
