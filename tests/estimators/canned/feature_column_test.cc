// Feature columns: input_layer and linear_model outputs against hand-computed values, sparse
// training of a million hash buckets, an interaction only a crossed column captures, models over
// mixed columns that save, restore and export, and errors that name the column.
#include "estimators/canned/feature_column.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <numeric>
#include <random>
#include <set>

#include "estimators/canned/dnn.h"
#include "estimators/canned/linear.h"
#include "estimators/canned/test_data.h"
#include "estimators/export/batcher.h"
#include "estimators/export/predictor.h"
#include "harness/op_harness.h"
#include "ops/state_ops.h"
#include "runtime/fingerprint.h"
#include "runtime/record_io.h"

using namespace troupe;
using namespace troupe::estimators;
using namespace troupe::runtime;
using testing::OpTest;

namespace {

Tensor strings(const Shape& s, const std::vector<std::string>& v) {
  return Tensor::from_vector<std::string>(s, v);
}

// Runs input_layer (or linear_model) of `columns` over `features` once, after initializing.
struct LayerTest {
  OpTest t;
  Params params;
  RunConfig config;
  ModelInputs in{t.b, {}, Output{}, Mode::kPredict, params, config};

  explicit LayerTest(const std::vector<std::pair<std::string, Tensor>>& features) {
    for (const auto& [name, value] : features) in.features[name] = t.feed(value);
  }
  Tensor eval(Output out) {
    int init = ops::global_variables_initializer(t.b);
    REQUIRE_MESSAGE(t.b.ok(), t.b.status().to_string());
    REQUIRE(t.run({}, {init}).ok());
    auto r = t.run({out});
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    return (*r)[0];
  }
};

std::vector<float> floats(const Tensor& t) { return t.to_vector<float>(); }

// Examples of two text features a, b in {x, y} and a label that is 1 when they agree: an
// interaction no weight per value can express.
std::vector<std::pair<std::string, Tensor>> agreement(int64_t n, uint64_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::string> a(n), b(n);
  std::vector<int64_t> y(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = rng() % 2 ? "x" : "y";
    b[i] = rng() % 2 ? "x" : "y";
    y[i] = a[i] == b[i];
  }
  return {{"a", strings(Shape{n}, a)},
          {"b", strings(Shape{n}, b)},
          {"label", Tensor::from_vector(Shape{n}, y)}};
}

double accuracy(CannedModel<LinearOptions, Task::kClassifier>& m,
                const std::vector<std::pair<std::string, Tensor>>& data) {
  auto r = m.evaluate(*input::arrays(data, "label", {.batch_size = 256}));
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  return r->at("accuracy");
}

struct TempDir {
  std::string path =
      (std::filesystem::temp_directory_path() / ("troupe_columns_" + std::to_string(::getpid())))
          .string();
  TempDir() { std::filesystem::remove_all(path); }
  ~TempDir() { std::filesystem::remove_all(path); }
};

}  // namespace

TEST_CASE("input_layer: numeric, bucketized, indicator and weighted columns by hand") {
  LayerTest l({{"age", Tensor::from_vector<float>(Shape{4}, {10, 20, 30, 70})},
               {"color",
                strings(Shape{4, 2}, {"red", "blue", "red", "red", "green", "blue", "dog", "red"})},
               {"w", Tensor::from_vector<float>(Shape{4, 2}, {1, 2, 3, 4, 5, 6, 7, 8})}});
  const auto age = numeric_column("age", 1, {{30}, {10}});
  const auto color = categorical_column_with_vocabulary_list("color", {"red", "green", "blue"}, 1);
  int64_t width = 0;
  auto x =
      input_layer(l.in,
                  // As TF, a bucketized column cuts its source's normalized values.
                  {age, bucketized_column(numeric_column("age"), {18, 35}), indicator_column(color),
                   indicator_column(weighted_categorical_column(color, "w"))},
                  &width);
  REQUIRE_MESSAGE(x.ok(), x.status().to_string());
  CHECK(width == 1 + 3 + 4 + 4);
  // "dog" is out of the vocabulary: its one OOV bucket, id 3.
  const std::vector<float> expected{-2, 1, 0, 0, 1, 0, 1, 0, 1, 0, 2, 0,  //
                                    -1, 0, 1, 0, 2, 0, 0, 0, 7, 0, 0, 0,  //
                                    0,  0, 1, 0, 0, 1, 1, 0, 0, 5, 6, 0,  //
                                    4,  0, 0, 1, 1, 0, 0, 1, 8, 0, 0, 7};
  const std::vector<float> got = floats(l.eval(*x));
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("row ", i / 12, " column ", i % 12);
    CHECK(got[i] == expected[i]);
  }
}

