// RNNClassifier and RNNRegressor: tasks only the order of a sequence decides, trained through
// the while loops of their recurrent layers on the actor runtime.
#include "estimators/canned/rnn.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <type_traits>

#include "estimators/canned/test_data.h"

using namespace troupe;
using namespace troupe::estimators;
using runtime::Shape;
using runtime::Tensor;

using test::quiet;

namespace {

// n sequences of 8 numbers; labels: whether the first exceeds the last (an order a bag of the
// numbers cannot tell), and their weighted sum (1 x0 + 2 x1 + ... + 8 x7) / 8.
struct Sequences {
  Tensor x, larger_end, weighted_sum;
};

Sequences sequences(int64_t n, uint64_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> xs(n * 8), sums(n, 0);
  std::generate(xs.begin(), xs.end(), [&] { return g(rng); });
  std::vector<int64_t> ends(n);
  for (int64_t i = 0; i < n; ++i) {
    const float* row = &xs[i * 8];
    ends[i] = row[0] > row[7];
    for (int t = 0; t < 8; ++t) sums[i] += (t + 1) * row[t] / 8;
  }
  return {Tensor::from_vector<float>(Shape{n, 8}, xs), Tensor::from_vector<int64_t>(Shape{n}, ends),
          Tensor::from_vector<float>(Shape{n}, sums)};
}

// Fitted on 1024 sequences, the score on 256 others: accuracy, or R^2 of the weighted sum.
template <class Model>
double held_out_score(Model& model) {
  const bool classes = std::is_same_v<Model, RNNClassifier>;
  Sequences train = sequences(1024, 1), test = sequences(256, 2);
  auto r = model.fit(train.x, classes ? train.larger_end : train.weighted_sum);
  REQUIRE_MESSAGE(r.ok(), r.to_string());
  auto score = model.score(test.x, classes ? test.larger_end : test.weighted_sum);
  REQUIRE(score.ok());
  return *score;
}

}  // namespace

TEST_CASE("RNNClassifier: an LSTM tells which end of a sequence is larger") {
  RNNClassifier clf({.num_units = {16},
                     .time_steps = 8,
                     .optimizer = ops::Optimizer::adam(0.02),
                     .fit = {.batch_size = 32, .epochs = 6}},
                    quiet());
  CHECK(held_out_score(clf) > 0.9);
  CHECK(std::get<std::string>(clf.get_params().at("cell_type")) == "lstm");
  CHECK(std::get<int64_t>(clf.get_params().at("time_steps")) == 8);
}

TEST_CASE("RNNRegressor: stacked GRU layers fit a weighted sum of a sequence") {
  RNNRegressor reg({.num_units = {16, 8},
                    .cell_type = "gru",
                    .optimizer = ops::Optimizer::adam(0.01),
                    .fit = {.batch_size = 32, .epochs = 8}},
                   quiet());
  CHECK(held_out_score(reg) > 0.9);  // R^2
}

TEST_CASE("RNNClassifier: a bidirectional GRU layer tells which end is larger too") {
  RNNClassifier clf({.num_units = {8},
                     .cell_type = "gru",
                     .bidirectional = true,
                     .time_steps = 8,
                     .optimizer = ops::Optimizer::adam(0.02),
                     .fit = {.batch_size = 32, .epochs = 6}},
                    quiet());
  CHECK(held_out_score(clf) > 0.9);
  CHECK(std::get<bool>(clf.get_params().at("bidirectional")));
  // Both directions' variables, named as their scopes say.
  CHECK(clf.estimator().get_variable_value("rnn/layer_0/fw/gru_cell/gates/kernel").ok());
  CHECK(clf.estimator().get_variable_value("rnn/layer_0/bw/gru_cell/gates/kernel").ok());
  auto logits = clf.estimator().get_variable_value("rnn/logits/kernel");
  REQUIRE(logits.ok());
  CHECK(logits->shape() == Shape{16, 2});  // h of both directions
}

