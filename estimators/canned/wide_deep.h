// Wide & deep models (Cheng et al. 2016), as tf.estimator's DNNLinearCombinedClassifier and
// DNNLinearCombinedRegressor: a linear model over sparse, crossed columns that memorizes
// interactions, and a DNN over embeddings and numbers that generalizes, their logits summed and
// trained together, each part by its own optimizer.
//
//   auto education = categorical_column_with_vocabulary_list("education", {...}, 1);
//   auto occupation = categorical_column_with_hash_bucket("occupation", 1000);
//   DNNLinearCombinedClassifier m(
//       {.linear_feature_columns = {education, occupation,
//                                   crossed_column({"education", "occupation"}, {}, 10000)},
//        .dnn_feature_columns = {embedding_column(education, 8), embedding_column(occupation, 8),
//                                numeric_column("age")},
//        .dnn_hidden_units = {64, 32}},
//       config);
//   m.fit(train_dataset);                              // estimators/canned/model.h's protocol
//
// The linear part's variables are linear/linear_model/...; the DNN's dnn/... and
// input_layer/<column>/embedding_weights.
#pragma once

#include <string>
#include <vector>

#include "estimators/canned/feature_column.h"
#include "estimators/canned/head.h"
#include "estimators/canned/model.h"
#include "estimators/canned/params.h"

namespace troupe::estimators {

struct DNNLinearCombinedOptions {
  int64_t n_classes = 2;                              // classifiers
  int64_t label_dimension = 1;                        // regressors
  std::vector<FeatureColumn> linear_feature_columns;  // numeric and categorical
  ops::Optimizer linear_optimizer = ops::Optimizer::ftrl(0.2);
  std::vector<FeatureColumn> dnn_feature_columns;  // numeric, bucketized, embedding, indicator
  std::vector<int64_t> dnn_hidden_units{64, 32};
  std::string dnn_activation = "relu";
  double dnn_dropout = 0;
  bool dnn_batch_norm = false;
  ops::Optimizer dnn_optimizer = ops::Optimizer::adagrad(0.05);
  // Both parts' big variables (embeddings, linear weights, kernels) split along dimension 0
  // into up to this many parts (a cluster's ps tasks), as TF's input_layer_partitioner.
  int partitions = 1;
  HeadOptions head;  // label vocabulary, class weights, multi-label, weight column (head.h)
  FitParams fit;
  FeatureStats standardize_label;  // a regressor's target (head.h)
  static constexpr const char* kClassifierName = "DNNLinearCombinedClassifier";
  static constexpr const char* kRegressorName = "DNNLinearCombinedRegressor";

  template <class Self, class F>
  static void fields(Self& o, Task task, F&& f) {
    output_fields(o, task, f);
    f("linear_optimizer", o.linear_optimizer);
    f("linear_learning_rate", o.linear_optimizer.learning_rate);
    f("dnn_hidden_units", o.dnn_hidden_units);
    f("dnn_activation", o.dnn_activation);
    f("dnn_dropout", o.dnn_dropout);
    f("dnn_batch_norm", o.dnn_batch_norm);
    f("dnn_optimizer", o.dnn_optimizer);
    f("dnn_learning_rate", o.dnn_optimizer.learning_rate);
    f("clip_norm", o.dnn_optimizer.clip_norm);
    // One schedule paces both parts (model_fn gives the linear part the DNN's).
    schedule_fields(o.dnn_optimizer.schedule, f);
    f("partitions", o.partitions);
    HeadOptions::fields(o.head, task, f);
    FitParams::fields(o.fit, f);
  }
  runtime::Status validate(Task task) const;
  ModelFn model_fn(Task task) const;
};

using DNNLinearCombinedClassifier = CannedModel<DNNLinearCombinedOptions, Task::kClassifier>;
using DNNLinearCombinedRegressor = CannedModel<DNNLinearCombinedOptions, Task::kRegressor>;

}  // namespace troupe::estimators