TEST_CASE("embedding columns combine the rows of their ids by sum, mean and sqrtn") {
  const Tensor ids = Tensor::from_vector<int64_t>(Shape{2, 2}, {0, 2, 1, 1});
  LayerTest l({{"sum", ids}, {"mean", ids}, {"sqrtn", ids}});
  std::vector<FeatureColumn> columns;
  for (const char* c : {"sum", "mean", "sqrtn"}) {
    columns.push_back(embedding_column(categorical_column_with_identity(c, 3), 2, c));
  }
  int64_t width = 0;
  auto x = input_layer(l.in, columns, &width);
  REQUIRE_MESSAGE(x.ok(), x.status().to_string());
  CHECK(width == 6);
  const std::vector<float> out = floats(l.eval(*x));
  int c = 0;
  for (const char* name : {"sum", "mean", "sqrtn"}) {
    auto table = l.t.vars.read(std::string("input_layer/") + name + "_embedding/embedding_weights");
    REQUIRE(table.ok());
    CHECK(table->shape() == Shape{3, 2});
    const std::vector<float> e = table->to_vector<float>();
    const double norm = c == 0 ? 1 : c == 1 ? 2 : std::sqrt(2.0);
    for (int d = 0; d < 2; ++d) {
      CHECK(out[c * 2 + d] == doctest::Approx((e[0 * 2 + d] + e[2 * 2 + d]) / norm));
      CHECK(out[6 + c * 2 + d] == doctest::Approx((e[1 * 2 + d] + e[1 * 2 + d]) / norm));
    }
    ++c;
  }
}

TEST_CASE("features of varying length, padded or sparse, count the values they have") {
  // Example 0 has tags a, b; example 1 none; example 2 c. "padded" pads with "", "sparse" is a
  // sparse tensor given as its three features; weights of each tag beside them.
  const auto sp = runtime::SparseTensor::from_rows<std::string>({{"a", "b"}, {}, {"c"}});
  const auto wsp = runtime::SparseTensor::from_rows<float>({{1, 3}, {}, {2}});
  LayerTest l({{"padded", strings(Shape{3, 3}, {"a", "b", "", "", "", "", "c", "", ""})},
               {"w", Tensor::from_vector<float>(Shape{3, 3}, {1, 3, 9, 9, 9, 9, 2, 9, 9})},
               {"sparse/indices", sp.indices},
               {"sparse/values", sp.values},
               {"sparse/dense_shape", sp.dense_shape},
               {"ws/indices", wsp.indices},
               {"ws/values", wsp.values},
               {"ws/dense_shape", wsp.dense_shape}});
  const std::vector<std::string> vocab{"a", "b", "c"};
  const auto padded = categorical_column_with_vocabulary_list("padded", vocab);
  const auto sparse = categorical_column_with_vocabulary_list("sparse", vocab);
  int64_t width = 0;
  auto x = input_layer(l.in,
                       {embedding_column(padded, 2, "mean"), embedding_column(sparse, 2, "mean"),
                        indicator_column(padded), indicator_column(sparse),
                        indicator_column(weighted_categorical_column(padded, "w")),
                        indicator_column(weighted_categorical_column(sparse, "ws"))},
                       &width);
  REQUIRE_MESSAGE(x.ok(), x.status().to_string());
  CHECK(width == 2 + 2 + 3 * 4);
  const std::vector<float> out = floats(l.eval(*x));
  for (const char* key : {"padded", "sparse"}) {
    INFO(key);
    const int at = std::string(key) == "padded" ? 0 : 2;
    auto table = l.t.vars.read(std::string("input_layer/") + key + "_embedding/embedding_weights");
    REQUIRE(table.ok());
    const std::vector<float> e = table->to_vector<float>();
    for (int d = 0; d < 2; ++d) {
      CHECK(out[at + d] == doctest::Approx((e[0 + d] + e[2 + d]) / 2));  // mean of a and b
      CHECK(out[16 + at + d] == 0);                                      // no tags: zeros
      CHECK(out[32 + at + d] == doctest::Approx(e[4 + d]));              // c alone
    }
  }
  const std::vector<float> indicators{1, 1, 0, 1, 1, 0, 1, 3, 0, 1, 3, 0,  //
                                      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  //
                                      0, 0, 1, 0, 0, 1, 0, 0, 2, 0, 0, 2};
  for (int r = 0; r < 3; ++r) {
    for (int i = 0; i < 12; ++i) {
      INFO("row ", r, " indicator column ", i);
      CHECK(out[r * 16 + 4 + i] == indicators[r * 12 + i]);
    }
  }

  // A cross with a missing value is no cross (TF drops it too).
  LayerTest crossed({{"a", strings(Shape{2}, {"x", ""})}, {"b", strings(Shape{2}, {"y", "y"})}});
  auto hot =
      input_layer(crossed.in, {indicator_column(crossed_column({"a", "b"}, {}, 10))}, &width);
  REQUIRE_MESSAGE(hot.ok(), hot.status().to_string());
  const std::vector<float> rows = floats(crossed.eval(*hot));
  CHECK(std::accumulate(rows.begin(), rows.begin() + 10, 0.0f) == 1);
  CHECK(std::accumulate(rows.begin() + 10, rows.end(), 0.0f) == 0);

  // Integers: -1 is missing. Linear weights of ids 0..3 are 10, 20, 30, 40.
  LayerTest ints({{"n", Tensor::from_vector<int64_t>(Shape{2, 2}, {3, -1, -1, -1})}});
  auto logits = linear_model(ints.in, {categorical_column_with_identity("n", 4)}, 1);
  REQUIRE_MESSAGE(logits.ok(), logits.status().to_string());
  REQUIRE(ints.t.run({}, {ops::global_variables_initializer(ints.t.b)}).ok());
  ints.t.vars.assign("linear_model/n/weights",
                     Tensor::from_vector<float>(Shape{4, 1}, {10, 20, 30, 40}));
  auto r = ints.t.run({*logits});
  REQUIRE(r.ok());
  CHECK(floats((*r)[0]) == std::vector<float>{40, 0});

  // Dense weights cannot follow sparse ids: nothing says which weight goes with which id.
  auto mixed =
      input_layer(l.in, {indicator_column(weighted_categorical_column(sparse, "w"))}, &width);
  REQUIRE_FALSE(mixed.ok());
  CHECK(mixed.status().message().find("'w' is dense where 'sparse' is sparse") !=
        std::string::npos);
  auto other =
      input_layer(l.in, {indicator_column(weighted_categorical_column(padded, "ws"))}, &width);
  REQUIRE_FALSE(other.ok());
  CHECK(other.status().message().find("'ws' is sparse where 'padded' is dense") !=
        std::string::npos);
}

