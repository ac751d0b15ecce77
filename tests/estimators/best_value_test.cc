// BestValue: improvements by more than min_delta, patience counted since the best, and the best
// weights put back.
#include "estimators/best_value.h"

#include <doctest/doctest.h>

using namespace troupe;
using namespace troupe::estimators;
using runtime::Tensor;

TEST_CASE("BestValue keeps the best value, its step and its weights") {
  runtime::VariableStore vars;
  vars.assign("w", Tensor::scalar<float>(1));
  vars.assign("global_step", Tensor::scalar<int64_t>(10));
  BestValue lowest({.maximize = false, .min_delta = 0.1});
  CHECK(!lowest.restore(vars));
  CHECK(lowest.offer(1.0, 10, vars));
  vars.assign("w", Tensor::scalar<float>(2));
  vars.assign("global_step", Tensor::scalar<int64_t>(20));
  CHECK(!lowest.offer(0.95, 20, vars));  // better, but not by more than min_delta
  CHECK(lowest.waited() == 1);
  CHECK(!lowest.offer(3.0, 30, vars));
  CHECK(lowest.waited() == 2);
  CHECK(lowest.best() == 1.0);
  CHECK(lowest.best_step() == 10);
  REQUIRE(lowest.restore(vars));
  CHECK(vars.read("w")->scalar_as_double() == 1);
  CHECK(vars.read("global_step")->scalar_as_double() == 20);  // the step is not put back
  CHECK(lowest.offer(0.5, 40, vars));
  CHECK(lowest.waited() == 0);

  BestValue highest({.maximize = true});
  CHECK(highest.offer(0.5, 1, vars));
  CHECK(!highest.offer(0.5, 2, vars));
  CHECK(highest.offer(0.6, 3, vars));
  CHECK(highest.best_step() == 3);
}
