// ParameterShardActor: owns a partition of the variables (and their optimizer slots) in a
// VariableStore. In its own process, node actors read and update the store directly (no message
// per variable op); workers in other processes send it shard calls, which it runs against the
// store, so that updates are applied where the variables live, as TF applies them on the ps.
//
//   auto calls = std::make_shared<ShardCalls>(store);    // store: a runtime::VariableStore
//   caf::actor shard = spawn_parameter_shard(system, calls, data_port);   // 0: no data channel
//   data->serve(shard, [calls](const runtime::Bytes& f) { return calls->run_here(f); });
//   // remote: (call_atom, std::vector<char> shard_call) -> std::vector<char> shard_reply
//   //         (data_port_atom) -> uint16_t, where its data channel listens (data_channel.h)
//   // state:  (varnames_atom) -> vector<string>, the variables and slots it holds
//   //         (snapshot_atom, vector<string> names) -> vector<char>, a checkpoint file's bytes
//   //         of those entries (none named: all), for the chief's checkpoints
//   //         (load_atom, vector<char> checkpoint) -> string, "" once its entries are stored
//
// The store is thread-safe. ShardCalls runs the calls, one at a time whoever runs them: the
// actor, or its process's data server, which runs a call on its own thread unless the call is
// a replica's of synchronous training (the actor keeps the rounds). A call handed from the
// server's thread to a worker of CAF and its reply handed back cost two thread wake-ups each,
// a fifth of a ps's CPU for a DNN's eight calls a step. Usable without actors (the fuzzer
// drives it directly).
#pragma once

#include <caf/all.hpp>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "actors/shard_codec.h"
#include "runtime/variable_store.h"

namespace troupe::actors {

// Runs shard calls against a store: each call's node is built as a user's node is (its input
// placeholders shaped as the call's inputs, so the op's shape function checks them before the
// kernel sees them), cached by name, op and inputs' dtypes and shapes, rebuilt when the
// attributes differ, and at most kMaxNodes are kept (least recently used dropped).
class ShardCalls {
 public:
  static constexpr size_t kMaxNodes = 4096;
  explicit ShardCalls(std::shared_ptr<runtime::VariableStore> store) : store_(std::move(store)) {}
  ~ShardCalls();
  ShardCalls(const ShardCalls&) = delete;
  ShardCalls& operator=(const ShardCalls&) = delete;

  // The reply's bytes: the outputs (the node's, then each read's), or the error (a call that
  // does not decode included).
  std::vector<char> run(runtime::Result<ShardCall> call);
  // The reply to a call as a data server read it, when the call may run on the server's
  // thread; nothing when it is a replica's of synchronous training, for the shard actor.
  std::optional<std::vector<char>> run_here(const runtime::Bytes& frame);
  // Runs `f` while no call runs: a checkpoint's snapshot or restore sees no update half done.
  void between_calls(const std::function<void()>& f);
  size_t cached_nodes() const;
  const std::shared_ptr<runtime::VariableStore>& store() const { return store_; }

  struct Node;  // a built node with its kernel and context (parameter_shard.cc)

 private:
  runtime::Result<Node*> node_for(const ShardCall& call);
  // Runs one node of a call, appending its outputs.
  runtime::Status run_one(ShardCall& call, std::vector<runtime::Tensor>* outputs);
  std::shared_ptr<runtime::VariableStore> store_;
  mutable std::mutex mu_;  // held by run(): the store takes one writer per variable at a time
  std::map<std::string, std::shared_ptr<Node>> nodes_;
  uint64_t calls_ = 0;
};

using varnames_atom = caf::atom_constant<caf::atom("varnames")>;
using snapshot_atom = caf::atom_constant<caf::atom("snapshot")>;
using load_atom = caf::atom_constant<caf::atom("load")>;

// A checkpoint file's bytes holding `names` from `store` (all when empty); an error naming an
// entry it does not hold.
runtime::Result<std::string> snapshot(const runtime::VariableStore& store,
                                      const std::vector<std::string>& names);

// The shard actor (its calls from replicas of synchronous training go through SyncRounds,
// actors/sync_rounds.h).
caf::actor spawn_parameter_shard(caf::actor_system& system, std::shared_ptr<ShardCalls> calls,
                                 uint16_t data_port);

}  // namespace troupe::actors
