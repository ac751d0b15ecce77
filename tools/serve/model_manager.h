// The versions of one served model, as TF Serving's manager: the version folders under the base
// path that its version policy picks (the newest, by default) are loaded and served; new ones are
// picked up by polling, without a restart, and a version no longer picked is unloaded once its
// replacement is AVAILABLE and the last request holding it has ended. Labels name versions.
//
//   ModelConfig fmnist{"fmnist", "exports", VersionPolicy::latest(2), {{"stable", 3}}};
//   ModelManager models({.model = fmnist}, runtime);
//   models.poll();                           // also every poll_interval, on its thread
//   auto s = models.servable(0, "");         // Result: the newest served (0), or that version
//   auto stable = models.servable(0, "stable");    // the version the label names
//   auto all = models.status(0, "");         // [{version, "AVAILABLE" | "END", status}]
//
// A version runs its export's warm-up requests (warmup.h) before it becomes AVAILABLE. A version
// that fails to load or to warm up is logged, reported END with its error, and not retried; the
// policy then picks from the others, so the version served before stays. Thread-safe.
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
#include "tools/serve/model_config.h"

namespace troupe::serve {

struct ModelOptions {
  ModelConfig model;                              // its name, base path, version policy and labels
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

// TF Serving's words for a version not served: "Servable not found for request: Latest(NAME)"
// (version 0) or "...: Specific(NAME, VERSION)".
runtime::Status servable_not_found(const std::string& name, int64_t version);

class ModelManager {
 public:
  ModelManager(ModelOptions options, actors::Runtime& runtime);
  ~ModelManager();
  ModelManager(const ModelManager&) = delete;
  ModelManager& operator=(const ModelManager&) = delete;

  // Loads the versions the policy picks that are not served yet, then unloads the others.
  void poll();
  // A new policy and labels (a config file re-read), applied from the next poll.
  void configure(VersionPolicy policy, std::map<std::string, int64_t> labels);
  // Ends the polling thread; what is served stays until the manager goes.
  void stop();

  // The version a request names: by `label` when not empty, else `version`, or the newest
  // served (0); not_found, worded as TF Serving's, when it is not served.
  runtime::Result<std::shared_ptr<Servable>> servable(int64_t version,
                                                      const std::string& label) const;
  // The states a status request asks for, newest first: every version's (0), `version`'s, or
  // that of the version `label` names; not_found when there are none.
  runtime::Result<std::vector<VersionState>> status(int64_t version,
                                                    const std::string& label) const;
  const std::string& name() const { return options_.model.name; }
  const std::string& base_path() const { return options_.model.base_path; }

 private:
  // Loads and warms up one version: AVAILABLE and served, or END with why.
  void load(int64_t version);
  void set_state(int64_t version, const std::string& state, runtime::Status status);

  ModelOptions options_;  // its model's policy and labels under mu_
  actors::Runtime& runtime_;
  mutable std::mutex mu_;
  std::map<int64_t, std::shared_ptr<Servable>> served_;
  std::map<int64_t, VersionState> states_;
  std::mutex poll_mu_;  // one poll at a time
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread poller_;
};

}  // namespace troupe::serve
