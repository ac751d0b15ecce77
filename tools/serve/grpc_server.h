// TF Serving's gRPC services over the served models, as schema/serving_service.proto declares
// them: PredictionService (Predict, Classify, Regress, MultiInference, GetModelMetadata) and
// ModelService (GetModelStatus, HandleReloadConfigRequest), so that a client generated from TF
// Serving's protos calls troupe serve's --port as it calls TF Serving's. A reload replaces the
// models served as a re-read --model_config_file does (ServedModels::reload).
//
//   auto server = GrpcServer::start({.host = "127.0.0.1", .port = 8500}, models, &metrics);
//   ... (*server)->port() ...
//   (*server)->stop(std::chrono::seconds(10));   // answers the calls in flight first
//
// Errors are gRPC statuses with TF Serving's codes: NOT_FOUND for a model, version or label not
// served, INVALID_ARGUMENT for a request that does not fit the signature, RESOURCE_EXHAUSTED for
// a message over message_limit. With an auth token, a call without "authorization: Bearer TOKEN"
// metadata is UNAUTHENTICATED; with a certificate and key the port speaks TLS only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/status.h"
#include "tools/serve/metrics.h"
#include "tools/serve/served_models.h"

namespace troupe::serve {

struct GrpcOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8500;  // 0: any free port (port() says which)
  int message_limit = 16 << 20;
  // Calls served at once (a thread each, as TF Serving's synchronous server runs them); one
  // beyond them is RESOURCE_EXHAUSTED at once, as REST's connections beyond theirs get 503.
  int max_calls = 1024;
  std::string ssl_cert_file, ssl_key_file;  // PEM; both or neither
  std::string auth_token;
};

class GrpcServer {
 public:
  // With `metrics`, every call is counted and timed there (entrypoint GRPC).
  static runtime::Result<std::unique_ptr<GrpcServer>> start(GrpcOptions options,
                                                            ServedModels& models,
                                                            ServingMetrics* metrics = nullptr);
  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  uint16_t port() const;
  // Refuses new calls, waits up to `grace` for those in flight, then cancels them. Idempotent.
  void stop(std::chrono::milliseconds grace);

  struct Impl;

 private:
  explicit GrpcServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::serve
