// ParseExample and ParseSequenceExample (ops/parsing_ops.h): the op's attributes back into a
// feature spec, and runtime/example.h's parser over the batch. (PlaceholderWithDefault is a
// forward, in array_ops.cc.)
#include <string_view>

#include "kernels/cpu/kernel.h"
#include "ops/parsing_ops.h"
#include "runtime/example.h"

namespace troupe::kernels::cpu {

namespace {

using runtime::FeatureSpec;

// FixedLen features from their keys, flattened shapes and default inputs (1 + i): an empty
// default, for a feature that has values, makes it required.
Status dense_spec(const KernelContext& ctx, const char* keys_attr, const char* shapes_attr,
                  runtime::FeatureSpecs* spec) {
  const Tensor& keys = ctx.attr<Tensor>(keys_attr);
  TROUPE_ASSIGN_OR_RETURN(
      std::vector<Shape> shapes,
      ops::shapes_attr(ctx.attr<std::vector<int64_t>>(shapes_attr), keys.num_elements()));
  for (int64_t i = 0; i < keys.num_elements(); ++i) {
    const Tensor& default_value = ctx.input(static_cast<int>(1 + i));
    FeatureSpec s{.dtype = default_value.dtype(), .shape = shapes[static_cast<size_t>(i)]};
    if (default_value.num_elements() > 0 || s.shape.num_elements() == 0) {
      s.default_value = default_value;
    }
    (*spec)[keys.data<std::string>()[i]] = std::move(s);
  }
  return runtime::ok_status();
}

std::vector<std::string_view> records_of(const Tensor& serialized) {
  std::vector<std::string_view> records;
  records.reserve(static_cast<size_t>(serialized.num_elements()));
  for (int64_t r = 0; r < serialized.num_elements(); ++r) {
    records.push_back(serialized.data<std::string>()[r]);
  }
  return records;
}

// The parser answers in the spec's (sorted) order; the outputs follow the attributes'.
std::map<std::string, Tensor> by_name(const runtime::FeatureSpecs& spec, std::vector<Tensor> t) {
  std::map<std::string, Tensor> named;
  size_t i = 0;
  for (const auto& [name, s] : spec) named[name] = std::move(t[i++]);
  return named;
}

Status parse_example(KernelContext& ctx) {
  runtime::FeatureSpecs spec;
  TROUPE_RETURN_IF_ERROR(dense_spec(ctx, "dense_keys", "dense_shapes", &spec));
  const Tensor& sparse_keys = ctx.attr<Tensor>("sparse_keys");
  const auto& types = ctx.attr<std::vector<int64_t>>("sparse_types");
  const Tensor& index_keys = ctx.attr<Tensor>("sparse_index_keys");
  const Tensor& value_keys = ctx.attr<Tensor>("sparse_value_keys");
  const auto& sizes = ctx.attr<std::vector<int64_t>>("sparse_sizes");
  for (int64_t i = 0; i < sparse_keys.num_elements(); ++i) {
    FeatureSpec s{.kind = FeatureSpec::Kind::kVarLen,
                  .dtype = static_cast<DType>(types[static_cast<size_t>(i)])};
    // The shape function checked that these hold one each sparse key, or none.
    if (!sizes.empty() && !index_keys.data<std::string>()[i].empty()) {
      s.kind = FeatureSpec::Kind::kSparse;
      s.index_key = index_keys.data<std::string>()[i];
      s.value_key = value_keys.data<std::string>()[i];
      s.size = sizes[static_cast<size_t>(i)];
    }
    spec[sparse_keys.data<std::string>()[i]] = std::move(s);
  }
  std::map<std::string, runtime::SparseTensor> var_len;
  TROUPE_ASSIGN_OR_RETURN(std::vector<Tensor> parsed,
                          runtime::parse_examples(records_of(ctx.input(0)), spec, &var_len));
  std::map<std::string, Tensor> dense = by_name(spec, std::move(parsed));
  const int ns = static_cast<int>(sparse_keys.num_elements());
  for (int k = 0; k < ns; ++k) {
    runtime::SparseTensor& st = var_len[sparse_keys.data<std::string>()[k]];
    ctx.set_output(k, std::move(st.indices));
    ctx.set_output(ns + k, std::move(st.values));
    ctx.set_output(2 * ns + k, std::move(st.dense_shape));
  }
  const Tensor& dense_keys = ctx.attr<Tensor>("dense_keys");
  for (int64_t k = 0; k < dense_keys.num_elements(); ++k) {
    ctx.set_output(3 * ns + static_cast<int>(k),
                   std::move(dense[dense_keys.data<std::string>()[k]]));
  }
  return runtime::ok_status();
}

Status parse_sequence_example(KernelContext& ctx) {
  runtime::FeatureSpecs spec;
  TROUPE_RETURN_IF_ERROR(dense_spec(ctx, "context_dense_keys", "context_dense_shapes", &spec));
  const Tensor& lists = ctx.attr<Tensor>("feature_list_dense_keys");
  const auto& types = ctx.attr<std::vector<int64_t>>("feature_list_dense_types");
  TROUPE_ASSIGN_OR_RETURN(
      std::vector<Shape> steps,
      ops::shapes_attr(ctx.attr<std::vector<int64_t>>("feature_list_dense_shapes"),
                       lists.num_elements()));
  for (int64_t i = 0; i < lists.num_elements(); ++i) {
    spec[lists.data<std::string>()[i]] =
        FeatureSpec{.kind = FeatureSpec::Kind::kSequence,
                    .dtype = static_cast<DType>(types[static_cast<size_t>(i)]),
                    .shape = steps[static_cast<size_t>(i)]};
  }
  const Tensor& serialized = ctx.input(0);
  std::map<std::string, std::vector<int64_t>> lengths;
  TROUPE_ASSIGN_OR_RETURN(
      std::vector<Tensor> parsed,
      runtime::parse_sequence_examples(records_of(serialized), spec,
                                       /*sequence_length=*/0, nullptr, &lengths));
  std::map<std::string, Tensor> named = by_name(spec, std::move(parsed));
  const Tensor& context = ctx.attr<Tensor>("context_dense_keys");
  const int nc = static_cast<int>(context.num_elements());
  const int nf = static_cast<int>(lists.num_elements());
  for (int k = 0; k < nc; ++k) ctx.set_output(k, std::move(named[context.data<std::string>()[k]]));
  for (int k = 0; k < nf; ++k) {
    const std::string& name = lists.data<std::string>()[k];
    ctx.set_output(nc + k, std::move(named[name]));
    std::vector<int64_t>& n = lengths[name];
    n.resize(static_cast<size_t>(serialized.num_elements()), 0);
    ctx.set_output(nc + nf + k, Tensor::from_vector(Shape{serialized.num_elements()}, n));
  }
  return runtime::ok_status();
}

}  // namespace

TROUPE_REGISTER_KERNELS(parsing_cpu) {
  registry.add("ParseExample", DeviceType::kCpu, DType::kString, &parse_example);
  registry.add("ParseSequenceExample", DeviceType::kCpu, DType::kString, &parse_sequence_example);
}

}  // namespace troupe::kernels::cpu
