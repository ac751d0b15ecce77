// The Estimator with a custom model_fn: training that lowers the loss, evaluation on the model
// in memory, resident prediction, resuming from model_dir, bit-reproducible seeded runs, hooks,
// user errors that fail fast, and a restart after a runtime failure.
#include "estimators/estimator.h"

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <random>
#include <thread>

#include "harness/temp_dir.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/metric_ops.h"
#include "ops/nn_ops.h"
#include "ops/state_ops.h"
#include "ops/strided_slice.h"
#include "ops/summary_ops.h"
#include "ops/training_ops.h"
#include "runtime/checkpoint.h"
#include "runtime/record_io.h"

using namespace troupe;
using namespace troupe::estimators;
using namespace troupe::runtime;

namespace {

std::string fresh_dir(const std::string& name) { return testing::temp_dir(name); }

// y = 3 x0 - 2 x1 + 1 + noise: x [n, 2] and y [n].
std::pair<Tensor, Tensor> regression_arrays(int64_t n) {
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> x(n * 2), y(n);
  for (int64_t i = 0; i < n; ++i) {
    x[2 * i] = g(rng);
    x[2 * i + 1] = g(rng);
    y[i] = 3 * x[2 * i] - 2 * x[2 * i + 1] + 1 + 0.01f * g(rng);
  }
  return {Tensor::from_vector(Shape{n, 2}, x), Tensor::from_vector(Shape{n}, y)};
}

input::Dataset regression_data(int64_t n, int64_t epochs, uint64_t seed = 1) {
  auto [x, y] = regression_arrays(n);
  auto d = input::arrays({{"x", x}, {"y", y}}, "y",
                         {.batch_size = 32, .num_epochs = epochs, .shuffle = true, .seed = seed});
  REQUIRE(d.ok());
  return *d;
}

runtime::Result<EstimatorSpec> linear_model(ModelInputs& in) {
  auto& b = in.b;
  Output x = in.features.at("x");
  Output w = ops::variable(b, "linear/w", Shape{2, 1}, DType::kFloat32,
                           ops::glorot_uniform(b, Shape{2, 1}));
  Output bias = ops::variable(b, "linear/b", Shape{1}, DType::kFloat32,
                              ops::zeros(b, Shape{1}, DType::kFloat32));
  Output pred = ops::reshape(b, ops::bias_add(b, ops::matmul(b, x, w), bias), {-1});
  EstimatorSpec spec;
  spec.predictions["y"] = pred;
  if (in.mode == Mode::kPredict) return spec;
  spec.loss = ops::reduce_mean(b, ops::square(b, ops::sub(b, pred, in.labels)));
  spec.eval_metric_ops["mae"] = {"mae", in.labels, pred};
  spec.eval_metric_ops["rmse"] = {"rmse", in.labels, pred};
  if (in.mode == Mode::kTrain) {
    spec.train_op = ops::minimize(b, spec.loss, ops::Optimizer::sgd(param(in.params, "lr", 0.05)));
  }
  return spec;
}

RunConfig quiet(const std::string& dir = "") {
  RunConfig c;
  c.model_dir = dir;
  c.tf_random_seed = 3;
  c.log_step_count_steps = 1000000;
  return c;
}

class CountingHook : public SessionRunHook {
 public:
  runtime::Status begin(HookSetup& s) override {
    loss_ = s.fetch(s.loss());
    return runtime::ok_status();
  }
  runtime::Status after_run(StepContext& c) override {
    ++steps;
    last_step = c.global_step;
    last_loss = c.value(loss_).scalar_as_double();
    return runtime::ok_status();
  }
  runtime::Status end(HookContext&) override {
    ended = true;
    return runtime::ok_status();
  }
  int loss_ = -1;
  int64_t steps = 0, last_step = 0;
  double last_loss = 0;
  bool ended = false;
};

}  // namespace

