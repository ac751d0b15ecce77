#include "estimators/model_graph.h"

#include <map>
#include <utility>

#include "ops/array_ops.h"
#include "ops/sparse_ops.h"
#include "ops/state_ops.h"

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
      if (names[c] == data.label) {
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

Status build_model_graph(const ModelFn& model_fn, Mode mode, const input::Dataset& data,
                         std::vector<InputComponent> components, const Params& params,
                         const RunConfig& config, ModelGraph* out) {
  out->components = std::move(components);
  out->label = data.label;
  if (config.tf_random_seed != 0) out->graph.set_seed(config.tf_random_seed);
  runtime::GraphBuilder b(&out->graph);
  out->global_step = ops::global_step(b);
  std::map<std::string, Output> features;
  Output labels;
  for (const InputComponent& c : out->components) {
    std::vector<int64_t> dims{-1};
    dims.insert(dims.end(), c.dims.begin(), c.dims.end());
    Output p = ops::placeholder(b, c.dtype, runtime::Shape(dims), c.name);
    out->inputs.push_back(p);
    if (c.name == data.label && !data.label.empty()) {
      labels = p;
    } else {
      features[c.name] = p;
    }
  }
  if (mode != Mode::kPredict && !labels.valid()) {
    return runtime::invalid_argument(mode_name(mode), ": the dataset ", data.source->name(),
                                     " has no label column");
  }
  ModelInputs in{b, features, mode == Mode::kPredict ? Output{} : labels, mode, params, config};
  Result<EstimatorSpec> spec = model_fn(in);
  const std::string where = std::string("model_fn (") + mode_name(mode) + ")";
  if (!spec.ok()) return spec.status().with_context(where);
  if (!b.ok()) return b.status().with_context(where);
  TROUPE_RETURN_IF_ERROR(validate_spec(*spec, mode, out->graph).with_context(where));
  out->spec = std::move(*spec);
  out->init = ops::global_variables_initializer(b);
  if (!b.ok()) return b.status().with_context(where);
  return runtime::ok_status();
}

}  // namespace troupe::estimators
