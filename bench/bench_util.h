// Shared by the benchmarks: medians of timed windows, and the BAR line + JSON record each bar
// prints.
//
//   double s = median_seconds([&] { work(); }, /*windows=*/7, /*min_seconds=*/0.2);
//   Bars bars("gemm");
//   bars.add("gemm_1024", gflops, "GFLOP/s", "best_of_eigen_openblas", peer, ratio);
//   bars.write_json("bench_gemm.json");
//
// Not thread-safe.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace troupe::bench {

// Runs `f` repeatedly in `windows` windows of at least `min_seconds` each; returns the median
// seconds per call.
inline double median_seconds(const std::function<void()>& f, int windows = 7,
                             double min_seconds = 0.2) {
  using clock = std::chrono::steady_clock;
  f();  // warm up: page in buffers, start threads
  std::vector<double> per_call;
  for (int w = 0; w < windows; ++w) {
    int calls = 0;
    auto start = clock::now();
    double elapsed = 0;
    do {
      f();
      ++calls;
      elapsed = std::chrono::duration<double>(clock::now() - start).count();
    } while (elapsed < min_seconds);
    per_call.push_back(elapsed / calls);
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

class Bars {
 public:
  explicit Bars(std::string suite) : suite_(std::move(suite)) {}

  // Prints "BAR name value unit peer peer_value ratio"; a missing peer prints "-" for it.
  void add(const std::string& name, double value, const std::string& unit, const std::string& peer,
           double peer_value, double ratio) {
    std::printf("BAR %s %.4g %s %s %.4g %.3f\n", name.c_str(), value, unit.c_str(), peer.c_str(),
                peer_value, ratio);
    std::fflush(stdout);
    rows_.push_back({name, value, unit, peer, peer_value, ratio});
  }

  bool write_json(const std::string& path) const {
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) return false;
    std::fprintf(f, "{\"suite\": \"%s\", \"bars\": [", suite_.c_str());
    for (size_t i = 0; i < rows_.size(); ++i) {
      const Row& r = rows_[i];
      std::fprintf(f,
                   "%s\n  {\"name\": \"%s\", \"value\": %.6g, \"unit\": \"%s\", \"peer\": \"%s\", "
                   "\"peer_value\": %.6g, \"ratio\": %.4f}",
                   i ? "," : "", r.name.c_str(), r.value, r.unit.c_str(), r.peer.c_str(),
                   r.peer_value, r.ratio);
    }
    std::fprintf(f, "\n]}\n");
    std::fclose(f);
    return true;
  }

 private:
  struct Row {
    std::string name;
    double value;
    std::string unit, peer;
    double peer_value, ratio;
  };
  std::string suite_;
  std::vector<Row> rows_;
};

}  // namespace troupe::bench
