// Optimizer update rules against hand-computed steps, minimize() end to end and gradient
// clipping.
#include "ops/training_ops.h"

#include <doctest/doctest.h>

#include <cmath>

#include "harness/op_harness.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/state_ops.h"

using namespace troupe;
using namespace troupe::runtime;
using testing::OpTest;

namespace {

// Runs `steps` updates of w (starting at w0) on loss = sum(w * g), so that the gradient is g.
std::vector<double> train(const ops::Optimizer& opt, std::vector<double> w0, std::vector<double> g,
                          int steps) {
  OpTest t;
  const Shape s{int64_t(w0.size())};
  Output w = ops::variable(t.b, "w", s, DType::kFloat64,
                           ops::constant(t.b, Tensor::from_vector<double>(s, w0)));
  Output loss =
      ops::reduce_sum(t.b, ops::mul(t.b, w, ops::constant(t.b, Tensor::from_vector<double>(s, g))));
  int train_op = ops::minimize(t.b, loss, opt);
  int init = ops::global_variables_initializer(t.b);
  REQUIRE_MESSAGE(t.b.ok(), t.b.status().to_string());
  runtime::Executor exec(t.g, {.variables = &t.vars});
  REQUIRE(exec.run({}, {}, {init}).ok());
  for (int i = 0; i < steps; ++i) REQUIRE(exec.run({}, {}, {train_op}).ok());
  CHECK(t.vars.read("global_step")->data<int64_t>()[0] == steps);
  return t.vars.read("w")->to_vector<double>();
}

}  // namespace

TEST_CASE("SGD and momentum (plain and Nesterov)") {
  auto w = train(ops::Optimizer::sgd(0.1), {1, 2}, {0.5, -1}, 2);
  CHECK(w[0] == doctest::Approx(1 - 2 * 0.05));
  CHECK(w[1] == doctest::Approx(2 + 2 * 0.1));
  // accum: g, then 0.9 g + g; w -= lr * accum each step.
  w = train(ops::Optimizer::momentum_sgd(0.1, 0.9), {1}, {1}, 2);
  CHECK(w[0] == doctest::Approx(1 - 0.1 * 1 - 0.1 * 1.9));
  // Nesterov: w -= lr * (g + m * accum_new).
  w = train(ops::Optimizer::momentum_sgd(0.1, 0.9, true), {1}, {1}, 2);
  CHECK(w[0] == doctest::Approx(1 - 0.1 * (1 + 0.9 * 1) - 0.1 * (1 + 0.9 * 1.9)));
}

TEST_CASE("Adagrad, Adam, RMSProp and FTRL follow TF's formulas") {
  double a1 = 0.1 + 1, a2 = a1 + 1;
  auto w = train(ops::Optimizer::adagrad(0.5), {1}, {1}, 2);
  CHECK(w[0] == doctest::Approx(1 - 0.5 / (std::sqrt(a1) + 1e-7) - 0.5 / (std::sqrt(a2) + 1e-7)));

  ops::Optimizer adam = ops::Optimizer::adam(0.01);
  double v = 1, m = 0, vv = 0;
  for (int t = 1; t <= 3; ++t) {
    m = 0.9 * m + 0.1 * 2;
    vv = 0.999 * vv + 0.001 * 4;
    double lr_t = 0.01 * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
    v -= lr_t * m / (std::sqrt(vv) + 1e-7);
  }
  CHECK(train(adam, {1}, {2}, 3)[0] == doctest::Approx(v).epsilon(1e-12));

  ops::Optimizer rms = ops::Optimizer::rmsprop(0.01);
  rms.momentum = 0.5;
  double x = 1, ms = 0, mom = 0;
  for (int t = 0; t < 2; ++t) {
    ms = 0.9 * ms + 0.1 * 9;
    mom = 0.5 * mom + 0.01 * 3 / std::sqrt(ms + 1e-7);
    x -= mom;
  }
  CHECK(train(rms, {1}, {3}, 2)[0] == doctest::Approx(x).epsilon(1e-12));
  rms.centered = true;
  x = 1, ms = 0, mom = 0;
  double mg = 0;
  for (int t = 0; t < 2; ++t) {
    ms = 0.9 * ms + 0.1 * 9;
    mg = 0.9 * mg + 0.1 * 3;
    mom = 0.5 * mom + 0.01 * 3 / std::sqrt(ms - mg * mg + 1e-7);
    x -= mom;
  }
  CHECK(train(rms, {1}, {3}, 2)[0] == doctest::Approx(x).epsilon(1e-12));

  // FTRL with l1 large enough zeroes the weight; without, it follows the closed form.
  CHECK(train(ops::Optimizer::ftrl(0.1, /*l1=*/10), {1}, {1}, 1)[0] == 0.0);
  double accum = 0.1, accum_new = 1.1,
         lin = 1 - (std::pow(accum_new, 0.5) - std::pow(accum, 0.5)) / 0.1 * 1;
  double quad = std::pow(accum_new, 0.5) / 0.1;
  CHECK(train(ops::Optimizer::ftrl(0.1), {1}, {1}, 1)[0] == doctest::Approx(-lin / quad));
}

