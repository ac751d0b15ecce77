#include "tools/serve/grpc_server.h"

#include <grpcpp/grpcpp.h>

#include <functional>
#include <mutex>
#include <set>

#include "runtime/log.h"
#include "runtime/record_io.h"
#include "schema/serving_service.grpc.pb.h"
#include "tools/serve/bearer_token.h"
#include "tools/serve/inference.h"
#include "tools/serve/model_config.h"
#include "tools/serve/rest_api.h"
#include "tools/serve/tensor_proto.h"

namespace troupe::serve {

namespace tfs = tensorflow::serving;
using runtime::Result;
using runtime::Status;
using serving::NamedTensors;

namespace {

grpc::StatusCode grpc_code(runtime::Code c) {
  switch (c) {
    case runtime::Code::kOk:
      return grpc::StatusCode::OK;
    case runtime::Code::kInvalidArgument:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case runtime::Code::kNotFound:
      return grpc::StatusCode::NOT_FOUND;
    case runtime::Code::kAlreadyExists:
      return grpc::StatusCode::ALREADY_EXISTS;
    case runtime::Code::kFailedPrecondition:
      return grpc::StatusCode::FAILED_PRECONDITION;
    case runtime::Code::kOutOfRange:
      return grpc::StatusCode::OUT_OF_RANGE;
    case runtime::Code::kUnimplemented:
      return grpc::StatusCode::UNIMPLEMENTED;
    case runtime::Code::kUnavailable:
      return grpc::StatusCode::UNAVAILABLE;
    case runtime::Code::kDataLoss:
      return grpc::StatusCode::DATA_LOSS;
    case runtime::Code::kCancelled:
      return grpc::StatusCode::CANCELLED;
    case runtime::Code::kAborted:
      return grpc::StatusCode::ABORTED;
    case runtime::Code::kResourceExhausted:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case runtime::Code::kDeadlineExceeded:
      return grpc::StatusCode::DEADLINE_EXCEEDED;
    case runtime::Code::kInternal:
      break;
  }
  return grpc::StatusCode::INTERNAL;
}

tfs::ModelVersionStatus::State state_of(const std::string& state) {
  if (state == "AVAILABLE") return tfs::ModelVersionStatus::AVAILABLE;
  if (state == "LOADING") return tfs::ModelVersionStatus::LOADING;
  if (state == "END") return tfs::ModelVersionStatus::END;
  return tfs::ModelVersionStatus::UNKNOWN;
}

// The calls' work, each a function of its request that fills its response: what the two
// services forward to.
class Answers {
 public:
  Answers(ServedModels& models, ServingMetrics* metrics, std::string token, int message_limit)
      : models_(models),
        metrics_(metrics),
        token_(std::move(token)),
        message_limit_(message_limit) {}

  // A call around its work: the bearer token checked, then counted and timed.
  grpc::Status run(grpc::ServerContext* context, const tfs::ModelSpec& spec, const char* api,
                   const std::function<Status(RequestLabels*)>& work) {
    const auto started = std::chrono::steady_clock::now();
    RequestLabels labels{"GRPC", spec.name(), 0, api};
    grpc::Status out;
    int http = 401;
    if (!authorized(*context)) {
      out = grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                         "this server needs its bearer token: metadata authorization: Bearer "
                         "TOKEN");
    } else {
      const Status s = work(&labels);
      out = s.ok() ? grpc::Status::OK : grpc::Status(grpc_code(s.code()), s.message());
      http = http_status(s.code());
    }
    if (metrics_ != nullptr) {
      metrics_->request(labels, http,
                        std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::steady_clock::now() - started));
    }
    return out;
  }

