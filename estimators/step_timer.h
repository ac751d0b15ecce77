// SecondOrStepTimer: when a periodic hook acts, every N global steps or every S seconds,
// whichever comes first (TF's basic_session_run_hooks.SecondOrStepTimer). Every hook that saves,
// logs or summarizes "every N steps or seconds" asks one of these, so that they all count alike:
// from the step the session started at, by the global step reached (an asynchronous replica's
// global step jumps by the other replicas' steps; a step count by modulo would skip triggers).
//
//   SecondOrStepTimer timer(/*every_steps=*/100, /*every_secs=*/0);
//   timer.reset(ctx.global_step);                       // after_create_session
//   if (timer.should_trigger(c.global_step)) {          // after_run
//     auto [secs, steps] = timer.update(c.global_step);  // steps / secs: global_step/sec
//   }
//
// Not thread-safe: it belongs to one hook, which runs in one actor.
#pragma once

#include <chrono>
#include <cstdint>

namespace troupe::estimators {

struct Elapsed {
  double seconds = 0;
  int64_t steps = 0;
};

class SecondOrStepTimer {
 public:
  // `every_steps` <= 0 and `every_secs` <= 0 turn that trigger off; with both off it never fires.
  SecondOrStepTimer(int64_t every_steps, double every_secs);

  // Counts from `global_step`, now: the first trigger is a period after it.
  void reset(int64_t global_step);
  // Whether a period has passed since the last trigger (or reset) at `global_step`; never twice
  // at the same step.
  bool should_trigger(int64_t global_step) const;
  // Marks a trigger at `global_step`; returns the time and the steps since the last one.
  Elapsed update(int64_t global_step);

  int64_t last_step() const { return last_step_; }
  // The global step the step trigger fires at next; INT64_MAX without one.
  int64_t next_step() const { return every_steps_ > 0 ? last_step_ + every_steps_ : INT64_MAX; }

 private:
  using Clock = std::chrono::steady_clock;
  int64_t every_steps_;
  double every_secs_;
  int64_t last_step_ = 0;
  Clock::time_point last_time_ = Clock::now();
};

}  // namespace troupe::estimators
