// ParameterShardActor: owns a partition of the variables (and their optimizer slots) in a
// VariableStore. In its own process, node actors read and update the store directly (no message
// per variable op); workers in other processes send it shard calls, which it runs against the
// store, so that updates are applied where the variables live, as TF applies them on the ps.
//
//   auto store = std::make_shared<runtime::VariableStore>();
//   caf::actor shard = spawn_parameter_shard(system, store, data_port);   // 0: no data channel
//   // remote: (call_atom, std::vector<char> shard_call) -> std::vector<char> shard_reply
//   //         (data_port_atom) -> uint16_t, where its data channel listens (data_channel.h)
//   // state:  (varnames_atom) -> vector<string>, the variables and slots it holds
//   //         (snapshot_atom, vector<string> names) -> vector<char>, a checkpoint file's bytes
//   //         of those entries (none named: all), for the chief's checkpoints
//   //         (load_atom, vector<char> checkpoint) -> string, "" once its entries are stored
//
// The store is thread-safe; the actor serialises remote calls. ShardCalls is what the actor
// runs each call with, usable without actors (the fuzzer drives it directly).
#pragma once

#include <caf/all.hpp>

#include <map>
#include <memory>
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
  size_t cached_nodes() const { return nodes_.size(); }

  struct Node;  // a built node with its kernel and context (parameter_shard.cc)

 private:
  runtime::Result<Node*> node_for(const ShardCall& call);
  // Runs one node of a call, appending its outputs.
  runtime::Status run_one(ShardCall& call, std::vector<runtime::Tensor>* outputs);
  std::shared_ptr<runtime::VariableStore> store_;
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
caf::actor spawn_parameter_shard(caf::actor_system& system,
                                 std::shared_ptr<runtime::VariableStore> store, uint16_t data_port);

}  // namespace troupe::actors
