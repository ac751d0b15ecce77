// The bytes of a call from a worker to a parameter shard in another process: one node (op,
// attributes) and its input values, and the reads or updates that ride along; and of the
// shard's reply. Cap'n Proto, carried by CAF as one
// std::vector<char>, decoded in place.
//
//   std::vector<char> blob;
//   TROUPE_RETURN_IF_ERROR(encode_shard_call(graph, node, inputs, &blob));
//   Result<ShardCall> call = decode_shard_call(std::make_shared<const std::vector<char>>(blob));
//   ShardReply reply = make_shard_reply(ok_status(), outputs);   // reply.flat(): its bytes
//
// Every malformed input is an error that says what is wrong; nothing a peer sends can crash the
// reader. Thread-safe: no shared state.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/attr.h"
#include "runtime/graph.h"
#include "runtime/status.h"
#include "runtime/tensor.h"
#include "runtime/tensor_wire.h"

namespace troupe::actors {

// How a call takes part in synchronous replication (actors/sync_rounds.h); the default, none.
struct SyncTag {
  int32_t replica = -1;               // the calling replica (worker), -1: not a replica
  uint32_t aggregate = 0;             // an update that waits for this many replicas' (0: at once)
  uint32_t aggregate_timeout_ms = 0;  // how long its round waits for them
  // Elastic rounds (--min-replicas): a round aggregates the live replicas, `aggregate` at most
  // and this many at least; 0: `aggregate`, fewer only once some are gone.
  uint32_t min_aggregate = 0;
  // A replica of asynchronous training: named so that the shard knows who trains, in no round.
  bool asynchronous = false;
  // An update's round on every shard: the global step its replica read in the same step (as
  // TF's SyncReplicasOptimizer stamps gradients with the local step); -1: rounds by the
  // replica's reads of each variable.
  int64_t stamp = -1;
};

struct ShardCall {
  std::string node_name;
  std::string op;
  runtime::AttrMap attrs;
  std::vector<runtime::Tensor> inputs;
  SyncTag sync;
  bool discard_outputs = false;  // the caller needs none: the reply carries none
  // Further variable reads run after the node, their outputs after its own (no inputs; the
  // shard refuses any other op there).
  std::vector<ShardCall> reads;
  // Further updates run after the node, each with its own inputs, in a call that discards its
  // outputs (a step's updates of one task in one call).
  std::vector<ShardCall> updates;
};

// The call's optional parts.
struct ShardCallExtras {
  SyncTag sync;
  bool discard_outputs = false;
  std::vector<const runtime::Node*> reads;  // Variable nodes of the graph, read after `node`
  // Update nodes of the graph run after `node`, their inputs after its own in `inputs`.
  std::vector<const runtime::Node*> updates;
};

runtime::Status encode_shard_call(const runtime::Graph& graph, const runtime::Node& node,
                                  const std::vector<runtime::Tensor>& inputs,
                                  std::vector<char>* out, const ShardCallExtras& extras = {});
// The call as a message that references the inputs' data (they must outlive it), for writers
// that send its segments as they are (net/frame.h).
runtime::Result<std::unique_ptr<capnp::MallocMessageBuilder>> build_shard_call(
    const runtime::Graph& graph, const runtime::Node& node,
    const std::vector<runtime::Tensor>& inputs, const ShardCallExtras& extras = {});
runtime::Result<ShardCall> decode_shard_call(std::shared_ptr<const std::vector<char>> bytes);
runtime::Result<ShardCall> decode_shard_call(const runtime::Bytes& bytes);

// A shard's reply as a message that references its outputs' data (held here, so the message
// stays valid as long as this does), for writers that send its segments as they are
// (net/frame.h); flat() is the bytes, for CAF's connection and tests.
struct ShardReply {
  std::shared_ptr<capnp::MallocMessageBuilder> message;
  std::vector<runtime::Tensor> outputs;
  runtime::Status status;  // the error the message carries, or ok
  std::vector<char> flat() const;
};
// The outputs, or the error: `status`'s, or why an output cannot be written.
ShardReply make_shard_reply(const runtime::Status& status, std::vector<runtime::Tensor> outputs);
// The outputs, or the error the shard reported (or found in the bytes).
runtime::Result<std::vector<runtime::Tensor>> decode_shard_reply(
    std::shared_ptr<const std::vector<char>> bytes);
runtime::Result<std::vector<runtime::Tensor>> decode_shard_reply(const runtime::Bytes& bytes);

}  // namespace troupe::actors
