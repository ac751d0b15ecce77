// The step protocol on actors: same results as the reference executor, every dtype through feeds
// and fetches, pipelined loops, back-pressure, a failing step that leaves the session usable, and
// a clean shutdown.
#include "actors/session.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

#include "harness/op_harness.h"
#include "ops/array_ops.h"
#include "ops/control_flow_ops.h"
#include "ops/conv_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/random_ops.h"
#include "ops/rnn.h"
#include "ops/shape_fns.h"
#include "ops/state_ops.h"
#include "ops/training_ops.h"
#include "runtime/kernel_registry.h"

using namespace troupe;
using namespace troupe::runtime;

namespace {

struct Mlp {
  runtime::Graph g;
  Output x, y, loss;
  int train = -1, init = -1;
};

// The loss of `logits` against m->y, its training op and the initializer.
void classify(runtime::GraphBuilder& b, Output logits, const ops::Optimizer& opt, Mlp* m) {
  m->loss = ops::reduce_mean(b, ops::sparse_softmax_cross_entropy_with_logits(b, m->y, logits));
  m->train = ops::minimize(b, m->loss, opt);
  m->init = ops::global_variables_initializer(b);
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
}

// The losses of `single` steps run one by one on actors, then of `looped` more inside the
// actor system, pipelined; `order` gets the loop's step numbers as they are reported.
std::vector<float> actor_losses(actors::Session& s, const Mlp& m,
                                std::function<runtime::FeedList(int)> feed, int single, int looped,
                                std::vector<int64_t>* order = nullptr) {
  std::vector<float> got;
  for (int i = 0; i < single; ++i) {
    auto r = s.run(feed(i), {m.loss}, {m.train});
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    got.push_back((*r)[0].data<float>()[0]);
  }
  actors::LoopRequest loop;
  loop.steps = looped;
  loop.fetches = {m.loss};
  loop.targets = {m.train};
  loop.feed = [&](int64_t i, runtime::FeedList* f) {
    *f = feed(int(i) + single);
    return runtime::ok_status();
  };
  loop.on_step = [&](int64_t i, const std::vector<Tensor>& v) {
    if (order) order->push_back(i);
    got.push_back(v[0].data<float>()[0]);
    return true;
  };
  auto done = s.run_loop(std::move(loop));
  REQUIRE_MESSAGE(done.ok(), done.status().to_string());
  CHECK(*done == looped);
  return got;
}

Mlp build_mlp(int64_t seed) {
  Mlp m;
  m.g.set_seed(seed);
  runtime::GraphBuilder b(&m.g);
  m.x = ops::placeholder(b, DType::kFloat32, Shape{-1, 10}, "x");
  m.y = ops::placeholder(b, DType::kInt32, Shape{-1}, "y");
  Output w1 =
      ops::variable(b, "w1", Shape{10, 16}, DType::kFloat32, ops::glorot_uniform(b, Shape{10, 16}));
  Output b1 =
      ops::variable(b, "b1", Shape{16}, DType::kFloat32, ops::zeros(b, Shape{16}, DType::kFloat32));
  Output w2 =
      ops::variable(b, "w2", Shape{16, 3}, DType::kFloat32, ops::glorot_uniform(b, Shape{16, 3}));
  Output h = ops::relu(b, ops::bias_add(b, ops::matmul(b, m.x, w1), b1));
  classify(b, ops::matmul(b, h, w2), ops::Optimizer::momentum_sgd(0.1, 0.9), &m);
  return m;
}

runtime::FeedList batch(const Mlp& m, int i) {
  std::mt19937_64 rng(i);
  Tensor x = testing::random_tensor<float>(Shape{8, 10}, rng);
  Tensor y(DType::kInt32, Shape{8});
  for (int k = 0; k < 8; ++k) y.data<int32_t>()[k] = (k + i) % 3;
  return {{m.x, x}, {m.y, y}};
}

std::vector<float> executor_losses(const Mlp& m, int steps) {
  runtime::VariableStore vars;
  runtime::Executor exec(m.g, {.variables = &vars});
  REQUIRE(exec.run({}, {}, {m.init}).ok());
  std::vector<float> out;
  for (int i = 0; i < steps; ++i) {
    auto r = exec.run(batch(m, i), {m.loss}, {m.train});
    REQUIRE(r.ok());
    out.push_back((*r)[0].data<float>()[0]);
  }
  return out;
}

}  // namespace

