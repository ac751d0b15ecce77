#include "ops/parsing_ops.h"

#include "ops/array_ops.h"
#include "ops/op_def_names.h"

namespace troupe::ops {

using runtime::FeatureSpec;
using runtime::Tensor;

runtime::Result<std::vector<Shape>> shapes_attr(const std::vector<int64_t>& flat, int64_t count) {
  std::vector<Shape> shapes;
  size_t at = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (at >= flat.size() || flat[at] < 0 || at + 1 + static_cast<size_t>(flat[at]) > flat.size()) {
      return runtime::invalid_argument("the shapes attribute does not hold ", count, " shapes");
    }
    const auto begin = flat.begin() + static_cast<std::ptrdiff_t>(at + 1);
    shapes.emplace_back(std::vector<int64_t>(begin, begin + flat[at]));
    at += 1 + static_cast<size_t>(flat[at]);
  }
  if (at != flat.size()) {
    return runtime::invalid_argument("the shapes attribute holds more than ", count, " shapes");
  }
  return shapes;
}

namespace {

std::vector<int64_t> flatten(const std::vector<Shape>& shapes) {
  std::vector<int64_t> flat;
  for (const Shape& s : shapes) {
    flat.push_back(s.rank());
    flat.insert(flat.end(), s.dims().begin(), s.dims().end());
  }
  return flat;
}

Tensor keys_tensor(const std::vector<std::string>& keys) {
  return Tensor::from_vector(Shape{static_cast<int64_t>(keys.size())}, keys);
}

bool example_kind(DType t) {
  return t == DType::kFloat32 || t == DType::kInt64 || t == DType::kString;
}

// A dtype attribute from a graph of any origin: one of tf.Example's kinds, or the error.
Status kind_of(InferenceContext& c, int64_t type, const std::string& key, DType* out) {
  if (type != static_cast<int64_t>(DType::kFloat32) &&
      type != static_cast<int64_t>(DType::kInt64) && type != static_cast<int64_t>(DType::kString)) {
    return c.error("feature '", key, "': type ", type, " is not float32, int64 or string");
  }
  *out = static_cast<DType>(type);
  return runtime::ok_status();
}

// The serialized protos (a string vector) and the keys' attributes (string vectors).
Status check_keys(InferenceContext& c, const std::vector<const char*>& key_attrs) {
  if (c.input_dtype(0) != DType::kString || !c.input_shape(0).rank_known() ||
      c.input_shape(0).rank() != 1) {
    return c.error("serialized must be a string vector, got ",
                   runtime::dtype_name(c.input_dtype(0)), " ", c.input_shape(0));
  }
  for (const char* attr : key_attrs) {
    if (c.attr<Tensor>(attr).dtype() != DType::kString) return c.error(attr, " must be strings");
  }
  return runtime::ok_status();
}

// Dense outputs from `first` on: [batch, (-1,) shape...] of the defaults' dtypes (inputs 1...).
Status dense_outputs(InferenceContext& c, const char* keys_attr, const char* shapes_attr_name,
                     int first, bool sequence) {
  const Tensor& keys = c.attr<Tensor>(keys_attr);
  if (c.num_inputs() != 1 + keys.num_elements()) {
    return c.error("a default is needed for each of the ", keys.num_elements(), " ", keys_attr);
  }
  auto shapes = shapes_attr(c.attr<std::vector<int64_t>>(shapes_attr_name), keys.num_elements());
  if (!shapes.ok()) return c.error(shapes_attr_name, ": ", shapes.status().message());
  for (int64_t i = 0; i < keys.num_elements(); ++i) {
    const DType dtype = c.input_dtype(static_cast<int>(1 + i));
    if (!example_kind(dtype)) {
      return c.error("feature '", keys.data<std::string>()[i], "': ", runtime::dtype_name(dtype),
                     " is not float32, int64 or string");
    }
    std::vector<int64_t> dims{c.input_shape(0).dim(0)};
    if (sequence) dims.push_back(-1);
    dims.insert(dims.end(), (*shapes)[i].dims().begin(), (*shapes)[i].dims().end());
    c.set_output(first + static_cast<int>(i), dtype, Shape(dims));
  }
  return runtime::ok_status();
}

// The required FixedLen feature's default input: an empty tensor of its dtype.
Output default_of(GraphBuilder& b, const std::string& key, const FeatureSpec& s) {
  return constant(b, s.default_value ? *s.default_value : Tensor(s.dtype, Shape{0}),
                  key + "/default");
}

}  // namespace

