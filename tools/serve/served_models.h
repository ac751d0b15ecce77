// The models a server serves, by name: the one of troupe serve's --model_base_path, or those of
// a model config file (model_config.h), which may be re-read while serving: a model added is
// loaded, one dropped is unloaded, a changed version policy or label applies to the model as it
// is served. No request is dropped: a request holds the version that answers it.
//
//   ServedModels models(defaults, runtime, &metrics);     // defaults: polling, batching, sessions
//   models.apply(*read_model_config("models.config"));    // returns once they have loaded
//   models.watch("models.config", std::chrono::seconds(60));
//   if (auto m = models.find("fmnist")) m->find(0) ...;   // model_manager.h
//
// A config file that no longer reads (a typo, half written) is logged and the models served stay
// as they are. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tools/serve/metrics.h"
#include "tools/serve/model_config.h"
#include "tools/serve/model_manager.h"

namespace troupe::serve {

class ServedModels {
 public:
  // `defaults` gives every model its polling, batching and sessions; with `metrics`, each
  // model's batches are recorded there under its name.
  ServedModels(ModelOptions defaults, actors::Runtime& runtime, ServingMetrics* metrics = nullptr);
  ~ServedModels();
  ServedModels(const ServedModels&) = delete;
  ServedModels& operator=(const ServedModels&) = delete;

  // Serves exactly `models`: loads the new ones (a changed base path is a new model), gives the
  // others their policy and labels and polls them, and unloads the models not listed.
  void apply(const std::vector<ModelConfig>& models);
  // apply(), as TF Serving's ReloadConfig: then OK when every model listed serves a version, else
  // the error of the first that does not (its version's load error, or not_found when its base
  // path holds no version yet), naming how many do not. What is applied stays applied either way,
  // and a model whose version appears later is served once polled. A watched file that differs
  // from `models` is applied again at its next read.
  runtime::Status reload(const std::vector<ModelConfig>& models);
  // Re-reads `path` every `interval` and applies what changed, until the ServedModels goes.
  void watch(std::string path, std::chrono::milliseconds interval);

  std::shared_ptr<ModelManager> find(const std::string& name) const;
  // ModelManager's servable and status of the model `name`, or not_found as TF Serving words it.
  runtime::Result<std::shared_ptr<Servable>> servable(const std::string& name, int64_t version,
                                                      const std::string& label) const;
  runtime::Result<std::vector<VersionState>> status(const std::string& name, int64_t version,
                                                    const std::string& label) const;

 private:
  ModelOptions defaults_;
  actors::Runtime& runtime_;
  ServingMetrics* metrics_;
  std::mutex apply_mu_;  // one apply at a time
  std::vector<ModelConfig> applied_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<ModelManager>> models_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread watcher_;
};

}  // namespace troupe::serve
