// EstimatorActor: supervises one run of an Estimator, training, evaluation or prediction
// (DESIGN.md §3). Training: it drives the loop segment by segment in the session actor (a
// segment ends where a hook wants the model at rest: a checkpoint, an early-stopping window),
// calls the hook actors at each such sync point. Evaluation and prediction: one loop over the
// input, whose every step's values go to the run's consumer (the metrics, the caller's function
// taking predictions).
// In every mode it monitors the session, the input queue and the hooks. When the run fails for
// a reason of the machinery (an actor that died, an unreachable shard, a kernel that threw) it
// rebuilds the session and the input and goes on, up to max_restarts times, saying so in the
// log: training from the latest checkpoint, evaluation and prediction reading on after the
// batches already consumed, so that no batch counts twice. A user error (a bad shape, a bad
// input row, a NaN loss) ends the run at once.
//
//   caf::actor run = spawn_estimator_actor(system, std::move(spec));
//   request(run, infinite, start_run_atom::value) -> RunOutcome         // the only crossing
//   anon_send(run, actors::stop_atom::value)     // ends it after the steps already started
//   *spec.stop = true;                            // the same, from any thread, at once
//
// It runs on the actor system's workers, beside the session and the hooks it talks to: on a
// thread of its own, each call of a hook and each loop cost wake-ups of two threads, 370 us of a
// train call on these machines against 100 (bench/estimator_bench). What blocks is elsewhere: a
// restart (a new session, its variables restored) runs in a helper on a thread of its own, and
// where reading the global step blocks (a cluster's asks a ps) the actor gets one (`blocks`).
#pragma once

#include <caf/all.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "estimators/hook_actor.h"
#include "estimators/model_fn.h"
#include "runtime/executor.h"
#include "runtime/graph.h"
#include "runtime/status.h"
#include "runtime/variable_store.h"

namespace troupe::estimators {

using start_run_atom = caf::atom_constant<caf::atom("start_run")>;

// What a run trains with; a restart replaces them.
struct TrainingParts {
  caf::actor session;
  caf::actor input;  // the input pipeline's queue; null when the loop reads the input itself
  // The loop's reading of the input, when it reads it itself (input::Pipeline::loop_feed): the
  // next batch, fed to the model's inputs; OutOfRange at the end.
  std::function<runtime::Status(runtime::FeedList*)> read_input;
};

struct EstimatorActorSpec {
  Mode mode = Mode::kTrain;
  TrainingParts parts;
  // Training: the loss first, then what the hooks fetch. Evaluation and prediction: what the
  // consumer takes, then what the hooks fetch.
  std::vector<runtime::Output> fetches;
  std::vector<runtime::Output> input_feeds;
  int train_op = -1;
  // Evaluation and prediction: each step's values, in order; an error fails the run, false ends
  // it (a caller that has the predictions it wanted).
  std::function<runtime::Result<bool>(const std::vector<runtime::Tensor>& values)> consume;
  // It may block (the caller's function writing predictions): it runs in an actor of its own,
  // on a thread of its own, observing the loop. Otherwise inside the session actor as each step
  // ends (the metrics): no message and no wake-up of another thread per step.
  bool consumer_blocks = false;
  int64_t max_steps = INT64_MAX;     // evaluation and prediction: batches to read at most
  std::vector<HookActorSpec> hooks;  // spawned by the run, in this order
  // From the hooks' setup; run inside the session actor.
  std::function<runtime::Status(runtime::FeedList*)> feed;
  // The hooks' fetch_every outputs, each fetched on the global steps that are multiples of
  // its `every` (after `fetches`, on the steps of any).
  std::vector<runtime::Output> occasional_fetches;
  std::vector<int64_t> occasional_every;
  int64_t profile_every = 0;
  std::function<runtime::Status(int64_t step, std::vector<actors::NodeTiming>)> profile_sink;
  std::shared_ptr<runtime::VariableStore> variables;  // holds global_step
  // Where workers share the global step (a cluster): reads it (blocking), and the fetch that
  // reads it at every step, so that hooks see it and the run stops at last_step.
  std::function<int64_t()> global_step;
  bool blocks = false;  // global_step blocks: the actor runs on a thread of its own
  int step_fetch = -1;
  int64_t last_step = INT64_MAX;  // stop at this global step
  int max_restarts = 0;
  // Training: set from any thread, it stops the run as a stop message does, without waiting for
  // this actor's turn on a worker busy with the loop (the loop checks it before each step).
  std::shared_ptr<std::atomic<bool>> stop;
  // A stop message abandons the steps waiting on other tasks (abandon_atom): a synchronous
  // replica that is not the chief has nothing to save, and its round may wait for a chief gone.
  bool abandon_on_stop = false;
  // Rebuilds the session and the input; blocks. Training: with the variables of the latest
  // checkpoint. Evaluation and prediction: an input that reads on after the `consumed` batches.
  std::function<runtime::Result<TrainingParts>(int64_t consumed)> restart;
  // Called when the input ran out, before the hooks' last sync and end.
  std::function<void()> on_end_of_input;
  // Where a restart starts from, for the log ("the initial values" without a checkpoint).
  std::function<std::string()> restart_point;
};

struct RunOutcome {
  runtime::Status status;
  int64_t steps = 0;     // training: the steps this run ran (a cluster's replica: its own)
  double loss = 0;       // training: of the last step
  int64_t consumed = 0;  // evaluation and prediction: batches handed to the consumer
  bool end_of_input = false;
  bool stopped = false;  // by a stop message
  int restarts = 0;
};

caf::actor spawn_estimator_actor(caf::actor_system& system, EstimatorActorSpec spec);

}  // namespace troupe::estimators

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::estimators::RunOutcome)
