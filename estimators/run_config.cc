#include "estimators/run_config.h"

#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>

#include <charconv>
#include <sstream>
#include <utility>

#include "runtime/placement.h"

namespace troupe::estimators {

namespace {
// TF_CONFIG's words for the task types.
constexpr std::pair<TaskType, const char*> kTaskTypeNames[] = {{TaskType::kChief, "chief"},
                                                               {TaskType::kWorker, "worker"},
                                                               {TaskType::kPs, "ps"},
                                                               {TaskType::kEvaluator, "evaluator"}};
}  // namespace

const char* task_type_name(TaskType type) {
  for (const auto& [t, name] : kTaskTypeNames) {
    if (t == type) return name;
  }
  return "";
}

runtime::Result<TaskType> parse_task_type(const std::string& name) {
  for (const auto& [type, word] : kTaskTypeNames) {
    if (name == word) return type;
  }
  return runtime::invalid_argument("task type '", name, "' is not chief, worker, ps or evaluator");
}

const std::vector<std::string>& ClusterConfig::addresses(TaskType type) const {
  static const std::vector<std::string> kNone;
  auto it = cluster.find(task_type_name(type));
  return type == TaskType::kNone || it == cluster.end() ? kNone : it->second;
}

std::string ClusterConfig::task_label() const {
  if (task_type == TaskType::kNone) return "";
  return std::string(task_type_name(task_type)) + " " + std::to_string(task_index);
}

std::string ClusterConfig::task_name() const {
  if (task_type == TaskType::kNone) return "";
  return runtime::task_name(task_type_name(task_type), task_index);
}

std::vector<std::string> ClusterConfig::task_names() const {
  std::vector<std::string> names;
  for (const auto& [job, addresses] : cluster) {
    if (dynamic_jobs.count(job)) {
      names.push_back("/job:" + job + "/task:*");
      continue;
    }
    for (size_t i = 0; i < addresses.size(); ++i) {
      names.push_back(runtime::task_name(job, static_cast<int>(i)));
    }
  }
  return names;
}

runtime::Result<std::pair<std::string, uint16_t>> ClusterConfig::host_port() const {
  const std::vector<std::string>& tasks = addresses(task_type);
  if (task_index < 0 || task_index >= static_cast<int>(tasks.size())) {
    return runtime::invalid_argument(task_label(), " is not in the cluster");
  }
  const std::string& address = tasks[static_cast<size_t>(task_index)];
  const size_t colon = address.rfind(':');
  unsigned port = 0;
  const char* digits = address.c_str() + (colon == std::string::npos ? 0 : colon + 1);
  const char* end = address.c_str() + address.size();
  const auto [last, ec] = std::from_chars(digits, end, port);
  if (colon == std::string::npos || colon == 0 || ec != std::errc() || last != end || port == 0 ||
      port > 65535) {
    return runtime::invalid_argument(task_label(), ": '", address, "' is not host:port");
  }
  return std::make_pair(address.substr(0, colon), static_cast<uint16_t>(port));
}

namespace {

// A job's tasks as TF_CONFIG gives them: a list of addresses, one address, or a map of index
// to address (then the job is dynamic).
runtime::Status read_job(const std::string& job, const boost::property_tree::ptree& tasks,
                         ClusterConfig* c) {
  std::vector<std::string>& addresses = c->cluster[job];
  if (tasks.empty()) {
    if (!tasks.data().empty()) addresses.push_back(tasks.data());
    return runtime::ok_status();
  }
  if (tasks.front().first.empty()) {  // a JSON list
    for (const auto& [unused, address] : tasks) addresses.push_back(address.data());
    return runtime::ok_status();
  }
  c->dynamic_jobs.insert(job);
  for (const auto& [key, address] : tasks) {
    int index = -1;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), index);
    if (ec != std::errc() || end != key.data() + key.size() || index < 0 || index > 100000) {
      return runtime::invalid_argument("TF_CONFIG: cluster.", job, ": '", key,
                                       "' is not a task index");
    }
    if (static_cast<size_t>(index) >= addresses.size()) addresses.resize(index + 1);
    addresses[static_cast<size_t>(index)] = address.data();
  }
  return runtime::ok_status();
}

}  // namespace

