// The CAF scheduler troupe runs its actors on: CAF's own work-stealing scheduler, with a worker
// loop that leaves out CAF's per-job logging bookkeeping.
//
//   caf::actor_system_config cfg;
//   install_quiet_scheduler(cfg);   // before the actor_system is made from cfg
//
// Why: Debian's libcaf 0.17 is built with logging off, yet its worker loop still does, for every
// job it resumes, a dynamic_cast from resumable to abstract_actor and two lookups of the running
// actor's id in a spin-locked, hashed per-thread table (CAF_PUSH_AID in worker::run and in
// scheduled_actor::resume). On a chain of bare actors that is half of a hop
// (bench/actors_bench: bare_caf_chain with and without it). The scheduling itself (queues,
// stealing, parking, shutdown, the clock thread) is CAF's, unchanged. Worker threads flush
// denormals to zero, as TensorFlow's executor threads do (runtime/denormal.h).
#pragma once

#include <caf/actor_system_config.hpp>

namespace troupe::actors {

// Makes the actor system built from `cfg` use the quiet work-stealing scheduler. The usual
// scheduler settings (max-threads, max-throughput, work-stealing.*) still apply.
void install_quiet_scheduler(caf::actor_system_config& cfg);

}  // namespace troupe::actors