TEST_CASE("estimator: train, evaluate in memory, predict, variables") {
  Estimator est(linear_model, quiet());
  auto hook = std::make_shared<CountingHook>();
  auto r = est.train(regression_data(512, 20), {.hooks = {hook}});
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  CHECK(r->end_of_input);
  CHECK(r->global_step == 20 * 16);
  CHECK(hook->steps == 320);
  CHECK(hook->last_step == 320);
  CHECK(hook->ended);
  CHECK(hook->last_loss < 0.01);
  auto m = est.evaluate(regression_data(512, 1));
  REQUIRE_MESSAGE(m.ok(), m.status().to_string());
  CHECK(m->at("loss") < 0.01);
  CHECK(m->at("mae") < 0.1);
  CHECK(m->at("global_step") == 320);
  auto w = est.get_variable_value("linear/w");
  REQUIRE(w.ok());
  CHECK(w->data<float>()[0] == doctest::Approx(3).epsilon(0.02));
  CHECK(w->data<float>()[1] == doctest::Approx(-2).epsilon(0.02));
  auto x = Tensor::from_vector<float>(Shape{2, 2}, {1, 0, 0, 1});
  auto data = input::arrays({{"x", x}}, "");
  std::vector<double> got;
  REQUIRE(est.predict(*data,
                      [&](const Prediction& p) {
                        got.push_back(p.at("y").scalar_as_double());
                        return true;
                      })
              .ok());
  REQUIRE(got.size() == 2);
  CHECK(got[0] == doctest::Approx(4).epsilon(0.02));
  CHECK(got[1] == doctest::Approx(-1).epsilon(0.05));
  // Resident: a second call reuses the graph and session.
  auto again = est.predict_batches(*data);
  REQUIRE(again.ok());
  CHECK((*again)[0].at("y").dim(0) == 2);
}

TEST_CASE("estimator: a model_fn's graph metrics count each evaluation anew, and are never saved") {
  auto with_own_metrics = [](ModelInputs& in) -> runtime::Result<EstimatorSpec> {
    TROUPE_ASSIGN_OR_RETURN(EstimatorSpec spec, linear_model(in));
    if (in.mode == Mode::kPredict) return spec;
    Output pred = spec.predictions.at("y");
    spec.eval_metric_ops["own_mae"] =
        MetricSpec::of(ops::metrics::mean_absolute_error(in.b, in.labels, pred));
    spec.eval_metric_ops["examples"] =
        MetricSpec::of(ops::metrics::sum(in.b, ops::ones_like(in.b, pred)));
    return spec;
  };
  const std::string dir = fresh_dir("graph_metrics");
  Estimator est(with_own_metrics, quiet(dir));
  REQUIRE(est.train(regression_data(256, 3)).ok());
  auto first = est.evaluate(regression_data(256, 1));
  REQUIRE_MESSAGE(first.ok(), first.status().to_string());
  CHECK(first->at("examples") == 256);
  // The canned kind ("mae", now graph ops too) and the model_fn's own agree.
  CHECK(first->at("own_mae") == doctest::Approx(first->at("mae")).epsilon(1e-12));
  // ... and both are the mean absolute error of the predictions, worked out here.
  auto [x, y] = regression_arrays(256);
  auto unlabelled = input::arrays({{"x", x}}, "");
  REQUIRE(unlabelled.ok());
  double total = 0;
  int64_t i = 0;
  REQUIRE(est.predict(*unlabelled,
                      [&](const Prediction& p) {
                        total += std::fabs(p.at("y").scalar_as_double() - y.data<float>()[i++]);
                        return true;
                      })
              .ok());
  CHECK(first->at("own_mae") == doctest::Approx(total / 256).epsilon(1e-6));
  auto second = est.evaluate(regression_data(100, 1));
  REQUIRE(second.ok());
  CHECK(second->at("examples") == 100);  // counted from zero, not on top of the first
  // The counts stay out of what is saved and listed.
  for (const std::string& name : est.get_variable_names()) {
    CHECK_MESSAGE(name.rfind("metrics/", 0) != 0, name);
  }
  REQUIRE(est.train(regression_data(256, 1)).ok());  // saves a checkpoint after evaluating
  auto third = est.evaluate(regression_data(256, 1));
  REQUIRE(third.ok());
  CHECK(third->at("examples") == 256);

  auto half = [](ModelInputs& in) -> runtime::Result<EstimatorSpec> {
    TROUPE_ASSIGN_OR_RETURN(EstimatorSpec spec, linear_model(in));
    if (in.mode == Mode::kPredict) return spec;
    MetricSpec broken = MetricSpec::of(ops::metrics::mean(in.b, spec.predictions.at("y")));
    broken.value = Output{};
    spec.eval_metric_ops["broken"] = broken;
    return spec;
  };
  Estimator bad(half, quiet());
  auto refused = bad.train(regression_data(64, 1));  // a spec is checked in every mode, as TF's
  REQUIRE_FALSE(refused.ok());
  CHECK_MESSAGE(refused.status().message().find("metric 'broken' has an update op but no value") !=
                    std::string::npos,
                refused.status().to_string());
}

