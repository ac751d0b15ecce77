// Learning-rate schedules against their closed forms (TF's formulas), and an optimizer's
// schedule applied by minimize() step by step.
#include "ops/learning_rate_schedule.h"

#include <doctest/doctest.h>

#include <cmath>

#include "harness/op_harness.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/state_ops.h"
#include "ops/training_ops.h"

using namespace troupe;
using namespace troupe::runtime;
using testing::OpTest;
using Kind = ops::LearningRateSchedule::Kind;

namespace {

constexpr double kPi = 3.14159265358979323846;

template <class Schedule>
float at(int64_t step, Schedule schedule) {
  OpTest t;
  Output s = t.feed(Tensor::scalar<int64_t>(step));
  Output rate = schedule(t.b, s);
  REQUIRE_MESSAGE(t.b.ok(), t.b.status().to_string());
  return t.eval(rate).template data<float>()[0];
}

float scheduled(int64_t step, const ops::LearningRateSchedule& sc, double lr = 0.1) {
  return at(step, [&](GraphBuilder& b, Output s) {
    return ops::scheduled_rate(b, ops::scalar(b, lr, DType::kFloat32), sc, s);
  });
}

// TF's cosine_decay_restarts, in double on the host.
double sgdr(double step, double first, double t_mul, double m_mul, double alpha) {
  double done = step / first, i;
  if (t_mul == 1) {
    i = std::floor(done);
    done -= i;
  } else {
    i = std::floor(std::log(1 - done * (1 - t_mul)) / std::log(t_mul));
    const double before = (1 - std::pow(t_mul, i)) / (1 - t_mul);
    done = (done - before) / std::pow(t_mul, i);
  }
  const double cosine = 0.5 * std::pow(m_mul, i) * (1 + std::cos(kPi * done));
  return (1 - alpha) * cosine + alpha;
}

}  // namespace

TEST_CASE("TF's decay builders") {
  auto exp_decay = [](GraphBuilder& b, Output s) {
    return ops::exponential_decay(b, 0.1, s, 100, 0.5);
  };
  auto staircase = [](GraphBuilder& b, Output s) {
    return ops::exponential_decay(b, 0.1, s, 100, 0.5, true);
  };
  CHECK(at(0, exp_decay) == doctest::Approx(0.1f));
  CHECK(at(150, exp_decay) == doctest::Approx(0.1f * std::pow(0.5f, 1.5f)));
  CHECK(at(150, staircase) == doctest::Approx(0.05f));
  auto piecewise = [](GraphBuilder& b, Output s) {
    return ops::piecewise_constant(b, s, {10, 20}, {1.0, 0.5, 0.1});
  };
  CHECK(at(10, piecewise) == 1.0f);
  CHECK(at(11, piecewise) == 0.5f);
  CHECK(at(1000, piecewise) == doctest::Approx(0.1f));
  auto poly = [](GraphBuilder& b, Output s) {
    return ops::polynomial_decay(b, 1.0, s, 100, 0.0, 2.0);
  };
  CHECK(at(50, poly) == doctest::Approx(0.25f));
  CHECK(at(500, poly) == doctest::Approx(0.0f));
  auto poly_end = [](GraphBuilder& b, Output s) {
    return ops::polynomial_decay(b, 0.1, s, 100, 0.01);
  };
  CHECK(at(50, poly_end) == doctest::Approx(0.055f));
  CHECK(at(100, poly_end) == doctest::Approx(0.01f));
  auto cosine = [](GraphBuilder& b, Output s) { return ops::cosine_decay(b, 0.2, s, 100, 0.1); };
  for (int64_t step : {0, 25, 50, 99, 100, 400}) {
    CAPTURE(step);
    const double done = std::min<double>(step, 100) / 100;
    CHECK(at(step, cosine) ==
          doctest::Approx(0.2 * (0.9 * 0.5 * (1 + std::cos(kPi * done)) + 0.1)).epsilon(1e-5));
  }
  for (double t_mul : {1.0, 2.0, 1.5}) {
    auto restarts = [&](GraphBuilder& b, Output s) {
      return ops::cosine_decay_restarts(b, 0.1, s, 10, t_mul, 0.5, 0.05);
    };
    for (int64_t step : {0, 5, 9, 10, 11, 29, 30, 31, 75}) {
      CAPTURE(t_mul);
      CAPTURE(step);
      CHECK(at(step, restarts) ==
            doctest::Approx(0.1 * sgdr(step, 10, t_mul, 0.5, 0.05)).epsilon(1e-4));
    }
  }
}

