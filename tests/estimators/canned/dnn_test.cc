// DNNClassifier through scikit-learn's calls, batch normalization.
#include "estimators/canned/dnn.h"

#include <doctest/doctest.h>

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <thread>

#include <filesystem>
#include <random>

#include "estimators/canned/test_data.h"
#include "estimators/experiment.h"
#include "harness/temp_dir.h"
#include "runtime/checkpoint.h"
#include "runtime/record_io.h"

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

TEST_CASE("a DNN saved with its kernel in 3 parts restores and trains on in 1 or 2") {
  // 784 x 256 floats: 784 KB, three parts of at least kMinSliceBytes.
  const std::string dir = troupe::testing::temp_dir("partitions");
  Tensor x, y;
  test::blobs(96, 3, 784, 7, &x, &y);
  auto options = [](int parts) {
    return DNNOptions{.hidden_units = {256},
                      .n_classes = 3,
                      .optimizer = ops::Optimizer::adam(0.01),
                      .partitions = parts,
                      .fit = {.batch_size = 32, .epochs = 2}};
  };
  DNNClassifier three(options(3), quiet(dir));
  REQUIRE(three.fit(x, y).ok());
  auto names = three.estimator().get_variable_names();
  CHECK(std::count(names.begin(), names.end(), "dnn/hiddenlayer_0/kernel/part_2") == 1);
  auto predict = [&](DNNClassifier& m) {
    auto p = m.estimator().predict_batches(
        *input::arrays({{"x", x}, {"y", y}}, "y", {.batch_size = 96}));
    REQUIRE_MESSAGE(p.ok(), p.status().to_string());
    return p->at(0).at("probabilities").to_vector<float>();
  };
  const std::vector<float> before = predict(three);
  for (int parts : {1, 2}) {
    CAPTURE(parts);
    DNNClassifier other(options(parts), quiet(dir));
    CHECK(predict(other) == before);
  }
  // Training goes on in 2 parts from the 3-part checkpoint, Adam's slots included.
  DNNClassifier two(options(2), quiet(dir));
  auto d = input::arrays({{"x", x}, {"y", y}}, "y", {.batch_size = 32, .num_epochs = 1});
  REQUIRE(two.estimator().train(*d).ok());
  CHECK(two.estimator().global_step() == 6 + 3);
  DNNClassifier one(options(1), quiet(dir));
  CHECK(predict(one) == predict(two));
  std::filesystem::remove_all(dir);
}

namespace {

// The learning_rate scalars of the event files in `dir`: step -> value. A scalar event is
// Event { wall_time (1), step (2, varint), summary (5) { value (1) { tag (1),
// simple_value (2, float) } } }.
std::map<int64_t, float> learning_rates(const std::string& dir) {
  std::map<int64_t, float> out;
  for (auto& f : std::filesystem::directory_iterator(dir)) {
    if (f.path().filename().string().rfind("events.out.tfevents.", 0) != 0) continue;
    std::string bytes;
    REQUIRE(runtime::read_file(f.path().string(), &bytes).ok());
    runtime::RecordReader r(bytes.data(), bytes.size(), f.path().string());
    std::string_view rec;
    while (*r.next(&rec)) {
      const std::string tag = "\x0a\x0dlearning_rate\x15";
      const size_t at = rec.find(tag);
      if (at == std::string_view::npos || rec.size() < 11 || rec[9] != 0x10) continue;
      int64_t step = 0;
      for (size_t i = 10, shift = 0; i < rec.size(); ++i, shift += 7) {
        step |= int64_t(rec[i] & 0x7f) << shift;
        if (!(rec[i] & 0x80)) break;
      }
      float v;
      std::memcpy(&v, rec.data() + at + tag.size(), 4);
      out[step] = v;
    }
  }
  return out;
}

}  // namespace

TEST_CASE("DNNClassifier: a cosine schedule with warm-up, step by step in TensorBoard") {
  Tensor x, y;
  test::blobs(320, 2, 4, 1, &x, &y);
  const std::string dir = testing::temp_dir("cosine");
  RunConfig config = quiet(dir);
  config.save_summary_steps = 1;
  DNNClassifier clf({.hidden_units = {8},
                     .n_classes = 2,
                     .optimizer = ops::Optimizer::adam(0.01),
                     .fit = {.batch_size = 32, .epochs = 3}},
                    config);
  REQUIRE(clf.set_params({{"lr_schedule", std::string("cosine")},
                          {"decay_steps", int64_t{16}},
                          {"warmup_steps", int64_t{4}}})
              .ok());
  CHECK(std::get<std::string>(clf.get_params().at("lr_schedule")) == "cosine");
  auto r = clf.fit(x, y);
  REQUIRE_MESSAGE(r.ok(), r.to_string());
  const std::map<int64_t, float> lr = learning_rates(dir);
  REQUIRE(lr.size() >= 25);
  // The rate of the step that ended at global step g ran at step g - 1.
  for (const auto& [g, value] : lr) {
    const double s = static_cast<double>(g - 1);
    const double warm = std::min(1.0, (s + 1) / 4);
    const double done = std::min(std::max(s - 4, 0.0), 16.0) / 16;
    CAPTURE(g);
    CHECK(value == doctest::Approx(0.01 * warm * 0.5 * (1 + std::cos(M_PI * done))).epsilon(1e-4));
  }
  CHECK(lr.at(1) == doctest::Approx(0.0025));
  CHECK(lr.at(30) == doctest::Approx(0).epsilon(1e-6));
  // A schedule that cannot run is refused where it is set, naming the param.
  CHECK(clf.set_params({{"lr_schedule", std::string("cosine")}, {"decay_steps", int64_t{0}}})
            .message()
            .find("decay_steps") != std::string::npos);
  CHECK(clf.set_params({{"lr_schedule", std::string("linear")}}).message().find("lr_schedule") !=
        std::string::npos);
}
