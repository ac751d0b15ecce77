#include "estimators/training.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "actors/net/handshake_budget.h"
#include "actors/session.h"
#include "runtime/log.h"
#include "runtime/placement.h"

namespace troupe::estimators {

using runtime::Status;

void StopRequest::request() {
  std::lock_guard<std::mutex> lock(mu_);
  requested_ = true;
  cv_.notify_all();
}

bool StopRequest::requested() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requested_;
}

bool StopRequest::wait_for(double seconds) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return requested_; });
  return requested_;
}

void StopRequest::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return requested_; });
}

namespace {

double process_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto seconds = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

}  // namespace

// The sessions one member may hold open to a ps at once, with room to spare.
constexpr int kSessionsPerMember = 4;

Status run_ps(const RunConfig& config, actors::ServerOptions options, StopRequest& stop) {
  const ClusterConfig& c = config.cluster;
  if (c.task_type != TaskType::kPs) {
    return runtime::failed_precondition("run_ps: this process is ", c.task_label(), ", not a ps");
  }
  TROUPE_ASSIGN_OR_RETURN(auto where, c.host_port());
  const std::string task = runtime::task_name(task_type_name(TaskType::kPs), c.task_index);
  // The address its cluster entry names, never every interface unless told.
  if (options.host.empty()) options.host = where.first;
  if (options.port == 0) options.port = where.second;
  // Room for every member's data channels: each of a member's sessions (training, evaluation,
  // a restore) opens its own. With a fixed 64, a cluster of 64 workers had its calls refused.
  const int members = static_cast<int>(c.task_names().size());
  options.data.max_connections =
      std::max(options.data.max_connections,
               members * kSessionsPerMember * actors::Session::kDataChannelsPerServer);
  // And for their handshakes at the start, when every member dials at once (from one address,
  // on one machine): a member's handshake ended for a newer one failed its first step.
  const size_t dialling = static_cast<size_t>(members) * actors::Session::kDataChannelsPerServer;
  options.data.max_handshakes =
      actors::net::handshake_budget(dialling, options.data.max_handshakes);
  options.data.max_handshakes_per_source =
      actors::net::handshake_budget(dialling, options.data.max_handshakes_per_source);
  std::atomic<bool> finished{false};  // outlives rt, whose end waits for the shard actor
  options.on_finished = [&stop, &finished] {
    finished = true;
    stop.request();
  };
  actors::Runtime rt(actors::RuntimeOptions{.secret = config.job_secret,
                                            .task = c.task_name(),
                                            .members = c.task_names(),
                                            .handshake_timeout = options.data.handshake_timeout});
  auto server = actors::Server::start(rt, options);
  if (!server.ok()) return server.status().with_context(c.task_label());
  const uint16_t data_port = (*server)->data_port(), dialed = (*server)->advertised_data_port();
  runtime::log_info("serving ", task, " on ", options.host, ":", (*server)->port(), " (data port ",
                    data_port, dialed != data_port ? ", peers dial " + std::to_string(dialed) : "",
                    ", ", config.job_secret ? "job secret required" : "no job secret",
                    options.data.follow_incoming_cpu ? ", calls on their peers' cores" : "", ")");
  stop.wait();
  if (finished) {
    // The workers' last steps may still be on their way, and a worker that started late may not
    // have come yet (it comes, finds the last global step passed, and ends with status 0): the
    // ps ends once every training replica has come and gone, or soon.
    runtime::log_info("the chief has finished training: ", task, " ends");
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    const size_t replicas = static_cast<size_t>(c.num_worker_replicas);
    while (((*server)->data_connections() > 0 || (*server)->replicas_known() < replicas) &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  // What serving cost: the cluster benchmark reads it to chart a ps's work against the workers.
  const uint64_t updates = (*server)->updates_served();
  const size_t replicas = (*server)->replicas_known();
  const double cpu = process_cpu_seconds();
  runtime::log_info(task, " served ", updates, " updates from ", replicas,
                    replicas == 1 ? " replica in " : " replicas in ", cpu, " s of CPU (",
                    updates > 0 ? 1e6 * cpu / double(updates) : 0.0, " us an update)");
  return runtime::ok_status();
}

runtime::Result<TrainResult> run_worker(Estimator& estimator, const input::Dataset& data,
                                        int64_t max_steps) {
  const ClusterConfig& c = estimator.config().cluster;
  if (c.task_type != TaskType::kWorker) {
    return runtime::failed_precondition("run_worker: this process is ",
                                        c.task_type == TaskType::kNone ? "alone" : c.task_label(),
                                        ", not a worker");
  }
  TrainOptions o;
  o.max_steps = max_steps;
  return estimator.train(data, o);
}

runtime::Result<std::vector<std::pair<int64_t, Metrics>>> run_evaluator(
    Estimator& estimator, const input::Dataset& data, const EvaluatorOptions& options,
    StopRequest& stop) {
  if (estimator.config().model_dir.empty()) {
    return runtime::invalid_argument("an evaluator needs a model_dir to watch");
  }
  using Clock = std::chrono::steady_clock;
  std::vector<std::pair<int64_t, Metrics>> out;
  std::string seen;
  auto idle_since = Clock::now();
  runtime::log_info("evaluating each new checkpoint of ", estimator.config().model_dir);
  while (!stop.requested()) {
    const std::string latest = estimator.latest_checkpoint();
    if (!latest.empty() && latest != seen) {
      seen = latest;
      idle_since = Clock::now();
      EvalOptions o;
      o.steps = options.eval_steps;
      o.checkpoint_path = latest;
      o.name = options.name;
      auto m = estimator.evaluate(data, o);
      if (!m.ok()) {
        // keep_checkpoint_max may remove a checkpoint while it is read: take the next.
        if (m.status().code() != runtime::Code::kNotFound) return m.status();
        runtime::log_warning(m.status().to_string());
        continue;
      }
      const auto step = static_cast<int64_t>(m->at("global_step"));
      out.push_back({step, *m});
      if (options.on_evaluation) options.on_evaluation(step, *m);
      if (options.last_step > 0 && step >= options.last_step) break;
      continue;
    }
    if (std::chrono::duration<double>(Clock::now() - idle_since).count() > options.timeout_secs) {
      runtime::log_info("no new checkpoint for ", options.timeout_secs, " s: done");
      break;
    }
    stop.wait_for(options.poll_secs);
  }
  return out;
}

}  // namespace troupe::estimators