TEST_CASE("a session on actors trains exactly like the reference executor") {
  Mlp m = build_mlp(3);
  std::vector<float> want = executor_losses(m, 20);
  actors::Runtime rt;
  auto s = actors::Session::create(rt, m.g);
  REQUIRE(s.ok());
  REQUIRE((*s)->run({}, {}, {m.init}).ok());
  // Ten steps one by one, the other ten inside the actor system, pipelined two deep.
  std::vector<int64_t> order;
  std::vector<float> got = actor_losses(
      **s, m, [&](int i) { return batch(m, i); }, 10, 10, &order);
  CHECK(order == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(got == want);
  CHECK((*s)->variables().read("global_step")->data<int64_t>()[0] == 20);
}

TEST_CASE("feeds and fetches of every dtype") {
  actors::Runtime rt;
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  std::vector<Tensor> values = {Tensor::from_vector<float>(Shape{2}, {1.5f, -2}),
                                Tensor::from_vector<double>(Shape{1}, {3.25}),
                                Tensor::from_vector<int32_t>(Shape{3}, {1, 2, 3}),
                                Tensor::from_vector<int64_t>(Shape{1}, {-9}),
                                Tensor::from_vector<uint8_t>(Shape{2}, {0, 255}),
                                Tensor::from_vector<bool>(Shape{2}, {true, false})};
  Tensor str(DType::kString, Shape{2});
  str.data<std::string>()[0] = "troupe";
  values.push_back(str);
  runtime::FeedList feeds;
  std::vector<Output> fetches;
  for (const Tensor& v : values) {
    Output p = ops::placeholder(b, v.dtype(), v.shape());
    feeds.push_back({p, v});
    fetches.push_back(ops::identity(b, p));
    fetches.push_back(p);  // a fed value fetched directly
  }
  auto s = actors::Session::create(rt, g);
  REQUIRE(s.ok());
  auto r = (*s)->run(feeds, fetches);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  for (size_t i = 0; i < values.size(); ++i) {
    CHECK((*r)[2 * i].debug_string() == values[i].debug_string());
    CHECK((*r)[2 * i].shares_buffer_with(values[i]));  // local tensors are handles, never copied
    CHECK((*r)[2 * i + 1].shares_buffer_with(values[i]));
  }
}

TEST_CASE("constants feed their consumers without messages, and can still be fetched") {
  actors::Runtime rt;
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output c = ops::scalar(b, 3, DType::kFloat32);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{2}, "x");
  Output y = ops::mul(b, x, c);
  Output z = ops::add(b, ops::scalar(b, 1, DType::kFloat32), ops::scalar(b, 2, DType::kFloat32));
  auto s = actors::Session::create(rt, g);
  REQUIRE(s.ok());
  for (int i = 0; i < 3; ++i) {
    auto r = (*s)->run({{x, Tensor::from_vector<float>(Shape{2}, {1, float(i)})}}, {y, z});
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    CHECK((*r)[0].to_vector<float>() == std::vector<float>{3, 3.0f * i});
    CHECK((*r)[1].data<float>()[0] == 3);
  }
  auto r = (*s)->run({}, {c});
  REQUIRE(r.ok());
  CHECK((*r)[0].data<float>()[0] == 3);
}

TEST_CASE("a failing kernel aborts its step with the node's name; the next step works") {
  actors::Runtime rt;
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output a = ops::placeholder(b, DType::kInt32, Shape{2}, "a");
  Output c = ops::placeholder(b, DType::kInt32, Shape{2}, "c");
  Output q = ops::div(b, a, c);
  Output after = ops::add(b, ops::neg(b, q), a);  // downstream of the failure
  Output side = ops::mul(b, a, a);                // not downstream: still runs
  auto s = actors::Session::create(rt, g);
  REQUIRE(s.ok());
  Tensor ones = Tensor::from_vector<int32_t>(Shape{2}, {1, 1});
  auto r =
      (*s)->run({{a, ones}, {c, Tensor::from_vector<int32_t>(Shape{2}, {1, 0})}}, {after, side});
  CHECK_FALSE(r.ok());
  CHECK(r.status().message() == "Div 'Div': integer division by zero");
  for (int i = 0; i < 3; ++i) {
    r = (*s)->run({{a, Tensor::from_vector<int32_t>(Shape{2}, {6, 8})},
                   {c, Tensor::from_vector<int32_t>(Shape{2}, {2, 4})}},
                  {after, side});
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    CHECK((*r)[0].to_vector<int32_t>() == std::vector<int32_t>{3, 6});
    CHECK((*r)[1].to_vector<int32_t>() == std::vector<int32_t>{36, 64});
  }
  r = (*s)->run({{a, ones}}, {after});
  CHECK(r.status().message().find("placeholder 'c' must be fed") != std::string::npos);
  r = (*s)->run({{a, Tensor(DType::kFloat32, Shape{2})}}, {side});
  CHECK(r.status().message().find("feed 'a:0': expects int32") != std::string::npos);
}

