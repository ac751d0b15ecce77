// Streaming metrics against values worked out by hand, and each kind's graph ops against its host
// metric.
#include "estimators/metrics.h"

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <random>

#include "harness/op_harness.h"
#include "ops/array_ops.h"
#include "ops/state_ops.h"

using namespace troupe;
using runtime::DType;
using runtime::Output;
using runtime::Shape;
using runtime::Tensor;

namespace {
Tensor f(std::vector<float> v) {
  return Tensor::from_vector(Shape{static_cast<int64_t>(v.size())}, v);
}
Tensor i64(std::vector<int64_t> v) {
  return Tensor::from_vector(Shape{static_cast<int64_t>(v.size())}, v);
}
double run(const std::string& kind, const std::vector<std::pair<Tensor, Tensor>>& batches) {
  auto m = estimators::make_metric(kind);
  REQUIRE_MESSAGE(m.ok(), m.status().to_string());
  for (const auto& [y, p] : batches) REQUIRE((*m)->update(y, p).ok());
  return (*m)->result();
}
}  // namespace

TEST_CASE("metrics stream over batches") {
  CHECK(run("accuracy", {{i64({1, 2, 3}), i64({1, 0, 3})}, {i64({4}), i64({4})}}) ==
        doctest::Approx(0.75));
  // tp=2 fp=1 fn=1
  auto y = f({1, 1, 1, 0, 0}), p = f({0.9f, 0.8f, 0.2f, 0.7f, 0.1f});
  CHECK(run("precision", {{y, p}}) == doctest::Approx(2.0 / 3));
  CHECK(run("recall", {{y, p}}) == doctest::Approx(2.0 / 3));
  CHECK(run("f1", {{y, p}}) == doctest::Approx(2.0 / 3));
  CHECK(run("mean", {{f({}), f({1, 2})}, {f({}), f({6})}}) == doctest::Approx(3));
  CHECK(run("mse", {{f({1, 2}), f({2, 4})}}) == doctest::Approx(2.5));
  CHECK(run("rmse", {{f({1, 2}), f({2, 4})}}) == doctest::Approx(std::sqrt(2.5)));
  CHECK(run("mae", {{f({1, 2}), f({2, 4})}}) == doctest::Approx(1.5));
  CHECK(run("log_loss", {{f({1, 0}), f({0.8f, 0.4f})}}) ==
        doctest::Approx(-(std::log(0.8) + std::log(0.6)) / 2).epsilon(1e-5));
  Tensor probs = Tensor::from_vector<float>(Shape{2, 3}, {0.2f, 0.5f, 0.3f, 0.1f, 0.1f, 0.8f});
  CHECK(run("log_loss", {{i64({1, 0}), probs}}) ==
        doctest::Approx(-(std::log(0.5) + std::log(0.1)) / 2).epsilon(1e-5));
  CHECK(run("top_k_accuracy:1", {{i64({1, 0}), probs}}) == doctest::Approx(0.5));
  CHECK(run("top_k_accuracy:2", {{i64({0, 0}), probs}}) == doctest::Approx(0.5));
}

TEST_CASE("auc: ROC and PR against exact areas") {
  // Of the 4 (positive, negative) pairs, 3 are ordered right: ROC AUC 0.75.
  CHECK(run("auc", {{f({0, 0, 1, 1}), f({0.1f, 0.4f, 0.35f, 0.8f})}}) ==
        doctest::Approx(0.75).epsilon(0.01));
  CHECK(run("auc", {{f({0, 1}), f({0.2f, 0.9f})}}) == doctest::Approx(1.0).epsilon(0.01));
  CHECK(run("auc", {{f({1, 0}), f({0.2f, 0.9f})}}) == doctest::Approx(0.0).epsilon(0.01));
  CHECK(run("auc_pr", {{f({0, 1}), f({0.2f, 0.9f})}}) == doctest::Approx(1.0).epsilon(0.02));
  auto m = estimators::make_metric("auc");
  CHECK(!(*m)->update(f({1}), f({1.5f})).ok());
  // With 3 thresholds (-eps, 0.5, 1 + eps) the ROC is three points: (0, 0), (0.5, 0.5), (1, 1)
  // for these scores, an area of 0.5, where 200 thresholds tell the pairs apart (0.75).
  CHECK(run("auc:3", {{f({0, 0, 1, 1}), f({0.1f, 0.6f, 0.35f, 0.8f})}}) ==
        doctest::Approx(0.5).epsilon(0.01));
  CHECK(run("auc", {{f({0, 0, 1, 1}), f({0.1f, 0.6f, 0.35f, 0.8f})}}) ==
        doctest::Approx(0.75).epsilon(0.01));
  CHECK_FALSE(estimators::make_metric("auc:1").ok());
}

