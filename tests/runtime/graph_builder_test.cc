#include "runtime/graph_builder.h"

#include <doctest/doctest.h>

#include <functional>

#include "ops/array_ops.h"
#include "ops/control_flow_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "runtime/executor.h"

using namespace troupe;
using namespace troupe::runtime;

TEST_CASE("shape errors are reported where the node is built, naming it") {
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output a = ops::placeholder(b, DType::kFloat32, Shape{-1, 3}, "a");
  Output w = ops::placeholder(b, DType::kFloat32, Shape{4, 5}, "w");
  Output y;
  {
    auto scope = b.name_scope("dense");
    y = ops::matmul(b, a, w);
  }
  CHECK_FALSE(y.valid());
  CHECK_FALSE(b.ok());
  const std::string msg = b.status().message();
  CHECK(msg.find("MatMul 'dense/MatMul'") != std::string::npos);
  CHECK(msg.find("[?,3]") != std::string::npos);
  CHECK(msg.find("[4,5]") != std::string::npos);
  // Later calls add nothing and keep the first error.
  int before = g.num_nodes();
  CHECK_FALSE(ops::relu(b, y).valid());
  CHECK(g.num_nodes() == before);
  CHECK(b.status().message() == msg);
  // What the failed node gave back can be asked about: nothing, rather than a crash.
  CHECK(b.dtype(y) == DType::kInvalid);
  CHECK_FALSE(b.shape(y).rank_known());
  CHECK(g.output_name(y) == "<invalid output>");
  CHECK(g.dtype(Output{a.node, 7}) == DType::kInvalid);
  CHECK(g.dtype(Output{g.num_nodes(), 0}) == DType::kInvalid);
}

TEST_CASE("dtype mismatches, unknown ops, bad attributes and missing kernels are errors") {
  auto error_of = [](auto build) {
    runtime::Graph g;
    runtime::GraphBuilder b(&g);
    build(b);
    return b.status().message();
  };
  CHECK(error_of([](runtime::GraphBuilder& b) {
          ops::add(b, ops::scalar(b, 1, DType::kFloat32), ops::scalar(b, 1, DType::kInt32));
        }).find("same dtype") != std::string::npos);
  CHECK(error_of([](runtime::GraphBuilder& b) {
          b.add("NoSuchOp", {});
        }).find("unknown op 'NoSuchOp'") != std::string::npos);
  CHECK(error_of([](runtime::GraphBuilder& b) {
          b.add("Relu", {ops::scalar(b, 1, DType::kFloat32)}, {{"bogus", true}});
        }).find("unknown attribute 'bogus'") != std::string::npos);
  CHECK(error_of([](runtime::GraphBuilder& b) {
          b.add("MatMul", {ops::scalar(b, 1, DType::kFloat32), ops::scalar(b, 1, DType::kFloat32)},
                {{"transpose_a", int64_t{1}}});
        }).find("must be bool") != std::string::npos);
  CHECK(error_of([](runtime::GraphBuilder& b) {
          ops::exp(b, ops::placeholder(b, DType::kInt32, Shape{2}));
        }).find("float32 or float64") != std::string::npos);
  CHECK(error_of([](runtime::GraphBuilder& b) {
          ops::matmul(b, ops::placeholder(b, DType::kUInt8, Shape{2, 2}),
                      ops::placeholder(b, DType::kUInt8, Shape{2, 2}));
        }).find("no cpu kernel for dtype uint8") != std::string::npos);
  CHECK(error_of([](runtime::GraphBuilder& b) {
          auto d = b.device("/device:tpu:0");
        }).find("tpu") != std::string::npos);
}

TEST_CASE("names are unique under scopes; control dependencies and devices attach") {
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{2}, "x");
  Output r1 = ops::relu(b, x);
  Output r2 = ops::relu(b, x);
  CHECK(g.node(r1.node).name == "Relu");
  CHECK(g.node(r2.node).name == "Relu_1");
  {
    auto scope = b.name_scope("layer");
    auto dev = b.device("/job:ps/task:0");
    auto deps = b.control_dependencies({r1.node});
    Output r3 = ops::relu(b, x);
    CHECK(g.node(r3.node).name == "layer/Relu");
    CHECK(g.node(r3.node).device == "/job:ps/task:0");
    CHECK(g.node(r3.node).control_inputs == std::vector<int>{r1.node});
  }
  Output r4 = ops::relu(b, x);
  CHECK(g.node(r4.node).control_inputs.empty());
  CHECK(g.find_output("layer/Relu:0") == Output{r4.node - 1, 0});
  CHECK_FALSE(g.find_output("layer/Relu:1").valid());
  CHECK(g.shape(r4) == Shape{2});
  CHECK(g.debug_string().find("layer/Relu = Relu(x:0, ^Relu)") != std::string::npos);
}

