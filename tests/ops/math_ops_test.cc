// Elementwise math ops against double-precision references on random inputs, including
// broadcasting and empty and size-1 dimensions.
#include "ops/math_ops.h"

#include <doctest/doctest.h>

#include <cmath>
#include <functional>

#include "harness/op_harness.h"
#include "ops/array_ops.h"
#include "ops/nn_ops.h"
#include "runtime/gradients.h"

using namespace troupe;
using namespace troupe::runtime;
using testing::OpTest;
using testing::random_tensor;

namespace {

const std::vector<Shape> kShapes = {Shape{},     Shape{0},       Shape{1},
                                    Shape{3, 4}, Shape{2, 1, 5}, Shape{4, 0, 2}};

struct UnaryCase {
  const char* name;
  std::function<Output(GraphBuilder&, Output)> op;
  std::function<double(double)> ref;
  double lo = -3, hi = 3;
  double dtol = 1e-12, ftol = 2e-6;  // float64's and float32's
};

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }

// digamma by its recurrence up to x >= 10, then its asymptotic series (error below 1e-15).
double digamma_ref(double x) {
  double shift = 0;
  for (; x < 10; x += 1) shift -= 1 / x;
  const double r = 1 / (x * x);
  return shift + std::log(x) - 0.5 / x -
         r * (1.0 / 12 - r * (1.0 / 120 - r * (1.0 / 252 - r * (1.0 / 240 - r / 132))));
}

std::vector<UnaryCase> unary_cases() {
  return {
      {"neg", ops::neg, [](double x) { return -x; }},
      {"abs", ops::abs, [](double x) { return std::abs(x); }},
      {"sign", ops::sign, [](double x) { return double((x > 0) - (x < 0)); }},
      {"square", ops::square, [](double x) { return x * x; }},
      {"sqrt", ops::sqrt, [](double x) { return std::sqrt(x); }, 0, 5},
      {"rsqrt", ops::rsqrt, [](double x) { return 1 / std::sqrt(x); }, 0.1, 5},
      {"exp", ops::exp, [](double x) { return std::exp(x); }},
      {"log", ops::log, [](double x) { return std::log(x); }, 0.01, 5},
      {"log1p", ops::log1p, [](double x) { return std::log1p(x); }, -0.9, 5},
      {"cos", ops::cos, [](double x) { return std::cos(x); }},
      {"sin", ops::sin, [](double x) { return std::sin(x); }},
      {"floor", ops::floor, [](double x) { return std::floor(x); }},
      {"round", ops::round, [](double x) { return std::nearbyint(x); }},
      {"relu", ops::relu, [](double x) { return std::max(x, 0.0); }},
      {"relu6", ops::relu6, [](double x) { return std::min(std::max(x, 0.0), 6.0); }, -3, 9},
      {"elu", ops::elu, [](double x) { return x > 0 ? x : std::exp(x) - 1; }},
      {"selu", ops::selu,
       [](double x) {
         return 1.0507009873554805 * (x > 0 ? x : 1.6732632423543772 * (std::exp(x) - 1));
       }},
      {"leaky_relu", [](GraphBuilder& b, Output x) { return ops::leaky_relu(b, x, 0.1); },
       [](double x) { return x > 0 ? x : 0.1 * x; }},
      {"sigmoid", ops::sigmoid, sigmoid_ref, -20, 20},
      {"tanh", ops::tanh, [](double x) { return std::tanh(x); }},
      {"softplus", ops::softplus, [](double x) { return std::log1p(std::exp(x)); }, -20, 20},
      {"softsign", ops::softsign, [](double x) { return x / (1 + std::abs(x)); }},
      {"ceil", ops::ceil, [](double x) { return std::ceil(x); }},
      {"tan", ops::tan, [](double x) { return std::tan(x); }, -1.2, 1.2},
      {"asin", ops::asin, [](double x) { return std::asin(x); }, -0.99, 0.99},
      {"acos", ops::acos, [](double x) { return std::acos(x); }, -0.99, 0.99},
      {"atan", ops::atan, [](double x) { return std::atan(x); }},
      {"sinh", ops::sinh, [](double x) { return std::sinh(x); }},
      {"cosh", ops::cosh, [](double x) { return std::cosh(x); }},
      {"asinh", ops::asinh, [](double x) { return std::asinh(x); }},
      {"acosh", ops::acosh, [](double x) { return std::acosh(x); }, 1, 5},
      {"atanh", ops::atanh, [](double x) { return std::atanh(x); }, -0.99, 0.99},
      {"erf", ops::erf, [](double x) { return std::erf(x); }},
      {"erfc", ops::erfc, [](double x) { return std::erfc(x); }},
      {"lgamma", ops::lgamma, [](double x) { return std::lgamma(x); }, 0.1, 8, 1e-12, 1e-5},
      {"digamma", ops::digamma, digamma_ref, 0.1, 8, 1e-12, 1e-5},
      {"expm1", ops::expm1, [](double x) { return std::expm1(x); }},
      {"reciprocal", ops::reciprocal, [](double x) { return 1 / x; }, 0.2, 5},
  };
}

