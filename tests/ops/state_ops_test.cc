// Variables against the store: VariableGather, the rows of a variable read where it lives (the
// plan compiler makes it from a Gather of a Variable on another task: actors/step_plan.h); the
// scatter updates, row by row; read_value inside a loop.
#include "ops/state_ops.h"

#include <doctest/doctest.h>

#include "harness/op_harness.h"
#include "ops/array_ops.h"
#include "ops/control_flow_ops.h"
#include "ops/math_ops.h"
#include "runtime/gradients.h"

using namespace troupe;
using namespace troupe::runtime;
using testing::OpTest;

namespace {

Output variable_gather(OpTest& t, const std::string& var, const Shape& shape, Output indices) {
  return t.b.add("VariableGather", {indices},
                 {{"var", var}, {"shape", shape}, {"dtype", DType::kFloat32}});
}

}  // namespace

TEST_CASE("VariableGather gives a variable's rows, and refuses what does not fit, naming it") {
  OpTest t;
  t.vars.assign("emb", Tensor::from_vector<float>(Shape{3, 2}, {0, 1, 2, 3, 4, 5}));
  Output ids = t.feed(Tensor::from_vector<int64_t>(Shape{2, 2}, {2, 0, 2, 1}));
  Output rows = variable_gather(t, "emb", Shape{3, 2}, ids);
  CHECK(t.b.shape(rows) == Shape{2, 2, 2});
  Tensor got = t.eval(rows);
  CHECK(got.to_vector<float>() == std::vector<float>{4, 5, 0, 1, 4, 5, 2, 3});

  auto beyond = t.run({variable_gather(t, "emb", Shape{3, 2},
                                       t.feed(Tensor::from_vector<int32_t>(Shape{1}, {3})))});
  CHECK(beyond.status().message().find("index 3 at position 0 is out of range [0, 3)") !=
        std::string::npos);
  auto other = t.run({variable_gather(t, "emb", Shape{4, 2}, ids)});
  CHECK(other.status().message().find("variable 'emb' holds float32[3,2]") != std::string::npos);
  auto missing = t.run({variable_gather(t, "none", Shape{3, 2}, ids)});
  CHECK(missing.status().message().find("none") != std::string::npos);

  OpTest bad;
  variable_gather(bad, "emb", Shape{3, 2}, bad.feed(Tensor::from_vector<float>(Shape{1}, {0})));
  CHECK(bad.b.status().message().find("indices must be int32 or int64") != std::string::npos);
  OpTest scalar;
  variable_gather(scalar, "emb", Shape{}, scalar.feed(Tensor::from_vector<int32_t>(Shape{1}, {0})));
  CHECK(scalar.b.status().message().find("with rows") != std::string::npos);
}

TEST_CASE("scatter updates combine the rows named, index by index, and leave the others") {
  // w = [[1, 2], [3, 4], [5, 6], [7, 8]]; rows 2, 0, 2 get [1, 1], [2, 2], [3, 3].
  struct Case {
    ops::Scatter how;
    std::vector<float> want;
  };
  const Case cases[] = {{ops::Scatter::kUpdate, {2, 2, 3, 4, 3, 3, 7, 8}},
                        {ops::Scatter::kAdd, {3, 4, 3, 4, 9, 10, 7, 8}},
                        {ops::Scatter::kSub, {-1, 0, 3, 4, 1, 2, 7, 8}},
                        {ops::Scatter::kMul, {2, 4, 3, 4, 15, 18, 7, 8}},
                        {ops::Scatter::kDiv, {0.5f, 1, 3, 4, 5.0f / 3, 2, 7, 8}},
                        {ops::Scatter::kMin, {1, 2, 3, 4, 1, 1, 7, 8}},
                        {ops::Scatter::kMax, {2, 2, 3, 4, 5, 6, 7, 8}}};
  for (const Case& c : cases) {
    CAPTURE(static_cast<int>(c.how));
    OpTest t;
    t.vars.assign("w", Tensor::from_vector<float>(Shape{4, 2}, {1, 2, 3, 4, 5, 6, 7, 8}));
    Output w = t.b.add("Variable", {}, {{"var", std::string("w")}, {"shape", Shape{4, 2}}});
    Output ids = t.feed(Tensor::from_vector<int64_t>(Shape{3}, {2, 0, 2}));
    Output updates = t.feed(Tensor::from_vector<float>(Shape{3, 2}, {1, 1, 2, 2, 3, 3}));
    Output after = ops::scatter(t.b, c.how, w, ids, updates);
    REQUIRE(t.b.ok());
    CHECK(t.b.shape(after) == Shape{4, 2});
    CHECK(t.eval(after).to_vector<float>() == c.want);
    CHECK(t.vars.read("w")->to_vector<float>() == c.want);
  }

  // An index out of range writes nothing; updates of the wrong shape are the builder's error.
  OpTest t;
  const std::vector<float> before{1, 2, 3, 4};
  t.vars.assign("w", Tensor::from_vector<float>(Shape{2, 2}, before));
  Output w = t.b.add("Variable", {}, {{"var", std::string("w")}, {"shape", Shape{2, 2}}});
  auto beyond = t.run({ops::scatter(
      t.b, ops::Scatter::kAdd, w, t.feed(Tensor::from_vector<int32_t>(Shape{2}, {0, 2})),
      t.feed(Tensor::from_vector<float>(Shape{2, 2}, {1, 1, 1, 1})))});
  REQUIRE_FALSE(beyond.ok());
  CHECK(beyond.status().message().find("row 2 at position 1 is out of range [0, 2)") !=
        std::string::npos);
  CHECK(t.vars.read("w")->to_vector<float>() == before);
  ops::scatter(t.b, ops::Scatter::kUpdate, w, t.feed(Tensor::from_vector<int32_t>(Shape{1}, {0})),
               t.feed(Tensor::from_vector<float>(Shape{1, 3}, {1, 1, 1})));
  CHECK(t.b.status().message().find("they must be [1,2]") != std::string::npos);
}

