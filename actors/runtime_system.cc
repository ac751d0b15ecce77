#include "actors/runtime_system.h"

#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include "actors/graph_core.h"
#include "actors/scheduler.h"

namespace troupe::actors {

Runtime::Runtime(RuntimeOptions options) : config_(std::make_unique<caf::actor_system_config>()) {
  caf::actor_system_config& cfg = *config_;
  if (!options.caf_scheduler_defaults) {
    if (options.caf_worker_loop) {
      cfg.set("scheduler.policy", caf::atom("stealing"));
    } else {
      install_quiet_scheduler(cfg);
    }
    cfg.set("scheduler.max-threads", options.worker_threads);
    cfg.set("work-stealing.aggressive-poll-attempts", size_t{1});
    cfg.set("work-stealing.moderate-poll-attempts", size_t{0});
    cfg.set("work-stealing.relaxed-sleep-duration", caf::timespan{std::chrono::milliseconds(10)});
  }
  cfg.set("middleman.heartbeat-interval", caf::timespan{options.heartbeat});
  cfg.set("middleman.connection-timeout", caf::timespan{options.connection_timeout});
  cfg.set("logger.console", caf::atom("none"));
  cfg.add_thread_hook<GraphCoreHook>();
  cfg.load<caf::io::middleman>();
  if (options.secret) {
    // Mutual TLS: the job's certificate is ours and the only one trusted (job_secret.h).
    cfg.openssl_certificate = options.secret->path();
    cfg.openssl_key = options.secret->path();
    cfg.openssl_cafile = options.secret->path();
    cfg.load<caf::openssl::manager>();
    secret_ = options.secret;
  }
  system_ = std::make_unique<caf::actor_system>(cfg);
}

Runtime::~Runtime() {
  system_->await_all_actors_done();
  system_.reset();
}

size_t Runtime::running_actors() const { return system_->registry().running(); }

}  // namespace troupe::actors
