// Variables against the store: VariableGather, the rows of a variable read where it lives (the
// plan compiler makes it from a Gather of a Variable on another task: actors/step_plan.h).
#include "ops/state_ops.h"

#include <doctest/doctest.h>

#include "harness/op_harness.h"
#include "ops/array_ops.h"

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
