#include "tools/serve/tensor_proto.h"

#include <cstring>
#include <utility>

namespace troupe::serve {

using runtime::DType;
using runtime::Result;
using runtime::Status;
using runtime::Tensor;

namespace {

// The dtypes both sides name.
constexpr std::pair<DType, tensorflow::DataType> kDTypes[] = {
    {DType::kFloat32, tensorflow::DT_FLOAT}, {DType::kFloat64, tensorflow::DT_DOUBLE},
    {DType::kInt32, tensorflow::DT_INT32},   {DType::kInt64, tensorflow::DT_INT64},
    {DType::kUInt8, tensorflow::DT_UINT8},   {DType::kBool, tensorflow::DT_BOOL},
    {DType::kString, tensorflow::DT_STRING}};

bool dtype_of(tensorflow::DataType p, DType* out) {
  for (const auto& [ours, theirs] : kDTypes) {
    if (theirs == p) {
      *out = ours;
      return true;
    }
  }
  return false;
}

// Its values, as the typed field of its dtype.
template <class T, class Field>
void add_values(const Tensor& t, Field* field) {
  const T* v = t.data<T>();
  field->Reserve(static_cast<int>(t.num_elements()));
  for (int64_t i = 0; i < t.num_elements(); ++i) field->Add(v[i]);
}

void tensor_info(const runtime::Graph& g, const serving::TensorInfo& t, tensorflow::TensorInfo* p) {
  p->set_name(g.output_name(t.tensor));
  p->set_dtype(proto_dtype(t.dtype));
  if (!t.shape.rank_known()) {
    p->mutable_tensor_shape()->set_unknown_rank(true);
    return;
  }
  for (int64_t d : t.shape.dims()) p->mutable_tensor_shape()->add_dim()->set_size(d);
}

}  // namespace

Result<Tensor> tensor_from_proto(const tensorflow::TensorProto& p, const std::string& name,
                                 int64_t max_bytes) {
  DType dtype = DType::kFloat32;
  if (!dtype_of(p.dtype(), &dtype)) {
    return runtime::invalid_argument("input '", name, "': dtype ", p.dtype(),
                                     " is not one troupe serves");
  }
  std::vector<int64_t> dims;
  for (const auto& d : p.tensor_shape().dim()) {
    // A request's tensor has every dimension: -1 is no size here (and no tensor could hold it).
    if (d.size() < 0) {
      return runtime::invalid_argument("input '", name, "': dimension ", d.size(), " in its shape");
    }
    dims.push_back(d.size());
  }
  const runtime::Shape shape(dims);
  TROUPE_RETURN_IF_ERROR(
      runtime::check_tensor_size(dtype, shape).with_context("input '" + name + "'"));
  const int64_t element = dtype == DType::kString
                              ? int64_t(sizeof(std::string))
                              : static_cast<int64_t>(runtime::dtype_size(dtype));
  if (shape.num_elements() > max_bytes / element) {
    return runtime::resource_exhausted("input '", name, "': a ", runtime::dtype_name(dtype), shape,
                                       " tensor is more than a request may hold (", max_bytes,
                                       " bytes)");
  }
  Tensor t(dtype, shape);
  const int64_t n = t.num_elements();
  if (!p.tensor_content().empty()) {
    if (dtype == DType::kString || static_cast<int64_t>(p.tensor_content().size()) !=
                                       n * static_cast<int64_t>(runtime::dtype_size(dtype))) {
      return runtime::invalid_argument("input '", name, "': tensor_content of ",
                                       p.tensor_content().size(), " bytes for ", shape);
    }
    std::memcpy(t.raw_data(), p.tensor_content().data(), p.tensor_content().size());
    return t;
  }
  auto fill = [&](const auto& values, auto* out) -> Status {
    const auto count = static_cast<int64_t>(values.size());
    if (count != n && count != 1) {
      return runtime::invalid_argument("input '", name, "': ", count, " values for ", shape);
    }
    for (int64_t i = 0; i < n; ++i)
      out[i] =
          static_cast<std::decay_t<decltype(*out)>>(values[count == 1 ? 0 : static_cast<int>(i)]);
    return runtime::ok_status();
  };
  Status s;
  switch (dtype) {
    case DType::kFloat32:
      s = fill(p.float_val(), t.data<float>());
      break;
    case DType::kFloat64:
      s = fill(p.double_val(), t.data<double>());
      break;
    case DType::kInt32:
      s = fill(p.int_val(), t.data<int32_t>());
      break;
    case DType::kUInt8:
      s = fill(p.int_val(), t.data<uint8_t>());
      break;
    case DType::kInt64:
      s = fill(p.int64_val(), t.data<int64_t>());
      break;
    case DType::kBool:
      s = fill(p.bool_val(), t.data<bool>());
      break;
    default:
      s = fill(p.string_val(), t.data<std::string>());
      break;
  }
  if (!s.ok()) return s;
  return t;
}

Tensor examples_from_input(const tensorflow::serving::Input& input) {
  std::vector<std::string> serialized;
  if (input.has_example_list()) {
    for (const auto& e : input.example_list().examples())
      serialized.push_back(e.SerializeAsString());
  } else {
    const auto& with = input.example_list_with_context();
    for (const auto& e : with.examples()) {
      tensorflow::Example merged = with.context();
      merged.MergeFrom(e);
      serialized.push_back(merged.SerializeAsString());
    }
  }
  return Tensor::from_vector(runtime::Shape{static_cast<int64_t>(serialized.size())}, serialized);
}

tensorflow::DataType proto_dtype(DType dtype) {
  for (const auto& [ours, theirs] : kDTypes) {
    if (ours == dtype) return theirs;
  }
  return tensorflow::DT_INVALID;
}

void tensor_to_proto(const Tensor& t, tensorflow::TensorProto* p) {
  p->set_dtype(proto_dtype(t.dtype()));
  for (int64_t d : t.shape().dims()) p->mutable_tensor_shape()->add_dim()->set_size(d);
  switch (t.dtype()) {
    case DType::kFloat32:
      add_values<float>(t, p->mutable_float_val());
      break;
    case DType::kFloat64:
      add_values<double>(t, p->mutable_double_val());
      break;
    case DType::kInt32:
      add_values<int32_t>(t, p->mutable_int_val());
      break;
    case DType::kUInt8:
      add_values<uint8_t>(t, p->mutable_int_val());
      break;
    case DType::kInt64:
      add_values<int64_t>(t, p->mutable_int64_val());
      break;
    case DType::kBool:
      add_values<bool>(t, p->mutable_bool_val());
      break;
    case DType::kString:
      for (int64_t i = 0; i < t.num_elements(); ++i)
        *p->add_string_val() = t.data<std::string>()[i];
      break;
    default:
      break;  // DT_INVALID says it: no dtype of TF's protos holds it
  }
}

tensorflow::serving::SignatureDefMap signature_defs(const serving::SavedModel& model) {
  tensorflow::serving::SignatureDefMap defs;
  for (const auto& [key, sig] : model.signatures) {
    tensorflow::SignatureDef& def = (*defs.mutable_signature_def())[key];
    def.set_method_name(serving::method_name(sig.method));
    for (const auto& [name, t] : sig.inputs) {
      tensor_info(model.graph, t, &(*def.mutable_inputs())[name]);
    }
    for (const auto& [name, t] : sig.outputs) {
      tensor_info(model.graph, t, &(*def.mutable_outputs())[name]);
    }
  }
  return defs;
}

}  // namespace troupe::serve
