// Session: runs a graph on actors, as tf.Session does, for C++ programs that build graphs by hand.
// Every graph node becomes a node actor (spawned once, reused for every step), but for constants
// and the inner nodes of fused layers (SessionOptions::fuse_ops); variables live in
// a parameter shard, in this process by default or on the server of the task they are placed on.
//
//   actors::Runtime rt;
//   auto session = actors::Session::create(
//       rt, graph, {.cluster = {{"/job:ps/task:0", "127.0.0.1:4242"}}});
//   if (!session.ok()) ...;  // says which server is unreachable
//   (*session)->run({}, {}, {init});
//   auto out = (*session)->run({{x, batch}}, {loss}, {train});   // Result<vector<Tensor>>
//
//   // A training loop that crosses into the actor system once, steps pipelined:
//   LoopRequest loop{.steps = 1000, .fetches = {loss}, .targets = {train},
//                    .feed = [&](int64_t i, FeedList* f) { ...; return ok_status(); },
//                    .on_step = [&](int64_t i, const std::vector<Tensor>& v) { return true; }};
//   auto done = (*session)->run_loop(std::move(loop));
//
// run() and run_loop() block the calling thread; loop callbacks run inside the session actor.
// One caller at a time. Destroying the Session stops its actors.
#pragma once

#include <caf/all.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/messages.h"
#include "actors/runtime_system.h"
#include "runtime/allocator.h"
#include "runtime/graph.h"
#include "runtime/variable_store.h"

namespace troupe::actors {

namespace net {
class DataChannel;  // net/data_channel.h
}

struct SessionOptions {
  int pipeline_depth = 2;          // slots per edge; loop steps in flight
  int64_t memory_limit_bytes = 0;  // the device's cap (0: none)
  // Task -> "host:port" of the Server that holds it; nodes placed on the task run there.
  std::map<std::string, std::string> cluster = {};
  // How long a call to another task waits for its reply; a synchronous replica's waits
  // sync_timeout more, for its round.
  std::chrono::milliseconds remote_timeout{30000};
  // The store the in-process shard serves; sessions of one model (its training, evaluation
  // and prediction graphs) share one, so each sees the others' variables without a copy.
  // Null: a store of the session's own.
  std::shared_ptr<runtime::VariableStore> variables = nullptr;
  // Plans run each MatMul (Conv2D) -> BiasAdd (-> Relu) chain whose inner values nothing else
  // reads as one _FusedMatMul (_FusedConv2D) node, as TF's remapper does: same values, fewer
  // hops and passes. Off: for comparisons.
  bool fuse_ops = true;
  // Synchronous training (SyncReplicasOptimizer): this session is replica `replica`, and each
  // update on a ps waits for `replicas_to_aggregate` replicas' gradients (their mean is applied
  // once; stale ones are dropped), each round at most `sync_timeout`. Steps run one at a time.
  // Elastic (min_replicas > 0): a round aggregates the live replicas, at least min_replicas
  // and at most replicas_to_aggregate, and one short of min_replicas waits for replicas to join,
  // an update's call up to `join_timeout` longer. Asynchronous training (replicas_to_aggregate
  // 0) with a replica: its calls name it, for the ps's view of who trains.
  int replica = -1;
  int replicas_to_aggregate = 0;
  int min_replicas = 0;
  std::chrono::milliseconds sync_timeout{30000};
  std::chrono::milliseconds join_timeout{0};
};

class Session {
 public:
  // Data channels a session opens to each server it calls: calls of different nodes to one
  // server travel side by side. A server sizes its connection limit by them.
  static constexpr int kDataChannelsPerServer = 2;

  static runtime::Result<std::unique_ptr<Session>> create(Runtime& runtime,
                                                          const runtime::Graph& graph,
                                                          SessionOptions options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  runtime::Result<std::vector<runtime::Tensor>> run(const runtime::FeedList& feeds,
                                                    const std::vector<runtime::Output>& fetches,
                                                    const std::vector<int>& targets = {});
  // The number of steps that completed; an error if a step failed (naming it). With an input
  // queue, `end_of_input` says whether the loop ended because the queue ran dry.
  runtime::Result<int64_t> run_loop(LoopRequest loop, bool* end_of_input = nullptr);

  // What went to and came from other tasks over data channels since the session began:
  // calls, and bytes each way (frames, headers included).
  struct Traffic {
    uint64_t calls = 0;
    uint64_t bytes_sent = 0;
    uint64_t bytes_received = 0;
  };
  Traffic traffic() const;

  // The in-process shard's variables (checkpoints read and write them).
  runtime::VariableStore& variables() { return *variables_; }
  runtime::AllocatorStats memory_stats() const { return allocator_->stats(); }
  const runtime::Graph& graph() const { return *graph_; }
  // The session actor, for actors that drive loops themselves (the Estimator's training run).
  const caf::actor& actor() const { return session_; }

 private:
  Session(Runtime& runtime) : runtime_(runtime) {}
  Runtime& runtime_;
  std::shared_ptr<const runtime::Graph> graph_;
  std::shared_ptr<runtime::VariableStore> variables_;
  std::shared_ptr<runtime::Allocator> allocator_;
  caf::actor device_;
  caf::actor shard_;
  caf::actor session_;
  std::vector<std::shared_ptr<net::DataChannel>> channels_;  // the session actor's nodes share them
  // Blocking actors that run() and run_loop() wait in, each lent to one call at a time and kept
  // for the Session's life: one made and destroyed per call wakes CAF's clock thread (its
  // destructor cancels the actor's timeouts there), a context switch and a third thread on the
  // cores on every call.
  std::unique_ptr<caf::scoped_actor> borrow_caller();
  void give_back(std::unique_ptr<caf::scoped_actor> caller);
  std::mutex callers_mu_;
  std::vector<std::unique_ptr<caf::scoped_actor>> callers_;
  // run() polls for its answer this long before it blocks, while the last answer came sooner.
  static constexpr std::chrono::nanoseconds kAnswerPoll = std::chrono::microseconds(200);
  std::atomic<int64_t> last_answer_ns_{0};
};

}  // namespace troupe::actors
