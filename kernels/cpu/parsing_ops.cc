// ParseExample (ops/parsing_ops.h): the op's attributes back into a feature spec, and
// runtime/example.h's parser over the batch. (PlaceholderWithDefault is a forward, in
// array_ops.cc.)
#include <string_view>

#include "kernels/cpu/kernel.h"
#include "runtime/example.h"

namespace troupe::kernels::cpu {

namespace {

Status parse_example(KernelContext& ctx) {
  const Tensor& serialized = ctx.input(0);
  const Tensor& dense_keys = ctx.attr<Tensor>("dense_keys");
  const Tensor& sparse_keys = ctx.attr<Tensor>("sparse_keys");
  const auto& shapes = ctx.attr<std::vector<int64_t>>("dense_shapes");
  const auto& types = ctx.attr<std::vector<int64_t>>("sparse_types");
  runtime::FeatureSpecs spec;
  size_t at = 0;  // the shape function checked that dense_shapes holds a shape a key
  for (int64_t i = 0; i < dense_keys.num_elements(); ++i) {
    const Tensor& default_value = ctx.input(static_cast<int>(1 + i));
    runtime::FeatureSpec s{.dtype = default_value.dtype()};
    const auto rank = static_cast<size_t>(shapes[at]);
    s.shape =
        Shape(std::vector<int64_t>(shapes.begin() + static_cast<std::ptrdiff_t>(at + 1),
                                   shapes.begin() + static_cast<std::ptrdiff_t>(at + 1 + rank)));
    at += 1 + rank;
    if (default_value.num_elements() > 0 || s.shape.num_elements() == 0) {
      s.default_value = default_value;
    }
    spec[dense_keys.data<std::string>()[i]] = std::move(s);
  }
  for (int64_t i = 0; i < sparse_keys.num_elements(); ++i) {
    spec[sparse_keys.data<std::string>()[i]] =
        runtime::FeatureSpec{.kind = runtime::FeatureSpec::Kind::kVarLen,
                             .dtype = static_cast<DType>(types[static_cast<size_t>(i)])};
  }
  std::vector<std::string_view> records;
  records.reserve(static_cast<size_t>(serialized.num_elements()));
  for (int64_t r = 0; r < serialized.num_elements(); ++r) {
    records.push_back(serialized.data<std::string>()[r]);
  }
  std::map<std::string, runtime::SparseTensor> var_len;
  auto parsed = runtime::parse_examples(records, spec, &var_len);
  if (!parsed.ok()) return parsed.status();  // the executor names the node
  // parse_examples answers in the spec's (sorted) order; the outputs follow the attributes'.
  std::map<std::string, Tensor> dense;
  size_t i = 0;
  for (const auto& [name, s] : spec) dense[name] = std::move((*parsed)[i++]);
  const int ns = static_cast<int>(sparse_keys.num_elements());
  for (int k = 0; k < ns; ++k) {
    runtime::SparseTensor& st = var_len[sparse_keys.data<std::string>()[k]];
    ctx.set_output(k, std::move(st.indices));
    ctx.set_output(ns + k, std::move(st.values));
    ctx.set_output(2 * ns + k, std::move(st.dense_shape));
  }
  for (int64_t k = 0; k < dense_keys.num_elements(); ++k) {
    ctx.set_output(3 * ns + static_cast<int>(k),
                   std::move(dense[dense_keys.data<std::string>()[k]]));
  }
  return runtime::ok_status();
}

}  // namespace

TROUPE_REGISTER_KERNELS(parsing_cpu) {
  registry.add("ParseExample", DeviceType::kCpu, DType::kString, &parse_example);
}

}  // namespace troupe::kernels::cpu
