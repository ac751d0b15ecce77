#include "estimators/model_graph.h"

#include <algorithm>
#include <map>
#include <utility>

#include "estimators/metrics.h"
#include "ops/array_ops.h"
#include "ops/parsing_ops.h"
#include "ops/sparse_ops.h"
#include "ops/state_ops.h"
#include "ops/training_ops.h"

namespace troupe::estimators {

using runtime::Output;
using runtime::Result;
using runtime::Status;
using runtime::Tensor;

Result<std::vector<InputComponent>> input_components(const input::Dataset& data) {
  if (!data.source) return runtime::invalid_argument("a dataset without a source");
  if (data.source->num_units() == 0) {
    return runtime::invalid_argument(data.source->name(), " holds no examples");
  }
  std::vector<actors::Chunk> chunks;
  int64_t skipped = 0;
  TROUPE_RETURN_IF_ERROR(data.source->read(0, &chunks, &skipped));
  if (chunks.empty())
    return runtime::invalid_argument(data.source->name(), ": no examples in its first part");
  const std::vector<std::string> names = data.source->components();
  std::vector<InputComponent> out;
  for (size_t c = 0; c < names.size() && c < chunks[0].components.size(); ++c) {
    const Tensor& t = chunks[0].components[c];
    if (data.is_sparse(names[c])) {
      if (names[c] == data.label || std::find(data.more_labels.begin(), data.more_labels.end(),
                                              names[c]) != data.more_labels.end()) {
        return runtime::invalid_argument(data.source->name(), ": the label '", names[c],
                                         "' cannot be sparse");
      }
      // Placeholders [-1, 2], [-1] and [-1]: dense_shape's one dimension is the rank.
      out.push_back({names[c] + ops::kSparseParts[0], runtime::DType::kInt64, {2}, false});
      out.push_back({names[c] + ops::kSparseParts[1], t.dtype(), {}, false});
      out.push_back({names[c] + ops::kSparseParts[2], runtime::DType::kInt64, {}, false});
      continue;
    }
    InputComponent comp{names[c], t.dtype(), {}};
    for (int d = 1; d < t.rank(); ++d) comp.dims.push_back(data.pad ? -1 : t.dim(d));
    out.push_back(std::move(comp));
  }
  return out;
}

bool same_components(const std::vector<InputComponent>& a, const std::vector<InputComponent>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].dtype != b[i].dtype || a[i].dims != b[i].dims) return false;
  }
  return true;
}