TEST_CASE("estimator: resumes from model_dir; max_steps and steps as TF counts them") {
  const std::string dir = fresh_dir("resume");
  {
    Estimator est(linear_model, quiet(dir));
    auto r = est.train(regression_data(256, 100), {.steps = 50});
    REQUIRE(r.ok());
    CHECK(r->global_step == 50);
    CHECK(!est.latest_checkpoint().empty());
  }
  Estimator est(linear_model, quiet(dir));
  auto r = est.train(regression_data(256, 100), {.max_steps = 80});
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  CHECK(r->global_step == 80);
  CHECK(r->steps == 30);
  auto skipped = est.train(regression_data(256, 100), {.max_steps = 80});
  REQUIRE(skipped.ok());
  CHECK(skipped->steps == 0);
  CHECK(est.train(regression_data(256, 100), {.steps = 5})->global_step == 85);
  CHECK(std::filesystem::exists(dir + "/model.ckpt-85"));
  // Each run's event file says where training (re)started, so TensorBoard drops what an
  // interrupted run logged past its checkpoint: SessionLog { status: START } (field 7).
  int starts = 0;
  for (auto& f : std::filesystem::directory_iterator(dir)) {
    if (f.path().filename().string().rfind("events.out.tfevents.", 0) != 0) continue;
    std::string bytes;
    REQUIRE(runtime::read_file(f.path().string(), &bytes).ok());
    for (size_t at = bytes.find("\x3a\x02\x08\x01"); at != std::string::npos;
         at = bytes.find("\x3a\x02\x08\x01", at + 1)) {
      ++starts;
    }
  }
  CHECK(starts >= 3);  // the first run, the resumed one, the one of 5 more steps
  // Evaluating a fresh Estimator reads the latest checkpoint.
  Estimator reader(linear_model, quiet(dir));
  auto m = reader.evaluate(regression_data(64, 1));
  REQUIRE(m.ok());
  CHECK(m->at("global_step") == 85);
  CHECK(std::filesystem::exists(dir + "/eval"));
  // Several named sets at once, each with its own event directory.
  auto sets =
      reader.evaluate({{"small", regression_data(64, 1)}, {"large", regression_data(512, 1)}});
  REQUIRE_MESSAGE(sets.ok(), sets.status().to_string());
  CHECK(sets->size() == 2);
  CHECK(sets->at("small").at("global_step") == 85);
  CHECK(sets->at("large").at("loss") > 0);
  CHECK(std::filesystem::exists(dir + "/eval_small"));
  CHECK(std::filesystem::exists(dir + "/eval_large"));
  auto twice = reader.evaluate({{"a", regression_data(64, 1)}, {"a", regression_data(64, 1)}});
  CHECK(twice.status().message() == "evaluate: two sets named 'a'");
}

TEST_CASE("estimator: a seeded run is bit-reproducible") {
  auto weights = [] {
    Estimator est(linear_model, quiet());
    REQUIRE(est.train(regression_data(256, 3, 9)).ok());
    return est.get_variable_value("linear/w")->to_vector<float>();
  };
  CHECK(weights() == weights());
}

