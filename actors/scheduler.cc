#include "actors/scheduler.h"

#include <sched.h>
#include <caf/actor_system.hpp>
#include <caf/logger.hpp>
#include <caf/policy/work_stealing.hpp>
#include <caf/scheduler/coordinator.hpp>
#include <caf/settings.hpp>

#include <chrono>

#include "actors/graph_core.h"
#include "runtime/cpu_relax.h"
#include "runtime/denormal.h"

// Clearing the logger pointer below is safe only while CAF logs nothing.
static_assert(CAF_LOG_LEVEL == CAF_LOG_LEVEL_QUIET, "libcaf built with logging: keep CAF's worker");

namespace troupe::actors {
// CAF's work stealing, as its own type so that its worker loop can be its own.
struct QuietWorkStealing : caf::policy::work_stealing {
  // The worker's next job if one arrives within `limit`, else null; never parks. Reads the
  // clock every 16 polls, not every poll.
  template <class Worker>
  static caf::resumable* spin_for_job(Worker* self, std::chrono::nanoseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    do {
      for (int i = 0; i < 16; ++i) {
        if (caf::resumable* job = d(self).queue.take_head()) return job;
        troupe::runtime::cpu_relax();
      }
      sched_yield();  // the core goes to a thread that wants it (runtime/cpu_relax.h)
    } while (std::chrono::steady_clock::now() < until);
    return nullptr;
  }
};
}  // namespace troupe::actors

namespace caf::scheduler {

// CAF's worker loop (caf/scheduler/worker.hpp) without CAF_PUSH_AID_FROM_PTR, and with this
// thread's logger pointer cleared: CAF_PUSH_AID in scheduled_actor::resume does nothing when it
// is null. Spawning sets it again (actor_system::spawn_impl), so it is cleared per job; at the
// QUIET log level nothing else reads it.
template <>
void worker<troupe::actors::QuietWorkStealing>::run() {
  // Kernels flush denormals anyway (runtime/denormal.h); set once here, their scoped flush
  // finds it set and writes nothing.
  troupe::runtime::ScopedFlushDenormal flush;
  troupe::actors::register_worker_thread();
  const timespan spin = get_or(system().config(), troupe::actors::kIdleSpinKey, timespan{0});
  for (;;) {
    resumable* job = nullptr;
    if (spin.count() > 0) job = troupe::actors::QuietWorkStealing::spin_for_job(this, spin);
    if (job == nullptr) job = policy_.dequeue(this);
    if (logger::current_logger() != nullptr) logger::set_current_actor_system(nullptr);
    policy_.before_resume(this, job);
    resumable::resume_result result = job->resume(this, max_throughput_);
    policy_.after_resume(this, job);
    switch (result) {
      case resumable::resume_later:
        policy_.resume_job_later(this, job);
        break;
      case resumable::done:
        policy_.after_completion(this, job);
        intrusive_ptr_release(job);
        break;
      case resumable::awaiting_message:
        intrusive_ptr_release(job);
        break;
      case resumable::shutdown_execution_unit:
        policy_.after_completion(this, job);
        policy_.before_shutdown(this);
        troupe::actors::unregister_worker_thread();
        return;
    }
  }
}

}  // namespace caf::scheduler

namespace troupe::actors {

void install_quiet_scheduler(caf::actor_system_config& cfg, std::chrono::microseconds idle_spin) {
  // CAF's `set` takes only the options it knows; the workers read this from the content.
  caf::put(cfg.content, kIdleSpinKey, caf::timespan{idle_spin});
  // actor_system's constructor makes CAF's scheduler only if no module factory made one.
  cfg.module_factories.push_back([](caf::actor_system& sys) -> caf::actor_system::module* {
    return new caf::scheduler::coordinator<QuietWorkStealing>(sys);
  });
}

}  // namespace troupe::actors
