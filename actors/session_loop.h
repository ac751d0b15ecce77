// The session's loop driver: runs a LoopRequest's steps back to back with up to pipeline_depth
// in flight, asks the input queue for each step's batch (and keeps the batches a stopped loop
// took for the next loop on that queue), reports finished steps to the observers (the hook
// actors) and waits on their acks, profiles the steps asked for, and answers with a LoopResult.
// The steps themselves start through session_actor.cc's start_step (session_state.h). A
// SessionActor's handlers call these functions:
//
//   [self](loop_atom, LoopRequest& req) { return session::start_loop(self, req); },
//   [self](StepAck& ack) { session::on_step_ack(self, ack); },
//
// Internal to actors/ (session_actor.cc and session_loop.cc); runs in the session actor alone.
#pragma once

#include <caf/all.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "actors/messages.h"
#include "runtime/status.h"

namespace troupe::actors::session {

struct SessionState;  // session_state.h
using SessionActor = caf::stateful_actor<SessionState>;

struct Loop {
  LoopRequest request;
  caf::typed_response_promise<LoopResult> promise;
  int64_t started = 0;
  int64_t finished = 0;
  int64_t succeeded = 0;
  runtime::Status error;
  bool stop = false;          // start no more steps
  bool halted = false;        // and report no more (an error, or on_step said stop)
  bool end_of_input = false;  // the input ran dry: steps in flight still report
  // A dequeue of ready batches is out: the next steps wait for what it brings, so that steps
  // take the queue's batches in its order.
  bool dequeuing = false;
  std::vector<runtime::Output> with_occasional;  // fetches, then occasional_fetches
  int64_t profiling = -1;                        // the loop index of the step being profiled
  int64_t reported = 0;                          // reports sent to the observers
  std::vector<int64_t> acked;  // per observer: reports acknowledged (INT64_MAX once it is gone)
  std::shared_ptr<std::vector<ReportedStep>> unreported;  // finished, to report together
  std::chrono::steady_clock::time_point last_report = std::chrono::steady_clock::now();
  bool stop_requested = false;
  bool sync_requested = false;
  bool abandoning = false;  // stopped with abandon_atom: the steps' failures are its doing
  int64_t slowest_ack() const {
    int64_t m = reported;
    for (int64_t a : acked) m = std::min(m, a);
    return m;
  }
};

// loop_atom: starts the loop, or answers at once when one runs already or `req` is malformed.
caf::typed_response_promise<LoopResult> start_loop(SessionActor* self, LoopRequest& req);
// An observer acknowledged a report (and may ask to stop or for a sync point).
void on_step_ack(SessionActor* self, const StepAck& ack);
// An observer is gone: it will not acknowledge, so the loop fails rather than wait for it.
void on_observer_down(SessionActor* self, const caf::down_msg& down);
// stop_atom: the loop starts no more steps and answers once those started have finished. With
// `abandon` the calls those steps wait on to other tasks fail at once.
void stop_loop(SessionActor* self, bool abandon);
// A step of the loop finished (the callback start_step was given).
void finish_loop_step(SessionActor* self, int64_t index, RunResult result);

}  // namespace troupe::actors::session