// Outputs in TF's order: each VarLen feature's indices, then their values, then their dense
// shapes, then each FixedLen feature's values. A FixedLen feature's default is input 1 + i, of
// its dtype: an empty tensor when the feature is required. dense_shapes flattens each
// feature's rank and dims, one after another.
TROUPE_REGISTER_OP(ParseExample)
    .input("serialized")
    .variadic_input("dense_defaults", 0)
    .output("sparse_indices")
    .output("sparse_values")
    .output("sparse_shapes")
    .output("dense_values")
    .attr("dense_keys", Tensor(DType::kString, Shape{0}))
    .attr("dense_shapes", std::vector<int64_t>{})
    .attr("sparse_keys", Tensor(DType::kString, Shape{0}))
    .attr("sparse_types", std::vector<int64_t>{})
    // A tf.io.SparseFeature's index and value features and size; "", "" and 0 for a VarLen one.
    // Empty: every sparse key is VarLen.
    .attr("sparse_index_keys", Tensor(DType::kString, Shape{0}))
    .attr("sparse_value_keys", Tensor(DType::kString, Shape{0}))
    .attr("sparse_sizes", std::vector<int64_t>{})
    .shape_fn([](InferenceContext& c) -> Status {
      TROUPE_RETURN_IF_ERROR(
          check_keys(c, {"dense_keys", "sparse_keys", "sparse_index_keys", "sparse_value_keys"}));
      const Tensor& sparse = c.attr<Tensor>("sparse_keys");
      const auto& types = c.attr<std::vector<int64_t>>("sparse_types");
      const int ns = static_cast<int>(sparse.num_elements());
      if (static_cast<int>(types.size()) != ns) return c.error("a type is needed each sparse key");
      const auto& sizes = c.attr<std::vector<int64_t>>("sparse_sizes");
      const int64_t index_keys = c.attr<Tensor>("sparse_index_keys").num_elements();
      const int64_t value_keys = c.attr<Tensor>("sparse_value_keys").num_elements();
      if (!(index_keys == 0 && value_keys == 0 && sizes.empty()) &&
          !(index_keys == ns && value_keys == ns && static_cast<int>(sizes.size()) == ns)) {
        return c.error("sparse_index_keys, sparse_value_keys and sparse_sizes hold one each ",
                       "sparse key, or none");
      }
      for (int i = 0; i < ns; ++i) {
        DType dtype;
        TROUPE_RETURN_IF_ERROR(kind_of(c, types[i], sparse.data<std::string>()[i], &dtype));
        c.set_output(i, DType::kInt64, Shape{-1, 2});
        c.set_output(ns + i, dtype, Shape{-1});
        c.set_output(2 * ns + i, DType::kInt64, Shape{2});
      }
      return dense_outputs(c, "dense_keys", "dense_shapes", 3 * ns, /*sequence=*/false);
    })
    .no_gradient()
    .kernel_dtype_from_input(0)
    .doc("serialized tf.Example protos into tensors, as tf.io.parse_example");

