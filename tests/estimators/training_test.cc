// The training executor: each task of a cluster played by an Experiment in one process, as a C++
// program joins a cluster (a ps serves until the chief has finished, the chief and a worker train
// to one global step, the evaluator evaluates the checkpoints the chief writes); and the run_*
// functions refusing a task that is not theirs.
#include "estimators/training.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "estimators/canned/dnn.h"
#include "estimators/canned/test_data.h"
#include "estimators/experiment.h"
#include "harness/raw_socket.h"
#include "harness/temp_dir.h"

using namespace troupe;
using namespace troupe::estimators;
using runtime::Tensor;

namespace {

ClusterConfig task_of_cluster(const std::string& cluster, TaskType type) {
  const std::string json = "{\"cluster\": " + cluster + ", \"task\": {\"type\": \"" +
                           task_type_name(type) + "\", \"index\": 0}}";
  auto parsed = parse_tf_config(json.c_str());
  REQUIRE_MESSAGE(parsed.ok(), parsed.status().to_string());
  return *parsed;
}

}  // namespace

TEST_CASE("an Experiment plays the task its RunConfig names: ps, chief, worker and evaluator") {
  const std::string dir = testing::temp_dir("training_cluster");
  int held = -1;
  const uint16_t ps_port = testing::held_port(&held);
  ::close(held);  // for the ps to take
  const std::string cluster = R"({"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"], )"
                              R"("ps": ["127.0.0.1:)" +
                              std::to_string(ps_port) + R"("], "evaluator": ["127.0.0.1:3"]})";
  Tensor x, y, tx, ty;
  test::blobs(400, 2, 4, 1, &x, &y);
  test::blobs(200, 2, 4, 2, &tx, &ty);
  // Each replica reads its part round and round until the shared global step ends them.
  auto train = input::arrays({{"x", x}, {"y", y}}, "y",
                             {.batch_size = 20, .num_epochs = 0, .shuffle = true});
  auto test = input::arrays({{"x", tx}, {"y", ty}}, "y", {.batch_size = 100});
  REQUIRE(train.ok());
  REQUIRE(test.ok());
  const ModelFn model_fn =
      DNNOptions{.hidden_units = {8}, .n_classes = 2, .optimizer = ops::Optimizer::sgd(0.1)}
          .model_fn(Task::kClassifier);
  // Enough steps that the worker, which starts with the chief, has its share of them however the
  // threads are scheduled (with 60 the chief alone sometimes took them all).
  constexpr int64_t kLast = 300;
  struct Member {
    std::unique_ptr<Estimator> est;
    std::unique_ptr<Experiment> exp;
    runtime::Result<ExperimentReport> report = runtime::internal_error("not run");
    std::vector<int64_t> seen;  // the evaluator's evaluations, as they came
  };
  std::map<TaskType, Member> members;
  for (TaskType type : {TaskType::kPs, TaskType::kChief, TaskType::kWorker, TaskType::kEvaluator}) {
    RunConfig c = test::quiet(dir);
    c.cluster = task_of_cluster(cluster, type);
    c.save_checkpoints_steps = 100;
    c.cluster_poll_ms = 20;
    c.cluster_deadline_ms = 30000;
    Member& m = members[type];
    m.est = std::make_unique<Estimator>(model_fn, c);
    ExperimentOptions o;
    o.train_steps = kLast;
    o.evaluator_poll_secs = 0.05;
    o.evaluator_timeout_secs = 30;
    o.on_evaluation = [&m](int64_t step, const Metrics&) { m.seen.push_back(step); };
    m.exp = std::make_unique<Experiment>(
        *m.est, *train, std::vector<std::pair<std::string, input::Dataset>>{{"", *test}}, o);
  }
  std::map<TaskType, std::thread> threads;
  std::atomic<bool> ps_ended{false};
  for (auto& [type, m] : members) {
    threads.emplace(type, [&m = m, &ps_ended, type = type] {
      m.report = m.exp->train_and_evaluate();
      if (type == TaskType::kPs) ps_ended = true;
    });
  }
  for (TaskType t : {TaskType::kChief, TaskType::kWorker, TaskType::kEvaluator}) {
    threads.at(t).join();
  }
  // The chief has told the ps that training is over: it ends by itself (within its 5 s wait
  // for the workers' connections to go, which this process's Estimators keep).
  for (int i = 0; i < 200 && !ps_ended; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(ps_ended);
  members.at(TaskType::kPs).exp->request_stop();  // were it still serving
  threads.at(TaskType::kPs).join();

  const auto& chief = members.at(TaskType::kChief).report;
  REQUIRE_MESSAGE(chief.ok(), chief.status().to_string());
  CHECK(chief->global_step >= kLast);
  CHECK(chief->final_metrics.at("accuracy") > 0.9);
  const auto& worker = members.at(TaskType::kWorker).report;
  REQUIRE_MESSAGE(worker.ok(), worker.status().to_string());
  CHECK(worker->steps > 0);
  CHECK(worker->steps < kLast);  // the chief took the other steps
  CHECK(worker->global_step >= kLast);
  CHECK(worker->final_metrics.count("loss") == 1);
  // The evaluator evaluated checkpoints in order, up to one at the last step, each reported.
  const Member& evaluator = members.at(TaskType::kEvaluator);
  REQUIRE_MESSAGE(evaluator.report.ok(), evaluator.report.status().to_string());
  REQUIRE(!evaluator.report->history.empty());
  CHECK(evaluator.report->global_step >= kLast);
  CHECK(evaluator.report->final_metrics.at("accuracy") > 0.9);
  CHECK(evaluator.seen.size() == evaluator.report->history.size());
  CHECK(std::is_sorted(evaluator.seen.begin(), evaluator.seen.end()));
  const auto& ps = members.at(TaskType::kPs).report;
  REQUIRE_MESSAGE(ps.ok(), ps.status().to_string());
  CHECK(ps->stopped);
}

TEST_CASE("the executor's tasks refuse a process that plays another") {
  RunConfig alone = test::quiet();
  StopRequest stop;
  stop.request();
  auto ps = run_ps(alone, {}, stop);
  CHECK(ps.code() == runtime::Code::kFailedPrecondition);
  CHECK(ps.message().find("not a ps") != std::string::npos);
  Estimator est(DNNOptions{.hidden_units = {4}, .n_classes = 2}.model_fn(Task::kClassifier), alone);
  Tensor x, y;
  test::blobs(20, 2, 4, 1, &x, &y);
  auto data = input::arrays({{"x", x}, {"y", y}}, "y", {.batch_size = 10});
  REQUIRE(data.ok());
  auto worker = run_worker(est, *data, 10);
  REQUIRE_FALSE(worker.ok());
  CHECK(worker.status().message().find("not a worker") != std::string::npos);
  auto evaluator = run_evaluator(est, *data, {}, stop);
  REQUIRE_FALSE(evaluator.ok());
  CHECK(evaluator.status().message().find("needs a model_dir") != std::string::npos);
}

TEST_CASE("a stop request wakes its waiter, once asked, from another thread") {
  StopRequest stop;
  CHECK_FALSE(stop.wait_for(0.01));
  std::thread asker([&stop] { stop.request(); });
  stop.wait();
  asker.join();
  CHECK(stop.requested());
  CHECK(stop.wait_for(10));
}
