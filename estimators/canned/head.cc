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
  return head_spec(in, head, logits, std::vector<ops::OptimizerPart>{{optimizer, {}}},
                   regularization);
}

runtime::Result<EstimatorSpec> head_spec(ModelInputs& in, const Head& head, Output logits,
                                         const std::vector<ops::OptimizerPart>& parts,
                                         Output regularization) {
  if (parts.empty()) return runtime::invalid_argument("head_spec: no optimizer");
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
      // Crammer and Singer's multi-class hinge: the true class's score should beat every other
      // by 1, max_j (f_j + 1[j != y]) - f_y (the binary hinge for two classes). One-vs-rest
      // cannot separate a class that lies between two others.
      Output onehot = ops::one_hot(b, labels, head.n_classes);
      Output truth = ops::reduce_sum(b, ops::mul(b, logits, onehot), {1}, /*keep_dims=*/true);
      Output margins = ops::sub(b, ops::add(b, ops::neg(b, onehot), 1.0), truth);
      spec.loss = ops::reduce_mean(b, ops::reduce_max(b, ops::add(b, logits, margins), {1}));
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
    Output predictions = logits;
    if (!head.label.mean.empty()) {
      const int64_t d = head.label_dimension;
      if (static_cast<int64_t>(head.label.mean.size()) != d ||
          static_cast<int64_t>(head.label.scale.size()) != d) {
        return runtime::invalid_argument("the label's statistics have ", head.label.mean.size(),
                                         " values for label_dimension ", d);
      }
      auto scope = b.name_scope("head");
      auto held = [&](const char* name, const std::vector<float>& v) {
        return ops::variable(b, name, Shape{d}, DType::kFloat32,
                             ops::constant(b, runtime::Tensor::from_vector(Shape{d}, v)),
                             /*trainable=*/false);
      };
      predictions = ops::add(b, ops::mul(b, logits, held("label_scale", head.label.scale)),
                             held("label_mean", head.label.mean));
    }
    spec.predictions = {{"predictions", predictions}};
    spec.export_regression = predictions;
    if (in.mode == Mode::kPredict) return spec;
    Output labels =
        ops::reshape(b, ops::cast(b, in.labels, DType::kFloat32), {-1, head.label_dimension});
    if (head.loss == "epsilon_insensitive") {
      Output excess = ops::sub(b, ops::abs(b, ops::sub(b, labels, predictions)), head.epsilon);
      spec.loss = ops::reduce_mean(b, ops::maximum(b, excess, ops::zeros_like(b, excess)));
    } else {
      spec.loss = ops::mean_squared_error(b, labels, predictions);
    }
    spec.eval_metric_ops["rmse"] = {"rmse", labels, predictions};
    spec.eval_metric_ops["mae"] = {"mae", labels, predictions};
  }
  if (in.mode == Mode::kTrain) {
    // One variable the Experiment lowers on a plateau: the first part's rate; the others keep
    // their ratio to it.
    const double first = parts[0].optimizer.learning_rate;
    Output lr = ops::variable(b, "learning_rate", Shape{}, DType::kFloat32,
                              ops::fill(b, Shape{}, first, DType::kFloat32),
                              /*trainable=*/false);
    std::vector<ops::OptimizerPart> scheduled = parts;
    for (ops::OptimizerPart& p : scheduled) {
      const double ratio = first > 0 ? p.optimizer.learning_rate / first : 1.0;
      p.optimizer.learning_rate_tensor = ratio == 1.0 ? lr : ops::mul(b, lr, ratio);
    }
    Output objective = regularization.valid() ? ops::add(b, spec.loss, regularization) : spec.loss;
    spec.train_op = ops::minimize(b, objective, scheduled);
  }
  return spec;
}

}  // namespace troupe::estimators
