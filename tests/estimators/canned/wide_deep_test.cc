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

TEST_CASE("wide & deep with its embedding and linear weights in parts trains as whole, restores") {
  // An embedding of 40000 ids x 8 (1.25 MB) and crossed weights of 300000 (1.2 MB): three parts
  // each at partitions = 3, as over three ps tasks. Each part gathers its own rows.
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("troupe_wide_deep_parts_" + std::to_string(::getpid())))
                              .string();
  std::filesystem::remove_all(dir);
  auto options = [](int parts) {
    return DNNLinearCombinedOptions{
        .linear_feature_columns = {crossed_column({"a", "b"}, {}, 300000)},
        .dnn_feature_columns = {numeric_column("x"),
                                embedding_column(categorical_column_with_hash_bucket("a", 40000),
                                                 8)},
        .dnn_hidden_units = {16, 8},
        .dnn_optimizer = ops::Optimizer::adam(0.01),
        .partitions = parts};
  };
  const auto train = banded(1000, 1);
  const auto test = banded(500, 2);
  auto fit = [&](DNNLinearCombinedClassifier& m) {
    auto fitted = m.fit(*input::arrays(train, "label", {.batch_size = 50, .num_epochs = 4}));
    REQUIRE_MESSAGE(fitted.ok(), fitted.status().to_string());
  };
  auto predict = [&](DNNLinearCombinedClassifier& m) {
    auto p = m.estimator().predict_batches(*input::arrays(test, "label", {.batch_size = 500}));
    REQUIRE_MESSAGE(p.ok(), p.status().to_string());
    return p->at(0).at("probabilities").to_vector<float>();
  };
  DNNLinearCombinedClassifier three(options(3), test::quiet(dir));
  fit(three);
  auto names = three.estimator().get_variable_names();
  for (const char* part : {"input_layer/a_embedding/embedding_weights/part_2",
                           "linear/linear_model/a_X_b/weights/part_2",
                           "linear/linear_model/a_X_b/weights/part_2/Ftrl_accum"}) {
    CHECK_MESSAGE(std::count(names.begin(), names.end(), part) == 1, part);
  }
  const std::vector<float> parted = predict(three);
  // The 3-part checkpoint restores into 1 or 2 parts.
  for (int parts : {1, 2}) {
    CAPTURE(parts);
    DNNLinearCombinedClassifier other(options(parts), test::quiet(dir));
    CHECK(predict(other) == parted);
  }
  // From there, training on in 3 parts and in one piece, on the same batches, goes alike: each
  // part's gathers and sparse updates are the whole table's, row for row.
  const std::string copy = dir + "_whole";
  std::filesystem::remove_all(copy);
  std::filesystem::copy(dir, copy, std::filesystem::copy_options::recursive);
  DNNLinearCombinedClassifier whole(options(1), test::quiet(copy));
  auto more = [&](DNNLinearCombinedClassifier& m) {
    auto d = input::arrays(train, "label", {.batch_size = 50, .num_epochs = 2});
    REQUIRE(m.estimator().train(*d).ok());
  };
  more(three);
  more(whole);
  const std::vector<float> after = predict(three), one = predict(whole);
  REQUIRE(one.size() == after.size());
  int moved = 0;
  for (size_t i = 0; i < one.size(); ++i) {
    CHECK(one[i] == doctest::Approx(after[i]).epsilon(1e-4));
    moved += std::abs(after[i] - parted[i]) > 1e-3f;
  }
  CHECK(moved > 100);  // the two epochs did train
  std::filesystem::remove_all(copy);
  std::filesystem::remove_all(dir);
}
