#include "estimators/canned/wide_deep.h"

#include <algorithm>

#include "estimators/canned/dnn.h"
#include "estimators/canned/linear.h"
#include "estimators/canned/model_impl.h"
#include "estimators/canned/runtime_names.h"
#include "ops/math_ops.h"

namespace troupe::estimators {

namespace {

// A part's options: what both parts share, then its own.
template <class Part>
Part part_of(const DNNLinearCombinedOptions& o, ops::Optimizer optimizer,
             std::vector<FeatureColumn> columns) {
  Part p;
  p.n_classes = o.n_classes;
  p.label_dimension = o.label_dimension;
  p.partitions = o.partitions;
  p.optimizer = std::move(optimizer);
  p.feature_columns = std::move(columns);
  return p;
}

DNNOptions deep_part(const DNNLinearCombinedOptions& o) {
  auto d = part_of<DNNOptions>(o, o.dnn_optimizer, o.dnn_feature_columns);
  d.hidden_units = o.dnn_hidden_units;
  d.activation = o.dnn_activation;
  d.dropout = o.dnn_dropout;
  d.batch_norm = o.dnn_batch_norm;
  return d;
}

LinearOptions wide_part(const DNNLinearCombinedOptions& o) {
  return part_of<LinearOptions>(o, o.linear_optimizer, o.linear_feature_columns);
}

// The trainable variables `build` adds to the graph.
template <class F>
Result<Output> new_variables(runtime::GraphBuilder& b, std::vector<int>* vars, F&& build) {
  const std::vector<int> before = b.graph().variables(/*trainable_only=*/true);
  Result<Output> out = build();
  for (int v : b.graph().variables(/*trainable_only=*/true)) {
    if (std::find(before.begin(), before.end(), v) == before.end()) vars->push_back(v);
  }
  return out;
}

}  // namespace

Status DNNLinearCombinedOptions::validate(Task task) const {
  const std::string model = model_name<DNNLinearCombinedOptions>(task);
  if (linear_feature_columns.empty() && dnn_feature_columns.empty()) {
    return param_error(model, "feature_columns",
                       "neither linear_feature_columns nor dnn_feature_columns given");
  }
  TROUPE_RETURN_IF_ERROR(check_outputs(model, task, n_classes, label_dimension));
  // Its message names the head option that is wrong (class_weights, label_vocabulary, ...).
  TROUPE_RETURN_IF_ERROR(head_of(*this, task).validate().with_context(model));
  if (partitions < 1) return param_error(model, "partitions", "below 1");
  if (auto s = ops::validate(dnn_optimizer.schedule); !s.ok()) {
    return param_error(model, "lr_schedule", s.message());  // both parts follow it
  }
  if (!linear_feature_columns.empty()) {
    TROUPE_RETURN_IF_ERROR(validate_columns(linear_feature_columns, /*for_linear=*/true));
    TROUPE_RETURN_IF_ERROR(check_optimizer(model, linear_optimizer));
  }
  if (!dnn_feature_columns.empty()) {
    TROUPE_RETURN_IF_ERROR(validate_columns(dnn_feature_columns, /*for_linear=*/false));
    if (dnn_hidden_units.empty()) {
      return param_error(model, "dnn_hidden_units", "the deep part needs hidden layers");
    }
    for (int64_t u : dnn_hidden_units) {
      if (u < 1) return param_error(model, "dnn_hidden_units", "every layer needs a unit");
    }
    if (!(dnn_dropout >= 0 && dnn_dropout < 1)) {
      return param_error(model, "dnn_dropout", "not in [0, 1)");
    }
    TROUPE_RETURN_IF_ERROR(check_optimizer(model, dnn_optimizer));
  }
  return fit.validate(model);
}

ModelFn DNNLinearCombinedOptions::model_fn(Task task) const {
  return [o = *this, task](ModelInputs& in) -> Result<EstimatorSpec> {
    // Options given to a constructor are checked here, where they are first used.
    TROUPE_RETURN_IF_ERROR(o.validate(task));
    runtime::GraphBuilder& b = in.b;
    const Head head = head_of(o, task);
    const int64_t units = logits_dimension(head);
    std::vector<ops::OptimizerPart> parts;
    std::vector<Output> logits;
    std::vector<int> updates;
    if (!o.linear_feature_columns.empty()) {
      ops::OptimizerPart wide{o.linear_optimizer, {}};
      wide.optimizer.schedule = o.dnn_optimizer.schedule;
      const LinearOptions l = wide_part(o);
      TROUPE_ASSIGN_OR_RETURN(Output w, new_variables(b, &wide.vars, [&] {
                                return linear_logits(in, l, units, nullptr);
                              }));
      logits.push_back(w);
      parts.push_back(std::move(wide));
    }
    if (!o.dnn_feature_columns.empty()) {
      ops::OptimizerPart deep{o.dnn_optimizer, {}};
      const DNNOptions d = deep_part(o);
      TROUPE_ASSIGN_OR_RETURN(Output h, new_variables(b, &deep.vars, [&] {
                                return dnn_logits(in, d, units, &updates);
                              }));
      logits.push_back(h);
      parts.push_back(std::move(deep));
    }
    Output sum = logits.size() == 1 ? logits[0] : ops::add(b, logits[0], logits[1]);
    TROUPE_ASSIGN_OR_RETURN(EstimatorSpec spec, head_spec(in, head, sum, parts));
    return with_updates(b, std::move(spec), updates);
  };
}

template class CannedModel<DNNLinearCombinedOptions, Task::kClassifier>;
template class CannedModel<DNNLinearCombinedOptions, Task::kRegressor>;

}  // namespace troupe::estimators