template <class T>
void check_unary(const UnaryCase& c, double tol) {
  std::mt19937_64 rng(11);
  for (const Shape& s : kShapes) {
    INFO(c.name, " ", runtime::dtype_name(runtime::dtype_of<T>()), s);
    OpTest t;
    Tensor x = random_tensor<T>(s, rng, c.lo, c.hi);
    Tensor y = t.eval(c.op(t.b, t.feed(x)));
    CHECK(y.shape() == s);
    std::vector<double> want;
    for (double v : testing::values(x)) want.push_back(c.ref(v));
    CHECK_CLOSE_TENSOR(y, want, tol);
  }
}

// Reference broadcasting: out[i] = f(a[ia], b[ib]) by explicit index arithmetic.
std::vector<double> broadcast_ref(const Tensor& a, const Tensor& b, const Shape& out,
                                  const std::function<double(double, double)>& f) {
  std::vector<double> va = testing::values(a), vb = testing::values(b), r;
  const int rank = out.rank();
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    std::vector<int64_t> idx(rank);
    int64_t rem = i;
    for (int d = rank - 1; d >= 0; --d) {
      idx[d] = rem % out.dim(d);
      rem /= out.dim(d);
    }
    auto offset = [&](const Shape& s) {
      int64_t off = 0;
      for (int d = 0; d < s.rank(); ++d) {
        int64_t id = s.dim(d) == 1 ? 0 : idx[rank - s.rank() + d];
        off = off * s.dim(d) + id;
      }
      return off;
    };
    r.push_back(f(va[offset(a.shape())], vb[offset(b.shape())]));
  }
  return r;
}

const std::vector<std::pair<Shape, Shape>> kBroadcastPairs = {
    {Shape{3, 4}, Shape{3, 4}}, {Shape{3, 4}, Shape{4}},       {Shape{3, 1}, Shape{1, 4}},
    {Shape{}, Shape{2, 3}},     {Shape{2, 3}, Shape{}},        {Shape{0, 3}, Shape{3}},
    {Shape{1}, Shape{0}},       {Shape{2, 1, 3}, Shape{4, 1}}, {Shape{5, 1, 1}, Shape{1, 2, 2}}};

struct BinaryCase {
  const char* name;
  std::function<Output(GraphBuilder&, Output, Output)> op;
  std::function<double(double, double)> ref;
  double lo = -3, hi = 3;
};