TEST_CASE("linear_model sums a weight row per id and a weight per number") {
  LayerTest l(
      {{"x", Tensor::from_vector<float>(Shape{2}, {1, 2})}, {"c", strings(Shape{2}, {"b", "a"})}});
  auto logits = linear_model(
      l.in, {numeric_column("x"), categorical_column_with_vocabulary_list("c", {"a", "b"})}, 1);
  REQUIRE_MESSAGE(logits.ok(), logits.status().to_string());
  // Weights start at zero; set them: x's to 3, c's rows to [10, 20], the bias to 0.5.
  auto set = [&](const char* name, const Tensor& v) { l.t.vars.assign(name, v); };
  int init = ops::global_variables_initializer(l.t.b);
  REQUIRE(l.t.run({}, {init}).ok());
  set("linear_model/x/weights", Tensor::from_vector<float>(Shape{1, 1}, {3}));
  set("linear_model/c/weights", Tensor::from_vector<float>(Shape{2, 1}, {10, 20}));
  set("linear_model/bias_weights", Tensor::from_vector<float>(Shape{1}, {0.5f}));
  auto r = l.t.run({*logits});
  REQUIRE(r.ok());
  CHECK(floats((*r)[0]) == std::vector<float>{3 + 20 + 0.5f, 6 + 10 + 0.5f});
}