TEST_CASE("a node placed on a device without its kernel is refused when the step is planned") {
  actors::Runtime rt;
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output a = ops::placeholder(b, DType::kFloat32, Shape{2}, "a");
  Output on_gpu;
  {
    auto scope = b.device("/device:gpu:0");
    on_gpu = ops::square(b, a);
  }
  Output on_cpu = ops::neg(b, a);
  REQUIRE(b.ok());
  auto s = actors::Session::create(rt, g);
  REQUIRE(s.ok());
  const Tensor x = Tensor::from_vector<float>(Shape{2}, {1, 2});
  if (runtime::kernel_registry().has_any("Square", runtime::DeviceType::kGpu)) return;
  auto r = (*s)->run({{a, x}}, {on_gpu});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("no gpu kernel") != std::string::npos);
  auto cpu = (*s)->run({{a, x}}, {on_cpu});
  REQUIRE_MESSAGE(cpu.ok(), cpu.status().to_string());
  CHECK(cpu->at(0).to_vector<float>() == std::vector<float>{-1, -2});
}

TEST_CASE("a fused layer that fails names the nodes it stands for; the next step works") {
  actors::Runtime rt;
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{-1, -1}, "x");
  Output w = ops::constant(b, Tensor::from_vector<float>(Shape{2, 2}, {1, -1, 2, 0}));
  Output bias = ops::constant(b, Tensor::from_vector<float>(Shape{2}, {0.5f, 0}));
  Output y;
  {
    auto scope = b.name_scope("dense");
    y = ops::relu(b, ops::bias_add(b, ops::matmul(b, x, w), bias));
  }
  REQUIRE(b.ok());
  auto s = actors::Session::create(rt, g);
  REQUIRE(s.ok());
  auto r = (*s)->run({{x, Tensor::from_vector<float>(Shape{1, 3}, {1, 2, 3})}}, {y});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() ==
        "_FusedMatMul 'dense/Relu' (dense/MatMul, dense/BiasAdd, dense/Relu, fused): inner "
        "dimensions differ: [1,3] and [2,2]");
  r = (*s)->run({{x, Tensor::from_vector<float>(Shape{1, 2}, {1, 2})}}, {y});
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  CHECK((*r)[0].to_vector<float>() == std::vector<float>{5.5f, 0});
}

namespace {
// A test op that records how far its producer ran ahead of it; slow on purpose.
std::atomic<int> fast_fired{0}, slow_fired{0}, max_ahead{0};

template <class T>
struct FastKernel {
  static runtime::Status compute(runtime::KernelContext& ctx) {
    ++fast_fired;
    ctx.set_output(0, ctx.input(0));
    return runtime::ok_status();
  }
};
template <class T>
struct SlowKernel {
  static runtime::Status compute(runtime::KernelContext& ctx) {
    int ahead = fast_fired.load() - slow_fired.load();
    max_ahead = std::max(max_ahead.load(), ahead);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ++slow_fired;
    ctx.set_output(0, ctx.input(0));
    return runtime::ok_status();
  }
};
TROUPE_REGISTER_OP(TestFast)
    .input("x")
    .output("y")
    .shape_fn(ops::shape_fns::unchanged)
    .no_gradient()
    .doc("test");
TROUPE_REGISTER_OP(TestSlow)
    .input("x")
    .output("y")
    .shape_fn(ops::shape_fns::unchanged)
    .no_gradient()
    .doc("test");
TROUPE_REGISTER_KERNELS(test_backpressure) {
  registry.add_typed<FastKernel, float>("TestFast", runtime::DeviceType::kCpu);
  registry.add_typed<SlowKernel, float>("TestSlow", runtime::DeviceType::kCpu);
}
}  // namespace

TEST_CASE("a slow consumer holds its producer back to the pipeline depth") {
  actors::Runtime rt;
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{}, "x");
  Output fast = b.add("TestFast", {x});
  Output slow = b.add("TestSlow", {fast});
  REQUIRE(b.ok());
  auto s = actors::Session::create(rt, g, {.pipeline_depth = 2});
  REQUIRE(s.ok());
  actors::LoopRequest loop;
  loop.steps = 30;
  loop.targets = {slow.node};
  loop.feed = [&](int64_t i, runtime::FeedList* f) {
    *f = {{x, Tensor::scalar<float>(float(i))}};
    return runtime::ok_status();
  };
  auto done = (*s)->run_loop(loop);
  REQUIRE(done.ok());
  CHECK(slow_fired == 30);
  CHECK(max_ahead >= 1);  // steps did overlap
  CHECK(max_ahead <= 2);  // and never more than the depth
}

