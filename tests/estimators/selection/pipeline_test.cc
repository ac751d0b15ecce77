// StandardScaler and PCA against hand-computed values, and a Pipeline that predicts what its
// steps applied by hand predict, with step__param params that model selection can search.
#include "estimators/selection/pipeline.h"

#include <doctest/doctest.h>

#include <cmath>

#include "estimators/canned/linear.h"
#include "estimators/canned/test_data.h"
#include "estimators/selection/model_selection.h"

using namespace troupe;
using namespace troupe::estimators;
using runtime::Shape;
using runtime::Tensor;

TEST_CASE("StandardScaler: the training data's mean and population std, per column") {
  const Tensor x = Tensor::from_vector(Shape{4, 2}, std::vector<float>{1, 5, 2, 5, 3, 5, 4, 5});
  StandardScaler scaler;
  CHECK(scaler.transform(x).status().message().find("before fit") != std::string::npos);
  REQUIRE(scaler.fit(x).ok());
  CHECK(scaler.mean() == std::vector<double>{2.5, 5});
  CHECK(scaler.scale()[0] == doctest::Approx(std::sqrt(1.25)));
  CHECK(scaler.scale()[1] == 1);  // a constant column is only centred
  auto t = scaler.transform(x);
  REQUIRE(t.ok());
  CHECK(t->data<float>()[0] == doctest::Approx(-1.5 / std::sqrt(1.25)));
  CHECK(t->data<float>()[1] == 0);
  CHECK(scaler.transform(Tensor::from_vector(Shape{1, 3}, std::vector<float>{1, 2, 3}))
            .status()
            .message() == "StandardScaler: x has 3 columns; it was fitted on 2");
  REQUIRE(scaler.set_params({{"with_mean", false}}).ok());
  CHECK(scaler.transform(x)->data<float>()[1] == 5);
}

TEST_CASE("PCA: the direction of largest variance, its variance, whitening") {
  // Points on the line y = x with a little spread across it: the first component is the
  // diagonal, with variance var(t) * 2 of the t along it.
  std::vector<float> xs;
  const float ts[] = {-2, -1, 0, 1, 2};
  for (float t : ts) {
    for (float e : {-0.1f, 0.1f}) {
      xs.push_back(t + e);
      xs.push_back(t - e);
    }
  }
  const Tensor x = Tensor::from_vector(Shape{10, 2}, xs);
  PCA pca({.n_components = 1});
  REQUIRE(pca.fit(x).ok());
  CHECK(pca.components()[0][0] == doctest::Approx(std::sqrt(0.5)));
  CHECK(pca.components()[0][1] == doctest::Approx(std::sqrt(0.5)));
  // sum over points of ((x + y) / sqrt 2)^2 / (n - 1) = 2 * (2 * 10) / 9.
  CHECK(pca.explained_variance()[0] == doctest::Approx(40.0 / 9));
  auto t = pca.transform(x);
  REQUIRE(t.ok());
  CHECK(t->shape() == Shape{10, 1});
  CHECK(t->data<float>()[0] == doctest::Approx(-4 / std::sqrt(2.0)).epsilon(1e-5));
  PCA white({.n_components = 2, .whiten = true});
  REQUIRE(white.fit(x).ok());
  auto w = white.transform(x);
  double var = 0;
  for (int i = 0; i < 10; ++i) var += w->data<float>()[i * 2] * w->data<float>()[i * 2] / 9.0;
  CHECK(var == doctest::Approx(1).epsilon(1e-4));
  CHECK(PCA({.n_components = 3}).fit(x).message().find("n_components 3") != std::string::npos);
  CHECK(pca.set_params({{"n_components", int64_t{0}}}).message().find("n_components") !=
        std::string::npos);
}

TEST_CASE("a Pipeline predicts what its steps applied by hand predict") {
  Tensor x, y, tx, ty;
  test::blobs(400, 3, 6, 1, &x, &y);
  test::blobs(100, 3, 6, 2, &tx, &ty);
  const LinearOptions lo{.n_classes = 3, .fit = {.batch_size = 50, .epochs = 5}};
  Pipeline pipe;
  pipe.add("scaler", std::make_unique<StandardScaler>())
      .add("pca", std::make_unique<PCA>(PCAOptions{.n_components = 3}))
      .set_model("clf", std::make_unique<LinearClassifier>(lo, test::quiet()));
  REQUIRE(pipe.fit(x, y).ok());
  auto piped = pipe.predict(tx);
  REQUIRE(piped.ok());

  StandardScaler scaler;
  PCA pca({.n_components = 3});
  LinearClassifier clf(lo, test::quiet());
  REQUIRE(scaler.fit(x).ok());
  const Tensor xs = *scaler.transform(x);
  REQUIRE(pca.fit(xs).ok());
  REQUIRE(clf.fit(*pca.transform(xs), y).ok());
  auto by_hand = clf.predict(*pca.transform(*scaler.transform(tx)));
  REQUIRE(by_hand.ok());
  CHECK(piped->to_vector<int64_t>() == by_hand->to_vector<int64_t>());
  CHECK(*pipe.score(tx, ty) > 0.95);

  const ParamMap p = pipe.get_params();
  CHECK(std::get<int64_t>(p.at("pca__n_components")) == 3);
  CHECK(std::get<int64_t>(p.at("clf__n_classes")) == 3);
  CHECK(p.count("scaler__with_std") == 1);
  CHECK(pipe.is_classifier());
  // Bad names and values change nothing.
  CHECK(pipe.set_params({{"pca__n_components", int64_t{2}}, {"clf__depth", int64_t{1}}})
            .message()
            .find("no parameter 'depth'") != std::string::npos);
  CHECK(std::get<int64_t>(pipe.get_params().at("pca__n_components")) == 3);
  CHECK(pipe.set_params({{"svm__l2", 0.1}}).message() == "Pipeline has no step 'svm'");
  CHECK(pipe.set_params({{"l2", 0.1}}).message().find("not step__param") != std::string::npos);

  // The searches fit the whole pipeline on each fold's train rows.
  GridSearchCV search(pipe, {{{"clf__l1", {1e4, 0.0}}, {"pca__n_components", {int64_t{2}}}}},
                      {.cv = {.n_splits = 3}});
  REQUIRE(search.fit(x, y).ok());
  CHECK(std::get<double>(search.best_params().at("clf__l1")) == 0.0);
  CHECK(
      std::get<int64_t>(
          static_cast<Pipeline*>(search.best_estimator())->get_params().at("pca__n_components")) ==
      2);
}