TEST_CASE("minimize fits a linear regression") {
  OpTest t;
  t.g.set_seed(3);
  std::vector<float> xs, ys;
  for (int i = 0; i < 64; ++i) {
    xs.push_back(i / 32.0f - 1);
    ys.push_back(3 * xs.back() + 2);
  }
  Output x = t.feed(Tensor::from_vector<float>(Shape{64, 1}, xs));
  Output y = t.feed(Tensor::from_vector<float>(Shape{64, 1}, ys));
  Output w =
      ops::variable(t.b, "w", Shape{1, 1}, DType::kFloat32, ops::glorot_uniform(t.b, Shape{1, 1}));
  Output bias = ops::variable(t.b, "b", Shape{1}, DType::kFloat32,
                              ops::zeros(t.b, Shape{1}, DType::kFloat32));
  Output pred = ops::add(t.b, ops::matmul(t.b, x, w), bias);
  Output loss = ops::mean_squared_error(t.b, y, pred);
  ops::Optimizer opt = ops::Optimizer::momentum_sgd(0.1, 0.9);
  opt.clip_norm = 10;
  int train_op = ops::minimize(t.b, loss, opt);
  int init = ops::global_variables_initializer(t.b);
  REQUIRE(t.b.ok());
  runtime::Executor exec(t.g, {.variables = &t.vars});
  REQUIRE(exec.run(t.feeds, {}, {init}).ok());
  for (int i = 0; i < 300; ++i) REQUIRE(exec.run(t.feeds, {}, {train_op}).ok());
  CHECK(t.vars.read("w")->data<float>()[0] == doctest::Approx(3.0f).epsilon(1e-3));
  CHECK(t.vars.read("b")->data<float>()[0] == doctest::Approx(2.0f).epsilon(1e-3));
}

TEST_CASE("clip_by_global_norm scales all tensors together, only when over the limit") {
  OpTest t;
  Output a = t.feed(Tensor::from_vector<double>(Shape{2}, {3, 0}));
  Output c = t.feed(Tensor::from_vector<double>(Shape{1}, {4}));
  auto clipped = ops::clip_by_global_norm(t.b, {a, c}, 1.0);
  REQUIRE(clipped.size() == 3);
  CHECK(t.eval(clipped[2]).data<double>()[0] == doctest::Approx(5.0));
  CHECK(t.eval(clipped[0]).to_vector<double>()[0] == doctest::Approx(0.6));
  CHECK(t.eval(clipped[1]).to_vector<double>()[0] == doctest::Approx(0.8));
  auto loose = ops::clip_by_global_norm(t.b, {a, c}, 10.0);
  CHECK(t.eval(loose[0]).to_vector<double>()[0] == doctest::Approx(3.0));
}

namespace {

// Two steps on w [5, 2], w0[r][c] = r + c / 10, of loss = sum(rows_of(w) * c), c = [[1, 2],
// [3, 4], [5, 6]], where rows_of gathers rows 3, 1, 3 (sparse) or multiplies by the dense
// gradient those gathers have (dense). Returns w and, when `slot` is named, that slot.
std::pair<std::vector<double>, std::vector<double>> two_steps(const ops::Optimizer& opt,
                                                              bool sparse,
                                                              const std::string& slot = "") {
  OpTest t;
  const Shape s{5, 2};
  std::vector<double> w0;
  for (int r = 0; r < 5; ++r) w0.insert(w0.end(), {double(r), r + 0.1});
  Output w = ops::variable(t.b, "w", s, DType::kFloat64,
                           ops::constant(t.b, Tensor::from_vector<double>(s, w0)));
  Output loss;
  if (sparse) {
    Output rows =
        ops::gather(t.b, w, ops::constant(t.b, Tensor::from_vector<int64_t>(Shape{3}, {3, 1, 3})));
    Tensor c = Tensor::from_vector<double>(Shape{3, 2}, {1, 2, 3, 4, 5, 6});
    loss = ops::reduce_sum(t.b, ops::mul(t.b, rows, ops::constant(t.b, c)));
  } else {
    Tensor g = Tensor::from_vector<double>(s, {0, 0, 3, 4, 0, 0, 6, 8, 0, 0});
    loss = ops::reduce_sum(t.b, ops::mul(t.b, w, ops::constant(t.b, g)));
  }
  int train_op = ops::minimize(t.b, loss, opt);
  int init = ops::global_variables_initializer(t.b);
  REQUIRE_MESSAGE(t.b.ok(), t.b.status().to_string());
  bool has_sparse_update = false;
  for (int n = 0; n < t.g.num_nodes(); ++n) {
    has_sparse_update |= t.g.node(n).op.rfind("SparseApply", 0) == 0;
  }
  CHECK(has_sparse_update == sparse);
  runtime::Executor exec(t.g, {.variables = &t.vars});
  REQUIRE(exec.run({}, {}, {init}).ok());
  for (int i = 0; i < 2; ++i) REQUIRE(exec.run({}, {}, {train_op}).ok());
  std::vector<double> slot_value;
  if (!slot.empty()) slot_value = t.vars.read("w/" + slot)->to_vector<double>();
  return {t.vars.read("w")->to_vector<double>(), slot_value};
}

}  // namespace

