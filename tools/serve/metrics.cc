#include "tools/serve/metrics.h"

#include <algorithm>
#include <charconv>

namespace troupe::serve {

namespace {

// TF Serving's: latencies in microseconds from 10 growing by 1.8 (33 buckets, to ~2.6e9 us);
// batch sizes in powers of two.
const std::vector<double>& latency_bounds() {
  static const std::vector<double> b = [] {
    std::vector<double> v;
    double at = 10;
    for (int i = 0; i < 33; ++i, at *= 1.8) v.push_back(at);
    return v;
  }();
  return b;
}
const std::vector<double>& size_bounds() {
  static const std::vector<double> b = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
  return b;
}

// A label value, escaped as the text format asks (backslash, quote, newline).
std::string quoted(const std::string& v) {
  std::string out = "\"";
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    out += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return out + "\"";
}

// The shortest text that reads back as `v`.
std::string number(double v) {
  char b[40];
  return std::string(b, std::to_chars(b, b + sizeof b, v).ptr);
}

}  // namespace

void ServingMetrics::Histogram::add(const std::vector<double>& bounds, double v) {
  if (counts.empty()) counts.assign(bounds.size() + 1, 0);
  const size_t at = std::lower_bound(bounds.begin(), bounds.end(), v) - bounds.begin();
  ++counts[at];
  sum += v;
  ++count;
}

void ServingMetrics::request(const RequestLabels& labels, int http_status,
                             std::chrono::microseconds latency) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{labels.entrypoint, labels.model, labels.version, labels.api, http_status}];
  latency_[{labels.entrypoint, labels.model, labels.api}].add(latency_bounds(),
                                                              static_cast<double>(latency.count()));
}

void ServingMetrics::batch(const std::string& model, int64_t rows,
                           const std::vector<std::chrono::microseconds>& waits) {
  std::lock_guard<std::mutex> lock(mu_);
  batch_sizes_[model].add(size_bounds(), static_cast<double>(rows));
  Histogram& w = queue_waits_[model];
  for (auto wait : waits) w.add(latency_bounds(), static_cast<double>(wait.count()));
}

std::string ServingMetrics::render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  auto histogram = [&](const std::string& name, const std::string& labels, const Histogram& h,
                       const std::vector<double>& bounds) {
    int64_t cumulative = 0;
    for (size_t i = 0; i <= bounds.size(); ++i) {
      cumulative += h.counts.empty() ? 0 : h.counts[i];
      const std::string le = i < bounds.size() ? number(bounds[i]) : "+Inf";
      out +=
          name + "_bucket{" + labels + ",le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
    }
    out += name + "_sum{" + labels + "} " + number(h.sum) + "\n";
    out += name + "_count{" + labels + "} " + std::to_string(h.count) + "\n";
  };
  out +=
      "# HELP :tensorflow:serving:request_count The number of requests, by entrypoint, model, "
      "version, API and HTTP status.\n# TYPE :tensorflow:serving:request_count counter\n";
  for (const auto& [key, n] : requests_) {
    const auto& [entrypoint, model, version, api, status] = key;
    out += ":tensorflow:serving:request_count{entrypoint=" + quoted(entrypoint) +
           ",model_name=" + quoted(model) +
           ",model_version=" + quoted(version > 0 ? std::to_string(version) : "") +
           ",API=" + quoted(api) + ",status=" + quoted(std::to_string(status)) + "} " +
           std::to_string(n) + "\n";
  }
  out +=
      "# HELP :tensorflow:serving:request_latency Each request's latency in microseconds, by "
      "model and API.\n# TYPE :tensorflow:serving:request_latency histogram\n";
  for (const auto& [key, h] : latency_) {
    const auto& [entrypoint, model, api] = key;
    histogram(
        ":tensorflow:serving:request_latency",
        "entrypoint=" + quoted(entrypoint) + ",model_name=" + quoted(model) + ",API=" + quoted(api),
        h, latency_bounds());
  }
  out +=
      "# HELP :tensorflow:serving:batching_session:input_batch_size The rows of each batch "
      "the model ran.\n# TYPE :tensorflow:serving:batching_session:input_batch_size "
      "histogram\n";
  for (const auto& [model, h] : batch_sizes_) {
    histogram(":tensorflow:serving:batching_session:input_batch_size",
              "model_name=" + quoted(model), h, size_bounds());
  }
  out +=
      "# HELP :tensorflow:serving:batching_session:queuing_latency Each request's wait in "
      "the batching queue in microseconds.\n# TYPE "
      ":tensorflow:serving:batching_session:queuing_latency histogram\n";
  for (const auto& [model, h] : queue_waits_) {
    histogram(":tensorflow:serving:batching_session:queuing_latency", "model_name=" + quoted(model),
              h, latency_bounds());
  }
  return out;
}

}  // namespace troupe::serve
