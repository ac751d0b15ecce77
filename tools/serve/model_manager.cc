#include "tools/serve/model_manager.h"

#include <algorithm>

#include "runtime/log.h"
#include "tools/serve/warmup.h"

namespace troupe::serve {

runtime::Status servable_not_found(const std::string& name, int64_t version) {
  return runtime::not_found("Servable not found for request: ",
                            version == 0
                                ? "Latest(" + name + ")"
                                : "Specific(" + name + ", " + std::to_string(version) + ")");
}

ModelManager::ModelManager(ModelOptions options, actors::Runtime& runtime)
    : options_(std::move(options)), runtime_(runtime) {
  if (options_.poll_interval.count() > 0) {
    poller_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(mu_);
      while (!stopping_) {
        lock.unlock();
        poll();
        lock.lock();
        stop_cv_.wait_for(lock, options_.poll_interval, [this] { return stopping_; });
      }
    });
  }
}

ModelManager::~ModelManager() { stop(); }

void ModelManager::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
}

void ModelManager::configure(VersionPolicy policy, std::map<std::string, int64_t> labels) {
  std::lock_guard<std::mutex> lock(mu_);
  options_.model.policy = std::move(policy);
  options_.model.labels = std::move(labels);
}

void ModelManager::set_state(int64_t version, const std::string& state, runtime::Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  states_[version] = {version, state, std::move(status)};
}

void ModelManager::poll() {
  std::lock_guard<std::mutex> one(poll_mu_);
  auto found = serving::list_versions(options_.model.base_path);
  if (!found.ok()) return;  // a base path gone for a moment (a remount) unloads nothing
  // The policy picks among the versions that have not failed; a failure makes it pick again, so
  // that a broken newest version leaves the one before it served.
  std::vector<int64_t> wanted;
  for (;;) {
    int64_t next = 0;  // the newest picked version not served yet
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::vector<int64_t> candidates;
      for (int64_t v : *found) {
        auto s = states_.find(v);
        if (s == states_.end() || s->second.status.ok()) candidates.push_back(v);
      }
      wanted = options_.model.policy.choose(candidates);
      for (auto it = wanted.rbegin(); it != wanted.rend() && next == 0; ++it) {
        if (!served_.count(*it)) next = *it;
      }
      if (next == 0) break;
      states_[next] = {next, "LOADING", runtime::ok_status()};
    }
    load(next);
  }
  std::vector<std::shared_ptr<Servable>> unloaded;  // go with the last request that holds them
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = served_.begin(); it != served_.end();) {
      if (std::binary_search(wanted.begin(), wanted.end(), it->first)) {
        ++it;
        continue;
      }
      states_[it->first] = {it->first, "END", runtime::ok_status()};
      unloaded.push_back(std::move(it->second));
      it = served_.erase(it);
    }
  }
  for (const auto& s : unloaded) {
    runtime::log_info("model ", options_.model.name, " no longer serves version ", s->version);
  }
}

void ModelManager::load(int64_t version) {
  const std::string dir = options_.model.base_path + "/" + std::to_string(version);
  // Batch runners each run one call at a time (and an adaptive batcher's caller one more), and
  // so do server threads without batching.
  const int sessions = options_.batching.enabled ? options_.batching.num_batch_threads +
                                                       (options_.batching.adaptive ? 1 : 0)
                                                 : options_.sessions;
  auto loaded = serving::Predictor::load(
      dir, {.sessions = sessions, .batch_invariant = true, .runtime = &runtime_});
  if (!loaded.ok()) {
    runtime::log_error("model ", options_.model.name, " version ", version,
                       " did not load: ", loaded.status().to_string());
    set_state(version, "END", loaded.status());
    return;
  }
  auto warmed = run_warmup(dir, **loaded);
  if (!warmed.ok()) {
    runtime::log_error("model ", options_.model.name, " version ", version,
                       " did not warm up: ", warmed.status().to_string());
    set_state(version, "END", warmed.status());
    return;
  }
  if (*warmed > 0) {
    runtime::log_info("model ", options_.model.name, " version ", version, " warmed up with ",
                      *warmed, " requests");
  }
  auto s = std::make_shared<Servable>();
  s->version = version;
  s->predictor = std::move(*loaded);
  if (options_.batching.enabled) {
    s->batcher = std::make_unique<serving::Batcher>(runtime_, s->predictor, options_.batching);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    served_[version] = std::move(s);
    states_[version] = {version, "AVAILABLE", runtime::ok_status(), *warmed};
  }
  runtime::log_info("model ", options_.model.name, " serves version ", version, " (", dir, ")");
}

runtime::Result<std::shared_ptr<Servable>> ModelManager::servable(int64_t version,
                                                                  const std::string& label) const {
  const std::string& name = options_.model.name;
  std::lock_guard<std::mutex> lock(mu_);
  if (!label.empty()) {
    auto l = options_.model.labels.find(label);
    if (l == options_.model.labels.end()) {
      return runtime::not_found("Servable not found for request: model ", name,
                                " has no version label '", label, "'");
    }
    version = l->second;
    if (!served_.count(version)) {
      return runtime::not_found("Servable not found for request: label '", label, "' of model ",
                                name, " names version ", version, ", which is not available");
    }
  }
  if (served_.empty() || (version != 0 && !served_.count(version))) {
    return servable_not_found(name, version);
  }
  return version == 0 ? served_.rbegin()->second : served_.at(version);
}

runtime::Result<std::vector<VersionState>> ModelManager::status(int64_t version,
                                                                const std::string& label) const {
  if (!label.empty()) {
    TROUPE_ASSIGN_OR_RETURN(std::shared_ptr<Servable> s, servable(0, label));
    version = s->version;
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<VersionState> out;
  for (auto it = states_.rbegin(); it != states_.rend(); ++it) {
    if (version == 0 || it->first == version) out.push_back(it->second);
  }
  if (out.empty()) return servable_not_found(options_.model.name, version);
  return out;
}

}  // namespace troupe::serve
