// The model_fn contract: a function that builds a model's graph for one mode and says what to
// train, evaluate and predict, as tf.estimator's model_fn returning an EstimatorSpec.
//
//   Result<EstimatorSpec> my_model(ModelInputs& in) {
//     Output x = in.features.at("image");
//     Output logits = ...;                                  // built with in.b
//     EstimatorSpec spec;
//     spec.predictions["classes"] = ops::argmax(in.b, logits, 1);
//     if (in.mode == Mode::kPredict) return spec;
//     spec.loss = ...;
//     spec.eval_metric_ops["accuracy"] = {"accuracy", in.labels, spec.predictions["classes"]};
//     spec.eval_metric_ops["iou"] =
//         MetricSpec::of(ops::metrics::mean_iou(in.b, in.labels, spec.predictions["classes"], 10));
//     if (in.mode == Mode::kTrain) spec.train_op = ops::minimize(in.b, spec.loss, opt);
//     return spec;
//   }
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "estimators/run_config.h"
#include "ops/metric_ops.h"
#include "runtime/graph_builder.h"

namespace troupe::estimators {

class SessionRunHook;

enum class Mode { kTrain, kEval, kPredict };
const char* mode_name(Mode mode);  // "train", "eval", "infer" (TF's ModeKeys)

// Hyperparameters by name, as TF's params dict: values are text, read with param().
using Params = std::map<std::string, std::string>;
double param(const Params& p, const std::string& name, double fallback);
std::string param(const Params& p, const std::string& name, const std::string& fallback);

struct ModelInputs {
  runtime::GraphBuilder& b;
  std::map<std::string, runtime::Output> features;
  runtime::Output labels;  // invalid when predicting
  Mode mode;
  const Params& params;
  const RunConfig& config;
  // Every label by its column's name, `labels` among them, as TF's dict of labels: a
  // multi-head model's heads read theirs (input::with_labels). Empty when predicting.
  std::map<std::string, runtime::Output> labels_by_name;
};

// A streaming metric of an evaluation: either a metrics.h kind over labels and predictions
// (built as graph ops, ops/metric_ops.h, when the kind has them; counted on the host from the
// fetched tensors when not), or a model_fn's own graph metric, as tf.metrics' (value, update_op)
// pairs: MetricSpec::of(ops::metrics::mean_iou(b, labels, classes, 10)).
struct MetricSpec {
  std::string kind;
  runtime::Output labels;
  runtime::Output predictions;
  runtime::Output weights;  // optional: one per example (a weight column), as tf.metrics'
  runtime::Output value;    // a graph metric's: read once the evaluation's batches are in
  runtime::Output update;   // a graph metric's: run with every batch

  static MetricSpec of(const ops::StreamingMetric& m) {
    MetricSpec s;
    s.value = m.value;
    s.update = m.update;
    return s;
  }
  bool in_graph() const { return update.valid(); }
};

struct EstimatorSpec {
  std::map<std::string, runtime::Output> predictions;
  runtime::Output loss;  // a scalar; required to train and evaluate
  int train_op = -1;     // required to train
  // Optional: the (first) optimizer's rate as it trains, a scalar TensorBoard shows.
  runtime::Output learning_rate;
  std::map<std::string, MetricSpec> eval_metric_ops;
  // Outputs an exported model serves through its predict signatures; empty: the predictions.
  std::map<std::string, runtime::Output> export_outputs;
  // What it serves through TF Serving's classify and regress methods, as tf.estimator's
  // ClassificationOutput and RegressionOutput: class scores [batch, classes] (a "classification"
  // signature), a value per example [batch] or [batch, 1] (a "regression" signature).
  runtime::Output export_scores;
  runtime::Output export_regression;
  // A multi-head model's (heads.h): each head's, by its name, served through a classify or
  // regress signature of that name, as TF's multi_head exports a signature per head.
  std::map<std::string, runtime::Output> head_scores;
  std::map<std::string, runtime::Output> head_regression;
  // A classifier head's class names [batch, classes] beside its scores, when it has names.
  std::map<std::string, runtime::Output> head_classes;
  std::vector<std::shared_ptr<SessionRunHook>> training_hooks;
  std::vector<std::shared_ptr<SessionRunHook>> evaluation_hooks;
  std::vector<std::shared_ptr<SessionRunHook>> prediction_hooks;
};

using ModelFn = std::function<runtime::Result<EstimatorSpec>(ModelInputs& inputs)>;

// What `mode` needs of a spec, as tf.estimator's EstimatorSpec checks on construction: a scalar
// loss to train and evaluate, a train op to train, predictions to predict, every metric with its
// labels and predictions. The error says what is missing.
runtime::Status validate_spec(const EstimatorSpec& spec, Mode mode, const runtime::Graph& graph);

}  // namespace troupe::estimators
