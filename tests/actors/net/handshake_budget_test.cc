// The handshakes' budget: under it nothing is ended; over it in all the oldest handshake ends,
// over a source's share that source's oldest, so one address's flood churns only its own slots.
// The log limiter lets a burst through, then holds lines back and says how many.
#include "actors/net/handshake_budget.h"

#include <doctest/doctest.h>

#include <thread>

using troupe::actors::net::HandshakeBudget;
using troupe::actors::net::LogLimiter;

TEST_CASE("over the budget the oldest handshake ends; over a source's share, its oldest") {
  HandshakeBudget budget(4, 2);
  CHECK(budget.admit(1, 10) == 0);
  CHECK(budget.admit(2, 20) == 0);
  CHECK(budget.admit(3, 10) == 0);
  CHECK(budget.admit(4, 10) == 1);  // source 10 holds its share: its oldest goes
  budget.done(1);
  CHECK(budget.admit(5, 30) == 0);
  CHECK(budget.admit(6, 40) == 2);  // four under way (2, 3, 4, 5): the oldest of all goes
  budget.done(2);
  CHECK(budget.under_way() == 4);
  budget.done(3);
  budget.done(3);  // twice: counted once
  CHECK(budget.under_way() == 3);
}

TEST_CASE("a burst of log lines passes, then they are held back and counted") {
  LogLimiter limit(3, std::chrono::hours(1));
  for (int i = 0; i < 3; ++i) {
    auto more = limit.allow();
    REQUIRE(more);
    CHECK(*more == 0);
  }
  CHECK_FALSE(limit.allow());
  CHECK_FALSE(limit.allow());
  LogLimiter quick(1, std::chrono::milliseconds(1));
  REQUIRE(quick.allow());
  CHECK_FALSE(quick.allow());
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto more = quick.allow();
  REQUIRE(more);
  CHECK(*more == 1);
}