TEST_CASE("graph-level seeds give op seeds deterministically") {
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  CHECK(b.random_seeds(0) == std::pair<int64_t, int64_t>{0, 0});
  CHECK(b.random_seeds(5).second == 5);
  g.set_seed(42);
  auto s = b.random_seeds(0);
  CHECK(s.first == 42);
  CHECK(s.second != 0);
}

TEST_CASE("shapes too large for memory are refused where the node is built, naming it") {
  auto error_of = [](auto build) {
    runtime::Graph g;
    runtime::GraphBuilder b(&g);
    build(b);
    return b.status();
  };
  struct Case {
    const char* what;
    std::function<void(runtime::GraphBuilder&)> build;
    const char* names;
  };
  const Case cases[] = {
      {"a Fill of [2^62]",
       [](runtime::GraphBuilder& b) {
         ops::fill(b, Shape{int64_t(1) << 62}, 1, DType::kFloat32, "f");
       },
       "Fill 'f'"},
      {"a Range with a huge limit",
       [](runtime::GraphBuilder& b) {
         b.add("Range", {}, {{"start", 0.0}, {"limit", 1e300}, {"dtype", DType::kInt64}}, "r");
       },
       "Range 'r'"},
      {"a Reshape whose product wraps",
       [](runtime::GraphBuilder& b) {
         b.add("Reshape", {ops::placeholder(b, DType::kFloat32, Shape{-1})},
               {{"shape", std::vector<int64_t>{int64_t(1) << 40, int64_t(1) << 40}}}, "rs");
       },
       "Reshape 'rs'"},
      {"a Tile whose multiples wrap",
       [](runtime::GraphBuilder& b) {
         b.add("Tile", {ops::placeholder(b, DType::kFloat32, Shape{1 << 20})},
               {{"multiples", std::vector<int64_t>{int64_t(1) << 50}}}, "t");
       },
       "Tile 't'"},
      {"a placeholder of 2^40 x 2^30 floats",
       [](runtime::GraphBuilder& b) {
         ops::placeholder(b, DType::kFloat32, Shape{int64_t(1) << 40, int64_t(1) << 30}, "p");
       },
       "Placeholder 'p'"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    runtime::Status st = error_of(c.build);
    CHECK_FALSE(st.ok());
    CHECK_MESSAGE(st.message().find(c.names) != std::string::npos, st.message());
  }
}

TEST_CASE("a required attribute of the wrong type is a build error, not a bad_variant_access") {
  auto error_of = [](const char* op, runtime::AttrMap attrs) {
    runtime::Graph g;
    runtime::GraphBuilder b(&g);
    std::vector<Output> in;
    if (std::string(op) == "Reshape") in.push_back(ops::placeholder(b, DType::kFloat32, Shape{4}));
    b.add(op, in, std::move(attrs), "n");
    return b.status().message();
  };
  CHECK(error_of("Fill", {{"shape", int64_t{3}}}).find("'shape' must be shape, got int") !=
        std::string::npos);
  CHECK(error_of("Const", {{"value", 1.5}}).find("'value' must be tensor, got float") !=
        std::string::npos);
  CHECK(error_of("Reshape", {{"shape", Shape{2, 2}}}).find("must be int list") !=
        std::string::npos);
  CHECK(error_of("Range", {{"start", int64_t{0}}, {"limit", 3.0}}).find("'start' must be float") !=
        std::string::npos);
  CHECK(error_of("Fill", {}).find("missing attribute 'shape'") != std::string::npos);
}

TEST_CASE("a value captured into a loop under a control dependency enters without it") {
  Graph g;
  GraphBuilder b(&g);
  Output outside = ops::placeholder(b, DType::kFloat32, Shape{}, "w");
  std::vector<Output> loop = ops::while_loop(
      b,
      [](GraphBuilder& b, const std::vector<Output>& v) {
        return ops::less(b, v[0], ops::scalar(b, 3, DType::kFloat32));
      },
      [&](GraphBuilder& b, const std::vector<Output>& v) {
        Output step = ops::add(b, v[0], 1.0);
        auto after = b.control_dependencies({step.node});
        return std::vector<Output>{ops::add(b, step, outside)};  // `outside` enters here
      },
      {ops::scalar(b, 0, DType::kFloat32)});
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  int enters = 0;
  for (const Node& n : g.nodes()) {
    if (n.op != "Enter" || n.inputs[0] != outside) continue;
    ++enters;
    CHECK(n.control_inputs.empty());  // it lives outside the loop, where `step` is not
  }
  CHECK(enters == 1);
  Executor exec(g);
  auto r = exec.run({{outside, Tensor::scalar<float>(0.5f)}}, {loop[0]});
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  CHECK((*r)[0].data<float>()[0] == 3.0f);  // 0 -> 1.5 -> 3
}
