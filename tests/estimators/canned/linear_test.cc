// The linear models learn what a linear model must: separable classes, a line's coefficients,
// sparse weights under L1; and refuse labels and params that do not fit.
#include "estimators/canned/linear.h"

#include <doctest/doctest.h>

#include <cmath>

#include "estimators/canned/test_data.h"

using namespace troupe;
using namespace troupe::estimators;
using runtime::Shape;
using runtime::Tensor;
using test::blobs;
using test::line;
using test::quiet;

TEST_CASE("LinearClassifier separates blobs, two classes and three, with FTRL as TF") {
  for (int64_t classes : {2, 3}) {
    Tensor x, y, tx, ty;
    blobs(600, classes, 2, 1, &x, &y);
    blobs(300, classes, 2, 2, &tx, &ty);
    LinearClassifier clf({.n_classes = classes}, quiet());
    REQUIRE(clf.fit(x, y).ok());
    auto accuracy = clf.score(tx, ty);
    REQUIRE(accuracy.ok());
    CHECK(*accuracy > 0.97);
    auto proba = clf.predict_proba(tx);
    REQUIRE(proba.ok());
    CHECK(proba->shape() == Shape{300, classes});
  }
}

TEST_CASE("LinearRegressor finds a line's coefficients; R^2 is its score") {
  Tensor x, y, tx, ty;
  line(2000, {2.0f, -3.0f}, 1.0f, 0.01f, 1, &x, &y);
  line(200, {2.0f, -3.0f}, 1.0f, 0.01f, 2, &tx, &ty);
  LinearRegressor reg({.optimizer = ops::Optimizer::adam(0.05), .fit = {.batch_size = 32}},
                      quiet());
  REQUIRE(reg.fit(x, y).ok());
  auto w = reg.estimator().get_variable_value("linear/linear_model/x/weights");
  auto b = reg.estimator().get_variable_value("linear/linear_model/bias_weights");
  REQUIRE(w.ok());
  REQUIRE(b.ok());
  CHECK(w->data<float>()[0] == doctest::Approx(2.0).epsilon(0.02));
  CHECK(w->data<float>()[1] == doctest::Approx(-3.0).epsilon(0.02));
  CHECK(b->data<float>()[0] == doctest::Approx(1.0).epsilon(0.02));
  auto r2 = reg.score(tx, ty);
  REQUIRE(r2.ok());
  CHECK(*r2 > 0.999);
  auto predicted = reg.predict(tx);
  REQUIRE(predicted.ok());
  CHECK(predicted->shape() == Shape{200});
  auto metrics = reg.evaluate(*input::arrays({{"x", tx}, {"y", ty}}, "y", {.batch_size = 50}));
  REQUIRE(metrics.ok());
  CHECK(metrics->at("rmse") < 0.05);
  CHECK(metrics->at("mae") < 0.05);
}

TEST_CASE("a regressor's target statistics put its outputs where the data is") {
  // A target around 1000 with a spread of 50: from zero weights, FTRL's default steps would
  // take far longer than its step budget to get there.
  Tensor x, y;
  line(500, {50.0f}, 1000.0f, 1.0f, 8, &x, &y);
  auto data = input::arrays({{"x", x}, {"y", y}}, "y", {.batch_size = 500});
  REQUIRE(data.ok());
  auto stats = standardization(*data, {data->label});
  REQUIRE(stats.ok());
  REQUIRE(stats->count("y") == 1);
  CHECK(stats->at("y").mean[0] == doctest::Approx(1000).epsilon(0.01));
  LinearRegressor plain({}, quiet());
  REQUIRE(plain.fit(x, y).ok());
  LinearRegressor scaled({.standardize = *stats, .standardize_label = stats->at("y")}, quiet());
  REQUIRE(scaled.fit(x, y).ok());
  CHECK(*plain.score(x, y) < 0.5);
  CHECK(*scaled.score(x, y) > 0.99);
  CHECK(scaled.estimator().get_variable_value("head/label_mean").ok());
  CHECK(scaled.estimator().get_variable_value("input_layer/x/mean").ok());
}

TEST_CASE("hinge and epsilon-insensitive losses: a linear SVM and SVR") {
  Tensor x, y, tx, ty;
  blobs(600, 2, 3, 3, &x, &y);
  blobs(200, 2, 3, 4, &tx, &ty);
  LinearClassifier svm({.loss = "hinge", .optimizer = ops::Optimizer::sgd(0.05), .l2 = 1e-3},
                       quiet());
  REQUIRE(svm.fit(x, y).ok());
  CHECK(*svm.score(tx, ty) > 0.97);
  CHECK(svm.predict_proba(tx).status().message().find("probabilities") != std::string::npos);
  // Three classes on a line: the middle one lies between the others, which one-vs-rest hinge
  // losses cannot separate; the multi-class hinge does.
  blobs(600, 3, 2, 5, &x, &y);
  blobs(300, 3, 2, 6, &tx, &ty);
  LinearClassifier svm3({.n_classes = 3, .loss = "hinge"}, quiet());
  REQUIRE(svm3.fit(x, y).ok());
  CHECK(*svm3.score(tx, ty) > 0.95);

  Tensor lx, ly;
  line(1000, {1.5f}, -0.5f, 0.0f, 5, &lx, &ly);
  LinearRegressor svr({.loss = "epsilon_insensitive",
                       .epsilon = 0.01,
                       .optimizer = ops::Optimizer::adam(0.05),
                       .fit = {.batch_size = 32}},
                      quiet());
  REQUIRE(svr.fit(lx, ly).ok());
  CHECK(*svr.score(lx, ly) > 0.99);
}

