// SessionRunHooks: code that watches or steers training, evaluation or prediction, with TF's
// contract (begin, after_create_session, before_run adding fetches, after_run, end, request
// stop). Each hook runs in an actor of its own (estimators/hook_actor.h): a hook's fetches are
// named once, in begin(), and the session loop sends it every step's values; the loop runs at
// most a couple of steps ahead of the hook's answers, so a cheap per-step hook costs no round
// trip. Work that needs the variables at rest (saving a checkpoint, restoring the best weights)
// asks for a sync point: the EstimatorActor ends the running segment, and at_sync() runs with no
// step in flight. A feed function and a profile sink (HookSetup) run in the session actor
// instead, as part of a step: share state between them and the hook only through atomics.
//
//   class LossPrinter : public SessionRunHook {
//     Status begin(HookSetup& s) override { loss_ = s.fetch(s.loss()); return ok_status(); }
//     Status after_run(StepContext& c) override {
//       if (c.global_step % 100 == 0) std::printf("%g\n", c.value(loss_).scalar_as_double());
//       return ok_status();
//     }
//     int loss_ = -1;
//   };
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/step_profiler.h"
#include "estimators/model_fn.h"
#include "ops/summary_ops.h"
#include "runtime/checkpoint.h"
#include "runtime/executor.h"
#include "runtime/graph.h"
#include "runtime/variable_store.h"

namespace troupe::estimators {

class SummaryWriter;

// What a hook sees when it is set up: the graph, the spec, and a way to ask for fetches.
class HookSetup {
 public:
  HookSetup(const runtime::Graph& graph, const EstimatorSpec& spec, Mode mode)
      : graph_(graph), spec_(spec), mode_(mode) {}
  // Fetched with every step from now on; returns the index for StepContext::value.
  int fetch(runtime::Output o);
  // In training, fetched only with the steps whose global step is a multiple of `every` (its
  // value is an empty tensor on the others), so that what a hook writes every N steps costs
  // nothing on the steps between; in evaluation and prediction, with every step.
  int fetch_every(runtime::Output o, int64_t every);
  const std::vector<runtime::Output>& occasional() const { return occasional_; }
  const std::vector<int64_t>& occasional_every() const { return occasional_every_; }
  // Where fetch_every's indices begin: StepContext::value tells them from fetch's by this.
  static constexpr int kOccasional = 1 << 24;
  // An output by name ("loss" or "dense/MatMul:0"); invalid if there is none.
  runtime::Output find(const std::string& name) const;
  runtime::Output loss() const { return spec_.loss; }
  runtime::Output learning_rate() const { return spec_.learning_rate; }
  const runtime::Graph& graph() const { return graph_; }
  const EstimatorSpec& spec() const { return spec_; }
  Mode mode() const { return mode_; }
  const std::vector<runtime::Output>& fetches() const { return fetches_; }
  // Extra feeds for every step (FeedFnHook): called in the loop before each step.
  void add_feed(std::function<runtime::Status(runtime::FeedList*)> feed) {
    feeds_.push_back(std::move(feed));
  }
  const std::vector<std::function<runtime::Status(runtime::FeedList*)>>& feeds() const {
    return feeds_;
  }
  // Asks the node actors for their kernel timings on every `every`-th global step (ProfilerHook).
  using ProfileSink = std::function<runtime::Status(int64_t step, std::vector<actors::NodeTiming>)>;
  void profile_every(int64_t every, ProfileSink sink) {
    profile_every_ = every;
    profile_sink_ = std::move(sink);
  }
  int64_t profile_every() const { return profile_every_; }
  const ProfileSink& profile_sink() const { return profile_sink_; }

 private:
  const runtime::Graph& graph_;
  const EstimatorSpec& spec_;
  Mode mode_;
  std::vector<runtime::Output> fetches_;
  std::vector<runtime::Output> occasional_;
  std::vector<int64_t> occasional_every_;
  std::vector<std::function<runtime::Status(runtime::FeedList*)>> feeds_;
  int64_t profile_every_ = 0;
  ProfileSink profile_sink_;
};

// One finished step.
class StepContext {
 public:
  // `offset`: where the hooks' fetches begin among `values`; `occasional_at`: where fetch_every's
  // begin, on the steps that carry them.
  StepContext(int64_t global_step, const std::vector<runtime::Tensor>& values, size_t offset,
              size_t occasional_at = 0)
      : global_step(global_step), values_(values), offset_(offset), occasional_at_(occasional_at) {}
  const int64_t global_step;  // after this step
  // A fetch's value; a fetch_every one's is an empty tensor on the steps without it.
  const runtime::Tensor& value(int fetch) const;
  void request_stop() { stop_ = true; }
  void request_sync() { sync_ = true; }
  bool stop_requested() const { return stop_; }
  bool sync_requested() const { return sync_; }

