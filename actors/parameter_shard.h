// ParameterShardActor: owns a partition of the variables (and their optimizer slots) in a
// VariableStore. In its own process, node actors read and update the store directly (no message
// per variable op); workers in other processes send it shard calls, which it runs against the
// store, so that updates are applied where the variables live, as TF applies them on the ps.
//
//   auto calls = std::make_shared<ShardCalls>(store);    // store: a runtime::VariableStore
//   caf::actor shard = spawn_parameter_shard(system, calls, data_port);   // 0: no data channel
//   data->serve([calls](const runtime::Bytes& f, const ShardCalls::Later& later,
//                       const Peer& from) { return calls->call(f, later, from); });
//   // remote: (call_atom, std::vector<char> shard_call) -> std::vector<char> shard_reply
//   //         (data_port_atom) -> uint16_t, where its data channel listens (net/data_server.h)
//   // state:  (varnames_atom) -> vector<string>, the variables and slots it holds
//   //         (snapshot_atom, vector<string> names) -> vector<char>, a checkpoint file's bytes
//   //         of those entries (none named: all), for the chief's checkpoints
//   //         (load_atom, vector<char> checkpoint) -> string, "" once its entries are stored
//   //         (members_atom) -> vector<string>, the live replicas' numbers (live_replicas)
//   // end:    (finished_atom) -> bool: the chief has finished training; the server's
//   //         on_finished runs (a ps task ends then, as the operators that launch it expect)
//
// What a caller may run depends on its role (job_secret.h): a writer (the chief, a worker) any
// call, a reader (the evaluator) reads of variables alone, outside synchronous rounds; a call
// over CAF's port is a writer's, as only writers get in there. A refusal is the call's error,
// naming the caller and the call, and is logged (a burst, then once a second).
//
// The store is thread-safe. ShardCalls runs calls from any number of threads, as TF's ps runs
// its ops on a pool: those of the actor (calls over CAF's connection) and those of its
// process's data server, whose threads each run their connections' calls themselves, a
// synchronous replica's too (a call handed from that thread to a worker of CAF and its reply
// handed back cost two thread wake-ups each, a fifth of a ps's CPU for a DNN's calls a step).
// The rounds of synchronous training (SyncRounds) are ShardCalls' too, so that calls from both
// ways meet in them. Usable without actors (the fuzzer drives it directly).
#pragma once

#include <caf/all.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "actors/job_secret.h"
#include "actors/net/handshake_budget.h"
#include "actors/shard_codec.h"
#include "actors/sync_rounds.h"
#include "runtime/checkpoint.h"
#include "runtime/variable_store.h"

namespace troupe::actors {

// Runs shard calls against a store: each call's node is built as a user's node is (its input
// placeholders shaped as the call's inputs, so the op's shape function checks them before the
// kernel sees them), cached by name, op and inputs' dtypes and shapes, rebuilt when the
// attributes differ, and at most kMaxNodes are kept (least recently used dropped). A call from
// a replica of synchronous training goes through SyncRounds: an update is accumulated and
// answered when its round closes, the barrier waits for the global step. Thread-safe: calls run
// side by side, each node under its variable's lock (one writer at a time, and no read of a value
// half written in place), a synchronous replica's calls one at a time (its rounds are one object).
class ShardCalls {
 public:
  static constexpr size_t kMaxNodes = 4096;
  using Clock = SyncRounds::Clock;
  using Later = std::function<void(ShardReply)>;  // a reply that could not be given at once

  explicit ShardCalls(std::shared_ptr<runtime::VariableStore> store);
  ~ShardCalls();
  ShardCalls(const ShardCalls&) = delete;
  ShardCalls& operator=(const ShardCalls&) = delete;

