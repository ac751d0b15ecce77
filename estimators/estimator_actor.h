// EstimatorActor: supervises one Estimator::train run (DESIGN.md §3). It drives the training
// loop segment by segment in the session actor (a segment ends where a hook wants the model at
// rest: a checkpoint, an early-stopping window), calls the hook actors at each such sync point,
// and monitors the session, the input queue and the hooks. When the run fails for a reason of the
// machinery (an actor that died, an unreachable shard, a kernel that threw) it rebuilds the
// session and the input from the latest checkpoint and goes on, up to max_restarts times, saying
// so in the log; a user error (a bad shape, a bad input row, a NaN loss) ends the run at once.
//
//   caf::actor run = spawn_estimator_actor(system, std::move(spec));    // detached
//   request(run, infinite, train_atom::value) -> TrainOutcome           // the only crossing
//   anon_send(run, actors::stop_atom::value)     // ends it after the steps already started
//
// It runs on a thread of its own: restarting blocks on the session (variables are initialised
// and restored), and nothing on the graph's worker may block.
#pragma once

#include <caf/all.hpp>

#include <functional>
#include <memory>
#include <vector>

#include "estimators/hook_actor.h"
#include "runtime/executor.h"
#include "runtime/graph.h"
#include "runtime/status.h"
#include "runtime/variable_store.h"

namespace troupe::estimators {

using train_atom = caf::atom_constant<caf::atom("train")>;

// What a run trains with; a restart replaces both.
struct TrainingParts {
  caf::actor session;
  caf::actor input;  // the input pipeline's queue
};

struct EstimatorActorSpec {
  TrainingParts parts;
  std::vector<runtime::Output> fetches;  // the loss first, then what the hooks fetch
  std::vector<runtime::Output> input_feeds;
  int train_op = -1;
  std::vector<HookActorSpec> hooks;  // spawned by the run, in this order
  // From the hooks' setup; run inside the session actor.
  std::function<runtime::Status(runtime::FeedList*)> feed;
  int64_t profile_every = 0;
  std::function<runtime::Status(int64_t step, std::vector<actors::NodeTiming>)> profile_sink;
  std::shared_ptr<runtime::VariableStore> variables;  // holds global_step
  // Where workers share the global step (a cluster): reads it (blocking), and the fetch that
  // reads it at every step, so that hooks see it and the run stops at last_step.
  std::function<int64_t()> global_step;
  int step_fetch = -1;
  int64_t last_step = INT64_MAX;  // stop at this global step
  int max_restarts = 0;
  // Rebuilds the session and the input with the variables of the latest checkpoint; blocks.
  std::function<runtime::Result<TrainingParts>()> restart;
  // Called when the input ran out, before the hooks' last sync and end.
  std::function<void()> on_end_of_input;
  // Where a restart starts from, for the log ("the initial values" without a checkpoint).
  std::function<std::string()> restart_point;
};

struct TrainOutcome {
  runtime::Status status;
  int64_t first_step = 0;  // the global step the run started at
  double loss = 0;         // of the last step
  bool end_of_input = false;
  bool stopped = false;  // by a stop message
  int restarts = 0;
};

caf::actor spawn_estimator_actor(caf::actor_system& system, EstimatorActorSpec spec);

}  // namespace troupe::estimators

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::estimators::TrainOutcome)
