// The graph of one mode of a model, as an Estimator builds it: a placeholder for each component
// of a dataset (the source's first unit tells their dtypes and shapes; a sparse component is
// three), the global step, the model_fn's ops, validated against what the mode needs
// (validate_spec), and the variables' initializer.
//
//   TROUPE_ASSIGN_OR_RETURN(auto components, input_components(data));
//   ModelGraph g;
//   TROUPE_RETURN_IF_ERROR(build_model_graph(model_fn, Mode::kTrain, data, components, params,
//                                            config, &g));
//   g.inputs[k];     // the placeholder fed with component k of each batch
//   g.spec.loss;     // what the model_fn said
//
// build_serving_graph builds an export's graph, whose features may also be parsed from
// serialized tf.Example protos.
#pragma once

#include <string>
#include <vector>

#include "estimators/input/dataset.h"
#include "estimators/model_fn.h"
#include "runtime/graph.h"
#include "runtime/status.h"

namespace troupe::estimators {

// A component of a dataset's batches, as a placeholder takes it.
struct InputComponent {
  std::string name;
  runtime::DType dtype = runtime::DType::kFloat32;
  std::vector<int64_t> dims;  // of one example; -1 where examples differ
  bool by_example = true;     // false for a sparse feature's parts: not one row an example
};

// The components of `data`'s batches, in order, from its source's first unit. A source without
// examples, or a sparse label, is an error naming the source.
runtime::Result<std::vector<InputComponent>> input_components(const input::Dataset& data);
bool same_components(const std::vector<InputComponent>& a, const std::vector<InputComponent>& b);

struct ModelGraph {
  runtime::Graph graph;
  EstimatorSpec spec;
  std::vector<InputComponent> components;
  std::vector<runtime::Output> inputs;  // one placeholder per component
  std::string label;                    // the component that is the label; empty: none
  std::vector<std::string> labels;      // label, then a multi-head model's further labels
  runtime::Output global_step;          // its read
  int init = -1;                        // initialises every variable
  int local_init = -1;  // sets the local ones (graph metrics' counts) anew: before an evaluation
  runtime::Output examples;  // build_serving_graph: the serialized tf.Example protos it parses
};

// Builds `mode`'s graph of `model_fn` into `out` (empty). Errors of the model_fn, of its graph
// and of its spec name the mode.
runtime::Status build_model_graph(const ModelFn& model_fn, Mode mode, const input::Dataset& data,
                                  std::vector<InputComponent> components, const Params& params,
                                  const RunConfig& config, ModelGraph* out);
// The prediction graph an export serves, as TF's build_parsing_serving_input_receiver_fn
// makes it: `examples`, a string vector of serialized tf.Example protos, is parsed into every
// feature, and each feature is a placeholder_with_default (ops/parsing_ops.h) that a caller may
// still feed by name. The label component stays a plain placeholder. A feature whose shape
// varies between examples is an error naming it.
runtime::Status build_serving_graph(const ModelFn& model_fn, std::vector<InputComponent> components,
                                    const std::vector<std::string>& labels, const Params& params,
                                    const RunConfig& config, ModelGraph* out);

}  // namespace troupe::estimators