  // The reply's bytes: the outputs (the node's, then each read's), or the error (a call that
  // does not decode included). Not for a synchronous replica's calls, which call() takes.
  ShardReply run(runtime::Result<ShardCall> call);
  // A call as a peer sent it: the reply now, or nothing when `later` gets it (a synchronous
  // replica's update or barrier, once its round has closed or its time is up; on the thread
  // that closes it, under this object's lock: `later` must only hand the reply on; it is copied
  // only then).
  std::optional<ShardReply> call(runtime::Result<ShardCall> call, const Later& later,
                                 const Peer& from = {});
  // The same for a call's frame as a data server read it.
  std::optional<ShardReply> call(const runtime::Bytes& frame, const Later& later,
                                 const Peer& from = {});
  // Closes the synchronous rounds due at `now` and fails the waits past their time. Returns the
  // next deadline (max: none), at which the caller promises to call again; a call that makes
  // an earlier one tells `on_deadline` (set once; told at once of a deadline made before).
  Clock::time_point expire(Clock::time_point now);
  void on_deadline(std::function<void(Clock::time_point)> f);
  // A connection that peers called on has closed (Peer::link: a data server's connection, a
  // caller over CAF that went down). A replica none of whose connections is open any more has
  // left: synchronous rounds stop waiting for it (SyncRounds::leave) until it calls again.
  void closed(uint64_t link);
  // The training replicas (chief and workers, synchronous or not) with a connection open that
  // rounds still count on, in order: who trains now, for the chief's log of who came and went.
  std::vector<int> live_replicas();
  // How many training replicas have called since the shard began, gone or not.
  size_t replicas_known();
  // How many calls from peers carried a replica's updates (a step's gradients for this shard,
  // sent in one call), applied or accumulated: what the ps's CPU time is spent on.
  uint64_t updates_served() const { return updates_served_.load(std::memory_order_relaxed); }
  // Runs `f` while no call runs: a checkpoint's snapshot or restore sees no update half done.
  void between_calls(const std::function<void()>& f);
  // Loads a model into the store while no call runs; synchronous rounds start over from its
  // global step (SyncRounds::restart).
  void load(const runtime::CheckpointData& data);
  size_t cached_nodes() const;
  const std::shared_ptr<runtime::VariableStore>& store() const { return store_; }

  struct Node;  // a built node with its kernel and context (parameter_shard.cc)

 private:
  // Runs a call's nodes, each under its node's and its variable's lock; gate_ held.
  ShardReply execute(runtime::Result<ShardCall> call);
  std::optional<ShardReply> contribute(ShardCall call, Clock::time_point now, const Later& later);
  runtime::Result<std::shared_ptr<Node>> node_for(const ShardCall& call);
  // Runs one node of a call, appending its outputs.
  runtime::Status run_one(ShardCall& call, std::vector<runtime::Tensor>* outputs);
  std::mutex& var_lock(const std::string& var);
  runtime::Result<runtime::Tensor> read_var(const std::string& var);
  // Notes that `replica` calls on `link` (its first call there counts).
  void note_link(uint64_t link, int replica);

  std::shared_ptr<runtime::VariableStore> store_;
  // Every call holds gate_ shared, between_calls() alone; a caller of between_calls() holds
  // turnstile_ while it waits, so that calls coming meanwhile wait behind it.
  std::shared_mutex gate_;
  std::mutex turnstile_;
  mutable std::mutex nodes_mu_;  // nodes_, calls_
  std::map<std::string, std::shared_ptr<Node>> nodes_;
  uint64_t calls_ = 0;
  // A fixed number, striped by the variable's name: a peer naming new variables cannot grow them.
  std::array<std::mutex, 64> var_locks_;
  std::mutex sync_mu_;  // sync_, tick_at_, on_deadline_
  SyncRounds sync_;
  Clock::time_point tick_at_ = Clock::time_point::max();  // the earliest expire() promised
  std::function<void(Clock::time_point)> on_deadline_;
  std::mutex refused_mu_;
  net::LogLimiter refused_;
  std::mutex links_mu_;                   // the two below, alone
  std::map<uint64_t, int> link_replica_;  // an open connection -> the replica that called on it
  std::map<int, int> replica_links_;      // a replica -> its open connections (at least one)
  std::set<int> known_;                   // every replica that has called
  std::atomic<uint64_t> updates_served_{0};
};

using varnames_atom = caf::atom_constant<caf::atom("varnames")>;
using snapshot_atom = caf::atom_constant<caf::atom("snapshot")>;
using load_atom = caf::atom_constant<caf::atom("load")>;
using finished_atom = caf::atom_constant<caf::atom("finished")>;
using members_atom = caf::atom_constant<caf::atom("members")>;

// A checkpoint file's bytes holding `names` from `store` (all when empty); an error naming an
// entry it does not hold.
runtime::Result<std::string> snapshot(const runtime::VariableStore& store,
                                      const std::vector<std::string>& names);

// The shard actor: runs calls through `calls`, and expires their synchronous rounds on time;
// `on_finished` (may be empty) runs when the chief says training is over.
caf::actor spawn_parameter_shard(caf::actor_system& system, std::shared_ptr<ShardCalls> calls,
                                 uint16_t data_port, std::function<void()> on_finished = {});

}  // namespace troupe::actors
