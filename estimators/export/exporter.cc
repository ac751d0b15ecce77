#include "estimators/export/exporter.h"

#include "ops/state_ops.h"

namespace troupe::estimators {

runtime::Result<serving::SavedModel> saved_model_of(
    const runtime::Graph& graph, const EstimatorSpec& spec,
    const std::map<std::string, runtime::Output>& inputs, runtime::Output examples,
    const runtime::VariableStore& variables, int64_t global_step,
    std::vector<std::string> class_labels) {
  if (!class_labels.empty() && spec.export_scores.valid()) {
    const runtime::Shape& scores = graph.shape(spec.export_scores);
    if (scores.rank_known() && scores.rank() == 2 && scores.dim(1) >= 0 &&
        scores.dim(1) != static_cast<int64_t>(class_labels.size())) {
      return runtime::invalid_argument("export: ", class_labels.size(), " class labels for ",
                                       scores.dim(1), " classes");
    }
  }
  serving::SavedModel saved;
  saved.graph = graph;
  saved.class_labels = std::move(class_labels);
  saved.variables.global_step = global_step;
  for (int id : graph.variables()) {
    const std::string& name = ops::variable_name(graph.node(id));
    TROUPE_ASSIGN_OR_RETURN(saved.variables.tensors[name], variables.read(name));
  }
  const auto& outputs = spec.export_outputs.empty() ? spec.predictions : spec.export_outputs;
  // As TF's canned estimators: serving_default and predict answer every output.
  const serving::Signature predict = serving::make_signature(graph, "predict", inputs, outputs);
  saved.signatures[serving::kDefaultSignature] = predict;
  saved.signatures["predict"] = predict;
  std::map<std::string, runtime::Output> parsed = inputs;
  if (examples.valid()) parsed = {{"inputs", examples}};
  if (spec.export_scores.valid()) {
    std::map<std::string, runtime::Output> out{{"scores", spec.export_scores}};
    saved.signatures["classification"] = serving::make_signature(graph, "classify", parsed, out);
  }
  if (spec.export_regression.valid()) {
    std::map<std::string, runtime::Output> out{{"outputs", spec.export_regression}};
    saved.signatures["regression"] = serving::make_signature(graph, "regress", parsed, out);
  }
  for (const auto& [head, scores] : spec.head_scores) {
    std::map<std::string, runtime::Output> out{{"scores", scores}};
    if (auto names = spec.head_classes.find(head); names != spec.head_classes.end()) {
      out["classes"] = names->second;
    }
    saved.signatures[head] = serving::make_signature(graph, "classify", parsed, out);
  }
  for (const auto& [head, values] : spec.head_regression) {
    saved.signatures[head] =
        serving::make_signature(graph, "regress", parsed, {{"outputs", values}});
  }
  return saved;
}

}  // namespace troupe::estimators
