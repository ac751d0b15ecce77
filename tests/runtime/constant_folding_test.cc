// Constant folding: what is fixed before a step folds to the values the step would compute;
// what depends on data, state or chance does not, unless the state is a frozen variable.
#include "runtime/constant_folding.h"

#include <doctest/doctest.h>

#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/random_ops.h"
#include "ops/state_ops.h"
#include "runtime/executor.h"

using namespace troupe;
using namespace troupe::runtime;

TEST_CASE("constant folding: shapes known, pure ops fold; data, variables and randomness do not") {
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{2, 3}, "x");
  Output half = ops::div(b, ops::ones_like(b, x), 2.0);  // fixed: only x's shape is read
  Output scaled = ops::mul(b, x, half);                  // reads x's values: not fixed
  Output noise = ops::random_uniform(b, Shape{2, 3});    // chance: never fixed
  Output w = ops::variable(b, "w", Shape{2, 3}, DType::kFloat32,
                           ops::zeros(b, Shape{2, 3}, DType::kFloat32));
  Output shifted = ops::add(b, w, ops::ones_like(b, w));  // a variable's value: not fixed
  Output sum = ops::add(b, ops::add(b, scaled, noise), shifted);
  REQUIRE(b.ok());
  std::vector<int> order = runtime::prune_graph(g, {x}, {sum, half}, {});
  auto folded = runtime::fold_constants(g, order, {x});
  REQUIRE(folded.count(half.node) == 1);
  CHECK(folded.at(half.node)[0].to_vector<float>() == std::vector<float>(6, 0.5f));
  CHECK(folded.count(scaled.node) == 0);
  CHECK(folded.count(noise.node) == 0);
  CHECK(folded.count(shifted.node) == 0);
  CHECK(folded.count(x.node) == 0);
  // The ones shaped like the variable are fixed (its shape is known); adding them to it is not.
  CHECK(folded.count(g.node(shifted.node).inputs[1].node) == 1);

  // A fed output is never folded, even when it could be.
  std::vector<int> fed_order = runtime::prune_graph(g, {half}, {scaled}, {});
  CHECK(runtime::fold_constants(g, fed_order, {half}).count(half.node) == 0);
}

TEST_CASE(
    "a frozen variable is a constant: what reads only it folds; a value that does not fit is "
    "refused") {
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output w = ops::variable(b, "w", Shape{2, 3}, DType::kFloat32,
                           ops::zeros(b, Shape{2, 3}, DType::kFloat32));
  Output shifted = ops::add(b, w, ops::ones_like(b, w));
  REQUIRE(b.ok());
  const Tensor value = Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(!g.freeze_variable(shifted.node, value).ok());  // not a Variable
  CHECK(!g.freeze_variable(w.node, Tensor(DType::kInt32, Shape{2, 3})).ok());
  const runtime::Status wrong_shape =
      g.freeze_variable(w.node, Tensor(DType::kFloat32, Shape{3, 2}));
  CHECK(wrong_shape.message().find("'w'") != std::string::npos);
  CHECK(g.node(w.node).op == "Variable");

  REQUIRE(g.freeze_variable(w.node, value).ok());
  CHECK(g.node(w.node).op == "Const");
  CHECK(g.variables().empty());
  std::vector<int> order = runtime::prune_graph(g, {}, {shifted}, {});
  auto folded = runtime::fold_constants(g, order, {});
  REQUIRE(folded.count(shifted.node) == 1);
  CHECK(folded.at(shifted.node)[0].to_vector<float>() == std::vector<float>{2, 3, 4, 5, 6, 7});
}