TEST_CASE("a million hash buckets train sparsely: only the rows of seen words move") {
  // 400 examples of 8 words; the label is whether the word is in the first half.
  const std::vector<std::string> words{"ant", "bee", "cat", "dog", "eel", "fox", "gnu", "hen"};
  std::vector<std::string> w(400);
  std::vector<int64_t> y(400);
  for (int i = 0; i < 400; ++i) {
    w[i] = words[i % 8];
    y[i] = i % 8 < 4;
  }
  LinearClassifier clf({.feature_columns = {categorical_column_with_hash_bucket("word", 1000000)},
                        .fit = {.batch_size = 40, .epochs = 20}},
                       test::quiet());
  auto data = input::arrays(
      {{"word", strings(Shape{400}, w)}, {"label", Tensor::from_vector(Shape{400}, y)}}, "label",
      {.batch_size = 40, .num_epochs = 20});
  REQUIRE(data.ok());
  auto trained = clf.fit(*data);
  REQUIRE_MESSAGE(trained.ok(), trained.status().to_string());
  auto weights = clf.estimator().get_variable_value("linear/linear_model/word/weights");
  REQUIRE(weights.ok());
  REQUIRE(weights->shape() == Shape{1000000, 2});  // a logit per class
  std::set<int64_t> moved;
  for (int64_t r = 0; r < 1000000; ++r) {
    if (weights->data<float>()[2 * r] != 0 || weights->data<float>()[2 * r + 1] != 0) {
      moved.insert(r);
    }
  }
  std::set<int64_t> seen;
  for (const auto& word : words) seen.insert(runtime::fingerprint64(word) % 1000000);
  CHECK(moved == seen);
  // FTRL's accumulator of a row no word hashed to still holds its initial value.
  auto accum = clf.estimator().get_variable_value("linear/linear_model/word/weights/Ftrl_accum");
  REQUIRE_MESSAGE(accum.ok(), accum.status().to_string());
  for (int64_t r = 0; r < 1000000; r += 99991) {
    if (!seen.count(r)) CHECK(accum->data<float>()[2 * r] == doctest::Approx(0.1f));
  }
  for (int64_t r : seen) CHECK(accum->data<float>()[2 * r] > 0.1f);
  CHECK(accuracy(clf, {{"word", strings(Shape{400}, w)},
                       {"label", Tensor::from_vector(Shape{400}, y)}}) == 1.0);
}

TEST_CASE("an interaction needs a crossed column; a DNN learns it through embeddings") {
  const auto train = agreement(800, 1);
  const auto test = agreement(400, 2);
  const auto a = categorical_column_with_vocabulary_list("a", {"x", "y"});
  const auto b = categorical_column_with_vocabulary_list("b", {"x", "y"});
  const FitParams fit{.batch_size = 40, .epochs = 30};
  LinearClassifier plain({.feature_columns = {a, b}, .fit = fit}, test::quiet());
  REQUIRE(plain.fit(*input::arrays(train, "label", {.batch_size = 40, .num_epochs = 30})).ok());
  CHECK(accuracy(plain, test) < 0.7);
  LinearClassifier crossed(
      {.feature_columns = {a, b, crossed_column({"a", "b"}, {}, 100)}, .fit = fit}, test::quiet());
  REQUIRE(crossed.fit(*input::arrays(train, "label", {.batch_size = 40, .num_epochs = 30})).ok());
  CHECK(accuracy(crossed, test) == 1.0);

  DNNClassifier dnn({.hidden_units = {8},
                     .optimizer = ops::Optimizer::adam(0.05),
                     .feature_columns = {embedding_column(a, 2), indicator_column(b)}},
                    test::quiet());
  auto fitted = dnn.fit(*input::arrays(train, "label", {.batch_size = 40, .num_epochs = 30}));
  REQUIRE_MESSAGE(fitted.ok(), fitted.status().to_string());
  auto m = dnn.evaluate(*input::arrays(test, "label", {.batch_size = 400}));
  REQUIRE(m.ok());
  CHECK(m->at("accuracy") == 1.0);
}

