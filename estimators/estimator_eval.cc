// Estimator::evaluate and Estimator::predict: each an EstimatorActor's run (estimator_actor.h)
// over the model's evaluation or prediction graph. The metrics take each step's values inside
// the session actor as the step ends; the caller's function takes them in an actor on a thread
// of its own.
#include <utility>

#include "actors/queue.h"
#include "estimators/estimator.h"
#include "estimators/hook_actor.h"
#include "estimators/summary/summary_actor.h"

namespace troupe::estimators {

using runtime::Result;
using runtime::Status;
using runtime::Tensor;

EstimatorActorSpec Estimator::inference_spec(
    Mode mode, Model* m, const input::Dataset& data,
    std::shared_ptr<std::unique_ptr<input::Pipeline>> input) {
  EstimatorActorSpec spec;
  spec.mode = mode;
  spec.parts = {m->session->actor(), (*input)->queue_actor(), (*input)->loop_feed(m->inputs)};
  spec.input_feeds = m->inputs;
  spec.variables = store_;
  const int64_t step = global_step();
  spec.global_step = [step] { return step; };  // evaluation does not move it
  spec.max_restarts = config_.max_restarts;
  // Runs on the EstimatorActor's thread while the caller waits for its answer. The variables
  // stay in the store: a new session and an input that reads on after what was counted.
  spec.restart = [this, mode, m, data, input](int64_t consumed) -> Result<TrainingParts> {
    input->reset();
    m->session.reset();
    TROUPE_RETURN_IF_ERROR(open_sessions(*m, mode));
    TROUPE_ASSIGN_OR_RETURN(*input, input::Pipeline::start(*runtime_, data, consumed));
    return TrainingParts{m->session->actor(), (*input)->queue_actor(),
                         (*input)->loop_feed(m->inputs)};
  };
  return spec;
}

namespace {

// The hooks' actors watch a run's steps after its own fetches; they see the global step fixed.
void add_hooks(EstimatorActorSpec& spec, const HookSetup& setup,
               const std::vector<std::shared_ptr<SessionRunHook>>& hooks,
               std::shared_ptr<runtime::VariableStore> store, const std::string& model_dir) {
  const size_t offset = spec.fetches.size();
  spec.fetches.insert(spec.fetches.end(), setup.fetches().begin(), setup.fetches().end());
  for (const auto& h : hooks) {
    spec.hooks.push_back({h, hook_name(*h), store, model_dir, offset, /*fixed_step=*/true});
  }
}

}  // namespace

Result<EvaluationRun> Estimator::spawn_evaluation(const input::Dataset& data, EvalOptions options) {
  TROUPE_ASSIGN_OR_RETURN(Model * m, model_for(Mode::kEval, data));
  if (options.checkpoint_path.empty()) {
    TROUPE_RETURN_IF_ERROR(pull_from_cluster());
  } else {
    TROUPE_RETURN_IF_ERROR(load_checkpoint(*m, options.checkpoint_path));
  }
  TROUPE_RETURN_IF_ERROR(ensure_variables(*m, Mode::kEval));
  if (options.steps < 0) return runtime::invalid_argument("evaluate: steps must be >= 0");

  EvaluationRun run;
  run.tally = std::make_shared<EvalTally>();
  run.source = data.source->name();
  run.name = options.name;
  run.global_step = global_step();
  // A component with a row per example counts the batch's examples.
  size_t rows_input = 0;
  while (rows_input + 1 < m->components.size() && !m->components[rows_input].by_example) {
    ++rows_input;
  }
  std::vector<runtime::Output> fetches = {m->spec.loss, m->inputs[rows_input]};
  for (const auto& [name, spec] : m->spec.eval_metric_ops) {
    if (spec.in_graph()) {
      run.graph_metrics.emplace_back(name, spec.value);
      fetches.push_back(spec.update);  // its value is read once, at the end
      continue;
    }
    TROUPE_ASSIGN_OR_RETURN(auto metric, make_metric(spec.kind));
    run.tally->add_metric(name, std::move(metric), fetches.size(), spec.weights.valid());
    fetches.push_back(spec.labels);
    fetches.push_back(spec.predictions);
    if (spec.weights.valid()) fetches.push_back(spec.weights);
  }
  // The graph metrics count from zero, as TF's evaluation runs the local variables' initializer.
  if (!run.graph_metrics.empty()) {
    TROUPE_RETURN_IF_ERROR(
        m->session->run({}, {}, {m->local_init}).status().with_context("evaluate"));
  }
  // The model_fn's own summaries: their last batch's values go to the eval directory.
  run.summaries = ops::summary::summaries(m->graph);
  run.last_summaries = std::make_shared<std::vector<Tensor>>();
  const size_t first_summary = fetches.size();
  for (const ops::summary::Marked& s : run.summaries) fetches.push_back(s.output);
  HookSetup setup(m->graph, m->spec, Mode::kEval);
  std::vector<std::shared_ptr<SessionRunHook>> hooks = m->spec.evaluation_hooks;
  for (auto& h : options.hooks) hooks.push_back(h);
  for (auto& h : hooks) TROUPE_RETURN_IF_ERROR(h->begin(setup));

  run.input = std::make_shared<std::unique_ptr<input::Pipeline>>();
  TROUPE_ASSIGN_OR_RETURN(*run.input, input::Pipeline::start(*runtime_, data));
  EstimatorActorSpec spec = inference_spec(Mode::kEval, m, data, run.input);
  spec.fetches = std::move(fetches);
  add_hooks(spec, setup, hooks, store_, config_.model_dir);
  if (options.steps > 0) spec.max_steps = options.steps;
  spec.consume = [tally = run.tally, last = run.last_summaries, first_summary,
                  n = run.summaries.size()](const std::vector<Tensor>& v) -> Result<bool> {
    TROUPE_RETURN_IF_ERROR(tally->add(v));
    last->assign(v.begin() + static_cast<std::ptrdiff_t>(first_summary),
                 v.begin() + static_cast<std::ptrdiff_t>(first_summary + n));
    return true;
  };
  run.actor = spawn_estimator_actor(runtime_->system(), std::move(spec));
  return run;
}

Result<Metrics> Estimator::finish_evaluation(const EvaluationRun& run, const RunOutcome& outcome) {
  if (!outcome.status.ok()) return outcome.status.with_context("evaluate");
  if (*run.input) (*run.input)->log_skipped("evaluation");
  if (run.tally->examples() == 0) {
    return runtime::out_of_range("evaluate: ", run.source, " gave no examples");
  }
  Metrics out = run.tally->result();
  if (!run.graph_metrics.empty()) {
    Model& m = *models_.at(Mode::kEval);
    std::vector<runtime::Output> values;
    for (const auto& [name, value] : run.graph_metrics) values.push_back(value);
    auto read = m.session->run({}, values, {});
    if (!read.ok()) return read.status().with_context("evaluate: the metrics' values");
    for (size_t i = 0; i < values.size(); ++i) {
      out[run.graph_metrics[i].first] = (*read)[i].scalar_as_double();
    }
  }
  out["global_step"] = static_cast<double>(run.global_step);
  if (!config_.model_dir.empty()) {
    const std::string dir =
        config_.model_dir + "/" + (run.name.empty() ? "eval" : "eval_" + run.name);
    auto& w = eval_events_[dir];
    if (!w) {
      TROUPE_ASSIGN_OR_RETURN(SummaryWriter opened, SummaryWriter::open(*runtime_, dir));
      w = std::make_unique<SummaryWriter>(opened);
    }
    for (const auto& [name, value] : out) {
      if (name != "global_step") w->scalar(name, value, run.global_step);
    }
    for (size_t i = 0; i < run.summaries.size() && i < run.last_summaries->size(); ++i) {
      write_summary(*w, run.summaries[i], (*run.last_summaries)[i], run.global_step);
    }
    TROUPE_RETURN_IF_ERROR(w->flush());
  }
  return out;
}

Result<Metrics> Estimator::evaluate(const input::Dataset& data, EvalOptions options) {
  TROUPE_ASSIGN_OR_RETURN(EvaluationRun run, spawn_evaluation(data, std::move(options)));
  return finish_evaluation(run, await_run(run.actor, "evaluation"));
}

Result<std::map<std::string, Metrics>> Estimator::evaluate(
    const std::vector<std::pair<std::string, input::Dataset>>& sets, EvalOptions options) {
  std::map<std::string, Metrics> out;
  for (const auto& [name, data] : sets) {
    if (out.count(name)) return runtime::invalid_argument("evaluate: two sets named '", name, "'");
    options.name = name;
    TROUPE_ASSIGN_OR_RETURN(out[name], evaluate(data, options));
  }
  return out;
}

namespace {

// Row `row` of each of a batch's predictions, without the batch dimension.
Result<Prediction> example_of(const std::vector<std::string>& keys, const std::vector<Tensor>& v,
                              int64_t row) {
  Prediction p;
  for (size_t k = 0; k < keys.size(); ++k) {
    auto one = actors::stack_rows(
        {actors::RowRef{std::make_shared<const actors::Chunk>(actors::Chunk{{v[k]}}), row}}, false);
    if (!one.ok()) return one.status();
    const Tensor& t = (*one)[0];
    p[keys[k]] = t.reshaped(
        runtime::Shape(std::vector<int64_t>(t.shape().dims().begin() + 1, t.shape().dims().end())));
  }
  return p;
}

}  // namespace

Status Estimator::predict(const input::Dataset& data,
                          const std::function<bool(const Prediction&)>& each,
                          PredictOptions options) {
  TROUPE_ASSIGN_OR_RETURN(Model * m, model_for(Mode::kPredict, data));
  TROUPE_RETURN_IF_ERROR(pull_from_cluster());
  TROUPE_RETURN_IF_ERROR(ensure_variables(*m, Mode::kPredict));
  std::vector<std::string> keys = options.keys;
  if (keys.empty()) {
    for (const auto& [k, o] : m->spec.predictions) keys.push_back(k);
  }
  std::vector<runtime::Output> fetches;
  for (const std::string& k : keys) {
    auto it = m->spec.predictions.find(k);
    if (it == m->spec.predictions.end()) {
      return runtime::invalid_argument("predict: no prediction '", k, "'");
    }
    fetches.push_back(it->second);
  }
  HookSetup setup(m->graph, m->spec, Mode::kPredict);
  std::vector<std::shared_ptr<SessionRunHook>> hooks = m->spec.prediction_hooks;
  for (auto& h : options.hooks) hooks.push_back(h);
  for (auto& h : hooks) TROUPE_RETURN_IF_ERROR(h->begin(setup));

  auto input = std::make_shared<std::unique_ptr<input::Pipeline>>();
  TROUPE_ASSIGN_OR_RETURN(*input, input::Pipeline::start(*runtime_, data));
  EstimatorActorSpec spec = inference_spec(Mode::kPredict, m, data, input);
  spec.fetches = std::move(fetches);
  add_hooks(spec, setup, hooks, store_, config_.model_dir);
  spec.consumer_blocks = true;  // the caller's function: it may write to a disk
  const bool single = options.yield_single_examples;
  spec.consume = [&each, keys, single](const std::vector<Tensor>& v) -> Result<bool> {
    if (!single) {
      Prediction p;
      for (size_t k = 0; k < keys.size(); ++k) p[keys[k]] = v[k];
      return each(p);
    }
    const int64_t n = v.empty() || v[0].rank() == 0 ? 1 : v[0].dim(0);
    for (int64_t row = 0; row < n; ++row) {
      TROUPE_ASSIGN_OR_RETURN(Prediction p, example_of(keys, v, row));
      if (!each(p)) return false;
    }
    return true;
  };
  caf::actor run = spawn_estimator_actor(runtime_->system(), std::move(spec));
  const RunOutcome outcome = await_run(run, "prediction");
  return outcome.status.ok() ? outcome.status : outcome.status.with_context("predict");
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

}  // namespace troupe::estimators
