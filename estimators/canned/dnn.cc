#include "estimators/canned/dnn.h"

#include "estimators/canned/input_layer.h"
#include "estimators/canned/model_impl.h"
#include "estimators/canned/runtime_names.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/state_ops.h"

namespace troupe::estimators {

namespace {

Output activate(runtime::GraphBuilder& b, const std::string& name, Output x) {
  if (name == "tanh") return ops::tanh(b, x);
  if (name == "sigmoid") return ops::sigmoid(b, x);
  if (name == "elu") return ops::elu(b, x);
  return ops::relu(b, x);
}

Output dense(runtime::GraphBuilder& b, const std::string& scope, Output x, int64_t in, int64_t out,
             int partitions) {
  auto guard = b.name_scope(scope);
  Output w = ops::partitioned_variable(b, "kernel", Shape{in, out}, DType::kFloat32,
                                       ops::glorot_uniform(b, Shape{in, out}),
                                       variable_partitions(in * out * 4, partitions));
  Output bias = ops::variable(b, "bias", Shape{out}, DType::kFloat32,
                              ops::zeros(b, Shape{out}, DType::kFloat32));
  return ops::bias_add(b, ops::matmul(b, x, w), bias);
}

// Batch normalization of the [batch, n] pre-activations (Ioffe and Szegedy 2015), as TF's DNN
// with batch_norm: training normalizes by the batch's moments and moves the averages that
// evaluation and prediction normalize by (momentum 0.999, epsilon 0.001, as tf.estimator).
Output batch_norm(ModelInputs& in, const std::string& scope, Output x, int64_t n,
                  std::vector<int>* updates) {
  runtime::GraphBuilder& b = in.b;
  auto guard = b.name_scope(scope + "/batch_normalization");
  auto var = [&](const char* name, double init, bool trainable) {
    return ops::variable(b, name, Shape{n}, DType::kFloat32,
                         ops::fill(b, Shape{n}, init, DType::kFloat32), trainable);
  };
  Output gamma = var("gamma", 1, true), beta = var("beta", 0, true);
  Output moving_mean = var("moving_mean", 0, false);
  Output moving_variance = var("moving_variance", 1, false);
  Output mean = moving_mean, variance = moving_variance;
  if (in.mode == Mode::kTrain) {
    mean = ops::reduce_mean(b, x, {0});
    variance = ops::reduce_mean(b, ops::square(b, ops::sub(b, x, mean)), {0});
    constexpr double kMomentum = 0.999;
    auto move = [&](Output average, Output batch) {
      Output next = ops::add(b, ops::mul(b, average, kMomentum),
                             ops::mul(b, ops::stop_gradient(b, batch), 1 - kMomentum));
      updates->push_back(ops::assign(b, average, next).node);
    };
    move(moving_mean, mean);
    move(moving_variance, variance);
  }
  Output scale = ops::mul(b, gamma, ops::rsqrt(b, ops::add(b, variance, 1e-3)));
  return ops::add(b, ops::mul(b, ops::sub(b, x, mean), scale), beta);
}

}  // namespace

Status DNNOptions::validate(Task task) const {
  const std::string model = model_name<DNNOptions>(task);
  for (int64_t u : hidden_units) {
    if (u < 1) return param_error(model, "hidden_units", "every layer needs at least one unit");
  }
  TROUPE_RETURN_IF_ERROR(check_outputs(model, task, n_classes, label_dimension));
  if (activation != "relu" && activation != "tanh" && activation != "sigmoid" &&
      activation != "elu") {
    return param_error(model, "activation",
                       "'" + activation + "' is not relu, tanh, sigmoid or elu");
  }
  if (!(dropout >= 0 && dropout < 1)) return param_error(model, "dropout", "not in [0, 1)");
  TROUPE_RETURN_IF_ERROR(check_optimizer(model, optimizer));
  // Its message names the head option that is wrong (class_weights, label_vocabulary, ...).
  TROUPE_RETURN_IF_ERROR(head_of(*this, task).validate().with_context(model));
  if (partitions < 1) return param_error(model, "partitions", "below 1");
  if (!feature_columns.empty()) {
    TROUPE_RETURN_IF_ERROR(validate_columns(feature_columns, /*for_linear=*/false));
  }
  return fit.validate(model);
}

Result<Output> dnn_logits(ModelInputs& in, const DNNOptions& o, int64_t units,
                          std::vector<int>* updates) {
  runtime::GraphBuilder& b = in.b;
  int64_t width = 0;
  TROUPE_ASSIGN_OR_RETURN(Output h, dense_features(in, o, &width, o.partitions));
  for (size_t i = 0; i < o.hidden_units.size(); ++i) {
    const std::string scope = "dnn/hiddenlayer_" + std::to_string(i);
    h = dense(b, scope, h, width, o.hidden_units[i], o.partitions);
    if (o.batch_norm) h = batch_norm(in, scope, h, o.hidden_units[i], updates);
    h = activate(b, o.activation, h);
    if (o.dropout > 0 && in.mode == Mode::kTrain) h = ops::dropout(b, h, o.dropout, true);
    width = o.hidden_units[i];
  }
  return dense(b, "dnn/logits", h, width, units, o.partitions);
}

ModelFn DNNOptions::model_fn(Task task) const {
  return [o = *this, task](ModelInputs& in) -> Result<EstimatorSpec> {
    // Options given to a constructor are checked here, where they are first used.
    TROUPE_RETURN_IF_ERROR(o.validate(task));
    const Head head = head_of(o, task);
    std::vector<int> updates;
    TROUPE_ASSIGN_OR_RETURN(Output logits, dnn_logits(in, o, logits_dimension(head), &updates));
    TROUPE_ASSIGN_OR_RETURN(EstimatorSpec spec, head_spec(in, head, logits, o.optimizer));
    return with_updates(in.b, std::move(spec), updates);
  };
}

template class CannedModel<DNNOptions, Task::kClassifier>;
template class CannedModel<DNNOptions, Task::kRegressor>;

}  // namespace troupe::estimators