TEST_CASE("a model over text columns restores from its model_dir and exports the same answers") {
  TempDir dir;
  const auto train = agreement(400, 3);
  const auto a = categorical_column_with_vocabulary_list("a", {"x", "y"});
  const auto b = categorical_column_with_hash_bucket("b", 50);
  const DNNOptions options{.hidden_units = {8},
                           .optimizer = ops::Optimizer::adam(0.05),
                           .feature_columns = {embedding_column(a, 3), embedding_column(b, 3)}};
  DNNClassifier first(options, test::quiet(dir.path));
  REQUIRE(first.fit(*input::arrays(train, "label", {.batch_size = 40, .num_epochs = 5})).ok());
  // TensorBoard's projector: each embedding table's rows, labelled by its vocabulary's words.
  std::string config, labels, rows;
  REQUIRE(runtime::read_file(dir.path + "/projector_config.pbtxt", &config).ok());
  CHECK(config.find("tensor_name: \"input_layer/a_embedding/embedding_weights\"\n"
                    "  tensor_path: \"projector/input_layer_a_embedding_embedding_weights.tsv"
                    "\"\n  metadata_path: \"projector/"
                    "input_layer_a_embedding_embedding_weights.metadata.tsv\"\n"
                    "  tensor_shape: 2\n  tensor_shape: 3\n") != std::string::npos);
  CHECK(config.find("b_embedding/embedding_weights\"") != std::string::npos);
  REQUIRE(
      runtime::read_file(
          dir.path + "/projector/input_layer_a_embedding_embedding_weights.metadata.tsv", &labels)
          .ok());
  CHECK(labels == "x\ny\n");
  REQUIRE(runtime::read_file(dir.path + "/projector/input_layer_a_embedding_embedding_weights.tsv",
                             &rows)
              .ok());
  CHECK(std::count(rows.begin(), rows.end(), '\n') == 2);
  CHECK(std::count(rows.begin(), rows.end(), '\t') == 4);
  auto predict = [&](DNNClassifier& m) {
    auto p = m.estimator().predict_batches(*input::arrays(train, "label", {.batch_size = 400}));
    REQUIRE_MESSAGE(p.ok(), p.status().to_string());
    return p->at(0).at("probabilities").to_vector<float>();
  };
  const std::vector<float> before = predict(first);
  DNNClassifier second(options, test::quiet(dir.path));
  CHECK(predict(second) == before);

  auto exported = first.estimator().export_saved_model(dir.path + "/export");
  REQUIRE_MESSAGE(exported.ok(), exported.status().to_string());
  auto served = serving::load(*exported);
  REQUIRE_MESSAGE(served.ok(), served.status().to_string());
  auto out = (*served)->predict({{"a", train[0].second}, {"b", train[1].second}});
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  CHECK(out->at("probabilities").to_vector<float>() == before);
}

TEST_CASE("a sparse libsvm file trains a linear model and a DNN through sparse tensors") {
  TempDir dir;
  std::filesystem::create_directories(dir.path);
  // 2000 training and 500 test examples of 3 to 8 of 500 features each; the label is the sign
  // of a hidden weighted sum.
  constexpr int64_t kFeatures = 500;
  std::mt19937 rng(5);
  std::vector<double> truth(kFeatures);
  for (double& w : truth) w = std::uniform_real_distribution<double>(-1, 1)(rng);
  auto write = [&](const std::string& path, int examples) {
    std::ofstream out(path);
    for (int i = 0; i < examples; ++i) {
      std::set<int64_t> picked;
      const int n = 3 + static_cast<int>(rng() % 6);
      while (static_cast<int>(picked.size()) < n) picked.insert(rng() % kFeatures);
      std::string line;
      double sum = 0;
      for (int64_t f : picked) {
        const double v = std::uniform_real_distribution<double>(0.5, 1.5)(rng);
        sum += truth[f] * v;
        line += " " + std::to_string(f + 1) + ":" + std::to_string(v);
      }
      out << (sum > 0 ? 1 : 0) << line << "\n";
    }
  };
  write(dir.path + "/train.svm", 2000);
  write(dir.path + "/test.svm", 500);
  const auto weighted =
      weighted_categorical_column(categorical_column_with_identity("indices", kFeatures), "values");
  auto data = [&](const char* name, int64_t epochs) {
    return *input::libsvm(dir.path + "/" + name + ".svm", {.num_features = kFeatures},
                          {.batch_size = 50, .num_epochs = epochs, .shuffle = epochs > 1});
  };

  LinearClassifier linear({.optimizer = ops::Optimizer::ftrl(0.5), .feature_columns = {weighted}},
                          test::quiet(dir.path + "/linear"));
  REQUIRE(linear.fit(data("train", 15)).ok());
  auto m = linear.evaluate(data("test", 1));
  REQUIRE_MESSAGE(m.ok(), m.status().to_string());
  CHECK(m->at("accuracy") > 0.85);
  // Exported, the model takes the sparse feature as its three parts (as TF Serving takes a
  // SparseTensor input) and answers as in memory.
  auto exported = linear.estimator().export_saved_model(dir.path + "/export");
  REQUIRE_MESSAGE(exported.ok(), exported.status().to_string());
  auto served = serving::load(*exported);
  REQUIRE_MESSAGE(served.ok(), served.status().to_string());
  actors::Runtime rt;
  auto pipeline = input::Pipeline::start(
      rt, *input::libsvm(dir.path + "/test.svm", {.num_features = kFeatures}, {.batch_size = 500}));
  REQUIRE(pipeline.ok());
  auto batch = (*pipeline)->next();
  REQUIRE(batch.ok());
  const std::vector<std::string> names = data("test", 1).batch_components();
  serving::NamedTensors inputs;
  for (size_t c = 1; c < names.size(); ++c) inputs[names[c]] = (*batch)[c];
  auto answer = (*served)->predict(inputs);
  REQUIRE_MESSAGE(answer.ok(), answer.status().to_string());
  auto in_memory = linear.estimator().predict_batches(data("test", 1));
  REQUIRE(in_memory.ok());
  REQUIRE(in_memory->size() == 10);
  const std::vector<float> served_p = answer->at("probabilities").to_vector<float>();
  REQUIRE(served_p.size() == 1000);
  const std::vector<float> first = in_memory->at(0).at("probabilities").to_vector<float>();
  for (size_t i = 0; i < first.size(); ++i) CHECK(served_p[i] == doctest::Approx(first[i]));
  // A batching server runs each sparse request alone: its parts do not concatenate by rows.
  serving::Batcher batcher(rt, std::move(*served),
                           {.max_batch_size = 2000, .batch_timeout = std::chrono::seconds(1)});
  std::promise<runtime::Result<serving::NamedTensors>> got[2];
  for (auto& g : got) {
    batcher.submit(serving::kDefaultSignature, inputs,
                   [&g](runtime::Result<serving::NamedTensors> r) { g.set_value(std::move(r)); });
  }
  for (auto& g : got) {
    auto batched = g.get_future().get();
    REQUIRE_MESSAGE(batched.ok(), batched.status().to_string());
    CHECK(batched->at("probabilities").to_vector<float>() == served_p);
  }
  CHECK(batcher.stats().batches == 2);

  DNNClassifier dnn({.hidden_units = {16},
                     .optimizer = ops::Optimizer::adam(0.01),
                     .feature_columns = {embedding_column(weighted, 8, "sum")}},
                    test::quiet(dir.path + "/dnn"));
  REQUIRE(dnn.fit(data("train", 15)).ok());
  auto d = dnn.evaluate(data("test", 1));
  REQUIRE_MESSAGE(d.ok(), d.status().to_string());
  CHECK(d->at("accuracy") > 0.8);
}