std::vector<BinaryCase> binary_cases() {
  return {
      {"add", [](GraphBuilder& b, Output x, Output y) { return ops::add(b, x, y); },
       [](double x, double y) { return x + y; }},
      {"sub", [](GraphBuilder& b, Output x, Output y) { return ops::sub(b, x, y); },
       [](double x, double y) { return x - y; }},
      {"mul", [](GraphBuilder& b, Output x, Output y) { return ops::mul(b, x, y); },
       [](double x, double y) { return x * y; }},
      {"div", [](GraphBuilder& b, Output x, Output y) { return ops::div(b, x, y); },
       [](double x, double y) { return x / y; }, 0.5, 3},
      {"pow", ops::pow, [](double x, double y) { return std::pow(x, y); }, 0.1, 3},
      {"maximum", ops::maximum, [](double x, double y) { return std::max(x, y); }},
      {"minimum", ops::minimum, [](double x, double y) { return std::min(x, y); }},
      {"less", ops::less, [](double x, double y) { return double(x < y); }},
      {"less_equal", ops::less_equal, [](double x, double y) { return double(x <= y); }},
      {"greater", ops::greater, [](double x, double y) { return double(x > y); }},
      {"greater_equal", ops::greater_equal, [](double x, double y) { return double(x >= y); }},
      {"equal", ops::equal, [](double x, double y) { return double(x == y); }},
      {"not_equal", ops::not_equal, [](double x, double y) { return double(x != y); }},
      {"atan2", ops::atan2, [](double y, double x) { return std::atan2(y, x); }},
      {"squared_difference", ops::squared_difference,
       [](double x, double y) { return (x - y) * (x - y); }},
      {"floor_div", ops::floor_div, [](double x, double y) { return std::floor(x / y); }, 0.5, 3},
      {"floor_mod", ops::floor_mod, [](double x, double y) { return x - std::floor(x / y) * y; },
       0.5, 3},
  };
}

template <class T>
void check_binary(const BinaryCase& c, double tol, bool round_inputs = false) {
  std::mt19937_64 rng(13);
  for (const auto& [sa, sb] : kBroadcastPairs) {
    INFO(c.name, " ", runtime::dtype_name(runtime::dtype_of<T>()), sa, " ", sb);
    OpTest t;
    Tensor a = random_tensor<T>(sa, rng, c.lo, c.hi);
    Tensor b = random_tensor<T>(sb, rng, c.lo, c.hi);
    if (round_inputs) {  // so that equal and not_equal see some equal pairs
      for (int64_t i = 0; i < a.num_elements(); ++i) a.data<T>()[i] = std::round(a.data<T>()[i]);
      for (int64_t i = 0; i < b.num_elements(); ++i) b.data<T>()[i] = std::round(b.data<T>()[i]);
    }
    Tensor y = t.eval(c.op(t.b, t.feed(a), t.feed(b)));
    Shape out;
    REQUIRE(runtime::broadcast_shapes(sa, sb, &out));
    CHECK(y.shape() == out);
    CHECK_CLOSE_TENSOR(y, broadcast_ref(a, b, out, c.ref), tol);
  }
}

}  // namespace

TEST_CASE("unary ops match double-precision references (float64 and float32)") {
  for (const UnaryCase& c : unary_cases()) {
    check_unary<double>(c, c.dtol);
    check_unary<float>(c, c.ftol);
  }
}

TEST_CASE("integer unary ops") {
  OpTest t;
  Output x = t.feed(Tensor::from_vector<int32_t>(Shape{4}, {-3, 0, 2, -1}));
  CHECK(t.eval(ops::neg(t.b, x)).to_vector<int32_t>() == std::vector<int32_t>{3, 0, -2, 1});
  CHECK(t.eval(ops::abs(t.b, x)).to_vector<int32_t>() == std::vector<int32_t>{3, 0, 2, 1});
  CHECK(t.eval(ops::sign(t.b, x)).to_vector<int32_t>() == std::vector<int32_t>{-1, 0, 1, -1});
  CHECK(t.eval(ops::square(t.b, x)).to_vector<int32_t>() == std::vector<int32_t>{9, 0, 4, 1});
  CHECK(t.eval(ops::relu(t.b, x)).to_vector<int32_t>() == std::vector<int32_t>{0, 0, 2, 0});
}

TEST_CASE("round is half to even, as TF and numpy") {
  OpTest t;
  Output x = t.feed(Tensor::from_vector<double>(Shape{5}, {0.5, 1.5, 2.5, -0.5, -1.5}));
  CHECK(t.eval(ops::round(t.b, x)).to_vector<double>() == std::vector<double>{0, 2, 2, -0, -2});
}

