// KMeans finds well separated blobs (adjusted Rand index 1), its centers where the blobs are,
// restores from its model_dir, and the adjusted Rand index matches hand-computed values.
#include "estimators/canned/kmeans.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "estimators/canned/test_data.h"
#include "estimators/metrics.h"
#include "estimators/selection/model_selection.h"

using namespace troupe;
using namespace troupe::estimators;
using runtime::Shape;
using runtime::Tensor;

TEST_CASE("adjusted_rand_score against hand-computed values") {
  auto t = [](std::vector<int64_t> v) {
    return Tensor::from_vector(Shape{static_cast<int64_t>(v.size())}, v);
  };
  // GCC 12 with AVX-512 built the second list here as {1, 1, 1, 1} (CMakeLists.txt).
  CHECK(*adjusted_rand_score(t({0, 0, 1, 1}), t({1, 1, 0, 0})) == 1.0);
  CHECK(as_doubles(t({0, 0, 1, 1})) == std::vector<double>{0, 0, 1, 1});
  CHECK(*adjusted_rand_score(t({0, 0, 1, 1}), t({0, 1, 0, 1})) == doctest::Approx(-0.5));
  // Cells 2, 1, 3: sum C(n_ij, 2) = 4; rows 3, 3: 6; columns 2, 4: 7; C(6, 2) = 15:
  // (4 - 6 * 7 / 15) / ((6 + 7) / 2 - 6 * 7 / 15).
  CHECK(*adjusted_rand_score(t({0, 0, 0, 1, 1, 1}), t({0, 0, 1, 1, 1, 1})) ==
        doctest::Approx((4 - 2.8) / (6.5 - 2.8)));
  CHECK(!adjusted_rand_score(t({0, 1}), t({0})).ok());
}

TEST_CASE("KMeans finds blobs, scores by inertia, restores from its model_dir") {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("troupe_kmeans_" + std::to_string(::getpid())))
          .string();
  std::filesystem::remove_all(dir);
  Tensor x, y;
  test::blobs(600, 3, 2, 1, &x, &y);
  KMeans km({.n_clusters = 3, .fit = {.batch_size = 64, .epochs = 5}}, test::quiet(dir));
  CHECK(km.predict(x).status().message().find("no trained model") != std::string::npos);
  const runtime::Status fitted = km.fit(x, {});
  REQUIRE_MESSAGE(fitted.ok(), fitted.to_string());
  auto ids = km.predict(x);
  REQUIRE(ids.ok());
  CHECK(*adjusted_rand_score(y, *ids) == 1.0);
  // The blobs' centres lie at -2, 2 and 6 on the diagonal.
  auto centers = km.cluster_centers();
  REQUIRE(centers.ok());
  CHECK(centers->shape() == Shape{3, 2});
  std::vector<float> along;
  for (int c = 0; c < 3; ++c) along.push_back(centers->data<float>()[c * 2]);
  std::sort(along.begin(), along.end());
  CHECK(along[0] == doctest::Approx(-2).epsilon(0.1));
  CHECK(along[1] == doctest::Approx(2).epsilon(0.1));
  CHECK(along[2] == doctest::Approx(6).epsilon(0.1));
  // Inertia: about n * dims * the blobs' variance of 1.
  auto inertia = km.inertia(x);
  REQUIRE(inertia.ok());
  CHECK(*inertia == doctest::Approx(600 * 2).epsilon(0.15));
  CHECK(*km.score(x, {}) == -*inertia);
  auto d = km.transform(x);
  REQUIRE(d.ok());
  CHECK(d->shape() == Shape{600, 3});

  KMeans restored({.n_clusters = 3}, test::quiet(dir));
  auto again = restored.predict(x);
  REQUIRE(again.ok());
  CHECK(again->to_vector<int64_t>() == ids->to_vector<int64_t>());
  std::filesystem::remove_all(dir);

  CHECK(KMeans({.n_clusters = 700}).fit(x, {}).message().find("600 examples for n_clusters 700") !=
        std::string::npos);
  CHECK(km.set_params({{"init", "kmeans"}}).message().find("init") != std::string::npos);
  // A search over k by cross-validated inertia prefers more clusters (its score is -inertia).
  GridSearchCV search(km, {{{"n_clusters", {int64_t{1}, int64_t{3}}}}}, {.cv = {.n_splits = 3}});
  const runtime::Status searched = search.fit(x, y);
  REQUIRE_MESSAGE(searched.ok(), searched.to_string());
  CHECK(std::get<int64_t>(search.best_params().at("n_clusters")) == 3);
}