TEST_CASE("estimator: an interrupted run resumes its input where it stood, bit for bit") {
  auto weights = [](Estimator& est) {
    std::vector<float> w = est.get_variable_value("linear/w")->to_vector<float>();
    w.push_back(est.get_variable_value("linear/b")->to_vector<float>()[0]);
    return w;
  };
  // 3 epochs of 8 batches, seeded shuffle; checkpoints every 5 steps.
  RunConfig config = quiet(fresh_dir("input_whole"));
  config.save_checkpoints_steps = 5;
  Estimator whole(linear_model, config);
  REQUIRE(whole.train(regression_data(256, 3, 4), {.max_steps = 20}).ok());

  config.model_dir = fresh_dir("input_resumed");
  {
    Estimator first(linear_model, config);
    auto r = first.train(regression_data(256, 3, 4), {.steps = 13});
    REQUIRE(r.ok());
    CHECK(r->global_step == 13);
  }
  Estimator second(linear_model, config);
  auto r = second.train(regression_data(256, 3, 4), {.max_steps = 20});
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  CHECK(r->global_step == 20);
  // The second run saw batches 14..20, as the whole run did, not batches 1..7 again.
  CHECK(weights(second) == weights(whole));

  // Another dataset (another seed) starts from its beginning; a run that used up its data
  // leaves no position, so the next run is a new pass (TF's semantics for a rerun).
  config.model_dir = fresh_dir("input_other");
  {
    Estimator first(linear_model, config);
    REQUIRE(first.train(regression_data(256, 3, 4), {.steps = 13}).ok());
  }
  {
    Estimator other(linear_model, config);
    auto all = other.train(regression_data(256, 1, 5));
    REQUIRE(all.ok());
    CHECK(all->global_step == 13 + 8);
    CHECK(all->end_of_input);
  }
  Estimator again(linear_model, config);
  auto pass = again.train(regression_data(256, 1, 5));
  REQUIRE(pass.ok());
  CHECK(pass->steps == 8);
}

TEST_CASE("estimator: user errors fail fast and name the problem") {
  Estimator missing(
      [](ModelInputs& in) -> runtime::Result<EstimatorSpec> {
        if (!in.features.count("age")) return runtime::invalid_argument("missing feature 'age'");
        return EstimatorSpec{};
      },
      quiet());
  auto r = missing.train(regression_data(64, 1));
  CHECK(r.status().message().find("missing feature 'age'") != std::string::npos);
  CHECK(r.status().message().find("model_fn (train)") != std::string::npos);

  Estimator bad_shape(
      [](ModelInputs& in) -> runtime::Result<EstimatorSpec> {
        Output w = ops::variable(in.b, "w", Shape{3, 1}, DType::kFloat32,
                                 ops::zeros(in.b, Shape{3, 1}, DType::kFloat32));
        EstimatorSpec spec;
        spec.loss = ops::reduce_sum(in.b, ops::matmul(in.b, in.features.at("x"), w));
        spec.train_op = ops::minimize(in.b, spec.loss, ops::Optimizer::sgd(0.1));
        return spec;
      },
      quiet());
  auto s = bad_shape.train(regression_data(64, 1));
  CHECK(!s.ok());
  CHECK(s.status().message().find("MatMul") != std::string::npos);

  // The spec each mode needs (validate_spec): a scalar loss, a train op.
  Estimator no_train_op(
      [](ModelInputs& in) -> runtime::Result<EstimatorSpec> {
        EstimatorSpec spec;
        spec.loss = ops::reduce_mean(in.b, in.features.at("x"));
        return spec;
      },
      quiet());
  CHECK(no_train_op.train(regression_data(64, 1)).status().message() ==
        "model_fn (train): returned no train_op");
  Estimator row_loss(
      [](ModelInputs& in) -> runtime::Result<EstimatorSpec> {
        EstimatorSpec spec;
        spec.loss = ops::reduce_mean(in.b, in.features.at("x"), {1});
        spec.train_op = ops::no_op(in.b, {}, "train");
        return spec;
      },
      quiet());
  CHECK(row_loss.train(regression_data(64, 1))
            .status()
            .message()
            .find("model_fn (train): the loss must be a scalar, not [") != std::string::npos);

  Estimator untrained(linear_model, quiet(fresh_dir("untrained")));
  CHECK(untrained.evaluate(regression_data(64, 1)).status().code() ==
        runtime::Code::kFailedPrecondition);

  Estimator diverging(linear_model, quiet(), {{"lr", "1e6"}});
  auto nan = diverging.train(regression_data(256, 5));
  CHECK(nan.status().message().find("NaN loss") != std::string::npos);
}

