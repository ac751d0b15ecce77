#include "estimators/canned/rnn.h"

#include "estimators/canned/model_impl.h"
#include "estimators/canned/runtime_names.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/rnn.h"
#include "ops/state_ops.h"
#include "ops/strided_slice.h"

namespace troupe::estimators {

namespace {

// Sequence columns, and the others: TF's sequence_feature_columns and context_feature_columns.
void split_columns(const std::vector<FeatureColumn>& all, std::vector<FeatureColumn>* sequence,
                   std::vector<FeatureColumn>* context) {
  for (const FeatureColumn& c : all) (c.is_sequence() ? sequence : context)->push_back(c);
}

}  // namespace

Status RNNOptions::validate(Task task) const {
  const std::string model = model_name<RNNOptions>(task);
  if (num_units.empty()) return param_error(model, "num_units", "no recurrent layer");
  for (int64_t u : num_units) {
    if (u < 1) return param_error(model, "num_units", "every layer needs at least one unit");
  }
  if (cell_type != "lstm" && cell_type != "gru") {
    return param_error(model, "cell_type", "'" + cell_type + "' is not lstm or gru");
  }
  if (time_steps < 0) return param_error(model, "time_steps", "negative");
  TROUPE_RETURN_IF_ERROR(check_outputs(model, task, n_classes, label_dimension));
  TROUPE_RETURN_IF_ERROR(check_optimizer(model, optimizer));
  TROUPE_RETURN_IF_ERROR(head_of(*this, task).validate().with_context(model));
  std::vector<FeatureColumn> sequence_columns, context_columns;
  split_columns(feature_columns, &sequence_columns, &context_columns);
  const bool sequences = !sequence_columns.empty();
  for (const FeatureColumn& c : feature_columns) {
    if (!sequences && c.kind != FeatureColumn::Kind::kNumeric) {
      return param_error(model, "feature_columns",
                         "'" + c.key +
                             "' is not numeric: a sequence is read from numbers, or from "
                             "sequence columns");
    }
  }
  if (sequences) {
    TROUPE_RETURN_IF_ERROR(validate_sequence_columns(sequence_columns).with_context(model));
    if (!context_columns.empty()) {
      TROUPE_RETURN_IF_ERROR(
          validate_columns(context_columns, /*for_linear=*/false).with_context(model));
    }
  }
  if (sequences && time_steps != 0) {
    return param_error(model, "time_steps",
                       "sequence columns give their own steps; leave time_steps at 0");
  }
  return fit.validate(model);
}

ModelFn RNNOptions::model_fn(Task task) const {
  return [o = *this, task](ModelInputs& in) -> Result<EstimatorSpec> {
    TROUPE_RETURN_IF_ERROR(o.validate(task));
    runtime::GraphBuilder& b = in.b;
    const Head head = head_of(o, task);
    // The steps: sequence columns' (each example as long as it is), or an example's numbers
    // split into time_steps.
    Output sequence, lengths;
    int64_t size = 0;
    std::vector<FeatureColumn> sequence_columns, context_columns;
    split_columns(o.feature_columns, &sequence_columns, &context_columns);
    if (!sequence_columns.empty()) {
      TROUPE_ASSIGN_OR_RETURN(SequenceInput s, sequence_input_layer(in, sequence_columns, &size));
      sequence = s.values;
      lengths = s.lengths;
      if (!context_columns.empty()) {
        // TF's concatenate_context_input: the example's other features beside every step.
        int64_t width = 0;
        TROUPE_ASSIGN_OR_RETURN(Output context, input_layer(in, context_columns, &width));
        Output one_a_step = ops::strided_slice(b, sequence,
                                               {.begin = {0, 0, 0},
                                                .end = {0, 0, 1},
                                                .strides = {1, 1, 1},
                                                .begin_mask = 7,
                                                .end_mask = 3});
        sequence = ops::concat(b,
                               {sequence, ops::add(b, ops::expand_dims(b, context, 1),
                                                   ops::zeros_like(b, one_a_step))},
                               2);
        size += width;
      }
    } else {
      int64_t width = 0;
      TROUPE_ASSIGN_OR_RETURN(Output x, dense_features(in, o, &width));
      const int64_t steps = o.time_steps == 0 ? width : o.time_steps;
      if (width % steps != 0) {
        return param_error(model_name<RNNOptions>(task), "time_steps",
                           std::to_string(width) + " numbers an example do not split into " +
                               std::to_string(steps) + " steps");
      }
      size = width / steps;
      sequence = ops::reshape(b, x, {-1, steps, size});
    }
    Output last;
    for (size_t i = 0; i < o.num_units.size(); ++i) {
      const std::string layer = "rnn/layer_" + std::to_string(i);
      auto make_cell = [&](const std::string& scope) {
        return o.cell_type == "gru" ? ops::gru_cell(b, scope + "/gru_cell", size, o.num_units[i])
                                    : ops::lstm_cell(b, scope + "/lstm_cell", size, o.num_units[i]);
      };
      if (o.bidirectional) {
        auto fw = make_cell(layer + "/fw");
        auto bw = make_cell(layer + "/bw");
        ops::BidirectionalOutputs r =
            ops::bidirectional_dynamic_rnn(b, *fw, *bw, sequence, lengths, layer);
        if (!b.ok()) return b.status();
        sequence = r.outputs;
        // Each direction's h after reading the whole sequence its way.
        last = ops::concat(b, {r.fw.final_state.back(), r.bw.final_state.back()}, 1);
        size = 2 * o.num_units[i];
        continue;
      }
      auto cell = make_cell(layer);
      ops::RnnOutputs r = ops::dynamic_rnn(b, *cell, sequence, lengths, layer);
      if (!b.ok()) return b.status();
      sequence = r.outputs;
      last = r.final_state.back();  // h, the last step's output
      size = o.num_units[i];
    }
    const int64_t units = logits_dimension(head);
    Output logits;
    {
      auto scope = b.name_scope("rnn/logits");
      Output w = ops::variable(b, "kernel", Shape{size, units}, DType::kFloat32,
                               ops::glorot_uniform(b, Shape{size, units}));
      Output bias = ops::variable(b, "bias", Shape{units}, DType::kFloat32,
                                  ops::zeros(b, Shape{units}, DType::kFloat32));
      logits = ops::bias_add(b, ops::matmul(b, last, w), bias);
    }
    return head_spec(in, head, logits, o.optimizer);
  };
}

template class CannedModel<RNNOptions, Task::kClassifier>;
template class CannedModel<RNNOptions, Task::kRegressor>;

}  // namespace troupe::estimators