TEST_CASE("a schedule multiplies the rate it is given; warm-up comes first") {
  ops::LearningRateSchedule sc;
  CHECK(ops::is_constant(sc));
  CHECK(scheduled(12345, sc) == doctest::Approx(0.1f));

  sc = {.kind = Kind::kCosine, .decay_steps = 100, .warmup_steps = 10};
  CHECK(scheduled(0, sc) == doctest::Approx(0.01f));  // 1/10 of the rate
  CHECK(scheduled(4, sc) == doctest::Approx(0.05f));
  CHECK(scheduled(9, sc) == doctest::Approx(0.1f));    // the schedule's step 0
  CHECK(scheduled(60, sc) == doctest::Approx(0.05f));  // half-way through the cosine
  CHECK(scheduled(110, sc) == doctest::Approx(0.0f));

  sc = {.kind = Kind::kPiecewiseConstant, .boundaries = {100, 200}, .factors = {1, 0.1, 0.01}};
  CHECK(scheduled(100, sc) == doctest::Approx(0.1f));
  CHECK(scheduled(101, sc) == doctest::Approx(0.01f));
  CHECK(scheduled(201, sc) == doctest::Approx(0.001f));

  // Exact in the step far beyond float32's 2^24.
  sc = {.kind = Kind::kPiecewiseConstant,
        .boundaries = {(int64_t{1} << 30) + 1},
        .factors = {1, 0.5}};
  CHECK(scheduled(int64_t{1} << 30, sc, 1.0) == 1.0f);
  CHECK(scheduled((int64_t{1} << 30) + 2, sc, 1.0) == 0.5f);

  sc = {.kind = Kind::kExponential, .decay_steps = 10, .decay_rate = 0.5, .staircase = true};
  CHECK(scheduled(25, sc) == doctest::Approx(0.025f));
}

TEST_CASE("a bad schedule is an error naming the field, in the builder too") {
  using S = ops::LearningRateSchedule;
  CHECK(ops::validate(S{.kind = Kind::kCosine, .decay_steps = 0}).message().find("decay_steps") !=
        std::string::npos);
  CHECK(ops::validate(S{.kind = Kind::kPiecewiseConstant, .boundaries = {5}, .factors = {1}})
            .message()
            .find("factors") != std::string::npos);
  CHECK(
      ops::validate(S{.kind = Kind::kPiecewiseConstant, .boundaries = {5, 3}, .factors = {1, 1, 1}})
          .message()
          .find("ascending") != std::string::npos);
  CHECK(ops::validate(S{.warmup_steps = -1}).message().find("warmup_steps") != std::string::npos);
  CHECK(ops::validate(S{.kind = Kind::kCosine, .alpha = 2}).message().find("alpha") !=
        std::string::npos);
  CHECK(ops::schedule_kind("cosine").value() == Kind::kCosine);
  CHECK(ops::schedule_kind("linear").status().message().find("'linear'") != std::string::npos);
  for (Kind k : {Kind::kConstant, Kind::kExponential, Kind::kPiecewiseConstant, Kind::kPolynomial,
                 Kind::kCosine, Kind::kCosineRestarts}) {
    CHECK(ops::schedule_kind(ops::schedule_name(k)).value() == k);
  }
  OpTest t;
  Output s = t.feed(Tensor::scalar<int64_t>(0));
  ops::scheduled_rate(t.b, ops::scalar(t.b, 0.1, DType::kFloat32),
                      S{.kind = Kind::kExponential, .decay_steps = -3}, s);
  CHECK(t.b.status().message().find("decay_steps") != std::string::npos);
}

TEST_CASE("minimize follows the optimizer's schedule over the global step") {
  // loss = w, so SGD lowers w by the step's rate: the rates are the differences.
  OpTest t;
  Output w =
      ops::variable(t.b, "w", Shape{}, DType::kFloat64, ops::scalar(t.b, 0, DType::kFloat64));
  ops::Optimizer opt = ops::Optimizer::sgd(1.0);
  opt.schedule = {.kind = Kind::kPolynomial, .decay_steps = 4, .warmup_steps = 2};
  int train_op = ops::minimize(t.b, w, opt);
  int init = ops::global_variables_initializer(t.b);
  REQUIRE_MESSAGE(t.b.ok(), t.b.status().to_string());
  runtime::Executor exec(t.g, {.variables = &t.vars});
  REQUIRE(exec.run({}, {}, {init}).ok());
  std::vector<double> rates;
  double before = 0;
  for (int i = 0; i < 7; ++i) {
    REQUIRE(exec.run({}, {}, {train_op}).ok());
    const double now = t.vars.read("w")->data<double>()[0];
    rates.push_back(before - now);
    before = now;
  }
  // Warm-up 0.5, 1; then 1 - k/4 for k = 0.. and 0 once decayed.
  const std::vector<double> expected = {0.5, 1, 1, 0.75, 0.5, 0.25, 0};
  for (size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    CHECK(rates[i] == doctest::Approx(expected[i]).epsilon(1e-6));
  }
}
