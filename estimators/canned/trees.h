// Tree ensembles as graphs the Estimator trains, with scikit-learn's protocol (model.h):
// gradient-boosted trees, as tf.estimator's BoostedTreesClassifier and BoostedTreesRegressor,
// and random forests, as TF's TensorForest estimator and scikit-learn's RandomForestClassifier
// and RandomForestRegressor.
//
//   BoostedTreesClassifier gbt({.n_classes = 10, .n_trees = 100, .max_depth = 6});
//   RandomForestClassifier forest({.n_classes = 10, .n_trees = 100});
//   TROUPE_RETURN_IF_ERROR(gbt.fit(x, y));                  // x float [n, features]
//   double accuracy = *gbt.score(x_test, y_test);
//   std::vector<double> importance = *tree_feature_importances(gbt.estimator());
//
// Both keep their trees in one variable (ops/tree_ensemble.h) that each training step grows
// from its batch (ops/tree_ops.h): a boosting round's trees, or every tree of the forest, whole
// (or layers_per_batch layers of them). The first batch also sets each feature's bucket
// boundaries (its quantiles), and training stops by itself once every tree is grown, so fit
// repeats the data until then. A batch is a tree's sample (a layer's, with layers_per_batch 1):
// fit's batch_size rows (all of a smaller table). Features are used as they are (trees need no
// scaling); feature_columns may add one-hot (indicator) columns of categorical features.
//
// Boosting grows, each round, a tree per logit (n_classes trees of a classifier, as
// scikit-learn's and LightGBM's multi-class boosting; one of a binary classifier, the second
// class's logit against 0, as XGBoost's binary:logistic) of depth max_depth on the Newton steps of
// the head's loss (softmax or sigmoid cross-entropy, squared error), shrunk by learning_rate,
// XGBoost's regularization l1, l2, tree_complexity (gamma) and min_node_weight (its
// min_child_weight). The forest grows n_trees trees at once, each on a Poisson bootstrap of the
// rows, choosing among max_features random features at each node by the Gini impurity
// (classes) or the variance (values); it predicts the mean of its trees' class frequencies or
// values, and its nodes stop splitting when a child would weigh less than min_node_weight rows.
#pragma once

#include <string>
#include <vector>

#include "estimators/canned/feature_column.h"
#include "estimators/canned/head.h"
#include "estimators/canned/model.h"
#include "estimators/canned/params.h"

namespace troupe::estimators {

// How fit(x, y) feeds the trees: batches of batch_size rows, repeated until the trees are grown.
struct TreeFitParams {
  int64_t batch_size = 10000;  // at most the number of examples
  bool shuffle = true;
  bool warm_start = false;  // fit continues the fitted model instead of starting anew

  template <class Self, class F>
  static void fields(Self& o, F&& f) {
    f("batch_size", o.batch_size);
    f("shuffle", o.shuffle);
    f("warm_start", o.warm_start);
  }
  runtime::Status validate(const std::string& model) const;
  runtime::Result<input::Dataset> dataset(const runtime::Tensor& x, const runtime::Tensor& y,
                                          int64_t seed) const;
};

struct BoostedTreesOptions {
  int64_t n_classes = 2;        // classifiers
  int64_t label_dimension = 1;  // regressors
  int64_t n_trees = 100;        // rounds: a tree per logit each
  int64_t max_depth = 6;
  double learning_rate = 0.1;
  double l1 = 0;
  double l2 = 1;  // XGBoost's lambda: without it a leaf of tiny hessian takes a huge step
  double tree_complexity = 0;
  double min_node_weight = 1;  // XGBoost's min_child_weight
  bool center_bias = true;     // the first step sets the prior (log-odds, mean), as TF's
  int64_t max_bins = 64;       // buckets a feature's values fall into, at most 256
  // Layers a batch grows in each tree it reaches: 0 the whole tree (a round a batch, as
  // XGBoost's subsample), 1 a layer a batch, as TF's boosted trees (ops/tree_ops.h).
  int64_t layers_per_batch = 0;
  std::vector<std::string> feature_keys;  // empty: every feature
  // Replace feature_keys: numeric, bucketized and indicator columns (not embeddings, which
  // trees cannot train). Part of the model's shape, not a param.
  std::vector<FeatureColumn> feature_columns;
  HeadOptions head;  // label vocabulary, class weights, multi-label, weight column (head.h)
  TreeFitParams fit;
  FeatureStats standardize_label;  // a regressor's target (head.h); data, not a param
  static constexpr const char* kClassifierName = "BoostedTreesClassifier";
  static constexpr const char* kRegressorName = "BoostedTreesRegressor";

