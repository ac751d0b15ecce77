#include "estimators/estimator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "estimators/estimator_actor.h"
#include "estimators/export/exporter.h"
#include "estimators/hook_actor.h"
#include "estimators/membership_hook.h"
#include "estimators/summary/summary_actor.h"
#include "ops/array_ops.h"
#include "ops/sparse_ops.h"
#include "ops/state_ops.h"
#include "runtime/crc32c.h"
#include "runtime/kernel_registry.h"
#include "runtime/log.h"
#include "runtime/record_io.h"

namespace troupe::estimators {

using runtime::Output;
using runtime::Result;
using runtime::Status;
using runtime::Tensor;

namespace {

// What a checkpoint must hold for `graph` to restore from it.
std::vector<runtime::VariableSpec> variable_specs(const runtime::Graph& graph) {
  std::vector<runtime::VariableSpec> specs;
  for (int id : graph.variables()) {
    const runtime::Node& n = graph.node(id);
    specs.push_back({ops::variable_name(n), n.output_dtypes[0], n.output_shapes[0]});
  }
  return specs;
}

}  // namespace

Estimator::Estimator(ModelFn model_fn, RunConfig config, Params params)
    : model_fn_(std::move(model_fn)),
      config_(std::move(config)),
      params_(std::move(params)),
      runtime_(std::make_unique<actors::Runtime>(
          actors::RuntimeOptions{.secret = config_.job_secret,
                                 .task = config_.cluster.task_name(),
                                 .members = config_.cluster.task_names()})),
      store_(std::make_shared<runtime::VariableStore>()),
      member_(*runtime_, config_, &stop_requested_) {
  if (config_.threads > 0) runtime::kernel_registry().set_compute_threads(config_.threads);
  const ClusterConfig& cluster = config_.cluster;
  // Only the chief of a cluster writes checkpoints and summaries, as in TF; an evaluator reads
  // the checkpoints.
  if (!config_.model_dir.empty() &&
      (cluster.is_chief || cluster.task_type == TaskType::kEvaluator)) {
    runtime::CheckpointOptions o;
    o.keep_max = config_.keep_checkpoint_max;
    checkpoints_ = std::make_unique<runtime::CheckpointManager>(config_.model_dir, o);
    // One batch a step: the position at a step follows from where the input started. After the
    // data ran out, the next run starts a new pass (TF's semantics for a rerun).
    checkpoints_->set_input_position([this](int64_t step) {
      // Each worker of a cluster reads its own part; none is where the global step says.
      if (in_cluster() || input_done_ || input_position_.fingerprint == 0) {
        return runtime::InputPosition{};
      }
      return runtime::InputPosition{input_position_.fingerprint,
                                    input_position_.batches + step - input_base_step_};
    });
  }
}

Estimator::~Estimator() {
  // Actors first, then the runtime that waits for them.
  train_input_.reset();
  models_.clear();
  // Detached actors are waited for until every handle to them is gone.
  if (train_events_) train_events_->close();
  for (auto& [dir, w] : eval_events_) w->close();
  train_events_.reset();
  eval_events_.clear();
  runtime_.reset();
}

void Estimator::set_params(Params params) {
  params_ = std::move(params);
  models_.clear();
}

void Estimator::set_model_fn(ModelFn model_fn) {
  model_fn_ = std::move(model_fn);
  models_.clear();
}

std::vector<std::string> Estimator::get_variable_names() const { return store_->names(); }

Result<Tensor> Estimator::get_variable_value(const std::string& name) const {
  if (store_->names().empty() && checkpoints_) {
    TROUPE_RETURN_IF_ERROR(checkpoints_->restore_latest(store_.get()).status());
  }
  return store_->read(name);
}

int64_t Estimator::global_step() const {
  if (member_.holds_global_step()) return member_.global_step();
  return store_->read_int64_scalar("global_step").value_or(0);
}

std::string Estimator::latest_checkpoint() const {
  return checkpoints_ ? checkpoints_->latest() : std::string();
}

Result<Estimator::Model*> Estimator::model_for(Mode mode, const input::Dataset& data) {
  auto found = models_.find(mode);
  // The same source again (an Experiment evaluating every N steps): nothing to read.
  if (found != models_.end() && found->second->source == data.source &&
      found->second->labels == data.labels()) {
    return found->second.get();
  }
  TROUPE_ASSIGN_OR_RETURN(std::vector<InputComponent> components, input_components(data));
  if (found != models_.end() && same_components(components, found->second->components) &&
      found->second->labels == data.labels()) {
    found->second->source = data.source;
    return found->second.get();  // resident: graph and session as they were
  }
  auto m = std::make_unique<Model>();
  m->source = data.source;
  TROUPE_RETURN_IF_ERROR(
      build_model_graph(model_fn_, mode, data, components, params_, config_, m.get()));
  if (mode == Mode::kTrain && in_cluster()) TROUPE_RETURN_IF_ERROR(member_.place(&m->graph));
  TROUPE_RETURN_IF_ERROR(open_sessions(*m, mode));
  last_components_.clear();
  const std::vector<std::string> labels = data.labels();
  for (const InputComponent& c : components) {
    if (std::find(labels.begin(), labels.end(), c.name) == labels.end()) {
      last_components_.push_back(c);
    }
  }
  Model* raw = m.get();
  models_[mode] = std::move(m);
  return raw;
}

Status Estimator::ensure_variables(Model& m, Mode mode) {
  if (mode == Mode::kTrain && in_cluster()) {
    // The chief initialises the model in this process first (every node local), restores the
    // latest checkpoint over it, and sends it to the ps tasks, unless they hold it already.
    return member_.ensure_variables(store_.get(), [&] {
      TROUPE_RETURN_IF_ERROR(m.local_session->run({}, {}, {m.init}).status());
      const bool have_checkpoint = checkpoints_ && !checkpoints_->latest().empty();
      return have_checkpoint ? restore_latest(m) : runtime::ok_status();
    });
  }
  bool missing = false;
  for (int id : m.graph.variables()) {
    if (!store_->contains(ops::variable_name(m.graph.node(id)))) missing = true;
  }
  if (!missing) return runtime::ok_status();
  const bool have_checkpoint = checkpoints_ && !checkpoints_->latest().empty();
  if (mode != Mode::kTrain && !have_checkpoint && store_->names().empty()) {
    return runtime::failed_precondition(
        "no trained model: train first, or give the model_dir of a trained one",
        config_.model_dir.empty() ? "" : " (" + config_.model_dir + " has no checkpoint)");
  }
  TROUPE_RETURN_IF_ERROR(m.session->run({}, {}, {m.init}).status());
  return have_checkpoint ? restore_latest(m) : runtime::ok_status();
}

Status Estimator::restore_latest(Model& m) {
  const std::vector<runtime::VariableSpec> expected = variable_specs(m.graph);
  TROUPE_ASSIGN_OR_RETURN(
      auto restored, checkpoints_->restore_latest(store_.get(), [&](runtime::CheckpointData& d) {
        TROUPE_RETURN_IF_ERROR(runtime::fit_partitions(&d, expected));
        return runtime::check_restore(d, expected, config_.partial_restore);
      }));
  if (!in_cluster()) resume_input_ = restored.input;
  for (const std::string& why : restored.refused) {
    runtime::log_warning("refused a checkpoint: ", why);
  }
  runtime::log_info("restored ", restored.path, " (global step ", restored.global_step, ")");
  return runtime::ok_status();
}

Status Estimator::pull_from_cluster() {
  if (!member_.connected()) return runtime::ok_status();
  Status pulled = member_.pull(store_.get());
  if (pulled.ok() || pulled.code() != runtime::Code::kUnavailable) return pulled;
  TROUPE_RETURN_IF_ERROR(recover_cluster(pulled));
  return member_.pull(store_.get());
}

Status Estimator::recover_cluster(const Status& why) {
  runtime::log_warning(why.to_string(), ": waiting for the ps tasks");
  ++recoveries_;  // a restart as much as the training run's own
  auto train = models_.find(Mode::kTrain);
  if (train != models_.end()) return restart_training(*train->second);
  member_.disconnect();
  return member_.connect();
}

Result<TrainResult> Estimator::train(const input::Dataset& data, TrainOptions options) {
  TROUPE_ASSIGN_OR_RETURN(caf::actor run, spawn_training(data, std::move(options)));
  if (!run) return finish_training(RunOutcome{runtime::ok_status()});
  return finish_training(await_run(run, "training"));
}

RunOutcome Estimator::await_run(const caf::actor& run, const char* what) {
  RunOutcome outcome{runtime::internal_error("no answer from the ", what, " run")};
  caf::scoped_actor self{runtime_->system()};
  self->request(run, caf::infinite, start_run_atom::value)
      .receive([&](RunOutcome& o) { outcome = std::move(o); },
               [&](caf::error& e) {
                 outcome.status =
                     runtime::internal_error("the ", what, " run: ", runtime_->system().render(e));
               });
  return outcome;
}

Status Estimator::load_checkpoint(const Model& m, const std::string& path) {
  TROUPE_ASSIGN_OR_RETURN(runtime::CheckpointData ckpt, runtime::read_checkpoint(path));
  const std::vector<runtime::VariableSpec> expected = variable_specs(m.graph);
  TROUPE_RETURN_IF_ERROR(runtime::fit_partitions(&ckpt, expected).with_context(path));
  TROUPE_RETURN_IF_ERROR(
      runtime::check_restore(ckpt, expected, config_.partial_restore).with_context(path));
  runtime::load_into(ckpt, store_.get());
  return runtime::ok_status();
}

void Estimator::request_stop() {
  stop_requested_ = true;
  std::lock_guard<std::mutex> lock(running_mu_);
  if (running_stop_) *running_stop_ = true;
  // The flag waits for the step in flight; a replica that abandons it needs the message.
  if (running_ && member_.abandons_on_stop()) caf::anon_send(running_, actors::stop_atom::value);
}

Result<caf::actor> Estimator::spawn_training(const input::Dataset& all_data, TrainOptions options) {
  stop_requested_ = false;  // a request between two runs ends neither
  TROUPE_RETURN_IF_ERROR(config_.validate());
  if (options.steps < 0 || options.max_steps < 0) {
    return runtime::invalid_argument("train: steps and max_steps must be >= 0");
  }
  input::Dataset data = all_data;
  if (in_cluster()) {
    TROUPE_ASSIGN_OR_RETURN(data, member_.part_of(all_data));
  }
  TROUPE_ASSIGN_OR_RETURN(Model * m, model_for(Mode::kTrain, data));
  Status ready = ensure_variables(*m, Mode::kTrain);
  if (!ready.ok() && in_cluster() && ready.code() == runtime::Code::kUnavailable) {
    ready = recover_cluster(ready);  // a ps went between two runs (an Experiment's evaluation)
  }
  TROUPE_RETURN_IF_ERROR(ready);
  const int64_t start = global_step();
  if (options.max_steps > 0 && start >= options.max_steps) {
    runtime::log_info("skipping training: global step ", start, " >= max_steps ",
                      options.max_steps);
    return caf::actor();
  }
  int64_t last = INT64_MAX;
  if (options.steps > 0) last = start + options.steps;
  if (options.max_steps > 0) last = std::min(last, options.max_steps);

  TROUPE_ASSIGN_OR_RETURN(auto hooks, training_hooks(*m, options, last));
  HookSetup setup(m->graph, m->spec, Mode::kTrain);
  for (auto& h : hooks) TROUPE_RETURN_IF_ERROR(h->begin(setup));
  if (!options.keep_input || !train_input_ || train_input_source_ != data.source.get()) {
    TROUPE_RETURN_IF_ERROR(start_training_input(data));
  }

  EstimatorActorSpec spec;
  spec.parts = {m->session->actor(), train_input_->queue_actor(),
                train_input_->loop_feed(m->inputs)};
  spec.fetches = {m->spec.loss};
  spec.fetches.insert(spec.fetches.end(), setup.fetches().begin(), setup.fetches().end());
  spec.input_feeds = m->inputs;
  spec.train_op = m->spec.train_op;
  for (auto& h : hooks) spec.hooks.push_back({h, hook_name(*h), store_, config_.model_dir, 1});
  if (!setup.feeds().empty()) {
    spec.feed = [feeds = setup.feeds()](runtime::FeedList* f) {
      for (const auto& feed : feeds) TROUPE_RETURN_IF_ERROR(feed(f));
      return runtime::ok_status();
    };
  }
  spec.occasional_fetches = setup.occasional();
  spec.occasional_every = setup.occasional_every();
  spec.profile_every = setup.profile_every();
  spec.profile_sink = setup.profile_sink();
  spec.variables = store_;
  if (in_cluster()) {
    // Workers share the global step: every step fetches it, the run stops where it says.
    spec.global_step = [this] { return global_step(); };
    spec.blocks = true;
    spec.fetches.push_back(m->global_step);
    spec.step_fetch = static_cast<int>(spec.fetches.size()) - 1;
  }
  spec.last_step = last;
  spec.max_restarts = config_.max_restarts;
  // Runs on the EstimatorActor's thread while this one waits for its answer.
  spec.restart = [this, m, data](int64_t) -> Result<TrainingParts> {
    TROUPE_RETURN_IF_ERROR(restart_training(*m));
    TROUPE_RETURN_IF_ERROR(start_training_input(data));
    return TrainingParts{m->session->actor(), train_input_->queue_actor(),
                         train_input_->loop_feed(m->inputs)};
  };
  spec.on_end_of_input = [this] { input_done_ = true; };
  spec.restart_point = [this] {
    if (in_cluster() && !config_.cluster.is_chief) return std::string("the model on the ps tasks");
    const std::string latest = latest_checkpoint();
    return latest.empty() ? std::string("the initial values") : latest;
  };

  spec.stop = std::make_shared<std::atomic<bool>>(false);
  spec.abandon_on_stop = member_.abandons_on_stop();
  std::lock_guard<std::mutex> lock(running_mu_);
  running_stop_ = spec.stop;
  running_ = spawn_estimator_actor(runtime_->system(), std::move(spec));
  return running_;
}

Result<TrainResult> Estimator::finish_training(const RunOutcome& outcome) {
  {
    std::lock_guard<std::mutex> lock(running_mu_);
    running_ = nullptr;
    running_stop_ = nullptr;
  }
  if (outcome.end_of_input && train_input_) {
    train_input_->log_skipped("training");
    train_input_.reset();
  }
  if (!outcome.status.ok()) return outcome.status;
  if (train_events_) TROUPE_RETURN_IF_ERROR(train_events_->flush());
  TrainResult result;
  result.global_step = global_step();
  result.steps = outcome.steps;
  result.loss = outcome.loss;
  result.end_of_input = outcome.end_of_input;
  result.stopped = outcome.stopped;
  result.restarts = outcome.restarts + recoveries_;
  recoveries_ = 0;
  return result;
}

// Starts the training input; on the dataset of the checkpoint just restored, where that run
// stood, so that an interrupted run reads on instead of seeing the first batches again.
Status Estimator::start_training_input(const input::Dataset& data) {
  train_input_.reset();
  const uint64_t fingerprint = input_fingerprint(data);
  int64_t skip = 0;
  if (resume_input_.fingerprint == fingerprint && resume_input_.batches > 0) {
    skip = resume_input_.batches;
    runtime::log_info("reading ", data.source->name(), " on after the ", skip,
                      " batches trained on before");
  }
  resume_input_ = {};
  TROUPE_ASSIGN_OR_RETURN(train_input_, input::Pipeline::start(*runtime_, data, skip));
  train_input_source_ = data.source.get();
  input_position_ = {fingerprint, skip};
  input_base_step_ = global_step();
  input_done_ = false;
  return runtime::ok_status();
}

uint64_t Estimator::input_fingerprint(const input::Dataset& data) {
  const input::DatasetOptions& o = data.options;
  std::string what = data.source->name() + "|" + std::to_string(data.source->num_units()) + "|" +
                     data.label + "|" + std::to_string(o.batch_size) + "|" +
                     std::to_string(o.num_epochs) + "|" + std::to_string(o.shuffle) + "|" +
                     std::to_string(o.seed) + "|" + std::to_string(o.shuffle_buffer) + "|" +
                     std::to_string(o.drop_remainder);
  for (const std::string& c : data.source->components()) what += "|" + c;
  // Never 0, which means "no position".
  return (uint64_t{runtime::crc32c(what.data(), what.size())} << 1) | 1;
}

Status Estimator::restart_training(Model& m) {
  train_input_.reset();
  m.session.reset();
  store_->clear();
  for (auto& [mode, other] : models_) {
    if (other.get() != &m) TROUPE_RETURN_IF_ERROR(open_sessions(*other, mode));
  }
  if (in_cluster()) {
    // A ps may have died and be on its way back: connect anew, waiting for it as at the start
    // (with a log line naming it), and the chief sends it the latest checkpoint.
    member_.disconnect();
    TROUPE_RETURN_IF_ERROR(member_.connect());
  }
  TROUPE_RETURN_IF_ERROR(open_sessions(m, Mode::kTrain));
  return ensure_variables(m, Mode::kTrain);
}

// A model's sessions on this process's store. A cluster's training graph runs on its ps tasks,
// and has a second session, all local, in which the chief initialises the model first.
Status Estimator::open_sessions(Model& m, Mode mode) {
  actors::SessionOptions so;
  so.variables = store_;
  if (mode == Mode::kTrain && in_cluster()) {
    TROUPE_ASSIGN_OR_RETURN(m.local_session, actors::Session::create(*runtime_, m.graph, so));
    member_.session_options(&so);
  }
  TROUPE_ASSIGN_OR_RETURN(m.session, actors::Session::create(*runtime_, m.graph, so));
  return runtime::ok_status();
}

// The hooks every training run has (TF's: step counter, NaN guard, checkpoints, summaries),
// then the model_fn's, then the caller's.
Result<std::vector<std::shared_ptr<SessionRunHook>>> Estimator::training_hooks(
    Model& m, const TrainOptions& options, int64_t last) {
  std::vector<std::shared_ptr<SessionRunHook>> hooks;
  hooks.push_back(step_counter_hook(config_.log_step_count_steps, last == INT64_MAX ? 0 : last));
  hooks.push_back(nan_tensor_hook(true));
  if (checkpoints_) {
    const bool none = config_.save_checkpoints_steps == 0 && config_.save_checkpoints_secs == 0;
    GatherFn gather = nullptr;
    if (in_cluster()) gather = [this](runtime::VariableStore& s) { return member_.pull(&s); };
    hooks.push_back(checkpoint_saver_hook(checkpoints_.get(), config_.save_checkpoints_steps,
                                          none ? 600 : config_.save_checkpoints_secs,
                                          options.saving_listeners, std::move(gather)));
    if (config_.save_summary_steps > 0) {
      if (!train_events_) {
        TROUPE_ASSIGN_OR_RETURN(SummaryWriter w, SummaryWriter::open(*runtime_, config_.model_dir));
        train_events_ = std::make_unique<SummaryWriter>(w);
      }
      hooks.push_back(summary_saver_hook(*train_events_, config_.save_summary_steps));
    }
  }
  if (member_.active() && member_.is_chief()) {
    hooks.push_back(membership_hook([this] { return member_.live_replicas(); },
                                    [this](int r) { return member_.replica_name(r); },
                                    {config_.replicas_to_aggregate, config_.min_replicas}));
  }
  for (auto& h : m.spec.training_hooks) hooks.push_back(h);
  for (auto& h : options.hooks) hooks.push_back(h);
  return hooks;
}

std::vector<ServingInput> Estimator::serving_inputs() const {
  std::vector<ServingInput> out;
  for (const InputComponent& c : last_components_) out.push_back({c.name, c.dtype, c.dims});
  return out;
}

Result<std::string> Estimator::export_saved_model(const std::string& export_dir_base,
                                                  ExportOptions options) {
  auto found = models_.find(Mode::kPredict);
  if (found == models_.end() || !options.inputs.empty()) {
    const std::vector<ServingInput> inputs =
        options.inputs.empty() ? serving_inputs() : options.inputs;
    if (inputs.empty()) {
      return runtime::failed_precondition(
          "export: the model has not seen any data yet: name its inputs (ExportOptions::inputs)");
    }
    // The prediction graph, its placeholders shaped as one example each of `inputs`.
    std::vector<std::pair<std::string, Tensor>> columns;
    for (const ServingInput& c : inputs) {
      std::vector<int64_t> dims{1};
      for (int64_t d : c.dims) dims.push_back(d < 0 ? 1 : d);
      columns.push_back({c.name, Tensor(c.dtype, runtime::Shape(dims))});
    }
    TROUPE_ASSIGN_OR_RETURN(input::Dataset d, input::arrays(columns, ""));
    TROUPE_RETURN_IF_ERROR(model_for(Mode::kPredict, d).status());
    found = models_.find(Mode::kPredict);
  }
  Model& m = *found->second;
  if (!options.checkpoint_path.empty()) {
    TROUPE_RETURN_IF_ERROR(load_checkpoint(m, options.checkpoint_path));
  } else {
    TROUPE_RETURN_IF_ERROR(pull_from_cluster());
  }
  TROUPE_RETURN_IF_ERROR(ensure_variables(m, Mode::kPredict));
  // The graph exported is built anew so that its features may also be parsed from serialized
  // tf.Example protos, which TF Serving's classify and regress send. Its variables are the
  // model's, by name.
  ModelGraph parsing;
  const Status parses =
      build_serving_graph(model_fn_, m.components, m.labels, params_, config_, &parsing);
  if (!parses.ok()) {
    runtime::log_warning("export: classify and regress take named inputs, not tf.Example: ",
                         parses.message());
  }
  const ModelGraph& g = parses.ok() ? parsing : m;
  std::map<std::string, Output> inputs;
  for (size_t i = 0; i < g.components.size(); ++i) {
    // A prediction model built on labelled data has label placeholders nothing serves.
    const std::string& name = g.components[i].name;
    if (std::find(g.labels.begin(), g.labels.end(), name) == g.labels.end()) {
      inputs[name] = g.inputs[i];
    }
  }
  TROUPE_ASSIGN_OR_RETURN(serving::SavedModel saved,
                          saved_model_of(g.graph, g.spec, inputs, g.examples, *store_,
                                         global_step(), options.class_labels));
  for (const auto& [name, path] : options.assets_extra) {
    if (name.empty() || name.find('/') != std::string::npos) {
      return runtime::invalid_argument("export: assets_extra name '", name, "' is no file name");
    }
    TROUPE_RETURN_IF_ERROR(runtime::read_file(path, &saved.assets_extra[name]));
  }
  return serving::write_saved_model(export_dir_base, saved);
}

}  // namespace troupe::estimators
