#include "runtime/gradients.h"

#include <doctest/doctest.h>

#include "harness/op_harness.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"

using namespace troupe;
using namespace troupe::runtime;
using testing::OpTest;

TEST_CASE("gradients undo broadcasting") {
  OpTest t;
  Output x = t.feed(Tensor::from_vector<double>(Shape{2, 3}, {1, 2, 3, 4, 5, 6}));
  Output bias = t.feed(Tensor::from_vector<double>(Shape{3}, {1, 1, 1}));
  Output s = t.feed(Tensor::scalar<double>(2.0));
  Output y = ops::reduce_sum(t.b, ops::mul(t.b, ops::add(t.b, x, bias), s));
  auto g = runtime::gradients(t.b, {y}, {x, bias, s});
  auto r = t.run(g);
  REQUIRE(r.ok());
  CHECK((*r)[0].to_vector<double>() == std::vector<double>(6, 2.0));
  CHECK((*r)[1].shape() == Shape{3});
  CHECK((*r)[1].to_vector<double>() == std::vector<double>(3, 4.0));
  CHECK((*r)[2].shape() == Shape{});
  CHECK((*r)[2].data<double>()[0] == doctest::Approx(27.0));  // sum(x + 1)
}

TEST_CASE("partial gradients of a reused value add up; stop_gradient blocks") {
  OpTest t;
  Output x = t.feed(Tensor::scalar<double>(3.0));
  Output y = ops::add(t.b, ops::mul(t.b, x, x), ops::stop_gradient(t.b, ops::mul(t.b, x, 5.0)));
  auto g = runtime::gradients(t.b, {y}, {x});
  CHECK(t.eval(g[0]).data<double>()[0] == doctest::Approx(6.0));
}

TEST_CASE("an unconnected x gets no gradient; grad_ys weight the ys") {
  OpTest t;
  Output x = t.feed(Tensor::scalar<double>(3.0));
  Output other = t.feed(Tensor::scalar<double>(1.0));
  Output y = ops::square(t.b, x);
  auto g = runtime::gradients(t.b, {y}, {x, other}, {ops::scalar(t.b, 10, DType::kFloat64)});
  CHECK_FALSE(g[1].valid());
  CHECK(t.eval(g[0]).data<double>()[0] == doctest::Approx(60.0));
}

TEST_CASE("gradients flow through multi-output ops when only one output is used") {
  OpTest t;
  Output x = t.feed(Tensor::from_vector<double>(Shape{4}, {1, 2, 3, 4}));
  auto parts = ops::split(t.b, x, 2, 0);
  Output y = ops::reduce_sum(t.b, ops::mul(t.b, parts[1], 3.0));
  auto g = runtime::gradients(t.b, {y}, {x});
  CHECK(t.eval(g[0]).to_vector<double>() == std::vector<double>{0, 0, 3, 3});
}

TEST_CASE("an op without a gradient on the path is an error naming it") {
  OpTest t;
  Output x = t.feed(Tensor::from_vector<double>(Shape{2}, {1, 2}));
  Output y = t.b.add("StridedSliceGrad", {x, x},
                     {{"begin", std::vector<int64_t>{0}},
                      {"end", std::vector<int64_t>{2}},
                      {"strides", std::vector<int64_t>{1}}});
  // StridedSliceGrad says no_gradient: nothing flows, which is not an error.
  auto g = runtime::gradients(t.b, {y}, {x});
  CHECK(t.b.ok());
  CHECK_FALSE(g[0].valid());
}
