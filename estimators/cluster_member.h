// ClusterMember: an Estimator's part in a cluster's training, as its chief or one of its workers,
// whose variables live on the ps tasks (TF's replica_device_setter and MonitoredSession's
// chief/worker session creators). It connects to the ps tasks, waiting for them as members start
// in any order; places a training graph's variables on them (runtime/placement.h); makes sure
// they hold the model (the chief sends it, or trains on from what they hold; a worker waits for
// it); pulls it back for checkpoints and evaluation; reads the global step they share; and names
// this replica's part of the data and of synchronous rounds.
//
//   ClusterMember member(runtime, config, &stop_requested);
//   if (member.active()) {
//     TROUPE_RETURN_IF_ERROR(member.place(&graph));            // connects first
//     TROUPE_RETURN_IF_ERROR(member.ensure_variables(&store, initialise));
//   }
//
// Inactive outside a cluster with ps tasks (a single process, a ps, an evaluator). Not
// thread-safe but global_step(), live_replicas() and pull(), which the training run's actors
// call while the Estimator's thread waits for it.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/ps_client.h"
#include "actors/session.h"
#include "estimators/input/dataset.h"
#include "estimators/run_config.h"
#include "runtime/graph.h"
#include "runtime/status.h"
#include "runtime/variable_store.h"

namespace troupe::estimators {

class ClusterMember {
 public:
  // `stop` ends the waits for other members when set (an Estimator asked to stop).
  ClusterMember(actors::Runtime& runtime, const RunConfig& config, const std::atomic<bool>* stop);

  // A chief or a worker of a cluster with ps tasks.
  bool active() const { return !ps_tasks_.empty(); }
  bool is_chief() const { return config_.cluster.is_chief; }
  // Once connected, the ps tasks are asked again only after disconnect(), when a ps may have gone
  // and the next connect() waits for it as at the start (with a log line naming it).
  runtime::Status connect();
  void disconnect() { ps_.reset(); }
  bool connected() const { return ps_ != nullptr; }

  // Puts the variables of a training graph on the ps tasks, by RunConfig::ps_strategy.
  runtime::Status place(runtime::Graph* graph);
  // The chief finds the ps tasks holding the model (it restarted, they did not: train on from
  // their state, newer than any checkpoint, pulled into `store`), or has `initialise` fill
  // `store` (initial values, then the latest checkpoint) and sends each task its part. A worker
  // waits until the ps tasks hold every variable.
  runtime::Status ensure_variables(runtime::VariableStore* store,
                                   const std::function<runtime::Status()>& initialise);
  // The whole model from the ps tasks into `store`.
  runtime::Status pull(runtime::VariableStore* store);
  // Whether the global step lives on a ps task this member reaches (the graph is placed).
  bool holds_global_step() const { return ps_ != nullptr && placement_.count("global_step") > 0; }
  // The global step on its ps task (or the last one read, when the task does not answer).
  int64_t global_step() const;

  // The chief is replica 0 of the training replicas, worker i replica i + 1.
  int replica_index() const;
  // "chief" or "worker I" for a replica index.
  std::string replica_name(int replica) const;
  // The replicas training now, as the ps of the global step sees them: with a connection open,
  // and counted by its rounds (actors/parameter_shard.h's live_replicas). Thread-safe as
  // global_step() is.
  runtime::Result<std::vector<int>> live_replicas() const;
  // The ps tasks a session's nodes call, and its part in synchronous rounds.
  void session_options(actors::SessionOptions* so) const;
  // This replica's part of the data (the same part for the same data, shard by shard).
  runtime::Result<input::Dataset> part_of(const input::Dataset& data);
  // A synchronous replica other than the chief: its steps end waiting for their rounds, and what
  // it trained is on the ps tasks once it has sent its update, so a stop need not wait for them.
  bool abandons_on_stop() const;
  size_t ps_count() const { return ps_tasks_.size(); }
  // The chief, once training is over: the ps tasks end (as TFJob expects them to: the job has
  // succeeded when its chief has, and its ps tasks would otherwise run forever, as TF's did).
  runtime::Status finish();

 private:
  actors::WaitOptions wait() const;

  actors::Runtime& runtime_;
  const RunConfig& config_;
  const std::atomic<bool>* stop_;
  std::map<std::string, std::string> ps_tasks_;  // "/job:ps/task:i" -> address
  std::unique_ptr<actors::PsClient> ps_;
  actors::PsClient::Placement placement_;  // variable -> ps task
  input::Dataset part_;                    // this replica's part of the last dataset
  std::shared_ptr<const actors::Source> part_of_;
  bool joined_ = false;                               // the chief has found or sent the model
  mutable std::atomic<int64_t> last_global_step_{0};  // for when its ps is gone
};

}  // namespace troupe::estimators
