// Experiment: the train-and-evaluate schedule over an Estimator, as TF.Learn's Experiment and
// tf.estimator.train_and_evaluate, with what their users asked for: evaluation every N steps or
// seconds on the model in memory (no checkpoint round trip), several named evaluation sets,
// early stopping on an evaluation metric that can put back the best weights, learning-rate
// reduction on a plateau, exports of the latest or the best model, and a final report. In a
// cluster it plays the task the Estimator's RunConfig names (estimators/training.h): the chief
// runs this schedule, a worker trains, a ps serves, an evaluator evaluates each checkpoint.
//
//   Experiment exp(estimator, *train, {{"test", *test}},
//                  {.eval_every_steps = 500, .early_stopping_rounds = 5});
//   auto report = exp.train_and_evaluate();       // Result<ExperimentReport>
//   exp.request_stop();                           // from another thread: stop gracefully
//   report->final_metrics.at("accuracy");
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "estimators/estimator.h"
#include "estimators/training.h"

namespace troupe::estimators {

struct ExperimentOptions {
  int64_t train_steps = 0;       // stop at this global step (0: when the training data ends)
  int64_t eval_every_steps = 0;  // 0 (and no seconds): evaluate once, at the end
  double eval_every_secs = 0;
  int64_t eval_steps = 0;         // batches per evaluation (0: the whole set)
  int early_stopping_rounds = 0;  // evaluations without improvement before stopping (0: off)
  std::string early_stopping_metric = "loss";  // of the first evaluation set
  // Whether a larger value is better; by default larger is better for everything but loss-like
  // metrics (loss, average_loss, mse, rmse, mae, log_loss).
  int maximize = -1;
  double min_delta = 0;
  bool restore_best_weights = true;
  int reduce_lr_patience = 0;  // evaluations on a plateau before the learning rate is cut (0: off)
  double reduce_lr_factor = 0.5;
  double min_learning_rate = 1e-6;
  // Keep this many best checkpoints by the early-stopping metric in model_dir/best (0: none).
  int keep_best_checkpoints = 0;
  std::string export_strategy;  // "", "latest" (after training) or "best" (at each new best)
  std::string export_dir;       // default: model_dir/export/<strategy>
  // Hooks for every round of training and every evaluation (TrainSpec and EvalSpec hooks).
  std::vector<std::shared_ptr<SessionRunHook>> train_hooks;
  std::vector<std::shared_ptr<SessionRunHook>> eval_hooks;
  // An evaluator task looks for a new checkpoint this often, and ends when none came for
  // evaluator_timeout_secs (or one reached train_steps); each evaluation goes to on_evaluation.
  double evaluator_poll_secs = 1;
  double evaluator_timeout_secs = 600;
  std::function<void(int64_t global_step, const Metrics&)> on_evaluation;
};

struct ExperimentState;

struct ExperimentReport {
  Metrics final_metrics;  // of the first evaluation set, with the model as it ends
  std::vector<std::pair<std::string, Metrics>> final_by_set;
  std::vector<std::pair<int64_t, Metrics>> history;  // (global step, first set's metrics)
  int64_t global_step = 0;
  bool stopped_early = false;
  bool stopped = false;  // by request_stop()
  int64_t best_step = 0;
  double best_value = 0;
  std::vector<std::string> exports;
  double seconds = 0;
  int restarts = 0;   // of training, from the latest checkpoint, after failures
  int64_t steps = 0;  // a worker's: the training steps this process ran
};

class Experiment {
 public:
  Experiment(Estimator& estimator, input::Dataset train,
             std::vector<std::pair<std::string, input::Dataset>> eval_sets,
             ExperimentOptions options = {});

  // Plays the task RunConfig::cluster names. The chief (or a process alone) runs the schedule
  // in an ExperimentActor that supervises one EstimatorActor per round (train a chunk,
  // evaluate); this thread waits for its report. A worker trains until train_steps (its
  // report: global_step, steps, restarts, final_metrics["loss"]); a ps serves until
  // request_stop(); an evaluator evaluates each new checkpoint on the first evaluation set
  // (its report: history, and the last evaluation as final_metrics).
  runtime::Result<ExperimentReport> train_and_evaluate();
  // Trains without evaluating, up to train_steps or the end of the training data.
  runtime::Result<TrainResult> train();
  // Evaluates the model as it is on every evaluation set, in order.
  runtime::Result<std::vector<std::pair<std::string, Metrics>>> evaluate();
  // Ends train_and_evaluate gracefully: the running steps finish, the final checkpoint is
  // saved, the model is evaluated and the report comes back (stopped set). From any thread.
  void request_stop();
  // Evaluates each new checkpoint in model_dir as it appears, until one at or beyond
  // `last_step` (0: until `timeout_secs` pass without a new one) or request_stop().
  runtime::Result<std::vector<std::pair<int64_t, Metrics>>> continuous_eval(
      int64_t last_step, double poll_secs = 1, double timeout_secs = 60);

 private:
  struct Progress;
  using SetMetrics = std::vector<std::pair<std::string, Metrics>>;
  using ExperimentActor = caf::stateful_actor<ExperimentState>;
  enum class RoundEnd { kGoOn, kDone, kDoneRestored };  // restored: the best weights are back
  runtime::Result<ExperimentReport> run_schedule();     // the chief's
  bool maximize() const;
  bool in_chunks() const;
  std::string export_base() const;
  TrainOptions round_options() const;
  EvalOptions eval_options(const std::string& set) const;
  static void log_evaluation(const std::string& set, const Metrics& m);
  // Applies a round's evaluation: early stopping, plateaus, best checkpoints and exports.
  runtime::Result<RoundEnd> after_round(Progress& p, const TrainResult& r,
                                        const SetMetrics& results);
  // The final metrics and checkpoint of the best weights put back, evaluated again.
  runtime::Status after_restore(Progress& p, const SetMetrics& again);
  runtime::Status conclude(Progress& p);
  static void evaluate_from(ExperimentActor* self, size_t k, std::shared_ptr<SetMetrics> out,
                            std::function<void(runtime::Result<SetMetrics>)> done);
  static caf::behavior actor_behavior(ExperimentActor* self, Experiment* experiment);

  Estimator& estimator_;
  input::Dataset train_;
  std::vector<std::pair<std::string, input::Dataset>> eval_sets_;
  ExperimentOptions options_;
  std::mutex actor_mu_;
  caf::actor actor_;  // while train_and_evaluate runs, for request_stop
  StopRequest stop_;  // a ps's and an evaluator's
};

}  // namespace troupe::estimators