  Status predict(const tfs::PredictRequest& req, tfs::PredictResponse* res, RequestLabels* l) {
    const tfs::ModelSpec& spec = req.model_spec();
    TROUPE_ASSIGN_OR_RETURN(std::shared_ptr<Servable> s, servable_of(spec, l));
    TROUPE_ASSIGN_OR_RETURN(std::string sig,
                            choose_signature(*s->predictor, spec.signature_name(), "predict"));
    const serving::Signature& signature = *s->predictor->signature(sig);
    NamedTensors inputs;
    for (const auto& [name, proto] : req.inputs()) {
      if (!signature.inputs.count(name)) {
        return runtime::invalid_argument("signature '", sig, "' has no input '", name, "'");
      }
      TROUPE_ASSIGN_OR_RETURN(inputs[name], tensor_from_proto(proto, name, message_limit_));
    }
    const std::set<std::string> wanted(req.output_filter().begin(), req.output_filter().end());
    for (const std::string& name : wanted) {
      if (!signature.outputs.count(name)) {
        return runtime::invalid_argument("output_filter: signature '", sig, "' has no output '",
                                         name, "'");
      }
    }
    TROUPE_ASSIGN_OR_RETURN(NamedTensors out, run_and_wait(*s, sig, std::move(inputs)));
    for (const auto& [name, t] : out) {
      if (wanted.empty() || wanted.count(name)) {
        tensor_to_proto(t, &(*res->mutable_outputs())[name]);
      }
    }
    answered(spec, *s, sig, res->mutable_model_spec());
    return runtime::ok_status();
  }

  Status classify(const tfs::ClassificationRequest& req, tfs::ClassificationResponse* res,
                  RequestLabels* l) {
    std::shared_ptr<Servable> s;
    std::string sig;
    TROUPE_ASSIGN_OR_RETURN(NamedTensors out,
                            run_examples(req.model_spec(), req.input(), "classify", l, &s, &sig));
    TROUPE_RETURN_IF_ERROR(classification(out, *s, res->mutable_result()));
    answered(req.model_spec(), *s, sig, res->mutable_model_spec());
    return runtime::ok_status();
  }

  Status regress(const tfs::RegressionRequest& req, tfs::RegressionResponse* res,
                 RequestLabels* l) {
    std::shared_ptr<Servable> s;
    std::string sig;
    TROUPE_ASSIGN_OR_RETURN(NamedTensors out,
                            run_examples(req.model_spec(), req.input(), "regress", l, &s, &sig));
    TROUPE_RETURN_IF_ERROR(regression(out, res->mutable_result()));
    answered(req.model_spec(), *s, sig, res->mutable_model_spec());
    return runtime::ok_status();
  }

  // Classify and regress tasks of one model over one input, as TF Serving's: the version is the
  // first task's, every task is checked before any runs, and each result is what its Classify or
  // Regress call would answer (a run of its signature over the same examples).
  Status multi_inference(const tfs::MultiInferenceRequest& req, tfs::MultiInferenceResponse* res,
                         RequestLabels* l) {
    if (req.tasks().empty()) return runtime::invalid_argument("Expected at least one task");
    const tfs::ModelSpec& first = req.tasks(0).model_spec();
    TROUPE_ASSIGN_OR_RETURN(std::shared_ptr<Servable> s, servable_of(first, l));
    std::vector<std::pair<std::string, bool>> runs;  // signature, and whether it classifies
    std::set<std::string> seen;
    for (const tfs::InferenceTask& task : req.tasks()) {
      if (task.model_spec().name().empty()) {
        return runtime::invalid_argument("Found ModelSpec with an empty model name.");
      }
      if (task.model_spec().name() != first.name()) {
        return runtime::invalid_argument(
            "All ModelSpecs in a MultiInferenceRequest must access the same model name.");
      }
      const bool classify = task.method_name() == serving::method_name("classify");
      if (!classify && task.method_name() != serving::method_name("regress")) {
        return runtime::unimplemented("Unsupported signature method_name: ", task.method_name(),
                                      " (", serving::method_name("classify"), " and ",
                                      serving::method_name("regress"), " are)");
      }
      TROUPE_ASSIGN_OR_RETURN(std::string sig,
                              example_signature(*s, task.model_spec().signature_name(),
                                                classify ? "classify" : "regress"));
      if (!seen.insert(sig).second) {
        return runtime::invalid_argument("Duplicate evaluation of signature: ", sig);
      }
      runs.emplace_back(std::move(sig), classify);
    }
    const runtime::Tensor examples = examples_from_input(req.input());
    if (examples.num_elements() == 0) {
      return runtime::invalid_argument("the request's input holds no examples");
    }
    for (size_t i = 0; i < runs.size(); ++i) {
      const auto& [sig, classify] = runs[i];
      TROUPE_ASSIGN_OR_RETURN(NamedTensors out, run_and_wait(*s, sig, {{"inputs", examples}}));
      tfs::InferenceResult* result = res->add_results();
      TROUPE_RETURN_IF_ERROR(classify
                                 ? classification(out, *s, result->mutable_classification_result())
                                 : regression(out, result->mutable_regression_result()));
      answered(req.tasks(static_cast<int>(i)).model_spec(), *s, sig, result->mutable_model_spec());
    }
    return runtime::ok_status();
  }

