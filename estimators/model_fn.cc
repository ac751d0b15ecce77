#include "estimators/model_fn.h"

namespace troupe::estimators {

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::kTrain:
      return "train";
    case Mode::kEval:
      return "eval";
    case Mode::kPredict:
      return "infer";
  }
  return "?";
}

double param(const Params& p, const std::string& name, double fallback) {
  auto it = p.find(name);
  if (it == p.end()) return fallback;
  try {
    return std::stod(it->second);
  } catch (...) {
    return fallback;
  }
}

std::string param(const Params& p, const std::string& name, const std::string& fallback) {
  auto it = p.find(name);
  return it == p.end() ? fallback : it->second;
}

runtime::Status validate_spec(const EstimatorSpec& spec, Mode mode, const runtime::Graph& graph) {
  if (mode != Mode::kPredict && !spec.loss.valid()) {
    return runtime::invalid_argument("returned no loss");
  }
  if (mode == Mode::kTrain && spec.train_op < 0) {
    return runtime::invalid_argument("returned no train_op");
  }
  if (mode == Mode::kPredict && spec.predictions.empty()) {
    return runtime::invalid_argument("returned no predictions");
  }
  if (spec.loss.valid() && graph.shape(spec.loss).rank_known() &&
      graph.shape(spec.loss).rank() != 0) {
    return runtime::invalid_argument("the loss must be a scalar, not ",
                                     graph.shape(spec.loss).to_string());
  }
  for (const auto& [name, output] : spec.predictions) {
    if (!output.valid()) return runtime::invalid_argument("prediction '", name, "' is no output");
  }
  for (const auto& [name, metric] : spec.eval_metric_ops) {
    if (mode == Mode::kPredict) continue;
    if (metric.value.valid() != metric.update.valid()) {
      return runtime::invalid_argument(
          "metric '", name, "' has ",
          metric.value.valid() ? "a value but no update op" : "an update op but no value");
    }
    if (!metric.in_graph() && (!metric.labels.valid() || !metric.predictions.valid())) {
      return runtime::invalid_argument("metric '", name, "' lacks its labels or predictions");
    }
  }
  return runtime::ok_status();
}

}  // namespace troupe::estimators
