// FrameExecutor through Executor, on control-flow ops wired by hand: a dead branch runs no
// kernel, a Merge of dead inputs is dead, a loop's body runs once per iteration, independent
// iterations overlap up to parallel_iterations (a stateful node keeps them in order), a failing
// kernel among them fails the run, and values that cross frames other than through Enter and
// Exit are refused when the run is planned.
#include "runtime/frame_executor.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "ops/array_ops.h"
#include "ops/control_flow_ops.h"
#include "ops/math_ops.h"
#include "ops/op_def_names.h"
#include "ops/random_ops.h"
#include "runtime/executor.h"

using namespace troupe;
using namespace troupe::runtime;

namespace {

std::atomic<int> calls{0};

// y = x, counting its runs.
TROUPE_REGISTER_OP(TestCountCalls)
    .input("x")
    .output("y")
    .shape_fn([](InferenceContext& c) -> Status {
      c.set_output(0, c.input_dtype(0), c.input_shape(0));
      return ok_status();
    })
    .no_gradient()
    .doc("y = x; counts its runs");

Status count_calls(KernelContext& ctx) {
  ++calls;
  ctx.set_output(0, ctx.input(0));
  return ok_status();
}

TROUPE_REGISTER_KERNELS(test_count_calls) {
  registry.add("TestCountCalls", DeviceType::kCpu, DType::kFloat32, count_calls);
}

// y = x after 2 ms, recording how many of its runs overlap at most.
std::atomic<int> running{0}, most_at_once{0};

TROUPE_REGISTER_OP(TestOverlap)
    .input("x")
    .output("y")
    .shape_fn([](InferenceContext& c) -> Status {
      c.set_output(0, c.input_dtype(0), c.input_shape(0));
      return ok_status();
    })
    .no_gradient()
    .doc("y = x, after 2 ms; records how many runs overlap");

Status overlap(KernelContext& ctx) {
  const int now = ++running;
  for (int seen = most_at_once; now > seen && !most_at_once.compare_exchange_weak(seen, now);) {
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  --running;
  ctx.set_output(0, ctx.input(0));
  return ok_status();
}

TROUPE_REGISTER_KERNELS(test_overlap) {
  registry.add("TestOverlap", DeviceType::kCpu, DType::kFloat32, overlap);
}

// A loop of `n` iterations that depend on each other only through a sum: each passes a [64, 64]
// tensor (worth a thread of its own) through TestOverlap, and draws a random number when asked
// (a stateful node).
struct IndependentIterations {
  Graph g;
  GraphBuilder b{&g};
  Output total;
  IndependentIterations(int64_t parallel_iterations, bool random) {
    Output x = ops::constant(b, Tensor(DType::kFloat32, Shape{64, 64}), "x");
    total = ops::while_loop(
        b,
        [](GraphBuilder& b, const std::vector<Output>& v) {
          return ops::less(b, v[0], ops::scalar(b, 8, DType::kInt32));
        },
        [&](GraphBuilder& b, const std::vector<Output>& v) {
          Output y = ops::reduce_sum(b, b.add("TestOverlap", {x}));
          if (random) y = ops::add(b, y, ops::random_uniform(b, Shape{}));
          return std::vector<Output>{ops::add(b, v[0], 1.0), ops::add(b, v[1], y)};
        },
        {ops::scalar(b, 0, DType::kInt32), ops::scalar(b, 0, DType::kFloat32)},
        {.parallel_iterations = parallel_iterations})[1];
    REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  }
  // The most runs of TestOverlap at once in one run.
  int overlap() {
    Executor exec(g);
    most_at_once = 0;
    auto got = exec.run({}, {total});
    REQUIRE_MESSAGE(got.ok(), got.status().to_string());
    return most_at_once;
  }
};

Tensor f32(float v) { return Tensor::from_vector<float>(Shape{}, {v}); }
Tensor boolean(bool v) { return Tensor::from_vector<bool>(Shape{}, {v}); }

// A float x sent down one side of a Switch or the other by a bool p, both fed.
struct Switched {
  Graph g;
  GraphBuilder b{&g};
  Output x = ops::placeholder(b, DType::kFloat32, Shape{}, "x");
  Output p = ops::placeholder(b, DType::kBool, Shape{}, "p");
  std::pair<Output, Output> sides = ops::switch_(b, x, p);  // (p false, p true)
};

}  // namespace

TEST_CASE("a Switch's untaken side runs no kernel; the Merge forwards the live side") {
  Switched s;
  Output on_false = s.b.add("TestCountCalls", {ops::neg(s.b, s.sides.first)});
  Output on_true = s.b.add("TestCountCalls", {s.sides.second});
  auto [out, index] = ops::merge(s.b, {on_false, on_true});
  REQUIRE_MESSAGE(s.b.ok(), s.b.status().to_string());
  Executor exec(s.g);
  calls = 0;
  auto got = exec.run({{s.x, f32(2)}, {s.p, boolean(true)}}, {out, index});
  REQUIRE_MESSAGE(got.ok(), got.status().to_string());
  CHECK((*got)[0].data<float>()[0] == 2);
  CHECK((*got)[1].data<int32_t>()[0] == 1);
  CHECK(calls == 1);
  got = exec.run({{s.x, f32(2)}, {s.p, boolean(false)}}, {out, index});
  REQUIRE(got.ok());
  CHECK((*got)[0].data<float>()[0] == -2);
  CHECK((*got)[1].data<int32_t>()[0] == 0);
  CHECK(calls == 2);
}

TEST_CASE("a Merge whose inputs are all dead is dead") {
  Switched s;
  Output t = s.sides.second;
  Output both_true = ops::merge(s.b, {t, ops::identity(s.b, t)}).first;
  REQUIRE(s.b.ok());
  Executor exec(s.g);
  auto got = exec.run({{s.x, f32(1)}, {s.p, boolean(false)}}, {both_true});
  REQUIRE_FALSE(got.ok());
  CHECK(got.status().message().find("is dead") != std::string::npos);
  got = exec.run({{s.x, f32(1)}, {s.p, boolean(true)}}, {both_true});
  REQUIRE(got.ok());
}

TEST_CASE("a loop's body runs once per iteration") {
  Graph g;
  GraphBuilder b(&g);
  Output n = ops::placeholder(b, DType::kInt32, Shape{}, "n");
  std::vector<Output> r = ops::while_loop(
      b, [&](GraphBuilder& b, const std::vector<Output>& v) { return ops::less(b, v[0], n); },
      [&](GraphBuilder& b, const std::vector<Output>& v) {
        return std::vector<Output>{ops::add(b, v[0], 1.0), b.add("TestCountCalls", {v[1]})};
      },
      {ops::scalar(b, 0, DType::kInt32), ops::scalar(b, 1, DType::kFloat32)});
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  Executor exec(g);
  for (int trips : {0, 1, 7}) {
    calls = 0;
    auto got = exec.run({{n, Tensor::from_vector<int32_t>(Shape{}, {trips})}}, {r[0], r[1]});
    REQUIRE_MESSAGE(got.ok(), got.status().to_string());
    CHECK((*got)[0].data<int32_t>()[0] == trips);
    CHECK(calls == trips);
  }
}

TEST_CASE(
    "iterations that do not depend on each other overlap up to parallel_iterations; a loop with "
    "a stateful node runs a node at a time") {
  if (std::thread::hardware_concurrency() < 2) return;  // one core: nothing to overlap
  CHECK(IndependentIterations(10, false).overlap() >= 2);
  CHECK(IndependentIterations(2, false).overlap() == 2);  // two iterations in flight at most
  CHECK(IndependentIterations(1, false).overlap() == 1);  // one iteration in flight at a time
  CHECK(IndependentIterations(10, true).overlap() == 1);  // its random numbers drawn in order
  IndependentIterations stateless(10, false), stateful(10, true);
  auto workers = [](const Graph& g) {
    std::vector<int> all(g.num_nodes());
    for (int i = 0; i < g.num_nodes(); ++i) all[i] = i;
    auto plan = FrameExecutor::plan(g, all, {});
    REQUIRE(plan.ok());
    return (*plan)->workers();
  };
  CHECK(workers(stateless.g) ==
        static_cast<int>(std::min(std::thread::hardware_concurrency(), 10u)));
  CHECK(workers(stateful.g) == 1);
}

TEST_CASE("a kernel failing in one of several iterations at once fails the run, and no more") {
  Graph g;
  GraphBuilder b(&g);
  // Row i of a [4, 2048] table each iteration: the fifth has no row.
  Output table = ops::constant(b, Tensor(DType::kFloat32, Shape{4, 2048}), "table");
  Output n = ops::placeholder(b, DType::kInt32, Shape{}, "n");
  Output total = ops::while_loop(
      b, [&](GraphBuilder& b, const std::vector<Output>& v) { return ops::less(b, v[0], n); },
      [&](GraphBuilder& b, const std::vector<Output>& v) {
        Output row = ops::gather(b, table, v[0]);
        return std::vector<Output>{ops::add(b, v[0], 1.0),
                                   ops::add(b, v[1], ops::reduce_sum(b, row))};
      },
      {ops::scalar(b, 0, DType::kInt32), ops::scalar(b, 0, DType::kFloat32)})[1];
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  Executor exec(g);
  for (int trips : {8, 4, 6}) {
    auto got = exec.run({{n, Tensor::from_vector<int32_t>(Shape{}, {trips})}}, {total});
    CHECK(got.ok() == (trips == 4));
    if (!got.ok()) CHECK(got.status().message().find("Gather") != std::string::npos);
  }
}

TEST_CASE("values that cross frames other than through Enter and Exit are refused") {
  {
    Graph g;
    GraphBuilder b(&g);
    Output x = ops::placeholder(b, DType::kFloat32, Shape{}, "x");
    Output inside = ops::enter(b, x, "frame");
    Output mixed = ops::add(b, inside, x);  // x is in the root frame, inside in "frame"
    REQUIRE(b.ok());
    Executor exec(g);
    auto got = exec.run({{x, f32(1)}}, {mixed});
    REQUIRE_FALSE(got.ok());
    CHECK(got.status().message().find("different frames") != std::string::npos);
  }
  Graph g;
  GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{}, "x");
  Output out = ops::exit(b, x);
  REQUIRE(b.ok());
  Executor exec(g);
  auto got = exec.run({{x, f32(1)}}, {out});
  REQUIRE_FALSE(got.ok());
  CHECK(got.status().message().find("not inside a loop's frame") != std::string::npos);
}
