// Multi-head models (HeadOptions::heads, as TF's multi_head): one network predicting a class and
// a value from two label columns, each head's metrics and loss in the evaluation, its
// predictions, and an export signature per head that TF Serving's classify and regress answer;
// the heads' text round-trips, and what is wrong with it is named.
#include "estimators/canned/head.h"

#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "estimators/canned/dnn.h"
#include "estimators/canned/feature_column.h"
#include "estimators/canned/linear.h"
#include "estimators/canned/test_data.h"
#include "estimators/canned/wide_deep.h"
#include "estimators/export/predictor.h"
#include "harness/temp_dir.h"
#include "runtime/example.h"

using namespace troupe;
using namespace troupe::estimators;
using runtime::Shape;
using runtime::Tensor;

namespace {

// x uniform in [-1, 1]^2; "kind" is whether x0 + x1 > 0 (a class), "size" is 3 x0 - x1 (a value).
std::vector<std::pair<std::string, Tensor>> two_labels(int64_t n, uint64_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(2 * n), size(n);
  std::vector<int64_t> kind(n);
  for (int64_t i = 0; i < n; ++i) {
    x[2 * i] = u(rng);
    x[2 * i + 1] = u(rng);
    kind[i] = x[2 * i] + x[2 * i + 1] > 0;
    size[i] = 3 * x[2 * i] - x[2 * i + 1];
  }
  return {{"x", Tensor::from_vector(Shape{n, 2}, x)},
          {"kind", Tensor::from_vector(Shape{n}, kind)},
          {"size", Tensor::from_vector(Shape{n}, size)}};
}

}  // namespace

TEST_CASE("a multi-head DNN learns a class and a value, evaluates, predicts and serves both") {
  const std::string dir = testing::temp_dir("multi_head");
  DNNOptions o{.hidden_units = {32, 16}, .optimizer = ops::Optimizer::adam(0.01)};
  o.head.heads = "kind:classifier:2,size:regressor:1:weight=0.5";
  DNNClassifier model(o, test::quiet(dir));
  Estimator& est = model.estimator();
  auto train =
      input::with_labels(*input::arrays(two_labels(2000, 1), "",
                                        {.batch_size = 64, .num_epochs = 20, .shuffle = true}),
                         {"kind", "size"});
  REQUIRE_MESSAGE(train.ok(), train.status().to_string());
  auto trained = est.train(*train);
  REQUIRE_MESSAGE(trained.ok(), trained.status().to_string());
  auto test = input::with_labels(*input::arrays(two_labels(500, 2), "", {.batch_size = 100}),
                                 {"kind", "size"});
  auto m = est.evaluate(*test);
  REQUIRE_MESSAGE(m.ok(), m.status().to_string());
  CHECK(m->at("accuracy/kind") > 0.95);
  CHECK(m->at("rmse/size") < 0.3);  // of values spread over [-4, 4]
  CHECK(m->at("auc/kind") > 0.98);
  // The total loss is the heads' weighted sum.
  CHECK(m->at("loss") ==
        doctest::Approx(m->at("loss/kind") + 0.5 * m->at("loss/size")).epsilon(1e-3));

  auto features = two_labels(4, 3);
  features.resize(1);  // x alone
  auto batches = est.predict_batches(*input::arrays(features, "", {.batch_size = 4}));
  REQUIRE_MESSAGE(batches.ok(), batches.status().to_string());
  const auto& p = batches->at(0);
  CHECK(p.at("kind/classes").shape() == Shape{4});
  CHECK(p.at("kind/probabilities").shape() == Shape{4, 2});
  CHECK(p.at("size/predictions").shape() == Shape{4, 1});

  // One signature per head, each taking serialized tf.Example protos.
  auto exported = est.export_saved_model(dir + "/export");
  REQUIRE_MESSAGE(exported.ok(), exported.status().to_string());
  auto served = serving::load(*exported);
  REQUIRE_MESSAGE(served.ok(), served.status().to_string());
  REQUIRE((*served)->signature("kind") != nullptr);
  REQUIRE((*served)->signature("size") != nullptr);
  CHECK((*served)->signature("kind")->method == "classify");
  CHECK((*served)->signature("size")->method == "regress");
  CHECK((*served)->signature("classification") == nullptr);
  const Tensor x = Tensor::from_vector(Shape{2, 2}, std::vector<float>{0.5f, 0.25f, -0.5f, -0.25f});
  Tensor examples(runtime::DType::kString, Shape{2});
  for (int64_t r = 0; r < 2; ++r) {
    REQUIRE(runtime::encode_example({"x"}, {x}, r, &examples.data<std::string>()[r]).ok());
  }
  auto scores = (*served)->predict({{"inputs", examples}}, "kind");
  REQUIRE_MESSAGE(scores.ok(), scores.status().to_string());
  CHECK(scores->at("scores").data<float>()[1] > 0.5f);  // 0.75 > 0: class 1
  CHECK(scores->at("scores").data<float>()[3] < 0.5f);
  auto values = (*served)->predict({{"inputs", examples}}, "size");
  REQUIRE(values.ok());
  CHECK(std::abs(values->at("outputs").data<float>()[0] - 1.25f) < 0.4f);
  CHECK(std::abs(values->at("outputs").data<float>()[1] + 1.25f) < 0.4f);
}

