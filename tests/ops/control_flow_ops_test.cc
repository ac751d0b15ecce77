// Control flow (cond, case_, while_loop) as runtime::Executor runs it: the branch taken alone
// computes, loops run as many iterations as their condition says (a fed count, a bound), nest,
// read outer values, hold conds and sit inside them; the builders' errors name the loop or cond;
// a cond's gradient flows through the branch taken, a loop's runs its body backwards, and a
// cond's inside a loop takes the branch each iteration took.
#include "ops/control_flow_ops.h"

#include <doctest/doctest.h>

#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "runtime/executor.h"
#include "runtime/gradients.h"

using namespace troupe;
using namespace troupe::runtime;

namespace {

using Outputs = std::vector<Output>;

// One run of `g`, each fetch a scalar read as double; fails the test on an error.
std::vector<double> run(const Graph& g, const FeedList& feeds, const Outputs& fetches) {
  Executor exec(g);
  auto got = exec.run(feeds, fetches);
  REQUIRE_MESSAGE(got.ok(), got.status().to_string());
  std::vector<double> out;
  for (const Tensor& t : *got) {
    REQUIRE(t.num_elements() == 1);
    switch (t.dtype()) {
      case DType::kFloat32:
        out.push_back(t.data<float>()[0]);
        break;
      case DType::kInt32:
        out.push_back(t.data<int32_t>()[0]);
        break;
      case DType::kInt64:
        out.push_back(double(t.data<int64_t>()[0]));
        break;
      default:
        FAIL("unexpected dtype");
    }
  }
  return out;
}

Tensor f32(float v) { return Tensor::from_vector<float>(Shape{}, {v}); }
Tensor i32(int32_t v) { return Tensor::from_vector<int32_t>(Shape{}, {v}); }
// A loop condition: its first variable (int32) below `limit`.
ops::LoopCondFn count_below(int limit) {
  return [limit](GraphBuilder& b, const Outputs& v) {
    return ops::less(b, v[0], ops::scalar(b, limit, DType::kInt32));
  };
}

// A scalar placeholder.
Output fed(GraphBuilder& b, DType dtype, const std::string& name) {
  return ops::placeholder(b, dtype, Shape{}, name);
}

}  // namespace

TEST_CASE("cond computes the branch its predicate picks, and only that one") {
  Graph g;
  GraphBuilder b(&g);
  Output x = fed(b, DType::kFloat32, "x");
  Output n = fed(b, DType::kInt32, "n");
  // The false branch divides by n: run when n is 0, the integer division would fail.
  Outputs r = ops::cond(
      b, ops::equal(b, n, ops::scalar(b, 0, DType::kInt32)),
      [&](GraphBuilder& b) {
        return Outputs{ops::mul(b, x, 2.0), ops::scalar(b, 7, DType::kInt32)};
      },
      [&](GraphBuilder& b) {
        return Outputs{ops::square(b, x), ops::div(b, ops::scalar(b, 100, DType::kInt32), n)};
      });
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  REQUIRE(r.size() == 2);
  CHECK(run(g, {{x, f32(3)}, {n, i32(0)}}, r) == std::vector<double>{6, 7});
  CHECK(run(g, {{x, f32(3)}, {n, i32(4)}}, r) == std::vector<double>{9, 25});
}

TEST_CASE("a branch may return an outer value as it is; a dead fetch is an error naming it") {
  Graph g;
  GraphBuilder b(&g);
  Output p = fed(b, DType::kBool, "p");
  Output x = fed(b, DType::kFloat32, "x");
  Output y = fed(b, DType::kFloat32, "y");
  Output inside;
  Outputs r = ops::cond(
      b, p, [&](GraphBuilder&) { return Outputs{x}; },
      [&](GraphBuilder& b) {
        inside = ops::neg(b, y);
        return Outputs{y};
      });
  REQUIRE(b.ok());
  Tensor t = Tensor::from_vector<bool>(Shape{}, {true});
  Tensor f = Tensor::from_vector<bool>(Shape{}, {false});
  CHECK(run(g, {{p, t}, {x, f32(1)}, {y, f32(2)}}, r) == std::vector<double>{1});
  CHECK(run(g, {{p, f}, {x, f32(1)}, {y, f32(2)}}, r) == std::vector<double>{2});
  Executor exec(g);
  auto dead = exec.run({{p, t}, {x, f32(1)}, {y, f32(2)}}, {inside});
  REQUIRE_FALSE(dead.ok());
  CHECK(dead.status().message().find("is dead") != std::string::npos);
  CHECK(dead.status().message().find(g.output_name(inside)) != std::string::npos);
}

