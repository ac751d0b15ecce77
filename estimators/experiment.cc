#include "estimators/experiment.h"

#include <chrono>
#include <cstdio>
#include <thread>

#include "runtime/checkpoint.h"

namespace troupe::estimators {

using runtime::Result;
using runtime::Status;
using Clock = std::chrono::steady_clock;

namespace {

// Ends a training chunk after a wall-clock interval (evaluation every N seconds).
class StopAfter : public SessionRunHook {
 public:
  explicit StopAfter(double secs) : secs_(secs), start_(Clock::now()) {}
  Status after_run(StepContext& c) override {
    if (std::chrono::duration<double>(Clock::now() - start_).count() >= secs_) c.request_stop();
    return runtime::ok_status();
  }

 private:
  double secs_;
  Clock::time_point start_;
};

std::string format(const Metrics& m) {
  std::string s;
  for (const auto& [k, v] : m) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s%s = %.6g", s.empty() ? "" : ", ", k.c_str(), v);
    s += buf;
  }
  return s;
}

}  // namespace

Experiment::Experiment(Estimator& estimator, input::Dataset train,
                       std::vector<std::pair<std::string, input::Dataset>> eval_sets,
                       ExperimentOptions options)
    : estimator_(estimator),
      train_(std::move(train)),
      eval_sets_(std::move(eval_sets)),
      options_(std::move(options)) {}

bool Experiment::maximize() const {
  if (options_.maximize >= 0) return options_.maximize == 1;
  const std::string& m = options_.early_stopping_metric;
  return !(m == "loss" || m == "average_loss" || m == "mse" || m == "rmse" || m == "mae" ||
           m == "log_loss");
}

Result<std::vector<std::pair<std::string, Metrics>>> Experiment::evaluate_all() {
  std::vector<std::pair<std::string, Metrics>> out;
  for (const auto& [name, data] : eval_sets_) {
    EvalOptions o;
    o.steps = options_.eval_steps;
    o.name = name;
    TROUPE_ASSIGN_OR_RETURN(Metrics m, estimator_.evaluate(data, o));
    std::fprintf(stderr, "INFO: evaluation [%s] at step %lld: %s\n", name.c_str(),
                 static_cast<long long>(m["global_step"]), format(m).c_str());
    out.push_back({name, std::move(m)});
  }
  return out;
}

