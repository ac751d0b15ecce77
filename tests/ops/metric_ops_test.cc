// Streaming metrics as graph ops: counts in local variables that updates add to batch by batch,
// that local_variables_initializer() starts over and that no checkpoint sees; values worked out
// by hand, and bad classes or probabilities stopping the step by name.
#include "ops/metric_ops.h"

#include <doctest/doctest.h>

#include "harness/op_harness.h"
#include "ops/array_ops.h"
#include "ops/state_ops.h"

using namespace troupe;
using namespace troupe::runtime;
using testing::OpTest;

namespace {

Tensor i64(std::vector<int64_t> v) {
  return Tensor::from_vector(Shape{static_cast<int64_t>(v.size())}, v);
}
Tensor f32(std::vector<float> v) {
  return Tensor::from_vector(Shape{static_cast<int64_t>(v.size())}, v);
}

double scalar(const Result<std::vector<Tensor>>& r) {
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  return (*r)[0].scalar_as_double();
}

}  // namespace

TEST_CASE("a graph metric counts over batches in local variables, and starts over when asked") {
  OpTest t;
  Output y = ops::placeholder(t.b, DType::kInt64, Shape{-1}, "y");
  Output p = ops::placeholder(t.b, DType::kInt64, Shape{-1}, "p");
  ops::StreamingMetric acc = ops::metrics::accuracy(t.b, y, p);
  Output w =
      ops::variable(t.b, "w", Shape{}, DType::kFloat32, ops::scalar(t.b, 1, DType::kFloat32));
  const int init = ops::global_variables_initializer(t.b);
  const int reset = ops::local_variables_initializer(t.b);
  REQUIRE_MESSAGE(t.b.ok(), t.b.status().to_string());

  // Only the model's variable is a variable the model saves; the counts are local.
  CHECK(t.g.variables().size() == 1);
  CHECK(t.g.local_variables().size() == 2);  // total and count
  REQUIRE(t.run({}, {init, reset}).ok());
  CHECK(t.vars.names() == std::vector<std::string>{"w"});
  CHECK(t.vars.contains("metrics/accuracy/total"));

  t.feeds = {{y, i64({1, 2, 3})}, {p, i64({1, 0, 3})}};
  CHECK(scalar(t.run({acc.update})) == doctest::Approx(2.0 / 3));
  t.feeds = {{y, i64({4})}, {p, i64({4})}};
  CHECK(scalar(t.run({acc.update})) == doctest::Approx(0.75));
  t.feeds.clear();
  CHECK(scalar(t.run({acc.value})) == doctest::Approx(0.75));

  REQUIRE(t.run({}, {reset}).ok());
  CHECK(scalar(t.run({acc.value})) == 0);  // nothing counted: 0, not NaN
  t.feeds = {{y, i64({4})}, {p, i64({5})}};
  CHECK(scalar(t.run({acc.update})) == 0);
  (void)w;
}

TEST_CASE("graph metrics' values by hand: weighted mean, binary counts, AUC, mean IoU") {
  OpTest t;
  Output y = t.feed(f32({1, 1, 1, 0, 0}));
  Output p = t.feed(f32({0.9f, 0.8f, 0.2f, 0.7f, 0.1f}));
  Output weights = t.feed(f32({1, 1, 1, 1, 4}));
  auto m = ops::metrics::mean(t.b, p, weights);
  auto pr = ops::metrics::precision(t.b, y, p);  // tp 2, fp 1, fn 1
  auto rc = ops::metrics::recall(t.b, y, p, weights);
  auto auc = ops::metrics::auc(t.b, y, p);  // 5 of the 6 (positive, negative) pairs in order
  Output classes_y = t.feed(i64({0, 0, 1, 1, 2}));
  Output classes_p = t.feed(i64({0, 1, 1, 1, 0}));
  // IoU: class 0: 1 / (2 + 2 - 1); class 1: 2 / (2 + 3 - 2); class 2: 0 / (1 + 0 - 0).
  auto iou = ops::metrics::mean_iou(t.b, classes_y, classes_p, 3);
  auto mpca = ops::metrics::mean_per_class_accuracy(t.b, classes_y, classes_p, 4);
  REQUIRE_MESSAGE(t.b.ok(), t.b.status().to_string());
  REQUIRE(t.run({}, {ops::local_variables_initializer(t.b)}).ok());
  auto got = t.run({m.update, pr.update, rc.update, auc.update, iou.update, mpca.update});
  REQUIRE_MESSAGE(got.ok(), got.status().to_string());
  CHECK((*got)[0].scalar_as_double() == doctest::Approx((0.9 + 0.8 + 0.2 + 0.7 + 0.4) / 8));
  CHECK((*got)[1].scalar_as_double() == doctest::Approx(2.0 / 3));
  CHECK((*got)[2].scalar_as_double() == doctest::Approx(2.0 / 3));
  CHECK((*got)[3].scalar_as_double() == doctest::Approx(5.0 / 6).epsilon(0.01));
  CHECK((*got)[4].scalar_as_double() == doctest::Approx((1.0 / 3 + 2.0 / 3 + 0) / 3));
  // Recall per class 0.5, 1, 0, and class 3 (absent) 0: over all 4.
  CHECK((*got)[5].scalar_as_double() == doctest::Approx(1.5 / 4));
}

