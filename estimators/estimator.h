// Estimator: trains, evaluates and predicts with a model given as a model_fn, as
// tf.estimator.Estimator. It owns an actor runtime, one variable store shared by the model's
// training, evaluation and prediction graphs (so evaluation runs on the in-memory model, and
// prediction keeps its graph and session resident between calls), the input pipelines, and the
// checkpoints and event files in model_dir. Training resumes from the latest checkpoint.
//
//   Estimator est(my_model_fn, config, params);
//   auto train = input::fashion_mnist("train", {.batch_size = 128, .num_epochs = 5, .shuffle =
//   true}); auto done = est.train(*train);                               // Result<TrainResult>
//   auto metrics = est.evaluate(*input::fashion_mnist("test"));  // {"accuracy": ..., "loss": ...}
//   auto out = est.predict(*input::arrays({{"image", x}}, ""));  // per batch: {"classes": ...}
//
// train() hands the run to an EstimatorActor (estimators/estimator_actor.h) and waits for its
// one answer: it runs each training segment (the steps between two sync points, such as
// checkpoints) as one loop in the session actor, batches from the pipeline's queue actor, every
// hook in an actor of its own watching every step. A failure of the machinery (an unreachable
// shard, an actor that died, a kernel or hook that threw) restarts training from the latest
// checkpoint, up to RunConfig::max_restarts times; a user error (a bad shape in model_fn, a
// missing feature, a bad input row) fails at once with a message naming it. evaluate() and
// predict() are an EstimatorActor's run each too: one loop, whose values a consumer actor hands
// to the metrics or to the caller's function; a failure of the machinery restarts the session
// and the input, which reads on after the batches already counted.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/runtime_system.h"
#include "actors/session.h"
#include "estimators/cluster_member.h"
#include "estimators/estimator_actor.h"
#include "estimators/hooks.h"
#include "estimators/input/dataset.h"
#include "estimators/metrics.h"
#include "estimators/model_fn.h"
#include "estimators/model_graph.h"
#include "estimators/run_config.h"
#include "runtime/checkpoint.h"

namespace troupe::estimators {

class SummaryWriter;

struct TrainOptions {
  int64_t steps = 0;      // this many more steps (0: until the data ends or max_steps)
  int64_t max_steps = 0;  // stop at this global step; skip training if already there
  std::vector<std::shared_ptr<SessionRunHook>> hooks;
  std::vector<CheckpointListener> saving_listeners;
  // Keep the input pipeline between calls with the same dataset, so that training in chunks
  // (an Experiment evaluating every N steps) walks through the data instead of restarting it.
  bool keep_input = false;
};

struct TrainResult {
  int64_t global_step = 0;
  int64_t steps = 0;  // run by this call (a cluster's replica: its own, not the others')
  double loss = 0;    // of the last step
  bool end_of_input = false;
  bool stopped = false;  // by request_stop()
  int restarts = 0;
};

struct EvalOptions {
  int64_t steps = 0;  // batches (0: the whole dataset)
  std::string name;   // summaries go to model_dir/eval or model_dir/eval_<name>
  std::vector<std::shared_ptr<SessionRunHook>> hooks;
  std::string checkpoint_path;  // evaluate this checkpoint instead of the model in memory
};

// An evaluation spawned by Estimator::spawn_evaluation: its EstimatorActor (send it
// start_run_atom) and what finish_evaluation makes of the answer.
struct EvaluationRun {
  caf::actor actor;
  std::shared_ptr<EvalTally> tally;
  std::shared_ptr<std::unique_ptr<input::Pipeline>> input;  // a restart replaces it
  std::string source;                                       // the dataset's, for errors
  std::string name;                                         // EvalOptions::name
  int64_t global_step = 0;
  // The model_fn's summaries, and their values in the last batch (written with the metrics).
  std::vector<ops::summary::Marked> summaries;
  std::shared_ptr<std::vector<runtime::Tensor>> last_summaries;
  // The metrics that count in the graph: each name and its value, read when the run ends.
  std::vector<std::pair<std::string, runtime::Output>> graph_metrics;
};

struct PredictOptions {
  std::vector<std::string> keys;  // predictions to fetch (empty: all)
  bool yield_single_examples = true;
  std::vector<std::shared_ptr<SessionRunHook>> hooks;
};

// An input an export serves, as tf.estimator.export.build_raw_serving_input_receiver_fn's
// features: its name, dtype and the dimensions of one example (-1 where they vary).
struct ServingInput {
  std::string name;
  runtime::DType dtype = runtime::DType::kFloat32;
  std::vector<int64_t> dims;
};

struct ExportOptions {
  std::vector<ServingInput> inputs;  // empty: the features the model last saw
  // Empty: the model in memory (else the latest checkpoint); a path: that checkpoint, loaded
  // into the model as EvalOptions::checkpoint_path is.
  std::string checkpoint_path;
  std::vector<std::string> class_labels;  // names of the classes classify answers with
  // Files copied into the export's assets.extra/ by name (TF's assets_extra): a warm-up file of
  // TF Serving's requests as "tf_serving_warmup_requests", which troupe serve runs before it
  // serves the version.
  std::map<std::string, std::string> assets_extra;  // name -> path
};

using Prediction = std::map<std::string, runtime::Tensor>;

class Estimator {
 public:
  Estimator(ModelFn model_fn, RunConfig config = {}, Params params = {});
  ~Estimator();
  Estimator(const Estimator&) = delete;
  Estimator& operator=(const Estimator&) = delete;

