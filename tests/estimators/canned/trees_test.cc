// Boosted trees and random forests learn axis-aligned problems a linear model cannot (XOR of
// two thresholds, a step function), rank the features that matter first, stop by themselves
// once grown, restore and export from their model_dir, and refuse bad options by name.
#include "estimators/canned/trees.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <random>

#include "estimators/canned/test_data.h"
#include "estimators/export/predictor.h"

using namespace troupe;
using namespace troupe::estimators;
using runtime::Shape;
using runtime::Tensor;

namespace {

// x uniform in [0, 1]^3; class (x0 > 0.5) != (x1 > 0.3) (x2 is noise), value 3 [x0 > 0.5] +
// 2 [x1 > 0.3] - x2 / 10.
void axis_problem(int64_t n, uint64_t seed, Tensor* x, Tensor* classes, Tensor* values) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> xs(n * 3), vs(n);
  std::vector<int64_t> cs(n);
  for (int64_t i = 0; i < n; ++i) {
    for (int k = 0; k < 3; ++k) xs[i * 3 + k] = u(rng);
    const bool a = xs[i * 3] > 0.5f, b = xs[i * 3 + 1] > 0.3f;
    cs[i] = a != b;
    vs[i] = 3.0f * a + 2.0f * b - xs[i * 3 + 2] / 10;
  }
  *x = Tensor::from_vector(Shape{n, 3}, xs);
  *classes = Tensor::from_vector(Shape{n}, cs);
  *values = Tensor::from_vector(Shape{n}, vs);
}

std::string temp_dir(const char* name) {
  return (std::filesystem::temp_directory_path() /
          (std::string(name) + "_" + std::to_string(::getpid())))
      .string();
}

}  // namespace

TEST_CASE("boosted trees classify XOR of thresholds and know which features matter") {
  Tensor x, y, v, xt, yt, vt;
  axis_problem(2000, 1, &x, &y, &v);
  axis_problem(1000, 2, &xt, &yt, &vt);
  BoostedTreesClassifier gbt({.n_trees = 20, .max_depth = 3}, test::quiet());
  const runtime::Status fitted = gbt.fit(x, y);
  REQUIRE_MESSAGE(fitted.ok(), fitted.to_string());
  CHECK(*gbt.score(xt, yt) >= 0.97);
  // 20 rounds of one tree (the second class's logit against 0, as XGBoost's binary:logistic)
  // and one bias step: training stopped once they were grown.
  auto step = gbt.estimator().get_variable_value("global_step");
  REQUIRE(step.ok());
  CHECK(step->data<int64_t>()[0] <= 1 + 20 + 4);
  auto ensemble = gbt.estimator().get_variable_value("boosted_trees/ensemble");
  REQUIRE(ensemble.ok());
  CHECK(ensemble->dim(0) == 20);
  auto importance = tree_feature_importances(gbt.estimator());
  REQUIRE(importance.ok());
  REQUIRE(importance->size() == 3);
  CHECK((*importance)[0] + (*importance)[1] > 0.9);
  CHECK((*importance)[2] < 0.1);
  auto proba = gbt.predict_proba(xt);
  REQUIRE(proba.ok());
  CHECK(proba->shape() == Shape{1000, 2});
  auto classes = gbt.predict(xt);
  REQUIRE(classes.ok());
  for (int64_t i = 0; i < 1000; ++i) {
    const float* p = proba->data<float>() + 2 * i;
    CHECK(p[0] + p[1] == doctest::Approx(1));
    CHECK(classes->data<int64_t>()[i] == (p[1] > p[0] ? 1 : 0));
  }
}

