// The versions of one served model, as TF Serving's manager with its default policy: the newest
// version folder under the base path that loads is served; a newer one is picked up by polling,
// without a restart, and the one it replaces is unloaded when the last request holding it ends.
//
//   ModelManager models({.base_path = "exports", .name = "fmnist"}, runtime);
//   models.poll();                                   // also every poll_interval, on its thread
//   if (auto s = models.find(0)) ...;                 // 0: the newest; else that version
//   for (auto& v : models.states()) ...               // {version, "AVAILABLE" | "END", status}
//
// A version runs its export's warm-up requests (warmup.h) before it becomes AVAILABLE. A version
// that fails to load or to warm up is logged, reported END with its error, and not retried; the
// version served before stays. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "estimators/export/batcher.h"
#include "estimators/export/predictor.h"

namespace troupe::serve {

struct ModelOptions {
  std::string base_path;
  std::string name;
  std::chrono::milliseconds poll_interval{1000};  // 0: only explicit poll() calls
  // With batching enabled, requests go through a batcher; otherwise each runs on its caller's
  // thread, `sessions` at once (as many as the server has threads).
  serving::BatchingOptions batching;
  int sessions = 2;
};

// One loaded version: its predictor and, when batching, the batcher in front of it.
struct Servable {
  int64_t version = 0;
  std::shared_ptr<serving::Predictor> predictor;
  std::unique_ptr<serving::Batcher> batcher;  // null without batching
  ~Servable() { batcher.reset(); }            // drains before the predictor goes
};

struct VersionState {
  int64_t version = 0;
  std::string state;  // "AVAILABLE", "LOADING" or "END"
  runtime::Status status;
  int64_t warmup_requests = 0;  // run before it became AVAILABLE (warmup.h)
};

class ModelManager {
 public:
  ModelManager(ModelOptions options, actors::Runtime& runtime);
  ~ModelManager();
  ModelManager(const ModelManager&) = delete;
  ModelManager& operator=(const ModelManager&) = delete;

  // Loads the newest version when it is newer than the one served.
  void poll();
  // The served version (0), or `version` when it is the one served; null otherwise.
  std::shared_ptr<Servable> find(int64_t version) const;
  std::vector<VersionState> states() const;
  const ModelOptions& options() const { return options_; }

 private:
  void set_state(int64_t version, const std::string& state, runtime::Status status);

  ModelOptions options_;
  actors::Runtime& runtime_;
  mutable std::mutex mu_;
  std::shared_ptr<Servable> current_;
  std::map<int64_t, VersionState> states_;
  std::mutex poll_mu_;  // one poll at a time
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread poller_;
};

}  // namespace troupe::serve
