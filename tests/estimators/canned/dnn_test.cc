// DNNClassifier through scikit-learn's calls, and an Experiment with evaluation every N steps,
// early stopping, learning-rate reduction on a plateau and exports.
#include "estimators/canned/dnn.h"

#include <doctest/doctest.h>

#include <unistd.h>
#include <chrono>
#include <thread>

#include <filesystem>
#include <random>

#include "estimators/canned/test_data.h"
#include "estimators/experiment.h"
#include "runtime/checkpoint.h"

using namespace troupe;
using namespace troupe::estimators;
using runtime::Shape;
using runtime::Tensor;

using test::quiet;

TEST_CASE("DNNClassifier: fit, predict, predict_proba, score, params") {
  Tensor x, y, tx, ty;
  test::blobs(800, 2, 4, 1, &x, &y);
  test::blobs(200, 2, 4, 2, &tx, &ty);
  DNNClassifier clf({.hidden_units = {16, 8},
                     .n_classes = 2,
                     .optimizer = ops::Optimizer::adam(0.01),
                     .fit = {.batch_size = 32, .epochs = 5}},
                    quiet());
  auto r = clf.fit(x, y);
  REQUIRE_MESSAGE(r.ok(), r.to_string());
  auto score = clf.score(tx, ty);
  REQUIRE(score.ok());
  CHECK(*score > 0.95);
  auto proba = clf.predict_proba(tx);
  REQUIRE(proba.ok());
  CHECK(proba->shape() == Shape{200, 2});
  CHECK(proba->data<float>()[0] + proba->data<float>()[1] == doctest::Approx(1));
  CHECK(clf.predict(tx)->shape() == Shape{200});
  auto d = input::arrays({{"x", tx}, {"y", ty}}, "y", {.batch_size = 50});
  auto m = clf.evaluate(*d);
  REQUIRE(m.ok());
  CHECK(m->at("accuracy") == doctest::Approx(*score));
  CHECK(m->at("auc") > 0.95);
  CHECK(m->count("precision") == 1);
  // Params are typed, and each is checked where it is set.
  CHECK(std::get<std::vector<int64_t>>(clf.get_params().at("hidden_units")) ==
        std::vector<int64_t>{16, 8});
  CHECK(std::get<std::string>(clf.get_params().at("optimizer")) == "adam");
  CHECK(std::get<double>(clf.get_params().at("learning_rate")) == 0.01);
  CHECK(clf.set_params({{"dropout", 0.2}}).ok());
  CHECK(clf.options().dropout == 0.2);
  CHECK(clf.set_params({{"dropout", 2.0}}).message().find("dropout") != std::string::npos);
  CHECK(clf.options().dropout == 0.2);
  CHECK(clf.set_params({{"depth", int64_t{2}}}).message().find("no parameter 'depth'") !=
        std::string::npos);
  CHECK(clf.set_params({{"optimizer", "adamw"}}).message().find("optimizer") != std::string::npos);
  CHECK(clf.set_params({{"optimizer", "sgd"}}).ok());
  CHECK(clf.options().optimizer.kind == ops::Optimizer::Kind::kSgd);
  CHECK(clf.options().optimizer.learning_rate == 0.01);  // kept across the change of kind
  CHECK(clf.set_params_text({{"hidden_units", "32,4"}, {"learning_rate", "0.3"}}).ok());
  CHECK(clf.options().hidden_units == std::vector<int64_t>{32, 4});
  CHECK(clf.set_params_text({{"learning_rate", "fast"}}).message().find("'fast'") !=
        std::string::npos);
  // A clone has the params and no model.
  std::unique_ptr<Model> copy = clf.clone();
  CHECK(to_text(copy->get_params()) == to_text(clf.get_params()));
  CHECK(!copy->predict(tx).ok());
}

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

TEST_CASE("DNN with batch normalization: learns, moves its averages, predicts by them") {
  // Blobs scaled by 1000, the scale batch normalization takes out.
  Tensor x, y;
  test::blobs(800, 2, 4, 21, &x, &y);
  for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] *= 1000.0f;
  DNNClassifier clf({.hidden_units = {16, 8},
                     .batch_norm = true,
                     .optimizer = ops::Optimizer::adam(0.01),
                     .fit = {.batch_size = 32, .epochs = 10}},
                    quiet());
  CHECK(to_text(clf.get_params()).at("batch_norm") == "true");
  REQUIRE(clf.fit(x, y).ok());
  CHECK(*clf.score(x, y) > 0.97);
  // The classes sit symmetrically about 0, so the pre-activations' variance is what moves.
  auto moving =
      clf.estimator().get_variable_value("dnn/hiddenlayer_0/batch_normalization/moving_variance");
  REQUIRE(moving.ok());
  CHECK(moving->data<float>()[0] > 100.0f);
  // Prediction normalizes by the moving averages, not the batch: one example alone gets what
  // it gets among all.
  auto all = clf.predict_proba(x);
  auto one = clf.predict_proba(runtime::slice_rows(x, 5, 1));
  REQUIRE(all.ok());
  REQUIRE(one.ok());
  CHECK(one->data<float>()[0] == doctest::Approx(all->data<float>()[10]));
}