TEST_CASE("precision_at_k and recall_at_k over scores, one label or several an example") {
  // Scores of 2 examples over 4 classes; their top 2: {1, 2} and {3, 0}.
  Tensor s = Tensor::from_vector<float>(Shape{2, 4}, {0.1f, 0.5f, 0.3f, 0.1f,  //
                                                      0.3f, 0.1f, 0.2f, 0.4f});
  // One label each, 2 and 1: the first is in its top 2, the second not.
  CHECK(run("recall_at_k:2", {{i64({2, 1}), s}}) == doctest::Approx(0.5));
  CHECK(run("precision_at_k:2", {{i64({2, 1}), s}}) == doctest::Approx(1.0 / 4));
  // Several labels: {1, 3} and {0, 2, 3}. Hits: 1 of the first's top 2, 2 of the second's.
  Tensor labels = Tensor::from_vector<int64_t>(Shape{2, 4}, {0, 1, 0, 1, 1, 0, 1, 1});
  CHECK(run("precision_at_k:2", {{labels, s}}) == doctest::Approx(3.0 / 4));
  CHECK(run("recall_at_k:2", {{labels, s}}) == doctest::Approx(3.0 / 5));
  CHECK(estimators::class_metric_kind("precision_at_5", 10) == "precision_at_k:5");
  CHECK(estimators::class_metric_kind("recall_at_3", 10) == "recall_at_k:3");
  CHECK(estimators::class_metric_kind("recall_at_x", 10).empty());
  CHECK(estimators::class_metric_kind("top_5_accuracy", 10) == "top_k_accuracy:5");
  CHECK(estimators::class_metric_kind("top_x_accuracy", 10).empty());
  CHECK(estimators::class_metric_kind("top__accuracy", 10).empty());
  CHECK_FALSE(estimators::make_metric("precision_at_k").ok());
}

TEST_CASE("confusion matrix and bad metrics") {
  auto m = estimators::make_metric("confusion_matrix:3");
  REQUIRE(m.ok());
  REQUIRE((*m)->update(i64({0, 1, 2, 2}), i64({0, 2, 2, 1})).ok());
  CHECK(estimators::confusion_counts(**m) ==
        std::vector<std::vector<int64_t>>{{1, 0, 0}, {0, 0, 1}, {0, 1, 1}});
  CHECK((*m)->result() == doctest::Approx(0.5));
  CHECK(!(*m)->update(i64({3}), i64({0})).ok());
  CHECK(!estimators::make_metric("confusion_matrix").ok());
  CHECK(estimators::make_metric("accuracy2").status().message() == "unknown metric 'accuracy2'");
  auto acc = estimators::make_metric("accuracy");
  CHECK((*acc)->update(i64({1, 2}), i64({1})).message().find("[2] labels for [1] predictions") !=
        std::string::npos);
}

