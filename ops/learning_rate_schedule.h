// Learning-rate schedules over the global step, as TF 1.x's tf.train.*_decay builders, and a
// schedule an Optimizer carries so that minimize() builds it for any model, canned or not.
//
//   Output step = global_step(b);
//   Output lr = cosine_decay(b, 0.1, step, /*decay_steps=*/10000);          // TF's builders
//   Optimizer opt = Optimizer::adam(1e-3);
//   opt.schedule = {.kind = LearningRateSchedule::Kind::kCosine, .decay_steps = 10000,
//                   .warmup_steps = 500};                 // minimize() applies it to the rate
//
// A schedule multiplies the optimizer's rate by a factor of the step, so a rate that is itself
// a tensor (the variable a plateau lowers) keeps its schedule. Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/builder_names.h"
#include "runtime/status.h"

namespace troupe::ops {

struct LearningRateSchedule {
  enum class Kind {
    kConstant,
    kExponential,        // rate * decay_rate^(step / decay_steps), floored when staircase
    kPiecewiseConstant,  // rate * factors[i] while step <= boundaries[i]
    kPolynomial,         // rate * ((1 - alpha) (1 - min(step, decay_steps) / decay_steps)^power
                         //         + alpha)
    kCosine,             // rate * ((1 - alpha) (1 + cos(pi min(step, decay_steps) / decay_steps))
                         //         / 2 + alpha)
    kCosineRestarts,     // SGDR: cosine periods of decay_steps, t_mul times longer and m_mul
                         // times lower each (TF's cosine_decay_restarts)
  };
  Kind kind = Kind::kConstant;
  int64_t decay_steps = 1000;
  double decay_rate = 0.96;
  bool staircase = false;
  std::vector<int64_t> boundaries;  // ascending; factors has one more entry
  std::vector<double> factors;
  double alpha = 0;  // the rate at the end, as a fraction of the start
  double power = 1;
  double t_mul = 2, m_mul = 1;
  // Before the schedule: the rate grows linearly over these steps, (step + 1) / warmup_steps of
  // it; the schedule then counts its steps from the end of the warm-up.
  int64_t warmup_steps = 0;
};

// constant, exponential, piecewise_constant, polynomial, cosine, cosine_restarts.
std::string schedule_name(LearningRateSchedule::Kind kind);
runtime::Result<LearningRateSchedule::Kind> schedule_kind(const std::string& name);
bool is_constant(const LearningRateSchedule& s);
// The error names the field that is wrong (decay_steps, factors, ...).
runtime::Status validate(const LearningRateSchedule& s);

// `lr` (a float32 scalar) scheduled by `s` over `step` (the int64 global step).
Output scheduled_rate(GraphBuilder& b, Output lr, const LearningRateSchedule& s, Output step);

// TF's builders, each a float32 scalar of `step`.
Output exponential_decay(GraphBuilder& b, double lr, Output step, double decay_steps,
                         double decay_rate, bool staircase = false);
// values[i] while step <= boundaries[i] (boundaries ascending; values has one more entry).
Output piecewise_constant(GraphBuilder& b, Output step, const std::vector<double>& boundaries,
                          const std::vector<double>& values);
// (lr - end_lr) (1 - min(step, decay_steps) / decay_steps)^power + end_lr.
Output polynomial_decay(GraphBuilder& b, double lr, Output step, double decay_steps,
                        double end_lr = 1e-4, double power = 1.0);
Output cosine_decay(GraphBuilder& b, double lr, Output step, double decay_steps, double alpha = 0);
Output cosine_decay_restarts(GraphBuilder& b, double lr, Output step, double first_decay_steps,
                             double t_mul = 2.0, double m_mul = 1.0, double alpha = 0);

}  // namespace troupe::ops
