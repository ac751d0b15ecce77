#include "ops/learning_rate_schedule.h"

#include <cmath>

#include "ops/array_ops.h"
#include "ops/math_ops.h"

namespace troupe::ops {

namespace {

using Kind = LearningRateSchedule::Kind;

constexpr double kPi = 3.14159265358979323846;

const std::vector<std::pair<Kind, const char*>>& names() {
  static const std::vector<std::pair<Kind, const char*>> all = {
      {Kind::kConstant, "constant"},
      {Kind::kExponential, "exponential"},
      {Kind::kPiecewiseConstant, "piecewise_constant"},
      {Kind::kPolynomial, "polynomial"},
      {Kind::kCosine, "cosine"},
      {Kind::kCosineRestarts, "cosine_restarts"}};
  return all;
}

// Schedules compute in float64, exact in the step to 2^53, and give float32 rates.
Output num(GraphBuilder& b, double v) { return scalar(b, v, DType::kFloat64); }
Output steps(GraphBuilder& b, Output step) { return cast(b, step, DType::kFloat64); }
Output f32(GraphBuilder& b, Output x) { return cast(b, x, DType::kFloat32); }

// Each factor is the schedule's multiple of the starting rate at (float64) step `s`.
Output exponential_factor(GraphBuilder& b, Output s, double decay_steps, double decay_rate,
                          bool staircase) {
  Output p = div(b, s, decay_steps);
  if (staircase) p = floor(b, p);
  return pow(b, num(b, decay_rate), p);
}

Output piecewise_factor(GraphBuilder& b, Output s, const std::vector<double>& boundaries,
                        const std::vector<double>& values) {
  Output out = num(b, values.back());
  for (size_t i = boundaries.size(); i-- > 0;) {
    out = select(b, less_equal(b, s, num(b, boundaries[i])), num(b, values[i]), out);
  }
  return out;
}

// (1 - alpha) decayed + alpha
Output toward(GraphBuilder& b, Output decayed, double alpha) {
  return alpha == 0 ? decayed : add(b, mul(b, decayed, 1 - alpha), alpha);
}

Output polynomial_factor(GraphBuilder& b, Output s, double decay_steps, double power,
                         double alpha) {
  Output done = div(b, minimum(b, s, num(b, decay_steps)), decay_steps);
  return toward(b, pow(b, sub(b, num(b, 1), done), num(b, power)), alpha);
}

Output cosine_factor(GraphBuilder& b, Output s, double decay_steps, double alpha) {
  Output done = div(b, minimum(b, s, num(b, decay_steps)), decay_steps);
  return toward(b, mul(b, add(b, cos(b, mul(b, done, kPi)), 1), 0.5), alpha);
}

// SGDR, as TF's cosine_decay_restarts: period i lasts first * t_mul^i steps and starts at
// m_mul^i of the rate.
Output restarts_factor(GraphBuilder& b, Output s, double first, double t_mul, double m_mul,
                       double alpha) {
  Output done = div(b, s, first);  // in units of the first period
  Output i;
  if (t_mul == 1) {
    i = floor(b, done);
    done = sub(b, done, i);
  } else {
    // Periods 0..i-1 last (1 - t_mul^i) / (1 - t_mul) first periods.
    i = floor(b, div(b, log(b, sub(b, num(b, 1), mul(b, done, 1 - t_mul))), std::log(t_mul)));
    Output t_i = pow(b, num(b, t_mul), i);
    Output before = div(b, sub(b, num(b, 1), t_i), 1 - t_mul);
    done = div(b, sub(b, done, before), t_i);
  }
  Output cosine = mul(b, add(b, cos(b, mul(b, done, kPi)), 1), 0.5);
  if (m_mul != 1) cosine = mul(b, cosine, pow(b, num(b, m_mul), i));
  return toward(b, cosine, alpha);
}

Output factor(GraphBuilder& b, const LearningRateSchedule& sc, Output s) {
  const double d = static_cast<double>(sc.decay_steps);
  switch (sc.kind) {
    case Kind::kConstant:
      return num(b, 1);
    case Kind::kExponential:
      return exponential_factor(b, s, d, sc.decay_rate, sc.staircase);
    case Kind::kPiecewiseConstant:
      return piecewise_factor(b, s, std::vector<double>(sc.boundaries.begin(), sc.boundaries.end()),
                              sc.factors);
    case Kind::kPolynomial:
      return polynomial_factor(b, s, d, sc.power, sc.alpha);
    case Kind::kCosine:
      return cosine_factor(b, s, d, sc.alpha);
    case Kind::kCosineRestarts:
      return restarts_factor(b, s, d, sc.t_mul, sc.m_mul, sc.alpha);
  }
  return num(b, 1);
}

runtime::Status field_error(const std::string& field, const std::string& why) {
  return runtime::invalid_argument("learning-rate schedule: ", field, " ", why);
}

}  // namespace

std::string schedule_name(Kind kind) {
  for (const auto& [k, name] : names()) {
    if (k == kind) return name;
  }
  return "constant";
}

runtime::Result<Kind> schedule_kind(const std::string& name) {
  std::string known;
  for (const auto& [k, n] : names()) {
    if (name == n) return k;
    known += std::string(known.empty() ? "" : ", ") + n;
  }
  return runtime::invalid_argument("learning-rate schedule '", name, "' is not one of ", known);
}

bool is_constant(const LearningRateSchedule& s) {
  return s.kind == Kind::kConstant && s.warmup_steps == 0;
}

runtime::Status validate(const LearningRateSchedule& s) {
  if (s.warmup_steps < 0) return field_error("warmup_steps", "is negative");
  const bool decays = s.kind == Kind::kExponential || s.kind == Kind::kPolynomial ||
                      s.kind == Kind::kCosine || s.kind == Kind::kCosineRestarts;
  if (decays && s.decay_steps < 1) return field_error("decay_steps", "is below 1");
  if (s.kind == Kind::kExponential && !(s.decay_rate > 0)) {
    return field_error("decay_rate", "is not above 0");
  }
  if (!(s.alpha >= 0 && s.alpha <= 1)) return field_error("alpha", "is not in [0, 1]");
  if (s.kind == Kind::kPolynomial && !(s.power > 0)) return field_error("power", "is not above 0");
  if (s.kind == Kind::kCosineRestarts && !(s.t_mul > 0 && s.m_mul > 0)) {
    return field_error("t_mul and m_mul", "must be above 0");
  }
  if (s.kind == Kind::kPiecewiseConstant) {
    if (s.factors.size() != s.boundaries.size() + 1) {
      return field_error("factors", "needs one more value than boundaries (" +
                                        std::to_string(s.factors.size()) + " for " +
                                        std::to_string(s.boundaries.size()) + ")");
    }
    for (size_t i = 1; i < s.boundaries.size(); ++i) {
      if (s.boundaries[i] <= s.boundaries[i - 1]) {
        return field_error("boundaries", "are not ascending");
      }
    }
    for (double f : s.factors) {
      if (!(f >= 0)) return field_error("factors", "has a negative value");
    }
  }
  return runtime::ok_status();
}

Output scheduled_rate(GraphBuilder& b, Output lr, const LearningRateSchedule& s, Output step) {
  if (is_constant(s)) return lr;
  if (auto status = validate(s); !status.ok()) {
    b.record_error(status);
    return Output{};
  }
  auto scope = b.name_scope(schedule_name(s.kind) + "_schedule");
  Output at = steps(b, step);
  Output warm;
  if (s.warmup_steps > 0) {
    const double w = static_cast<double>(s.warmup_steps);
    warm = minimum(b, num(b, 1), div(b, add(b, at, 1), w));
    at = maximum(b, sub(b, at, w), num(b, 0));
  }
  Output f = s.kind == Kind::kConstant ? Output{} : factor(b, s, at);
  if (warm.valid()) f = f.valid() ? mul(b, f, warm) : warm;
  return mul(b, lr, f32(b, f));
}

Output exponential_decay(GraphBuilder& b, double lr, Output step, double decay_steps,
                         double decay_rate, bool staircase) {
  auto scope = b.name_scope("exponential_decay");
  return f32(b,
             mul(b, exponential_factor(b, steps(b, step), decay_steps, decay_rate, staircase), lr));
}

Output piecewise_constant(GraphBuilder& b, Output step, const std::vector<double>& boundaries,
                          const std::vector<double>& values) {
  if (values.size() != boundaries.size() + 1) {
    b.record_error(runtime::invalid_argument("piecewise_constant: ", values.size(), " values for ",
                                             boundaries.size(), " boundaries"));
    return Output{};
  }
  auto scope = b.name_scope("piecewise_constant");
  return f32(b, piecewise_factor(b, steps(b, step), boundaries, values));
}

Output polynomial_decay(GraphBuilder& b, double lr, Output step, double decay_steps, double end_lr,
                        double power) {
  auto scope = b.name_scope("polynomial_decay");
  const double alpha = lr == 0 ? 0 : end_lr / lr;
  return f32(b, mul(b, polynomial_factor(b, steps(b, step), decay_steps, power, alpha), lr));
}

Output cosine_decay(GraphBuilder& b, double lr, Output step, double decay_steps, double alpha) {
  auto scope = b.name_scope("cosine_decay");
  return f32(b, mul(b, cosine_factor(b, steps(b, step), decay_steps, alpha), lr));
}

Output cosine_decay_restarts(GraphBuilder& b, double lr, Output step, double first_decay_steps,
                             double t_mul, double m_mul, double alpha) {
  auto scope = b.name_scope("cosine_decay_restarts");
  return f32(
      b, mul(b, restarts_factor(b, steps(b, step), first_decay_steps, t_mul, m_mul, alpha), lr));
}

}  // namespace troupe::ops