TEST_CASE("L1 with FTRL zeroes the weights of features that carry nothing") {
  // Two informative columns and six of noise.
  Tensor x2, y;
  blobs(1000, 2, 2, 7, &x2, &y);
  std::mt19937 rng(9);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> xs(1000 * 8);
  for (int64_t i = 0; i < 1000; ++i) {
    for (int k = 0; k < 8; ++k) xs[i * 8 + k] = k < 2 ? x2.data<float>()[i * 2 + k] : g(rng);
  }
  const Tensor x = Tensor::from_vector(Shape{1000, 8}, xs);
  LinearClassifier sparse({.l1 = 20.0}, quiet());
  REQUIRE(sparse.fit(x, y).ok());
  CHECK(*sparse.score(x, y) > 0.97);
  auto w = sparse.estimator().get_variable_value("linear/linear_model/x/weights");
  REQUIRE(w.ok());
  int zero_noise = 0;
  for (int k = 2; k < 8; ++k) {
    zero_noise += w->data<float>()[k * 2] == 0 && w->data<float>()[k * 2 + 1] == 0;
  }
  CHECK(zero_noise == 6);
  CHECK(w->data<float>()[0] != 0);
}

TEST_CASE("linear models refuse labels and params that do not fit, naming them") {
  Tensor x, y;
  blobs(20, 3, 2, 1, &x, &y);
  LinearClassifier binary({.n_classes = 2}, quiet());
  const runtime::Status s = binary.fit(x, y);
  CHECK(s.message().find("label 2 of row 2") != std::string::npos);
  CHECK(binary.fit(x, runtime::slice_rows(y, 0, 10)).message().find("20 examples but 10 labels") !=
        std::string::npos);
  LinearRegressor reg({}, quiet());
  CHECK(reg.set_params({{"loss", "hinge"}}).message().find("loss") != std::string::npos);
  CHECK(reg.set_params({{"n_classes", int64_t{3}}}).message().find("no parameter 'n_classes'") !=
        std::string::npos);
  CHECK(reg.set_params({{"l2", -1.0}}).message().find("l2") != std::string::npos);
  CHECK(reg.get_params().count("epsilon") == 1);
  CHECK(binary.get_params().count("epsilon") == 0);
}

TEST_CASE("a multi-label classifier says yes or no to each class of an example") {
  // Three labels of a point in the plane: x0 > 0, x1 > 0, x0 + x1 > 0; any number may hold.
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> xs(1000 * 2);
  std::vector<int64_t> ys(1000 * 3);
  for (int i = 0; i < 1000; ++i) {
    const float a = u(rng), b = u(rng);
    xs[i * 2] = a;
    xs[i * 2 + 1] = b;
    ys[i * 3] = a > 0;
    ys[i * 3 + 1] = b > 0;
    ys[i * 3 + 2] = a + b > 0;
  }
  auto data = input::arrays({{"x", Tensor::from_vector(Shape{1000, 2}, xs)},
                             {"label", Tensor::from_vector(Shape{1000, 3}, ys)}},
                            "label", {.batch_size = 50, .num_epochs = 30});
  LinearClassifier m({.n_classes = 3, .head = {.multi_label = true}}, quiet());
  auto fitted = m.fit(*data);
  REQUIRE_MESSAGE(fitted.ok(), fitted.status().to_string());
  data->options.num_epochs = 1;
  auto metrics = m.evaluate(*data);
  REQUIRE(metrics.ok());
  CHECK(metrics->at("accuracy") > 0.97);
  CHECK(metrics->at("auc") > 0.99);
  auto p = m.estimator().predict_batches(*input::arrays(
      {{"x", Tensor::from_vector<float>(Shape{2, 2}, {0.9f, 0.8f, -0.9f, 0.5f})}}, ""));
  REQUIRE(p.ok());
  CHECK(p->at(0).at("classes").to_vector<int64_t>() == std::vector<int64_t>{1, 1, 1, 0, 1, 0});
  CHECK_FALSE(
      LinearClassifier({.n_classes = 3, .loss = "hinge", .head = {.multi_label = true}}, quiet())
          .fit(*data)
          .ok());
}