TEST_CASE(
    "read_value in a loop's body sees each iteration's write; the variable read outside does "
    "not") {
  OpTest t;
  Output total = ops::variable(t.b, "total", Shape{}, DType::kFloat32,
                               ops::scalar(t.b, 0, DType::kFloat32), /*trainable=*/false);
  t.vars.assign("total", Tensor::scalar<float>(0));
  std::vector<Output> loop = ops::while_loop(
      t.b,
      [](GraphBuilder& b, const std::vector<Output>& v) {
        return ops::less(b, v[0], ops::scalar(b, 3, DType::kInt32));
      },
      [&](GraphBuilder& b, const std::vector<Output>& v) {
        Output added = ops::assign_add(b, total, ops::scalar(b, 1, DType::kFloat32));
        auto after = b.control_dependencies({added.node});
        return std::vector<Output>{ops::add(b, v[0], ops::scalar(b, 1, DType::kInt32)),
                                   ops::add(b, v[1], ops::read_value(b, total)),
                                   ops::add(b, v[2], ops::identity(b, total))};
      },
      {ops::scalar(t.b, 0, DType::kInt32), ops::scalar(t.b, 0, DType::kFloat32),
       ops::scalar(t.b, 0, DType::kFloat32)});
  REQUIRE_MESSAGE(t.b.ok(), t.b.status().to_string());
  auto got = t.run({loop[1], loop[2]});
  REQUIRE_MESSAGE(got.ok(), got.status().to_string());
  CHECK((*got)[0].data<float>()[0] == 1 + 2 + 3);  // read after each iteration's add
  CHECK((*got)[1].data<float>()[0] == 0);          // entered once, before the loop
  CHECK(t.vars.read("total")->data<float>()[0] == 3);
  OpTest not_a_variable;
  ops::read_value(not_a_variable.b, not_a_variable.feed(Tensor::scalar<float>(1)));
  CHECK(not_a_variable.b.status().message().find("is not a variable") != std::string::npos);
}

TEST_CASE("read_value in a loop is differentiated as the variable, summed over the iterations") {
  // y = x w^3: each of three iterations multiplies by the value read; dy/dw = 3 x w^2, the
  // same as with w entered into the loop.
  OpTest t;
  Output w =
      ops::variable(t.b, "w", Shape{}, DType::kFloat32, ops::scalar(t.b, 0, DType::kFloat32));
  t.vars.assign("w", Tensor::scalar<float>(0.5f));
  Output x = t.feed(Tensor::scalar<float>(2));
  auto cubed = [&](bool read_each_time) {
    return ops::while_loop(
        t.b,
        [](GraphBuilder& b, const std::vector<Output>& v) {
          return ops::less(b, v[0], ops::scalar(b, 3, DType::kInt32));
        },
        [&](GraphBuilder& b, const std::vector<Output>& v) {
          Output factor = read_each_time ? ops::read_value(b, w) : w;
          return std::vector<Output>{ops::add(b, v[0], ops::scalar(b, 1, DType::kInt32)),
                                     ops::mul(b, v[1], factor)};
        },
        {ops::scalar(t.b, 0, DType::kInt32), x})[1];
  };
  Output read = cubed(true), entered = cubed(false);
  Output d_read = runtime::gradients(t.b, {read}, {w})[0];
  Output d_entered = runtime::gradients(t.b, {entered}, {w})[0];
  REQUIRE_MESSAGE(t.b.ok(), t.b.status().to_string());
  auto got = t.run({read, d_read, d_entered});
  REQUIRE_MESSAGE(got.ok(), got.status().to_string());
  CHECK((*got)[0].data<float>()[0] == 0.25f);                 // 2 * 0.5^3
  CHECK((*got)[1].data<float>()[0] == doctest::Approx(1.5));  // 3 * 2 * 0.5^2
  CHECK((*got)[2].data<float>()[0] == (*got)[1].data<float>()[0]);
}
