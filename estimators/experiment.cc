#include "estimators/experiment.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include "estimators/best_value.h"
#include "runtime/checkpoint.h"
#include "runtime/log.h"

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

Result<TrainResult> Experiment::train() {
  TrainOptions t;
  t.hooks = options_.train_hooks;
  t.max_steps = options_.train_steps;
  return estimator_.train(train_, t);
}

EvalOptions Experiment::eval_options(const std::string& name) const {
  EvalOptions o;
  o.steps = options_.eval_steps;
  o.name = name;
  o.hooks = options_.eval_hooks;
  return o;
}

void Experiment::log_evaluation(const std::string& name, const Metrics& m) {
  runtime::log_info("evaluation", name.empty() ? "" : " [" + name + "]", " at step ",
                    static_cast<long long>(m.at("global_step")), ": ", format(m));
}

Result<std::vector<std::pair<std::string, Metrics>>> Experiment::evaluate() {
  std::vector<std::pair<std::string, Metrics>> out;
  for (const auto& [name, data] : eval_sets_) {
    TROUPE_ASSIGN_OR_RETURN(Metrics m, estimator_.evaluate(data, eval_options(name)));
    log_evaluation(name, m);
    out.push_back({name, std::move(m)});
  }
  return out;
}

// The schedule's state across rounds (a round: train a chunk, evaluate).
struct Experiment::Progress {
  ExperimentReport report;
  Clock::time_point start = Clock::now();
  explicit Progress(BestValue::Options o) : best(o) {}
  BestValue best;
  int plateau = 0;  // evaluations without a new best since the learning rate was last cut
};

std::string Experiment::export_base() const {
  return !options_.export_dir.empty()
             ? options_.export_dir
             : estimator_.config().model_dir + "/export/" + options_.export_strategy;
}

bool Experiment::in_chunks() const {
  return options_.eval_every_steps > 0 || options_.eval_every_secs > 0;
}

TrainOptions Experiment::round_options() const {
  TrainOptions t;
  t.hooks = options_.train_hooks;
  t.keep_input = true;
  t.max_steps = options_.train_steps;
  if (options_.eval_every_steps > 0) t.steps = options_.eval_every_steps;
  if (options_.eval_every_secs > 0)
    t.hooks.push_back(std::make_shared<StopAfter>(options_.eval_every_secs));
  return t;
}

Result<Experiment::RoundEnd> Experiment::after_round(Progress& p, const TrainResult& r,
                                                     const SetMetrics& results) {
  ExperimentReport& report = p.report;
  const RoundEnd done = (!in_chunks() || r.end_of_input || r.steps == 0 || r.stopped ||
                         (options_.train_steps > 0 && r.global_step >= options_.train_steps))
                            ? RoundEnd::kDone
                            : RoundEnd::kGoOn;
  const Metrics& first = results[0].second;
  report.history.push_back({r.global_step, first});
  report.final_by_set = results;
  report.final_metrics = first;
  report.global_step = r.global_step;
  report.restarts += r.restarts;

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
  if (metric == first.end()) return done;
  if (p.best.offer(metric->second, r.global_step, estimator_.variables())) {
    report.best_value = p.best.best();
    report.best_step = p.best.best_step();
    p.plateau = 0;
    if (options_.export_strategy == "best") {
      TROUPE_ASSIGN_OR_RETURN(std::string dir, estimator_.export_saved_model(export_base()));
      report.exports.push_back(dir);
    }
    return done;
  }
  ++p.plateau;
  if (options_.reduce_lr_patience > 0 && p.plateau >= options_.reduce_lr_patience) {
    p.plateau = 0;
    auto lr = estimator_.variables().read("learning_rate");
    if (lr.ok()) {
      const double now = lr->scalar_as_double();
      const double next = std::max(options_.min_learning_rate, now * options_.reduce_lr_factor);
      estimator_.variables().assign("learning_rate",
                                    runtime::Tensor::scalar<float>(static_cast<float>(next)));
      runtime::log_info(options_.early_stopping_metric, " on a plateau: learning rate ", now,
                        " -> ", next);
    }
  }
  if (options_.early_stopping_rounds == 0 || p.best.waited() < options_.early_stopping_rounds) {
    return done;
  }
  report.stopped_early = true;
  runtime::log_info("early stopping at step ", r.global_step, ": ", options_.early_stopping_metric,
                    " has not improved on ", report.best_value, " (step ", report.best_step,
                    ") for ", p.best.waited(), " evaluations");
  if (options_.restore_best_weights && p.best.restore(estimator_.variables())) {
    return RoundEnd::kDoneRestored;
  }
  return RoundEnd::kDone;
}

Status Experiment::after_restore(Progress& p, const SetMetrics& again) {
  p.report.final_by_set = again;
  p.report.final_metrics = again[0].second;
  if (estimator_.config().model_dir.empty()) return runtime::ok_status();
  runtime::CheckpointManager m(estimator_.config().model_dir,
                               {.keep_max = estimator_.config().keep_checkpoint_max});
  return m.save(estimator_.global_step(), estimator_.variables()).status();
}

