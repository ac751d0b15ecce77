#include "estimators/canned/dnn.h"

#include "estimators/canned/input_layer.h"
#include "estimators/canned/model_impl.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/state_ops.h"

namespace troupe::estimators {

using runtime::DType;
using runtime::Output;
using runtime::Result;
using runtime::Shape;
using runtime::Status;

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
  const int64_t bytes = in * out * 4;
  const int64_t parts =
      std::min<int64_t>(partitions, std::max<int64_t>(1, bytes / DNNOptions::kPartitionBytes));
  Output w =
      ops::partitioned_variable(b, "kernel", Shape{in, out}, DType::kFloat32,
                                ops::glorot_uniform(b, Shape{in, out}), static_cast<int>(parts));
  Output bias = ops::variable(b, "bias", Shape{out}, DType::kFloat32,
                              ops::zeros(b, Shape{out}, DType::kFloat32));
  return ops::bias_add(b, ops::matmul(b, x, w), bias);
}

}  // namespace

Status DNNOptions::validate(Task task) const {
  const std::string model = model_name<DNNOptions>(task);
  for (int64_t u : hidden_units) {
    if (u < 1) return param_error(model, "hidden_units", "every layer needs at least one unit");
  }
  if (task == Task::kClassifier && n_classes < 2) return param_error(model, "n_classes", "below 2");
  if (task == Task::kRegressor && label_dimension < 1) {
    return param_error(model, "label_dimension", "below 1");
  }
  if (activation != "relu" && activation != "tanh" && activation != "sigmoid" &&
      activation != "elu") {
    return param_error(model, "activation",
                       "'" + activation + "' is not relu, tanh, sigmoid or elu");
  }
  if (!(dropout >= 0 && dropout < 1)) return param_error(model, "dropout", "not in [0, 1)");
  TROUPE_RETURN_IF_ERROR(check_optimizer(model, optimizer));
  if (Status s = head_of(*this, task).validate(); !s.ok()) {
    return param_error(model, "label_vocabulary", s.message());
  }
  if (partitions < 1) return param_error(model, "partitions", "below 1");
  if (!feature_columns.empty()) {
    TROUPE_RETURN_IF_ERROR(validate_columns(feature_columns, /*for_linear=*/false));
  }
  return fit.validate(model);
}

Result<Output> dnn_logits(ModelInputs& in, const DNNOptions& o, int64_t units) {
  runtime::GraphBuilder& b = in.b;
  int64_t width = 0;
  Output h;
  if (o.feature_columns.empty()) {
    TROUPE_ASSIGN_OR_RETURN(
        h, dense_input_layer(in, o.feature_keys, o.standardize, &width, o.weight_column));
  } else {
    TROUPE_ASSIGN_OR_RETURN(h, input_layer(in, o.feature_columns, &width));
  }
  for (size_t i = 0; i < o.hidden_units.size(); ++i) {
    h = activate(b, o.activation,
                 dense(b, "dnn/hiddenlayer_" + std::to_string(i), h, width, o.hidden_units[i],
                       o.partitions));
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
    TROUPE_ASSIGN_OR_RETURN(Output logits, dnn_logits(in, o, logits_dimension(head)));
    return head_spec(in, head, logits, o.optimizer);
  };
}

template class CannedModel<DNNOptions, Task::kClassifier>;
template class CannedModel<DNNOptions, Task::kRegressor>;

}  // namespace troupe::estimators
