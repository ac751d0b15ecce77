#include "estimators/estimator.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "estimators/metrics.h"
#include "estimators/summary/summary_actor.h"
#include "ops/array_ops.h"
#include "ops/state_ops.h"
#include "runtime/graph_codec.h"
#include "runtime/kernel_registry.h"
#include "runtime/record_io.h"

namespace troupe::estimators {

using runtime::Output;
using runtime::Result;
using runtime::Status;
using runtime::Tensor;

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::kTrain:
      return "train";
    case Mode::kEval:
      return "eval";
    case Mode::kPredict:
      return "infer";
  }
  return "?";
}

double param(const Params& p, const std::string& name, double fallback) {
  auto it = p.find(name);
  if (it == p.end()) return fallback;
  try {
    return std::stod(it->second);
  } catch (...) {
    return fallback;
  }
}

std::string param(const Params& p, const std::string& name, const std::string& fallback) {
  auto it = p.find(name);
  return it == p.end() ? fallback : it->second;
}

namespace {

// Failures of the machinery, not of the model or the data: worth a restart.
bool retryable(const Status& s) {
  return s.code() == runtime::Code::kUnavailable || s.code() == runtime::Code::kAborted ||
         s.code() == runtime::Code::kInternal;
}

// skip_bad_records counts what it skips; the user hears the count when the data ends.
void report_skipped(input::Pipeline& p, const char* what) {
  const actors::RunnerStats stats = p.runner_stats();
  if (stats.skipped > 0) {
    std::fprintf(stderr, "WARNING: %s skipped %lld bad records of %s\n", what,
                 static_cast<long long>(stats.skipped), p.dataset().source->name().c_str());
  }
}

// Every hook's after_run, in order; the first error stops the rest.
Status after_run_all(const std::vector<std::shared_ptr<SessionRunHook>>& hooks, StepContext& sc) {
  for (const auto& h : hooks) TROUPE_RETURN_IF_ERROR(h->after_run(sc));
  return runtime::ok_status();
}

}  // namespace

