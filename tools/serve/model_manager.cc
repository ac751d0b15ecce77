#include "tools/serve/model_manager.h"

#include "runtime/log.h"
#include "tools/serve/warmup.h"

namespace troupe::serve {

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

ModelManager::~ModelManager() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
}

void ModelManager::set_state(int64_t version, const std::string& state, runtime::Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  states_[version] = {version, state, std::move(status)};
}

void ModelManager::poll() {
  std::lock_guard<std::mutex> one(poll_mu_);
  auto versions = serving::list_versions(options_.base_path);
  if (!versions.ok() || versions->empty()) return;
  const int64_t newest = versions->back();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (states_.count(newest)) return;  // served, or failed once
    states_[newest] = {newest, "LOADING", runtime::ok_status()};
  }
  const std::string dir = options_.base_path + "/" + std::to_string(newest);
  // Batch runners each run one call at a time (and an adaptive batcher's caller one more), and
  // so do server threads without batching.
  const int sessions = options_.batching.enabled ? options_.batching.num_batch_threads +
                                                       (options_.batching.adaptive ? 1 : 0)
                                                 : options_.sessions;
  auto loaded = serving::Predictor::load(
      dir, {.sessions = sessions, .batch_invariant = true, .runtime = &runtime_});
  if (!loaded.ok()) {
    runtime::log_error("model ", options_.name, " version ", newest,
                       " did not load: ", loaded.status().to_string());
    set_state(newest, "END", loaded.status());
    return;
  }
  auto warmed = run_warmup(dir, **loaded);
  if (!warmed.ok()) {
    runtime::log_error("model ", options_.name, " version ", newest,
                       " did not warm up: ", warmed.status().to_string());
    set_state(newest, "END", warmed.status());
    return;
  }
  if (*warmed > 0) {
    runtime::log_info("model ", options_.name, " version ", newest, " warmed up with ", *warmed,
                      " requests");
  }
  auto s = std::make_shared<Servable>();
  s->version = newest;
  s->predictor = std::move(*loaded);
  if (options_.batching.enabled) {
    s->batcher = std::make_unique<serving::Batcher>(runtime_, s->predictor, options_.batching);
  }
  std::shared_ptr<Servable> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    old = std::move(current_);
    current_ = std::move(s);
    states_[newest] = {newest, "AVAILABLE", runtime::ok_status(), *warmed};
    if (old) states_[old->version] = {old->version, "END", runtime::ok_status()};
  }
  runtime::log_info("model ", options_.name, " serves version ", newest, " (", dir, ")");
  // `old` goes with the last request that holds it.
}

std::shared_ptr<Servable> ModelManager::find(int64_t version) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!current_ || (version != 0 && version != current_->version)) return nullptr;
  return current_;
}

std::vector<VersionState> ModelManager::states() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<VersionState> out;
  for (auto it = states_.rbegin(); it != states_.rend(); ++it) out.push_back(it->second);
  return out;
}

}  // namespace troupe::serve