TEST_CASE("feature column errors name the column, the value and the row") {
  const auto train = agreement(40, 4);
  // "y" is not in a's vocabulary and a has no out-of-vocabulary bucket.
  LinearClassifier clf({.feature_columns = {categorical_column_with_vocabulary_list("a", {"x"})}},
                       test::quiet());
  auto r = clf.fit(*input::arrays(train, "label", {.batch_size = 40}));
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("column 'a': value 'y' in row") != std::string::npos);

  DNNClassifier raw({.feature_columns = {categorical_column_with_hash_bucket("a", 10)}},
                    test::quiet());
  auto s = raw.fit(*input::arrays(train, "label"));
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().message().find("embedding_column or indicator_column") != std::string::npos);

  LinearClassifier numeric({.feature_columns = {numeric_column("a")}}, test::quiet());
  auto t = numeric.fit(*input::arrays(train, "label"));
  REQUIRE_FALSE(t.ok());
  CHECK(t.status().message().find("feature 'a' is text") != std::string::npos);

  auto missing = categorical_column_with_vocabulary_file("a", "/nonexistent/vocab.txt");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().find("/nonexistent/vocab.txt") != std::string::npos);
  CHECK_FALSE(validate_columns({embedding_column(numeric_column("x"), 2)}, false).ok());
  CHECK_FALSE(validate_columns({crossed_column({"a"}, {}, 10)}, true).ok());
}