TEST_CASE("multi-class precision, recall and F1 as scikit-learn averages them; mean IoU") {
  // scikit-learn's own example: y_true [0 1 2 0 1 2], y_pred [0 2 1 0 0 1]; its documented
  // f1_score is 0.267 macro, 0.333 micro, 0.267 weighted; precision 0.222 macro.
  auto value = [](const std::string& kind) {
    auto m = estimators::make_metric(kind);
    REQUIRE_MESSAGE(m.ok(), m.status().to_string());
    REQUIRE((*m)->update(i64({0, 1, 2, 0, 1, 2}), i64({0, 2, 1, 0, 0, 1})).ok());
    return (*m)->result();
  };
  CHECK(value("f1:3:macro") == doctest::Approx(0.8 / 3));
  CHECK(value("f1:3") == doctest::Approx(0.8 / 3));  // macro by default
  CHECK(value("f1:3:micro") == doctest::Approx(1.0 / 3));
  CHECK(value("f1:3:weighted") == doctest::Approx(0.8 / 3));
  CHECK(value("precision:3:macro") == doctest::Approx(2.0 / 9));
  CHECK(value("precision:3:weighted") == doctest::Approx(2.0 / 9));
  CHECK(value("recall:3:macro") == doctest::Approx(1.0 / 3));
  // A class that occurs in neither labels nor predictions is left out of the average...
  CHECK(value("f1:4:macro") == doctest::Approx(0.8 / 3));
  CHECK(value("mean_iou:4") == doctest::Approx(2.0 / 9));  // IoU 2/3, 0, 0
  // ... but tf.metrics.mean_per_class_accuracy counts every class.
  CHECK(value("mean_per_class_accuracy:3") == doctest::Approx(1.0 / 3));
  CHECK(value("mean_per_class_accuracy:4") == doctest::Approx(1.0 / 4));
  // Weights weigh the counts: class 0's examples count double.
  auto w = estimators::make_metric("recall:3:weighted");
  REQUIRE(
      (*w)->update(i64({0, 1, 2, 0, 1, 2}), i64({0, 2, 1, 0, 0, 1}), f({2, 1, 1, 2, 1, 1})).ok());
  CHECK((*w)->result() == doctest::Approx(4.0 / 8));  // (4 * 1 + 2 * 0 + 2 * 0) / 8
  CHECK(estimators::make_metric("f1:3:median")
            .status()
            .message()
            .find("'median' is not micro, macro or weighted") != std::string::npos);
  // (auc:3 is an AUC over 3 thresholds.)
  CHECK(estimators::make_metric("mse:3").status().message().find("'mse' has no classes") !=
        std::string::npos);
}

TEST_CASE("weights weigh what each example adds, as tf.metrics' weights") {
  auto weighted = [](const std::string& kind, const Tensor& y, const Tensor& p, const Tensor& w) {
    auto m = estimators::make_metric(kind);
    REQUIRE(m.ok());
    auto s = (*m)->update(y, p, w);
    REQUIRE_MESSAGE(s.ok(), s.to_string());
    return (*m)->result();
  };
  // Right, wrong, right with weights 1, 3, 0: accuracy 1 / 4.
  CHECK(weighted("accuracy", i64({1, 0, 1}), i64({1, 1, 1}), f({1, 3, 0})) ==
        doctest::Approx(0.25));
  // Squared errors 1 and 4 with weights 3 and 1: (3 + 4) / 4.
  CHECK(weighted("mse", f({0, 0}), f({1, 2}), f({3, 1})) == doctest::Approx(1.75));
  // Two values an example ([2, 2]): the example's weight counts for both.
  CHECK(weighted("mae", Tensor::from_vector<float>(Shape{2, 2}, {0, 0, 0, 0}),
                 Tensor::from_vector<float>(Shape{2, 2}, {1, 1, 3, 3}),
                 f({1, 0})) == doctest::Approx(1.0));
  // Precision: true positive (weight 2), false positive (weight 6): 2 / 8.
  CHECK(weighted("precision", i64({1, 0}), i64({1, 1}), f({2, 6})) == doctest::Approx(0.25));
  // A zero weight removes an example: the AUC of the rest is perfect.
  CHECK(weighted("auc", i64({0, 1, 0}), f({0.1f, 0.9f, 0.95f}), f({1, 1, 0})) ==
        doctest::Approx(1.0).epsilon(1e-3));
  CHECK(weighted("log_loss", i64({1, 0}), f({0.5f, 0.5f}), f({2, 0})) ==
        doctest::Approx(std::log(2.0)));

  auto m = estimators::make_metric("accuracy");
  REQUIRE(m.ok());
  CHECK_FALSE((*m)->update(i64({1, 0}), i64({1, 1}), f({1})).ok());      // a weight short
  CHECK_FALSE((*m)->update(i64({1, 0}), i64({1, 1}), f({1, -1})).ok());  // a negative one
  auto ari = estimators::make_metric("adjusted_rand_index");
  REQUIRE(ari.ok());
  CHECK((*ari)->update(i64({1, 0}), i64({1, 1}), f({1, 1})).message().find("no weights") !=
        std::string::npos);
}

