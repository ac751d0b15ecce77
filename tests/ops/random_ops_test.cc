// Random ops: reproducible with seeds, fresh per step, with the right moments and bounds.
#include "ops/random_ops.h"

#include <doctest/doctest.h>

#include <cmath>

#include "harness/op_harness.h"

using namespace troupe;
using namespace troupe::runtime;
using testing::OpTest;

namespace {
std::pair<double, double> moments(const Tensor& t) {
  auto v = testing::values(t);
  double mean = 0, var = 0;
  for (double x : v) mean += x;
  mean /= v.size();
  for (double x : v) var += (x - mean) * (x - mean);
  return {mean, var / v.size()};
}
}  // namespace

TEST_CASE("uniform, normal and truncated normal have the right moments and bounds") {
  OpTest t;
  t.g.set_seed(1);
  Tensor u = t.eval(ops::random_uniform(t.b, Shape{100000}, 2, 4));
  auto [um, uv] = moments(u);
  CHECK(um == doctest::Approx(3.0).epsilon(0.01));
  CHECK(uv == doctest::Approx(4.0 / 12).epsilon(0.03));
  for (double v : testing::values(u)) CHECK((v >= 2 && v < 4));
  Tensor n = t.eval(ops::random_normal(t.b, Shape{100000}, 1, 2, DType::kFloat64));
  auto [nm, nv] = moments(n);
  CHECK(nm == doctest::Approx(1.0).epsilon(0.02));
  CHECK(nv == doctest::Approx(4.0).epsilon(0.03));
  Tensor tn = t.eval(ops::truncated_normal(t.b, Shape{100000}));
  double worst = 0;
  for (double v : testing::values(tn)) worst = std::max(worst, std::abs(v));
  CHECK(worst <= 2.0);
  CHECK(moments(tn).second ==
        doctest::Approx(0.774).epsilon(0.03));  // variance of N truncated at 2σ
}

TEST_CASE("seeded graphs repeat across runs; each step draws anew") {
  auto draw = [](int64_t graph_seed, int64_t op_seed) {
    OpTest t;
    if (graph_seed) t.g.set_seed(graph_seed);
    Output r = ops::random_uniform(t.b, Shape{8}, 0, 1, DType::kFloat32, op_seed);
    runtime::Executor exec(t.g);
    auto first = exec.run({}, {r});
    auto second = exec.run({}, {r});
    REQUIRE(first.ok());
    REQUIRE(second.ok());
    return std::make_pair((*first)[0].to_vector<float>(), (*second)[0].to_vector<float>());
  };
  auto a = draw(7, 0), b = draw(7, 0), c = draw(8, 0), d = draw(0, 3), e = draw(0, 3);
  CHECK(a.first == b.first);
  CHECK(a.second == b.second);
  CHECK(a.first != a.second);
  CHECK(a.first != c.first);
  CHECK(d.first == e.first);
  CHECK(draw(0, 0).first != draw(0, 0).first);  // unseeded
}
