// Linear models over every numeric feature, as tf.estimator's canned LinearClassifier and
// LinearRegressor (and, with loss "hinge" or "epsilon_insensitive", a linear SVM and SVR, as
// scikit-learn's SGD models with those losses), with scikit-learn's protocol (model.h).
//
//   LinearClassifier logistic({.n_classes = 3, .l2 = 1e-4}, config);   // FTRL, as TF
//   LinearClassifier svm({.loss = "hinge", .optimizer = ops::Optimizer::sgd(0.1)});
//   LinearRegressor ols({.optimizer = ops::Optimizer::adam(0.05), .fit = {.epochs = 50}});
//   TROUPE_RETURN_IF_ERROR(logistic.fit(x, y));
//
// logits = x W + b, W and b starting at zero (TF's initialisation for linear models). l1 and
// l2 regularize W: with FTRL as its l1 and l2 strengths (TF's FtrlOptimizer, which gives exact
// zeros for l1), with other optimizers as l1 sum|W| + l2 sum W^2 added to the loss.
#pragma once

#include <string>
#include <vector>

#include "estimators/canned/feature_column.h"
#include "estimators/canned/head.h"
#include "estimators/canned/input_layer.h"
#include "estimators/canned/model.h"
#include "estimators/canned/params.h"

namespace troupe::estimators {

struct LinearOptions {
  int64_t n_classes = 2;        // classifiers
  int64_t label_dimension = 1;  // regressors
  std::string loss;             // classifiers: log (default) or hinge; regressors: squared or
                                // epsilon_insensitive (head.h)
  double epsilon = 0.1;         // of epsilon_insensitive
  ops::Optimizer optimizer = ops::Optimizer::ftrl(0.2);
  double l1 = 0, l2 = 0;
  std::vector<std::string> feature_keys;  // empty: every feature
  // Numeric and categorical columns (feature_column.h), each with weights of its own; when
  // given, they replace feature_keys and standardize. Part of the model's shape, not a param.
  std::vector<FeatureColumn> feature_columns;
  // Weights split along dimension 0 into up to this many parts (a cluster's ps tasks), each at
  // least kMinSliceBytes (feature_column.h), as TF's LinearClassifier partitioner.
  int partitions = 1;
  HeadOptions head;  // label vocabulary, class weights, multi-label, weight column (head.h)
  FitParams fit;
  // Numeric features standardized with these statistics (input_layer.h); data, not a param.
  Standardization standardize;
  FeatureStats standardize_label;  // a regressor's target (head.h)
  static constexpr const char* kClassifierName = "LinearClassifier";
  static constexpr const char* kRegressorName = "LinearRegressor";

  template <class Self, class F>
  static void fields(Self& o, Task task, F&& f) {
    output_fields(o, task, f);
    if (task == Task::kRegressor) f("epsilon", o.epsilon);
    f("loss", o.loss);
    optimizer_fields(o.optimizer, f);
    f("l1", o.l1);
    f("l2", o.l2);
    f("feature_keys", o.feature_keys);
    f("partitions", o.partitions);
    HeadOptions::fields(o.head, task, f);
    FitParams::fields(o.fit, f);
  }
  runtime::Status validate(Task task) const;
  ModelFn model_fn(Task task) const;
};

// The linear model's logits [batch, units] (variables linear/linear_model/<column>/weights and
// .../bias_weights), as model_fn and wide & deep's wide part (wide_deep.h) build them; `weights`
// gets the weight variables.
runtime::Result<runtime::Output> linear_logits(ModelInputs& in, const LinearOptions& o,
                                               int64_t units,
                                               std::vector<runtime::Output>* weights);

using LinearClassifier = CannedModel<LinearOptions, Task::kClassifier>;
using LinearRegressor = CannedModel<LinearOptions, Task::kRegressor>;

}  // namespace troupe::estimators
