// Per-node timings of chosen steps, recorded by the node actors themselves: when a session is
// asked to profile a step, every node that runs a kernel for that step notes when it started,
// how long the kernel took and on which thread. ProfilerHook (estimators/hooks.h) turns them
// into a Chrome trace.
//
//   loop.profile = [](int64_t i) { return i == 99; };            // LoopRequest
//   loop.on_profile = [](int64_t i, std::vector<NodeTiming> t) { ... };
//
// Thread-safe: nodes may run on several CAF workers. Costs one atomic load per kernel when no
// step is profiled.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace troupe::actors {

struct NodeTiming {
  std::string node;
  std::string op;
  int64_t start_us = 0;  // since the steady clock's epoch
  int64_t duration_us = 0;
  uint64_t thread = 0;
};

class StepProfiler {
 public:
  static constexpr uint64_t kNone = UINT64_MAX;
  void watch(uint64_t step) { step_.store(step, std::memory_order_release); }
  bool watching(uint64_t step) const { return step_.load(std::memory_order_acquire) == step; }
  void record(NodeTiming t) {
    std::lock_guard<std::mutex> lock(mu_);
    timings_.push_back(std::move(t));
  }
  std::vector<NodeTiming> take() {
    std::lock_guard<std::mutex> lock(mu_);
    step_.store(kNone, std::memory_order_release);
    return std::move(timings_);
  }

 private:
  std::atomic<uint64_t> step_{kNone};
  std::mutex mu_;
  std::vector<NodeTiming> timings_;
};

}  // namespace troupe::actors
