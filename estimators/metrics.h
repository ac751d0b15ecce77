// Streaming evaluation metrics by kind: each accumulates over the batches of an evaluation and
// gives its value at the end, as tf.metrics' (value, update_op) pairs do. An Estimator builds a
// kind's graph ops (graph_metric, ops/metric_ops.h); these host metrics are their reference,
// and count what has no graph op (sum, confusion_matrix and adjusted_rand_index given weights,
// which they refuse by name) from the tensors a model_fn names in eval_metric_ops.
//
//   auto m = make_metric("accuracy");                       // Result<unique_ptr<Metric>>
//   (*m)->update(labels, predicted_classes);                 // per batch
//   double acc = (*m)->result();
//
// Kinds: accuracy, precision, recall, f1 (binary: labels 0/1, predictions 0/1 or probabilities
// thresholded at 0.5), auc and auc_pr (binary labels, probabilities; 200 thresholds, trapezoids,
// as tf.metrics.auc; auc:T and auc_pr:T with T thresholds), log_loss (binary probabilities [n]
// or class probabilities [n, c] with integer labels), mean (of the predictions), mse, rmse,
// mae, top_k_accuracy:K (scores [n, c], integer labels), precision_at_k:K and recall_at_k:K
// (tf.metrics', scores [n, c]; labels integer [n] or 0/1 [n, c], several an example),
// confusion_matrix:C (result: accuracy; matrix() has the counts), sum (of the
// predictions), adjusted_rand_index (labels against predicted groups, e.g. cluster ids);
// multi-class, over C classes (integer labels and predicted classes): precision:C:AVG,
// recall:C:AVG and f1:C:AVG with AVG micro, macro (the default) or weighted, as scikit-learn's
// average=, and tf.metrics' mean_per_class_accuracy:C and mean_iou:C.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ops/metric_ops.h"
#include "runtime/graph_builder.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

namespace troupe::estimators {

class Metric {
 public:
  virtual ~Metric() = default;
  // A shape or dtype that does not fit the metric is an error naming it; nothing is counted.
  // `weights` (optional: one per example, a weight column's values) weigh what each example
  // adds, as tf.metrics' weights; accuracy, precision, recall, f1, auc, auc_pr, log_loss,
  // mean, mse, rmse, mae, the multi-class kinds and the top-k kinds take them, the others
  // refuse them.
  runtime::Status update(const runtime::Tensor& labels, const runtime::Tensor& predictions,
                         const runtime::Tensor& weights = runtime::Tensor());
  virtual double result() const = 0;
  virtual void reset() = 0;

 protected:
  // Each example's weight, `w` (empty: all 1), spread over its `per_example` elements: the
  // weight of element i is weight(w, i, per_example).
  static double weight(const std::vector<double>& w, size_t i, size_t per_example) {
    return w.empty() ? 1.0 : w[i / per_example];
  }
  virtual bool takes_weights() const { return false; }
  virtual runtime::Status accumulate(const runtime::Tensor& labels,
                                     const runtime::Tensor& predictions,
                                     const std::vector<double>& weights) = 0;
};

runtime::Result<std::unique_ptr<Metric>> make_metric(const std::string& kind);
// The metric kind of a multi-class metric's name, for `classes` classes: f1_macro is
// "f1:C:macro", precision_weighted "precision:C:weighted", mean_iou "mean_iou:C",
// mean_per_class_accuracy "mean_per_class_accuracy:C", precision_at_5 "precision_at_k:5",
// recall_at_5 "recall_at_k:5" and top_5_accuracy "top_k_accuracy:5" (these three over scores,
// not classes); "" for a name not of these.
std::string class_metric_kind(const std::string& name, int64_t classes);
// Whether a kind ranks each example's scores (top_k_accuracy, precision_at_k, recall_at_k)
// rather than counting predicted classes or values.
bool ranks_scores(const std::string& kind);

// The graph ops of a metric kind (ops/metric_ops.h), named `name`, which compute what the host
// metric computes: every kind; sum, confusion_matrix and adjusted_rand_index given weights stay
// on the host (nullopt), which refuses them by name. An unknown kind is make_metric's error.
runtime::Result<std::optional<ops::StreamingMetric>> graph_metric(
    runtime::GraphBuilder& b, const std::string& kind, runtime::Output labels,
    runtime::Output predictions, runtime::Output weights, const std::string& name);

using Metrics = std::map<std::string, double>;

// The loss and metrics of one evaluation, accumulated batch by batch from a step's values:
// values[0] the batch's mean loss, values[1] a tensor with a row per example (it counts them:
// the loss is a mean over examples, not batches), then each metric's labels and predictions at
// the positions given, and its weights after them when it has any.
//
//   EvalTally tally;
//   tally.add_metric("accuracy", std::move(*make_metric("accuracy")), 2, false);
//   tally.add(values);                    // per step; a metric's error names it
//   Metrics m = tally.result();           // loss, average_loss, accuracy
class EvalTally {
 public:
  void add_metric(std::string name, std::unique_ptr<Metric> metric, size_t at, bool weighted);
  runtime::Status add(const std::vector<runtime::Tensor>& values);
  double examples() const { return examples_; }
  Metrics result() const;

 private:
  struct Entry {
    std::string name;
    std::unique_ptr<Metric> metric;
    size_t at = 0;
    bool weighted = false;
  };
  std::vector<Entry> metrics_;
  double loss_sum_ = 0, examples_ = 0;
};

// The counts of a confusion_matrix metric, [true class][predicted class].
std::vector<std::vector<int64_t>> confusion_counts(const Metric& confusion_matrix);

// The adjusted Rand index of two labelings of the same examples: 1 when they agree up to the
// names of the groups, about 0 for independent ones (scikit-learn's adjusted_rand_score).
runtime::Result<double> adjusted_rand_score(const runtime::Tensor& labels_true,
                                            const runtime::Tensor& labels_pred);

// Every element of a numeric tensor as double.
std::vector<double> as_doubles(const runtime::Tensor& t);

}  // namespace troupe::estimators
