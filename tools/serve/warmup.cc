#include "tools/serve/warmup.h"

#include <filesystem>

#include "runtime/allocator.h"
#include "runtime/record_io.h"
#include "schema/serving_apis.pb.h"
#include "tools/serve/tensor_proto.h"

namespace troupe::serve {

using runtime::Result;
using runtime::Status;

namespace {

Status run_signature(serving::Predictor& predictor, const std::string& signature,
                     const serving::NamedTensors& inputs) {
  if (!predictor.signature(signature)) {
    return runtime::invalid_argument("the model has no signature '", signature, "'");
  }
  return predictor.predict(inputs, signature).status();
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
        TROUPE_ASSIGN_OR_RETURN(inputs[name],
                                tensor_from_proto(proto, name, runtime::max_tensor_bytes()));
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
      inputs["inputs"] = examples_from_input(input);
      break;
    }
    case tensorflow::serving::PredictionLog::kMultiInferenceLog: {
      const auto& r = log.multi_inference_log().request();
      inputs["inputs"] = examples_from_input(r.input());
      for (const auto& task : r.tasks()) {
        const bool classify = task.method_name() == serving::method_name("classify");
        signature = task.model_spec().signature_name().empty() ? fallback[classify ? 1 : 2]
                                                               : task.model_spec().signature_name();
        TROUPE_RETURN_IF_ERROR(run_signature(predictor, signature, inputs));
      }
      return runtime::ok_status();
    }
    default:
      return runtime::invalid_argument("not a predict, classify, regress or multi-inference log");
  }
  return run_signature(predictor, signature, inputs);
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
