#include "runtime/executor.h"

#include <doctest/doctest.h>

#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/state_ops.h"

using namespace troupe;
using namespace troupe::runtime;

TEST_CASE("executor runs only what the fetches need, with feeds cutting the graph") {
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{2}, "x");
  Output unfed = ops::placeholder(b, DType::kFloat32, Shape{2}, "unfed");
  Output y = ops::mul(b, x, 3.0);
  Output z = ops::add(b, unfed, y);
  REQUIRE(b.ok());
  runtime::Executor exec(g);
  Tensor xv = Tensor::from_vector<float>(Shape{2}, {1, 2});
  auto r = exec.run({{x, xv}}, {y});
  REQUIRE(r.ok());
  CHECK((*r)[0].to_vector<float>() == std::vector<float>{3, 6});
  // Feeding an inner output overrides it.
  r = exec.run({{y, Tensor::from_vector<float>(Shape{2}, {10, 20})},
                {unfed, Tensor::from_vector<float>(Shape{2}, {1, 1})}},
               {z});
  REQUIRE(r.ok());
  CHECK((*r)[0].to_vector<float>() == std::vector<float>{11, 21});
  // An unfed placeholder on the path is an error that names it; the executor stays usable.
  r = exec.run({{x, xv}}, {z});
  CHECK_FALSE(r.ok());
  CHECK(r.status().message().find("placeholder 'unfed' must be fed") != std::string::npos);
  CHECK(exec.run({{x, xv}}, {y}).ok());
}

TEST_CASE("feeds are checked against the graph") {
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{-1, 3}, "x");
  Output y = ops::relu(b, x);
  runtime::Executor exec(g);
  auto r = exec.run({{x, Tensor(DType::kFloat64, Shape{1, 3})}}, {y});
  CHECK(r.status().message().find("feed 'x:0': expects float32, got float64") != std::string::npos);
  r = exec.run({{x, Tensor(DType::kFloat32, Shape{1, 4})}}, {y});
  CHECK(r.status().message().find("expects shape [?,3], got [1,4]") != std::string::npos);
  r = exec.run({{x, Tensor()}}, {y});
  CHECK_FALSE(r.ok());
  CHECK(exec.run({{x, Tensor(DType::kFloat32, Shape{5, 3})}}, {y}).ok());
  CHECK(exec.run({{x, Tensor(DType::kFloat32, Shape{0, 3})}}, {y}).ok());
}

TEST_CASE("a failing kernel names its node and op; the next step works") {
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output a = ops::placeholder(b, DType::kInt32, Shape{2}, "a");
  Output c = ops::placeholder(b, DType::kInt32, Shape{2}, "c");
  Output q = ops::div(b, a, c);
  runtime::Executor exec(g);
  Tensor ones = Tensor::from_vector<int32_t>(Shape{2}, {1, 1});
  auto r = exec.run({{a, ones}, {c, Tensor::from_vector<int32_t>(Shape{2}, {1, 0})}}, {q});
  CHECK_FALSE(r.ok());
  CHECK(r.status().message() == "Div 'Div': integer division by zero");
  r = exec.run({{a, Tensor::from_vector<int32_t>(Shape{2}, {7, -7})},
                {c, Tensor::from_vector<int32_t>(Shape{2}, {2, 2})}},
               {q});
  REQUIRE(r.ok());
  CHECK((*r)[0].to_vector<int32_t>() == std::vector<int32_t>{3, -3});
}

TEST_CASE("in-place kernels never overwrite a value someone else still reads") {
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{3}, "x");
  Output e = ops::exp(b, x);
  Output n1 = ops::neg(b, e);  // could reuse e's buffer, but e is fetched too
  Output n2 = ops::neg(b, n1);
  runtime::Executor exec(g);
  Tensor xv = Tensor::from_vector<float>(Shape{3}, {0, 0, 0});
  auto r = exec.run({{x, xv}}, {e, n2});
  REQUIRE(r.ok());
  CHECK((*r)[0].to_vector<float>() == std::vector<float>{1, 1, 1});
  CHECK((*r)[1].to_vector<float>() == std::vector<float>{1, 1, 1});
  CHECK(xv.to_vector<float>() == std::vector<float>{0, 0, 0});  // the caller's feed is intact
}

TEST_CASE("control dependencies order side effects") {
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output v = ops::variable(b, "v", Shape{}, DType::kFloat32, ops::scalar(b, 1, DType::kFloat32));
  int init = ops::global_variables_initializer(b);
  Output inc = ops::assign_add(b, v, ops::scalar(b, 1, DType::kFloat32));
  int after = ops::no_op(b, {inc.node});
  runtime::VariableStore vars;
  runtime::Executor exec(g, {.variables = &vars});
  CHECK(exec.run({}, {v}).status().message().find("not initialized") != std::string::npos);
  REQUIRE(exec.run({}, {}, {init}).ok());
  REQUIRE(exec.run({}, {}, {after}).ok());
  REQUIRE(exec.run({}, {}, {after}).ok());
  CHECK(vars.read("v")->data<float>()[0] == 3);
}