TEST_CASE("the device's memory cap fails a step that needs more, naming the node") {
  actors::Runtime rt;
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{-1}, "x");
  Output y = ops::exp(b, ops::square(b, x));
  auto s = actors::Session::create(rt, g, {.memory_limit_bytes = 1 << 20});
  REQUIRE(s.ok());
  auto small = (*s)->run({{x, Tensor(DType::kFloat32, Shape{1000})}}, {y});
  REQUIRE(small.ok());
  CHECK((*s)->memory_stats().peak_bytes_in_use > 0);
  CHECK((*s)->memory_stats().limit_bytes == 1 << 20);
  auto big = (*s)->run({{x, Tensor(DType::kFloat32, Shape{1 << 19})}}, {y});
  CHECK_FALSE(big.ok());
  CHECK(big.status().code() == runtime::Code::kResourceExhausted);
  CHECK(big.status().message().find("Square 'Square'") == 0);
  CHECK((*s)->run({{x, Tensor(DType::kFloat32, Shape{10})}}, {y}).ok());
}

TEST_CASE("the actor system exits cleanly with no actors left after sessions end") {
  actors::Runtime rt;
  {
    Mlp m = build_mlp(1);
    auto s = actors::Session::create(rt, m.g);
    REQUIRE(s.ok());
    REQUIRE((*s)->run({}, {}, {m.init}).ok());
    REQUIRE((*s)->run(batch(m, 0), {m.loss}, {m.train}).ok());
    CHECK(rt.running_actors() > 20);  // a node actor per node of the plans that ran
  }
  for (int i = 0; i < 2000 && rt.running_actors() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(rt.running_actors() == 0);
}

// An op whose kernel throws: a bug in a kernel, not an error it returns.
TROUPE_REGISTER_OP(TestThrowingOp)
    .input("x")
    .output("y")
    .shape_fn(ops::shape_fns::unchanged)
    .no_gradient()
    .doc("throws; for the crash test only");

namespace {
template <class T>
struct ThrowingKernel {
  static runtime::Status compute(runtime::KernelContext&) { throw std::runtime_error("boom"); }
};
}  // namespace

TROUPE_REGISTER_KERNELS(test_throwing_cpu) {
  registry.add_typed<ThrowingKernel, float>("TestThrowingOp", runtime::DeviceType::kCpu);
}

TEST_CASE("a kernel that throws fails its step and the loop, naming the node; the session lives") {
  actors::Runtime rt;
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  auto x = ops::placeholder(b, DType::kFloat32, Shape{-1}, "x");
  auto y = b.add("TestThrowingOp", {x});
  REQUIRE(b.ok());
  auto s = actors::Session::create(rt, g);
  REQUIRE(s.ok());
  auto r = (*s)->run({{x, Tensor::from_vector<float>(Shape{2}, {1, 2})}}, {y});
  CHECK(!r.ok());
  CHECK(r.status().code() == runtime::Code::kInternal);
  CHECK(r.status().message().find("'TestThrowingOp': kernel threw: boom") != std::string::npos);
  actors::LoopRequest loop;
  loop.steps = 3;
  loop.fetches = {y};
  loop.feed = [&](int64_t, runtime::FeedList* f) {
    *f = {{x, Tensor::from_vector<float>(Shape{1}, {1})}};
    return runtime::ok_status();
  };
  auto done = (*s)->run_loop(loop);
  CHECK(!done.ok());
  auto fine = (*s)->run({{x, Tensor::from_vector<float>(Shape{1}, {5})}}, {x});
  REQUIRE(fine.ok());
  CHECK((*fine)[0].data<float>()[0] == 5);
}

TEST_CASE("nodes fixed before any step are folded once into their consumers: no actor each") {
  // y = x * (ones_like(x) / 4): with x's shape known, ones_like and the division are fixed.
  auto actors_for = [](Shape shape) {
    actors::Runtime rt;
    runtime::Graph g;
    runtime::GraphBuilder b(&g);
    Output x = ops::placeholder(b, DType::kFloat32, shape, "x");
    Output y = ops::mul(b, x, ops::div(b, ops::ones_like(b, x), 4.0));
    REQUIRE(b.ok());
    auto s = actors::Session::create(rt, g);
    REQUIRE(s.ok());
    for (int i = 0; i < 3; ++i) {
      auto r = (*s)->run({{x, Tensor::from_vector<float>(Shape{4}, {4, 8, 12, 16})}}, {y});
      REQUIRE_MESSAGE(r.ok(), r.status().to_string());
      CHECK((*r)[0].to_vector<float>() == std::vector<float>{1, 2, 3, 4});
    }
    return rt.running_actors();
  };
  // Unknown batch size: ones_like and div run every step, an actor each.
  CHECK(actors_for(Shape{4}) + 2 == actors_for(Shape{-1}));
}

namespace {

// Five training steps of `g` with plans fused or not: each step's fetched values, the actors
// running after them, then the values of `probe` fetched in a plan of their own.
struct FusionRun {
  std::vector<std::vector<float>> values;
  size_t actors = 0;
  std::vector<std::vector<float>> probed;
};

FusionRun train_fused_or_not(const runtime::Graph& g, bool fuse,
                             const std::function<runtime::FeedList(int)>& feeds,
                             const std::vector<Output>& fetches, int train, int init,
                             const std::vector<Output>& probe) {
  FusionRun out;
  actors::Runtime rt;
  auto s = actors::Session::create(rt, g, {.fuse_ops = fuse});
  REQUIRE(s.ok());
  REQUIRE((*s)->run({}, {}, {init}).ok());
  for (int i = 0; i < 5; ++i) {
    auto r = (*s)->run(feeds(i), fetches, {train});
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    for (const Tensor& t : *r) out.values.push_back(t.to_vector<float>());
  }
  out.actors = rt.running_actors();
  auto r = (*s)->run(feeds(9), probe);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  for (const Tensor& t : *r) out.probed.push_back(t.to_vector<float>());
  return out;
}

}  // namespace

TEST_CASE(
    "dense layers run fused: the same bits, fewer actors; a fetch inside a layer unfuses it") {
  runtime::Graph g;
  g.set_seed(5);
  runtime::GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{-1, 10}, "x");
  auto dense = [&](Output in, int64_t units, const std::string& name, Output* product) {
    const int64_t fan_in = b.graph().shape(in).dim(1);
    Output w = ops::variable(b, name + "/w", Shape{fan_in, units}, DType::kFloat32,
                             ops::glorot_uniform(b, Shape{fan_in, units}));
    Output bias = ops::variable(b, name + "/b", Shape{units}, DType::kFloat32,
                                ops::random_uniform(b, Shape{units}));
    *product = ops::matmul(b, in, w);
    return ops::bias_add(b, *product, bias);
  };
  Output z1, z2;
  Output h = ops::relu(b, dense(x, 16, "hidden", &z1));
  Output logits = dense(h, 4, "out", &z2);
  Output loss = ops::reduce_mean(b, ops::square(b, logits));
  int train = ops::minimize(b, loss, ops::Optimizer::sgd(0.05));
  int init = ops::global_variables_initializer(b);
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());

  auto feeds = [&](int i) { return runtime::FeedList{{x, batch(build_mlp(1), i)[0].second}}; };
  FusionRun fused = train_fused_or_not(g, true, feeds, {loss, logits}, train, init, {z1, h});
  FusionRun plain = train_fused_or_not(g, false, feeds, {loss, logits}, train, init, {z1, h});
  CHECK(fused.values == plain.values);
  CHECK(fused.probed == plain.probed);
  // The hidden layer loses its MatMul and BiasAdd actors, the output layer its MatMul.
  CHECK(fused.actors + 3 == plain.actors);
}

