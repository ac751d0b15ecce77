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

runtime::Status check_loss(Task task, const std::string& loss) {
  if (loss.empty()) return runtime::ok_status();
  if (task == Task::kClassifier && loss != "log" && loss != "hinge") {
    return runtime::invalid_argument("loss '", loss, "' is not log or hinge");
  }
  if (task == Task::kRegressor && loss != "squared" && loss != "epsilon_insensitive") {
    return runtime::invalid_argument("loss '", loss, "' is not squared or epsilon_insensitive");
  }
  return runtime::ok_status();
}

runtime::Result<EstimatorSpec> head_spec(ModelInputs& in, const Head& head, Output logits,
                                         const ops::Optimizer& optimizer, Output regularization) {
  TROUPE_RETURN_IF_ERROR(check_loss(head.task, head.loss));
  runtime::GraphBuilder& b = in.b;
  EstimatorSpec spec;
  if (head.task == Task::kClassifier) {
    const bool hinge = head.loss == "hinge";
    Output classes = ops::argmax(b, logits, 1, DType::kInt64);
    spec.predictions = {{"classes", classes}, {"logits", logits}};
    Output probabilities;
    if (!hinge) {
      probabilities = ops::softmax(b, logits);
      spec.predictions["probabilities"] = probabilities;
    }
    spec.export_scores = hinge ? logits : probabilities;
    if (in.mode == Mode::kPredict) return spec;
    Output labels = ops::reshape(b, ops::cast(b, in.labels, DType::kInt64), {-1});
    if (hinge) {
      // One-vs-rest: class k's score should be >= 1 for its examples and <= -1 for the rest.
      Output signs = ops::sub(b, ops::mul(b, ops::one_hot(b, labels, head.n_classes), 2.0), 1.0);
      Output margins = ops::add(b, ops::neg(b, ops::mul(b, signs, logits)), 1.0);
      spec.loss = ops::reduce_mean(
          b, ops::reduce_sum(b, ops::maximum(b, margins, ops::zeros_like(b, margins)), {1}));
    } else {
      spec.loss =
          ops::reduce_mean(b, ops::sparse_softmax_cross_entropy_with_logits(b, labels, logits));
    }
    spec.eval_metric_ops["accuracy"] = {"accuracy", labels, classes};
    if (head.n_classes == 2) {
      if (!hinge) {
        Output positive = ops::reshape(b, ops::slice(b, probabilities, {0, 1}, {-1, 1}), {-1});
        spec.eval_metric_ops["auc"] = {"auc", labels, positive};
      }
      spec.eval_metric_ops["precision"] = {"precision", labels, classes};
      spec.eval_metric_ops["recall"] = {"recall", labels, classes};
    }
  } else {
    spec.predictions = {{"predictions", logits}};
    spec.export_regression = logits;
    if (in.mode == Mode::kPredict) return spec;
    Output labels =
        ops::reshape(b, ops::cast(b, in.labels, DType::kFloat32), {-1, head.label_dimension});
    if (head.loss == "epsilon_insensitive") {
      Output excess = ops::sub(b, ops::abs(b, ops::sub(b, labels, logits)), head.epsilon);
      spec.loss = ops::reduce_mean(b, ops::maximum(b, excess, ops::zeros_like(b, excess)));
    } else {
      spec.loss = ops::mean_squared_error(b, labels, logits);
    }
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
