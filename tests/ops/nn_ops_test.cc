// Softmax, cross-entropies, losses, bias_add and dropout against naive references.
#include "ops/nn_ops.h"

#include <doctest/doctest.h>

#include <cmath>

#include "harness/grad_check.h"
#include "harness/op_harness.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"

using namespace troupe;
using namespace troupe::runtime;
using testing::OpTest;
using testing::random_tensor;

namespace {
std::vector<double> softmax_row(const double* x, int n) {
  double m = *std::max_element(x, x + n), s = 0;
  std::vector<double> e(n);
  for (int i = 0; i < n; ++i) s += e[i] = std::exp(x[i] - m);
  for (double& v : e) v /= s;
  return e;
}
}  // namespace

TEST_CASE("softmax and log_softmax along the last dim, stable for large logits") {
  std::mt19937_64 rng(3);
  OpTest t;
  Tensor x = random_tensor<double>(Shape{4, 5}, rng, -50, 50);
  Output in = t.feed(x);
  std::vector<double> want, want_log;
  for (int r = 0; r < 4; ++r) {
    auto s = softmax_row(x.data<double>() + 5 * r, 5);
    for (double v : s) {
      want.push_back(v);
      want_log.push_back(std::log(v));
    }
  }
  CHECK_CLOSE_TENSOR(t.eval(ops::softmax(t.b, in)), want, 1e-12);
  CHECK_CLOSE_TENSOR(t.eval(ops::log_softmax(t.b, in)), want_log, 1e-9);
  Output huge = t.feed(Tensor::from_vector<float>(Shape{1, 2}, {1000, 1000}));
  CHECK(t.eval(ops::softmax(t.b, huge)).to_vector<float>() == std::vector<float>{0.5f, 0.5f});
}

TEST_CASE("dense and sparse softmax cross-entropy agree with the definition") {
  std::mt19937_64 rng(5);
  Tensor logits = random_tensor<double>(Shape{3, 4}, rng, -5, 5);
  Tensor ids = Tensor::from_vector<int64_t>(Shape{3}, {2, 0, 3});
  Tensor onehot(DType::kFloat64, Shape{3, 4});
  std::vector<double> want;
  for (int r = 0; r < 3; ++r) {
    int k = int(ids.data<int64_t>()[r]);
    onehot.data<double>()[r * 4 + k] = 1;
    want.push_back(-std::log(softmax_row(logits.data<double>() + 4 * r, 4)[k]));
  }
  OpTest t;
  Output l = t.feed(logits);
  CHECK_CLOSE_TENSOR(t.eval(ops::sparse_softmax_cross_entropy_with_logits(t.b, t.feed(ids), l)),
                     want, 1e-12);
  CHECK_CLOSE_TENSOR(t.eval(ops::softmax_cross_entropy_with_logits(t.b, t.feed(onehot), l)), want,
                     1e-12);
  Output bad = t.feed(Tensor::from_vector<int32_t>(Shape{3}, {0, 4, 1}));
  auto r = t.run({ops::sparse_softmax_cross_entropy_with_logits(t.b, bad, l)});
  CHECK(r.status().message().find("label 4 at row 1 is outside [0, 4)") != std::string::npos);
}

TEST_CASE("sigmoid cross-entropy, mse and l2_loss") {
  OpTest t;
  Output x = t.feed(Tensor::from_vector<double>(Shape{4}, {-100, -1, 0, 3}));
  Output z = t.feed(Tensor::from_vector<double>(Shape{4}, {0, 1, 0.5, 1}));
  std::vector<double> want;
  double xs[] = {-100, -1, 0, 3}, zs[] = {0, 1, 0.5, 1};
  for (int i = 0; i < 4; ++i) {
    double p = 1 / (1 + std::exp(-xs[i]));
    want.push_back(i == 0 ? 0.0 : -(zs[i] * std::log(p) + (1 - zs[i]) * std::log(1 - p)));
  }
  CHECK_CLOSE_TENSOR(t.eval(ops::sigmoid_cross_entropy_with_logits(t.b, z, x)), want, 1e-12);
  Output a = t.feed(Tensor::from_vector<double>(Shape{2, 2}, {1, 2, 3, 4}));
  Output c = t.feed(Tensor::from_vector<double>(Shape{2, 2}, {1, 0, 3, 0}));
  CHECK(t.eval(ops::mean_squared_error(t.b, a, c)).data<double>()[0] == doctest::Approx(5.0));
  CHECK(t.eval(ops::l2_loss(t.b, a)).data<double>()[0] == doctest::Approx(15.0));
}

TEST_CASE("bias_add adds along the last dim") {
  OpTest t;
  Output v = t.feed(Tensor::from_vector<float>(Shape{2, 1, 2}, {1, 2, 3, 4}));
  Output bias = t.feed(Tensor::from_vector<float>(Shape{2}, {10, 20}));
  CHECK(t.eval(ops::bias_add(t.b, v, bias)).to_vector<float>() ==
        std::vector<float>{11, 22, 13, 24});
  OpTest bad;
  ops::bias_add(bad.b, bad.feed(Tensor(DType::kFloat32, Shape{2, 3})),
                bad.feed(Tensor(DType::kFloat32, Shape{2})));
  CHECK(bad.b.status().message().find("does not match") != std::string::npos);
}

