// The messages troupe's actors exchange inside one process, and the atoms that tag requests.
// Local messages carry runtime::Tensor handles: never copied, never serialised. They are marked
// unsafe for CAF's serialiser on purpose, so the only things that cross a process boundary are
// byte blobs (Cap'n Proto, see shard_codec.h) and atoms.
//
//   self->send(consumer, Packet{step, plan, input, tensor, /*dead=*/false});
//
// Plain structs; a message is owned by CAF once sent.
#pragma once

#include <caf/all.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "actors/control_flow_region.h"
#include "actors/step_profiler.h"
#include "runtime/executor.h"
#include "runtime/status.h"
#include "runtime/tensor.h"
#include "runtime/tensor_wire.h"

namespace troupe::actors {

using run_atom = caf::atom_constant<caf::atom("run")>;
using loop_atom = caf::atom_constant<caf::atom("loop")>;
using stats_atom = caf::atom_constant<caf::atom("stats")>;
using call_atom = caf::atom_constant<caf::atom("call")>;
using ping_atom = caf::atom_constant<caf::atom("ping")>;
// Ends the running loop after the steps already started, as if an observer had asked.
using stop_atom = caf::atom_constant<caf::atom("stop")>;
// With stop_atom: the steps already started do not wait for other tasks either; their calls to
// them, waiting or to come, fail at once until the loop ends (net::DataChannel::abandon), and the
// steps that fail so end the loop as stopped, not failed. A synchronous replica that stops has sent
// its round its gradients: their reply would only wait, up to the round's timeout, for replicas
// that may be gone.
using abandon_atom = caf::atom_constant<caf::atom("abandon")>;

// The credit state of one edge of one plan, shared by its producer and consumer (both in this
// process). The producer may run ahead of its consumer by at most `slots` steps; a consumer that
// frees a slot wakes a producer that waits for one. This is OneFlow's register protocol with the
// slot count in shared counters instead of a message per slot, so an edge costs one message.
//
// Only the producer writes `sent` and only the consumer writes `consumed`. The wake-up is a
// store-then-load on each side (the producer marks itself waiting, then looks for room; the
// consumer frees a slot, then looks for a waiting producer), so both of those steps are seq_cst:
// with weaker orders each side could miss the other's store and the producer would wait forever.
struct EdgeCredit {
  explicit EdgeCredit(uint64_t slots) : slots(slots) {}
  const uint64_t slots;
  std::atomic<uint64_t> sent{0};
  std::atomic<uint64_t> consumed{0};
  std::atomic<bool> producer_waiting{false};

