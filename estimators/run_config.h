// RunConfig: where a model lives and how its training is run, as tf.estimator.RunConfig, plus
// the cluster fields TF_CONFIG carries.
//
//   RunConfig c;  c.model_dir = "fmnist";  c.tf_random_seed = 42;  c.save_checkpoints_steps = 500;
//   auto cluster = parse_tf_config(std::getenv("TF_CONFIG"));   // Result<ClusterConfig>
//
// Defaults follow TF: checkpoints every 600 s when neither steps nor seconds are set, summaries
// every 100 steps, at most 5 checkpoints kept, a log line every 100 steps.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "actors/job_secret.h"
#include "runtime/placement.h"
#include "runtime/status.h"

namespace troupe::estimators {

// A process's part in a cluster, as TF_CONFIG's task.type names it.
enum class TaskType { kNone, kChief, kWorker, kPs, kEvaluator };
// "chief", "worker", "ps", "evaluator": TF_CONFIG's words, the cluster's job names; "" for none.
const char* task_type_name(TaskType type);
// The error names the word and the four it may be.
runtime::Result<TaskType> parse_task_type(const std::string& name);

struct ClusterConfig {
  // job -> "host:port" per task; "" for an index a job given as a map (below) leaves out.
  std::map<std::string, std::vector<std::string>> cluster;
  // Jobs TF_CONFIG gave as a map of index to address (Kubeflow's dynamic workers, each of
  // which sees only itself): their tasks come and go, and any index of them is a member.
  std::set<std::string> dynamic_jobs;
  TaskType task_type = TaskType::kNone;  // kNone when no cluster
  int task_index = 0;
  bool is_chief = true;
  int num_ps_replicas = 0;
  int num_worker_replicas = 1;  // workers + chief

  // The addresses of the tasks of one type, in index order (none when the cluster has none).
  const std::vector<std::string>& addresses(TaskType type) const;
  // "worker 1", "ps 0": how logs and errors name this task; "" outside a cluster.
  std::string task_label() const;
  // "/job:worker/task:1" as devices and handshakes name it ("" outside a cluster), and every
  // task of the cluster spec so named ("/job:worker/task:*" for a dynamic job's).
  std::string task_name() const;
  std::vector<std::string> task_names() const;
  // This task's cluster entry as a host and a port; an error naming the task and the entry
  // when it is not host:port.
  runtime::Result<std::pair<std::string, uint16_t>> host_port() const;
};

// Reads TF_CONFIG's JSON ({"cluster": {...}, "task": {"type": ..., "index": ...}}) as TF and
// the operators that write it (Kubeflow's TFJob, Volcano) have it: "master" is the chief's older
// name; with no chief, worker 0 is the chief (TF's multi_worker_util); a job may be a list of
// addresses or a map of index to address (dynamic workers); an evaluator is not part of the
// training cluster (an "evaluator" job there is dropped); task type and index are required when a
// cluster is given; "environment", "rpc_layer" and "session_master" are ignored. Null or empty:
// a single local process.
runtime::Result<ClusterConfig> parse_tf_config(const char* json);

struct RunConfig {
  std::string model_dir;
  int64_t tf_random_seed = 0;  // 0: none (runs differ); otherwise bit-reproducible on one machine
  int64_t save_checkpoints_steps = 0;  // 0 and 0: every 600 s
  double save_checkpoints_secs = 0;
  int keep_checkpoint_max = 5;
  int64_t save_summary_steps = 100;  // 0: no summaries
  int64_t log_step_count_steps = 100;
  int threads = 0;  // threads of big kernels (OpenBLAS), process-wide; 0: leave as they are
  // Of a GPU's memory, for GPU devices: checked, but not applied yet (there is no GPU device
  // actor yet; the CPU device's cap is SessionOptions::memory_limit_bytes).
  double gpu_memory_fraction = 1.0;
  int max_restarts = 3;  // fit restarts from the latest checkpoint after a failure
  // Restore a checkpoint that lacks some of the graph's variables (they keep their initial
  // values), as a warm start does; by default such a checkpoint is refused, naming the variable.
  bool partial_restore = false;
  ClusterConfig cluster;
  // A cluster's variables go to its ps tasks this way (runtime/placement.h).
  runtime::PsStrategy ps_strategy = runtime::PsStrategy::kRoundRobin;
  // Members start in any order: each polls for the others this often, for at most this long,
  // logging whom it waits for.
  int64_t cluster_poll_ms = 200;
  int64_t cluster_deadline_ms = 60000;
  // Synchronous training (TF's SyncReplicasOptimizer): each update waits for this many
  // replicas' gradients (0: asynchronous, TF's default); fewer than the replicas leaves backup
  // workers. A round short of replicas after sync_timeout_ms goes on with those it has.
  int replicas_to_aggregate = 0;
  int64_t sync_timeout_ms = 30000;
  // Elastic synchronous training (Horovod Elastic's min-np / max-np): with min_replicas > 0 a
  // round aggregates the replicas live when it opens, at least min_replicas (short of them it
  // waits for workers to join, up to cluster_deadline_ms) and at most replicas_to_aggregate.
  int min_replicas = 0;
  // Proves this process a member of the cluster to the others (actors/job_secret.h); null: plain
  // connections, for a cluster on a trusted network only.
  std::shared_ptr<const actors::JobSecret> job_secret;

  // The errors name the field: negative steps, a fraction outside (0, 1], both checkpoint
  // settings given, a poll interval or deadline <= 0.
  runtime::Status validate() const;
};

}  // namespace troupe::estimators