runtime::Result<ClusterConfig> parse_tf_config(const char* json) {
  ClusterConfig c;
  if (json == nullptr || std::string(json).find_first_not_of(" \t\n") == std::string::npos) {
    return c;
  }
  namespace pt = boost::property_tree;
  pt::ptree root;
  try {
    std::istringstream in(json);
    pt::read_json(in, root);
  } catch (const pt::json_parser_error& e) {
    return runtime::invalid_argument("TF_CONFIG is not valid JSON: ", e.message(), " at line ",
                                     e.line());
  }
  // "master" is what older TFJobs call the chief; both at once name two chiefs.
  auto job_name = [](const std::string& job) { return job == "master" ? "chief" : job; };
  if (auto cluster = root.get_child_optional("cluster")) {
    for (const auto& [job, tasks] : *cluster) {
      if (c.cluster.count(job_name(job))) {
        return runtime::invalid_argument(
            "TF_CONFIG: the cluster names the chief twice (as "
            "\"chief\" and as \"master\")");
      }
      TROUPE_RETURN_IF_ERROR(read_job(job_name(job), tasks, &c));
    }
  }
  c.cluster.erase(task_type_name(TaskType::kEvaluator));  // not a member of the training
  const std::string type = job_name(root.get<std::string>("task.type", ""));
  if (!type.empty()) {
    auto parsed = parse_task_type(type);
    if (!parsed.ok()) return parsed.status().with_context("TF_CONFIG");
    c.task_type = *parsed;
  }
  const std::string index = root.get<std::string>("task.index", "");
  if (!index.empty()) {
    try {
      c.task_index = std::stoi(index);
    } catch (...) {
      return runtime::invalid_argument("TF_CONFIG: task.index '", index, "' is not a number");
    }
  }
  if (c.task_index < 0) return runtime::invalid_argument("TF_CONFIG: task.index must be >= 0");
  if (c.cluster.empty()) {
    if (c.task_type != TaskType::kNone && (c.task_type != TaskType::kWorker || c.task_index != 0)) {
      return runtime::invalid_argument(
          "TF_CONFIG: without a cluster the task must be worker 0, not ", c.task_label());
    }
    c.task_type = TaskType::kNone;  // a single local process, as with no TF_CONFIG at all
    return c;
  }
  if (c.task_type == TaskType::kNone || index.empty()) {
    return runtime::invalid_argument("TF_CONFIG: a cluster needs task.type and task.index");
  }
  const size_t chiefs = c.addresses(TaskType::kChief).size();
  const size_t workers = c.addresses(TaskType::kWorker).size();
  if (chiefs > 1 || (chiefs == 0 && workers == 0 && !c.dynamic_jobs.count("worker"))) {
    return runtime::invalid_argument(
        "TF_CONFIG: the cluster must have exactly one chief (or, without one, workers: worker 0 "
        "is the chief then)");
  }
  if (c.task_type != TaskType::kEvaluator) {
    const std::vector<std::string>& mine = c.addresses(c.task_type);
    if (c.task_index >= static_cast<int>(mine.size()) ||
        mine[static_cast<size_t>(c.task_index)].empty()) {
      return runtime::invalid_argument("TF_CONFIG: task ", c.task_label(),
                                       " is not in the cluster");
    }
  }
  c.is_chief = chiefs == 1 ? c.task_type == TaskType::kChief
                           : c.task_type == TaskType::kWorker && c.task_index == 0;
  c.num_ps_replicas = static_cast<int>(c.addresses(TaskType::kPs).size());
  c.num_worker_replicas = static_cast<int>(workers + chiefs);
  return c;
}

runtime::Status RunConfig::validate() const {
  if (save_checkpoints_steps < 0) return runtime::invalid_argument("save_checkpoints_steps < 0");
  if (save_checkpoints_secs < 0) return runtime::invalid_argument("save_checkpoints_secs < 0");
  if (save_checkpoints_steps > 0 && save_checkpoints_secs > 0) {
    return runtime::invalid_argument(
        "save_checkpoints_steps and save_checkpoints_secs cannot both be set");
  }
  if (save_summary_steps < 0) return runtime::invalid_argument("save_summary_steps < 0");
  if (log_step_count_steps <= 0)
    return runtime::invalid_argument("log_step_count_steps must be > 0");
  if (keep_checkpoint_max < 0) return runtime::invalid_argument("keep_checkpoint_max < 0");
  if (!(gpu_memory_fraction > 0 && gpu_memory_fraction <= 1)) {
    return runtime::invalid_argument("gpu_memory_fraction ", gpu_memory_fraction,
                                     " is not in (0, 1]");
  }
  if (threads < 0) return runtime::invalid_argument("threads < 0");
  if (cluster_poll_ms <= 0) return runtime::invalid_argument("cluster_poll_ms must be > 0");
  if (replicas_to_aggregate < 0) return runtime::invalid_argument("replicas_to_aggregate < 0");
  if (replicas_to_aggregate > cluster.num_worker_replicas) {
    return runtime::invalid_argument("replicas_to_aggregate ", replicas_to_aggregate,
                                     " is more than the cluster's ", cluster.num_worker_replicas,
                                     " training replicas");
  }
  if (min_replicas < 0) return runtime::invalid_argument("min_replicas < 0");
  if (min_replicas > 0 && replicas_to_aggregate == 0) {
    return runtime::invalid_argument("min_replicas ", min_replicas,
                                     " without synchronous training (replicas_to_aggregate 0)");
  }
  if (min_replicas > replicas_to_aggregate) {
    return runtime::invalid_argument("min_replicas ", min_replicas,
                                     " is more than replicas_to_aggregate ", replicas_to_aggregate);
  }
  if (sync_timeout_ms <= 0) return runtime::invalid_argument("sync_timeout_ms must be > 0");
  if (cluster_deadline_ms <= 0) {
    return runtime::invalid_argument("cluster_deadline_ms must be > 0");
  }
  return runtime::ok_status();
}

}  // namespace troupe::estimators