TEST_CASE("binary ops broadcast like numpy (float64, float32, int32)") {
  for (const BinaryCase& c : binary_cases()) {
    check_binary<double>(c, 1e-12, std::string(c.name).find("equal") != std::string::npos);
    check_binary<float>(c, 2e-6);
  }
  for (const BinaryCase& c : binary_cases()) {
    std::string n = c.name;
    // Float only, or with divisors: their integer forms are checked on their own below.
    if (n == "pow" || n == "div" || n == "atan2" || n == "floor_div" || n == "floor_mod") continue;
    BinaryCase ints = c;
    ints.lo = -5;
    ints.hi = 5;
    check_binary<int32_t>(ints, 0);
    check_binary<int64_t>(ints, 0);
  }
}

TEST_CASE("floor_div and floor_mod round toward negative infinity, as Python's // and %") {
  OpTest t;
  Output x = t.feed(Tensor::from_vector<int32_t>(Shape{6}, {7, -7, 7, -7, 6, 0}));
  Output y = t.feed(Tensor::from_vector<int32_t>(Shape{6}, {2, 2, -2, -2, 3, 5}));
  CHECK(t.eval(ops::floor_div(t.b, x, y)).to_vector<int32_t>() ==
        std::vector<int32_t>{3, -4, -4, 3, 2, 0});
  CHECK(t.eval(ops::floor_mod(t.b, x, y)).to_vector<int32_t>() ==
        std::vector<int32_t>{1, 1, -1, -1, 0, 0});
  Output fx = t.feed(Tensor::from_vector<double>(Shape{2}, {-7.5, 7.5}));
  Output fy = t.feed(Tensor::from_vector<double>(Shape{2}, {2, -2}));
  CHECK(t.eval(ops::floor_mod(t.b, fx, fy)).to_vector<double>() == std::vector<double>{0.5, -0.5});
  OpTest zero;
  auto by_zero = zero.run({ops::floor_mod(zero.b, zero.feed(Tensor::scalar<int32_t>(3)),
                                          zero.feed(Tensor::scalar<int32_t>(0)))});
  REQUIRE_FALSE(by_zero.ok());
  CHECK(by_zero.status().message().find("integer division by zero") != std::string::npos);
}

TEST_CASE("stable sigmoid and softplus at the extremes") {
  OpTest t;
  Output x = t.feed(Tensor::from_vector<float>(Shape{3}, {-100, 0, 100}));
  auto s = t.eval(ops::sigmoid(t.b, x)).to_vector<float>();
  CHECK(s[0] == doctest::Approx(0.0f));
  CHECK(s[1] == doctest::Approx(0.5f));
  CHECK(s[2] == doctest::Approx(1.0f));
  auto sp = t.eval(ops::softplus(t.b, x)).to_vector<float>();
  CHECK(sp[0] == doctest::Approx(0.0f));
  CHECK(sp[2] == doctest::Approx(100.0f));
}

TEST_CASE("logical ops, select and cast") {
  OpTest t;
  Output p = t.feed(Tensor::from_vector<bool>(Shape{4}, {true, true, false, false}));
  Output q = t.feed(Tensor::from_vector<bool>(Shape{4}, {true, false, true, false}));
  CHECK(t.eval(ops::logical_and(t.b, p, q)).to_vector<bool>() ==
        std::vector<bool>{true, false, false, false});
  CHECK(t.eval(ops::logical_or(t.b, p, q)).to_vector<bool>() ==
        std::vector<bool>{true, true, true, false});
  CHECK(t.eval(ops::logical_not(t.b, p)).to_vector<bool>() ==
        std::vector<bool>{false, false, true, true});
  Output a = t.feed(Tensor::from_vector<float>(Shape{2, 2}, {1, 2, 3, 4}));
  Output c = t.feed(Tensor::scalar<float>(-1));
  Output cond = t.feed(Tensor::from_vector<bool>(Shape{2}, {true, false}));
  CHECK(t.eval(ops::select(t.b, cond, a, c)).to_vector<float>() ==
        std::vector<float>{1, -1, 3, -1});
  Output f = t.feed(Tensor::from_vector<double>(Shape{4}, {-1.7, 0, 0.2, 255.9}));
  CHECK(t.eval(ops::cast(t.b, f, DType::kInt32)).to_vector<int32_t>() ==
        std::vector<int32_t>{-1, 0, 0, 255});
  CHECK(t.eval(ops::cast(t.b, f, DType::kBool)).to_vector<bool>() ==
        std::vector<bool>{true, false, true, true});
  CHECK(t.eval(ops::cast(t.b, p, DType::kFloat32)).to_vector<float>() ==
        std::vector<float>{1, 1, 0, 0});
}