  // Producer.
  bool has_room() const {
    return sent.load(std::memory_order_relaxed) - consumed.load(std::memory_order_acquire) < slots;
  }
  void on_sent() {
    sent.store(sent.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  // Marks the producer waiting when the edge is full; false: it must wait for a wake-up.
  bool room_or_wait() {
    if (has_room()) return true;
    producer_waiting.store(true, std::memory_order_seq_cst);
    return sent.load(std::memory_order_relaxed) - consumed.load(std::memory_order_seq_cst) < slots;
  }
  // Consumer: frees a slot; true when the producer waits for it and must be woken.
  bool on_consumed() {
    consumed.fetch_add(1, std::memory_order_seq_cst);
    return producer_waiting.load(std::memory_order_seq_cst) &&
           producer_waiting.exchange(false, std::memory_order_seq_cst);
  }
};

// One value on one edge for one step: input slot `input` of the receiving node.
struct Packet {
  uint64_t step = 0;
  int32_t plan = 0;
  int32_t input = 0;
  runtime::Tensor value;  // null on control edges and dead packets
  bool dead = false;      // the step failed upstream: skip the kernel, pass it on
};

// Starts step `step` of `plan` at a node with no inputs in that plan.
struct RunStep {
  uint64_t step = 0;
  int32_t plan = 0;
};

// A producer's credit came back: try to fire again.
struct Resume {};

// What a node does in one plan (a pruned subgraph for one set of feeds, fetches and targets).
struct NodePlan {
  struct Out {
    caf::actor consumer;  // fetches go to the session in NodeDone, not on edges
    int32_t input = 0;    // slot at the consumer
    int32_t output = 0;   // which of this node's outputs
    std::shared_ptr<EdgeCredit> credit;
    bool last_use = true;  // no later edge sends this output: the handle moves, not copies
  };
  int32_t plan = 0;
  int32_t expected = 0;  // messages per step: inputs in the plan, and a RunStep (step_plan.h)
  std::vector<Out> outs;
  // Per input slot: the credit to return and the producer to wake (null for fed inputs).
  std::vector<std::shared_ptr<EdgeCredit>> in_credits;
  std::vector<caf::actor> in_producers;
  std::vector<std::pair<int32_t, runtime::Tensor>> bound_inputs;  // constants, by input slot
  std::vector<int32_t> fetched_outputs;  // reported to the session with NodeDone
  bool report = false;                   // a fetch or a target: tells the session when done
  // In this plan the node runs this fused node (runtime/remapper.h) instead of its own: same
  // id and outputs, the inputs of the chain it stands for.
  std::shared_ptr<const runtime::Node> fused;
  // In this plan the node runs a control-flow region (control_flow_region.h); `fused` is then
  // the region's node: its inputs, control inputs and outputs.
  std::shared_ptr<const ControlFlowRegion> region;
  // Other variables' reads this (remote) read makes in its call; their values are its further
  // outputs (step_plan.h).
  std::vector<int> reads;
  // Updates of other variables this (remote) update makes in its call, after its own; their
  // inputs are its further inputs (step_plan.h).
  std::vector<int> updates;
};

// A reporting node finished a step (dead: it did not run because the step failed).
struct NodeDone {
  uint64_t step = 0;
  int32_t node = 0;
  std::vector<runtime::Tensor> outputs;  // NodePlan::fetched_outputs, in order
  bool dead = false;
};

// A node's kernel failed; the step's result is this error.
struct StepError {
  uint64_t step = 0;
  runtime::Status status;
};

// Session::run: one step.
struct RunRequest {
  runtime::FeedList feeds;
  std::vector<runtime::Output> fetches;
  std::vector<int> targets;
};
struct RunResult {
  runtime::Status status;
  std::vector<runtime::Tensor> values;
};

// Session::run_loop: many steps driven inside the actor system, pipelined.
struct LoopRequest {
  int64_t steps = 0;
  std::vector<runtime::Output> fetches;
  std::vector<int> targets;
  // Feeds for step i, called inside the session actor; an error ends the loop, OutOfRange as
  // the end of the data (a loop that reads its input itself, estimators/input/dataset.h).
  std::function<runtime::Status(int64_t i, runtime::FeedList* feeds)> feed;
  // Called with the fetched values of each step, in order; false stops the loop early.
  std::function<bool(int64_t i, const std::vector<runtime::Tensor>& values)> on_step;
  // Each step's batch comes from this queue actor (actors/queue.h): component k is fed to
  // input_feeds[k], then `feed` may add more. A closed, drained queue ends the loop without an
  // error (the end of the data); a failed one ends it with the queue's error. batch_size 0:
  // the queue's elements are whole batches (a runner stacked them); one is dequeued per step.
  caf::actor input;
  std::vector<runtime::Output> input_feeds;
  // Steps (by loop index) whose nodes report their kernel timings, handed to on_profile
  // before on_step; one profiled step in flight at a time.
  std::function<bool(int64_t i)> profile;
  std::function<void(int64_t i, std::vector<NodeTiming> timings)> on_profile;
  // Fetched after `fetches` on the steps (by loop index) `occasional` picks; the other steps'
  // values end with `fetches`'. What a hook writes every N steps (a model_fn's summaries, whose
  // nodes may exist for them alone) then costs nothing on the steps between.
  std::vector<runtime::Output> occasional_fetches;
  std::function<bool(int64_t i)> occasional;
  int64_t batch_size = 0;
  bool allow_smaller_final_batch = true;
  // Actors that watch every step (the Estimator's hook actors): each gets StepReports of the
  // finished steps, in order, and answers each with a StepAck. The loop starts no step while an
  // observer is more than `observer_window` reports behind, so a slow observer holds training
  // back by a bounded amount instead of a round trip per step. A step that finishes
  // `report_interval` or more after the last report goes out at once, with any before it;
  // faster steps gather, up to kStepsPerReport a report (and whatever has finished when no step
  // is in flight): a report each way per hook and step cost half a microsecond, a fifth of a
  // small model's step, and a loop of long steps still reports each as it ends. The loop
  // answers once every report is acknowledged; an observer that stops during the loop fails it
  // (kUnavailable).
  std::vector<caf::actor> observers;
  int64_t observer_window = 2;
  std::chrono::microseconds report_interval{100};
  static constexpr int64_t kStepsPerReport = 16;
  int64_t report_base = 0;  // observers see loop step i as number report_base + i
  // Where workers share the step count: the fetch that reads it (an int64 scalar) at each step;
  // observers see that value plus one, and once a step numbered last_number or more has
  // finished, no step starts (those in flight still report).
  int step_number_fetch = -1;
  int64_t last_number = INT64_MAX;
  // Set from any thread, it stops the loop as a stop message does, checked before each step:
  // a stopper needs no message to an actor that may wait for its turn on a busy worker.
  std::shared_ptr<const std::atomic<bool>> stop;
};
struct LoopResult {
  runtime::Status status;
  int64_t steps_done = 0;
  bool end_of_input = false;
  bool stop_requested = false;  // an observer asked to stop
  bool sync_requested = false;  // an observer asked for a pause with no step in flight
};

// A finished loop step: its number and the loop's fetches.
struct ReportedStep {
  int64_t number = 0;
  std::vector<runtime::Tensor> values;
};
// Finished loop steps, in order, for one observer; the steps are shared by all observers.
struct StepReport {
  int32_t observer = 0;  // echoed in the ack
  std::shared_ptr<const std::vector<ReportedStep>> steps;
};
// An observer is done with a report (an observer that asks to stop or fails at one of its steps
// still answers for all). An error ends the loop with it.
struct StepAck {
  int32_t observer = 0;
  runtime::Status status;
  bool stop = false;
  bool sync = false;
};

}  // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::Packet)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::RunStep)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::Resume)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::NodePlan)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::NodeDone)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::StepError)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::RunRequest)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::RunResult)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::LoopRequest)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::LoopResult)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::StepReport)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::StepAck)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::runtime::AllocatorStats)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::runtime::Status)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::runtime::Bytes)