TEST_CASE(
    "cond's errors: branches that disagree, a predicate that is not a bool scalar, a "
    "value used outside its branch") {
  {
    Graph g;
    GraphBuilder b(&g);
    Output x = fed(b, DType::kFloat32, "x");
    ops::cond(
        b, ops::less(b, x, ops::scalar(b, 0, DType::kFloat32)),
        [&](GraphBuilder&) {
          return Outputs{x, x};
        },
        [&](GraphBuilder&) { return Outputs{x}; }, "mine");
    REQUIRE_FALSE(b.ok());
    CHECK(b.status().message().find("cond 'mine'") != std::string::npos);
    CHECK(b.status().message().find("2 outputs") != std::string::npos);
  }
  {
    Graph g;
    GraphBuilder b(&g);
    Output x = fed(b, DType::kFloat32, "x");
    ops::cond(
        b, x, [&](GraphBuilder&) { return Outputs{x}; }, [&](GraphBuilder&) { return Outputs{x}; });
    REQUIRE_FALSE(b.ok());
    CHECK(b.status().message().find("bool scalar") != std::string::npos);
  }
  {
    Graph g;
    GraphBuilder b(&g);
    Output x = fed(b, DType::kFloat32, "x");
    Output leaked;
    ops::cond(
        b, ops::less(b, x, ops::scalar(b, 0, DType::kFloat32)),
        [&](GraphBuilder& b) {
          leaked = ops::neg(b, x);
          return Outputs{leaked};
        },
        [&](GraphBuilder&) { return Outputs{x}; });
    REQUIRE(b.ok());
    ops::square(b, leaked);
    REQUIRE_FALSE(b.ok());
    CHECK(b.status().message().find("is used outside it") != std::string::npos);
  }
}

TEST_CASE("case_ runs the branch of the first true predicate, else the default") {
  Graph g;
  GraphBuilder b(&g);
  Output x = fed(b, DType::kInt32, "x");
  auto constant = [](int v) {
    return [v](GraphBuilder& b) { return Outputs{ops::scalar(b, v, DType::kInt32)}; };
  };
  Outputs r = ops::case_(b,
                         {{ops::less(b, x, ops::scalar(b, 0, DType::kInt32)), constant(-1)},
                          {ops::less(b, x, ops::scalar(b, 10, DType::kInt32)), constant(1)},
                          {ops::less(b, x, ops::scalar(b, 100, DType::kInt32)), constant(2)}},
                         constant(3));
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  CHECK(run(g, {{x, i32(-5)}}, r)[0] == -1);
  CHECK(run(g, {{x, i32(5)}}, r)[0] == 1);
  CHECK(run(g, {{x, i32(50)}}, r)[0] == 2);
  CHECK(run(g, {{x, i32(500)}}, r)[0] == 3);
}

TEST_CASE("while_loop runs until its condition, fed or fixed, says stop") {
  Graph g;
  GraphBuilder b(&g);
  Output n = fed(b, DType::kInt32, "n");
  Output w = fed(b, DType::kFloat32, "w");  // read in every iteration
  Outputs r = ops::while_loop(
      b, [&](GraphBuilder& b, const Outputs& v) { return ops::less(b, v[0], n); },
      [&](GraphBuilder& b, const Outputs& v) {
        return Outputs{ops::add(b, v[0], 1.0), ops::mul(b, v[1], 2.0), ops::add(b, v[2], w)};
      },
      {ops::scalar(b, 0, DType::kInt32), ops::scalar(b, 1, DType::kFloat32),
       ops::scalar(b, 0, DType::kFloat32)});
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  CHECK(run(g, {{n, i32(10)}, {w, f32(0.5)}}, r) == std::vector<double>{10, 1024, 5});
  CHECK(run(g, {{n, i32(3)}, {w, f32(2)}}, r) == std::vector<double>{3, 8, 6});
  CHECK(run(g, {{n, i32(0)}, {w, f32(2)}}, r) == std::vector<double>{0, 1, 0});
}