TEST_CASE("heads: text labels through a label vocabulary, example and class weights") {
  // x separates the classes; the labels are names.
  Tensor x, y;
  test::blobs(400, 2, 2, 11, &x, &y);
  std::vector<std::string> names;
  for (int64_t i = 0; i < 400; ++i) names.push_back(y.data<int64_t>()[i] ? "yes" : "no");
  const Tensor labels = strings(Shape{400}, names);
  LinearClassifier clf({.head = {.label_vocabulary = {"no", "yes"}}}, test::quiet());
  auto fitted = clf.fit(
      *input::arrays({{"x", x}, {"label", labels}}, "label", {.batch_size = 40, .num_epochs = 10}));
  REQUIRE_MESSAGE(fitted.ok(), fitted.status().to_string());
  auto p = clf.estimator().predict_batches(*input::arrays({{"x", x}}, "", {.batch_size = 400}));
  REQUIRE(p.ok());
  const Tensor& predicted = p->at(0).at("class_labels");
  int right = 0;
  for (int64_t i = 0; i < 400; ++i) right += predicted.data<std::string>()[i] == names[i];
  CHECK(right >= 390);
  // A name outside the vocabulary is an error naming it.
  names[7] = "maybe";
  auto bad = clf.evaluate(*input::arrays({{"x", x}, {"label", strings(Shape{400}, names)}}, "label",
                                         {.batch_size = 400}));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("column 'label': value 'maybe' in row 7") != std::string::npos);
  CHECK_FALSE(
      LinearClassifier({.n_classes = 3, .head = {.label_vocabulary = {"no", "yes"}}}, test::quiet())
          .fit(*input::arrays({{"x", x}, {"label", labels}}, "label"))
          .ok());

  // One constant feature and labels half 0, half 1: the weights alone decide the class.
  std::vector<float> ones(200, 1.0f), w(200);
  std::vector<int64_t> half(200);
  for (int i = 0; i < 200; ++i) {
    half[i] = i % 2;
    w[i] = half[i] ? 0.2f : 1.0f;
  }
  const std::vector<std::pair<std::string, Tensor>> data{
      {"x", Tensor::from_vector(Shape{200}, ones)},
      {"w", Tensor::from_vector(Shape{200}, w)},
      {"label", Tensor::from_vector(Shape{200}, half)}};
  auto predicted_class = [&](LinearOptions o) {
    o.optimizer = ops::Optimizer::sgd(0.1);
    LinearClassifier m(o, test::quiet());
    auto r = m.fit(*input::arrays(data, "label", {.batch_size = 20, .num_epochs = 20}));
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    if (!o.head.weight_column.empty()) {
      // Class 0 everywhere: right on the examples of weight 1, wrong on those of 0.2.
      auto metrics = m.evaluate(*input::arrays(data, "label", {.batch_size = 200}));
      REQUIRE(metrics.ok());
      CHECK(metrics->at("accuracy") == doctest::Approx(1.0 / 1.2));
    }
    auto out = m.estimator().predict_batches(*input::arrays(data, "label", {.batch_size = 200}));
    REQUIRE(out.ok());
    return out->at(0).at("probabilities").data<float>()[1];  // P(class 1)
  };
  // The weight column is no feature: had the model read w, it would tell the labels apart.
  CHECK(predicted_class({.head = {.weight_column = "w"}}) < 0.3f);
  CHECK(predicted_class({.feature_keys = {"x"}, .head = {.class_weights = {0.2, 1.0}}}) > 0.7f);
  CHECK(predicted_class({.feature_keys = {"x"}}) == doctest::Approx(0.5f).epsilon(0.05));
}

TEST_CASE("make_parse_example_spec: how a tf.Example holds what the columns read, as TF's") {
  auto age = numeric_column("age");
  auto spec = make_parse_example_spec(
      {age, bucketized_column(age, {18, 65}), numeric_column("pixels", 784),
       embedding_column(categorical_column_with_vocabulary_list("work", {"a", "b"}), 4),
       indicator_column(categorical_column_with_int_vocabulary_list("code", {3, 7})),
       weighted_categorical_column(categorical_column_with_identity("item", 100), "item_weight"),
       categorical_column_with_hash_bucket("city", 1000), crossed_column({"x", "y"}, {}, 10)});
  REQUIRE_MESSAGE(spec.ok(), spec.status().to_string());
  std::map<std::string, std::string> said;
  for (const auto& [name, f] : *spec) said[name] = runtime::to_string(f);
  CHECK(said == std::map<std::string, std::string>{{"age", "float32 []"},
                                                   {"pixels", "float32 [784]"},
                                                   {"work", "string varlen"},
                                                   {"code", "int64 varlen"},
                                                   {"item", "int64 varlen"},
                                                   {"item_weight", "float32 varlen"},
                                                   {"city", "string varlen"},
                                                   {"x", "string varlen"},
                                                   {"y", "string varlen"}});
  auto clash =
      make_parse_example_spec({numeric_column("age"), categorical_column_with_identity("age", 9)});
  REQUIRE_FALSE(clash.ok());
  CHECK(clash.status().message().find("feature 'age' is read as float32 [] by one column and as "
                                      "int64 varlen by another") != std::string::npos);
}