Status Experiment::conclude(Progress& p) {
  if (options_.export_strategy == "latest") {
    TROUPE_ASSIGN_OR_RETURN(std::string dir, estimator_.export_saved_model(export_base()));
    p.report.exports.push_back(dir);
  }
  p.report.seconds = std::chrono::duration<double>(Clock::now() - p.start).count();
  return runtime::ok_status();
}

struct ExperimentOutcome {
  Status status;
  ExperimentReport report;
};

struct ExperimentState {
  Experiment* experiment = nullptr;
  caf::typed_response_promise<ExperimentOutcome> promise;
  caf::actor run;  // the EstimatorActor of the round in progress
  bool stop = false;
};

namespace {
using experiment_atom = caf::atom_constant<caf::atom("experiment")>;
using round_atom = caf::atom_constant<caf::atom("round")>;
}  // namespace

// Evaluates the sets from the k-th on, each an EstimatorActor's run that this actor awaits
// without blocking, then hands `done` their metrics, in order, or the first error.
void Experiment::evaluate_from(ExperimentActor* self, size_t k, std::shared_ptr<SetMetrics> out,
                               std::function<void(Result<SetMetrics>)> done) {
  Experiment& e = *self->state.experiment;
  if (k == e.eval_sets_.size()) return done(std::move(*out));
  const std::string& name = e.eval_sets_[k].first;
  auto run = e.estimator_.spawn_evaluation(e.eval_sets_[k].second, e.eval_options(name));
  if (!run.ok()) return done(run.status());
  auto then = [self, k, out, done, run = *run](const RunOutcome& outcome) {
    Experiment& e = *self->state.experiment;
    auto metrics = e.estimator_.finish_evaluation(run, outcome);
    if (!metrics.ok()) return done(metrics.status());
    log_evaluation(e.eval_sets_[k].first, *metrics);
    out->push_back({e.eval_sets_[k].first, std::move(*metrics)});
    evaluate_from(self, k + 1, out, done);
  };
  self->request(run->actor, caf::infinite, start_run_atom::value)
      .then([then](RunOutcome& o) { then(o); },
            [self, then](caf::error& err) {
              then(RunOutcome{runtime::internal_error(
                  "the evaluation run stopped without an answer: ", self->system().render(err))});
            });
}

// ExperimentActor: runs the schedule one round at a time, each round's training and each
// evaluation as an EstimatorActor it awaits; a stop message ends the running round after the
// steps already started, and the schedule after that round's evaluation. Detached: exports and
// best checkpoints write files.
caf::behavior Experiment::actor_behavior(ExperimentActor* self, Experiment* experiment) {
  self->state.experiment = experiment;
  auto progress = std::make_shared<Progress>(BestValue::Options{
      .maximize = experiment->maximize(), .min_delta = experiment->options_.min_delta});
  auto deliver = [self, progress](Status s) {
    ExperimentState& st = self->state;
    if (s.ok()) s = st.experiment->conclude(*progress);
    progress->report.stopped = st.stop;
    st.promise.deliver(ExperimentOutcome{std::move(s), progress->report});
    self->quit();
  };
  auto trained = [self, progress, deliver](const RunOutcome& outcome) {
    auto r = self->state.experiment->estimator_.finish_training(outcome);
    if (!r.ok()) return deliver(r.status());
    auto evaluated = [self, progress, deliver, r = *r](Result<SetMetrics> results) {
      ExperimentState& st = self->state;
      if (!results.ok()) return deliver(results.status());
      auto end = st.experiment->after_round(*progress, r, *results);
      if (!end.ok()) return deliver(end.status());
      if (*end == RoundEnd::kDoneRestored) {
        // The best weights are back: the report's final metrics are theirs.
        return evaluate_from(self, 0, std::make_shared<SetMetrics>(),
                             [self, progress, deliver](Result<SetMetrics> again) {
                               if (!again.ok()) return deliver(again.status());
                               deliver(self->state.experiment->after_restore(*progress, *again));
                             });
      }
      if (*end == RoundEnd::kDone || st.stop) return deliver(runtime::ok_status());
      self->send(self, round_atom::value);
    };
    evaluate_from(self, 0, std::make_shared<SetMetrics>(), evaluated);
  };
  return {
      [self](experiment_atom) -> caf::typed_response_promise<ExperimentOutcome> {
        self->state.promise = self->make_response_promise<ExperimentOutcome>();
        self->send(self, round_atom::value);
        return self->state.promise;
      },
      [self, trained, deliver](round_atom) {
        ExperimentState& st = self->state;
        if (st.stop) return deliver(runtime::ok_status());
        Experiment& e = *st.experiment;
        auto run = e.estimator_.spawn_training(e.train_, e.round_options());
        if (!run.ok()) return deliver(run.status());
        if (!*run) return trained(RunOutcome{runtime::ok_status()});
        st.run = *run;
        self->request(st.run, caf::infinite, start_run_atom::value)
            .then(
                [self, trained](RunOutcome& o) {
                  self->state.run = nullptr;
                  trained(o);
                },
                [self, trained](caf::error& e) {
                  self->state.run = nullptr;
                  trained(RunOutcome{runtime::internal_error(
                      "the training run stopped without an answer: ", self->system().render(e))});
                });
      },
      [self, experiment](actors::stop_atom) {
        ExperimentState& st = self->state;
        if (!st.stop) {
          runtime::log_info("stopping: the running steps finish, then a last evaluation");
        }
        st.stop = true;
        // Through the Estimator's flag: the run's actor may wait for a worker the loop keeps busy.
        if (st.run) experiment->estimator_.request_stop();
      },
  };
}