TEST_CASE("while_loop's maximum_iterations bounds a loop whose condition stays true") {
  Graph g;
  GraphBuilder b(&g);
  Outputs r = ops::while_loop(
      b, [](GraphBuilder& b, const Outputs& v) { return ops::greater_equal(b, v[0], v[0]); },
      [](GraphBuilder& b, const Outputs& v) { return Outputs{ops::add(b, v[0], 3.0)}; },
      {ops::scalar(b, 1, DType::kInt64)}, {.maximum_iterations = 5});
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  CHECK(run(g, {}, r) == std::vector<double>{16});
  // The counter it adds is not the user's: errors number the user's variables.
  ops::while_loop(
      b, [](GraphBuilder& b, const Outputs& v) { return ops::greater_equal(b, v[0], v[0]); },
      [](GraphBuilder& b, const Outputs& v) { return Outputs{ops::cast(b, v[0], DType::kInt32)}; },
      {ops::scalar(b, 1, DType::kInt64)}, {.maximum_iterations = 5}, "typed");
  REQUIRE_FALSE(b.ok());
  CHECK(b.status().message().find("while 'typed': the body turns loop variable 0 from int64") !=
        std::string::npos);
}

TEST_CASE("loops nest, hold conds, and sit on branches, taken or not") {
  Graph g;
  GraphBuilder b(&g);
  Output p = fed(b, DType::kBool, "p");
  auto int_const = [](GraphBuilder& b, int v) { return ops::scalar(b, v, DType::kInt32); };
  // 3 x 4 iterations, each adding 1 when i < 2, else 10: 2*4 + 1*40 = 48.
  Outputs nested = ops::while_loop(
      b, [&](GraphBuilder& b, const Outputs& v) { return ops::less(b, v[0], int_const(b, 3)); },
      [&](GraphBuilder& b, const Outputs& v) {
        Output i = v[0];
        Outputs inner = ops::while_loop(
            b,
            [&](GraphBuilder& b, const Outputs& u) { return ops::less(b, u[0], int_const(b, 4)); },
            [&](GraphBuilder& b, const Outputs& u) {
              Outputs step = ops::cond(
                  b, ops::less(b, i, int_const(b, 2)),
                  [&](GraphBuilder& b) { return Outputs{int_const(b, 1)}; },
                  [&](GraphBuilder& b) { return Outputs{int_const(b, 10)}; });
              return Outputs{ops::add(b, u[0], 1.0), ops::add(b, u[1], step[0])};
            },
            {int_const(b, 0), v[1]}, {}, "inner");
        return Outputs{ops::add(b, i, 1.0), inner[1]};
      },
      {int_const(b, 0), int_const(b, 0)}, {}, "outer");
  // A loop on a branch: run when taken, and when not, its dead Exits let the Merge through.
  Outputs on_branch = ops::cond(
      b, p,
      [&](GraphBuilder& b) {
        return Outputs{ops::while_loop(
            b,
            [&](GraphBuilder& b, const Outputs& v) { return ops::less(b, v[0], int_const(b, 5)); },
            [&](GraphBuilder& b, const Outputs& v) { return Outputs{ops::add(b, v[0], 1.0)}; },
            {int_const(b, 0)})[0]};
      },
      [&](GraphBuilder& b) { return Outputs{int_const(b, -1)}; });
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  Tensor t = Tensor::from_vector<bool>(Shape{}, {true});
  Tensor f = Tensor::from_vector<bool>(Shape{}, {false});
  CHECK(run(g, {{p, t}}, {nested[1], on_branch[0]}) == std::vector<double>{48, 5});
  CHECK(run(g, {{p, f}}, {nested[1], on_branch[0]}) == std::vector<double>{48, -1});
}

TEST_CASE(
    "a body that changes a variable's shape is refused, naming the loop; an invariant "
    "lets it grow") {
  {
    Graph g;
    GraphBuilder b(&g);
    Output x = ops::placeholder(b, DType::kFloat32, Shape{2}, "x");
    ops::while_loop(
        b,
        [](GraphBuilder& b, const Outputs& v) {
          return ops::less(b, v[0], ops::scalar(b, 3, DType::kInt32));
        },
        [](GraphBuilder& b, const Outputs& v) {
          return Outputs{ops::add(b, v[0], 1.0), ops::concat(b, {v[1], v[1]}, 0)};
        },
        {ops::scalar(b, 0, DType::kInt32), x}, {}, "grow");
    REQUIRE_FALSE(b.ok());
    CHECK(b.status().message().find("while 'grow'") != std::string::npos);
    CHECK(b.status().message().find("loop variable 1") != std::string::npos);
  }
  Graph g;
  GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{2}, "x");
  Outputs r = ops::while_loop(
      b,
      [](GraphBuilder& b, const Outputs& v) {
        return ops::less(b, v[0], ops::scalar(b, 3, DType::kInt32));
      },
      [](GraphBuilder& b, const Outputs& v) {
        return Outputs{ops::add(b, v[0], 1.0), ops::concat(b, {v[1], v[1]}, 0)};
      },
      {ops::scalar(b, 0, DType::kInt32), x}, {.shape_invariants = {Shape{}, Shape{-1}}});
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  Executor exec(g);
  auto got = exec.run({{x, Tensor::from_vector<float>(Shape{2}, {1, 2})}}, {r[1]});
  REQUIRE(got.ok());
  CHECK((*got)[0].shape() == Shape{16});
  CHECK((*got)[0].data<float>()[15] == 2);
}