TEST_CASE("matmul and batch_matmul shape errors name the operands") {
  OpTest t;
  Output a = t.feed(Tensor(DType::kFloat32, Shape{2, 3}));
  ops::matmul(t.b, a, a);
  CHECK(t.b.status().message().find("inner dimensions differ") != std::string::npos);
  OpTest u;
  Output x = u.feed(Tensor(DType::kFloat32, Shape{2, 3, 4}));
  Output y = u.feed(Tensor(DType::kFloat32, Shape{3, 4, 5}));
  ops::batch_matmul(u.b, x, y);
  CHECK(u.b.status().message().find("batch dimensions") != std::string::npos);
}

TEST_CASE("clip_by_value clips, and its gradient passes only inside the range") {
  OpTest t;
  Output x = t.feed(Tensor::from_vector<double>(Shape{4}, {-3, -0.5, 0.5, 3}));
  Output y = ops::clip_by_value(t.b, x, -1, 1);
  CHECK(t.eval(y).to_vector<double>() == std::vector<double>{-1, -0.5, 0.5, 1});
  Output dx = runtime::gradients(t.b, {ops::reduce_sum(t.b, y)}, {x})[0];
  CHECK(t.eval(dx).to_vector<double>() == std::vector<double>{0, 1, 1, 0});
  OpTest bad;
  ops::clip_by_value(bad.b, bad.feed(Tensor::scalar<float>(1)), 2, 1);
  CHECK(bad.b.status().message().find("lo 2 is above hi 1") != std::string::npos);
}

TEST_CASE("cumsum: inclusive, exclusive, reversed, along any axis, of integers too") {
  OpTest t;
  Output x = t.feed(Tensor::from_vector<float>(Shape{2, 3}, {1, 2, 3, 4, 5, 6}));
  CHECK(t.eval(ops::cumsum(t.b, x, 1)).to_vector<float>() == std::vector<float>{1, 3, 6, 4, 9, 15});
  CHECK(t.eval(ops::cumsum(t.b, x, -1, /*exclusive=*/true)).to_vector<float>() ==
        std::vector<float>{0, 1, 3, 0, 4, 9});
  CHECK(t.eval(ops::cumsum(t.b, x, 1, false, /*reverse=*/true)).to_vector<float>() ==
        std::vector<float>{6, 5, 3, 15, 11, 6});
  CHECK(t.eval(ops::cumsum(t.b, x, 1, true, true)).to_vector<float>() ==
        std::vector<float>{5, 3, 0, 11, 6, 0});
  CHECK(t.eval(ops::cumsum(t.b, x, 0)).to_vector<float>() == std::vector<float>{1, 2, 3, 5, 7, 9});
  Output ints = t.feed(Tensor::from_vector<int64_t>(Shape{4}, {1, 1, 1, 1}));
  CHECK(t.eval(ops::cumsum(t.b, ints)).to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3, 4});
  OpTest bad;
  ops::cumsum(bad.b, bad.feed(Tensor::from_vector<float>(Shape{2}, {1, 2})), 1);
  CHECK(bad.b.status().message().find("axis 1 out of range") != std::string::npos);
}