  Status metadata(const tfs::GetModelMetadataRequest& req, tfs::GetModelMetadataResponse* res,
                  RequestLabels* l) {
    if (req.metadata_field().empty()) {
      return runtime::invalid_argument(
          "GetModelMetadataRequest must specify at least one metadata_field");
    }
    for (const std::string& field : req.metadata_field()) {
      if (field != "signature_def") {
        return runtime::invalid_argument("Metadata field ", field,
                                         " is not supported (signature_def is)");
      }
    }
    TROUPE_ASSIGN_OR_RETURN(std::shared_ptr<Servable> s, servable_of(req.model_spec(), l));
    (*res->mutable_metadata())["signature_def"].PackFrom(signature_defs(s->predictor->model()));
    res->mutable_model_spec()->set_name(req.model_spec().name());
    res->mutable_model_spec()->mutable_version()->set_value(s->version);
    return runtime::ok_status();
  }

  Status status(const tfs::GetModelStatusRequest& req, tfs::GetModelStatusResponse* res) {
    const tfs::ModelSpec& spec = req.model_spec();
    TROUPE_ASSIGN_OR_RETURN(
        std::vector<VersionState> states,
        models_.status(spec.name(), spec.has_version() ? spec.version().value() : 0,
                       spec.version_label()));
    for (const VersionState& v : states) {
      tfs::ModelVersionStatus* out = res->add_model_version_status();
      out->set_version(v.version);
      out->set_state(state_of(v.state));
      out->mutable_status()->set_error_code(static_cast<int>(grpc_code(v.status.code())));
      if (!v.status.ok()) out->mutable_status()->set_error_message(v.status.message());
    }
    return runtime::ok_status();
  }

  // The models served from now on, as TF Serving's ReloadConfig: a config checked as a file's
  // (nothing changes when it is refused), then applied; an error names the models that serve no
  // version once it is. A config that sets none of its kinds changes nothing.
  Status reload(const tfs::ReloadConfigRequest& req, tfs::ReloadConfigResponse* res) {
    Status s = runtime::ok_status();
    const tfs::ModelServerConfig& config = req.config();
    if (config.has_model_config_list()) {
      auto models = model_config_of(config, "ReloadConfigRequest");
      s = models.ok() ? models_.reload(*models) : models.status();
      if (models.ok()) {
        std::string names;
        for (const ModelConfig& m : *models) names += (names.empty() ? "" : ", ") + m.name;
        runtime::log_info("gRPC HandleReloadConfigRequest: serving ", models->size(), " model(s)",
                          names.empty() ? "" : ": ", names);
      }
    } else if (!config.GetReflection()->GetUnknownFields(config).empty()) {
      s = runtime::invalid_argument(
          "ServerModelConfig type not supported by HandleReloadConfigRequest. Only "
          "ModelConfigList is currently supported");
    }
    if (!s.ok()) runtime::log_error("gRPC HandleReloadConfigRequest: ", s.message());
    res->mutable_status()->set_error_code(static_cast<int>(grpc_code(s.code())));
    if (!s.ok()) res->mutable_status()->set_error_message(s.message());
    return s;
  }

 private:
  bool authorized(const grpc::ServerContext& context) const {
    if (token_.empty()) return true;
    const auto& metadata = context.client_metadata();
    auto it = metadata.find("authorization");
    return it != metadata.end() &&
           bearer_matches(std::string_view(it->second.data(), it->second.size()), token_);
  }