// Outputs: each context feature's values, each feature list's values padded to the batch's
// longest, then each feature list's lengths. Context defaults are inputs 1... as ParseExample's.
TROUPE_REGISTER_OP(ParseSequenceExample)
    .input("serialized")
    .variadic_input("context_dense_defaults", 0)
    .output("context_dense_values")
    .output("feature_list_dense_values")
    .output("feature_list_dense_lengths")
    .attr("context_dense_keys", Tensor(DType::kString, Shape{0}))
    .attr("context_dense_shapes", std::vector<int64_t>{})
    .attr("feature_list_dense_keys", Tensor(DType::kString, Shape{0}))
    .attr("feature_list_dense_types", std::vector<int64_t>{})
    .attr("feature_list_dense_shapes", std::vector<int64_t>{})
    .shape_fn([](InferenceContext& c) -> Status {
      TROUPE_RETURN_IF_ERROR(check_keys(c, {"context_dense_keys", "feature_list_dense_keys"}));
      const int nc = static_cast<int>(c.attr<Tensor>("context_dense_keys").num_elements());
      TROUPE_RETURN_IF_ERROR(dense_outputs(c, "context_dense_keys", "context_dense_shapes", 0,
                                           /*sequence=*/false));
      const Tensor& lists = c.attr<Tensor>("feature_list_dense_keys");
      const auto& types = c.attr<std::vector<int64_t>>("feature_list_dense_types");
      const int nf = static_cast<int>(lists.num_elements());
      auto steps = shapes_attr(c.attr<std::vector<int64_t>>("feature_list_dense_shapes"), nf);
      if (!steps.ok() || static_cast<int>(types.size()) != nf) {
        return c.error("a type and a step's shape are needed each feature list");
      }
      const int64_t batch = c.input_shape(0).dim(0);
      for (int i = 0; i < nf; ++i) {
        DType dtype;
        TROUPE_RETURN_IF_ERROR(kind_of(c, types[i], lists.data<std::string>()[i], &dtype));
        std::vector<int64_t> dims{batch, -1};
        dims.insert(dims.end(), (*steps)[i].dims().begin(), (*steps)[i].dims().end());
        c.set_output(nc + i, dtype, Shape(dims));
        c.set_output(nc + nf + i, DType::kInt64, Shape{batch});
      }
      return runtime::ok_status();
    })
    .no_gradient()
    .kernel_dtype_from_input(0)
    .doc(
        "serialized tf.train.SequenceExample protos into tensors, feature lists padded to the "
        "batch's longest, as tf.io.parse_sequence_example");

TROUPE_REGISTER_OP(PlaceholderWithDefault)
    .input("input")
    .output("output")
    .attr("shape", Shape::unknown())
    .shape_fn([](InferenceContext& c) -> Status {
      const Shape& want = c.attr<Shape>("shape");
      const Shape& in = c.input_shape(0);
      if (want.rank_known() && in.rank_known()) {
        bool fits = want.rank() == in.rank();
        for (int d = 0; fits && d < want.rank(); ++d) {
          fits = want.dim(d) < 0 || in.dim(d) < 0 || want.dim(d) == in.dim(d);
        }
        if (!fits) return c.error("its default is ", in, ", not of shape ", want);
      }
      c.set_output(0, c.input_dtype(0), want);
      return runtime::ok_status();
    })
    .gradient([](GraphBuilder&, const Node&, const Grads& dy) { return Grads{dy[0]}; })
    .doc("output = input unless the output is fed (tf.placeholder_with_default)");

