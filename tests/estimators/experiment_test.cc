// Experiment: evaluation every N steps, early stopping, learning-rate reduction on a plateau,
// exports, a graceful stop, continuous evaluation, and evaluations supervised as training is.
#include "estimators/experiment.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "estimators/canned/dnn.h"
#include "estimators/canned/test_data.h"
#include "runtime/checkpoint.h"

using namespace troupe;
using namespace troupe::estimators;
using runtime::Tensor;

using test::quiet;

TEST_CASE("Experiment: evaluation every N steps, early stopping with the best weights, exports") {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("troupe_exp_" + std::to_string(::getpid())))
          .string();
  std::filesystem::remove_all(dir);
  Tensor x, y, tx, ty;
  test::blobs(1000, 2, 4, 1, &x, &y);
  test::blobs(300, 2, 4, 2, &tx, &ty);
  Estimator est(
      DNNOptions{.hidden_units = {8}, .n_classes = 2, .optimizer = ops::Optimizer::sgd(0.05)}
          .model_fn(Task::kClassifier),
      quiet(dir));
  auto train = input::arrays({{"x", x}, {"y", y}}, "y",
                             {.batch_size = 50, .num_epochs = 30, .shuffle = true, .seed = 1});
  auto test = input::arrays({{"x", tx}, {"y", ty}}, "y", {.batch_size = 100});
  ExperimentOptions o;
  o.eval_every_steps = 20;
  o.early_stopping_rounds = 3;
  o.early_stopping_metric = "loss";
  o.min_delta = 0.01;
  o.reduce_lr_patience = 1;
  o.export_strategy = "best";
  o.keep_best_checkpoints = 2;
  Experiment exp(est, *train, {{"test", *test}, {"train", *train}}, o);
  auto report = exp.train_and_evaluate();
  REQUIRE_MESSAGE(report.ok(), report.status().to_string());
  CHECK(report->history.size() >= 2);
  CHECK(report->history[0].first == 20);
  CHECK(report->final_by_set.size() == 2);
  CHECK(report->final_metrics.at("accuracy") > 0.95);
  CHECK(report->stopped_early);
  CHECK(report->global_step < 600);
  // The best weights were put back: the final loss is the best one seen.
  CHECK(report->final_metrics.at("loss") == doctest::Approx(report->best_value).epsilon(1e-4));
  CHECK(est.variables().read("learning_rate")->scalar_as_double() < 0.05);
  REQUIRE(!report->exports.empty());
  CHECK(std::filesystem::exists(report->exports.back() + "/graph.capnp"));
  CHECK(std::filesystem::exists(report->exports.back() + "/variables/variables.ckpt"));
  CHECK(std::filesystem::exists(dir + "/eval_test"));
  runtime::CheckpointManager m(dir);
  REQUIRE(m.best().size() == 2);
  auto best = runtime::read_checkpoint(m.best()[0]);
  REQUIRE(best.ok());
  // Best by the raw metric (early stopping's best also needs min_delta of improvement).
  double lowest = 1e9;
  int64_t lowest_step = 0;
  for (const auto& [step, metrics] : report->history) {
    if (metrics.at("loss") < lowest) {
      lowest = metrics.at("loss");
      lowest_step = step;
    }
  }
  CHECK(best->global_step == lowest_step);
  CHECK(best->metrics.at("loss") == doctest::Approx(lowest));
  std::filesystem::remove_all(dir);
}

