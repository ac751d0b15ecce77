#include "tools/serve/warmup.h"

#include <filesystem>

#include "runtime/record_io.h"
#include "schema/serving_apis.pb.h"

namespace troupe::serve {

using runtime::DType;
using runtime::Result;
using runtime::Status;
using runtime::Tensor;

namespace {

// A TensorProto as a tensor: its shape, and its values from tensor_content or the typed list
// (one value fills every element, as TF's MakeNdarray does).
Result<Tensor> tensor_of(const tensorflow::TensorProto& p, const std::string& name) {
  DType dtype;
  switch (p.dtype()) {
    case tensorflow::DT_FLOAT:
      dtype = DType::kFloat32;
      break;
    case tensorflow::DT_DOUBLE:
      dtype = DType::kFloat64;
      break;
    case tensorflow::DT_INT32:
      dtype = DType::kInt32;
      break;
    case tensorflow::DT_INT64:
      dtype = DType::kInt64;
      break;
    case tensorflow::DT_UINT8:
      dtype = DType::kUInt8;
      break;
    case tensorflow::DT_BOOL:
      dtype = DType::kBool;
      break;
    case tensorflow::DT_STRING:
      dtype = DType::kString;
      break;
    default:
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

// A classify or regress request's examples, each merged over the context as TF Serving merges
// them, as the string vector the signature's "inputs" takes.
Tensor examples_of(const tensorflow::serving::Input& input) {
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

Status run_one(const tensorflow::serving::PredictionLog& log, serving::Predictor& predictor) {
  serving::NamedTensors inputs;
  std::string signature;
  const std::string fallback[] = {serving::kDefaultSignature, "classification", "regression"};
  switch (log.log_type_case()) {
    case tensorflow::serving::PredictionLog::kPredictLog: {
      const auto& r = log.predict_log().request();
      signature =
          r.model_spec().signature_name().empty() ? fallback[0] : r.model_spec().signature_name();
      for (const auto& [name, proto] : r.inputs()) {
        TROUPE_ASSIGN_OR_RETURN(inputs[name], tensor_of(proto, name));
      }
      break;
    }
    case tensorflow::serving::PredictionLog::kClassifyLog:
    case tensorflow::serving::PredictionLog::kRegressLog: {
      const bool classify = log.has_classify_log();
      const auto& spec = classify ? log.classify_log().request().model_spec()
                                  : log.regress_log().request().model_spec();
      const auto& input =
          classify ? log.classify_log().request().input() : log.regress_log().request().input();
      signature =
          spec.signature_name().empty() ? fallback[classify ? 1 : 2] : spec.signature_name();
      inputs["inputs"] = examples_of(input);
      break;
    }
    default:
      return runtime::invalid_argument("not a predict, classify or regress log");
  }
  if (!predictor.signature(signature)) {
    return runtime::invalid_argument("the model has no signature '", signature, "'");
  }
  return predictor.predict(inputs, signature).status();
}

}  // namespace

Result<int64_t> run_warmup(const std::string& export_dir, serving::Predictor& predictor) {
  const std::string path = export_dir + "/" + kWarmupFile;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return int64_t{0};
  std::string bytes;
  TROUPE_RETURN_IF_ERROR(runtime::read_file(path, &bytes));
  runtime::RecordReader reader(bytes.data(), bytes.size(), path);
  int64_t n = 0;
  std::string_view record;
  while (n < kMaxWarmupRecords) {
    TROUPE_ASSIGN_OR_RETURN(bool more, reader.next(&record));
    if (!more) break;
    tensorflow::serving::PredictionLog log;
    Status s = log.ParseFromArray(record.data(), static_cast<int>(record.size()))
                   ? run_one(log, predictor)
                   : runtime::data_loss("not a PredictionLog");
    if (!s.ok()) {
      return runtime::make_error(s.code(), path, ": warm-up record ", n, ": ", s.message());
    }
    ++n;
  }
  return n;
}

}  // namespace troupe::serve
