// DNN models: a feed-forward network over every numeric feature, as tf.estimator's canned
// DNNClassifier and DNNRegressor, with scikit-learn's fit / predict / score / get_params /
// set_params (estimators/canned/model.h).
//
//   DNNClassifier clf({.hidden_units = {256, 128}, .n_classes = 10,
//                      .optimizer = ops::Optimizer::adam(1e-3),
//                      .fit = {.batch_size = 128, .epochs = 5}}, config);
//   clf.fit(x_train, y_train);                            // or clf.estimator().train(dataset)
//   auto classes = clf.predict(x_test);                   // Result<Tensor> int64 [n]
//   auto accuracy = clf.score(x_test, y_test);            // Result<double>
//   clf.set_params({{"hidden_units", std::vector<int64_t>{64}}, {"learning_rate", 0.01}});
//
// Features are cast to float32, flattened per example and concatenated in name order
// (input_layer.h), or read through feature columns (feature_column.h); the head (head.h) turns the
// last layer into predictions and the loss.
#pragma once

#include <string>
#include <vector>

#include "estimators/canned/feature_column.h"
#include "estimators/canned/head.h"
#include "estimators/canned/input_layer.h"
#include "estimators/canned/model.h"
#include "estimators/canned/params.h"

namespace troupe::estimators {

struct DNNOptions {
  std::vector<int64_t> hidden_units{256, 128};
  int64_t n_classes = 2;            // classifiers
  int64_t label_dimension = 1;      // regressors
  std::string activation = "relu";  // relu, tanh, sigmoid, elu
  double dropout = 0;               // the rate of units dropped while training
  bool batch_norm = false;          // batch normalization after each hidden layer's product
  // Its learning rate and clip_norm (gradient clipping by global norm) are params too.
  ops::Optimizer optimizer = ops::Optimizer::adagrad(0.05);
  std::vector<std::string> feature_keys;  // empty: every feature
  // How the network reads its features (feature_column.h); when given, it replaces
  // feature_keys and standardize. Part of the model's shape, not a param.
  std::vector<FeatureColumn> feature_columns;
  // Kernels and embeddings split along dimension 0 into up to this many parts (a cluster's ps
  // tasks), each at least kMinSliceBytes (feature_column.h), as TF's input_layer_partitioner.
  int partitions = 1;
  HeadOptions head;  // label vocabulary, class weights, multi-label, weight column (head.h)
  FitParams fit;
  // Numeric features standardized with these statistics (input_layer.h); data, not a param.
  Standardization standardize;
  FeatureStats standardize_label;  // a regressor's target (head.h)
  static constexpr const char* kClassifierName = "DNNClassifier";
  static constexpr const char* kRegressorName = "DNNRegressor";

  template <class Self, class F>
  static void fields(Self& o, Task task, F&& f) {
    f("hidden_units", o.hidden_units);
    output_fields(o, task, f);
    f("activation", o.activation);
    f("dropout", o.dropout);
    f("batch_norm", o.batch_norm);
    optimizer_fields(o.optimizer, f);
    f("feature_keys", o.feature_keys);
    f("partitions", o.partitions);
    HeadOptions::fields(o.head, task, f);
    FitParams::fields(o.fit, f);
  }
  runtime::Status validate(Task task) const;
  ModelFn model_fn(Task task) const;
};

// The network's logits [batch, units]: its input layer, hidden layers and output layer, as
// model_fn and wide & deep's deep part (wide_deep.h) build them. `updates` gets the nodes that
// must run with each training step (batch normalization's moving averages): with_updates.
runtime::Result<runtime::Output> dnn_logits(ModelInputs& in, const DNNOptions& o, int64_t units,
                                            std::vector<int>* updates);

using DNNClassifier = CannedModel<DNNOptions, Task::kClassifier>;
using DNNRegressor = CannedModel<DNNOptions, Task::kRegressor>;

}  // namespace troupe::estimators
