#include "estimators/step_timer.h"

namespace troupe::estimators {

SecondOrStepTimer::SecondOrStepTimer(int64_t every_steps, double every_secs)
    : every_steps_(every_steps), every_secs_(every_secs) {}

void SecondOrStepTimer::reset(int64_t global_step) {
  last_step_ = global_step;
  last_time_ = Clock::now();
}

bool SecondOrStepTimer::should_trigger(int64_t global_step) const {
  if (global_step == last_step_) return false;
  if (every_steps_ > 0 && global_step >= last_step_ + every_steps_) return true;
  return every_secs_ > 0 &&
         std::chrono::duration<double>(Clock::now() - last_time_).count() >= every_secs_;
}

Elapsed SecondOrStepTimer::update(int64_t global_step) {
  const Clock::time_point now = Clock::now();
  const Elapsed elapsed{std::chrono::duration<double>(now - last_time_).count(),
                        global_step - last_step_};
  last_step_ = global_step;
  last_time_ = now;
  return elapsed;
}

}  // namespace troupe::estimators
