#include "estimators/canned/kmeans.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>

#include "estimators/canned/runtime_names.h"
#include "estimators/metrics.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/state_ops.h"

namespace troupe::estimators {

namespace {

constexpr int64_t kInitRows = 20000;

// Squared distances [n, k] of x's rows to each center: |x|^2 - 2 x c' + |c|^2.
Output squared_distances(runtime::GraphBuilder& b, Output x, Output centers) {
  Output xx = ops::reduce_sum(b, ops::square(b, x), {1}, /*keep_dims=*/true);
  Output cc = ops::reshape(b, ops::reduce_sum(b, ops::square(b, centers), {1}), {1, -1});
  Output cross = ops::matmul(b, x, centers, false, /*transpose_b=*/true);
  Output d = ops::add(b, ops::sub(b, xx, ops::mul(b, cross, 2.0)), cc);
  // Rounding can make a point's distance to itself slightly negative.
  return ops::maximum(b, d, ops::zeros_like(b, d));
}

// k-means++ (or distinct random rows) over `rows` rows of width d.
std::vector<float> draw_centers(const std::vector<float>& x, int64_t rows, int64_t d, int64_t k,
                                const std::string& init, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> picked;
  if (init == "random") {
    std::vector<int64_t> order(rows);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    picked.assign(order.begin(), order.begin() + k);
  } else {
    // Each next center is a row drawn with probability proportional to its squared distance
    // to the nearest center so far (Arthur and Vassilvitskii).
    std::vector<double> nearest(rows, std::numeric_limits<double>::infinity());
    picked.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(rows)));
    while (static_cast<int64_t>(picked.size()) < k) {
      const float* c = &x[picked.back() * d];
      double total = 0;
      for (int64_t r = 0; r < rows; ++r) {
        double dist = 0;
        for (int64_t j = 0; j < d; ++j) dist += (x[r * d + j] - c[j]) * (x[r * d + j] - c[j]);
        nearest[r] = std::min(nearest[r], dist);
        total += nearest[r];
      }
      int64_t next = static_cast<int64_t>(rng() % static_cast<uint64_t>(rows));
      if (total > 0) {
        double target = std::uniform_real_distribution<double>(0, total)(rng);
        for (int64_t r = 0; r < rows; ++r) {
          target -= nearest[r];
          if (target <= 0) {
            next = r;
            break;
          }
        }
      }
      picked.push_back(next);
    }
  }
  std::vector<float> centers;
  for (int64_t r : picked) centers.insert(centers.end(), &x[r * d], &x[r * d] + d);
  return centers;
}

}  // namespace

Result<std::vector<float>> kmeans_initial_centers(const Tensor& x, const KMeansOptions& o,
                                                  uint64_t seed) {
  if (x.rank() < 1 || x.dim(0) < o.n_clusters) {
    return runtime::invalid_argument("KMeans: ", x.rank() ? x.dim(0) : 0,
                                     " examples for n_clusters ", o.n_clusters);
  }
  if (!runtime::is_numeric(x.dtype())) {
    return runtime::invalid_argument("KMeans: x is ", runtime::dtype_name(x.dtype()));
  }
  const int64_t n = x.dim(0), d = x.num_elements() / n;
  std::mt19937_64 rng(seed);
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (n > kInitRows) std::shuffle(order.begin(), order.end(), rng);
  const int64_t rows = std::min(n, kInitRows);
  std::vector<float> sample(rows * d);
  runtime::visit_numeric(x.dtype(), [&](auto zero) {
    const auto* all = x.data<decltype(zero)>();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < d; ++j) sample[r * d + j] = static_cast<float>(all[order[r] * d + j]);
    }
  });
  return draw_centers(sample, rows, d, o.n_clusters, o.init, rng());
}

Status KMeansOptions::validate(Task) const {
  if (n_clusters < 1) {
    return param_error("KMeans", "n_clusters", std::to_string(n_clusters) + " is below 1");
  }
  if (init != "k-means++" && init != "random") {
    return param_error("KMeans", "init", "'" + init + "' is not k-means++ or random");
  }
  return fit.validate("KMeans");
}

