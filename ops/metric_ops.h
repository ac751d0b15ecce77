// Streaming metrics as graph ops, as tf.metrics: each keeps its counts in local variables
// (ops::local_variable, float64), and gives an update op that adds a batch to them and answers
// the metric so far, and a value op that reads the metric from them. An Estimator sets the
// counts to zero before each evaluation, runs the updates with every batch and reads the values
// at the end; a model_fn returns them in eval_metric_ops (estimators/model_fn.h).
//
//   StreamingMetric acc = metrics::accuracy(b, labels, classes);
//   int reset = local_variables_initializer(b);         // run it first
//   ... run acc.update with each batch ...;  then run acc.value: the accuracy of all of them
//
// `weights` (optional) weigh each example, as tf.metrics' do: one per example ([n], spread
// over the example's elements), or shaped as the values. A metric that needs classes or
// probabilities checks them, and a value out of range is the step's error naming the metric.
// The values are what estimators/metrics.h's host metrics of the same kind compute.
// Not thread-safe (builders).
#pragma once

#include <string>

#include "ops/builder_names.h"

namespace troupe::ops {

struct StreamingMetric {
  Output value;   // the metric over the batches updated so far
  Output update;  // adds this step's batch; the metric with it
};

namespace metrics {

// tf.metrics.mean of `values`; sum, their total.
StreamingMetric mean(GraphBuilder& b, Output values, Output weights = {},
                     const std::string& name = "mean");
StreamingMetric sum(GraphBuilder& b, Output values, const std::string& name = "sum");
// The share of predictions equal to their labels.
StreamingMetric accuracy(GraphBuilder& b, Output labels, Output predictions, Output weights = {},
                         const std::string& name = "accuracy");
StreamingMetric mean_squared_error(GraphBuilder& b, Output labels, Output predictions,
                                   Output weights = {}, const std::string& name = "mse");
StreamingMetric root_mean_squared_error(GraphBuilder& b, Output labels, Output predictions,
                                        Output weights = {}, const std::string& name = "rmse");
StreamingMetric mean_absolute_error(GraphBuilder& b, Output labels, Output predictions,
                                    Output weights = {}, const std::string& name = "mae");
// Binary: labels 0/1, predictions 0/1 or probabilities, both thresholded at 0.5.
StreamingMetric precision(GraphBuilder& b, Output labels, Output predictions, Output weights = {},
                          const std::string& name = "precision");
StreamingMetric recall(GraphBuilder& b, Output labels, Output predictions, Output weights = {},
                       const std::string& name = "recall");
StreamingMetric f1(GraphBuilder& b, Output labels, Output predictions, Output weights = {},
                   const std::string& name = "f1");
// tf.metrics.auc: binary labels, probabilities in [0, 1] counted at `thresholds` thresholds
// spread over [0, 1], and the trapezoids under the ROC curve (or, with `pr`, the
// precision-recall curve).
StreamingMetric auc(GraphBuilder& b, Output labels, Output probabilities, Output weights = {},
                    int thresholds = 200, bool pr = false, const std::string& name = "auc");
// Binary probabilities [n] with 0/1 labels, or class probabilities [n, c] with class ids [n]:
// the mean cross-entropy, probabilities clipped to [1e-7, 1 - 1e-7].
StreamingMetric log_loss(GraphBuilder& b, Output labels, Output probabilities, Output weights = {},
                         const std::string& name = "log_loss");

// Over `classes` classes, from a confusion matrix of class ids (labels and predictions in
// [0, classes)). kAccuracy is confusion_matrix's; kPrecision, kRecall and kF1 averaged as
// scikit-learn's average= (micro; macro over the classes that occur in labels or predictions;
// weighted by support); tf.metrics' mean_per_class_accuracy (every class, absent ones as 0) and
// mean_iou (the classes that occur).
enum class ClassSummary { kAccuracy, kPrecision, kRecall, kF1, kMeanPerClassAccuracy, kMeanIou };
enum class Average { kMicro, kMacro, kWeighted };
StreamingMetric per_class(GraphBuilder& b, Output labels, Output predictions, int64_t classes,
                          ClassSummary summary, Average average = Average::kMacro,
                          Output weights = {}, const std::string& name = "per_class");
StreamingMetric mean_iou(GraphBuilder& b, Output labels, Output predictions, int64_t classes,
                         Output weights = {}, const std::string& name = "mean_iou");
StreamingMetric mean_per_class_accuracy(GraphBuilder& b, Output labels, Output predictions,
                                        int64_t classes, Output weights = {},
                                        const std::string& name = "mean_per_class_accuracy");

}  // namespace metrics
}  // namespace troupe::ops