namespace {

// The sparse feature a component is a part of (ops::kSparseParts: "tags" for "tags/values"),
// when `components` hold all three of its parts; empty otherwise. Parts come as parts of a
// sparse dataset's batch, and as plain inputs of the same names when an export's inputs are
// rebuilt from what the model saw (ServingInput).
std::string sparse_feature(const std::vector<InputComponent>& components, const std::string& name) {
  const size_t cut = name.rfind('/');
  if (cut == std::string::npos) return "";
  const std::string base = name.substr(0, cut), part = name.substr(cut);
  if (part != ops::kSparseParts[0] && part != ops::kSparseParts[1] &&
      part != ops::kSparseParts[2]) {
    return "";
  }
  for (const char* p : ops::kSparseParts) {
    const bool held = std::any_of(components.begin(), components.end(),
                                  [&](const InputComponent& c) { return c.name == base + p; });
    if (!held) return "";
  }
  return base;
}

bool is_label(const std::vector<std::string>& labels, const std::string& name) {
  return std::find(labels.begin(), labels.end(), name) != labels.end();
}

// The spec that parses each feature of `components` (all but `labels`) from a tf.Example: a
// sparse feature's three parts are one VarLen feature. A dtype tf.Example lacks is read as the
// kind that holds it (float64 as float32, the integers and bool as int64) and cast after.
Result<runtime::FeatureSpecs> example_spec(const std::vector<InputComponent>& components,
                                           const std::vector<std::string>& labels) {
  runtime::FeatureSpecs spec;
  for (const InputComponent& c : components) {
    if (is_label(labels, c.name)) continue;
    const runtime::DType kind = c.dtype == runtime::DType::kString ? runtime::DType::kString
                                : runtime::is_floating(c.dtype)    ? runtime::DType::kFloat32
                                                                   : runtime::DType::kInt64;
    if (const std::string sparse = sparse_feature(components, c.name); !sparse.empty()) {
      if (c.name == sparse + ops::kSparseParts[1]) {  // the values tell the kind
        spec[sparse] = {.kind = runtime::FeatureSpec::Kind::kVarLen, .dtype = kind};
      }
      continue;
    }
    for (int64_t d : c.dims) {
      if (d < 0) {
        return runtime::invalid_argument("feature '", c.name,
                                         "' varies in shape between examples: a tf.Example "
                                         "cannot carry it as one fixed-length feature");
      }
    }
    spec[c.name] = {.dtype = kind, .shape = runtime::Shape(c.dims)};
  }
  return spec;
}

// A placeholder per component of `out`, or with `parse`, a string vector of serialized
// tf.Example protos parsed into every feature, each a placeholder_with_default that a caller
// may still feed by name.
Status make_inputs(runtime::GraphBuilder& b, bool parse, ModelGraph* out,
                   std::map<std::string, Output>* features, std::map<std::string, Output>* labels) {
  ops::ParsedExamples parsed;
  if (parse) {
    TROUPE_ASSIGN_OR_RETURN(runtime::FeatureSpecs spec, example_spec(out->components, out->labels));
    out->examples =
        ops::placeholder(b, runtime::DType::kString, runtime::Shape{-1}, "input_example_tensor");
    parsed = ops::parse_example(b, out->examples, spec);
    TROUPE_RETURN_IF_ERROR(b.status());
  }
  for (const InputComponent& c : out->components) {
    std::vector<int64_t> dims{-1};
    dims.insert(dims.end(), c.dims.begin(), c.dims.end());
    const runtime::Shape shape(dims);
    Output p;
    const bool label = is_label(out->labels, c.name);
    if (!parse || label) {
      p = ops::placeholder(b, c.dtype, shape, c.name);
    } else {
      Output value;
      if (const std::string sparse = sparse_feature(out->components, c.name); sparse.empty()) {
        value = parsed.dense.at(c.name);
      } else {
        const ops::SparseOutput& sp = parsed.sparse.at(sparse);
        const std::string part = c.name.substr(sparse.size());
        value = part == ops::kSparseParts[0]   ? sp.indices
                : part == ops::kSparseParts[1] ? sp.values
                                               : sp.dense_shape;
      }
      if (b.dtype(value) != c.dtype) value = ops::cast(b, value, c.dtype, c.name + "/cast");
      p = ops::placeholder_with_default(b, value, shape, c.name);
    }
    out->inputs.push_back(p);
    (label ? *labels : *features)[c.name] = p;
  }
  return b.status();
}

Status build(const ModelFn& model_fn, Mode mode, const std::string& source,
             const std::vector<std::string>& labels, bool parse,
             std::vector<InputComponent> components, const Params& params, const RunConfig& config,
             ModelGraph* out) {
  out->components = std::move(components);
  out->labels = labels;
  out->label = labels.empty() ? "" : labels[0];
  if (config.tf_random_seed != 0) out->graph.set_seed(config.tf_random_seed);
  runtime::GraphBuilder b(&out->graph);
  out->global_step = ops::global_step(b);
  std::map<std::string, Output> features, by_name;
  TROUPE_RETURN_IF_ERROR(make_inputs(b, parse, out, &features, &by_name));
  for (const std::string& l : labels) {
    if (mode != Mode::kPredict && !by_name.count(l)) {
      return runtime::invalid_argument(mode_name(mode), ": the dataset ", source,
                                       " has no label column '", l, "'");
    }
  }
  if (mode != Mode::kPredict && labels.empty()) {
    return runtime::invalid_argument(mode_name(mode), ": the dataset ", source,
                                     " has no label column");
  }
  if (mode == Mode::kPredict) by_name.clear();
  const Output label = by_name.empty() ? Output{} : by_name.at(out->label);
  ModelInputs in{b, features, label, mode, params, config, by_name};
  Result<EstimatorSpec> spec = model_fn(in);
  const std::string where = std::string("model_fn (") + mode_name(mode) + ")";
  if (!spec.ok()) return spec.status().with_context(where);
  if (!b.ok()) return b.status().with_context(where);
  TROUPE_RETURN_IF_ERROR(validate_spec(*spec, mode, out->graph).with_context(where));
  // Synchronous training: each update carries the global step its step read as its round.
  if (mode == Mode::kTrain && config.replicas_to_aggregate > 0) {
    TROUPE_RETURN_IF_ERROR(ops::stamp_updates(b).with_context(where));
  }
  out->spec = std::move(*spec);
  // An evaluation's metrics count in the graph where their kind has graph ops.
  if (mode == Mode::kEval) {
    for (auto& [name, m] : out->spec.eval_metric_ops) {
      if (m.in_graph()) continue;
      auto g = graph_metric(b, m.kind, m.labels, m.predictions, m.weights, name);
      if (!g.ok()) return g.status().with_context(where);
      if (*g) {
        m.value = (*g)->value;
        m.update = (*g)->update;
      }
    }
  }
  out->init = ops::global_variables_initializer(b);
  out->local_init = ops::local_variables_initializer(b);
  if (!b.ok()) return b.status().with_context(where);
  return runtime::ok_status();
}

}  // namespace

Status build_model_graph(const ModelFn& model_fn, Mode mode, const input::Dataset& data,
                         std::vector<InputComponent> components, const Params& params,
                         const RunConfig& config, ModelGraph* out) {
  return build(model_fn, mode, data.source ? data.source->name() : "", data.labels(),
               /*parse=*/false, std::move(components), params, config, out);
}

Status build_serving_graph(const ModelFn& model_fn, std::vector<InputComponent> components,
                           const std::vector<std::string>& labels, const Params& params,
                           const RunConfig& config, ModelGraph* out) {
  return build(model_fn, Mode::kPredict, "", labels, /*parse=*/true, std::move(components), params,
               config, out);
}

}  // namespace troupe::estimators
