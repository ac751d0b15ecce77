// Wide & deep: a problem each part solves only half of, learned by the two together; params by
// name; a restored model predicts as the trained one.
#include "estimators/canned/wide_deep.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <random>

#include "estimators/canned/test_data.h"

using namespace troupe;
using namespace troupe::estimators;
using runtime::Shape;
using runtime::Tensor;

namespace {

// label = f(a, b) + g(x) > 0, with f = +1 when the texts a and b agree, else -1, and g = +2
// for |x| < 0.5, -2 for |x| > 1.5, 0 between; x uniform in (-2, 2). The wide part sees only the
// cross of a and b, the deep part only x: each can be right on at most 3/4 of the examples
// (the band it cannot see is a coin toss for it), together they are always right.
std::vector<std::pair<std::string, Tensor>> banded(int64_t n, uint64_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<std::string> a(n), b(n);
  std::vector<float> x(n);
  std::vector<int64_t> y(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = rng() % 2 ? "p" : "q";
    b[i] = rng() % 2 ? "p" : "q";
    x[i] = u(rng);
    const float g = std::abs(x[i]) < 0.5f ? 2.0f : std::abs(x[i]) > 1.5f ? -2.0f : 0.0f;
    y[i] = (a[i] == b[i] ? 1.0f : -1.0f) + g > 0;
  }
  return {{"a", Tensor::from_vector<std::string>(Shape{n}, a)},
          {"b", Tensor::from_vector<std::string>(Shape{n}, b)},
          {"x", Tensor::from_vector(Shape{n}, x)},
          {"label", Tensor::from_vector(Shape{n}, y)}};
}

}  // namespace

TEST_CASE("wide & deep learns what neither part can alone, and restores") {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("troupe_wide_deep_" + std::to_string(::getpid())))
          .string();
  std::filesystem::remove_all(dir);
  const DNNLinearCombinedOptions options{
      .linear_feature_columns = {crossed_column({"a", "b"}, {}, 64)},
      .dnn_feature_columns = {numeric_column("x")},
      .dnn_hidden_units = {16, 8},
      .dnn_optimizer = ops::Optimizer::adam(0.01)};
  DNNLinearCombinedClassifier m(options, test::quiet(dir));
  CHECK(m.get_params().count("dnn_hidden_units") == 1);
  CHECK(m.get_params().count("linear_learning_rate") == 1);
  const auto train = banded(2000, 1);
  auto fitted = m.fit(*input::arrays(
      train, "label", {.batch_size = 50, .num_epochs = 15, .shuffle = true, .seed = 3}));
  REQUIRE_MESSAGE(fitted.ok(), fitted.status().to_string());
  const auto test = banded(1000, 2);
  auto metrics = m.evaluate(*input::arrays(test, "label", {.batch_size = 500}));
  REQUIRE(metrics.ok());
  CHECK(metrics->at("accuracy") > 0.95);
  // Each part has its own variables and optimizer slots: FTRL's for the cross, Adam's for x.
  CHECK(m.estimator().get_variable_value("linear/linear_model/a_X_b/weights/Ftrl_accum").ok());
  CHECK(m.estimator().get_variable_value("dnn/hiddenlayer_0/kernel/Adam_m").ok());
  CHECK_FALSE(m.estimator().get_variable_value("dnn/hiddenlayer_0/kernel/Ftrl_accum").ok());

  auto predict = [&](DNNLinearCombinedClassifier& model) {
    auto p = model.estimator().predict_batches(*input::arrays(test, "label", {.batch_size = 1000}));
    REQUIRE_MESSAGE(p.ok(), p.status().to_string());
    return p->at(0).at("probabilities").to_vector<float>();
  };
  DNNLinearCombinedClassifier restored(options, test::quiet(dir));
  CHECK(predict(restored) == predict(m));
  std::filesystem::remove_all(dir);

  DNNLinearCombinedClassifier empty({}, test::quiet());
  auto refused = empty.fit(*input::arrays(train, "label"));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("linear_feature_columns") != std::string::npos);
}