TEST_CASE("convolutions run fused: the same bits as unfused, fewer actors") {
  runtime::Graph g;
  g.set_seed(6);
  runtime::GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{-1, 6, 6, 2}, "x");
  Output filter = ops::variable(b, "conv/w", Shape{3, 3, 2, 4}, DType::kFloat32,
                                ops::glorot_uniform(b, Shape{3, 3, 2, 4}));
  Output conv_bias =
      ops::variable(b, "conv/b", Shape{4}, DType::kFloat32, ops::random_uniform(b, Shape{4}));
  Output conv = ops::conv2d(b, x, filter, {1, 1}, "SAME");
  Output h = ops::relu(b, ops::bias_add(b, conv, conv_bias));
  Output w = ops::variable(b, "out/w", Shape{144, 3}, DType::kFloat32,
                           ops::glorot_uniform(b, Shape{144, 3}));
  Output logits = ops::matmul(b, ops::reshape(b, h, {-1, 144}), w);
  Output loss = ops::reduce_mean(b, ops::square(b, logits));
  int train = ops::minimize(b, loss, ops::Optimizer::sgd(0.05));
  int init = ops::global_variables_initializer(b);
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());

  auto feeds = [&](int i) {
    std::mt19937_64 rng(i);
    return runtime::FeedList{{x, testing::random_tensor<float>(Shape{3, 6, 6, 2}, rng)}};
  };
  FusionRun fused = train_fused_or_not(g, true, feeds, {loss, logits}, train, init, {conv, h});
  FusionRun plain = train_fused_or_not(g, false, feeds, {loss, logits}, train, init, {conv, h});
  CHECK(fused.values == plain.values);
  CHECK(fused.probed == plain.probed);
  CHECK(fused.actors + 2 == plain.actors);  // the Conv2D and its BiasAdd
}

