#include "estimators/canned/linear.h"

#include "estimators/canned/input_layer.h"
#include "estimators/canned/model_impl.h"
#include "estimators/canned/runtime_names.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/state_ops.h"

namespace troupe::estimators {

Status LinearOptions::validate(Task task) const {
  const std::string model = model_name<LinearOptions>(task);
  TROUPE_RETURN_IF_ERROR(check_outputs(model, task, n_classes, label_dimension));
  if (Status s = check_loss(task, loss); !s.ok()) return param_error(model, "loss", s.message());
  if (!(epsilon >= 0)) return param_error(model, "epsilon", "negative");
  TROUPE_RETURN_IF_ERROR(check_optimizer(model, optimizer));
  // Its message names the head option that is wrong (class_weights, label_vocabulary, ...).
  TROUPE_RETURN_IF_ERROR(head_of(*this, task).validate().with_context(model));
  if (!(l1 >= 0)) return param_error(model, "l1", "negative");
  if (!(l2 >= 0)) return param_error(model, "l2", "negative");
  if (partitions < 1) return param_error(model, "partitions", "below 1");
  if (!feature_columns.empty()) {
    TROUPE_RETURN_IF_ERROR(validate_columns(feature_columns, /*for_linear=*/true));
  }
  return fit.validate(model);
}

Result<Output> linear_logits(ModelInputs& in, const LinearOptions& o, int64_t units,
                             std::vector<Output>* weights) {
  std::vector<FeatureColumn> columns = o.feature_columns;
  if (columns.empty()) {
    TROUPE_ASSIGN_OR_RETURN(
        columns, numeric_columns(in, o.feature_keys, o.standardize, o.head.weight_column));
  }
  return linear_model(in, columns, units, weights, "linear/linear_model", o.partitions);
}

ModelFn LinearOptions::model_fn(Task task) const {
  return [o = *this, task](ModelInputs& in) -> Result<EstimatorSpec> {
    // Options given to a constructor are checked here, where they are first used.
    TROUPE_RETURN_IF_ERROR(o.validate(task));
    runtime::GraphBuilder& b = in.b;
    Head head = head_of(o, task);
    head.loss = o.loss;
    head.epsilon = o.epsilon;
    const int64_t dim = logits_dimension(head);
    std::vector<Output> weights;
    TROUPE_ASSIGN_OR_RETURN(Output logits, linear_logits(in, o, dim, &weights));
    ops::Optimizer opt = o.optimizer;
    Output penalty;
    if (opt.kind == ops::Optimizer::Kind::kFtrl) {
      opt.l1 = o.l1;
      opt.l2 = o.l2;
    } else if (in.mode == Mode::kTrain && (o.l1 > 0 || o.l2 > 0)) {
      std::vector<Output> terms;
      for (const Output& w : weights) {
        if (o.l1 > 0) terms.push_back(ops::mul(b, ops::reduce_sum(b, ops::abs(b, w)), o.l1));
        if (o.l2 > 0) terms.push_back(ops::mul(b, ops::reduce_sum(b, ops::square(b, w)), o.l2));
      }
      penalty = terms.size() == 1 ? terms[0] : ops::add_n(b, terms);
    }
    return head_spec(in, head, logits, opt, penalty);
  };
}

template class CannedModel<LinearOptions, Task::kClassifier>;
template class CannedModel<LinearOptions, Task::kRegressor>;

}  // namespace troupe::estimators