  Result<std::shared_ptr<Servable>> servable_of(const tfs::ModelSpec& spec, RequestLabels* l) {
    if (spec.name().empty()) return runtime::invalid_argument("Missing ModelSpec: no model name");
    if (spec.has_version() && spec.version().value() <= 0) {
      return runtime::invalid_argument("model_spec.version ", spec.version().value(),
                                       " is not a version");
    }
    const int64_t version = spec.has_version() ? spec.version().value() : 0;
    TROUPE_ASSIGN_OR_RETURN(std::shared_ptr<Servable> s,
                            models_.servable(spec.name(), version, spec.version_label()));
    l->version = s->version;
    return s;
  }

  // The signature a classify or regress verb runs, which must take serialized tf.Example protos
  // as TF Serving's do; one that takes named inputs is for Predict.
  static Result<std::string> example_signature(const Servable& s, const std::string& given,
                                               const std::string& method) {
    TROUPE_ASSIGN_OR_RETURN(std::string sig, choose_signature(*s.predictor, given, method));
    if (!takes_examples(*s.predictor->signature(sig))) {
      return runtime::invalid_argument("signature '", sig,
                                       "' takes named inputs, not serialized tf.Example protos: "
                                       "call Predict");
    }
    return sig;
  }

  // A classify or regress call: its examples as the serialized tf.Example vector the signature
  // takes, run.
  Result<NamedTensors> run_examples(const tfs::ModelSpec& spec, const tfs::Input& input,
                                    const std::string& method, RequestLabels* l,
                                    std::shared_ptr<Servable>* s, std::string* sig) {
    TROUPE_ASSIGN_OR_RETURN(*s, servable_of(spec, l));
    TROUPE_ASSIGN_OR_RETURN(*sig, example_signature(**s, spec.signature_name(), method));
    runtime::Tensor examples = examples_from_input(input);
    if (examples.num_elements() == 0) {
      return runtime::invalid_argument("the request's input holds no examples");
    }
    return run_and_wait(**s, *sig, {{"inputs", std::move(examples)}});
  }

  static Status classification(const NamedTensors& out, const Servable& s,
                               tfs::ClassificationResult* result) {
    TROUPE_ASSIGN_OR_RETURN(Classes c, classes_of(out, s.predictor->model().class_labels));
    for (const auto& row : c.rows) {
      tfs::Classifications* classes = result->add_classifications();
      for (const auto& [label, score] : row) {
        tfs::Class* k = classes->add_classes();
        k->set_label(label);
        k->set_score(static_cast<float>(score));
      }
    }
    return runtime::ok_status();
  }

  static Status regression(const NamedTensors& out, tfs::RegressionResult* result) {
    TROUPE_ASSIGN_OR_RETURN(Regressions r, regressions_of(out));
    for (double v : r.values) result->add_regressions()->set_value(static_cast<float>(v));
    return runtime::ok_status();
  }

  static void answered(const tfs::ModelSpec& asked, const Servable& s, const std::string& sig,
                       tfs::ModelSpec* out) {
    out->set_name(asked.name());
    out->mutable_version()->set_value(s.version);
    out->set_signature_name(sig);
  }

  ServedModels& models_;
  ServingMetrics* metrics_;
  const std::string token_;
  const int64_t message_limit_;  // and so the most bytes a request's tensor may take
};

class Prediction final : public tfs::PredictionService::Service {
 public:
  explicit Prediction(Answers& a) : a_(a) {}
  grpc::Status Predict(grpc::ServerContext* c, const tfs::PredictRequest* req,
                       tfs::PredictResponse* res) override {
    return a_.run(c, req->model_spec(), "predict",
                  [&](RequestLabels* l) { return a_.predict(*req, res, l); });
  }
  grpc::Status Classify(grpc::ServerContext* c, const tfs::ClassificationRequest* req,
                        tfs::ClassificationResponse* res) override {
    return a_.run(c, req->model_spec(), "classify",
                  [&](RequestLabels* l) { return a_.classify(*req, res, l); });
  }
  grpc::Status Regress(grpc::ServerContext* c, const tfs::RegressionRequest* req,
                       tfs::RegressionResponse* res) override {
    return a_.run(c, req->model_spec(), "regress",
                  [&](RequestLabels* l) { return a_.regress(*req, res, l); });
  }
  grpc::Status MultiInference(grpc::ServerContext* c, const tfs::MultiInferenceRequest* req,
                              tfs::MultiInferenceResponse* res) override {
    const tfs::ModelSpec& spec =
        req->tasks().empty() ? tfs::ModelSpec::default_instance() : req->tasks(0).model_spec();
    return a_.run(c, spec, "multi_inference",
                  [&](RequestLabels* l) { return a_.multi_inference(*req, res, l); });
  }
  grpc::Status GetModelMetadata(grpc::ServerContext* c, const tfs::GetModelMetadataRequest* req,
                                tfs::GetModelMetadataResponse* res) override {
    return a_.run(c, req->model_spec(), "metadata",
                  [&](RequestLabels* l) { return a_.metadata(*req, res, l); });
  }