TEST_CASE("Experiment::request_stop ends training gracefully: checkpoint, evaluation, report") {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("troupe_stop_" + std::to_string(::getpid())))
          .string();
  std::filesystem::remove_all(dir);
  Tensor x, y;
  test::blobs(1000, 2, 4, 3, &x, &y);
  Estimator est(
      DNNOptions{.hidden_units = {8}, .n_classes = 2, .optimizer = ops::Optimizer::adagrad(0.05)}
          .model_fn(Task::kClassifier),
      quiet(dir));
  auto train = input::arrays({{"x", x}, {"y", y}}, "y", {.batch_size = 50, .num_epochs = 100});
  auto test = input::arrays({{"x", x}, {"y", y}}, "y", {.batch_size = 500});
  // Asks for the stop from inside training, as a signal handler's thread would from outside.
  class StopAt : public SessionRunHook {
   public:
    explicit StopAt(int64_t step) : step_(step) {}
    runtime::Status after_run(StepContext& c) override {
      if (c.global_step == step_) experiment->request_stop();
      // The loop runs at most two steps ahead of this hook: slow steps after the request, so
      // that the stop's trip through the actors takes a few steps however loaded the machine.
      if (c.global_step >= step_) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      return runtime::ok_status();
    }
    Experiment* experiment = nullptr;
    int64_t step_;
  };
  auto stopper = std::make_shared<StopAt>(130);
  ExperimentOptions o;
  o.eval_every_steps = 100;
  o.train_hooks = {stopper};
  Experiment exp(est, *train, {{"test", *test}}, o);
  stopper->experiment = &exp;
  auto report = exp.train_and_evaluate();
  REQUIRE_MESSAGE(report.ok(), report.status().to_string());
  CHECK(report->stopped);
  CHECK(report->global_step >= 130);
  // Stopped inside the round (which would end at 200), a few steps after the request: the
  // steps started while the stop travelled through the Experiment and Estimator actors.
  CHECK(report->global_step < 200);
  CHECK(report->history.size() == 2);
  CHECK(report->final_metrics.at("global_step") == report->global_step);
  CHECK(report->final_metrics.at("accuracy") > 0.9);
  runtime::CheckpointManager m(dir);
  CHECK(m.latest() == dir + "/model.ckpt-" + std::to_string(report->global_step));

  // train() alone goes on to train_steps; evaluate() alone reports every set.
  o.train_steps = report->global_step + 20;
  o.train_hooks.clear();
  Experiment more(est, *train, {{"test", *test}, {"again", *test}}, o);
  auto trained = more.train();
  REQUIRE_MESSAGE(trained.ok(), trained.status().to_string());
  CHECK(trained->global_step == o.train_steps);
  auto evals = more.evaluate();
  REQUIRE(evals.ok());
  REQUIRE(evals->size() == 2);
  CHECK((*evals)[1].first == "again");
  CHECK((*evals)[1].second.at("global_step") == o.train_steps);
  std::filesystem::remove_all(dir);
}

TEST_CASE("Experiment::continuous_eval evaluates the checkpoints a trainer leaves") {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("troupe_ceval_" + std::to_string(::getpid())))
          .string();
  std::filesystem::remove_all(dir);
  Tensor x, y;
  test::blobs(400, 2, 4, 3, &x, &y);
  auto data = input::arrays({{"x", x}, {"y", y}}, "y", {.batch_size = 40, .num_epochs = 3});
  const ModelFn model =
      DNNOptions{.hidden_units = {4}, .n_classes = 2, .optimizer = ops::Optimizer::adam(0.05)}
          .model_fn(Task::kClassifier);
  {
    Estimator trainer(model, quiet(dir));
    REQUIRE(trainer.train(*data).ok());
  }
  Estimator evaluator(model, quiet(dir));
  Experiment exp(evaluator, *data, {{"held_out", *data}});
  auto evals = exp.continuous_eval(/*last_step=*/30, /*poll_secs=*/0.05, /*timeout_secs=*/5);
  REQUIRE_MESSAGE(evals.ok(), evals.status().to_string());
  REQUIRE(evals->size() == 1);
  CHECK((*evals)[0].first == 30);
  CHECK((*evals)[0].second.at("accuracy") > 0.9);
  std::filesystem::remove_all(dir);
}

TEST_CASE("Experiment: an evaluation that fails in the machinery is restarted, not the schedule") {
  Tensor x, y;
  test::blobs(600, 2, 4, 5, &x, &y);
  Estimator est(
      DNNOptions{.hidden_units = {8}, .n_classes = 2, .optimizer = ops::Optimizer::sgd(0.05)}
          .model_fn(Task::kClassifier),
      quiet());
  auto train = input::arrays({{"x", x}, {"y", y}}, "y", {.batch_size = 50, .num_epochs = 4});
  auto test = input::arrays({{"x", x}, {"y", y}}, "y", {.batch_size = 100});
  // Fails like an unreachable peer at the second step of the last evaluation, once.
  class FlakyEval : public SessionRunHook {
   public:
    runtime::Status after_create_session(HookContext&) override {
      ++starts;
      return runtime::ok_status();
    }
    runtime::Status after_run(StepContext&) override {
      if (++steps == 14 && !failed) {
        failed = true;
        return runtime::unavailable("the evaluator's shard went away");
      }
      return runtime::ok_status();
    }
    int starts = 0, steps = 0;
    bool failed = false;
  };
  auto flaky = std::make_shared<FlakyEval>();
  ExperimentOptions o;
  o.eval_every_steps = 16;
  o.train_steps = 48;
  o.eval_hooks = {flaky};
  Experiment exp(est, *train, {{"test", *test}}, o);
  auto report = exp.train_and_evaluate();
  REQUIRE_MESSAGE(report.ok(), report.status().to_string());
  CHECK(flaky->failed);
  CHECK(report->history.size() == 3);  // 48 steps: after 16, 32 and 48
  // The last evaluation started twice: its hooks heard after_create_session once more.
  CHECK(flaky->starts == 4);
  // The restarted evaluation counted each example once: it equals a fresh one of that model.
  auto again = est.evaluate(*test);
  REQUIRE(again.ok());
  CHECK(report->final_metrics.at("loss") == again->at("loss"));
  CHECK(report->final_metrics.at("accuracy") == again->at("accuracy"));
}
