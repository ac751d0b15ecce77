// Control-flow regions of a step plan: which nodes a region takes, what crosses its edge, and
// a region run on its own.
#include "actors/control_flow_region.h"

#include <doctest/doctest.h>

#include <algorithm>

#include "ops/array_ops.h"
#include "ops/control_flow_ops.h"
#include "ops/math_ops.h"
#include "runtime/executor.h"
#include "runtime/gradients.h"

using namespace troupe;
using namespace troupe::runtime;

namespace {

bool holds(const actors::ControlFlowRegion& r, Output o) {
  return std::find(r.nodes.begin(), r.nodes.end(), o.node) != r.nodes.end();
}

std::vector<Output> doubling_loop(GraphBuilder& b, Output x, Output n, const std::string& name) {
  return ops::while_loop(
      b, [&](GraphBuilder& b, const std::vector<Output>& v) { return ops::less(b, v[0], n); },
      [&](GraphBuilder& b, const std::vector<Output>& v) {
        return std::vector<Output>{ops::add(b, v[0], ops::scalar(b, 1, DType::kInt32)),
                                   ops::mul(b, v[1], 2.0)};
      },
      {ops::scalar(b, 0, DType::kInt32), x}, {}, name);
}

}  // namespace

TEST_CASE("a region takes the loop and its body, not what feeds it or what follows it") {
  Graph g;
  GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{}, "x");
  Output n = ops::placeholder(b, DType::kInt32, Shape{}, "n");
  Output before = ops::square(b, x);
  std::vector<Output> first = doubling_loop(b, before, n, "first");
  Output after = ops::neg(b, first[1]);
  // A second loop of its own inputs is a region of its own.
  std::vector<Output> second = doubling_loop(b, x, n, "second");
  REQUIRE(b.ok());
  const std::vector<int> order = prune_graph(g, {x, n}, {after, second[1]}, {});
  const auto regions = actors::find_regions(g, order);
  REQUIRE(regions.size() == 2);
  const actors::ControlFlowRegion& r = regions[0];
  CHECK(holds(r, first[1]));
  CHECK(!holds(r, before));
  CHECK(!holds(r, after));
  CHECK(!holds(r, second[1]));
  CHECK(std::find(r.inputs.begin(), r.inputs.end(), before) != r.inputs.end());
  CHECK(std::find(r.inputs.begin(), r.inputs.end(), n) != r.inputs.end());
  CHECK(holds(regions[1], second[1]));
  for (const Output& o : r.outputs) CHECK(holds(r, o));

  // Run on its own, it gives what the whole graph's executor gives.
  const std::vector<Output>& outs = r.outputs;
  const int32_t at =
      static_cast<int32_t>(std::find(outs.begin(), outs.end(), first[1]) - outs.begin());
  auto runner = actors::RegionRunner::make(g, r, {at}, cpu_allocator(), nullptr);
  REQUIRE_MESSAGE(runner.ok(), runner.status().to_string());
  std::vector<Tensor> inputs;
  for (const Output& in : r.inputs) {  // the loop's constants come in too
    inputs.push_back(in == before ? Tensor::scalar<float>(9)
                     : in == n    ? Tensor::scalar<int32_t>(3)
                                  : g.node(in.node).attr<Tensor>("value"));
  }
  std::vector<Tensor> got;
  REQUIRE((*runner)->start(inputs).ok());
  CHECK((*runner)->waiting() == nullptr);
  REQUIRE((*runner)->finish(&got).ok());
  REQUIRE(got.size() == outs.size());
  CHECK(got[at].data<float>()[0] == 72);
  Executor exec(g);
  auto want =
      exec.run({{x, Tensor::scalar<float>(3)}, {n, Tensor::scalar<int32_t>(3)}}, {first[1]});
  REQUIRE(want.ok());
  CHECK((*want)[0].data<float>()[0] == 72);

  // Its Mul placed on another task: each iteration's run waits for it, in order, with that
  // iteration's value, and goes on with what comes back; what does not fit the graph is refused.
  actors::ControlFlowRegion there = r;
  const int mul = static_cast<int>(
      std::find_if(r.nodes.begin(), r.nodes.end(), [&](int id) { return g.node(id).op == "Mul"; }) -
      r.nodes.begin());
  there.elsewhere = {r.nodes[mul]};
  auto waits = actors::RegionRunner::make(g, there, {at}, cpu_allocator(), nullptr);
  REQUIRE_MESSAGE(waits.ok(), waits.status().to_string());
  std::vector<float> seen;
  REQUIRE((*waits)->start(inputs).ok());
  while (const Node* node = (*waits)->waiting()) {
    CHECK(node->id == r.nodes[mul]);
    const float v = (*waits)->waiting_inputs()[0].data<float>()[0];
    seen.push_back(v);
    REQUIRE((*waits)->resume({Tensor::scalar<float>(v * 3)}).ok());  // the other task triples
  }
  REQUIRE((*waits)->finish(&got).ok());
  CHECK(seen == std::vector<float>{9, 27, 81});
  CHECK(got[at].data<float>()[0] == 243);
  REQUIRE((*waits)->start(inputs).ok());
  REQUIRE((*waits)->waiting() != nullptr);
  Status wrong = (*waits)->resume({Tensor::scalar<int32_t>(1)});
  CHECK(wrong.code() == Code::kDataLoss);
  CHECK(wrong.message().find("'" + g.node(r.nodes[mul]).name + "' came back with output 0 int32") !=
        std::string::npos);
  CHECK((*waits)->waiting() == nullptr);
  CHECK((*waits)->finish(&got).code() == Code::kDataLoss);
}

TEST_CASE("a loop and its gradient's loop are one region: the stacks they share last one run") {
  Graph g;
  GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{}, "x");
  Output n = ops::placeholder(b, DType::kInt32, Shape{}, "n");
  std::vector<Output> loop = doubling_loop(b, x, n, "loop");
  Output loss = ops::square(b, loop[1]);
  std::vector<Output> dx = runtime::gradients(b, {loss}, {x});
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  const std::vector<int> order = prune_graph(g, {x, n}, {loss, dx[0]}, {});
  const auto regions = actors::find_regions(g, order);
  REQUIRE(regions.size() == 1);
  CHECK(holds(regions[0], loop[1]));
  CHECK(holds(regions[0], loss));  // between the two loops
}

TEST_CASE("a cond's branches are a region; the predicate is computed outside it") {
  Graph g;
  GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{}, "x");
  Output negative = ops::less(b, x, ops::scalar(b, 0, DType::kFloat32));
  Output branch;
  std::vector<Output> r = ops::cond(
      b, negative,
      [&](GraphBuilder& b) {
        branch = ops::neg(b, x);
        return std::vector<Output>{branch};
      },
      [&](GraphBuilder&) { return std::vector<Output>{x}; });
  REQUIRE(b.ok());
  const auto regions = actors::find_regions(g, prune_graph(g, {x}, {r[0]}, {}));
  REQUIRE(regions.size() == 1);
  CHECK(holds(regions[0], branch));
  CHECK(holds(regions[0], r[0]));
  CHECK(!holds(regions[0], negative));
  // A plain graph has none.
  Output y = ops::square(b, x);
  CHECK(actors::find_regions(g, prune_graph(g, {x}, {y}, {})).empty());
}
