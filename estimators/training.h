// The training executor, as tf.estimator's training.py: a process plays the task its RunConfig
// names (RunConfig::cluster, read from TF_CONFIG once): the chief trains, evaluates and exports
// on an Experiment's schedule; a worker trains its part of the data against the ps tasks until
// their shared global step reaches the end; a ps serves its share of the variables until asked
// to stop; an evaluator evaluates each new checkpoint the chief writes. Experiment's
// train_and_evaluate() plays whichever task that is, so a C++ program joins a cluster as
// `troupe train` and `troupe server` do (examples/cluster_task.cc).
//
//   StopRequest stop;                                  // stop.request() from a signal watcher
//   TROUPE_RETURN_IF_ERROR(run_ps(config, {}, stop));  // a ps: serves until stop
//   auto evaluations = run_evaluator(est, test, {.last_step = 5000}, stop);
//
// A StopRequest is thread-safe; the run_* functions block the calling thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "actors/server.h"
#include "estimators/estimator.h"
#include "estimators/run_config.h"

namespace troupe::estimators {

// A stop asked for on one thread and waited for on another, once.
class StopRequest {
 public:
  void request();
  bool requested() const;
  // Until requested or `seconds` pass; whether it was requested.
  bool wait_for(double seconds);
  void wait();

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool requested_ = false;
};

// A ps task: serves the ps RunConfig::cluster names, with RunConfig::job_secret, until `stop`
// or until the chief says that training is over (then it returns OK too).
// An empty `options.host` and a zero `options.port` are those of the task's cluster entry (bind
// "0.0.0.0" to serve every interface).
runtime::Status run_ps(const RunConfig& config, actors::ServerOptions options, StopRequest& stop);

// A worker: trains its part of `data` against the ps tasks until the global step reaches
// `max_steps` (0: the data's end) or the Estimator is asked to stop.
runtime::Result<TrainResult> run_worker(Estimator& estimator, const input::Dataset& data,
                                        int64_t max_steps);

struct EvaluatorOptions {
  int64_t last_step = 0;      // stop after evaluating a checkpoint at or beyond it (0: never)
  double poll_secs = 1;       // how often model_dir is looked at
  double timeout_secs = 600;  // stop when no new checkpoint came for this long
  int64_t eval_steps = 0;     // batches per evaluation (0: the whole set)
  std::string name;           // the evaluation's name (its events in model_dir/eval_<name>)
  // Each evaluation as it is made (the command line prints its JSON line).
  std::function<void(int64_t global_step, const Metrics&)> on_evaluation;
};

// An evaluator: evaluates each new checkpoint of the Estimator's model_dir on `data`, in order,
// until EvaluatorOptions says so or `stop`. A checkpoint removed while it is read
// (keep_checkpoint_max) is passed over.
runtime::Result<std::vector<std::pair<int64_t, Metrics>>> run_evaluator(
    Estimator& estimator, const input::Dataset& data, const EvaluatorOptions& options,
    StopRequest& stop);

}  // namespace troupe::estimators