TEST_CASE("estimator: hooks stop training, and a failing runtime piece is restarted") {
  Estimator est(linear_model, quiet(fresh_dir("hooks")));
  auto r = est.train(regression_data(256, 100), {.hooks = {stop_at_step_hook(7, 0)}});
  REQUIRE(r.ok());
  CHECK(r->global_step == 7);
  CHECK(!est.train(regression_data(256, 1), {.hooks = {logging_tensor_hook({"nope"}, 1)}}).ok());

  // A hook that fails like an unreachable peer, once: the Estimator restarts from the latest
  // checkpoint and finishes.
  class FlakyHook : public SessionRunHook {
   public:
    runtime::Status after_run(StepContext& c) override {
      if (c.global_step == 20 && !failed_) {
        failed_ = true;
        return runtime::unavailable("the shard went away");
      }
      return runtime::ok_status();
    }
    bool failed_ = false;
  };
  auto flaky = std::make_shared<FlakyHook>();
  auto done = est.train(regression_data(256, 100), {.max_steps = 40, .hooks = {flaky}});
  REQUIRE_MESSAGE(done.ok(), done.status().to_string());
  CHECK(done->restarts == 1);
  CHECK(done->global_step == 40);

  std::vector<double> tracked;
  auto early = early_stopping_hook({.every_steps = 10, .rounds = 2, .min_delta = 1.0});
  Estimator est2(linear_model, quiet());
  auto stopped = est2.train(regression_data(256, 100), {.hooks = {early}});
  REQUIRE(stopped.ok());
  CHECK(stopped->global_step < 100 * 8);
  CHECK(!stopped->end_of_input);
}

TEST_CASE(
    "estimator actor: a hook actor that dies is restarted with the session; a budget ends it") {
  // A hook whose code throws (a bug, not a returned error) ends its actor; the EstimatorActor
  // restarts the run from the latest checkpoint with a fresh hook actor.
  class ThrowingHook : public SessionRunHook {
   public:
    explicit ThrowingHook(int times) : times_(times) {}
    runtime::Status after_create_session(HookContext& ctx) override {
      starts.push_back(ctx.global_step);
      return runtime::ok_status();
    }
    runtime::Status after_run(StepContext& c) override {
      if (c.global_step % 15 == 0 && thrown < times_) {
        ++thrown;
        throw std::runtime_error("boom at step " + std::to_string(c.global_step));
      }
      return runtime::ok_status();
    }
    int times_, thrown = 0;
    std::vector<int64_t> starts;
  };
  RunConfig config = quiet(fresh_dir("throwing_hook"));
  config.save_checkpoints_steps = 10;
  Estimator est(linear_model, config);
  auto once = std::make_shared<ThrowingHook>(1);
  auto done = est.train(regression_data(256, 100), {.max_steps = 40, .hooks = {once}});
  REQUIRE_MESSAGE(done.ok(), done.status().to_string());
  CHECK(done->restarts == 1);
  CHECK(done->global_step == 40);
  // After the restart, from the checkpoint of step 10, after_create_session is called again.
  CHECK(once->starts == std::vector<int64_t>{0, 10});

  auto always = std::make_shared<ThrowingHook>(1000);
  RunConfig fresh = quiet();
  fresh.max_restarts = 2;
  Estimator est2(linear_model, fresh);
  auto failed = est2.train(regression_data(256, 100), {.max_steps = 100, .hooks = {always}});
  REQUIRE_FALSE(failed.ok());
  CHECK(always->thrown == 3);  // the first run and two restarts
  CHECK(failed.status().code() == runtime::Code::kUnavailable);
  CHECK_MESSAGE(
      failed.status().message().find("ThrowingHook threw: boom at step") != std::string::npos,
      failed.status().message());
}