ParsedExamples parse_example(GraphBuilder& b, Output serialized, const runtime::FeatureSpecs& spec,
                             const std::string& name) {
  std::vector<std::string> dense_keys, sparse_keys, index_keys, value_keys;
  std::vector<Shape> dense_shapes;
  std::vector<int64_t> sparse_types, sizes;
  std::vector<Output> inputs{serialized};
  for (const auto& [key, s] : spec) {
    if (Status bad = runtime::check_feature_spec(key, s); !bad.ok()) {
      b.record_error(bad.with_context(name));
      return {};
    }
    if (s.kind == FeatureSpec::Kind::kSequence) {
      b.record_error(runtime::invalid_argument(name, ": feature '", key,
                                               "' is a feature list, which no tf.Example has"));
      return {};
    }
    if (s.kind == FeatureSpec::Kind::kVarLen || s.kind == FeatureSpec::Kind::kSparse) {
      sparse_keys.push_back(key);
      sparse_types.push_back(static_cast<int64_t>(s.dtype));
      index_keys.push_back(s.index_key);
      value_keys.push_back(s.value_key);
      sizes.push_back(s.size);
      continue;
    }
    dense_keys.push_back(key);
    dense_shapes.push_back(s.shape);
    inputs.push_back(default_of(b, key, s));
  }
  const std::vector<Output> out = b.add_node("ParseExample", inputs,
                                             {{"dense_keys", keys_tensor(dense_keys)},
                                              {"dense_shapes", flatten(dense_shapes)},
                                              {"sparse_keys", keys_tensor(sparse_keys)},
                                              {"sparse_types", sparse_types},
                                              {"sparse_index_keys", keys_tensor(index_keys)},
                                              {"sparse_value_keys", keys_tensor(value_keys)},
                                              {"sparse_sizes", sizes}},
                                             name);
  ParsedExamples parsed;
  if (out.empty()) return parsed;
  const size_t ns = sparse_keys.size();
  for (size_t i = 0; i < ns; ++i) {
    parsed.sparse[sparse_keys[i]] = SparseOutput{out[i], out[ns + i], out[2 * ns + i]};
  }
  for (size_t i = 0; i < dense_keys.size(); ++i) parsed.dense[dense_keys[i]] = out[3 * ns + i];
  return parsed;
}

ParsedSequences parse_sequence_example(GraphBuilder& b, Output serialized,
                                       const runtime::FeatureSpecs& spec, const std::string& name) {
  std::vector<std::string> context_keys, list_keys;
  std::vector<Shape> context_shapes, step_shapes;
  std::vector<int64_t> list_types;
  std::vector<Output> inputs{serialized};
  for (const auto& [key, s] : spec) {
    if (Status bad = runtime::check_feature_spec(key, s); !bad.ok()) {
      b.record_error(bad.with_context(name));
      return {};
    }
    if (s.kind == FeatureSpec::Kind::kVarLen) {
      b.record_error(runtime::invalid_argument(
          name, ": feature '", key, "' is VarLen; a sequence example's features are dense here"));
      return {};
    }
    if (s.kind == FeatureSpec::Kind::kSequence) {
      list_keys.push_back(key);
      list_types.push_back(static_cast<int64_t>(s.dtype));
      step_shapes.push_back(s.shape);
      continue;
    }
    context_keys.push_back(key);
    context_shapes.push_back(s.shape);
    inputs.push_back(default_of(b, key, s));
  }
  const std::vector<Output> out = b.add_node("ParseSequenceExample", inputs,
                                             {{"context_dense_keys", keys_tensor(context_keys)},
                                              {"context_dense_shapes", flatten(context_shapes)},
                                              {"feature_list_dense_keys", keys_tensor(list_keys)},
                                              {"feature_list_dense_types", list_types},
                                              {"feature_list_dense_shapes", flatten(step_shapes)}},
                                             name);
  ParsedSequences parsed;
  if (out.empty()) return parsed;
  const size_t nc = context_keys.size(), nf = list_keys.size();
  for (size_t i = 0; i < nc; ++i) parsed.context[context_keys[i]] = out[i];
  for (size_t i = 0; i < nf; ++i) {
    parsed.sequences[list_keys[i]] = out[nc + i];
    parsed.lengths[list_keys[i]] = out[nc + nf + i];
  }
  return parsed;
}

ParsedSequences parse_single_sequence_example(GraphBuilder& b, Output serialized,
                                              const runtime::FeatureSpecs& spec,
                                              const std::string& name) {
  ParsedSequences batch =
      parse_sequence_example(b, reshape(b, serialized, {1}, name + "/batch"), spec, name);
  for (auto* part : {&batch.context, &batch.sequences, &batch.lengths}) {
    for (auto& [key, value] : *part) value = squeeze(b, value, {0});
  }
  return batch;
}

Output placeholder_with_default(GraphBuilder& b, Output input, const Shape& shape,
                                const std::string& name) {
  return b.add("PlaceholderWithDefault", {input}, {{"shape", shape}}, name);
}

}  // namespace troupe::ops
