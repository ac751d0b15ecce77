// RunConfig and TF_CONFIG as TF and the operators that launch it write it: Kubeflow's TFJob
// (lower-case types, "master" for the chief in older jobs, dynamic workers as a map of index to
// address, no chief at all), Volcano (no "environment"), and the errors that name what is wrong.
#include "estimators/run_config.h"

#include <doctest/doctest.h>

#include <algorithm>

using namespace troupe;
using namespace troupe::estimators;

TEST_CASE("run config and TF_CONFIG") {
  RunConfig c;
  CHECK(c.validate().ok());
  c.save_checkpoints_steps = 10;
  c.save_checkpoints_secs = 5;
  CHECK(!c.validate().ok());
  auto local = parse_tf_config(nullptr);
  REQUIRE(local.ok());
  CHECK(local->is_chief);
  auto cluster = parse_tf_config(
      R"({"cluster": {"chief": ["h0:2222"], "worker": ["h3:2222", "h4:2222"], "ps": ["h1:2222"]},
          "task": {"type": "worker", "index": 1}})");
  REQUIRE_MESSAGE(cluster.ok(), cluster.status().to_string());
  CHECK(!cluster->is_chief);
  CHECK(cluster->num_ps_replicas == 1);
  CHECK(cluster->num_worker_replicas == 3);
  CHECK(cluster->cluster.at("worker")[1] == "h4:2222");
  CHECK(cluster->task_type == TaskType::kWorker);
  CHECK(cluster->addresses(TaskType::kPs) == std::vector<std::string>{"h1:2222"});
  CHECK(cluster->addresses(TaskType::kEvaluator).empty());
  CHECK(cluster->task_label() == "worker 1");
  CHECK(cluster->host_port().value() == std::make_pair(std::string("h4"), uint16_t{2222}));
  for (const char* entry : {"h4", "h4:", "h4:0", "h4:70000", "h4:22x", ":2222"}) {
    ClusterConfig bad = *cluster;
    bad.cluster["worker"][1] = entry;
    auto where = bad.host_port();
    REQUIRE_FALSE(where.ok());
    CHECK_MESSAGE(
        where.status().message() == std::string("worker 1: '") + entry + "' is not host:port",
        where.status().message());
  }
  CHECK(local->task_type == TaskType::kNone);
  // A task type TF_CONFIG may not name is refused with the word, not taken for a job.
  auto unknown = parse_tf_config(
      R"({"cluster": {"chief": ["a:1"], "boss": ["b:1"]}, "task": {"type": "boss", "index": 0}})");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().message().find("task type 'boss' is not chief, worker, ps or evaluator") !=
        std::string::npos);
  for (TaskType t : {TaskType::kChief, TaskType::kWorker, TaskType::kPs, TaskType::kEvaluator}) {
    CHECK(parse_task_type(task_type_name(t)).value() == t);
  }
  CHECK(parse_tf_config(
            R"({"cluster": {"chief": ["a:1", "b:1"]}, "task": {"type": "chief", "index": 0}})")
            .status()
            .message()
            .find("exactly one chief") != std::string::npos);
  CHECK(!parse_tf_config("{not json").ok());
  CHECK(
      !parse_tf_config(R"({"cluster": {"chief": ["a:1"]}, "task": {"type": "worker", "index": 3}})")
           .ok());
}