namespace {

// One batch of a metric's inputs; weights may be null.
struct Batch {
  Tensor labels, predictions, weights;
};

Output placeholder_like(testing::OpTest& t, const Tensor& like, const std::string& name) {
  std::vector<int64_t> dims = like.shape().dims();
  dims[0] = -1;
  return ops::placeholder(t.b, like.dtype(), Shape(dims), name);
}

// The metric over `batches` as the host counts it and as its graph ops do (nullopt: none).
std::pair<double, std::optional<double>> both(const std::string& kind,
                                              const std::vector<Batch>& batches) {
  auto host = estimators::make_metric(kind);
  REQUIRE(host.ok());
  for (const Batch& b : batches) {
    auto s = (*host)->update(b.labels, b.predictions, b.weights);
    REQUIRE_MESSAGE(s.ok(), kind, ": ", s.to_string());
  }
  testing::OpTest t;
  const Batch& first = batches[0];
  Output y = placeholder_like(t, first.labels, "y"),
         p = placeholder_like(t, first.predictions, "p");
  Output w = first.weights.valid() ? placeholder_like(t, first.weights, "w") : Output{};
  auto g = estimators::graph_metric(t.b, kind, y, p, w, "m");
  REQUIRE_MESSAGE(g.ok(), kind, ": ", g.status().to_string());
  if (!*g) return {(*host)->result(), std::nullopt};
  REQUIRE(t.run({}, {ops::local_variables_initializer(t.b)}).ok());
  double running = 0;
  for (const Batch& b : batches) {
    t.feeds = {{y, b.labels}, {p, b.predictions}};
    if (w.valid()) t.feeds.push_back({w, b.weights});
    auto r = t.run({(*g)->update});
    REQUIRE_MESSAGE(r.ok(), kind, ": ", r.status().to_string());
    running = (*r)[0].scalar_as_double();
  }
  t.feeds.clear();
  auto value = t.run({(*g)->value});
  REQUIRE(value.ok());
  CHECK((*value)[0].scalar_as_double() == running);  // the last update says what the value says
  return {(*host)->result(), (*value)[0].scalar_as_double()};
}

}  // namespace