  runtime::Result<TrainResult> train(const input::Dataset& data, TrainOptions options = {});
  // Ends the running train() after the steps already started, as if its data had ended: the
  // hooks' end() runs and the final checkpoint is saved. From any thread (a signal handler's
  // thread, say); nothing happens when no training runs. A run still waiting for its cluster
  // (ps tasks not up, or the chief not done initialising) ends at once, Cancelled.
  void request_stop();
  // A cluster's chief, once its training is over for good: the ps tasks end (exit 0). Nothing
  // outside a cluster, or on a worker.
  runtime::Status finish_cluster() { return member_.finish(); }
  // train() in two halves, for supervisors that drive runs as actors (the ExperimentActor):
  // the EstimatorActor of one run, not yet started (send it train_atom; null when there is
  // nothing to train), and the result from its answer, which every spawned run must be given.
  runtime::Result<caf::actor> spawn_training(const input::Dataset& data, TrainOptions options);
  runtime::Result<TrainResult> finish_training(const RunOutcome& outcome);
  // Loss (example-weighted mean), every eval metric, and global_step.
  runtime::Result<Metrics> evaluate(const input::Dataset& data, EvalOptions options = {});
  // evaluate() in two halves, as train()'s, for supervisors that await runs as actors.
  runtime::Result<EvaluationRun> spawn_evaluation(const input::Dataset& data, EvalOptions options);
  runtime::Result<Metrics> finish_evaluation(const EvaluationRun& run, const RunOutcome& outcome);
  // Several named sets at once, each into model_dir/eval_<name>, on the same model: by name.
  runtime::Result<std::map<std::string, Metrics>> evaluate(
      const std::vector<std::pair<std::string, input::Dataset>>& sets, EvalOptions options = {});
  // Calls `each` with every example's predictions (or every batch's, without
  // yield_single_examples), in order, on a thread of the prediction's own while this one
  // waits; false stops.
  runtime::Status predict(const input::Dataset& data,
                          const std::function<bool(const Prediction&)>& each,
                          PredictOptions options = {});
  // All predictions, one entry per batch (components along dimension 0).
  runtime::Result<std::vector<Prediction>> predict_batches(const input::Dataset& data,
                                                           PredictOptions options = {});

  std::vector<std::string> get_variable_names() const;
  runtime::Result<runtime::Tensor> get_variable_value(const std::string& name) const;
  int64_t global_step() const;
  std::string latest_checkpoint() const;
  // A directory export_dir_base/<version> (estimators/export/saved_model.h) that serving::load
  // and `troupe serve` read: the prediction graph, the variables it reads and the signatures
  // serving_default and predict (every export output), classification (export_scores) and
  // regression (export_regression). The inputs are options.inputs, else the features the model
  // last saw; the variables those of options.checkpoint_path, else the model's own.
  runtime::Result<std::string> export_saved_model(const std::string& export_dir_base,
                                                  ExportOptions options = {});
  // The features the model last trained, evaluated or predicted on, as export inputs.
  std::vector<ServingInput> serving_inputs() const;

