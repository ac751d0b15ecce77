// troupe serve's Prometheus metrics, at TF Serving's path /monitoring/prometheus/metrics and
// under TF Serving's names: requests by entrypoint (REST, GRPC), model, version, API and status,
// each request's latency, and with batching each batch's size and each request's wait in the queue,
// in Prometheus's text format (0.0.4).
//
//   ServingMetrics metrics;
//   metrics.request({"fmnist", 3, "predict"}, 200, std::chrono::microseconds(180));
//   metrics.batch("fmnist", 12, {std::chrono::microseconds(40), ...});
//   std::string scrape = metrics.render();
//
// Thread-safe: the server's threads and the batch runners record, a scrape renders.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace troupe::serve {

struct RequestLabels {
  std::string entrypoint = "REST";  // or "GRPC"
  std::string model;                // "" when the request named no model
  int64_t version = 0;              // the version that answered; 0 when none did
  std::string api;                  // predict, classify, regress, metadata, status
};

class ServingMetrics {
 public:
  static constexpr const char* kPath = "/monitoring/prometheus/metrics";

  // A gRPC call's status is counted as the HTTP status of its REST equivalent.
  void request(const RequestLabels& labels, int http_status, std::chrono::microseconds latency);
  void batch(const std::string& model, int64_t rows,
             const std::vector<std::chrono::microseconds>& waits);
  std::string render() const;

 private:
  // Cumulative counts by bucket upper bound, as Prometheus histograms are.
  struct Histogram {
    std::vector<int64_t> counts;  // one per bound, then +Inf
    double sum = 0;
    int64_t count = 0;
    void add(const std::vector<double>& bounds, double v);
  };
  mutable std::mutex mu_;
  // entrypoint, model, version, API, status
  std::map<std::tuple<std::string, std::string, int64_t, std::string, int>, int64_t> requests_;
  // entrypoint, model, API
  std::map<std::tuple<std::string, std::string, std::string>, Histogram> latency_;
  std::map<std::string, Histogram> batch_sizes_, queue_waits_;  // by model
};

}  // namespace troupe::serve