Estimator::Estimator(ModelFn model_fn, RunConfig config, Params params)
    : model_fn_(std::move(model_fn)),
      config_(std::move(config)),
      params_(std::move(params)),
      runtime_(std::make_unique<actors::Runtime>()),
      store_(std::make_shared<runtime::VariableStore>()) {
  if (config_.threads > 0) runtime::kernel_registry().set_compute_threads(config_.threads);
  if (!config_.model_dir.empty()) {
    runtime::CheckpointOptions o;
    o.keep_max = config_.keep_checkpoint_max;
    checkpoints_ = std::make_unique<runtime::CheckpointManager>(config_.model_dir, o);
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

std::vector<std::string> Estimator::get_variable_names() const { return store_->names(); }

Result<Tensor> Estimator::get_variable_value(const std::string& name) const {
  if (store_->names().empty() && checkpoints_) {
    TROUPE_RETURN_IF_ERROR(checkpoints_->restore_latest(store_.get()).status());
  }
  return store_->read(name);
}

int64_t Estimator::global_step() const {
  auto t = store_->read("global_step");
  return t.ok() ? t->data<int64_t>()[0] : 0;
}

std::string Estimator::latest_checkpoint() const {
  return checkpoints_ ? checkpoints_->latest() : std::string();
}

Result<std::vector<Estimator::Component>> Estimator::components_of(
    const input::Dataset& data) const {
  if (!data.source) return runtime::invalid_argument("a dataset without a source");
  if (data.source->num_units() == 0) {
    return runtime::invalid_argument(data.source->name(), " holds no examples");
  }
  // The first unit tells the types and shapes the placeholders take.
  std::vector<actors::Chunk> chunks;
  int64_t skipped = 0;
  TROUPE_RETURN_IF_ERROR(data.source->read(0, &chunks, &skipped));
  if (chunks.empty())
    return runtime::invalid_argument(data.source->name(), ": no examples in its first part");
  const std::vector<std::string> names = data.source->components();
  std::vector<Component> out;
  for (size_t c = 0; c < names.size() && c < chunks[0].components.size(); ++c) {
    const Tensor& t = chunks[0].components[c];
    Component comp{names[c], t.dtype(), {}};
    for (int d = 1; d < t.rank(); ++d) comp.dims.push_back(data.pad ? -1 : t.dim(d));
    out.push_back(std::move(comp));
  }
  return out;
}

Result<Estimator::Model*> Estimator::model_for(Mode mode, const input::Dataset& data) {
  auto found = models_.find(mode);
  // The same source again (an Experiment evaluating every N steps): nothing to read.
  if (found != models_.end() && found->second->source == data.source &&
      found->second->label == data.label) {
    return found->second.get();
  }
  TROUPE_ASSIGN_OR_RETURN(std::vector<Component> components, components_of(data));
  if (found != models_.end()) {
    bool same = found->second->components.size() == components.size();
    for (size_t i = 0; same && i < components.size(); ++i) {
      same = components[i].name == found->second->components[i].name &&
             components[i].dtype == found->second->components[i].dtype &&
             components[i].dims == found->second->components[i].dims;
    }
    if (same && found->second->label == data.label) {
      found->second->source = data.source;
      return found->second.get();  // resident: graph and session as they were
    }
  }
  auto m = std::make_unique<Model>();
  m->components = components;
  m->source = data.source;
  m->label = data.label;
  if (config_.tf_random_seed != 0) m->graph.set_seed(config_.tf_random_seed);
  runtime::GraphBuilder b(&m->graph);
  ops::global_step(b);
  std::map<std::string, Output> features;
  Output labels;
  for (const Component& c : components) {
    std::vector<int64_t> dims{-1};
    dims.insert(dims.end(), c.dims.begin(), c.dims.end());
    Output p = ops::placeholder(b, c.dtype, runtime::Shape(dims), c.name);
    m->inputs.push_back(p);
    if (c.name == data.label && !data.label.empty()) {
      labels = p;
    } else {
      features[c.name] = p;
    }
  }
  if (mode != Mode::kPredict && !labels.valid()) {
    return runtime::invalid_argument(mode_name(mode), ": the dataset ", data.source->name(),
                                     " has no label column");
  }
  ModelInputs in{b, features, mode == Mode::kPredict ? Output{} : labels, mode, params_, config_};
  Result<EstimatorSpec> spec = model_fn_(in);
  const std::string where = std::string("model_fn (") + mode_name(mode) + ")";
  if (!spec.ok()) return spec.status().with_context(where);
  if (!b.ok()) return b.status().with_context(where);
  if ((mode != Mode::kPredict) && !spec->loss.valid()) {
    return runtime::invalid_argument(where, " returned no loss");
  }
  if (mode == Mode::kTrain && spec->train_op < 0) {
    return runtime::invalid_argument(where, " returned no train_op");
  }
  if (mode == Mode::kPredict && spec->predictions.empty()) {
    return runtime::invalid_argument(where, " returned no predictions");
  }
  if (spec->loss.valid() && m->graph.shape(spec->loss).rank_known() &&
      m->graph.shape(spec->loss).rank() != 0) {
    return runtime::invalid_argument(where, ": the loss must be a scalar, not ",
                                     m->graph.shape(spec->loss).to_string());
  }
  m->spec = std::move(*spec);
  m->init = ops::global_variables_initializer(b);
  if (!b.ok()) return b.status().with_context(where);
  actors::SessionOptions so;
  so.variables = store_;
  TROUPE_ASSIGN_OR_RETURN(m->session, actors::Session::create(*runtime_, m->graph, so));
  last_components_ = components;
  Model* raw = m.get();
  models_[mode] = std::move(m);
  return raw;
}

Status Estimator::ensure_variables(Model& m, Mode mode) {
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
  if (have_checkpoint) {
    TROUPE_ASSIGN_OR_RETURN(auto restored, checkpoints_->restore_latest(store_.get()));
    for (const std::string& why : restored.refused) {
      std::fprintf(stderr, "WARNING: refused a checkpoint: %s\n", why.c_str());
    }
    std::fprintf(stderr, "INFO: restored %s (global step %lld)\n", restored.path.c_str(),
                 static_cast<long long>(restored.global_step));
    // A checkpoint of another model (other layer sizes) in the same model_dir: say so here,
    // not as a kernel error in the first step.
    for (int id : m.graph.variables()) {
      const runtime::Node& n = m.graph.node(id);
      auto value = store_->read(ops::variable_name(n));
      if (value.ok() && n.output_shapes[0].rank_known() &&
          !value->shape().compatible_with(n.output_shapes[0])) {
        return runtime::failed_precondition(
            restored.path, " holds '", ops::variable_name(n), "' as ", value->shape().to_string(),
            " but the model declares ", n.output_shapes[0].to_string(),
            ": a different model; use another model_dir");
      }
    }
  }
  return runtime::ok_status();
}

Result<TrainResult> Estimator::train(const input::Dataset& data, TrainOptions options) {
  TROUPE_RETURN_IF_ERROR(config_.validate());
  if (options.steps < 0 || options.max_steps < 0) {
    return runtime::invalid_argument("train: steps and max_steps must be >= 0");
  }
  TROUPE_ASSIGN_OR_RETURN(Model * m, model_for(Mode::kTrain, data));
  TROUPE_RETURN_IF_ERROR(ensure_variables(*m, Mode::kTrain));
  const int64_t start = global_step();
  if (options.max_steps > 0 && start >= options.max_steps) {
    std::fprintf(stderr, "INFO: skipping training: global step %lld >= max_steps %lld\n",
                 static_cast<long long>(start), static_cast<long long>(options.max_steps));
    TrainResult r;
    r.global_step = start;
    return r;
  }
  int64_t last = INT64_MAX;
  if (options.steps > 0) last = start + options.steps;
  if (options.max_steps > 0) last = std::min(last, options.max_steps);
  int restarts = 0;
  while (true) {
    Result<TrainResult> r = train_once(*m, data, options, last);
    if (r.ok()) {
      r->restarts = restarts;
      return r;
    }
    if (!retryable(r.status()) || restarts >= config_.max_restarts) return r.status();
    ++restarts;
    std::fprintf(stderr,
                 "WARNING: training failed at step %lld: %s\nWARNING: restarting from %s "
                 "(restart %d of %d)\n",
                 static_cast<long long>(global_step()), r.status().to_string().c_str(),
                 latest_checkpoint().empty() ? "the initial values" : latest_checkpoint().c_str(),
                 restarts, config_.max_restarts);
    TROUPE_RETURN_IF_ERROR(restart_training(*m));
  }
}

Status Estimator::restart_training(Model& m) {
  train_input_.reset();
  m.session.reset();
  store_->clear();
  actors::SessionOptions so;
  so.variables = store_;
  TROUPE_ASSIGN_OR_RETURN(m.session, actors::Session::create(*runtime_, m.graph, so));
  for (auto& [mode, other] : models_) {
    if (other.get() == &m) continue;
    TROUPE_ASSIGN_OR_RETURN(other->session, actors::Session::create(*runtime_, other->graph, so));
  }
  return ensure_variables(m, Mode::kTrain);
}

Result<TrainResult> Estimator::train_once(Model& m, const input::Dataset& data,
                                          const TrainOptions& options, int64_t last) {
  std::vector<std::shared_ptr<SessionRunHook>> hooks;
  hooks.push_back(step_counter_hook(config_.log_step_count_steps, last == INT64_MAX ? 0 : last));
  hooks.push_back(nan_tensor_hook(true));
  if (checkpoints_) {
    const bool none = config_.save_checkpoints_steps == 0 && config_.save_checkpoints_secs == 0;
    hooks.push_back(checkpoint_saver_hook(checkpoints_.get(), config_.save_checkpoints_steps,
                                          none ? 600 : config_.save_checkpoints_secs,
                                          options.saving_listeners));
    if (config_.save_summary_steps > 0) {
      if (!train_events_) {
        TROUPE_ASSIGN_OR_RETURN(SummaryWriter w, SummaryWriter::open(*runtime_, config_.model_dir));
        train_events_ = std::make_unique<SummaryWriter>(w);
      }
      hooks.push_back(summary_saver_hook(*train_events_, config_.save_summary_steps));
    }
  }
  for (auto& h : m.spec.training_hooks) hooks.push_back(h);
  for (auto& h : options.hooks) hooks.push_back(h);

  HookSetup setup(m.graph, m.spec, Mode::kTrain);
  for (auto& h : hooks) TROUPE_RETURN_IF_ERROR(h->begin(setup));
  HookContext ctx{global_step(), *store_, config_.model_dir};
  for (auto& h : hooks) TROUPE_RETURN_IF_ERROR(h->after_create_session(ctx));

  if (!options.keep_input || !train_input_ || train_input_source_ != data.source.get()) {
    train_input_.reset();
    TROUPE_ASSIGN_OR_RETURN(train_input_, input::Pipeline::start(*runtime_, data));
    train_input_source_ = data.source.get();
  }
  TrainResult result;
  const int64_t first = global_step();
  bool stop = false;
  while (!stop) {
    const int64_t at = global_step();
    bool sync = false;
    Status hook_error;
    int64_t stop_at = last;
    for (auto& h : hooks) stop_at = std::min(stop_at, h->stop_step());
    if (stop_at <= at) break;
    int64_t segment_end = stop_at;
    for (auto& h : hooks)
      segment_end = std::min(segment_end, std::max(at + 1, h->next_sync_step(at)));
    actors::LoopRequest loop;
    loop.steps = segment_end == INT64_MAX ? INT64_MAX : segment_end - at;
    loop.fetches = {m.spec.loss};
    loop.fetches.insert(loop.fetches.end(), setup.fetches().begin(), setup.fetches().end());
    loop.targets = {m.spec.train_op};
    loop.input = train_input_->queue_actor();
    loop.input_feeds = m.inputs;
    loop.batch_size = 0;
    Status profile_error;
    if (setup.profile_every() > 0) {
      const int64_t every = setup.profile_every();
      loop.profile = [at, every](int64_t i) { return (at + i + 1) % every == 0; };
      loop.on_profile = [&, at](int64_t i, std::vector<actors::NodeTiming> t) {
        Status s = setup.profile_sink()(at + i + 1, std::move(t));
        if (!s.ok() && profile_error.ok()) profile_error = s;
      };
    }
    if (!setup.feeds().empty()) {
      loop.feed = [&setup](int64_t, runtime::FeedList* f) {
        for (const auto& feed : setup.feeds()) TROUPE_RETURN_IF_ERROR(feed(f));
        return runtime::ok_status();
      };
    }
    loop.on_step = [&](int64_t i, const std::vector<Tensor>& values) {
      result.loss = values[0].scalar_as_double();
      StepContext sc(at + i + 1, values, 1);
      hook_error = after_run_all(hooks, sc);
      if (!hook_error.ok()) return false;
      stop = stop || sc.stop_requested();
      sync = sc.sync_requested();
      return !stop && !sync;
    };
    bool end_of_input = false;
    auto done = m.session->run_loop(std::move(loop), &end_of_input);
    if (!done.ok()) return done.status();
    if (!hook_error.ok()) return hook_error;
    if (!profile_error.ok()) return profile_error;
    ctx.global_step = global_step();
    for (auto& h : hooks) TROUPE_RETURN_IF_ERROR(h->at_sync(ctx));
    if (ctx.stop) stop = true;
    if (end_of_input) {
      result.end_of_input = true;
      report_skipped(*train_input_, "training");
      train_input_.reset();
      stop = true;
    }
    if (ctx.global_step >= stop_at) stop = true;
    if (*done == 0 && !sync) stop = true;
  }
  ctx.global_step = global_step();
  for (auto& h : hooks) TROUPE_RETURN_IF_ERROR(h->end(ctx));
  if (train_events_) TROUPE_RETURN_IF_ERROR(train_events_->flush());
  result.global_step = ctx.global_step;
  result.steps = ctx.global_step - first;
  return result;
}

Result<Metrics> Estimator::evaluate(const input::Dataset& data, EvalOptions options) {
  TROUPE_ASSIGN_OR_RETURN(Model * m, model_for(Mode::kEval, data));
  if (!options.checkpoint_path.empty()) {
    TROUPE_ASSIGN_OR_RETURN(runtime::CheckpointData ckpt,
                            runtime::read_checkpoint(options.checkpoint_path));
    runtime::load_into(ckpt, store_.get());
  }
  TROUPE_RETURN_IF_ERROR(ensure_variables(*m, Mode::kEval));
  std::vector<std::pair<std::string, std::unique_ptr<Metric>>> metrics;
  for (const auto& [name, spec] : m->spec.eval_metric_ops) {
    TROUPE_ASSIGN_OR_RETURN(auto metric, make_metric(spec.kind));
    metrics.emplace_back(name, std::move(metric));
  }
  HookSetup setup(m->graph, m->spec, Mode::kEval);
  std::vector<std::shared_ptr<SessionRunHook>> hooks = m->spec.evaluation_hooks;
  for (auto& h : options.hooks) hooks.push_back(h);
  for (auto& h : hooks) TROUPE_RETURN_IF_ERROR(h->begin(setup));
  HookContext ctx{global_step(), *store_, config_.model_dir};
  for (auto& h : hooks) TROUPE_RETURN_IF_ERROR(h->after_create_session(ctx));

  TROUPE_ASSIGN_OR_RETURN(auto pipeline, input::Pipeline::start(*runtime_, data));
  actors::LoopRequest loop;
  loop.steps = options.steps > 0 ? options.steps : INT64_MAX;
  loop.fetches = {m->spec.loss, m->inputs[0]};
  for (const auto& [name, spec] : m->spec.eval_metric_ops) {
    loop.fetches.push_back(spec.labels);
    loop.fetches.push_back(spec.predictions);
  }
  const size_t hook_offset = loop.fetches.size();
  loop.fetches.insert(loop.fetches.end(), setup.fetches().begin(), setup.fetches().end());
  loop.input = pipeline->queue_actor();
  loop.input_feeds = m->inputs;
  double loss_sum = 0, examples = 0;
  Status error;
  const int64_t step = global_step();
  loop.on_step = [&](int64_t, const std::vector<Tensor>& v) {
    const double n = v[1].rank() > 0 ? static_cast<double>(v[1].dim(0)) : 1.0;
    loss_sum += v[0].scalar_as_double() * n;
    examples += n;
    for (size_t k = 0; k < metrics.size(); ++k) {
      Status s = metrics[k].second->update(v[2 + 2 * k], v[3 + 2 * k]);
      if (!s.ok()) {
        error = s.with_context("metric '" + metrics[k].first + "'");
        return false;
      }
    }
    StepContext sc(step, v, hook_offset);
    error = after_run_all(hooks, sc);
    return error.ok() && !sc.stop_requested();
  };
  auto done = m->session->run_loop(std::move(loop));
  if (!done.ok()) return done.status().with_context("evaluate");
  report_skipped(*pipeline, "evaluation");
  if (!error.ok()) return error;
  for (auto& h : hooks) TROUPE_RETURN_IF_ERROR(h->end(ctx));
  if (examples == 0)
    return runtime::out_of_range("evaluate: ", data.source->name(), " gave no examples");
  Metrics out;
  out["loss"] = loss_sum / examples;
  out["average_loss"] = out["loss"];
  for (const auto& [name, metric] : metrics) out[name] = metric->result();
  out["global_step"] = static_cast<double>(step);
  if (!config_.model_dir.empty()) {
    const std::string dir =
        config_.model_dir + "/" + (options.name.empty() ? "eval" : "eval_" + options.name);
    auto& w = eval_events_[dir];
    if (!w) {
      TROUPE_ASSIGN_OR_RETURN(SummaryWriter opened, SummaryWriter::open(*runtime_, dir));
      w = std::make_unique<SummaryWriter>(opened);
    }
    for (const auto& [name, value] : out) {
      if (name != "global_step") w->scalar(name, value, step);
    }
    TROUPE_RETURN_IF_ERROR(w->flush());
  }
  return out;
}

runtime::Status Estimator::predict(const input::Dataset& data,
                                   const std::function<bool(const Prediction&)>& each,
                                   PredictOptions options) {
  TROUPE_ASSIGN_OR_RETURN(Model * m, model_for(Mode::kPredict, data));
  TROUPE_RETURN_IF_ERROR(ensure_variables(*m, Mode::kPredict));
  std::vector<std::string> keys = options.keys;
  if (keys.empty()) {
    for (const auto& [k, o] : m->spec.predictions) keys.push_back(k);
  }
  actors::LoopRequest loop;
  loop.steps = INT64_MAX;
  for (const std::string& k : keys) {
    auto it = m->spec.predictions.find(k);
    if (it == m->spec.predictions.end()) {
      return runtime::invalid_argument("predict: no prediction '", k, "'");
    }
    loop.fetches.push_back(it->second);
  }
  HookSetup setup(m->graph, m->spec, Mode::kPredict);
  std::vector<std::shared_ptr<SessionRunHook>> hooks = m->spec.prediction_hooks;
  for (auto& h : options.hooks) hooks.push_back(h);
  for (auto& h : hooks) TROUPE_RETURN_IF_ERROR(h->begin(setup));
  const size_t hook_offset = loop.fetches.size();
  loop.fetches.insert(loop.fetches.end(), setup.fetches().begin(), setup.fetches().end());
  TROUPE_ASSIGN_OR_RETURN(auto pipeline, input::Pipeline::start(*runtime_, data));
  loop.input = pipeline->queue_actor();
  loop.input_feeds = m->inputs;
  Status error;
  const int64_t step = global_step();
  loop.on_step = [&](int64_t, const std::vector<Tensor>& v) {
    StepContext sc(step, v, hook_offset);
    error = after_run_all(hooks, sc);
    if (!error.ok()) return false;
    if (!options.yield_single_examples) {
      Prediction p;
      for (size_t k = 0; k < keys.size(); ++k) p[keys[k]] = v[k];
      return each(p) && !sc.stop_requested();
    }
    const int64_t n = v.empty() || v[0].rank() == 0 ? 1 : v[0].dim(0);
    for (int64_t row = 0; row < n; ++row) {
      Prediction p;
      for (size_t k = 0; k < keys.size(); ++k) {
        auto one = actors::stack_rows(
            {actors::RowRef{std::make_shared<const actors::Chunk>(actors::Chunk{{v[k]}}), row}},
            false);
        if (!one.ok()) {
          error = one.status();
          return false;
        }
        const Tensor& t = (*one)[0];
        p[keys[k]] = t.reshaped(runtime::Shape(
            std::vector<int64_t>(t.shape().dims().begin() + 1, t.shape().dims().end())));
      }
      if (!each(p)) return false;
    }
    return !sc.stop_requested();
  };
  auto done = m->session->run_loop(std::move(loop));
  if (!done.ok()) return done.status().with_context("predict");
  return error;
}

Result<std::vector<Prediction>> Estimator::predict_batches(const input::Dataset& data,
                                                           PredictOptions options) {
  options.yield_single_examples = false;
  std::vector<Prediction> out;
  TROUPE_RETURN_IF_ERROR(predict(
      data,
      [&](const Prediction& p) {
        out.push_back(p);
        return true;
      },
      options));
  return out;
}

Result<std::string> Estimator::export_saved_model(const std::string& export_dir_base) {
  auto found = models_.find(Mode::kPredict);
  if (found == models_.end()) {
    if (last_components_.empty()) {
      return runtime::failed_precondition("export: the model has not seen any data yet");
    }
    // Build the prediction graph from the inputs the model last saw.
    std::vector<std::pair<std::string, Tensor>> columns;
    for (const Component& c : last_components_) {
      std::vector<int64_t> dims{1};
      for (int64_t d : c.dims) dims.push_back(d < 0 ? 1 : d);
      columns.push_back({c.name, Tensor(c.dtype, runtime::Shape(dims))});
    }
    TROUPE_ASSIGN_OR_RETURN(input::Dataset d, input::arrays(columns, ""));
    TROUPE_RETURN_IF_ERROR(model_for(Mode::kPredict, d).status());
    found = models_.find(Mode::kPredict);
  }
  Model& m = *found->second;
  const std::string dir = export_dir_base + "/" +
                          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count());
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return runtime::internal_error("export: cannot create ", dir, ": ", ec.message());
  std::vector<char> graph;
  TROUPE_RETURN_IF_ERROR(runtime::encode_graph(m.graph, &graph));
  TROUPE_RETURN_IF_ERROR(runtime::write_file_atomic(dir + "/graph.capnp",
                                                    std::string_view(graph.data(), graph.size())));
  runtime::CheckpointData vars;
  vars.global_step = global_step();
  for (const std::string& name : store_->names()) {
    TROUPE_ASSIGN_OR_RETURN(vars.tensors[name], store_->read(name));
  }
  TROUPE_RETURN_IF_ERROR(runtime::write_checkpoint(dir + "/variables.ckpt", vars));
  std::string sig = "method: predict\n";
  for (size_t i = 0; i < m.components.size(); ++i) {
    const Component& c = m.components[i];
    sig += "input " + c.name + " " + dtype_name(c.dtype) + " " +
           m.graph.shape(m.inputs[i]).to_string() + " " + m.graph.node(m.inputs[i].node).name +
           "\n";
  }
  const auto& outputs = m.spec.export_outputs.empty() ? m.spec.predictions : m.spec.export_outputs;
  for (const auto& [name, o] : outputs) {
    sig += "output " + name + " " + dtype_name(m.graph.dtype(o)) + " " +
           m.graph.shape(o).to_string() + " " + m.graph.node(o.node).name + ":" +
           std::to_string(o.index) + "\n";
  }
  TROUPE_RETURN_IF_ERROR(runtime::write_file_atomic(dir + "/signature.txt", sig));
  return dir;
}

}  // namespace troupe::estimators