  const RunConfig& config() const { return config_; }
  const Params& params() const { return params_; }
  // New hyperparameters: graphs are rebuilt at the next call; the variables stay.
  void set_params(Params params);
  // A new model_fn (a canned model's after set_params): the same, graphs rebuilt at the next call.
  void set_model_fn(ModelFn model_fn);
  runtime::VariableStore& variables() { return *store_; }
  actors::Runtime& runtime() { return *runtime_; }

 private:
  // A mode's graph (model_graph.h) and what runs it.
  struct Model : ModelGraph {
    std::shared_ptr<const actors::Source> source;  // the last dataset's, known to fit
    std::unique_ptr<actors::Session> session;
    // In a cluster, the training graph's variables live on the ps tasks; the chief initialises
    // them in this process first (every node local), then sends them there.
    std::unique_ptr<actors::Session> local_session;
  };
  runtime::Result<Model*> model_for(Mode mode, const input::Dataset& data);
  runtime::Status ensure_variables(Model& m, Mode mode);
  runtime::Result<std::vector<std::shared_ptr<SessionRunHook>>> training_hooks(
      Model& m, const TrainOptions& options, int64_t last);
  runtime::Status restart_training(Model& m);
  runtime::Status restore_latest(Model& m);
  // Loads the checkpoint at `path` into the store, if it holds what m's graph reads.
  runtime::Status load_checkpoint(const Model& m, const std::string& path);
  runtime::Status open_sessions(Model& m, Mode mode);
  // A cluster's training (RunConfig::cluster with ps tasks), for the chief and the workers.
  bool in_cluster() const { return member_.active(); }
  // The model from the ps tasks into the store; a ps that has gone is waited for (and, by the
  // chief, given the latest checkpoint) once, before the pull gives up.
  runtime::Status pull_from_cluster();
  runtime::Status recover_cluster(const runtime::Status& why);
  runtime::Status start_training_input(const input::Dataset& data);
  // An evaluation's or prediction's run (`mode`) on m's session and `data`, whose input is
  // `input`: the parts every such run has, before its fetches, consumer and hooks.
  EstimatorActorSpec inference_spec(Mode mode, Model* m, const input::Dataset& data,
                                    std::shared_ptr<std::unique_ptr<input::Pipeline>> input);
  // The answer of a spawned run, waited for on this thread.
  RunOutcome await_run(const caf::actor& run, const char* what);
  static uint64_t input_fingerprint(const input::Dataset& data);

  ModelFn model_fn_;
  RunConfig config_;
  Params params_;
  std::unique_ptr<actors::Runtime> runtime_;
  std::shared_ptr<runtime::VariableStore> store_;
  std::unique_ptr<runtime::CheckpointManager> checkpoints_;
  std::map<Mode, std::unique_ptr<Model>> models_;
  std::unique_ptr<SummaryWriter> train_events_;
  std::map<std::string, std::unique_ptr<SummaryWriter>> eval_events_;
  std::unique_ptr<input::Pipeline> train_input_;
  const actors::Source* train_input_source_ = nullptr;
  std::vector<InputComponent> last_components_;
  // Where the training input stands, for checkpoints: it started at global step
  // input_base_step_ after input_position_.batches batches; input_done_ once it ran out.
  runtime::InputPosition input_position_;
  int64_t input_base_step_ = 0;
  std::atomic<bool> input_done_{false};
  runtime::InputPosition resume_input_;      // from the checkpoint restored last
  std::atomic<bool> stop_requested_{false};  // since this run began: ends cluster waits
  ClusterMember member_;                     // the chief's or a worker's part in a cluster
  int recoveries_ = 0;  // of the cluster between training runs, counted in the next's restarts
  std::mutex running_mu_;
  caf::actor running_;                               // the EstimatorActor of the running train()
  std::shared_ptr<std::atomic<bool>> running_stop_;  // its stop flag, for request_stop
};

}  // namespace troupe::estimators