  template <class Self, class F>
  static void fields(Self& o, Task task, F&& f) {
    output_fields(o, task, f);
    f("n_trees", o.n_trees);
    f("max_depth", o.max_depth);
    f("learning_rate", o.learning_rate);
    f("l1", o.l1);
    f("l2", o.l2);
    f("tree_complexity", o.tree_complexity);
    f("min_node_weight", o.min_node_weight);
    f("center_bias", o.center_bias);
    f("max_bins", o.max_bins);
    f("layers_per_batch", o.layers_per_batch);
    f("feature_keys", o.feature_keys);
    HeadOptions::fields(o.head, task, f);
    TreeFitParams::fields(o.fit, f);
  }
  runtime::Status validate(Task task) const;
  ModelFn model_fn(Task task) const;
};

struct RandomForestOptions {
  int64_t n_classes = 2;        // classifiers
  int64_t label_dimension = 1;  // regressors
  int64_t n_trees = 100;
  int64_t max_nodes = 10000;  // per tree, as TensorForest's
  int64_t max_depth = 0;      // 0: as deep as max_nodes allows
  // Features a node chooses among; 0: the square root of the width for classifiers, a third of
  // it for regressors (Breiman's defaults, scikit-learn's "sqrt" for classifiers).
  int64_t max_features = 0;
  double min_node_weight = 1;  // scikit-learn's min_samples_leaf (in bootstrap weight)
  bool bootstrap = true;
  int64_t max_bins = 64;
  int64_t layers_per_batch = 0;  // as BoostedTreesOptions': 0, every tree whole from a batch
  std::vector<std::string> feature_keys;
  std::vector<FeatureColumn> feature_columns;  // as BoostedTreesOptions'
  HeadOptions head;
  // Deep nodes hold few rows: each layer splits on all of them, up to 100000.
  TreeFitParams fit = {.batch_size = 100000};
  FeatureStats standardize_label;
  int64_t seed = 0;  // of the bootstrap and the features drawn
  static constexpr const char* kClassifierName = "RandomForestClassifier";
  static constexpr const char* kRegressorName = "RandomForestRegressor";

  template <class Self, class F>
  static void fields(Self& o, Task task, F&& f) {
    output_fields(o, task, f);
    f("n_trees", o.n_trees);
    f("max_nodes", o.max_nodes);
    f("max_depth", o.max_depth);
    f("max_features", o.max_features);
    f("min_node_weight", o.min_node_weight);
    f("bootstrap", o.bootstrap);
    f("max_bins", o.max_bins);
    f("layers_per_batch", o.layers_per_batch);
    f("seed", o.seed);
    f("feature_keys", o.feature_keys);
    HeadOptions::fields(o.head, task, f);
    TreeFitParams::fields(o.fit, f);
  }
  runtime::Status validate(Task task) const;
  ModelFn model_fn(Task task) const;
};

using BoostedTreesClassifier = CannedModel<BoostedTreesOptions, Task::kClassifier>;
using BoostedTreesRegressor = CannedModel<BoostedTreesOptions, Task::kRegressor>;
using RandomForestClassifier = CannedModel<RandomForestOptions, Task::kClassifier>;
using RandomForestRegressor = CannedModel<RandomForestOptions, Task::kRegressor>;

// Each input feature's share of the trees' split gains (ops::feature_importances), in the
// order of the input layer's columns, of a trained tree model's estimator.
runtime::Result<std::vector<double>> tree_feature_importances(Estimator& estimator);

}  // namespace troupe::estimators