TEST_CASE("a cond's gradient flows through the branch taken") {
  Graph g;
  GraphBuilder b(&g);
  // y = x * x * c when x < 0, else 3 x: dy/dx = 2 x c or 3, dy/dc = x * x or 0.
  Output x = fed(b, DType::kFloat32, "x");
  Output negative = ops::less(b, x, ops::scalar(b, 0, DType::kFloat32));
  Output c = fed(b, DType::kFloat32, "c");
  Outputs y = ops::cond(
      b, negative, [&](GraphBuilder& b) { return Outputs{ops::mul(b, ops::square(b, x), c)}; },
      [&](GraphBuilder& b) { return Outputs{ops::mul(b, x, 3.0)}; });
  Outputs d = gradients(b, {y[0]}, {x, c});
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  REQUIRE(d[0].valid());
  REQUIRE(d[1].valid());
  CHECK(run(g, {{x, f32(-2)}, {c, f32(5)}}, {y[0], d[0], d[1]}) == std::vector<double>{20, -20, 4});
  CHECK(run(g, {{x, f32(2)}, {c, f32(5)}}, {y[0], d[0], d[1]}) == std::vector<double>{6, 3, 0});
}

TEST_CASE(
    "a loop's gradient runs its body backwards, as many times as it ran, values from "
    "stacks") {
  Graph g;
  GraphBuilder b(&g);
  Output x0 = fed(b, DType::kFloat32, "x0");
  Output w = fed(b, DType::kFloat32, "w");
  Output n = fed(b, DType::kInt32, "n");
  // x = x0 * w^n, n fed: dx/dx0 = w^n, dx/dw = n x0 w^(n-1). w is an outer value the body reads
  // (its gradient sums over the iterations), x a loop variable (its gradient goes round).
  Outputs r = ops::while_loop(
      b, [&](GraphBuilder& b, const Outputs& v) { return ops::less(b, v[0], n); },
      [&](GraphBuilder& b, const Outputs& v) {
        return Outputs{ops::add(b, v[0], 1.0), ops::mul(b, v[1], w)};
      },
      {ops::scalar(b, 0, DType::kInt32), x0});
  Outputs d = gradients(b, {r[1]}, {x0, w});
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  REQUIRE(d[0].valid());
  REQUIRE(d[1].valid());
  CHECK(run(g, {{x0, f32(2)}, {w, f32(1.5)}, {n, i32(3)}}, {r[1], d[0], d[1]}) ==
        std::vector<double>{6.75, 3.375, 13.5});
  CHECK(run(g, {{x0, f32(2)}, {w, f32(1.5)}, {n, i32(1)}}, {r[1], d[0], d[1]}) ==
        std::vector<double>{3, 1.5, 2});
  CHECK(run(g, {{x0, f32(2)}, {w, f32(1.5)}, {n, i32(0)}}, {r[1], d[0], d[1]}) ==
        std::vector<double>{2, 1, 0});
}

TEST_CASE("nested loops differentiate inside out") {
  Graph g;
  GraphBuilder b(&g);
  Output x0 = fed(b, DType::kFloat32, "x0");
  Output w = fed(b, DType::kFloat32, "w");
  // 2 outer iterations of 3 inner ones: x = x0 * w^6, dx/dw = 6 x0 w^5.
  Outputs r = ops::while_loop(
      b, count_below(2),
      [&](GraphBuilder& b, const Outputs& v) {
        Outputs inner = ops::while_loop(
            b, count_below(3),
            [&](GraphBuilder& b, const Outputs& u) {
              return Outputs{ops::add(b, u[0], 1.0), ops::mul(b, u[1], w)};
            },
            {ops::scalar(b, 0, DType::kInt32), v[1]}, {}, "inner");
        return Outputs{ops::add(b, v[0], 1.0), inner[1]};
      },
      {ops::scalar(b, 0, DType::kInt32), x0}, {}, "outer");
  Outputs d = gradients(b, {r[1]}, {x0, w});
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  const std::vector<double> got = run(g, {{x0, f32(0.5)}, {w, f32(2)}}, {r[1], d[0], d[1]});
  CHECK(got[0] == 32);
  CHECK(got[1] == 64);
  CHECK(got[2] == 96);
}

