#include "runtime/graph_codec.h"

#include <doctest/doctest.h>

#include <random>

#include "harness/op_harness.h"
#include "ops/array_ops.h"
#include "ops/control_flow_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/state_ops.h"
#include "ops/training_ops.h"

using namespace troupe;
using namespace troupe::runtime;

TEST_CASE("a training graph survives encode/decode and trains identically") {
  runtime::Graph g;
  g.set_seed(5);
  runtime::GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{-1, 3}, "x");
  Output y = ops::placeholder(b, DType::kInt32, Shape{-1}, "y");
  Output w;
  {
    auto dev = b.device("/job:ps/task:0");
    w = ops::variable(b, "w", Shape{3, 2}, DType::kFloat32, ops::glorot_uniform(b, Shape{3, 2}));
  }
  Output logits = ops::matmul(b, x, w);
  Output loss = ops::reduce_mean(b, ops::sparse_softmax_cross_entropy_with_logits(b, y, logits));
  int train = ops::minimize(b, loss, ops::Optimizer::adam(0.1));
  int init = ops::global_variables_initializer(b);
  REQUIRE(b.ok());

  std::vector<char> blob;
  REQUIRE(runtime::encode_graph(g, &blob).ok());
  runtime::Graph copy;
  auto shared = std::make_shared<const std::vector<char>>(blob);
  auto s = runtime::decode_graph(shared, &copy);
  REQUIRE_MESSAGE(s.ok(), s.to_string());
  CHECK(copy.num_nodes() == g.num_nodes());
  CHECK(copy.debug_string() == g.debug_string());
  CHECK(copy.collection("variable_initializers").size() == 2);  // w and global_step
  CHECK(copy.node(copy.find("w")).device == "/job:ps/task:0");

  Tensor xv = Tensor::from_vector<float>(Shape{2, 3}, {1, 2, 3, -1, 0, 1});
  Tensor yv = Tensor::from_vector<int32_t>(Shape{2}, {0, 1});
  auto train_loss = [&](const runtime::Graph& graph) {
    runtime::VariableStore vars;
    runtime::Executor exec(graph, {.variables = &vars});
    REQUIRE(exec.run({}, {}, {graph.find(g.node(init).name)}).ok());
    std::vector<float> losses;
    for (int i = 0; i < 5; ++i) {
      auto r =
          exec.run({{graph.find_output("x"), xv}, {graph.find_output("y"), yv}},
                   {graph.find_output(g.node(loss.node).name)}, {graph.find(g.node(train).name)});
      REQUIRE(r.ok());
      losses.push_back((*r)[0].data<float>()[0]);
    }
    return losses;
  };
  CHECK(train_loss(g) == train_loss(copy));
}

TEST_CASE("corrupt graph bytes are refused with an error") {
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  ops::relu(b, ops::placeholder(b, DType::kFloat32, Shape{2}, "x"));
  std::vector<char> blob;
  REQUIRE(runtime::encode_graph(g, &blob).ok());
  std::mt19937 rng(3);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<char> bad = blob;
    bad[rng() % bad.size()] = static_cast<char>(rng());
    runtime::Graph out;
    auto s = runtime::decode_graph(std::make_shared<const std::vector<char>>(bad), &out);
    if (!s.ok()) CHECK(s.message().find("graph") == 0);
  }
  runtime::Graph out;
  CHECK_FALSE(runtime::decode_graph(
                  std::make_shared<const std::vector<char>>(blob.begin(), blob.begin() + 16), &out)
                  .ok());
}

TEST_CASE(
    "a while loop's back edges survive encode/decode; one from a node not a NextIteration "
    "is refused") {
  Graph g;
  GraphBuilder b(&g);
  // x triples until it passes a fed limit; k counts the rounds.
  Output limit = ops::placeholder(b, DType::kFloat32, Shape{}, "limit");
  std::vector<Output> r = ops::while_loop(
      b,
      [&](GraphBuilder& b, const std::vector<Output>& v) {
        return ops::less_equal(b, v[1], limit);
      },
      [&](GraphBuilder& b, const std::vector<Output>& v) {
        return std::vector<Output>{ops::add(b, v[0], 1.0), ops::mul(b, v[1], 3.0)};
      },
      {ops::scalar(b, 0, DType::kInt64), ops::scalar(b, 1, DType::kFloat32)});
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  std::vector<char> blob;
  REQUIRE(encode_graph(g, &blob).ok());
  Graph copy;
  Status decoded = decode_graph(std::make_shared<const std::vector<char>>(blob), &copy);
  REQUIRE_MESSAGE(decoded.ok(), decoded.to_string());
  REQUIRE(copy.num_nodes() == g.num_nodes());
  Executor exec(copy);
  auto got =
      exec.run({{copy.find_output("limit"), Tensor::from_vector<float>(Shape{}, {100})}},
               {copy.find_output(g.output_name(r[0])), copy.find_output(g.output_name(r[1]))});
  REQUIRE_MESSAGE(got.ok(), got.status().to_string());
  CHECK((*got)[0].data<int64_t>()[0] == 5);
  CHECK((*got)[1].data<float>()[0] == 243);

  // A back edge from a node that is not a NextIteration, as a graph from a file might ask for:
  // refused.
  Graph bad;
  GraphBuilder bb(&bad);
  Output x = ops::placeholder(bb, DType::kFloat32, Shape{}, "x");
  Output m = ops::merge(bb, {x, x}, "m").first;
  Output later = ops::identity(bb, m, "later");
  REQUIRE(bb.ok());
  Status refused = bad.set_back_edge(m.node, 1, later);
  CHECK_FALSE(refused.ok());
  CHECK(refused.message().find("not a NextIteration") != std::string::npos);
}