TEST_CASE("cond and while_loop run on actors as on the reference executor") {
  actors::Runtime rt;
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{}, "x");
  Output n = ops::placeholder(b, DType::kInt32, Shape{}, "n");
  Output negative = ops::less(b, x, ops::scalar(b, 0, DType::kFloat32));
  std::vector<Output> abs = ops::cond(
      b, negative, [&](runtime::GraphBuilder& b) { return std::vector<Output>{ops::neg(b, x)}; },
      [&](runtime::GraphBuilder&) { return std::vector<Output>{x}; });
  // x * 2^n, n times round a loop, then doubled once more outside it.
  std::vector<Output> loop = ops::while_loop(
      b,
      [&](runtime::GraphBuilder& b, const std::vector<Output>& v) { return ops::less(b, v[0], n); },
      [&](runtime::GraphBuilder& b, const std::vector<Output>& v) {
        return std::vector<Output>{ops::add(b, v[0], ops::scalar(b, 1, DType::kInt32)),
                                   ops::mul(b, v[1], 2.0)};
      },
      {ops::scalar(b, 0, DType::kInt32), x});
  Output after = ops::mul(b, loop[1], 2.0);
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  auto s = actors::Session::create(rt, g);
  REQUIRE(s.ok());
  runtime::Executor exec(g);
  for (const auto& [xv, nv] :
       std::vector<std::pair<float, int>>{{-1.5f, 3}, {2.0f, 0}, {0.5f, 7}}) {
    const runtime::FeedList feeds = {{x, Tensor::scalar<float>(xv)},
                                     {n, Tensor::scalar<int32_t>(nv)}};
    auto got = (*s)->run(feeds, {abs[0], loop[0], loop[1], after, negative});
    REQUIRE_MESSAGE(got.ok(), got.status().to_string());
    auto want = exec.run(feeds, {abs[0], loop[0], loop[1], after, negative});
    REQUIRE(want.ok());
    CAPTURE(xv);
    CHECK((*got)[0].data<float>()[0] == std::abs(xv));
    CHECK((*got)[1].data<int32_t>()[0] == nv);
    CHECK((*got)[2].data<float>()[0] == xv * float(1 << nv));
    CHECK((*got)[3].data<float>()[0] == (*want)[3].data<float>()[0]);
    CHECK((*got)[4].data<bool>()[0] == (xv < 0));
  }
}

TEST_CASE(
    "a loop whose body folds constants and fuses a dense layer runs as on the reference "
    "executor, fused or not, also when what enters it feeds a chain outside it") {
  // h = relu(h w + bias) * (0.5 * 3), n times, adding 2 * 4 on a cond's branch while i < 1;
  // h starts as x w, which also goes to a BiasAdd outside the loop.
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{2, 4}, "x");
  Output w = ops::placeholder(b, DType::kFloat32, Shape{4, 4}, "w");
  Output bias = ops::placeholder(b, DType::kFloat32, Shape{4}, "bias");
  Output n = ops::placeholder(b, DType::kInt32, Shape{}, "n");
  Output start = ops::matmul(b, x, w);
  Output outside = ops::bias_add(b, start, bias);
  std::vector<Output> loop = ops::while_loop(
      b,
      [&](runtime::GraphBuilder& b, const std::vector<Output>& v) { return ops::less(b, v[0], n); },
      [&](runtime::GraphBuilder& b, const std::vector<Output>& v) {
        Output scale =
            ops::mul(b, ops::scalar(b, 0.5, DType::kFloat32), ops::scalar(b, 3, DType::kFloat32));
        Output h =
            ops::mul(b, ops::relu(b, ops::bias_add(b, ops::matmul(b, v[1], w), bias)), scale);
        std::vector<Output> next = ops::cond(
            b, ops::less(b, v[0], ops::scalar(b, 1, DType::kInt32)),
            [&](runtime::GraphBuilder& b) {
              return std::vector<Output>{ops::add(b, h,
                                                  ops::mul(b, ops::scalar(b, 2, DType::kFloat32),
                                                           ops::scalar(b, 4, DType::kFloat32)))};
            },
            [&](runtime::GraphBuilder&) { return std::vector<Output>{h}; });
        return std::vector<Output>{ops::add(b, v[0], ops::scalar(b, 1, DType::kInt32)), next[0]};
      },
      {ops::scalar(b, 0, DType::kInt32), start});
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  std::mt19937_64 rng(3);
  auto feeds = [&](int32_t times) {
    return runtime::FeedList{{x, testing::random_tensor<float>(Shape{2, 4}, rng)},
                             {w, testing::random_tensor<float>(Shape{4, 4}, rng)},
                             {bias, testing::random_tensor<float>(Shape{4}, rng)},
                             {n, Tensor::scalar<int32_t>(times)}};
  };
  actors::Runtime rt;
  auto fused = actors::Session::create(rt, g, {.fuse_ops = true});
  auto plain = actors::Session::create(rt, g, {.fuse_ops = false});
  REQUIRE(fused.ok());
  REQUIRE(plain.ok());
  runtime::Executor exec(g);
  for (int32_t times : {0, 1, 3}) {
    const runtime::FeedList f = feeds(times);
    auto want = exec.run(f, {loop[1], outside});
    REQUIRE_MESSAGE(want.ok(), want.status().to_string());
    for (auto* s : {&*fused, &*plain}) {
      auto got = (*s)->run(f, {loop[1], outside});
      REQUIRE_MESSAGE(got.ok(), got.status().to_string());
      CAPTURE(times);
      CHECK((*got)[0].to_vector<float>() == (*want)[0].to_vector<float>());
      CHECK((*got)[1].to_vector<float>() == (*want)[1].to_vector<float>());
    }
  }
}