TEST_CASE("boosted trees regress a step function, save, restore and export") {
  const std::string dir = temp_dir("troupe_gbt");
  std::filesystem::remove_all(dir);
  Tensor x, y, v, xt, yt, vt;
  axis_problem(2000, 3, &x, &y, &v);
  axis_problem(500, 4, &xt, &yt, &vt);
  BoostedTreesRegressor gbt({.n_trees = 50, .max_depth = 2}, test::quiet(dir));
  REQUIRE(gbt.fit(x, v).ok());
  const double r2 = *gbt.score(xt, vt);
  CHECK(r2 > 0.97);
  auto before = gbt.predict(xt);
  REQUIRE(before.ok());
  BoostedTreesRegressor restored({.n_trees = 50, .max_depth = 2}, test::quiet(dir));
  auto after = restored.predict(xt);
  REQUIRE(after.ok());
  for (int64_t i = 0; i < 500; ++i) CHECK(after->data<float>()[i] == before->data<float>()[i]);
  // The export serves the same values (the trees are ops of the served graph).
  auto exported = gbt.estimator().export_saved_model(dir + "/export");
  REQUIRE_MESSAGE(exported.ok(), exported.status().to_string());
  auto served = serving::load(*exported);
  REQUIRE_MESSAGE(served.ok(), served.status().to_string());
  auto out = (*served)->predict({{"x", xt}});
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  CHECK(out->at("predictions").to_vector<float>() == before->to_vector<float>());
  std::filesystem::remove_all(dir);
}

TEST_CASE("boosted trees: three classes, weighed by class") {
  Tensor x, y;
  test::blobs(900, 3, 2, 5, &x, &y);
  BoostedTreesClassifier gbt(
      {.n_classes = 3, .n_trees = 10, .max_depth = 2, .head = {.class_weights = {1, 1, 2}}},
      test::quiet());
  REQUIRE(gbt.fit(x, y).ok());
  CHECK(*gbt.score(x, y) > 0.95);
}

TEST_CASE("a random forest classifies XOR of thresholds and regresses a step function") {
  Tensor x, y, v, xt, yt, vt;
  axis_problem(2000, 5, &x, &y, &v);
  axis_problem(1000, 6, &xt, &yt, &vt);
  RandomForestClassifier forest({.n_trees = 20, .max_features = 2}, test::quiet());
  const runtime::Status fitted = forest.fit(x, y);
  REQUIRE_MESSAGE(fitted.ok(), fitted.to_string());
  CHECK(*forest.score(xt, yt) >= 0.97);
  auto proba = forest.predict_proba(xt);
  REQUIRE(proba.ok());
  for (int64_t i = 0; i < 10; ++i) {
    CHECK(proba->data<float>()[2 * i] + proba->data<float>()[2 * i + 1] == doctest::Approx(1));
  }
  auto importance = tree_feature_importances(forest.estimator());
  REQUIRE(importance.ok());
  CHECK((*importance)[2] < 0.2);

  RandomForestRegressor values({.n_trees = 20, .max_features = 3}, test::quiet());
  REQUIRE(values.fit(x, v).ok());
  CHECK(*values.score(xt, vt) > 0.97);
}

TEST_CASE("tree models refuse bad options and labels by name") {
  Tensor x, y, v;
  axis_problem(100, 7, &x, &y, &v);
  BoostedTreesClassifier deep({.max_depth = 40}, test::quiet());
  CHECK(deep.fit(x, y).message().find("max_depth") != std::string::npos);
  RandomForestClassifier bins({.max_bins = 300}, test::quiet());
  CHECK(bins.fit(x, y).message().find("max_bins") != std::string::npos);
  RandomForestClassifier embedded(
      {.feature_columns = {embedding_column(categorical_column_with_identity("x", 3), 2)}},
      test::quiet());
  CHECK(embedded.fit(x, y).message().find("embedding") != std::string::npos);
  BoostedTreesClassifier labels({}, test::quiet());
  Tensor bad = Tensor::from_vector(Shape{100}, std::vector<int64_t>(100, 4));
  const std::string message = labels.fit(x, bad).message();
  CHECK(message.find("label 4 of row 0") != std::string::npos);
  BoostedTreesRegressor rounds({}, test::quiet());
  CHECK(rounds.set_params({{"n_trees", int64_t{0}}}).message().find("n_trees") !=
        std::string::npos);
}
