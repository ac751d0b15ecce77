// FrameExecutor through Executor, on control-flow ops wired by hand: a dead branch runs no
// kernel, a Merge of dead inputs is dead, a loop's body runs once per iteration, and values that
// cross frames other than through Enter and Exit are refused when the run is planned.
#include "runtime/frame_executor.h"

#include <doctest/doctest.h>

#include <atomic>

#include "ops/array_ops.h"
#include "ops/control_flow_ops.h"
#include "ops/math_ops.h"
#include "ops/op_def_names.h"
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
