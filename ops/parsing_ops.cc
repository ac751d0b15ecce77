#include "ops/parsing_ops.h"

#include "ops/array_ops.h"
#include "ops/op_def_names.h"

namespace troupe::ops {

using runtime::FeatureSpec;
using runtime::Tensor;

namespace {

// The feature names of a Tensor attribute (string [k]).
const std::string* keys_of(const Tensor& t) { return t.data<std::string>(); }

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
    .shape_fn([](InferenceContext& c) -> Status {
      if (c.input_dtype(0) != DType::kString || !c.input_shape(0).rank_known() ||
          c.input_shape(0).rank() != 1) {
        return c.error("serialized must be a string vector, got ",
                       runtime::dtype_name(c.input_dtype(0)), " ", c.input_shape(0));
      }
      const int64_t batch = c.input_shape(0).dim(0);
      const Tensor& dense = c.attr<Tensor>("dense_keys");
      const Tensor& sparse = c.attr<Tensor>("sparse_keys");
      const auto& types = c.attr<std::vector<int64_t>>("sparse_types");
      const auto& shapes = c.attr<std::vector<int64_t>>("dense_shapes");
      if (dense.dtype() != DType::kString || sparse.dtype() != DType::kString ||
          static_cast<int64_t>(types.size()) != sparse.num_elements() ||
          c.num_inputs() != 1 + dense.num_elements()) {
        return c.error("dense_keys and sparse_keys must be strings, with a default an each dense ",
                       "key and a type each sparse one");
      }
      const int64_t ns = sparse.num_elements();
      for (int64_t i = 0; i < ns; ++i)
        c.set_output(static_cast<int>(i), DType::kInt64, Shape{-1, 2});
      for (int64_t i = 0; i < ns; ++i) {
        const int64_t type = types[static_cast<size_t>(i)];
        const auto dtype = static_cast<DType>(type);
        if (type != static_cast<int64_t>(DType::kFloat32) &&
            type != static_cast<int64_t>(DType::kInt64) &&
            type != static_cast<int64_t>(DType::kString)) {
          return c.error("sparse feature '", keys_of(sparse)[i], "': type ", type,
                         " is not float32, int64 or string");
        }
        c.set_output(static_cast<int>(ns + i), dtype, Shape{-1});
      }
      for (int64_t i = 0; i < ns; ++i)
        c.set_output(static_cast<int>(2 * ns + i), DType::kInt64, Shape{2});
      size_t at = 0;
      for (int64_t i = 0; i < dense.num_elements(); ++i) {
        if (at >= shapes.size() || shapes[at] < 0 ||
            at + 1 + static_cast<size_t>(shapes[at]) > shapes.size()) {
          return c.error("dense_shapes does not hold a shape for '", keys_of(dense)[i], "'");
        }
        std::vector<int64_t> dims{batch};
        dims.insert(dims.end(), shapes.begin() + static_cast<std::ptrdiff_t>(at + 1),
                    shapes.begin() + static_cast<std::ptrdiff_t>(at + 1 + shapes[at]));
        at += 1 + static_cast<size_t>(shapes[at]);
        const DType dtype = c.input_dtype(static_cast<int>(1 + i));
        if (dtype != DType::kFloat32 && dtype != DType::kInt64 && dtype != DType::kString) {
          return c.error("dense feature '", keys_of(dense)[i], "': ", runtime::dtype_name(dtype),
                         " is not float32, int64 or string");
        }
        c.set_output(static_cast<int>(3 * ns + i), dtype, Shape(dims));
      }
      if (at != shapes.size())
        return c.error("dense_shapes holds more than the dense keys' shapes");
      return runtime::ok_status();
    })
    .no_gradient()
    .kernel_dtype_from_input(0)
    .doc("serialized tf.Example protos into tensors, as tf.io.parse_example");

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
  std::vector<std::string> dense_keys, sparse_keys;
  std::vector<int64_t> dense_shapes, sparse_types;
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
    if (s.kind == FeatureSpec::Kind::kVarLen) {
      sparse_keys.push_back(key);
      sparse_types.push_back(static_cast<int64_t>(s.dtype));
      continue;
    }
    dense_keys.push_back(key);
    dense_shapes.push_back(s.shape.rank());
    for (int64_t d : s.shape.dims()) dense_shapes.push_back(d);
    inputs.push_back(constant(b, s.default_value ? *s.default_value : Tensor(s.dtype, Shape{0}),
                              key + "/default"));
  }
  const std::vector<Output> out = b.add_node(
      "ParseExample", inputs,
      {{"dense_keys",
        Tensor::from_vector(Shape{static_cast<int64_t>(dense_keys.size())}, dense_keys)},
       {"dense_shapes", dense_shapes},
       {"sparse_keys",
        Tensor::from_vector(Shape{static_cast<int64_t>(sparse_keys.size())}, sparse_keys)},
       {"sparse_types", sparse_types}},
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

Output placeholder_with_default(GraphBuilder& b, Output input, const Shape& shape,
                                const std::string& name) {
  return b.add("PlaceholderWithDefault", {input}, {{"shape", shape}}, name);
}

}  // namespace troupe::ops