 private:
  const std::vector<runtime::Tensor>& values_;
  size_t offset_, occasional_at_;
  bool stop_ = false, sync_ = false;
};

// The model at rest: between segments, before the first step and after the last.
struct HookContext {
  int64_t global_step = 0;
  runtime::VariableStore& variables;
  const std::string& model_dir;
  bool stop = false;  // at_sync may set it
};

class SessionRunHook {
 public:
  virtual ~SessionRunHook() = default;
  virtual runtime::Status begin(HookSetup& setup) { return runtime::ok_status(); }
  virtual runtime::Status after_create_session(HookContext& ctx) { return runtime::ok_status(); }
  virtual runtime::Status after_run(StepContext& ctx) { return runtime::ok_status(); }
  virtual runtime::Status at_sync(HookContext& ctx) { return runtime::ok_status(); }
  virtual runtime::Status end(HookContext& ctx) { return runtime::ok_status(); }
  // The global step a hook will stop at, when it knows it in advance: the loop then starts no
  // step beyond it. A stop requested from after_run lets the steps already started (the
  // pipeline depth plus the hooks' window, a few) finish; the hooks see those steps too.
  virtual int64_t stop_step() const { return INT64_MAX; }
  // The next global step after `global_step` this hook wants a sync point at, when it knows it
  // in advance (a checkpoint every N steps): the segment then ends exactly there.
  virtual int64_t next_sync_step(int64_t global_step) const { return INT64_MAX; }
  // Whether its calls wait on other processes (a chief's saver pulls the model from the ps
  // tasks): its actor then gets a thread of its own, so that no CAF worker waits on a reply.
  virtual bool blocks() const { return false; }
};

// Stops after `num_steps` more steps, or at global step `last_step` (one of them > 0).
std::shared_ptr<SessionRunHook> stop_at_step_hook(int64_t num_steps, int64_t last_step);
// Logs the named tensors every `every_n_iter` steps (TF's LoggingTensorHook).
std::shared_ptr<SessionRunHook> logging_tensor_hook(std::vector<std::string> tensor_names,
                                                    int64_t every_n_iter);
// Stops (or fails, with fail_on_nan_loss) when the loss is NaN or infinite.
std::shared_ptr<SessionRunHook> nan_tensor_hook(bool fail_on_nan_loss = true);
// Feeds extra values into every step.
std::shared_ptr<SessionRunHook> feed_fn_hook(
    std::function<runtime::Status(runtime::FeedList*)> feed);
// Fetches `outputs` with the last step and hands them to `done` at the end.
std::shared_ptr<SessionRunHook> final_ops_hook(
    std::vector<std::string> outputs,
    std::function<void(const std::map<std::string, runtime::Tensor>&)> done);

// Listeners of checkpoint saving (TF's CheckpointSaverListener).
struct CheckpointListener {
  std::function<void(int64_t step)> before_save;
  std::function<void(int64_t step, const std::string& path)> after_save;
};
// Saves every `every_steps` steps or `every_secs` seconds, and at the end.
// `gather` first brings the model into the store (a chief's pull from its ps tasks); the
// checkpoint then holds the global step the store has.
using GatherFn = std::function<runtime::Status(runtime::VariableStore&)>;
std::shared_ptr<SessionRunHook> checkpoint_saver_hook(
    runtime::CheckpointManager* manager, int64_t every_steps, double every_secs,
    std::vector<CheckpointListener> listeners = {}, GatherFn gather = nullptr);
// Writes the loss, the learning rate (EstimatorSpec::learning_rate, when given),
// global_step/sec and the model_fn's own summaries (ops/summary_ops.h) every `every_steps`
// steps, and histograms of the variables at each sync point, to `writer`.
std::shared_ptr<SessionRunHook> summary_saver_hook(const SummaryWriter& writer,
                                                   int64_t every_steps);
// TensorBoard's projector files in `logdir` for every embedding table of `variables` (a
// variable ".../embedding_weights", whole or in parts): projector/<table>.tsv of its rows,
// projector/<table>.metadata.tsv of their labels (the graph's ".../embedding_weights/metadata"
// constant, when it has one: a vocabulary's words), and projector_config.pbtxt naming them.
// Nothing when there is no table.
runtime::Status write_projector(const std::string& logdir, const runtime::Graph& graph,
                                const runtime::VariableStore& variables);
// One of a model_fn's summaries (ops/summary_ops.h), its value as fetched at `step`.
void write_summary(const SummaryWriter& writer, const ops::summary::Marked& summary,
                   const runtime::Tensor& value, int64_t step);
// Logs "loss = ..., step = ... (... sec)" and global_step/sec every `every_steps` steps.
std::shared_ptr<SessionRunHook> step_counter_hook(int64_t every_steps, int64_t last_step);

// Early stopping on a tensor averaged over windows of `every_steps` steps (usually the loss):
// stops after `rounds` windows without an improvement of at least `min_delta`, and with
// restore_best puts back the best window's weights.
struct EarlyStoppingOptions {
  std::string tensor;  // empty: the loss
  int64_t every_steps = 100;
  int rounds = 5;
  double min_delta = 0;
  bool maximize = false;
  bool restore_best = true;
};
std::shared_ptr<SessionRunHook> early_stopping_hook(EarlyStoppingOptions options);

// Writes the per-node kernel timings of every `every_steps`-th step, as recorded by the node
// actors, as Chrome trace files (chrome://tracing, Perfetto): output_dir/timeline-<step>.json.
std::shared_ptr<SessionRunHook> profiler_hook(int64_t every_steps, std::string output_dir);

// A Chrome trace ("traceEvents", complete events in microseconds) of one step's timings.
std::string chrome_trace(const std::vector<actors::NodeTiming>& timings);

}  // namespace troupe::estimators
