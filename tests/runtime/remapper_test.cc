// The remapper: which MatMul / Conv2D -> BiasAdd (-> Relu) chains of a plan become one fused node,
// and which must stay as they are because something else reads, feeds or needs a value inside.
#include "runtime/remapper.h"

#include <doctest/doctest.h>

#include "ops/array_ops.h"
#include "ops/conv_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "runtime/graph_builder.h"

using namespace troupe;
using namespace troupe::runtime;

namespace {

struct Dense {
  runtime::Graph g;
  Output x, w, bias, product, sum, y;
};

// y = relu(x·wᵀ + bias), with a control input on the BiasAdd.
std::unique_ptr<Dense> dense() {
  auto d = std::make_unique<Dense>();
  runtime::GraphBuilder b(&d->g);
  d->x = ops::placeholder(b, DType::kFloat32, Shape{-1, 3}, "x");
  d->w = ops::placeholder(b, DType::kFloat32, Shape{4, 3}, "w");
  d->bias = ops::placeholder(b, DType::kFloat32, Shape{4}, "bias");
  Output marker = ops::placeholder(b, DType::kFloat32, Shape{}, "marker");
  d->product = ops::matmul(b, d->x, d->w, false, true);
  {
    auto deps = b.control_dependencies({marker.node});
    d->sum = ops::bias_add(b, d->product, d->bias);
  }
  d->y = ops::relu(b, d->sum);
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  return d;
}

std::vector<bool> all(const runtime::Graph& g) { return std::vector<bool>(g.num_nodes(), true); }

}  // namespace

TEST_CASE("remapper: a dense layer's chain becomes one fused node in the Relu's place") {
  auto d = dense();
  auto fusions = runtime::fuse_product_chains(d->g, all(d->g), all(d->g), {}, {d->y}, {});
  REQUIRE(fusions.size() == 1);
  const runtime::Fusion& f = fusions[0];
  CHECK(f.root == d->y.node);
  CHECK(f.absorbed == std::vector<int>{d->product.node, d->sum.node});
  const runtime::Node& n = *f.node;
  CHECK(n.id == d->y.node);
  CHECK(n.name == d->g.node(d->y.node).name);
  CHECK(n.op == "_FusedMatMul");
  CHECK(n.inputs == std::vector<Output>{d->x, d->w, d->bias});
  CHECK(n.control_inputs == d->g.node(d->sum.node).control_inputs);
  CHECK(!n.attr<bool>("transpose_a"));
  CHECK(n.attr<bool>("transpose_b"));
  CHECK(n.attr<std::string>("activation") == "Relu");
  CHECK(n.attr<std::string>("fused_from") == "MatMul, BiasAdd, Relu");
  CHECK(n.output_dtypes == d->g.node(d->y.node).output_dtypes);
  CHECK(n.output_shapes == d->g.node(d->y.node).output_shapes);
}

TEST_CASE("remapper: a value someone else needs keeps its node") {
  auto d = dense();
  const auto& g = d->g;
  auto fuse = [&](std::vector<bool> eligible, std::vector<Output> fed, std::vector<Output> fetches,
                  std::vector<int> targets = {}) {
    return runtime::fuse_product_chains(g, all(g), eligible, fed, fetches, targets);
  };
  // The sum is fetched: the product still fuses into it, the Relu stays apart.
  auto f = fuse(all(g), {}, {d->y, d->sum});
  REQUIRE(f.size() == 1);
  CHECK(f[0].root == d->sum.node);
  CHECK(f[0].absorbed == std::vector<int>{d->product.node});
  CHECK(f[0].node->attr<std::string>("activation").empty());
  // The product is fetched, fed, or a target: nothing fuses.
  CHECK(fuse(all(g), {}, {d->y, d->product}).empty());
  CHECK(fuse(all(g), {d->product}, {d->y}).empty());
  CHECK(fuse(all(g), {}, {d->y}, {d->product.node}).empty());
  // A node of the chain may not fuse (it runs on another process, say).
  std::vector<bool> some = all(g);
  some[d->sum.node] = false;
  CHECK(fuse(some, {}, {d->y}).empty());
  // Another node reads the product: it counts when the plan runs it, fusable or not (a node of
  // another process, a loop that runs apart); not when the plan leaves it out.
  runtime::Graph g2 = g;
  runtime::GraphBuilder b(&g2);
  Output reader = ops::identity(b, d->product);
  REQUIRE(b.ok());
  std::vector<bool> runs(g2.num_nodes(), true), eligible = runs;
  CHECK(runtime::fuse_product_chains(g2, runs, eligible, {}, {d->y}, {}).empty());
  eligible[reader.node] = false;
  CHECK(runtime::fuse_product_chains(g2, runs, eligible, {}, {d->y}, {}).empty());
  runs[reader.node] = false;
  CHECK(runtime::fuse_product_chains(g2, runs, eligible, {}, {d->y}, {}).size() == 1);
}

TEST_CASE("remapper: chains on different devices, or read through a control edge, stay apart") {
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{2, 3}, "x");
  Output w = ops::placeholder(b, DType::kFloat32, Shape{3, 4}, "w");
  Output bias = ops::placeholder(b, DType::kFloat32, Shape{4}, "bias");
  Output p1 = ops::matmul(b, x, w);
  Output s1;
  {
    auto on = b.device("/job:ps/task:0");
    s1 = ops::bias_add(b, p1, bias);
  }
  Output p2 = ops::matmul(b, x, w);
  Output s2 = ops::bias_add(b, p2, bias);
  Output after;
  {
    auto deps = b.control_dependencies({p2.node});
    after = ops::identity(b, x);
  }
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  CHECK(runtime::fuse_product_chains(g, all(g), all(g), {}, {s1, s2, after}, {}).empty());
}

TEST_CASE("remapper: a convolution's chain fuses too, keeping its geometry") {
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{-1, 8, 8, 3}, "x");
  Output w = ops::placeholder(b, DType::kFloat32, Shape{3, 3, 3, 4}, "w");
  Output bias = ops::placeholder(b, DType::kFloat32, Shape{4}, "bias");
  Output conv = ops::conv2d(b, x, w, {2, 2}, "SAME");
  Output sum = ops::bias_add(b, conv, bias);
  Output y = ops::relu(b, sum);
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  auto fusions = runtime::fuse_product_chains(g, all(g), all(g), {}, {y}, {});
  REQUIRE(fusions.size() == 1);
  const runtime::Node& n = *fusions[0].node;
  CHECK(n.op == "_FusedConv2D");
  CHECK(n.id == y.node);
  CHECK(n.inputs == std::vector<Output>{x, w, bias});
  CHECK(n.attr<std::string>("padding") == "SAME");
  CHECK(n.attr<std::vector<int64_t>>("strides") == std::vector<int64_t>{1, 2, 2, 1});
  CHECK(n.attr<std::string>("activation") == "Relu");
  CHECK(n.output_shapes == g.node(y.node).output_shapes);
}