namespace {

// An LSTM over 5 steps of 3 features, its last output classified into 3 classes.
Mlp build_rnn(int64_t seed) {
  Mlp m;
  m.g.set_seed(seed);
  runtime::GraphBuilder b(&m.g);
  m.x = ops::placeholder(b, DType::kFloat32, Shape{-1, 5, 3}, "x");
  m.y = ops::placeholder(b, DType::kInt32, Shape{-1}, "y");
  auto cell = ops::lstm_cell(b, "lstm", 3, 8);
  ops::RnnOutputs rnn = ops::dynamic_rnn(b, *cell, m.x);
  Output w =
      ops::variable(b, "out", Shape{8, 3}, DType::kFloat32, ops::glorot_uniform(b, Shape{8, 3}));
  classify(b, ops::matmul(b, rnn.final_state[1], w), ops::Optimizer::adam(0.01), &m);
  return m;
}

// Two batches in turn, so that the loss on each falls as it trains.
runtime::FeedList sequences(const Mlp& m, int i) {
  std::mt19937_64 rng(i % 2);
  Tensor x = testing::random_tensor<float>(Shape{4, 5, 3}, rng);
  std::vector<int32_t> y(4);
  for (int k = 0; k < 4; ++k) y[k] = static_cast<int32_t>(rng() % 3);
  return {{m.x, x}, {m.y, Tensor::from_vector<int32_t>(Shape{4}, y)}};
}

}  // namespace

TEST_CASE("an LSTM trains on actors exactly as on the reference executor, loop gradient and all") {
  Mlp m = build_rnn(5);
  runtime::VariableStore vars;
  runtime::Executor exec(m.g, {.variables = &vars});
  REQUIRE(exec.run({}, {}, {m.init}).ok());
  std::vector<float> want;
  for (int i = 0; i < 8; ++i) {
    auto r = exec.run(sequences(m, i), {m.loss}, {m.train});
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    want.push_back((*r)[0].data<float>()[0]);
  }
  CHECK(want[6] < want[0]);
  CHECK(want[7] < want[1]);
  actors::Runtime rt;
  auto s = actors::Session::create(rt, m.g);
  REQUIRE(s.ok());
  REQUIRE((*s)->run({}, {}, {m.init}).ok());
  // Four one by one, four pipelined: a step's region starts while the last one's updates end.
  std::vector<float> got = actor_losses(
      **s, m, [&](int i) { return sequences(m, i); }, 4, 4);
  CHECK(got == want);
  CHECK((*s)->variables().read("lstm/kernel")->to_vector<float>() ==
        vars.read("lstm/kernel")->to_vector<float>());
}

namespace {

// `g` trained `steps` times (feed(i) at step i) on the reference executor and on an
// actors::Session side by side, each step's loss the same on both: the executor's losses, and
// `check` shown both variable stores (the executor's first).
std::vector<float> train_side_by_side(
    const runtime::Graph& g, Output loss, int train, int init, int steps,
    const std::function<runtime::FeedList(int)>& feed,
    const std::function<void(runtime::VariableStore&, runtime::VariableStore&)>& check) {
  runtime::VariableStore vars;
  runtime::Executor exec(g, {.variables = &vars});
  REQUIRE(exec.run({}, {}, {init}).ok());
  actors::Runtime rt;
  auto s = actors::Session::create(rt, g);
  REQUIRE(s.ok());
  REQUIRE((*s)->run({}, {}, {init}).ok());
  std::vector<float> losses;
  for (int i = 0; i < steps; ++i) {
    auto want = exec.run(feed(i), {loss}, {train});
    REQUIRE_MESSAGE(want.ok(), want.status().to_string());
    auto got = (*s)->run(feed(i), {loss}, {train});
    REQUIRE_MESSAGE(got.ok(), got.status().to_string());
    CHECK((*got)[0].data<float>()[0] == (*want)[0].data<float>()[0]);
    losses.push_back((*want)[0].data<float>()[0]);
  }
  check(vars, (*s)->variables());
  return losses;
}

}  // namespace