TEST_CASE("multi-head linear and wide & deep models; heads read and written; errors named") {
  LinearOptions o{.optimizer = ops::Optimizer::adam(0.05)};
  o.head.heads = "kind:classifier:2,size:regressor:1";
  LinearClassifier model(o, test::quiet());
  auto train = input::with_labels(
      *input::arrays(two_labels(1000, 4), "", {.batch_size = 50, .num_epochs = 10}),
      {"kind", "size"});
  REQUIRE(model.estimator().train(*train).ok());
  auto m = model.estimator().evaluate(*train);
  REQUIRE(m.ok());
  CHECK(m->at("accuracy/kind") > 0.9);
  CHECK(m->at("rmse/size") < 0.2);  // a line: the linear model fits it

  // A label the heads name but the data lacks.
  auto one = input::arrays(two_labels(100, 5), "kind", {.batch_size = 50});
  auto missing = model.estimator().evaluate(*one);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().find("head 'size': the data has no label column 'size'") !=
        std::string::npos);

  // Wide & deep takes heads too, and a head may be multi-label: "both" is [kind, size > 0].
  auto with_both = two_labels(1000, 6);
  std::vector<int64_t> both(2000);
  for (int64_t i = 0; i < 1000; ++i) {
    both[2 * i] = with_both[1].second.data<int64_t>()[i];
    both[2 * i + 1] = with_both[2].second.data<float>()[i] > 0;
  }
  with_both.push_back({"both", Tensor::from_vector(Shape{1000, 2}, both)});
  with_both.erase(with_both.begin() + 1);  // kind is in "both" now
  DNNLinearCombinedOptions wd{.linear_feature_columns = {numeric_column("x", 2)},
                              .dnn_feature_columns = {numeric_column("x", 2)},
                              .dnn_hidden_units = {16}};
  wd.head.heads = "size:regressor:1,both:classifier:2:multi_label";
  DNNLinearCombinedClassifier wide_deep(wd, test::quiet());
  auto data = input::with_labels(
      *input::arrays(with_both, "", {.batch_size = 50, .num_epochs = 20}), {"size", "both"});
  REQUIRE(data.ok());
  auto fitted = wide_deep.estimator().train(*data);
  REQUIRE_MESSAGE(fitted.ok(), fitted.status().to_string());
  auto wm = wide_deep.estimator().evaluate(*data);
  REQUIRE_MESSAGE(wm.ok(), wm.status().to_string());
  CHECK(wm->at("accuracy/both") > 0.9);  // over every (example, class) pair
  CHECK(wm->at("rmse/size") < 0.5);

  auto parts = parse_heads(
      "a%3Ab:classifier:3:weight=2:vocabulary=x|y%7Cz|w,c:regressor:2,m:classifier:4:multi_label");
  REQUIRE_MESSAGE(parts.ok(), parts.status().to_string());
  REQUIRE(parts->size() == 3);
  CHECK((*parts)[2].multi_label);
  CHECK((*parts)[0].name == "a:b");
  CHECK((*parts)[0].weight == 2);
  CHECK((*parts)[0].label_vocabulary == std::vector<std::string>{"x", "y|z", "w"});
  CHECK((*parts)[1].label_dimension == 2);
  CHECK(
      heads_text(*parts) ==
      "a%3Ab:classifier:3:weight=2:vocabulary=x|y%7Cz|w,c:regressor:2,m:classifier:4:multi_label");
  CHECK(parse_heads("a:tree:2").status().message().find("'a:tree:2' is no classifier") !=
        std::string::npos);
  CHECK(parse_heads("a:classifier:2,a:regressor:1").status().message().find("twice") !=
        std::string::npos);
  Head bad;
  bad.options.heads = "a:classifier:3:vocabulary=x|y";
  CHECK(bad.validate().message().find("label_vocabulary has 2 names for 3 classes") !=
        std::string::npos);
}

TEST_CASE("a multi-head model's regressor starts at its target's statistics") {
  // "size" far from 0 and wide (1000 + 100 (3 x0 - x1)): with its statistics the head's output
  // starts at the mean and fits within a few epochs; without them, the same training leaves it
  // far off.
  auto data = two_labels(2000, 7);
  float* size = data[2].second.data<float>();
  for (int64_t i = 0; i < 2000; ++i) size[i] = 1000 + 100 * size[i];
  auto rmse = [&](bool standardized) {
    DNNOptions o{.hidden_units = {16}, .optimizer = ops::Optimizer::adam(0.01)};
    o.head.heads = "kind:classifier:2,size:regressor:1";
    auto train = input::with_labels(
        *input::arrays(data, "", {.batch_size = 100, .num_epochs = 5, .shuffle = true}),
        {"kind", "size"});
    REQUIRE_MESSAGE(train.ok(), train.status().to_string());
    if (standardized) {
      auto stats = standardization(*train, {"size"});
      REQUIRE_MESSAGE(stats.ok(), stats.status().to_string());
      CHECK(stats->at("size").mean[0] == doctest::Approx(1000).epsilon(0.01));
      o.head.head_labels = {{"size", stats->at("size")}};
    }
    DNNClassifier model(o, test::quiet());
    REQUIRE(model.estimator().train(*train).ok());
    auto m = model.estimator().evaluate(*train);
    REQUIRE_MESSAGE(m.ok(), m.status().to_string());
    CHECK(m->at("accuracy/kind") > 0.85);  // the classifier head is unchanged by it
    return m->at("rmse/size");
  };
  const double with = rmse(true), without = rmse(false);
  CHECK(with < 30);  // of targets spread over [600, 1400]
  CHECK(without > 300);
  auto none = standardization(*input::arrays(data, "kind", {.batch_size = 10}), {"weight"});
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message().find("no label column 'weight'") != std::string::npos);
}
