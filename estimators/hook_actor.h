// HookActor: one SessionRunHook in an actor of its own (DESIGN.md §3). The session loop sends it
// StepReports of the finished steps (each step as it ends, or a few together when steps are
// short: LoopRequest::report_interval), and it calls after_run for each step and answers with
// a StepAck carrying the hook's stop and sync requests; the loop runs at most two reports ahead
// of its slowest hook, so a cheap per-step hook costs at most two messages a step and never a
// round trip. The phases with the model at rest
// (after_create_session, at_sync, end) are requests from the EstimatorActor.
//
//   caf::actor h = spawn_hook_actor(system, {hook, "CheckpointSaver", store, model_dir, 1});
//   loop.observers.push_back(h);                                 // after_run for every step
//   request(h, infinite, hook_atom::value, HookCall{HookPhase::kSync, step}) -> HookReply
//
// A hook that throws ends its actor with what it said; whoever monitors it (the session loop,
// the EstimatorActor) sees the reason and treats it as a failure of the run.
#pragma once

#include <caf/all.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "estimators/hooks.h"
#include "runtime/status.h"
#include "runtime/variable_store.h"

namespace troupe::estimators {

using hook_atom = caf::atom_constant<caf::atom("hook")>;

enum class HookPhase { kAfterCreateSession, kSync, kEnd };

struct HookCall {
  HookPhase phase = HookPhase::kSync;
  int64_t global_step = 0;
};

// What the hook wants next, as of the call: the loop's next segment is planned from it.
struct HookReply {
  runtime::Status status;
  bool stop = false;                   // at_sync set HookContext::stop
  int64_t stop_step = INT64_MAX;       // SessionRunHook::stop_step()
  int64_t next_sync_step = INT64_MAX;  // SessionRunHook::next_sync_step(global_step)
};

struct HookActorSpec {
  std::shared_ptr<SessionRunHook> hook;
  std::string name;  // in errors and logs
  std::shared_ptr<runtime::VariableStore> variables;
  std::string model_dir;
  // Where the hooks' fetches start among a StepReport's values (the loop's own come first),
  // and where their fetch_every ones do, after every other fetch, on the steps with them.
  size_t offset = 0;
  size_t occasional_at = 0;
  // Evaluation and prediction do not move the global step: hooks see the one at the start.
  bool fixed_step = false;
};

caf::actor spawn_hook_actor(caf::actor_system& system, HookActorSpec spec);

// A readable name for a hook: its class name without namespaces.
std::string hook_name(const SessionRunHook& hook);

}  // namespace troupe::estimators

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::estimators::HookCall)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::estimators::HookReply)