TEST_CASE("RNN params are checked where they are set, and against the data when it comes") {
  Sequences data = sequences(64, 5);
  RNNClassifier clf({.time_steps = 3}, quiet());
  auto r = clf.fit(data.x, data.larger_end);
  REQUIRE_FALSE(r.ok());
  CHECK(r.message().find("time_steps: 8 numbers an example do not split into 3 steps") !=
        std::string::npos);
  CHECK(clf.set_params({{"cell_type", std::string("rnn")}}).message().find("cell_type") !=
        std::string::npos);
  CHECK(clf.set_params({{"num_units", std::vector<int64_t>{8, 0}}}).message().find("num_units") !=
        std::string::npos);
}

namespace {

// n sequences of 2 to 10 tokens in [0, 10), padded with -1 to 10; label: whether the last
// token is larger than the first. The last is at each example's own length: a model that read
// the padding, or only the first steps, could not tell.
std::vector<std::pair<std::string, Tensor>> token_sequences(int64_t n, uint64_t seed) {
  std::mt19937 rng(seed);
  std::vector<int64_t> tokens(n * 10, -1), labels(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t length = 2 + static_cast<int64_t>(rng() % 9);
    for (int64_t t = 0; t < length; ++t) tokens[i * 10 + t] = static_cast<int64_t>(rng() % 10);
    labels[i] = tokens[i * 10 + length - 1] > tokens[i * 10];
  }
  return {{"tokens", Tensor::from_vector<int64_t>(Shape{n, 10}, tokens)},
          {"label", Tensor::from_vector<int64_t>(Shape{n}, labels)}};
}

}  // namespace

TEST_CASE("RNNClassifier over a sequence column: sequences of any length, through an embedding") {
  const auto tokens = embedding_column(sequence_categorical_column_with_identity("tokens", 10), 8);
  RNNClassifier clf({.num_units = {16},
                     .optimizer = ops::Optimizer::adam(0.02),
                     .feature_columns = {tokens},
                     .fit = {.batch_size = 32, .epochs = 1}},
                    quiet());
  auto train = input::arrays(token_sequences(2048, 1), "label",
                             {.batch_size = 32, .num_epochs = 12, .shuffle = true});
  REQUIRE(train.ok());
  auto fitted = clf.fit(*train);
  REQUIRE_MESSAGE(fitted.ok(), fitted.status().to_string());
  auto m = clf.evaluate(*input::arrays(token_sequences(512, 2), "label", {.batch_size = 128}));
  REQUIRE_MESSAGE(m.ok(), m.status().to_string());
  CHECK(m->at("accuracy") > 0.9);
  CHECK(clf.estimator()
            .get_variable_value("sequence_input_layer/tokens_embedding/embedding_weights")
            .ok());

  // Sequence columns give their own steps.
  RNNClassifier both({.time_steps = 5, .feature_columns = {tokens}}, quiet());
  CHECK(both.fit(*train).status().message().find("sequence columns give their own steps") !=
        std::string::npos);
}

TEST_CASE("RNNClassifier: a context feature beside a sequence column reaches every step") {
  // The label flips where "flip" is 1: neither the sequence nor the flag alone tells it.
  auto flipped = [](int64_t n, uint64_t seed) {
    auto columns = token_sequences(n, seed);
    std::mt19937 rng(seed + 10);
    Tensor flip(runtime::DType::kFloat32, Shape{n});
    Tensor& label = columns[1].second;
    for (int64_t i = 0; i < n; ++i) {
      flip.data<float>()[i] = static_cast<float>(rng() % 2);
      if (flip.data<float>()[i] > 0) label.data<int64_t>()[i] = 1 - label.data<int64_t>()[i];
    }
    columns.push_back({"flip", flip});
    return columns;
  };
  RNNClassifier clf(
      {.num_units = {16},
       .optimizer = ops::Optimizer::adam(0.02),
       .feature_columns = {embedding_column(sequence_categorical_column_with_identity("tokens", 10),
                                            8),
                           numeric_column("flip")},
       .fit = {.batch_size = 32, .epochs = 1}},
      quiet());
  auto fitted = clf.fit(*input::arrays(flipped(2048, 3), "label",
                                       {.batch_size = 32, .num_epochs = 12, .shuffle = true}));
  REQUIRE_MESSAGE(fitted.ok(), fitted.status().to_string());
  auto m = clf.evaluate(*input::arrays(flipped(512, 4), "label", {.batch_size = 128}));
  REQUIRE_MESSAGE(m.ok(), m.status().to_string());
  CHECK(m->at("accuracy") > 0.9);
}
