// troupe serve: TensorFlow Serving's gRPC services (--port) and REST API (--rest_api_port) for
// the versions of one exported model, or of the models a --model_config_file lists
// (tools/serve/), until Ctrl-C, which drains the requests in flight; TLS with
// --ssl_cert_file/--ssl_key_file and a bearer token with --auth_token_file, both off by default.
#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "estimators/export/predictor.h"
#include "runtime/log.h"
#include "tools/cli.h"
#include "tools/serve/bearer_token.h"
#include "tools/serve/grpc_server.h"
#include "tools/serve/http_server.h"
#include "tools/serve/model_config.h"
#include "tools/serve/rest_api.h"
#include "tools/serve/served_models.h"

namespace troupe::cli {

int serve(const std::vector<std::string>& args) {
  auto parsed = parse_flags(args,
                            {"model_base_path",
                             "model_name",
                             "port",
                             "host",
                             "max_batch_size",
                             "batch_timeout_micros",
                             "num_batch_threads",
                             "max_enqueued_batches",
                             "file_system_poll_wait_seconds",
                             "rest_api_num_threads",
                             "max_body_bytes",
                             "max_connections",
                             "idle_timeout_seconds",
                             "drain_seconds",
                             "ssl_cert_file",
                             "ssl_key_file",
                             "auth_token_file",
                             "model_config_file",
                             "model_config_file_poll_wait_seconds",
                             "rest_api_port"},
                            {"enable_batching"});
  if (!parsed.ok()) return usage_error(parsed.status().message());
  const Flags& flags = *parsed;
  auto flag = [&](const std::string& k, const std::string& d) {
    auto it = flags.find(k);
    return it == flags.end() ? d : it->second;
  };
  const bool config_file = flags.count("model_config_file") > 0;
  if (config_file && (flags.count("model_base_path") || flags.count("model_name"))) {
    return usage_error(
        "--model_config_file names the models: give it without --model_base_path and "
        "--model_name");
  }
  if (!config_file && !flags.count("model_base_path")) {
    return usage_error("serve needs --model_base_path BASE or --model_config_file FILE");
  }
  std::string error;
  int64_t port = 8500, rest_port = 8501, max_batch = 32, timeout_us = 1000, batch_threads = 2;
  int64_t enqueued = 64;
  int64_t poll_s = 1, io_threads = 2, body = 16 << 20, connections = 1024, idle_s = 30;
  int64_t drain_s = 30, config_poll_s = 0;
  if (!to_int("port", flag("port", "8500"), 0, &port, &error) ||
      !to_int("rest_api_port", flag("rest_api_port", "8501"), 0, &rest_port, &error) ||
      !to_int("max_batch_size", flag("max_batch_size", "32"), 1, &max_batch, &error) ||
      !to_int("batch_timeout_micros", flag("batch_timeout_micros", "1000"), 0, &timeout_us,
              &error) ||
      !to_int("num_batch_threads", flag("num_batch_threads", "2"), 1, &batch_threads, &error) ||
      !to_int("max_enqueued_batches", flag("max_enqueued_batches", "64"), 1, &enqueued, &error) ||
      !to_int("file_system_poll_wait_seconds", flag("file_system_poll_wait_seconds", "1"), 0,
              &poll_s, &error) ||
      !to_int("rest_api_num_threads", flag("rest_api_num_threads", "2"), 1, &io_threads, &error) ||
      !to_int("max_body_bytes", flag("max_body_bytes", std::to_string(body)), 1, &body, &error) ||
      !to_int("max_connections", flag("max_connections", "1024"), 1, &connections, &error) ||
      !to_int("idle_timeout_seconds", flag("idle_timeout_seconds", "30"), 1, &idle_s, &error) ||
      !to_int("drain_seconds", flag("drain_seconds", "30"), 0, &drain_s, &error) ||
      !to_int("model_config_file_poll_wait_seconds",
              flag("model_config_file_poll_wait_seconds", "0"), 0, &config_poll_s, &error)) {
    return usage_error(error);
  }
  if (port > 65535) return usage_error("--port " + std::to_string(port) + " is not a port");
  if (rest_port > 65535) {
    return usage_error("--rest_api_port " + std::to_string(rest_port) + " is not a port");
  }
  if (port != 0 && port == rest_port) {
    return usage_error("--port (gRPC) and --rest_api_port (REST) are both " + std::to_string(port));
  }
  std::string token;
  if (flags.count("auth_token_file")) {
    auto read = serve::read_bearer_token(flags.at("auth_token_file"));
    if (!read.ok()) return fail(read.status());
    token = *read;
  }
  const bool https = flags.count("ssl_cert_file") > 0;
  std::vector<serve::ModelConfig> configs;
  if (config_file) {
    auto read = serve::read_model_config(flags.at("model_config_file"));
    if (!read.ok()) return fail(read.status());
    configs = std::move(*read);
  } else {
    const std::string base = flags.at("model_base_path");
    auto versions = serving::list_versions(base);
    if (!versions.ok()) return fail(versions.status());
    configs.push_back({flag("model_name", "default"), base, serve::VersionPolicy::latest(1), {}});
  }

  // What every model shares; a model's name, base path, policy and labels are its config's.
  serve::ModelOptions mo;
  mo.poll_interval = std::chrono::seconds(poll_s);
  mo.batching = {.enabled = flags.count("enable_batching") > 0,
                 .max_batch_size = static_cast<int>(max_batch),
                 .batch_timeout = std::chrono::microseconds(timeout_us),
                 .num_batch_threads = static_cast<int>(batch_threads),
                 .max_enqueued_batches = static_cast<int>(enqueued)};
  mo.sessions = static_cast<int>(io_threads);
  // Prometheus scrapes TF Serving's path; the batchers report each batch's size and waits.
  serve::ServingMetrics metrics;
  actors::Runtime rt({.idle_spin = serving::kServingIdleSpin});
  {
    serve::ServedModels models(mo, rt, &metrics);
    models.apply(configs);
    if (config_file && config_poll_s > 0) {
      models.watch(flags.at("model_config_file"), std::chrono::seconds(config_poll_s));
    }
    serve::RestApi api(models, &metrics);
    auto server = serve::HttpServer::start(
        {.host = flag("host", "127.0.0.1"),
         .port = static_cast<uint16_t>(rest_port),
         .threads = static_cast<int>(io_threads),
         .body_limit = static_cast<size_t>(body),
         .max_connections = static_cast<int>(connections),
         .idle_timeout = std::chrono::seconds(idle_s),
         .ssl_cert_file = flag("ssl_cert_file", ""),
         .ssl_key_file = flag("ssl_key_file", ""),
         .auth_token = token},
        [&api](serve::HttpRequest r, std::function<void(serve::HttpReply)> done) {
          api.handle(r, std::move(done));
        });
    if (!server.ok()) return fail(server.status());
    auto grpc = serve::GrpcServer::start(
        {.host = flag("host", "127.0.0.1"),
         .port = static_cast<uint16_t>(port),
         .message_limit = static_cast<int>(std::min<int64_t>(body, INT32_MAX)),
         .max_calls = static_cast<int>(connections),
         .ssl_cert_file = flag("ssl_cert_file", ""),
         .ssl_key_file = flag("ssl_key_file", ""),
         .auth_token = token},
        models, &metrics);
    if (!grpc.ok()) return fail(grpc.status());
    std::string names;
    for (const serve::ModelConfig& c : configs) names += (names.empty() ? "" : ", ") + c.name;
    runtime::log_info(
        "serving ", configs.size() == 1 ? "model " : "models ", names, " at ",
        https ? "https://" : "http://", flag("host", "127.0.0.1"), ":", (*server)->port(),
        "/v1/models/", configs.size() == 1 ? configs[0].name : "NAME",
        mo.batching.enabled ? " (batching)" : "", token.empty() ? "" : " (bearer token required)");
    runtime::log_info("gRPC (TF Serving's PredictionService and ModelService) at ",
                      flag("host", "127.0.0.1"), ":", (*grpc)->port(), https ? " (TLS)" : "");
    GracefulStop graceful;
    graceful.wait();
    runtime::log_info("stopping: answering the requests in flight");
    (*grpc)->stop(std::chrono::seconds(drain_s));
    (*server)->stop(std::chrono::seconds(drain_s));
    graceful.finish();
  }
  runtime::log_info("stopped");
  return 0;
}

}  // namespace troupe::cli