TEST_CASE("a class or probability out of range stops the step, naming the metric") {
  OpTest t;
  auto iou = ops::metrics::mean_iou(t.b, t.feed(i64({0, 3})), t.feed(i64({0, 1})), 3, {}, "iou");
  auto auc =
      ops::metrics::auc(t.b, t.feed(f32({1, 0})), t.feed(f32({0.5f, 1.5f})), {}, 200, false, "auc");
  auto weighed =
      ops::metrics::accuracy(t.b, t.feed(i64({1})), t.feed(i64({1})), t.feed(f32({-1})), "weighed");
  Output probabilities = t.feed(Tensor::from_vector<float>(Shape{1, 2}, {0.3f, 0.7f}));
  auto log_loss =
      ops::metrics::log_loss(t.b, t.feed(i64({1})), probabilities, t.feed(f32({-2})), "log_loss");
  REQUIRE_MESSAGE(t.b.ok(), t.b.status().to_string());
  REQUIRE(t.run({}, {ops::local_variables_initializer(t.b)}).ok());
  CHECK(t.run({log_loss.update}).status().message().find("log_loss: a weight is negative") !=
        std::string::npos);
  auto bad_class = t.run({iou.update});
  CHECK_MESSAGE(bad_class.status().message().find(
                    "iou: a label is not one of 3 classes: 3 at index 1 is outside [0, 2]") !=
                    std::string::npos,
                bad_class.status().to_string());
  auto bad_probability = t.run({auc.update});
  CHECK_MESSAGE(bad_probability.status().message().find(
                    "auc: a prediction is not a probability: 1.5 at index 1") != std::string::npos,
                bad_probability.status().to_string());
  auto negative = t.run({weighed.update});
  CHECK_MESSAGE(
      negative.status().message().find("weighed: a weight is negative or NaN") != std::string::npos,
      negative.status().to_string());

  OpTest few;
  ops::metrics::auc(few.b, few.feed(f32({1})), few.feed(f32({1})), {}, 1);
  CHECK(few.b.status().message().find("1 thresholds (at least 2)") != std::string::npos);
}

TEST_CASE("top-k metrics by hand: ties count as the k best, weights weigh examples") {
  OpTest t;
  // Row 0: class 1 best, classes 0 and 2 tie second; row 1: class 2 best, then 0, then 1.
  Output scores =
      t.feed(Tensor::from_vector<float>(Shape{2, 3}, {0.2f, 0.6f, 0.2f, 0.3f, 0.1f, 0.6f}));
  Output labels = t.feed(i64({2, 1}));
  Output weights = t.feed(f32({1, 3}));
  namespace m = ops::metrics;
  auto top1 = m::top_k(t.b, labels, scores, 1, m::TopKSummary::kAccuracy);
  auto top2 = m::top_k(t.b, labels, scores, 2, m::TopKSummary::kAccuracy);  // row 0: a tie
  auto top2w = m::top_k(t.b, labels, scores, 2, m::TopKSummary::kAccuracy, weights, "top2w");
  auto precision = m::top_k(t.b, labels, scores, 2, m::TopKSummary::kPrecision, {}, "p2");
  // Several labels an example: row 0 {0, 1}, row 1 {0, 1, 2}; the 2 best: {1, 0, 2}, {2, 0}.
  Output several = t.feed(Tensor::from_vector<float>(Shape{2, 3}, {1, 1, 0, 1, 1, 1}));
  auto recall = m::top_k(t.b, several, scores, 2, m::TopKSummary::kRecall, {}, "r2");
  auto over = m::top_k(t.b, labels, scores, 5, m::TopKSummary::kPrecision, {}, "p5");
  REQUIRE_MESSAGE(t.b.ok(), t.b.status().to_string());
  REQUIRE(t.run({}, {ops::local_variables_initializer(t.b)}).ok());
  auto got =
      t.run({top1.update, top2.update, top2w.update, precision.update, recall.update, over.update});
  REQUIRE_MESSAGE(got.ok(), got.status().to_string());
  CHECK((*got)[0].scalar_as_double() == 0);
  CHECK((*got)[1].scalar_as_double() == doctest::Approx(0.5));
  CHECK((*got)[2].scalar_as_double() == doctest::Approx(0.25));
  CHECK((*got)[3].scalar_as_double() == doctest::Approx(1.0 / 4));
  CHECK((*got)[4].scalar_as_double() == doctest::Approx(4.0 / 5));
  CHECK((*got)[5].scalar_as_double() == doctest::Approx(2.0 / 6));  // k past the classes: all 3

  OpTest wrong;
  auto bad = m::top_k(wrong.b, wrong.feed(i64({3})),
                      wrong.feed(Tensor::from_vector<float>(Shape{1, 3}, {0, 1, 2})), 1,
                      m::TopKSummary::kRecall, {}, "r1");
  REQUIRE(wrong.run({}, {ops::local_variables_initializer(wrong.b)}).ok());
  auto refused = wrong.run({bad.update});
  CHECK_MESSAGE(
      refused.status().message().find("r1: a label is not one of 3 classes") != std::string::npos,
      refused.status().to_string());
  OpTest unknown;
  m::top_k(unknown.b, unknown.feed(i64({0})),
           ops::placeholder(unknown.b, DType::kFloat32, Shape{-1, -1}), 1,
           m::TopKSummary::kAccuracy, {}, "top1");
  CHECK(unknown.b.status().message().find("top1: needs scores [n, classes]") != std::string::npos);
}