TEST_CASE("TF_CONFIG as Kubeflow's TFJob and Volcano write it") {
  // TFJob: every replica on port 2222 of its own service name, "environment": "cloud".
  const std::string cluster =
      R"("cluster": {"chief": ["mnist-chief-0.ns.svc:2222"], )"
      R"("ps": ["mnist-ps-0.ns.svc:2222", "mnist-ps-1.ns.svc:2222"], )"
      R"("worker": ["mnist-worker-0.ns.svc:2222", "mnist-worker-1.ns.svc:2222"]})";
  auto worker = parse_tf_config(
      ("{" + cluster + R"(, "task": {"type": "worker", "index": 1}, "environment": "cloud",)" +
       R"( "rpc_layer": "grpc", "session_master": "x"})")
          .c_str());
  REQUIRE_MESSAGE(worker.ok(), worker.status().to_string());
  CHECK(worker->task_name() == "/job:worker/task:1");
  CHECK_FALSE(worker->is_chief);
  CHECK(worker->num_worker_replicas == 3);
  CHECK(worker->num_ps_replicas == 2);
  CHECK(worker->host_port().value() ==
        std::make_pair(std::string("mnist-worker-1.ns.svc"), uint16_t{2222}));

  // "master" is the chief's older name, in the cluster and as the task's type.
  auto master = parse_tf_config(
      R"({"cluster": {"master": ["m-0:2222"], "ps": ["p-0:2222"], "worker": ["w-0:2222"]},
          "task": {"type": "master", "index": 0}})");
  REQUIRE_MESSAGE(master.ok(), master.status().to_string());
  CHECK(master->task_type == TaskType::kChief);
  CHECK(master->is_chief);
  CHECK(master->addresses(TaskType::kChief) == std::vector<std::string>{"m-0:2222"});
  CHECK(master->num_worker_replicas == 2);
  auto both = parse_tf_config(
      R"({"cluster": {"chief": ["c:1"], "master": ["m:1"]}, "task": {"type": "chief", "index": 0}})");
  REQUIRE_FALSE(both.ok());
  CHECK(both.status().message().find("as \"chief\" and as \"master\"") != std::string::npos);

  // No chief: worker 0 is the chief (TF's multi_worker_util), worker 1 is not.
  const std::string chiefless = R"({"cluster": {"ps": ["p:1"], "worker": ["w0:1", "w1:1"]}, )";
  auto w0 = parse_tf_config((chiefless + R"("task": {"type": "worker", "index": 0}})").c_str());
  auto w1 = parse_tf_config((chiefless + R"("task": {"type": "worker", "index": 1}})").c_str());
  REQUIRE_MESSAGE(w0.ok(), w0.status().to_string());
  REQUIRE_MESSAGE(w1.ok(), w1.status().to_string());
  CHECK(w0->is_chief);
  CHECK_FALSE(w1->is_chief);
  CHECK(w0->num_worker_replicas == 2);
  auto nobody =
      parse_tf_config(R"({"cluster": {"ps": ["p:1"]}, "task": {"type": "ps", "index": 0}})");
  REQUIRE_FALSE(nobody.ok());
  CHECK(nobody.status().message().find("exactly one chief") != std::string::npos);

  // Dynamic workers: a map of index to address, each worker seeing itself; any worker is a
  // member of the cluster the ps admits.
  auto dynamic = parse_tf_config(
      R"({"cluster": {"chief": ["c:2222"], "ps": ["p:2222"], "worker": {"3": "w-3:2222"}},
          "task": {"type": "worker", "index": 3}})");
  REQUIRE_MESSAGE(dynamic.ok(), dynamic.status().to_string());
  CHECK(dynamic->host_port().value() == std::make_pair(std::string("w-3"), uint16_t{2222}));
  CHECK(dynamic->dynamic_jobs.count("worker") == 1);
  const std::vector<std::string> names = dynamic->task_names();
  CHECK(std::count(names.begin(), names.end(), "/job:worker/task:*") == 1);
  CHECK(std::count(names.begin(), names.end(), "/job:ps/task:0") == 1);
  auto not_mine = parse_tf_config(
      R"({"cluster": {"chief": ["c:1"], "worker": {"3": "w-3:1"}}, "task": {"type": "worker", "index": 2}})");
  REQUIRE_FALSE(not_mine.ok());
  CHECK(not_mine.status().message().find("worker 2 is not in the cluster") != std::string::npos);
  auto bad_key = parse_tf_config(
      R"({"cluster": {"chief": ["c:1"], "worker": {"x": "w:1"}}, "task": {"type": "chief", "index": 0}})");
  REQUIRE_FALSE(bad_key.ok());
  CHECK(bad_key.status().message().find("cluster.worker: 'x' is not a task index") !=
        std::string::npos);

  // The evaluator: its own TF_CONFIG has a cluster without it; one listing it is read alike.
  for (
      const char* json :
      {R"({"cluster": {"chief": ["c:1"], "ps": ["p:1"]}, "task": {"type": "evaluator", "index": 0}})",
       R"({"cluster": {"chief": ["c:1"], "ps": ["p:1"], "evaluator": ["e:1"]},
            "task": {"type": "evaluator", "index": 0}})"}) {
    auto evaluator = parse_tf_config(json);
    REQUIRE_MESSAGE(evaluator.ok(), evaluator.status().to_string());
    CHECK(evaluator->task_type == TaskType::kEvaluator);
    CHECK_FALSE(evaluator->is_chief);
    CHECK(evaluator->cluster.count("evaluator") == 0);
    CHECK(evaluator->num_worker_replicas == 1);
  }
}