TEST_CASE(
    "a cond inside a loop's body: each backward iteration takes the branch its forward "
    "iteration took, with that branch's values") {
  Graph g;
  GraphBuilder b(&g);
  Output x0 = fed(b, DType::kFloat32, "x0");
  Output w = fed(b, DType::kFloat32, "w");
  Output n = fed(b, DType::kInt32, "n");
  // x = x < w ? x * w : x * x, n times. From x0 = 0.5, w = 2: 1, 2, 4, 16, so after 4
  // iterations x = x0^4 w^8: dx/dx0 = 4 x0^3 w^8 = 128, dx/dw = 8 x0^4 w^7 = 64.
  Outputs r = ops::while_loop(
      b, [&](GraphBuilder& b, const Outputs& v) { return ops::less(b, v[0], n); },
      [&](GraphBuilder& b, const Outputs& v) {
        Outputs c = ops::cond(
            b, ops::less(b, v[1], w),
            [&](GraphBuilder& b) { return Outputs{ops::mul(b, v[1], w)}; },
            [&](GraphBuilder& b) { return Outputs{ops::square(b, v[1])}; });
        return Outputs{ops::add(b, v[0], 1.0), c[0]};
      },
      {ops::scalar(b, 0, DType::kInt32), x0});
  Outputs d = gradients(b, {r[1]}, {x0, w});
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  CHECK(run(g, {{x0, f32(0.5)}, {w, f32(2)}, {n, i32(4)}}, {r[1], d[0], d[1]}) ==
        std::vector<double>{16, 128, 64});
  // Two iterations, the true branch both times: x = x0 w^2.
  CHECK(run(g, {{x0, f32(0.5)}, {w, f32(2)}, {n, i32(2)}}, {r[1], d[0], d[1]}) ==
        std::vector<double>{2, 4, 2});
  // The false branch only: x = x0^(2^3), w unread.
  CHECK(run(g, {{x0, f32(3)}, {w, f32(2)}, {n, i32(3)}}, {r[1], d[0], d[1]}) ==
        std::vector<double>{6561, 8 * 2187, 0});
  // Every stack a branch pushed on is popped: a second run starts from empty ones.
  CHECK(run(g, {{x0, f32(0.5)}, {w, f32(2)}, {n, i32(4)}}, {r[1], d[0], d[1]}) ==
        std::vector<double>{16, 128, 64});
}

TEST_CASE("conds nest inside a loop's body, over values of unknown shape") {
  Graph g;
  GraphBuilder b(&g);
  Output x0 = ops::placeholder(b, DType::kFloat32, Shape{-1}, "x0");
  Output w = fed(b, DType::kFloat32, "w");
  // Each of 3 iterations: s = sum(x); s > 0 ? (s > 4 ? x * 0.5 : x * w) : -x.
  Outputs r = ops::while_loop(
      b, count_below(3),
      [&](GraphBuilder& b, const Outputs& v) {
        Output s = ops::reduce_sum(b, v[1]);
        Outputs c = ops::cond(
            b, ops::greater(b, s, ops::scalar(b, 0, DType::kFloat32)),
            [&](GraphBuilder& b) {
              return ops::cond(
                  b, ops::greater(b, s, ops::scalar(b, 4, DType::kFloat32)),
                  [&](GraphBuilder& b) { return Outputs{ops::mul(b, v[1], 0.5)}; },
                  [&](GraphBuilder& b) { return Outputs{ops::mul(b, v[1], w)}; }, "inner");
            },
            [&](GraphBuilder& b) { return Outputs{ops::neg(b, v[1])}; });
        return Outputs{ops::add(b, v[0], 1.0), c[0]};
      },
      {ops::scalar(b, 0, DType::kInt32), x0}, {.shape_invariants = {Shape{}, Shape{-1}}});
  Output loss = ops::reduce_sum(b, r[1]);
  Outputs d = gradients(b, {loss}, {x0, w});
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  // x0 = (-1, 0.5): s = -0.5, x = (1, -0.5); s = 0.5, x = (3, -1.5); s = 1.5, x = (9, -4.5).
  // x = -x0 w^2: dloss/dx0 = -w^2 each, dloss/dw = -2 w sum(x0) = 3.
  Executor exec(g);
  auto got = exec.run({{x0, Tensor::from_vector<float>(Shape{2}, {-1, 0.5})}, {w, f32(3)}},
                      {r[1], d[0], d[1]});
  REQUIRE_MESSAGE(got.ok(), got.status().to_string());
  CHECK((*got)[0].to_vector<float>() == std::vector<float>{9, -4.5});
  CHECK((*got)[1].to_vector<float>() == std::vector<float>{-9, -9});
  CHECK((*got)[2].to_vector<float>() == std::vector<float>{3});
  // x0 = (4, 2), w = 2: s = 6, x = (2, 1); s = 3, x = (4, 2); s = 6, x = (2, 1): x = x0 w / 4.
  got = exec.run({{x0, Tensor::from_vector<float>(Shape{2}, {4, 2})}, {w, f32(2)}},
                 {r[1], d[0], d[1]});
  REQUIRE_MESSAGE(got.ok(), got.status().to_string());
  CHECK((*got)[0].to_vector<float>() == std::vector<float>{2, 1});
  CHECK((*got)[1].to_vector<float>() == std::vector<float>{0.5, 0.5});
  CHECK((*got)[2].to_vector<float>() == std::vector<float>{1.5});
}

