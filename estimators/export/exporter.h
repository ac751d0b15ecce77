// What an Estimator exports for serving, as tf.estimator's export: the SavedModel of a
// prediction graph with the signatures its spec asks for. predict and serving_default answer
// every prediction (or export output); a spec with export_scores adds classification, one with
// export_regression adds regression (TF Serving's classify and regress methods), both taking
// serialized tf.Example protos where the graph parses them; a multi-head spec adds a classify
// or regress signature per head, named after it.
//
//   TROUPE_ASSIGN_OR_RETURN(serving::SavedModel saved,
//                           saved_model_of(graph, spec, {{"x", x}}, examples, store, step, {}));
//   TROUPE_ASSIGN_OR_RETURN(std::string dir, serving::write_saved_model("exports", saved));
//
// Estimator::export_saved_model builds the prediction graph and brings the variables in; this
// file decides what the export holds. Plain functions; thread-safe for distinct arguments.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "estimators/export/saved_model.h"
#include "estimators/model_fn.h"
#include "runtime/variable_store.h"

namespace troupe::estimators {

// `inputs`: the placeholders the signatures read, by feature name; `examples`, when valid,
// serialized tf.Example protos parsed into them (model_graph.h's build_serving_graph), which
// the classification and regression signatures then take as their one input, "inputs", as
// TF's do. Every variable of `graph` is read from `variables`; class_labels must name every
// class of export_scores.
runtime::Result<serving::SavedModel> saved_model_of(
    const runtime::Graph& graph, const EstimatorSpec& spec,
    const std::map<std::string, runtime::Output>& inputs, runtime::Output examples,
    const runtime::VariableStore& variables, int64_t global_step,
    std::vector<std::string> class_labels);

}  // namespace troupe::estimators