TEST_CASE("a loop that reads and counts in variables, trained around it, as on the executor") {
  // Each iteration scales by w (read inside the loop) and counts itself in `iterations`; w
  // trains outside the loop, so every step's loop must see the last step's update.
  auto build = [](runtime::Graph* g, Output* x, Output* out, int* train, int* init) {
    runtime::GraphBuilder b(g);
    *x = ops::placeholder(b, DType::kFloat32, Shape{}, "x");
    Output w =
        ops::variable(b, "w", Shape{}, DType::kFloat32, ops::scalar(b, 0.9, DType::kFloat32));
    Output count = ops::variable(b, "iterations", Shape{}, DType::kInt64,
                                 ops::scalar(b, 0, DType::kInt64), /*trainable=*/false);
    std::vector<Output> loop = ops::while_loop(
        b,
        [&](runtime::GraphBuilder& b, const std::vector<Output>& v) {
          return ops::less(b, v[0], ops::scalar(b, 3, DType::kInt32));
        },
        [&](runtime::GraphBuilder& b, const std::vector<Output>& v) {
          Output counted = ops::assign_add(b, count, ops::scalar(b, 1, DType::kInt64));
          auto after = b.control_dependencies({counted.node});
          return std::vector<Output>{ops::add(b, v[0], ops::scalar(b, 1, DType::kInt32)),
                                     ops::mul(b, v[1], w)};
        },
        {ops::scalar(b, 0, DType::kInt32), *x});
    *out = ops::square(b, ops::sub(b, loop[1], ops::scalar(b, 0.5, DType::kFloat32)));
    *train = ops::minimize(b, *out, ops::Optimizer::sgd(0.05));
    *init = ops::global_variables_initializer(b);
    REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  };
  runtime::Graph g;
  Output x, loss;
  int train = -1, init = -1;
  build(&g, &x, &loss, &train, &init);
  train_side_by_side(
      g, loss, train, init, 6,
      [&](int i) {
        return runtime::FeedList{{x, Tensor::scalar<float>(1.0f + 0.1f * i)}};
      },
      [](runtime::VariableStore& vars, runtime::VariableStore& session) {
        CHECK(session.read("w")->data<float>()[0] == vars.read("w")->data<float>()[0]);
        CHECK(vars.read("w")->data<float>()[0] != 0.9f);
        CHECK(session.read("iterations")->data<int64_t>()[0] == 18);
        CHECK(vars.read("iterations")->data<int64_t>()[0] == 18);
      });
}

TEST_CASE(
    "a cond inside a loop, a variable read in one branch, trains on actors as on the "
    "executor: each backward iteration takes its forward iteration's branch") {
  // Each of 4 iterations: v = v < 1 ? v * w : v - 0.25 (w read inside the branch), from x; the
  // branches taken change as w trains.
  auto build = [](runtime::Graph* g, Output* x, Output* out, int* train, int* init) {
    runtime::GraphBuilder b(g);
    *x = ops::placeholder(b, DType::kFloat32, Shape{}, "x");
    Output w =
        ops::variable(b, "w", Shape{}, DType::kFloat32, ops::scalar(b, 1.5, DType::kFloat32));
    std::vector<Output> loop = ops::while_loop(
        b,
        [&](runtime::GraphBuilder& b, const std::vector<Output>& v) {
          return ops::less(b, v[0], ops::scalar(b, 4, DType::kInt32));
        },
        [&](runtime::GraphBuilder& b, const std::vector<Output>& v) {
          std::vector<Output> next = ops::cond(
              b, ops::less(b, v[1], ops::scalar(b, 1, DType::kFloat32)),
              [&](runtime::GraphBuilder& b) { return std::vector<Output>{ops::mul(b, v[1], w)}; },
              [&](runtime::GraphBuilder& b) {
                return std::vector<Output>{
                    ops::sub(b, v[1], ops::scalar(b, 0.25, DType::kFloat32))};
              });
          return std::vector<Output>{ops::add(b, v[0], ops::scalar(b, 1, DType::kInt32)), next[0]};
        },
        {ops::scalar(b, 0, DType::kInt32), *x});
    *out = ops::square(b, ops::sub(b, loop[1], ops::scalar(b, 2, DType::kFloat32)));
    *train = ops::minimize(b, *out, ops::Optimizer::sgd(0.02));
    *init = ops::global_variables_initializer(b);
    REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  };
  runtime::Graph g;
  Output x, loss;
  int train = -1, init = -1;
  build(&g, &x, &loss, &train, &init);
  const std::vector<float> losses = train_side_by_side(
      g, loss, train, init, 8,
      [&](int i) {
        return runtime::FeedList{{x, Tensor::scalar<float>(0.3f + 0.1f * (i % 3))}};
      },
      [](runtime::VariableStore& vars, runtime::VariableStore& session) {
        CHECK(session.read("w")->data<float>()[0] == vars.read("w")->data<float>()[0]);
        CHECK(vars.read("w")->data<float>()[0] != 1.5f);
      });
  CHECK(losses[6] < losses[0]);
}
