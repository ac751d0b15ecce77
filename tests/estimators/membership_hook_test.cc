// The chief's log of who trains: replicas named and folded into ranges, and the size of a round
// as the ps counts it, fixed or elastic.
#include "estimators/membership_hook.h"

#include <doctest/doctest.h>

using namespace troupe::estimators;

namespace {

std::string name(int replica) {
  return replica == 0 ? "chief" : "worker " + std::to_string(replica - 1);
}

}  // namespace

TEST_CASE("replica_list names the chief and folds each job's consecutive indices") {
  CHECK(replica_list({}, name) == "");
  CHECK(replica_list({0}, name) == "chief");
  CHECK(replica_list({3}, name) == "worker 2");
  CHECK(replica_list({0, 1, 2}, name) == "chief, workers 0-1");
  CHECK(replica_list({1, 2, 3, 5, 10, 11, 12}, name) == "workers 0-2, 4, 9-11");
  CHECK(replica_list({0, 2, 4}, name) == "chief, workers 1, 3");
}

TEST_CASE("round_size: fixed rounds shrink with the live replicas once some are gone") {
  const MembershipRounds async{0, 0};
  CHECK(round_size(async, 10, false) == 0);
  const MembershipRounds fixed{60, 0};
  CHECK(round_size(fixed, 64, false) == 60);
  CHECK(round_size(fixed, 58, true) == 58);
  CHECK(round_size(fixed, 0, true) == 1);
  CHECK(round_size(fixed, 58, false) == 60);  // starting: the ps waits for them all
}

TEST_CASE("round_size: elastic rounds follow the live replicas between min and max") {
  const MembershipRounds elastic{3, 2};
  CHECK(round_size(elastic, 1, true) == 2);  // waits for a second one
  CHECK(round_size(elastic, 2, false) == 2);
  CHECK(round_size(elastic, 3, false) == 3);
  CHECK(round_size(elastic, 5, false) == 3);
}
