// The CAF scheduler troupe runs its actors on: CAF's own work-stealing scheduler, with a worker
// loop that leaves out CAF's per-job logging bookkeeping.
//
//   caf::actor_system_config cfg;
//   install_quiet_scheduler(cfg);   // before the actor_system is made from cfg
//   install_quiet_scheduler(cfg, std::chrono::microseconds(300));   // idle workers spin first
//
// Why: Debian's libcaf 0.17 is built with logging off, yet its worker loop still does, for every
// job it resumes, a dynamic_cast from resumable to abstract_actor and two lookups of the running
// actor's id in a spin-locked, hashed per-thread table (CAF_PUSH_AID in worker::run and in
// scheduled_actor::resume). On a chain of bare actors that is half of a hop
// (bench/actors_bench: bare_caf_chain with and without it). The scheduling itself (queues,
// stealing, parking, shutdown, the clock thread) is CAF's, unchanged. Worker threads flush
// denormals to zero, as TensorFlow's executor threads do (runtime/denormal.h).
//
// A worker that runs out of jobs parks on a condition variable, and waking it costs the sender
// a futex call and the step the time a parked CPU takes to wake: 10-20 us on this machine's
// virtual CPUs, per one-off step. With `idle_spin`, an idle worker first polls its queue for
// that long, for servers whose requests come a few tens of microseconds apart (RuntimeOptions).
#pragma once

#include <caf/actor_system_config.hpp>

#include <chrono>

namespace troupe::actors {

// Makes the actor system built from `cfg` use the quiet work-stealing scheduler. The usual
// scheduler settings (max-threads, max-throughput, work-stealing.*) still apply.
void install_quiet_scheduler(caf::actor_system_config& cfg,
                             std::chrono::microseconds idle_spin = std::chrono::microseconds(0));

// Where the idle spin travels in the configuration, to the workers.
inline constexpr char kIdleSpinKey[] = "troupe.idle-spin";

}  // namespace troupe::actors
