// Recurrent models: each example's numbers read as a sequence of time steps through stacked
// LSTM or GRU layers (ops/rnn.h, a while loop each), the last layer's final output into the
// head, as tf.contrib.estimator's RNNClassifier and RNNEstimator, with scikit-learn's protocol
// (estimators/canned/model.h).
//
//   RNNClassifier clf({.num_units = {64}, .cell_type = "lstm", .time_steps = 28,
//                      .n_classes = 10, .optimizer = ops::Optimizer::adam(1e-3)}, config);
//   clf.fit(images, labels);   // each image [28, 28]: 28 steps of one row each
//
// Features are read as the DNN reads them (input_layer.h: in name order, or through numeric
// feature columns) into [batch, width], then split into time_steps steps of width / time_steps
// numbers each, in order. Or, with sequence columns (feature_column.h: sequence_numeric_column,
// embeddings and indicators of sequence_categorical_column_with_*), each example is as many
// steps as its sequence holds: a batch is padded to its longest, and each example's final
// state is at its own last step (dynamic_rnn's sequence_length). Other columns beside them are
// TF's context features: read as a DNN reads them and given to every step.
//
//   RNNClassifier words({.num_units = {32}, .feature_columns = {embedding_column(
//       sequence_categorical_column_with_identity("tokens", 1000), 16)}}, config);
#pragma once

#include <string>
#include <vector>

#include "estimators/canned/feature_column.h"
#include "estimators/canned/head.h"
#include "estimators/canned/input_layer.h"
#include "estimators/canned/model.h"
#include "estimators/canned/params.h"

namespace troupe::estimators {

struct RNNOptions {
  std::vector<int64_t> num_units{64};  // one recurrent layer each, stacked
  std::string cell_type = "lstm";      // lstm or gru
  // Each layer a forward and a backward one (tf.nn.bidirectional_dynamic_rnn), their outputs
  // side by side: each step sees the whole sequence.
  bool bidirectional = false;
  // How many steps an example's numbers make, each of width / time_steps numbers; 0: one
  // number a step.
  int64_t time_steps = 0;
  int64_t n_classes = 2;        // classifiers
  int64_t label_dimension = 1;  // regressors
  ops::Optimizer optimizer = ops::Optimizer::adagrad(0.05);
  std::vector<std::string> feature_keys;  // empty: every feature
  // Numeric ones, or sequence ones and context ones beside them; not a param.
  std::vector<FeatureColumn> feature_columns;
  HeadOptions head;
  FitParams fit;
  Standardization standardize;  // data, not a param
  FeatureStats standardize_label;
  static constexpr const char* kClassifierName = "RNNClassifier";
  static constexpr const char* kRegressorName = "RNNRegressor";

  template <class Self, class F>
  static void fields(Self& o, Task task, F&& f) {
    f("num_units", o.num_units);
    f("cell_type", o.cell_type);
    f("bidirectional", o.bidirectional);
    f("time_steps", o.time_steps);
    output_fields(o, task, f);
    optimizer_fields(o.optimizer, f);
    f("feature_keys", o.feature_keys);
    HeadOptions::fields(o.head, task, f);
    FitParams::fields(o.fit, f);
  }
  runtime::Status validate(Task task) const;
  ModelFn model_fn(Task task) const;
};

using RNNClassifier = CannedModel<RNNOptions, Task::kClassifier>;
using RNNRegressor = CannedModel<RNNOptions, Task::kRegressor>;

}  // namespace troupe::estimators
