// TensorFlow Serving's REST API over the served models, without the HTTP: a request's method,
// target and body in, a status code and a JSON body out (http_server.h carries them over sockets).
//
//   RestApi api(models);
//   api.handle({"POST", "/v1/models/fmnist:predict", R"({"instances": [[0.1, ...]]})"},
//              [](HttpReply r) { ... r.status == 200, r.body == {"predictions": [...]} ... });
//
// Routes: GET /v1/models/NAME[/versions/V | /labels/L] (status), GET .../metadata (signatures), GET
// /monitoring/prometheus/metrics (with metrics),
// POST ...:predict ({"instances": rows} or {"inputs": columns}, an optional "signature_name"),
// POST ...:classify and ...:regress ({"examples": [...], "context": {...}}: each example, with
// the context's features, becomes a serialized tf.Example when the signature takes them, as
// TF's do; else its fields are the signature's named inputs). Errors are
// {"error": "..."} with TF Serving's codes: 400 a bad request, 404 an unknown model, version or
// path, 405 a wrong method, 503 a full queue, 500 a failed run. `reply` runs once, on the calling
// thread or on a runner's; what it captures must not hold the servable (nothing does).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "tools/serve/metrics.h"
#include "tools/serve/served_models.h"

namespace troupe::serve {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // "/v1/models/NAME:predict"
  std::string body;
};

struct HttpReply {
  int status = 200;
  std::string body;
  // What the reply keeps alive until it is written: the servable that answered, so that a
  // version is unloaded on the server's threads, never on a runner's.
  std::shared_ptr<const void> keep;
  std::string content_type = "application/json";
};

class RestApi {
 public:
  // With `metrics`, every request is counted and timed there, and GET
  // /monitoring/prometheus/metrics answers its scrape.
  explicit RestApi(ServedModels& models, ServingMetrics* metrics = nullptr)
      : models_(models), metrics_(metrics) {}
  void handle(const HttpRequest& request, std::function<void(HttpReply)> reply);

 private:
  void serve_request(const HttpRequest& request, RequestLabels* labels,
                     const std::function<void(HttpReply)>& reply);
  ServedModels& models_;
  ServingMetrics* metrics_;
};

// The JSON body of an error.
std::string error_body(const std::string& message);
// TF Serving's HTTP status for a status code.
int http_status(runtime::Code code);

}  // namespace troupe::serve
