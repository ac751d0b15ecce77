#include "estimators/canned/trees.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "estimators/canned/input_layer.h"
#include "estimators/canned/model_impl.h"
#include "estimators/canned/runtime_names.h"
#include "estimators/hooks.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/state_ops.h"
#include "ops/strided_slice.h"
#include "ops/tree_ops.h"

namespace troupe::estimators {

namespace {

constexpr const char* kScopes[] = {"boosted_trees", "random_forest"};

// Ends training once the grow op reports every tree finished, as TF's boosted trees stop.
class StopWhenGrown : public SessionRunHook {
 public:
  StopWhenGrown(Output trees_done, int64_t trees) : done_(trees_done), trees_(trees) {}
  Status begin(HookSetup& s) override {
    fetch_ = s.fetch(done_);
    return runtime::ok_status();
  }
  Status after_run(StepContext& c) override {
    if (c.value(fetch_).data<int64_t>()[0] >= trees_) c.request_stop();
    return runtime::ok_status();
  }

 private:
  Output done_;
  int64_t trees_;
  int fetch_ = -1;
};

// What differs between the ensembles.
struct TreeModel {
  const char* scope;
  std::vector<std::string> feature_keys;
  std::vector<FeatureColumn> feature_columns;
  int64_t trees, max_nodes, dim, max_bins;
  ops::TreeGrowth growth;
};

// What both ensembles check alike: task shape, tree count, bins, head, columns, fit.
template <class Options>
Status check_common(const Options& o, Task task) {
  const std::string model = model_name<Options>(task);
  TROUPE_RETURN_IF_ERROR(check_outputs(model, task, o.n_classes, o.label_dimension));
  if (o.n_trees < 1) return param_error(model, "n_trees", "below 1");
  if (!(o.min_node_weight >= 0)) return param_error(model, "min_node_weight", "negative");
  if (o.max_bins < 2 || o.max_bins > 256) {
    return param_error(model, "max_bins", std::to_string(o.max_bins) + " is not in [2, 256]");
  }
  if (o.layers_per_batch < 0) return param_error(model, "layers_per_batch", "negative");
  TROUPE_RETURN_IF_ERROR(head_of(o, task).validate().with_context(model));
  for (const FeatureColumn& c : o.feature_columns) {
    if (c.kind == FeatureColumn::Kind::kEmbedding) {
      return param_error(model, "feature_columns",
                         "'" + c.name() + "' is an embedding, which trees cannot train");
    }
  }
  if (!o.feature_columns.empty()) {
    TROUPE_RETURN_IF_ERROR(validate_columns(o.feature_columns, /*for_linear=*/false));
  }
  return o.fit.validate(model);
}

Result<Output> tree_input(ModelInputs& in, const TreeModel& m, const Head& head, int64_t* width) {
  if (!m.feature_columns.empty()) return input_layer(in, m.feature_columns, width);
  return dense_input_layer(in, m.feature_keys, {}, width, head.options.weight_column);
}

// Whether the trees sum to one logit: a boosted binary classifier grows one tree a round, as
// XGBoost's binary:logistic does, where a tree per class would fit the same split twice. Its
// sum f is the second class's logit against a first of 0, so the softmax is sigmoid(f), and
// f's derivatives are the second class's.
bool one_logit(const Head& head, bool forest) {
  return !forest && head.task == Task::kClassifier && head.n_classes == 2 &&
         !head.options.multi_label && head.options.heads.empty();
}

// The loss's derivatives for boosting, the targets for a forest (ops/tree_ops.h), weighted.
Result<std::pair<Output, Output>> fit_statistics(ModelInputs& in, const Head& head, Output logits,
                                                 bool forest) {
  runtime::GraphBuilder& b = in.b;
  TROUPE_ASSIGN_OR_RETURN(HeadTargets t, head_targets(in, head));
  Output g, h;
  if (forest) {
    g = ops::neg(b, t.targets);
    Output ones = ops::ones_like(b, t.targets);
    h = ops::slice(b, ones, {0, 0}, {-1, 1});
    if (t.weights.valid()) h = ops::reduce_mean(b, ops::mul(b, ones, t.weights), {1}, true);
  } else if (head.task == Task::kRegressor) {
    g = ops::sub(b, logits, t.targets);
    h = ops::ones_like(b, g);
  } else {
    Output p = head.options.multi_label ? ops::sigmoid(b, logits) : ops::softmax(b, logits);
    g = ops::sub(b, p, t.targets);
    // p (1 - p): the diagonal of the softmax's Hessian; floored so that a sure leaf still
    // has weight.
    Output curvature = ops::mul(b, p, ops::sub(b, ops::ones_like(b, p), p));
    h = ops::maximum(b, curvature, ops::fill(b, Shape{}, 1e-6, DType::kFloat32));
  }
  if (t.weights.valid()) {
    g = ops::mul(b, g, t.weights);
    if (!forest) h = ops::mul(b, h, t.weights);
  }
  return std::make_pair(g, h);
}

constexpr int64_t kLossRows = 1000;

Output first_rows(runtime::GraphBuilder& b, Output x) {
  return ops::strided_slice(b, x, {.begin = {0}, .end = {kLossRows}, .strides = {1}});
}

Result<EstimatorSpec> tree_spec(ModelInputs& in, const Head& head, const TreeModel& m) {
  runtime::GraphBuilder& b = in.b;
  int64_t width = 0;
  TROUPE_ASSIGN_OR_RETURN(Output x, tree_input(in, m, head, &width));
  const bool forest = m.growth.forest;
  const bool binary = one_logit(head, forest);
  const int64_t k = binary ? 1 : logits_dimension(head);
  Output ensemble, bounds_var;
  {
    auto scope = b.name_scope(m.scope);
    const Shape shape = ops::tree_ensemble_shape(m.trees, m.max_nodes, m.dim);
    ensemble = ops::variable(b, "ensemble", shape, DType::kFloat32,
                             ops::zeros(b, shape, DType::kFloat32), /*trainable=*/false);
    if (in.mode == Mode::kTrain) {
      const Shape bounds{width, m.max_bins - 1};
      bounds_var = ops::variable(
          b, "boundaries", bounds, DType::kFloat32,
          ops::fill(b, bounds, std::numeric_limits<double>::quiet_NaN(), DType::kFloat32),
          /*trainable=*/false);
    }
  }
  // A forest grows from its targets alone: a training step's loss, which is all its
  // predictions are for, is that of the batch's first rows, sparing a walk of every tree for
  // every row.
  ModelInputs* head_in = &in;
  std::optional<ModelInputs> sample;
  Output predicted_x = x;
  if (forest && in.mode == Mode::kTrain) {
    std::map<std::string, Output> features;
    for (const auto& [name, f] : in.features) features[name] = first_rows(b, f);
    sample.emplace(
        ModelInputs{b, features, first_rows(b, in.labels), in.mode, in.params, in.config});
    head_in = &*sample;
    predicted_x = first_rows(b, x);
    TROUPE_RETURN_IF_ERROR(b.status());
  }
  Output logits = ops::tree_ensemble_predict(b, predicted_x, ensemble, k, forest);
  if (binary) logits = ops::concat(b, {ops::zeros_like(b, logits), logits}, 1);
  if (forest && head.task == Task::kClassifier) {
    // The forest's class frequencies p as logits the head turns back into them: log p for a
    // softmax, log(p / (1 - p)) for a multi-label head's sigmoids.
    const double eps = 1e-6;
    auto clipped = [&](Output p) {
      return ops::minimum(b, ops::maximum(b, p, ops::fill(b, Shape{}, eps, DType::kFloat32)),
                          ops::fill(b, Shape{}, 1 - eps, DType::kFloat32));
    };
    Output p = clipped(logits);
    logits = head.options.multi_label
                 ? ops::sub(b, ops::log(b, p), ops::log(b, ops::sub(b, ops::ones_like(b, p), p)))
                 : ops::log(b, p);
  }
  TROUPE_ASSIGN_OR_RETURN(EstimatorSpec spec, head_spec(*head_in, head, logits));
  if (in.mode != Mode::kTrain) return spec;
  Output bounds = ops::bucket_boundaries(b, bounds_var, x);
  // A forest's statistics do not depend on its predictions: grow from the targets alone.
  TROUPE_ASSIGN_OR_RETURN(auto stats, fit_statistics(in, head, logits, forest));
  if (binary) {
    stats = {ops::slice(b, stats.first, {0, 1}, {-1, 1}),
             ops::slice(b, stats.second, {0, 1}, {-1, 1})};
  }
  ops::TreeGrowth growth = m.growth;
  if (forest && growth.features_per_node == 0) {
    // Breiman's defaults: the square root of the width for classes, a third for values.
    growth.features_per_node =
        head.task == Task::kClassifier
            ? std::max<int64_t>(1, std::llround(std::sqrt(static_cast<double>(width))))
            : std::max<int64_t>(1, width / 3);
  }
  Output done = ops::grow_tree_layer(b, ensemble, x, stats.first, stats.second, bounds, growth);
  Output step;
  {
    auto deps = b.control_dependencies({done.node});
    step = ops::assign_add(b, ops::global_step(b), ops::scalar(b, 1, DType::kInt64));
  }
  spec.train_op = ops::no_op(b, {step.node}, "train");
  spec.training_hooks.push_back(std::make_shared<StopWhenGrown>(done, m.trees));
  return spec;
}

}  // namespace

Status TreeFitParams::validate(const std::string& model) const {
  if (batch_size < 1) {
    return param_error(model, "batch_size", std::to_string(batch_size) + " is not at least 1");
  }
  return runtime::ok_status();
}

Result<input::Dataset> TreeFitParams::dataset(const runtime::Tensor& x, const runtime::Tensor& y,
                                              int64_t seed) const {
  const int64_t n = x.rank() ? x.dim(0) : 0;
  return input::arrays({{"x", x}, {"y", y}}, "y",
                       {.batch_size = std::max<int64_t>(1, std::min(batch_size, n)),
                        .num_epochs = 0,
                        .shuffle = shuffle,
                        .seed = static_cast<uint64_t>(std::max<int64_t>(0, seed))});
}

Status BoostedTreesOptions::validate(Task task) const {
  const std::string model = model_name<BoostedTreesOptions>(task);
  if (max_depth < 1 || max_depth > 20) {
    return param_error(model, "max_depth", std::to_string(max_depth) + " is not in [1, 20]");
  }
  if (!(learning_rate > 0)) return param_error(model, "learning_rate", "not above 0");
  if (!(l1 >= 0)) return param_error(model, "l1", "negative");
  if (!(l2 >= 0)) return param_error(model, "l2", "negative");
  if (!(tree_complexity >= 0)) return param_error(model, "tree_complexity", "negative");
  return check_common(*this, task);
}

ModelFn BoostedTreesOptions::model_fn(Task task) const {
  return [o = *this, task](ModelInputs& in) -> Result<EstimatorSpec> {
    TROUPE_RETURN_IF_ERROR(o.validate(task));  // constructor options, first used here
    const Head head = head_of(o, task);
    const int64_t k = one_logit(head, false) ? 1 : logits_dimension(head);
    TreeModel m{"boosted_trees",
                o.feature_keys,
                o.feature_columns,
                o.n_trees * k,
                (int64_t{2} << o.max_depth) - 1,
                1,
                o.max_bins,
                {}};
    m.growth = {.trees_per_round = k,
                .max_depth = o.max_depth,
                .learning_rate = o.learning_rate,
                .l1 = o.l1,
                .l2 = o.l2,
                .tree_complexity = o.tree_complexity,
                .min_node_weight = o.min_node_weight,
                .center_bias = o.center_bias,
                .layers = o.layers_per_batch};
    return tree_spec(in, head, m);
  };
}

Status RandomForestOptions::validate(Task task) const {
  const std::string model = model_name<RandomForestOptions>(task);
  if (max_nodes < 1 || max_nodes >= (int64_t{1} << 24)) {
    return param_error(model, "max_nodes", std::to_string(max_nodes) + " is not in [1, 2^24)");
  }
  if (max_depth < 0) return param_error(model, "max_depth", "negative");
  if (max_features < 0) return param_error(model, "max_features", "negative");
  return check_common(*this, task);
}

ModelFn RandomForestOptions::model_fn(Task task) const {
  return [o = *this, task](ModelInputs& in) -> Result<EstimatorSpec> {
    TROUPE_RETURN_IF_ERROR(o.validate(task));
    const Head head = head_of(o, task);
    const int64_t k = logits_dimension(head);
    TreeModel m{"random_forest",   o.feature_keys,
                o.feature_columns, o.n_trees,
                o.max_nodes,       k,
                o.max_bins,        {}};
    m.growth = {.forest = true,
                .trees_per_round = o.n_trees,
                .max_depth = o.max_depth,
                .min_node_weight = o.min_node_weight,
                .features_per_node = o.max_features,
                .bagging = o.bootstrap,
                .seed = o.seed,
                .layers = o.layers_per_batch};
    return tree_spec(in, head, m);
  };
}

Result<std::vector<double>> tree_feature_importances(Estimator& estimator) {
  for (const char* scope : kScopes) {
    const std::string prefix = scope;
    auto ensemble = estimator.get_variable_value(prefix + "/ensemble");
    if (!ensemble.ok()) continue;
    TROUPE_ASSIGN_OR_RETURN(runtime::Tensor bounds,
                            estimator.get_variable_value(prefix + "/boundaries"));
    return ops::feature_importances(*ensemble, bounds.dim(0));
  }
  return runtime::failed_precondition("no tree ensemble: the model is not a trained tree model");
}

template class CannedModel<BoostedTreesOptions, Task::kClassifier>;
template class CannedModel<BoostedTreesOptions, Task::kRegressor>;
template class CannedModel<RandomForestOptions, Task::kClassifier>;
template class CannedModel<RandomForestOptions, Task::kRegressor>;

}  // namespace troupe::estimators
