// What a SessionActor's two halves share: its state (plans, steps in flight, variable gates, the
// running loop, leftover input) and start_step. session_actor.cc makes plans, starts steps and
// gates reads on earlier writes; session_loop.cc drives loops over those steps.
//
//   start_step(self, feeds, fetches, targets, [](RunResult r) { ... });
//
// Internal to actors/ (those two files); the state is the session actor's alone.
#pragma once

#include <caf/all.hpp>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actors/messages.h"
#include "actors/session_actor.h"
#include "actors/session_loop.h"
#include "actors/step_plan.h"
#include "runtime/executor.h"

namespace troupe::actors::session {

// Reads of a variable in step s wait for the writes of that variable in every earlier step, so
// that pipelined steps compute exactly what sequential ones would (no stale weights).
struct VarGate {
  std::deque<std::pair<uint64_t, int>> writes;  // (step, writers still to report), in step order
  std::vector<std::pair<uint64_t, RunStep>> waiting;  // (reader node, its RunStep)
};

struct Plan {
  int32_t id = 0;
  // Gates live in SessionState::gates (a map: they never move), found when the plan is made
  // rather than by name at every step.
  std::vector<std::pair<int, VarGate*>> gated_reads;  // (Variable node, its variable's gate)
  std::map<VarGate*, int> writes;                     // gate -> writer nodes in the plan
  std::map<int, std::vector<VarGate*>> writer_gates;  // a writer may write several
  std::vector<std::vector<std::pair<int, int32_t>>> feed_routes;  // per feed: (node, slot)
  std::vector<int> sources;  // nodes with no packets to wait for
  std::vector<FetchSource> fetches;
  int reporters = 0;
};

struct Step {
  int32_t plan = 0;
  int remaining = 0;
  std::vector<runtime::Tensor> values;
  runtime::Status error;
  std::function<void(RunResult)> done;
};

struct SessionState {
  SessionSpec spec;
  std::vector<caf::actor> nodes;  // by node id; spawned when a plan first needs them
  std::map<std::string, int32_t> plan_ids;
  runtime::RunSignature last_signature;
  int32_t last_plan = -1;
  std::vector<Plan> plans;
  uint64_t next_step = 0;
  std::map<uint64_t, Step> steps;
  std::map<std::string, VarGate> gates;
  std::unique_ptr<Loop> loop;
  // Batches taken from the input queue and not yet fed (a dequeue brings every ready one; a
  // stopped loop leaves some): the next steps, or the next loop on the same queue, start with
  // them, so that ending a loop early loses no data.
  caf::actor leftover_input;
  std::deque<std::vector<runtime::Tensor>> leftover;
};

// Starts one step; `done` runs when its last reporter has reported (or at once with an error).
void start_step(SessionActor* self, const runtime::FeedList& feeds,
                const std::vector<runtime::Output>& fetches, const std::vector<int>& targets,
                std::function<void(RunResult)> done);

}  // namespace troupe::actors::session