TEST_CASE("a loop inside a cond inside a loop's body differentiates in the branch taken") {
  Graph g;
  GraphBuilder b(&g);
  Output x0 = fed(b, DType::kFloat32, "x0");
  Output w = fed(b, DType::kFloat32, "w");
  // Twice: x = x < w ? (twice: x = x * w) : x. From x0 = 0.125, w = 2: 0.5, 2, so x = x0 w^4:
  // dx/dx0 = 16, dx/dw = 4 x0 w^3 = 4. From x0 = 0.5: 2, then 2 (the false branch): x = x0 w^2.
  Outputs r = ops::while_loop(
      b, count_below(2),
      [&](GraphBuilder& b, const Outputs& v) {
        Outputs c = ops::cond(
            b, ops::less(b, v[1], w),
            [&](GraphBuilder& b) {
              return Outputs{ops::while_loop(
                  b, count_below(2),
                  [&](GraphBuilder& b, const Outputs& u) {
                    return Outputs{ops::add(b, u[0], 1.0), ops::mul(b, u[1], w)};
                  },
                  {ops::scalar(b, 0, DType::kInt32), v[1]}, {}, "inner")[1]};
            },
            [&](GraphBuilder&) { return Outputs{v[1]}; });
        return Outputs{ops::add(b, v[0], 1.0), c[0]};
      },
      {ops::scalar(b, 0, DType::kInt32), x0}, {}, "outer");
  Outputs d = gradients(b, {r[1]}, {x0, w});
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  CHECK(run(g, {{x0, f32(0.125)}, {w, f32(2)}}, {r[1], d[0], d[1]}) ==
        std::vector<double>{2, 16, 4});
  CHECK(run(g, {{x0, f32(0.5)}, {w, f32(2)}}, {r[1], d[0], d[1]}) == std::vector<double>{2, 4, 2});
}

TEST_CASE(
    "a loop's nodes, the values it captures and its gradient's sit under name scopes, "
    "which TensorBoard's graph view folds into one group each") {
  Graph g;
  GraphBuilder b(&g);
  Output x = fed(b, DType::kFloat32, "x");
  Output w = fed(b, DType::kFloat32, "w");
  Outputs r = ops::while_loop(
      b, count_below(3),
      [&](GraphBuilder& b, const Outputs& v) {
        return Outputs{ops::add(b, v[0], 1.0), ops::mul(b, v[1], w)};
      },
      {ops::scalar(b, 0, DType::kInt32), x}, {}, "decay");
  gradients(b, {r[1]}, {x, w});
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  int loop_nodes = 0;
  for (const runtime::Node& n : g.nodes()) {
    if (n.op != "Enter" && n.op != "Merge" && n.op != "Switch" && n.op != "NextIteration" &&
        n.op != "Exit" && n.op != "StackPush" && n.op != "StackPop") {
      continue;
    }
    INFO("node ", n.name);
    ++loop_nodes;
    const bool forward = n.name.rfind("decay/", 0) == 0;
    const bool backward = n.name.rfind("gradients/decay_grad/", 0) == 0;
    CHECK((forward || backward));
  }
  CHECK(loop_nodes > 20);
}