TEST_CASE("gradients of gathers update only the gathered rows, as the dense rule would") {
  const std::vector<std::pair<ops::Optimizer, std::string>> cases{
      {ops::Optimizer::sgd(0.1), ""},
      {ops::Optimizer::momentum_sgd(0.1, 0.9, true), "Momentum"},
      {ops::Optimizer::adagrad(0.5), "Adagrad"},
      {ops::Optimizer::adam(0.1), "Adam_m"},
      {ops::Optimizer::rmsprop(0.1), "RMSProp_ms"},
      {ops::Optimizer::ftrl(0.5, 0.01, 0.01), "Ftrl_linear"}};
  for (const auto& [opt, slot] : cases) {
    INFO(opt.name());
    auto [dense, dense_slot] = two_steps(opt, false, slot);
    auto [sparse, sparse_slot] = two_steps(opt, true, slot);
    for (int r = 0; r < 5; ++r) {
      for (int c = 0; c < 2; ++c) {
        const int i = r * 2 + c;
        INFO("row ", r, " column ", c);
        if (r == 1 || r == 3) {
          // Row 3 was gathered twice: its gradient is the sum, as the dense one.
          CHECK(sparse[i] == doctest::Approx(dense[i]).epsilon(1e-12));
          if (!slot.empty()) CHECK(sparse_slot[i] == doctest::Approx(dense_slot[i]));
        } else {
          CHECK(sparse[i] == r + c / 10.0);  // untouched, bit for bit
          if (slot == "Adagrad") CHECK(sparse_slot[i] == 0.1);
          if (slot == "Adam_m" || slot == "RMSProp_ms") CHECK(sparse_slot[i] == 0.0);
        }
      }
    }
  }
}

TEST_CASE("clipping by global norm counts rows by their values") {
  // One step of SGD(1) with the gradient rows [[1, 2], [3, 4], [5, 6]] (norm sqrt(91)) clipped
  // to norm 1: row 3 moves by -(1 + 5, 2 + 6) / sqrt(91), row 1 by -(3, 4) / sqrt(91).
  ops::Optimizer opt = ops::Optimizer::sgd(1.0);
  opt.clip_norm = 1.0;
  OpTest t;
  const Shape s{5, 2};
  Output w = ops::variable(t.b, "w", s, DType::kFloat64, ops::zeros(t.b, s, DType::kFloat64));
  Output rows =
      ops::gather(t.b, w, ops::constant(t.b, Tensor::from_vector<int32_t>(Shape{3}, {3, 1, 3})));
  Tensor c = Tensor::from_vector<double>(Shape{3, 2}, {1, 2, 3, 4, 5, 6});
  Output loss = ops::reduce_sum(t.b, ops::mul(t.b, rows, ops::constant(t.b, c)));
  int train_op = ops::minimize(t.b, loss, opt);
  int init = ops::global_variables_initializer(t.b);
  REQUIRE_MESSAGE(t.b.ok(), t.b.status().to_string());
  runtime::Executor exec(t.g, {.variables = &t.vars});
  REQUIRE(exec.run({}, {}, {init}).ok());
  REQUIRE(exec.run({}, {}, {train_op}).ok());
  auto v = t.vars.read("w")->to_vector<double>();
  const double n = std::sqrt(91.0);
  CHECK(v[6] == doctest::Approx(-6 / n));
  CHECK(v[7] == doctest::Approx(-8 / n));
  CHECK(v[2] == doctest::Approx(-3 / n));
  CHECK(v[3] == doctest::Approx(-4 / n));
  CHECK(v[0] == 0.0);
}

TEST_CASE("a sparse update refuses rows outside the variable and values of the wrong size") {
  OpTest t;
  const Shape s{4, 2};
  ops::variable(t.b, "w", s, DType::kFloat64, ops::zeros(t.b, s, DType::kFloat64));
  Output values = t.feed(Tensor::from_vector<double>(Shape{1, 2}, {1, 1}));
  Output indices = t.feed(Tensor::from_vector<int64_t>(Shape{1}, {7}));
  Output lr = ops::scalar(t.b, 0.1, DType::kFloat64);
  Output update = t.b.add("SparseApplyGradientDescent", {values, indices, lr},
                          {{"var", std::string("w")}, {"shape", s}, {"dtype", DType::kFloat64}});
  int init = ops::global_variables_initializer(t.b);
  REQUIRE_MESSAGE(t.b.ok(), t.b.status().to_string());
  REQUIRE(t.run({}, {init}).ok());
  auto r = t.run({update});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("row 7") != std::string::npos);
  CHECK(r.status().message().find("'w'") != std::string::npos);
  CHECK(t.vars.read("w")->to_vector<double>() == std::vector<double>(8, 0.0));
}
