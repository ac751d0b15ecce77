#include "estimators/canned/head.h"

#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/state_ops.h"
#include "ops/strided_slice.h"
#include "ops/training_ops.h"

namespace troupe::estimators {

using runtime::DType;
using runtime::Output;
using runtime::Shape;

int64_t logits_dimension(const Head& head) {
  return head.task == Task::kClassifier ? head.n_classes : head.label_dimension;
}

runtime::Result<EstimatorSpec> head_spec(ModelInputs& in, const Head& head, Output logits,
                                         const ops::Optimizer& optimizer, Output regularization) {
  runtime::GraphBuilder& b = in.b;
  EstimatorSpec spec;
  if (head.task == Task::kClassifier) {
    Output classes = ops::argmax(b, logits, 1, DType::kInt64);
    Output probabilities = ops::softmax(b, logits);
    spec.predictions = {{"classes", classes}, {"probabilities", probabilities}, {"logits", logits}};
    spec.export_scores = probabilities;
    if (in.mode == Mode::kPredict) return spec;
    Output labels = ops::reshape(b, ops::cast(b, in.labels, DType::kInt64), {-1});
    spec.loss =
        ops::reduce_mean(b, ops::sparse_softmax_cross_entropy_with_logits(b, labels, logits));
    spec.eval_metric_ops["accuracy"] = {"accuracy", labels, classes};
    if (head.n_classes == 2) {
      Output positive = ops::reshape(b, ops::slice(b, probabilities, {0, 1}, {-1, 1}), {-1});
      spec.eval_metric_ops["auc"] = {"auc", labels, positive};
      spec.eval_metric_ops["precision"] = {"precision", labels, classes};
      spec.eval_metric_ops["recall"] = {"recall", labels, classes};
    }
  } else {
    spec.predictions = {{"predictions", logits}};
    spec.export_regression = logits;
    if (in.mode == Mode::kPredict) return spec;
    Output labels =
        ops::reshape(b, ops::cast(b, in.labels, DType::kFloat32), {-1, head.label_dimension});
    spec.loss = ops::mean_squared_error(b, labels, logits);
    spec.eval_metric_ops["rmse"] = {"rmse", labels, logits};
    spec.eval_metric_ops["mae"] = {"mae", labels, logits};
  }
  if (in.mode == Mode::kTrain) {
    Output lr = ops::variable(b, "learning_rate", Shape{}, DType::kFloat32,
                              ops::fill(b, Shape{}, optimizer.learning_rate, DType::kFloat32),
                              /*trainable=*/false);
    ops::Optimizer opt = optimizer;
    opt.learning_rate_tensor = lr;
    Output objective = regularization.valid() ? ops::add(b, spec.loss, regularization) : spec.loss;
    spec.train_op = ops::minimize(b, objective, opt);
  }
  return spec;
}

}  // namespace troupe::estimators