TEST_CASE("dropout keeps about 1-rate of the values, scaled, and is reproducible when seeded") {
  auto run = [](int64_t graph_seed) {
    OpTest t;
    t.g.set_seed(graph_seed);
    Output x = t.feed(Tensor::from_vector<float>(Shape{10000}, std::vector<float>(10000, 1.0f)));
    return t.eval(ops::dropout(t.b, x, 0.25, /*training=*/true)).to_vector<float>();
  };
  std::vector<float> a = run(1), b = run(1), c = run(2);
  CHECK(a == b);
  CHECK(a != c);
  int kept = 0;
  for (float v : a) {
    CHECK((v == 0.0f || v == doctest::Approx(1.0f / 0.75f)));
    kept += v != 0;
  }
  CHECK(kept > 7200);
  CHECK(kept < 7800);
  OpTest t;
  Output x = t.feed(Tensor::scalar<float>(2));
  CHECK(ops::dropout(t.b, x, 0.5, /*training=*/false) == x);
  ops::dropout(t.b, x, 1.0, true);
  CHECK(t.b.status().message().find("rate must be in [0, 1)") != std::string::npos);
}

TEST_CASE("l2_normalize, moments and batch_normalization: values and gradients") {
  OpTest t;
  Output x = t.feed(Tensor::from_vector<double>(Shape{2, 2}, {3, 4, 0, 0}));
  CHECK_CLOSE_TENSOR(t.eval(ops::l2_normalize(t.b, x, {1})), (std::vector<double>{0.6, 0.8, 0, 0}),
                     1e-12);  // zeros stay zeros
  ops::Moments m = ops::moments(t.b, x, {0});
  CHECK_CLOSE_TENSOR(t.eval(m.mean), (std::vector<double>{1.5, 2}), 1e-12);
  CHECK_CLOSE_TENSOR(t.eval(m.variance), (std::vector<double>{2.25, 4}), 1e-12);
  CHECK(t.b.graph().shape(ops::moments(t.b, x, {0}, true).mean) == Shape{1, 2});
  Output y = ops::batch_normalization(t.b, x, m.mean, m.variance, {}, {}, 0);
  CHECK_CLOSE_TENSOR(t.eval(y), (std::vector<double>{1, 1, -1, -1}), 1e-12);

  std::mt19937_64 rng(7);
  auto normalized = [](GraphBuilder& b, const std::vector<Output>& in) {
    return ops::l2_normalize(b, in[0], {1});
  };
  CHECK(testing::gradient_error(normalized, {random_tensor<double>(Shape{3, 4}, rng, 0.5, 2)}) <
        1e-6);
  auto variance = [](GraphBuilder& b, const std::vector<Output>& in) {
    return ops::moments(b, in[0], {0}).variance;
  };
  CHECK(testing::gradient_error(variance, {random_tensor<double>(Shape{5, 3}, rng)}) < 1e-6);
  auto bn = [](GraphBuilder& b, const std::vector<Output>& in) {
    ops::Moments m = ops::moments(b, in[0], {0});
    return ops::batch_normalization(b, in[0], m.mean, m.variance, in[1], in[2], 1e-3);
  };
  CHECK(testing::gradient_error(
            bn, {random_tensor<double>(Shape{6, 2}, rng), random_tensor<double>(Shape{2}, rng),
                 random_tensor<double>(Shape{2}, rng, 0.5, 2)}) < 1e-5);
}

TEST_CASE("top_k: the k largest, largest first, ties to the lower index; in_top_k counts ties in") {
  OpTest t;
  Output x = t.feed(Tensor::from_vector<float>(Shape{2, 4}, {1, 3, 3, 2, -1, -5, 0, -2}));
  ops::TopK top = ops::top_k(t.b, x, 3);
  auto got = t.run({top.values, top.indices});
  REQUIRE(got.ok());
  CHECK((*got)[0].to_vector<float>() == std::vector<float>{3, 3, 2, 0, -1, -2});
  CHECK((*got)[1].to_vector<int32_t>() == std::vector<int32_t>{1, 2, 3, 2, 0, 3});
  // Row 0's target 3 (value 2) has two larger values: in the top 3, not the top 2; row 1's
  // target 2 (value 0) is its largest. A tie counts as in (row 0's target 2 ties its index 1).
  Output targets = t.feed(Tensor::from_vector<int64_t>(Shape{2}, {3, 2}));
  CHECK(t.eval(ops::in_top_k(t.b, x, targets, 2)).to_vector<bool>() ==
        std::vector<bool>{false, true});
  CHECK(t.eval(ops::in_top_k(t.b, x, targets, 3)).to_vector<bool>() ==
        std::vector<bool>{true, true});
  Output tied = t.feed(Tensor::from_vector<int32_t>(Shape{2}, {2, 7}));  // 7: out of range
  CHECK(t.eval(ops::in_top_k(t.b, x, tied, 1)).to_vector<bool>() == std::vector<bool>{true, false});
  OpTest bad;
  auto too_many =
      bad.run({ops::top_k(bad.b, bad.feed(Tensor(DType::kFloat32, Shape{2, 3})), 4).values});
  REQUIRE_FALSE(too_many.ok());
  CHECK(too_many.status().message().find("k 4 is more than the last dimension") !=
        std::string::npos);
}
