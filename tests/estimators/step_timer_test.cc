// SecondOrStepTimer: every N global steps counted from the session's start, every S seconds, never
// twice at one step, and the elapsed time and steps a rate is computed from.
#include "estimators/step_timer.h"

#include <doctest/doctest.h>

#include <thread>

using troupe::estimators::SecondOrStepTimer;

TEST_CASE("SecondOrStepTimer fires every N global steps from where the session started") {
  SecondOrStepTimer timer(5, 0);
  timer.reset(7);  // resumed at global step 7
  CHECK(timer.next_step() == 12);
  for (int64_t step = 8; step < 12; ++step) CHECK_MESSAGE(!timer.should_trigger(step), step);
  REQUIRE(timer.should_trigger(12));
  const auto since = timer.update(12);
  CHECK(since.steps == 5);
  CHECK(since.seconds >= 0);
  CHECK(timer.last_step() == 12);
  CHECK(!timer.should_trigger(12));
  // A global step that jumps past a multiple (other replicas' steps) still fires, once.
  CHECK(timer.should_trigger(19));
  CHECK(timer.update(19).steps == 7);
  CHECK(timer.next_step() == 24);
}

TEST_CASE("SecondOrStepTimer fires by time alone, and never with both triggers off") {
  SecondOrStepTimer hourly(0, 3600);
  hourly.reset(0);
  CHECK(hourly.next_step() == INT64_MAX);
  CHECK(!hourly.should_trigger(1000000));  // no step trigger, and the hour has not passed

  SecondOrStepTimer by_time(0, 0.02);
  by_time.reset(0);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK(by_time.should_trigger(1));
  CHECK(!by_time.should_trigger(0));  // not at the step it last fired at
  CHECK(by_time.update(1).seconds >= 0.02);

  SecondOrStepTimer never(0, 0);
  CHECK(!never.should_trigger(1 << 30));
}