TEST_CASE("the adjusted Rand index counts pairs of any ids in a table that grows") {
  OpTest t;
  Output y = ops::placeholder(t.b, DType::kInt64, Shape{-1}, "y");
  Output p = ops::placeholder(t.b, DType::kInt64, Shape{-1}, "p");
  auto ari = ops::metrics::adjusted_rand_index(t.b, y, p, "ari");
  REQUIRE_MESSAGE(t.b.ok(), t.b.status().to_string());
  REQUIRE(t.run({}, {ops::local_variables_initializer(t.b)}).ok());
  CHECK(t.g.variables().empty());  // the table is local: no checkpoint holds it
  // The same partition under other names, in two batches: 1.
  t.feeds = {{y, i64({0, 0, 1})}, {p, i64({70, 70, -5})}};
  REQUIRE(t.run({ari.update}).ok());
  t.feeds = {{y, i64({1, 2, 2, 2})}, {p, i64({-5, 1000000007, 1000000007, 1000000007})}};
  CHECK(scalar(t.run({ari.update})) == doctest::Approx(1.0));
  CHECK(t.vars.read("metrics/ari/contingency")->shape() == Shape{3, 3});
  // scikit-learn: adjusted_rand_score([0, 0, 1, 1], [0, 0, 1, 2]) == 0.5714285714285715
  REQUIRE(t.run({}, {ops::local_variables_initializer(t.b)}).ok());
  t.feeds = {{y, i64({0, 0, 1, 1})}, {p, i64({0, 0, 1, 2})}};
  CHECK(scalar(t.run({ari.update})) == doctest::Approx(0.5714285714285715));
  t.feeds.clear();
  CHECK(scalar(t.run({ari.value})) == doctest::Approx(0.5714285714285715));
  t.feeds = {{y, i64({0, 1})}, {p, i64({0})}};
  auto uneven = t.run({ari.update});
  CHECK_MESSAGE(uneven.status().message().find("2 labels for 1 predictions") != std::string::npos,
                uneven.status().to_string());
}

TEST_CASE("the contingency ops refuse a table that is not [pairs, 3] when it comes, by name") {
  OpTest t;
  Output table = ops::placeholder(t.b, DType::kFloat64, Shape{-1, -1}, "table");
  Output ari = t.b.add("AdjustedRandIndex", {table});
  Output ids = t.feed(Tensor::from_vector<double>(Shape{1}, {0}));
  Output merged = t.b.add("ContingencyCounts", {table, ids, ids});
  REQUIRE_MESSAGE(t.b.ok(), t.b.status().to_string());
  t.feeds.push_back({table, Tensor::from_vector<double>(Shape{2, 2}, {0, 0, 1, 1})});
  for (Output o : {ari, merged}) {
    auto r = t.run({o});
    CHECK_MESSAGE(
        r.status().message().find("a table of [2,2], not float64 [pairs, 3]") != std::string::npos,
        r.status().to_string());
  }
}

TEST_CASE("only a local variable may leave dims unknown") {
  OpTest t;
  ops::variable(t.b, "w", Shape{-1, 3}, DType::kFloat32,
                ops::zeros(t.b, Shape{0, 3}, DType::kFloat32));
  CHECK_MESSAGE(t.b.status().message().find("variable shape [?,3] must be fully defined") !=
                    std::string::npos,
                t.b.status().to_string());
}
