// ClusterMember's part in a cluster as the RunConfig names it: active for the chief and workers
// of a cluster with ps tasks, its replica index, its sessions' cluster and synchronous rounds,
// its part of the data, and whether a stop may abandon a round. (Its calls to the ps tasks are
// exercised by training_test and the estimator's cluster tests.)
#include "estimators/cluster_member.h"

#include <doctest/doctest.h>

#include "estimators/canned/test_data.h"

using namespace troupe;
using namespace troupe::estimators;

namespace {

RunConfig member_config(const std::string& type, int index) {
  RunConfig c;
  const std::string json =
      R"({"cluster": {"chief": ["h0:1"], "worker": ["h1:1", "h2:1"], "ps": ["p0:1", "p1:1"]},
          "task": {"type": ")" +
      type + R"(", "index": )" + std::to_string(index) + "}}";
  auto cluster = parse_tf_config(json.c_str());
  REQUIRE_MESSAGE(cluster.ok(), cluster.status().to_string());
  c.cluster = *cluster;
  return c;
}

}  // namespace

TEST_CASE("a cluster member knows its replica, its ps tasks and its rounds from the RunConfig") {
  actors::Runtime rt;
  std::atomic<bool> stop{false};
  RunConfig chief_config = member_config("chief", 0);
  ClusterMember chief(rt, chief_config, &stop);
  CHECK(chief.active());
  CHECK(chief.is_chief());
  CHECK(chief.replica_index() == 0);
  CHECK(chief.ps_count() == 2);
  CHECK_FALSE(chief.connected());
  CHECK_FALSE(chief.holds_global_step());

  RunConfig worker_config = member_config("worker", 1);
  worker_config.replicas_to_aggregate = 3;
  ClusterMember worker(rt, worker_config, &stop);
  CHECK(worker.replica_index() == 2);  // the chief is replica 0
  actors::SessionOptions so;
  worker.session_options(&so);
  CHECK(so.cluster ==
        std::map<std::string, std::string>{{"/job:ps/task:0", "p0:1"}, {"/job:ps/task:1", "p1:1"}});
  CHECK(so.replica == 2);
  CHECK(so.replicas_to_aggregate == 3);
  CHECK(worker.abandons_on_stop());
  CHECK_FALSE(chief.abandons_on_stop());  // the chief ends its round: it saves the model after

  // A ps and an evaluator train nothing against the ps tasks.
  RunConfig ps_config = member_config("ps", 0), evaluator_config = member_config("evaluator", 0);
  CHECK_FALSE(ClusterMember(rt, ps_config, &stop).active());
  CHECK_FALSE(ClusterMember(rt, evaluator_config, &stop).active());
  RunConfig alone;
  CHECK_FALSE(ClusterMember(rt, alone, &stop).active());
}

TEST_CASE("a cluster member trains on its own part of the data, the same part each time") {
  actors::Runtime rt;
  std::atomic<bool> stop{false};
  runtime::Tensor x, y;
  test::blobs(90, 2, 3, 1, &x, &y);
  auto data = input::arrays({{"x", x}, {"y", y}}, "y", {.batch_size = 10});
  REQUIRE(data.ok());
  std::vector<std::string> names;
  for (int index : {0, 1}) {
    RunConfig c = member_config("worker", index);
    ClusterMember worker(rt, c, &stop);
    auto part = worker.part_of(*data);
    REQUIRE(part.ok());
    CHECK(part->source != data->source);
    auto again = worker.part_of(*data);
    REQUIRE(again.ok());
    CHECK(again->source == part->source);
    names.push_back(part->source->name());
  }
  CHECK(names[0] != names[1]);  // worker 0 is replica 1, worker 1 replica 2: other parts
}