TEST_CASE("estimator actor: evaluation and prediction restart where they stood") {
  Estimator est(linear_model, quiet());
  REQUIRE(est.train(regression_data(256, 20)).ok());
  const input::Dataset test = regression_data(200, 1, 9);  // 7 batches, the last of 8
  auto clean = est.evaluate(test);
  REQUIRE(clean.ok());

  // Fails like an unreachable peer at its third step, once: the run restarts with a new session
  // and an input that reads on after the batches already counted.
  class Flaky : public SessionRunHook {
   public:
    runtime::Status after_create_session(HookContext&) override {
      ++starts;
      return runtime::ok_status();
    }
    runtime::Status after_run(StepContext&) override {
      if (++steps == 3 && !failed) {
        failed = true;
        return runtime::unavailable("the shard went away");
      }
      return runtime::ok_status();
    }
    int starts = 0, steps = 0;
    bool failed = false;
  };
  auto flaky = std::make_shared<Flaky>();
  auto restarted = est.evaluate(test, {.hooks = {flaky}});
  REQUIRE_MESSAGE(restarted.ok(), restarted.status().to_string());
  CHECK(flaky->failed);
  CHECK(flaky->starts == 2);
  // Every example counted once, in the same order: the same sums to the last bit.
  CHECK(restarted->at("loss") == clean->at("loss"));
  CHECK(restarted->at("mae") == clean->at("mae"));
  CHECK(restarted->at("rmse") == clean->at("rmse"));

  std::vector<float> expected;
  REQUIRE(est.predict(test,
                      [&](const Prediction& p) {
                        expected.push_back(static_cast<float>(p.at("y").scalar_as_double()));
                        return true;
                      })
              .ok());
  REQUIRE(expected.size() == 200);
  // Prediction hands each example to the caller's function once, in order, on the run's actor
  // thread (the caller's waits), across a restart.
  auto flaky_predict = std::make_shared<Flaky>();
  std::vector<float> got;
  const std::thread::id caller = std::this_thread::get_id();
  bool on_caller = false;
  auto done = est.predict(test,
                          [&](const Prediction& p) {
                            on_caller = on_caller || std::this_thread::get_id() == caller;
                            got.push_back(static_cast<float>(p.at("y").scalar_as_double()));
                            return true;
                          },
                          {.hooks = {flaky_predict}});
  REQUIRE_MESSAGE(done.ok(), done.to_string());
  CHECK(flaky_predict->starts == 2);
  CHECK(got == expected);
  CHECK(!on_caller);

  // The caller's function failing is no failure of the machinery: no restart, its words kept.
  int calls = 0;
  auto thrown = est.predict(test, [&](const Prediction&) -> bool {
    ++calls;
    throw std::runtime_error("the caller's disk is full");
  });
  REQUIRE_FALSE(thrown.ok());
  CHECK(calls == 1);
  CHECK_MESSAGE(thrown.message().find("the caller's disk is full") != std::string::npos,
                thrown.to_string());
}

TEST_CASE("estimator: request_stop from another thread ends training with a checkpoint") {
  class Progress : public SessionRunHook {
   public:
    runtime::Status after_run(StepContext& c) override {
      step = c.global_step;
      // Slow steps once the stopper may act, so that a loaded machine cannot finish all 16000
      // before its thread gets to run.
      if (c.global_step >= 50) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      return runtime::ok_status();
    }
    std::atomic<int64_t> step{0};
  };
  const std::string dir = fresh_dir("request_stop");
  Estimator est(linear_model, quiet(dir));
  auto progress = std::make_shared<Progress>();
  std::thread stopper([&] {
    while (progress->step < 50) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    est.request_stop();
  });
  auto r = est.train(regression_data(256, 1000), {.hooks = {progress}});
  stopper.join();
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  CHECK(r->stopped);
  CHECK_FALSE(r->end_of_input);
  CHECK(r->global_step >= 50);
  CHECK(r->global_step < 16000);
  CHECK(est.latest_checkpoint() == dir + "/model.ckpt-" + std::to_string(r->global_step));
  // Nothing runs now: a stop is a no-op, and training goes on from where it stopped.
  est.request_stop();
  auto more = est.train(regression_data(256, 1), {.steps = 5});
  REQUIRE(more.ok());
  CHECK(more->global_step == r->global_step + 5);
}

