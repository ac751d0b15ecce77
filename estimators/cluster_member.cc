#include "estimators/cluster_member.h"

#include "runtime/log.h"
#include "runtime/placement.h"

namespace troupe::estimators {

using runtime::Result;
using runtime::Status;

ClusterMember::ClusterMember(actors::Runtime& runtime, const RunConfig& config,
                             const std::atomic<bool>* stop)
    : runtime_(runtime), config_(config), stop_(stop) {
  const ClusterConfig& c = config.cluster;
  if (c.task_type != TaskType::kChief && c.task_type != TaskType::kWorker) return;
  const std::vector<std::string>& ps = c.addresses(TaskType::kPs);
  for (size_t i = 0; i < ps.size(); ++i) {
    ps_tasks_[runtime::task_name(task_type_name(TaskType::kPs), static_cast<int>(i))] = ps[i];
  }
}

actors::WaitOptions ClusterMember::wait() const {
  actors::WaitOptions wait;
  wait.poll = std::chrono::milliseconds(config_.cluster_poll_ms);
  wait.deadline = std::chrono::milliseconds(config_.cluster_deadline_ms);
  wait.stop = stop_;
  return wait;
}

Status ClusterMember::connect() {
  if (ps_) return runtime::ok_status();
  TROUPE_ASSIGN_OR_RETURN(ps_, actors::PsClient::connect(runtime_, ps_tasks_, wait()));
  return runtime::ok_status();
}

Status ClusterMember::place(runtime::Graph* graph) {
  TROUPE_RETURN_IF_ERROR(connect());
  std::vector<std::string> tasks;
  for (const auto& [task, address] : ps_tasks_) tasks.push_back(task);
  TROUPE_ASSIGN_OR_RETURN(placement_, runtime::place_variables(graph, tasks, config_.ps_strategy));
  return runtime::ok_status();
}

Status ClusterMember::ensure_variables(runtime::VariableStore* store,
                                       const std::function<Status()>& initialise) {
  TROUPE_RETURN_IF_ERROR(connect());
  TROUPE_ASSIGN_OR_RETURN(std::vector<std::string> absent, ps_->missing(placement_));
  if (!is_chief()) {
    if (absent.empty()) return runtime::ok_status();
    return ps_->wait_for_variables(placement_, wait());
  }
  if (absent.empty()) {
    TROUPE_RETURN_IF_ERROR(ps_->pull(store));
    if (!joined_) {
      runtime::log_info("the ps tasks hold the model at global step ", global_step(),
                        ": training on from there");
    }
    joined_ = true;
    return runtime::ok_status();
  }
  TROUPE_RETURN_IF_ERROR(initialise());
  TROUPE_RETURN_IF_ERROR(ps_->push(*store, placement_));
  joined_ = true;
  runtime::log_info("sent the model to ", ps_tasks_.size(), " ps tasks (global step ",
                    store->read_int64_scalar("global_step").value_or(0), ")");
  return runtime::ok_status();
}

Status ClusterMember::pull(runtime::VariableStore* store) {
  if (!ps_) return runtime::failed_precondition("not connected to the ps tasks");
  return ps_->pull(store);
}

int64_t ClusterMember::global_step() const {
  auto at = placement_.find("global_step");
  if (!ps_ || at == placement_.end()) return last_global_step_;
  runtime::Result<int64_t> step = ps_->read_int64("global_step", at->second);
  if (step.ok()) return last_global_step_ = *step;
  runtime::log_warning("reading the global step: ", step.status().to_string());
  return last_global_step_;  // the last one read
}

int ClusterMember::replica_index() const {
  const ClusterConfig& c = config_.cluster;
  return c.is_chief ? 0 : c.task_index + static_cast<int>(c.addresses(TaskType::kChief).size());
}

void ClusterMember::session_options(actors::SessionOptions* so) const {
  so->cluster = ps_tasks_;
  // Asynchronous replicas are named too: the ps tasks then know who trains.
  so->replica = replica_index();
  if (config_.replicas_to_aggregate > 0) {
    so->replicas_to_aggregate = config_.replicas_to_aggregate;
    so->min_replicas = config_.min_replicas;
    so->sync_timeout = std::chrono::milliseconds(config_.sync_timeout_ms);
    so->join_timeout = std::chrono::milliseconds(config_.cluster_deadline_ms);
  }
}

Result<std::vector<int>> ClusterMember::live_replicas() const {
  auto at = placement_.find("global_step");
  if (!ps_ || at == placement_.end()) return runtime::failed_precondition("no global step placed");
  return ps_->live_replicas(at->second);
}

std::string ClusterMember::replica_name(int replica) const {
  const int chiefs = static_cast<int>(config_.cluster.addresses(TaskType::kChief).size());
  if (replica < chiefs) return "chief";
  return "worker " + std::to_string(replica - chiefs);
}

runtime::Result<input::Dataset> ClusterMember::part_of(const input::Dataset& data) {
  if (part_of_ != data.source) {
    TROUPE_ASSIGN_OR_RETURN(
        part_, input::shard(data, config_.cluster.num_worker_replicas, replica_index()));
    part_of_ = data.source;
    runtime::log_info("training on ", part_.source->name());
  }
  input::Dataset part = data;
  part.source = part_.source;
  return part;
}

Status ClusterMember::finish() {
  if (!active() || !is_chief()) return runtime::ok_status();
  TROUPE_RETURN_IF_ERROR(connect());
  return ps_->finish();
}

bool ClusterMember::abandons_on_stop() const {
  return active() && !is_chief() && config_.replicas_to_aggregate > 0;
}

}  // namespace troupe::estimators