TEST_CASE(
    "every kind's graph ops compute what its host metric computes, with and without weights") {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  std::uniform_int_distribution<int64_t> cls(0, 3);
  auto floats = [&](Shape s, double scale = 1) {
    Tensor t(DType::kFloat32, s);
    for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = float(u(rng) * scale);
    return t;
  };
  auto ids = [&](int64_t n) {
    Tensor t(DType::kInt64, Shape{n});
    for (int64_t i = 0; i < n; ++i) t.data<int64_t>()[i] = cls(rng);
    return t;
  };
  auto bits = [&](int64_t n) {
    Tensor t(DType::kFloat32, Shape{n});
    for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = u(rng) < 0.4 ? 1.f : 0.f;
    return t;
  };
  auto probabilities = [&](int64_t n) {  // rows of 4 class probabilities
    Tensor t = floats(Shape{n, 4});
    for (int64_t i = 0; i < n; ++i) {
      float* row = t.data<float>() + i * 4;
      const float total = row[0] + row[1] + row[2] + row[3];
      for (int k = 0; k < 4; ++k) row[k] /= total;
    }
    return t;
  };
  const int64_t sizes[] = {5, 9, 1};
  for (const bool weighted : {false, true}) {
    auto batches = [&](const std::function<Batch(int64_t)>& make) {
      std::vector<Batch> out;
      for (int64_t n : sizes) {
        Batch b = make(n);
        if (weighted) b.weights = floats(Shape{n}, 3);
        out.push_back(b);
      }
      return out;
    };
    const auto binary = batches([&](int64_t n) { return Batch{bits(n), floats(Shape{n})}; });
    const auto classes = batches([&](int64_t n) { return Batch{ids(n), ids(n)}; });
    const auto values = batches([&](int64_t n) {
      return Batch{floats(Shape{n, 2}, 5), floats(Shape{n, 2}, 5)};
    });
    const auto scores = batches([&](int64_t n) { return Batch{ids(n), probabilities(n)}; });
    const auto several = batches([&](int64_t n) {  // 0/1 labels [n, 4]: several an example
      Tensor y = bits(n * 4);
      return Batch{y.reshaped(Shape{n, 4}), probabilities(n)};
    });
    const std::vector<std::pair<std::string, std::vector<Batch>>> kinds = {
        {"accuracy", classes},
        {"precision", binary},
        {"recall", binary},
        {"f1", binary},
        {"auc", binary},
        {"auc_pr", binary},
        {"auc:50", binary},
        {"log_loss", binary},
        {"log_loss", scores},
        {"mean", values},
        {"mse", values},
        {"rmse", values},
        {"mae", values},
        {"precision:4:macro", classes},
        {"recall:4:weighted", classes},
        {"f1:4:micro", classes},
        {"f1:4:macro", classes},
        {"mean_iou:4", classes},
        {"mean_per_class_accuracy:4", classes},
        {"top_k_accuracy", scores},
        {"top_k_accuracy:1", scores},
        {"top_k_accuracy:2", scores},
        {"precision_at_k:2", scores},
        {"recall_at_k:3", scores},
        {"precision_at_k:1", several},
        {"precision_at_k:9", several},
        {"recall_at_k:2", several}};
    for (const auto& [kind, data] : kinds) {
      const auto [host, graph] = both(kind, data);
      REQUIRE_MESSAGE(graph.has_value(), kind);
      CHECK_MESSAGE(*graph == doctest::Approx(host).epsilon(1e-12), kind,
                    weighted ? " (weighted)" : "", ": host ", host, ", graph ", *graph);
    }
    if (!weighted) {
      for (const std::string kind : {"sum", "confusion_matrix:4", "adjusted_rand_index"}) {
        const auto [host, graph] = both(kind, kind == "sum" ? values : classes);
        REQUIRE_MESSAGE(graph.has_value(), kind);
        CHECK_MESSAGE(*graph == doctest::Approx(host).epsilon(1e-12), kind);
      }
    }
  }
  // These stay on the host, which refuses their weights by name.
  testing::OpTest t;
  for (const std::string kind : {"sum", "confusion_matrix:4", "adjusted_rand_index"}) {
    auto g = estimators::graph_metric(t.b, kind, t.feed(i64({0, 1})), t.feed(i64({1, 1})),
                                      t.feed(f({1, 2})), kind);
    REQUIRE_MESSAGE(g.ok(), kind, ": ", g.status().to_string());
    CHECK_FALSE_MESSAGE(g->has_value(), kind);
  }
  // An unknown kind is make_metric's error.
  auto bad = estimators::graph_metric(t.b, "nope", t.feed(f({1})), t.feed(f({1})), {}, "m");
  CHECK(bad.status().message().find("unknown metric 'nope'") != std::string::npos);
}