ModelFn KMeansOptions::model_fn() const {
  return [o = *this](ModelInputs& in) -> Result<EstimatorSpec> {
    TROUPE_RETURN_IF_ERROR(o.validate(Task::kClassifier));  // constructor options, first used here
    runtime::GraphBuilder& b = in.b;
    int64_t width = 0;
    TROUPE_ASSIGN_OR_RETURN(Output x, dense_input_layer(in, o.feature_keys, {}, &width));
    const int64_t k = o.n_clusters;
    if (!o.initial_centers.empty() && static_cast<int64_t>(o.initial_centers.size()) != k * width) {
      return runtime::invalid_argument("KMeans: ", o.initial_centers.size(),
                                       " starting center values for ", k, " centers of width ",
                                       width);
    }
    Output centers, counts;
    {
      auto scope = b.name_scope("kmeans");
      centers = ops::variable(
          b, "centers", Shape{k, width}, DType::kFloat32,
          o.initial_centers.empty()
              ? ops::zeros(b, Shape{k, width}, DType::kFloat32)
              : ops::constant(b, Tensor::from_vector(Shape{k, width}, o.initial_centers)),
          /*trainable=*/false);
      counts = ops::variable(b, "counts", Shape{k}, DType::kFloat32,
                             ops::ones(b, Shape{k}, DType::kFloat32), /*trainable=*/false);
    }
    Output distances = squared_distances(b, x, centers);
    Output ids = ops::argmin(b, distances, 1, DType::kInt64);
    EstimatorSpec spec;
    spec.predictions = {{"cluster_index", ids}, {"all_distances", distances}};
    if (in.mode == Mode::kPredict) return spec;
    Output nearest = ops::reduce_min(b, distances, {1});
    spec.loss = ops::reduce_mean(b, nearest);
    spec.eval_metric_ops["inertia"] = {"sum", ids, nearest};
    // Known classes (a label column) score the clusters by the adjusted Rand index.
    if (in.labels.valid()) {
      spec.eval_metric_ops["adjusted_rand_index"] = {"adjusted_rand_index", in.labels, ids};
    }
    if (in.mode != Mode::kTrain) return spec;
    Output onehot = ops::one_hot(b, ids, k);                        // [n, k]
    Output taken = ops::reduce_sum(b, onehot, {0});                 // [k]
    Output sums = ops::matmul(b, onehot, x, /*transpose_a=*/true);  // [k, d]
    Output total = ops::add(b, counts, taken);
    Output moved =
        ops::div(b, ops::add(b, ops::mul(b, centers, ops::reshape(b, counts, {-1, 1})), sums),
                 ops::reshape(b, total, {-1, 1}));
    // Both updates read the old values first: the new counts wait for the new centers.
    Output new_centers = ops::assign(b, centers, moved);
    Output new_counts;
    {
      auto deps = b.control_dependencies({new_centers.node});
      new_counts = ops::assign(b, counts, total);
    }
    Output step;
    {
      auto deps = b.control_dependencies({new_counts.node});
      step = ops::assign_add(b, ops::global_step(b), ops::scalar(b, 1, DType::kInt64));
    }
    spec.train_op = ops::no_op(b, {step.node}, "train");
    return spec;
  };
}

KMeans::KMeans(KMeansOptions options, RunConfig config)
    : options_(std::move(options)),
      config_(std::move(config)),
      estimator_(std::make_unique<Estimator>(options_.model_fn(), config_)) {}

Status KMeans::set_params(const ParamMap& params) {
  TROUPE_RETURN_IF_ERROR(assign_params(options_, Task::kRegressor, params, name()));
  estimator_->set_model_fn(options_.model_fn());
  return runtime::ok_status();
}

std::unique_ptr<Model> KMeans::clone() const {
  KMeansOptions o = options_;
  o.initial_centers.clear();
  RunConfig in_memory = config_;
  in_memory.model_dir.clear();
  return std::make_unique<KMeans>(o, in_memory);
}

Status KMeans::fit(const Tensor& x, const Tensor& y) {
  if (x.rank() < 1 || x.dim(0) < options_.n_clusters) {
    return runtime::invalid_argument("KMeans.fit: ", x.rank() ? x.dim(0) : 0,
                                     " examples for n_clusters ", options_.n_clusters);
  }
  const int64_t n = x.dim(0);
  if (!options_.fit.warm_start || options_.initial_centers.empty()) {
    TROUPE_ASSIGN_OR_RETURN(
        options_.initial_centers,
        kmeans_initial_centers(
            x, options_, static_cast<uint64_t>(std::max<int64_t>(0, config_.tf_random_seed))));
    estimator_.reset();
    estimator_ = std::make_unique<Estimator>(options_.model_fn(), config_);
  }
  // The Estimator trains on labelled data: without labels, a column of zeros stands in.
  Tensor labels = y;
  if (!labels.valid()) {
    TROUPE_ASSIGN_OR_RETURN(labels, Tensor::zeros(runtime::DType::kInt64, Shape{n}));
  }
  TROUPE_ASSIGN_OR_RETURN(input::Dataset data,
                          options_.fit.dataset(x, labels, config_.tf_random_seed));
  return estimator_->train(data).status();
}

Result<Tensor> KMeans::predict(const Tensor& x) {
  return predict_rows(*estimator_, x, "cluster_index");
}

Result<Tensor> KMeans::transform(const Tensor& x) {
  TROUPE_ASSIGN_OR_RETURN(Tensor squared, predict_rows(*estimator_, x, "all_distances"));
  float* p = squared.data<float>();
  for (int64_t i = 0; i < squared.num_elements(); ++i) p[i] = std::sqrt(p[i]);
  return squared;
}

Result<double> KMeans::inertia(const Tensor& x) {
  TROUPE_ASSIGN_OR_RETURN(Tensor squared, predict_rows(*estimator_, x, "all_distances"));
  const int64_t k = squared.dim(1);
  double total = 0;
  for (int64_t r = 0; r < squared.dim(0); ++r) {
    const float* row = squared.data<float>() + r * k;
    total += *std::min_element(row, row + k);
  }
  return total;
}

Result<double> KMeans::score(const Tensor& x, const Tensor&) {
  TROUPE_ASSIGN_OR_RETURN(double i, inertia(x));
  return -i;
}

Result<Tensor> KMeans::cluster_centers() const {
  return estimator_->get_variable_value("kmeans/centers");
}

}  // namespace troupe::estimators
