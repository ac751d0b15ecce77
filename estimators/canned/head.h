// Heads: what a canned model's logits become (predictions, loss, evaluation metrics, the train
// op and the export outputs), as tf.estimator's heads, so that every canned model of a task
// predicts, evaluates and serves alike.
//
//   Output logits = ...;                               // [batch, logits_dimension(head)]
//   return head_spec(in, {.task = Task::kClassifier, .n_classes = 3}, logits, optimizer);
//
// Classifiers: softmax over n_classes logits; predictions classes (int64 [batch]),
// probabilities and logits; loss the mean cross-entropy; metrics accuracy (and auc, precision,
// recall with two classes); classify serves the probabilities. Regressors: predictions
// [batch, label_dimension]; loss the mean squared error; metrics rmse and mae; regress serves
// the predictions. Training adds the learning-rate variable "learning_rate" (which an
// Experiment lowers on a plateau) and minimizes loss plus `regularization` with `optimizer`.
#pragma once

#include "estimators/canned/params.h"
#include "estimators/model_fn.h"

namespace troupe::estimators {

struct Head {
  Task task = Task::kClassifier;
  int64_t n_classes = 2;        // classifiers
  int64_t label_dimension = 1;  // regressors
};

int64_t logits_dimension(const Head& head);

runtime::Result<EstimatorSpec> head_spec(ModelInputs& in, const Head& head, runtime::Output logits,
                                         const ops::Optimizer& optimizer,
                                         runtime::Output regularization = {});

}  // namespace troupe::estimators