Result<ExperimentReport> Experiment::train_and_evaluate() {
  if (eval_sets_.empty()) return runtime::invalid_argument("an Experiment needs an evaluation set");
  const auto start = Clock::now();
  ExperimentReport report;
  bool has_best = false;
  int waited = 0, plateau = 0;
  std::map<std::string, runtime::Tensor> best_weights;
  const std::string export_base =
      !options_.export_dir.empty()
          ? options_.export_dir
          : estimator_.config().model_dir + "/export/" + options_.export_strategy;
  const bool chunks = options_.eval_every_steps > 0 || options_.eval_every_secs > 0;
  while (true) {
    TrainOptions t;
    t.keep_input = true;
    t.max_steps = options_.train_steps;
    if (options_.eval_every_steps > 0) t.steps = options_.eval_every_steps;
    if (options_.eval_every_secs > 0)
      t.hooks.push_back(std::make_shared<StopAfter>(options_.eval_every_secs));
    TROUPE_ASSIGN_OR_RETURN(TrainResult r, estimator_.train(train_, t));
    const bool done = !chunks || r.end_of_input || r.steps == 0 ||
                      (options_.train_steps > 0 && r.global_step >= options_.train_steps);
    TROUPE_ASSIGN_OR_RETURN(auto results, evaluate_all());
    const Metrics& first = results[0].second;
    report.history.push_back({r.global_step, first});
    report.final_by_set = results;
    report.final_metrics = first;
    report.global_step = r.global_step;

    auto metric = first.find(options_.early_stopping_metric);
    if (metric == first.end() &&
        (options_.early_stopping_rounds > 0 || options_.export_strategy == "best" ||
         options_.reduce_lr_patience > 0 || options_.keep_best_checkpoints > 0)) {
      return runtime::invalid_argument("early stopping metric '", options_.early_stopping_metric,
                                       "' is not among the evaluation's metrics: ", format(first));
    }
    if (options_.keep_best_checkpoints > 0 && !estimator_.config().model_dir.empty()) {
      runtime::CheckpointManager best(estimator_.config().model_dir,
                                      {.keep_max = estimator_.config().keep_checkpoint_max,
                                       .best_k = options_.keep_best_checkpoints,
                                       .metric = options_.early_stopping_metric,
                                       .higher_is_better = maximize()});
      TROUPE_RETURN_IF_ERROR(best.save(r.global_step, estimator_.variables(), first).status());
    }
    if (metric != first.end()) {
      const double v = metric->second;
      const bool better = !has_best || (maximize() ? v > report.best_value + options_.min_delta
                                                   : v < report.best_value - options_.min_delta);
      if (better) {
        has_best = true;
        report.best_value = v;
        report.best_step = r.global_step;
        waited = plateau = 0;
        best_weights.clear();
        for (const std::string& name : estimator_.variables().names()) {
          auto tensor = estimator_.variables().read(name);
          if (tensor.ok() && name != "global_step") best_weights[name] = *tensor;
        }
        if (options_.export_strategy == "best") {
          TROUPE_ASSIGN_OR_RETURN(std::string dir, estimator_.export_saved_model(export_base));
          report.exports.push_back(dir);
        }
      } else {
        ++waited;
        ++plateau;
        if (options_.reduce_lr_patience > 0 && plateau >= options_.reduce_lr_patience) {
          plateau = 0;
          auto lr = estimator_.variables().read("learning_rate");
          if (lr.ok()) {
            const double now = lr->scalar_as_double();
            const double next =
                std::max(options_.min_learning_rate, now * options_.reduce_lr_factor);
            estimator_.variables().assign("learning_rate",
                                          runtime::Tensor::scalar<float>(static_cast<float>(next)));
            std::fprintf(stderr, "INFO: %s on a plateau: learning rate %.3g -> %.3g\n",
                         options_.early_stopping_metric.c_str(), now, next);
          }
        }
        if (options_.early_stopping_rounds > 0 && waited >= options_.early_stopping_rounds) {
          report.stopped_early = true;
          std::fprintf(stderr,
                       "INFO: early stopping at step %lld: %s has not improved on %.6g (step "
                       "%lld) for %d evaluations\n",
                       static_cast<long long>(r.global_step),
                       options_.early_stopping_metric.c_str(), report.best_value,
                       static_cast<long long>(report.best_step), waited);
          if (options_.restore_best_weights && !best_weights.empty()) {
            for (const auto& [name, tensor] : best_weights)
              estimator_.variables().assign(name, tensor);
            TROUPE_ASSIGN_OR_RETURN(auto again, evaluate_all());
            report.final_by_set = again;
            report.final_metrics = again[0].second;
            if (!estimator_.config().model_dir.empty()) {
              runtime::CheckpointManager m(estimator_.config().model_dir,
                                           {.keep_max = estimator_.config().keep_checkpoint_max});
              TROUPE_RETURN_IF_ERROR(
                  m.save(estimator_.global_step(), estimator_.variables()).status());
            }
          }
          break;
        }
      }
    }
    if (done) break;
  }
  if (options_.export_strategy == "latest") {
    TROUPE_ASSIGN_OR_RETURN(std::string dir, estimator_.export_saved_model(export_base));
    report.exports.push_back(dir);
  }
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

Result<std::vector<std::pair<int64_t, Metrics>>> Experiment::continuous_eval(int64_t last_step,
                                                                             double poll_secs,
                                                                             double timeout_secs) {
  if (estimator_.config().model_dir.empty()) {
    return runtime::invalid_argument("continuous_eval needs a model_dir to watch");
  }
  std::vector<std::pair<int64_t, Metrics>> out;
  std::string seen;
  auto idle_since = Clock::now();
  while (true) {
    const std::string latest = estimator_.latest_checkpoint();
    if (!latest.empty() && latest != seen) {
      seen = latest;
      idle_since = Clock::now();
      EvalOptions o;
      o.steps = options_.eval_steps;
      o.checkpoint_path = latest;
      o.name = eval_sets_.empty() ? "" : eval_sets_[0].first;
      if (eval_sets_.empty())
        return runtime::invalid_argument("continuous_eval needs an evaluation set");
      TROUPE_ASSIGN_OR_RETURN(Metrics m, estimator_.evaluate(eval_sets_[0].second, o));
      const auto step = static_cast<int64_t>(m["global_step"]);
      std::fprintf(stderr, "INFO: evaluated %s: %s\n", latest.c_str(), format(m).c_str());
      out.push_back({step, m});
      if (last_step > 0 && step >= last_step) return out;
    }
    if (std::chrono::duration<double>(Clock::now() - idle_since).count() > timeout_secs) return out;
    std::this_thread::sleep_for(std::chrono::duration<double>(poll_secs));
  }
}

}  // namespace troupe::estimators
