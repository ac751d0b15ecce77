#include "tools/serve/served_models.h"

#include <set>

#include "runtime/log.h"

namespace troupe::serve {

ServedModels::ServedModels(ModelOptions defaults, actors::Runtime& runtime, ServingMetrics* metrics)
    : defaults_(std::move(defaults)), runtime_(runtime), metrics_(metrics) {}

ServedModels::~ServedModels() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  // Each model's poller ends before any model goes, so none loads while others unload.
  for (const auto& [name, m] : models_) m->stop();
}

void ServedModels::apply(const std::vector<ModelConfig>& models) {
  std::lock_guard<std::mutex> one(apply_mu_);
  std::set<std::string> listed;
  for (const ModelConfig& c : models) {
    listed.insert(c.name);
    std::shared_ptr<ModelManager> served = find(c.name);
    if (served && served->base_path() == c.base_path) {
      served->configure(c.policy, c.labels);
      served->poll();
    } else {
      ModelOptions o = defaults_;
      o.model = c;
      if (metrics_ != nullptr) {
        o.batching.on_batch = [m = metrics_, name = c.name](
                                  int64_t rows, const std::vector<std::chrono::microseconds>& w) {
          m->batch(name, rows, w);
        };
      }
      auto loaded = std::make_shared<ModelManager>(std::move(o), runtime_);
      loaded->poll();
      {
        std::lock_guard<std::mutex> lock(mu_);
        models_[c.name] = loaded;
      }
      if (served) served->stop();  // its versions go with the requests that hold them
      if (!loaded->status(0, "").ok()) {
        runtime::log_warning("model ", c.name, ": no version folder under ", c.base_path,
                             " yet: requests get 404 until one appears");
      }
      served = loaded;
    }
    for (const auto& [label, version] : c.labels) {
      if (!served->servable(version, "").ok()) {
        runtime::log_warning("model ", c.name, ": label '", label, "' names version ", version,
                             ", which is not available: requests for it get 404 until it is");
      }
    }
  }
  std::vector<std::shared_ptr<ModelManager>> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = models_.begin(); it != models_.end();) {
      if (listed.count(it->first)) {
        ++it;
        continue;
      }
      dropped.push_back(std::move(it->second));
      it = models_.erase(it);
    }
  }
  for (const auto& m : dropped) {
    m->stop();
    runtime::log_info("model ", m->name(), " is no longer served");
  }
  applied_ = models;
}

runtime::Status ServedModels::reload(const std::vector<ModelConfig>& models) {
  apply(models);
  std::vector<std::string> idle;
  runtime::Status first;
  for (const ModelConfig& c : models) {
    if (servable(c.name, 0, "").ok()) continue;
    runtime::Status why =
        runtime::not_found("its base path ", c.base_path, " holds no version folder yet");
    if (auto states = status(c.name, 0, ""); states.ok()) {
      for (const VersionState& v : *states) {
        if (!v.status.ok()) {
          why =
              runtime::make_error(v.status.code(), "version ", v.version, ": ", v.status.message());
          break;
        }
      }
    }
    if (idle.empty()) first = why;
    idle.push_back(c.name);
  }
  if (idle.empty()) return runtime::ok_status();
  if (idle.size() == 1) {
    return runtime::make_error(first.code(), "model ", idle[0],
                               " serves no version: ", first.message());
  }
  std::string names;
  for (const std::string& n : idle) names += (names.empty() ? "" : ", ") + n;
  return runtime::make_error(first.code(), idle.size(), " of ", models.size(),
                             " models serve no version (", names, "); ", idle[0], ": ",
                             first.message());
}

void ServedModels::watch(std::string path, std::chrono::milliseconds interval) {
  watcher_ = std::thread([this, path = std::move(path), interval] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_cv_.wait_for(lock, interval, [this] { return stopping_; })) {
      lock.unlock();
      auto models = read_model_config(path);
      if (!models.ok()) {
        runtime::log_error("the model config was not applied: ", models.status().message(),
                           " (the models served stay as they are)");
      } else {
        bool changed = false;
        {
          std::lock_guard<std::mutex> one(apply_mu_);
          changed = *models != applied_;
        }
        if (changed) {
          runtime::log_info("model config ", path, " changed: applying it");
          apply(*models);
        }
      }
      lock.lock();
    }
  });
}

std::shared_ptr<ModelManager> ServedModels::find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(name);
  return it == models_.end() ? nullptr : it->second;
}

runtime::Result<std::shared_ptr<Servable>> ServedModels::servable(const std::string& name,
                                                                  int64_t version,
                                                                  const std::string& label) const {
  std::shared_ptr<ModelManager> m = find(name);
  if (!m) return servable_not_found(name, version);
  return m->servable(version, label);
}

runtime::Result<std::vector<VersionState>> ServedModels::status(const std::string& name,
                                                                int64_t version,
                                                                const std::string& label) const {
  std::shared_ptr<ModelManager> m = find(name);
  if (!m) return servable_not_found(name, version);
  return m->status(version, label);
}

}  // namespace troupe::serve