Result<ExperimentReport> Experiment::train_and_evaluate() {
  ExperimentReport report;
  const ClusterConfig& cluster = estimator_.config().cluster;
  // Worker 0 of a cluster without a chief is the chief (TF's multi_worker_util). Once it has
  // finished (not stopped: a chief stopped by a signal restarts, and finds the ps tasks holding
  // the model), the ps tasks end too.
  if (cluster.is_chief) {
    Result<ExperimentReport> done = run_schedule();
    if (done.ok() && !done->stopped) {
      if (Status s = estimator_.finish_cluster(); !s.ok()) {
        runtime::log_warning("telling the ps tasks that training is over: ", s.to_string());
      }
    }
    return done;
  }
  switch (cluster.task_type) {
    case TaskType::kPs: {
      actors::ServerOptions where;
      where.host.clear();  // the task's cluster entry's
      TROUPE_RETURN_IF_ERROR(run_ps(estimator_.config(), where, stop_));
      report.stopped = true;
      return report;
    }
    case TaskType::kWorker: {
      TROUPE_ASSIGN_OR_RETURN(TrainResult r, run_worker(estimator_, train_, options_.train_steps));
      report.global_step = r.global_step;
      report.steps = r.steps;
      report.restarts = r.restarts;
      report.stopped = r.stopped;
      report.final_metrics["loss"] = r.loss;
      return report;
    }
    case TaskType::kEvaluator: {
      const int64_t last = options_.train_steps;
      TROUPE_ASSIGN_OR_RETURN(report.history, continuous_eval(last, options_.evaluator_poll_secs,
                                                              options_.evaluator_timeout_secs));
      if (!report.history.empty()) {
        report.global_step = report.history.back().first;
        report.final_metrics = report.history.back().second;
      }
      report.stopped = stop_.requested();
      return report;
    }
    case TaskType::kChief:
    case TaskType::kNone:
      break;
  }
  return run_schedule();
}

Result<ExperimentReport> Experiment::run_schedule() {
  if (eval_sets_.empty()) return runtime::invalid_argument("an Experiment needs an evaluation set");
  caf::actor_system& system = estimator_.runtime().system();
  caf::actor actor = system.spawn<caf::detached>(actor_behavior, this);
  {
    std::lock_guard<std::mutex> lock(actor_mu_);
    actor_ = actor;
  }
  ExperimentOutcome outcome{runtime::internal_error("no answer from the experiment"), {}};
  {
    caf::scoped_actor self{system};
    self->request(actor, caf::infinite, experiment_atom::value)
        .receive([&](ExperimentOutcome& o) { outcome = std::move(o); },
                 [&](caf::error& e) {
                   outcome.status = runtime::internal_error("the experiment: ", system.render(e));
                 });
  }
  {
    std::lock_guard<std::mutex> lock(actor_mu_);
    actor_ = nullptr;
  }
  if (!outcome.status.ok()) return outcome.status;
  return outcome.report;
}

void Experiment::request_stop() {
  stop_.request();
  std::lock_guard<std::mutex> lock(actor_mu_);
  if (actor_) caf::anon_send(actor_, actors::stop_atom::value);
  // Directly too: the actor reads its mailbox only once the round it is starting has started,
  // and starting it may mean waiting for the cluster; a worker's training has no actor of ours.
  estimator_.request_stop();
}

Result<std::vector<std::pair<int64_t, Metrics>>> Experiment::continuous_eval(int64_t last_step,
                                                                             double poll_secs,
                                                                             double timeout_secs) {
  if (eval_sets_.empty())
    return runtime::invalid_argument("continuous_eval needs an evaluation set");
  EvaluatorOptions o;
  o.last_step = last_step;
  o.poll_secs = poll_secs;
  o.timeout_secs = timeout_secs;
  o.eval_steps = options_.eval_steps;
  o.name = eval_sets_[0].first;
  o.on_evaluation = [this](int64_t step, const Metrics& m) {
    log_evaluation(eval_sets_[0].first, m);
    if (options_.on_evaluation) options_.on_evaluation(step, m);
  };
  return run_evaluator(estimator_, eval_sets_[0].second, o, stop_);
}

}  // namespace troupe::estimators

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::estimators::ExperimentOutcome)