TEST_CASE("profiler hook: node actors' kernel timings as Chrome traces") {
  const std::string dir = fresh_dir("profile");
  Estimator est(linear_model, quiet());
  auto r =
      est.train(regression_data(256, 100), {.max_steps = 25, .hooks = {profiler_hook(10, dir)}});
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  for (int step : {10, 20}) {
    const std::string path = dir + "/timeline-" + std::to_string(step) + ".json";
    REQUIRE(std::filesystem::exists(path));
    std::string text;
    REQUIRE(runtime::read_file(path, &text).ok());
    CHECK(text.rfind("{\"traceEvents\": [", 0) == 0);
    // The gradient's product is a plain MatMul; x·w + b runs fused, under the BiasAdd's name.
    CHECK(text.find("\"cat\": \"MatMul\", \"ph\": \"X\"") != std::string::npos);
    CHECK(text.find("\"name\": \"BiasAdd\", \"cat\": \"_FusedMatMul\"") != std::string::npos);
  }
  CHECK(!std::filesystem::exists(dir + "/timeline-15.json"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("estimator: SIGKILL during fit loses at most the steps since the last checkpoint") {
  const std::string dir = fresh_dir("kill");
  std::mt19937 rng(11);
  int64_t last = 0;
  for (int round = 0; round < 3; ++round) {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      RunConfig c = quiet(dir);
      c.save_checkpoints_steps = 5;
      Estimator est(linear_model, c);
      est.train(regression_data(256, 0));  // forever, until killed
      ::_exit(0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300 + rng() % 300));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    REQUIRE(WIFSIGNALED(status));
    Estimator est(linear_model, quiet(dir));
    auto ckpt = runtime::read_checkpoint(est.latest_checkpoint());
    REQUIRE_MESSAGE(ckpt.ok(), ckpt.status().to_string());
    if (round == 0) CHECK(ckpt->global_step % 5 == 0);  // later rounds resume off the grid
    CHECK(ckpt->global_step >= last);
    last = ckpt->global_step;
    auto r = est.train(regression_data(256, 0), {.steps = 3});
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    CHECK(r->global_step == ckpt->global_step + 3);
  }
  CHECK(last > 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("estimator: a checkpoint of another model is refused with the variable's shapes") {
  const std::string dir = fresh_dir("other");
  {
    Estimator est(linear_model, quiet(dir));
    REQUIRE(est.train(regression_data(64, 1)).ok());
  }
  Estimator wider(
      [](ModelInputs& in) -> runtime::Result<EstimatorSpec> {
        Output w = ops::variable(in.b, "linear/w", Shape{2, 3}, DType::kFloat32,
                                 ops::zeros(in.b, Shape{2, 3}, DType::kFloat32));
        EstimatorSpec spec;
        spec.loss = ops::reduce_sum(in.b, ops::matmul(in.b, in.features.at("x"), w));
        spec.train_op = ops::minimize(in.b, spec.loss, ops::Optimizer::sgd(0.1));
        return spec;
      },
      quiet(dir));
  auto r = wider.train(regression_data(64, 1));
  CHECK(r.status().code() == runtime::Code::kFailedPrecondition);
  CHECK(
      r.status().message().find(
          "variable 'linear/w' is float32[2,1] in the checkpoint but float32[2,3] in the graph") !=
      std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a model_fn's own summaries reach TensorBoard: scalars, histograms, images and text") {
  const std::string dir = fresh_dir("user_summaries");
  auto model_fn = [](ModelInputs& in) -> runtime::Result<EstimatorSpec> {
    TROUPE_ASSIGN_OR_RETURN(EstimatorSpec spec, linear_model(in));
    if (in.mode == Mode::kPredict) return spec;
    auto& b = in.b;
    ops::summary::scalar(b, "custom/loss_x2", ops::mul(b, spec.loss, 2.0));
    ops::summary::histogram(b, "custom/inputs", in.features.at("x"));
    // Each batch's inputs as a small picture: [1, batch, 2, 1] floats outside [0, 1], stretched.
    ops::summary::image(b, "custom/picture", ops::reshape(b, in.features.at("x"), {1, -1, 2, 1}));
    // The batch tiled to 3 RGB images [3, 4, 2, 3], of which 2 are written.
    Output rows = ops::slice(b, in.features.at("x"), {0, 0}, {4, 2});
    Output rgb = ops::tile(b, ops::reshape(b, rows, {1, 4, 2, 1}), {3, 1, 1, 3});
    ops::summary::image(b, "custom/rgb", rgb, 2);
    ops::summary::text(b, "custom/note",
                       ops::constant(b, Tensor::from_vector<std::string>(
                                            Shape{2}, {"mode " + std::string(mode_name(in.mode)),
                                                       "second line"})));
    if (in.mode == Mode::kTrain) {
      // Counts the steps that compute the summaries: only those that write them, as TF's hook
      // fetches them only then.
      Output runs = ops::variable(b, "summary_runs", Shape{}, DType::kFloat32,
                                  ops::scalar(b, 0, DType::kFloat32), /*trainable=*/false);
      ops::summary::scalar(b, "custom/runs",
                           ops::assign_add(b, runs, ops::scalar(b, 1, DType::kFloat32)));
    }
    return spec;
  };
  RunConfig c = quiet(dir);
  c.save_summary_steps = 10;
  Estimator est(model_fn, c);
  REQUIRE(est.train(regression_data(256, 100), {.max_steps = 30}).ok());
  auto runs = est.get_variable_value("summary_runs");
  REQUIRE(runs.ok());
  CHECK(runs->scalar_as_double() == 3);  // steps 10, 20 and 30 of 30
  REQUIRE(est.evaluate(regression_data(64, 1)).ok());
  // Read as TensorBoard would, by another program.
  auto read = [&](const std::string& logdir) {
    std::string files;
    for (const auto& e : std::filesystem::directory_iterator(logdir)) {
      if (e.path().filename().string().rfind("events.out.tfevents", 0) == 0) {
        files += " " + e.path().string();
      }
    }
    REQUIRE(!files.empty());
    const std::string out = logdir + "/read.jsonl";
    REQUIRE(std::system(("/usr/bin/python3 " TROUPE_EVENTS_READER + files + " > " + out).c_str()) ==
            0);
    std::string text;
    REQUIRE(runtime::read_file(out, &text).ok());
    return text;
  };
  const std::string train = read(dir);
  for (int step : {10, 20, 30}) {
    CAPTURE(step);
    const std::string at = "{\"step\": " + std::to_string(step) + ", \"tag\": ";
    CHECK(train.find(at + "\"custom/loss_x2\", \"kind\": \"scalar\"") != std::string::npos);
    CHECK(train.find(at + "\"custom/inputs\", \"kind\": \"histogram\"") != std::string::npos);
    CHECK(train.find(at + "\"custom/picture/image\", \"kind\": \"image\"") != std::string::npos);
    CHECK(train.find(at + "\"custom/rgb/image/1\", \"kind\": \"image\"") != std::string::npos);
    CHECK(train.find(at + "\"custom/note\", \"kind\": \"text\"") != std::string::npos);
  }
  CHECK(
      train.find("{\"step\": 30, \"tag\": \"custom/runs\", \"kind\": \"scalar\", \"value\": 3.0") !=
      std::string::npos);
  CHECK(train.find("\"custom/rgb/image/2\"") == std::string::npos);  // max_outputs 2
  CHECK(train.find("\"width\": 2, \"height\": 4, \"mode\": \"RGB\", \"colorspace\": 3, "
                   "\"declared\": [4, 2]") != std::string::npos);
  CHECK(train.find("\"mode\": \"L\", \"colorspace\": 1") != std::string::npos);
  CHECK(train.find("\"plugin\": \"text\", \"strings\": [\"mode train\", \"second line\"], "
                   "\"dtype\": 7") != std::string::npos);
  // The evaluation's last batch, at the global step it evaluated.
  const std::string eval = read(dir + "/eval");
  CHECK(eval.find("{\"step\": 30, \"tag\": \"custom/loss_x2\", \"kind\": \"scalar\"") !=
        std::string::npos);
  CHECK(eval.find("\"strings\": [\"mode eval\", \"second line\"]") != std::string::npos);
  std::filesystem::remove_all(dir);
}
