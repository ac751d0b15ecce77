// RNNClassifier and RNNRegressor: tasks only the order of a sequence decides, trained through
// the while loops of their recurrent layers on the actor runtime.
#include "estimators/canned/rnn.h"

#include <doctest/doctest.h>

#include <random>

#include "estimators/canned/test_data.h"

using namespace troupe;
using namespace troupe::estimators;
using runtime::Shape;
using runtime::Tensor;

using test::quiet;

namespace {

// n sequences of 8 numbers; the label: whether the first exceeds the last (an order a bag of
// the numbers cannot tell), and their weighted sum 1*x0 + 2*x1 + ... for regression.
void sequences(int64_t n, uint64_t seed, Tensor* x, Tensor* classes, Tensor* sums) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> xs(n * 8), s(n);
  std::vector<int64_t> ys(n);
  for (int64_t i = 0; i < n; ++i) {
    for (int t = 0; t < 8; ++t) {
      xs[i * 8 + t] = g(rng);
      s[i] += (t + 1) * xs[i * 8 + t] / 8;
    }
    ys[i] = xs[i * 8] > xs[i * 8 + 7];
  }
  *x = Tensor::from_vector<float>(Shape{n, 8}, xs);
  *classes = Tensor::from_vector<int64_t>(Shape{n}, ys);
  *sums = Tensor::from_vector<float>(Shape{n}, s);
}

}  // namespace

TEST_CASE("RNNClassifier: an LSTM tells which end of a sequence is larger") {
  Tensor x, y, s, tx, ty, ts;
  sequences(1024, 1, &x, &y, &s);
  sequences(256, 2, &tx, &ty, &ts);
  RNNClassifier clf({.num_units = {16},
                     .time_steps = 8,
                     .optimizer = ops::Optimizer::adam(0.02),
                     .fit = {.batch_size = 32, .epochs = 6}},
                    quiet());
  auto r = clf.fit(x, y);
  REQUIRE_MESSAGE(r.ok(), r.to_string());
  auto score = clf.score(tx, ty);
  REQUIRE(score.ok());
  CHECK(*score > 0.9);
  CHECK(std::get<std::string>(clf.get_params().at("cell_type")) == "lstm");
  CHECK(std::get<int64_t>(clf.get_params().at("time_steps")) == 8);
}

TEST_CASE("RNNRegressor: stacked GRU layers fit a weighted sum of a sequence") {
  Tensor x, y, s, tx, ty, ts;
  sequences(1024, 3, &x, &y, &s);
  sequences(256, 4, &tx, &ty, &ts);
  RNNRegressor reg({.num_units = {16, 8},
                    .cell_type = "gru",
                    .optimizer = ops::Optimizer::adam(0.01),
                    .fit = {.batch_size = 32, .epochs = 8}},
                   quiet());
  auto r = reg.fit(x, s);
  REQUIRE_MESSAGE(r.ok(), r.to_string());
  auto score = reg.score(tx, ts);  // R^2
  REQUIRE(score.ok());
  CHECK(*score > 0.9);
}

TEST_CASE("RNN params are checked where they are set, and against the data when it comes") {
  Tensor x, y, s;
  sequences(64, 5, &x, &y, &s);
  RNNClassifier clf({.time_steps = 3}, quiet());
  auto r = clf.fit(x, y);
  REQUIRE_FALSE(r.ok());
  CHECK(r.message().find("time_steps: 8 numbers an example do not split into 3 steps") !=
        std::string::npos);
  CHECK(clf.set_params({{"cell_type", std::string("rnn")}}).message().find("cell_type") !=
        std::string::npos);
  CHECK(clf.set_params({{"num_units", std::vector<int64_t>{8, 0}}}).message().find("num_units") !=
        std::string::npos);
}