TEST_CASE("sequence columns read a step at a time: padded to the batch's longest, with lengths") {
  // Example 0 says b a c, example 1 nothing, example 2 c; sparse, and padded with "" as a dense
  // feature; readings two numbers a step, given sparse, their steps as the words'.
  const auto words = runtime::SparseTensor::from_rows<std::string>({{"b", "a", "c"}, {}, {"c"}});
  const auto readings = runtime::SparseTensor::from_rows<float>({{1, 2, 3, 4, 5, 6}, {}, {7, 8}});
  LayerTest l(
      {{"words/indices", words.indices},
       {"words/values", words.values},
       {"words/dense_shape", words.dense_shape},
       {"padded", strings(Shape{3, 4}, {"b", "a", "c", "", "", "", "", "", "c", "", "", ""})},
       {"readings/indices", readings.indices},
       {"readings/values", readings.values},
       {"readings/dense_shape", readings.dense_shape}});
  const std::vector<std::string> vocab{"a", "b", "c"};
  int64_t width = 0;
  auto seq = sequence_input_layer(
      l.in,
      {indicator_column(sequence_categorical_column_with_vocabulary_list("words", vocab)),
       sequence_numeric_column("readings", 2)},
      &width);
  REQUIRE_MESSAGE(seq.ok(), seq.status().to_string());
  CHECK(width == 3 + 2);
  const Tensor values = l.eval(seq->values);
  CHECK(values.shape() == Shape{3, 3, 5});
  CHECK(floats(values) == std::vector<float>{0, 1, 0, 1, 2,  // example 0: b
                                             1, 0, 0, 3, 4,  // a
                                             0, 0, 1, 5, 6,  // c
                                             0, 0, 0, 0, 0,  // example 1: no steps
                                             0, 0, 0, 0, 0,  //
                                             0, 0, 0, 0, 0,  //
                                             0, 0, 1, 7, 8,  // example 2: c
                                             0, 0, 0, 0, 0,  //
                                             0, 0, 0, 0, 0});
  CHECK(l.eval(seq->lengths).to_vector<int64_t>() == std::vector<int64_t>{3, 0, 1});

  // The padded dense feature reads as the sparse one; an embedding looks up each step's row.
  auto padded = sequence_input_layer(
      l.in,
      {embedding_column(sequence_categorical_column_with_vocabulary_list("padded", vocab), 2)},
      &width);
  REQUIRE_MESSAGE(padded.ok(), padded.status().to_string());
  CHECK(width == 2);
  const Tensor emb = l.eval(padded->values);
  CHECK(emb.shape() == Shape{3, 4, 2});
  // (Read before the next eval initializes the table anew.)
  auto table = l.t.vars.read("sequence_input_layer/padded_embedding/embedding_weights");
  REQUIRE(table.ok());
  const std::vector<float> rows = floats(*table), got = floats(emb);
  // Example 0's steps are rows 1, 0, 2; every step past a length is zeros.
  CHECK(std::vector<float>(got.begin(), got.begin() + 6) ==
        std::vector<float>{rows[2], rows[3], rows[0], rows[1], rows[4], rows[5]});
  CHECK(std::vector<float>(got.begin() + 6, got.begin() + 16) == std::vector<float>(10, 0));
  CHECK(std::vector<float>(got.begin() + 16, got.begin() + 18) ==
        std::vector<float>{rows[4], rows[5]});
  CHECK(l.eval(padded->lengths).to_vector<int64_t>() == std::vector<int64_t>{3, 0, 1});

  // A dense numeric feature is complete: every example has all its steps.
  LayerTest dense({{"r", Tensor::from_vector<float>(Shape{2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})}});
  auto steps = sequence_input_layer(dense.in, {sequence_numeric_column("r", 2)}, &width);
  REQUIRE_MESSAGE(steps.ok(), steps.status().to_string());
  const Tensor stepped = dense.eval(steps->values);
  CHECK(stepped.shape() == Shape{2, 2, 2});
  CHECK(floats(stepped) == std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(dense.eval(steps->lengths).to_vector<int64_t>() == std::vector<int64_t>{2, 2});
  auto uneven = sequence_input_layer(dense.in, {sequence_numeric_column("r", 3)}, &width);
  CHECK(uneven.status().message().find("4 values an example are not steps of 3") !=
        std::string::npos);

  // A plain column is not a sequence, and a plain model does not read a sequence.
  auto plain = sequence_input_layer(l.in, {numeric_column("readings")}, &width);
  CHECK(plain.status().message().find("'readings': is not a sequence column") != std::string::npos);
  auto flat = input_layer(l.in, {sequence_numeric_column("readings")}, &width);
  CHECK(flat.status().message().find("is a sequence column") != std::string::npos);
  auto bare =
      sequence_input_layer(l.in, {sequence_categorical_column_with_identity("n", 4)}, &width);
  CHECK(bare.status().message().find("through embedding_column or indicator_column") !=
        std::string::npos);
}
