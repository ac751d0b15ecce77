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

// Where each example's labels rank among its scores [n, c] (c known when built): a class is
// among the k best when fewer than k classes score above it (ties: all of them).
// top_k_accuracy: the share of examples whose label is among their k best (labels class ids
// [n]); tf.metrics' precision_at_k (of the k best classes of every example, the share that are
// its labels) and recall_at_k (of its labels, the share among its k best), micro-averaged over
// the examples, with labels class ids [n] or 0/1 [n, c] (several labels an example).
enum class TopKSummary { kAccuracy, kPrecision, kRecall };
StreamingMetric top_k(GraphBuilder& b, Output labels, Output scores, int64_t k, TopKSummary summary,
                      Output weights = {}, const std::string& name = "top_k");

// scikit-learn's adjusted_rand_score of the groups `labels` against the groups `predictions`
// (any integer-valued ids, e.g. classes against cluster ids): 1 for the same partition
// whatever the names of the groups, about 0 for independent ones. Its count is the contingency
// table of the (label, prediction) pairs seen, a local variable [pairs, 3] that grows with the
// pairs that occur.
StreamingMetric adjusted_rand_index(GraphBuilder& b, Output labels, Output predictions,
                                    const std::string& name = "adjusted_rand_index");
// The index of a contingency table's `pairs` rows (label, prediction, count), in any order: what
// the AdjustedRandIndex op and estimators' host metric compute.
double adjusted_rand_of(const double* table, int64_t pairs);

}  // namespace metrics
}  // namespace troupe::ops