 private:
  Answers& a_;
};

class Models final : public tfs::ModelService::Service {
 public:
  explicit Models(Answers& a) : a_(a) {}
  grpc::Status GetModelStatus(grpc::ServerContext* c, const tfs::GetModelStatusRequest* req,
                              tfs::GetModelStatusResponse* res) override {
    return a_.run(c, req->model_spec(), "status",
                  [&](RequestLabels*) { return a_.status(*req, res); });
  }
  grpc::Status HandleReloadConfigRequest(grpc::ServerContext* c,
                                         const tfs::ReloadConfigRequest* req,
                                         tfs::ReloadConfigResponse* res) override {
    return a_.run(c, tfs::ModelSpec::default_instance(), "reload_config",
                  [&](RequestLabels*) { return a_.reload(*req, res); });
  }

 private:
  Answers& a_;
};

}  // namespace

struct GrpcServer::Impl {
  Impl(ServedModels& models, ServingMetrics* metrics, std::string token, int message_limit)
      : answers(models, metrics, std::move(token), message_limit),
        prediction(answers),
        model_service(answers) {}
  Answers answers;
  Prediction prediction;
  Models model_service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::once_flag stopped;
};

Result<std::unique_ptr<GrpcServer>> GrpcServer::start(GrpcOptions o, ServedModels& models,
                                                      ServingMetrics* metrics) {
  if (o.ssl_cert_file.empty() != o.ssl_key_file.empty()) {
    return runtime::invalid_argument("gRPC: TLS needs both a certificate and its key");
  }
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!o.ssl_cert_file.empty()) {
    std::string cert, key;
    TROUPE_RETURN_IF_ERROR(runtime::read_file(o.ssl_cert_file, &cert).with_context("gRPC"));
    TROUPE_RETURN_IF_ERROR(runtime::read_file(o.ssl_key_file, &key).with_context("gRPC"));
    grpc::SslServerCredentialsOptions tls;
    tls.pem_key_cert_pairs.push_back({key, cert});
    credentials = grpc::SslServerCredentials(tls);
  }
  auto impl = std::make_unique<Impl>(models, metrics, o.auth_token, o.message_limit);
  const std::string host = o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;
  const std::string address = host + ":" + std::to_string(o.port);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, credentials, &impl->port);
  builder.SetMaxReceiveMessageSize(o.message_limit);
  // gRPC shares a port with whoever else asks (SO_REUSEPORT): a second server would take half of
  // the first one's calls. A port in use is an error here, as for the REST port.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  grpc::ResourceQuota quota("troupe-serve");
  quota.SetMaxThreads(o.max_calls);
  builder.SetResourceQuota(quota);
  builder.RegisterService(&impl->prediction);
  builder.RegisterService(&impl->model_service);
  impl->server = builder.BuildAndStart();
  if (!impl->server || impl->port == 0) {
    return runtime::unavailable(
        "gRPC: cannot listen on ", address,
        !o.ssl_cert_file.empty() ? " (or the certificate or key is bad)" : "");
  }
  return std::unique_ptr<GrpcServer>(new GrpcServer(std::move(impl)));
}

GrpcServer::GrpcServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GrpcServer::~GrpcServer() { stop(std::chrono::milliseconds(0)); }

uint16_t GrpcServer::port() const { return static_cast<uint16_t>(impl_->port); }

void GrpcServer::stop(std::chrono::milliseconds grace) {
  std::call_once(impl_->stopped, [&] {
    impl_->server->Shutdown(std::chrono::system_clock::now() + grace);
    impl_->server->Wait();
  });
}

}  // namespace troupe::serve
