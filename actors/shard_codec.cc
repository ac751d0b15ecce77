#include "actors/shard_codec.h"

#include "runtime/graph_wire.h"
#include "runtime/tensor_wire.h"
#include "schema/graph.capnp.h"

namespace troupe::actors {

using runtime::Result;
using runtime::Status;
using runtime::Tensor;

Result<std::unique_ptr<capnp::MallocMessageBuilder>> build_shard_call(
    const runtime::Graph& graph, const runtime::Node& node, const std::vector<Tensor>& inputs,
    const ShardCallExtras& extras) {
  auto builder = std::make_unique<capnp::MallocMessageBuilder>();
  auto msg = builder->initRoot<schema::ShardCall>();
  msg.setDiscardOutputs(extras.discard_outputs);
  msg.setReplica(extras.sync.replica);
  msg.setAggregate(extras.sync.aggregate);
  msg.setAggregateTimeoutMs(extras.sync.aggregate_timeout_ms);
  msg.setMinAggregate(extras.sync.min_aggregate);
  msg.setAsynchronous(extras.sync.asynchronous);
  msg.setStamp(extras.sync.stamp);
  TROUPE_RETURN_IF_ERROR(runtime::write_node(graph, node, msg.initNode(), builder->getOrphanage()));
  if (!extras.reads.empty()) {
    auto reads = msg.initReads(static_cast<unsigned>(extras.reads.size()));
    for (size_t i = 0; i < extras.reads.size(); ++i) {
      TROUPE_RETURN_IF_ERROR(
          runtime::write_node(graph, *extras.reads[i], reads[i], builder->getOrphanage()));
    }
  }
  auto write_inputs = [&](capnp::List<schema::Tensor>::Builder list, size_t from) -> Status {
    for (unsigned i = 0; i < list.size(); ++i) {
      TROUPE_RETURN_IF_ERROR(
          runtime::write_tensor(inputs[from + i], list[i], builder->getOrphanage()));
    }
    return runtime::ok_status();
  };
  // Without updates the node takes every input; with them, `inputs` holds the node's, then
  // each update's, as many as each node has.
  const size_t own = extras.updates.empty() ? inputs.size() : node.inputs.size();
  size_t needed = own;
  for (const runtime::Node* u : extras.updates) needed += u->inputs.size();
  if (needed != inputs.size()) {
    return runtime::invalid_argument("shard call: ", inputs.size(), " inputs for ", needed, " of ",
                                     node.name, " and the updates after it");
  }
  TROUPE_RETURN_IF_ERROR(write_inputs(msg.initInputs(static_cast<unsigned>(own)), 0));
  size_t at = own;
  if (extras.updates.empty()) return builder;
  auto updates = msg.initUpdates(static_cast<unsigned>(extras.updates.size()));
  for (size_t u = 0; u < extras.updates.size(); ++u) {
    const runtime::Node& n = *extras.updates[u];
    TROUPE_RETURN_IF_ERROR(
        runtime::write_node(graph, n, updates[u].initNode(), builder->getOrphanage()));
    TROUPE_RETURN_IF_ERROR(
        write_inputs(updates[u].initInputs(static_cast<unsigned>(n.inputs.size())), at));
    at += n.inputs.size();
  }
  return builder;
}

Status encode_shard_call(const runtime::Graph& graph, const runtime::Node& node,
                         const std::vector<Tensor>& inputs, std::vector<char>* out,
                         const ShardCallExtras& extras) {
  TROUPE_ASSIGN_OR_RETURN(auto builder, build_shard_call(graph, node, inputs, extras));
  return runtime::write_message(*builder, out);
}

Result<ShardCall> decode_shard_call(std::shared_ptr<const std::vector<char>> bytes) {
  if (!bytes) return runtime::invalid_argument("shard call: null blob");
  const char* data = bytes->data();
  const size_t size = bytes->size();
  return decode_shard_call(runtime::Bytes{std::move(bytes), data, size});
}

Result<ShardCall> decode_shard_call(const runtime::Bytes& bytes) {
  ShardCall call;
  Status s =
      runtime::read_blob(bytes, [&](capnp::MessageReader& r, std::shared_ptr<const void> keep) {
        auto msg = r.getRoot<schema::ShardCall>();
        call.node_name = msg.getNode().getName().cStr();
        call.op = msg.getNode().getOp().cStr();
        call.sync =
            SyncTag{msg.getReplica(),      msg.getAggregate(),    msg.getAggregateTimeoutMs(),
                    msg.getMinAggregate(), msg.getAsynchronous(), msg.getStamp()};
        call.discard_outputs = msg.getDiscardOutputs();
        TROUPE_RETURN_IF_ERROR(runtime::read_attrs(msg.getNode().getAttrs(), keep, &call.attrs));
        for (auto t : msg.getInputs()) {
          TROUPE_ASSIGN_OR_RETURN(Tensor v, runtime::read_tensor(t, keep));
          call.inputs.push_back(std::move(v));
        }
        for (auto n : msg.getReads()) {
          ShardCall& read = call.reads.emplace_back();
          read.node_name = n.getName().cStr();
          read.op = n.getOp().cStr();
          read.sync.replica = call.sync.replica;
          read.sync.asynchronous = call.sync.asynchronous;
          TROUPE_RETURN_IF_ERROR(runtime::read_attrs(n.getAttrs(), keep, &read.attrs));
        }
        for (auto u : msg.getUpdates()) {
          // Each update is a call of its own at the shard: the same replica and round size.
          ShardCall& update = call.updates.emplace_back();
          update.node_name = u.getNode().getName().cStr();
          update.op = u.getNode().getOp().cStr();
          update.sync = call.sync;
          update.discard_outputs = true;
          TROUPE_RETURN_IF_ERROR(runtime::read_attrs(u.getNode().getAttrs(), keep, &update.attrs));
          for (auto t : u.getInputs()) {
            TROUPE_ASSIGN_OR_RETURN(Tensor v, runtime::read_tensor(t, keep));
            update.inputs.push_back(std::move(v));
          }
        }
        return runtime::ok_status();
      });
  if (!s.ok()) return s.with_context("shard call");
  return call;
}

namespace {

Status fill_reply(capnp::MallocMessageBuilder& builder, const Status& status,
                  const std::vector<Tensor>& outputs) {
  auto msg = builder.initRoot<schema::ShardReply>();
  if (!status.ok()) {
    msg.setError(status.to_string());
    return runtime::ok_status();
  }
  auto list = msg.initOutputs(static_cast<unsigned>(outputs.size()));
  for (size_t i = 0; i < outputs.size(); ++i) {
    TROUPE_RETURN_IF_ERROR(runtime::write_tensor(outputs[i], list[i], builder.getOrphanage()));
  }
  return runtime::ok_status();
}

}  // namespace

ShardReply make_shard_reply(const Status& status, std::vector<Tensor> outputs) {
  ShardReply reply{std::make_shared<capnp::MallocMessageBuilder>(), std::move(outputs), status};
  if (Status s = fill_reply(*reply.message, status, reply.outputs); !s.ok()) {
    reply = ShardReply{std::make_shared<capnp::MallocMessageBuilder>(), {}, s};
    fill_reply(*reply.message, s, {});
  }
  return reply;
}

std::vector<char> ShardReply::flat() const {
  std::vector<char> bytes;
  if (Status s = runtime::write_message(*message, &bytes); !s.ok()) {
    runtime::write_message(*make_shard_reply(s, {}).message, &bytes);
  }
  return bytes;
}

Result<std::vector<Tensor>> decode_shard_reply(std::shared_ptr<const std::vector<char>> bytes) {
  if (!bytes) return runtime::invalid_argument("shard reply: null blob");
  const char* data = bytes->data();
  const size_t size = bytes->size();
  return decode_shard_reply(runtime::Bytes{std::move(bytes), data, size});
}

Result<std::vector<Tensor>> decode_shard_reply(const runtime::Bytes& bytes) {
  std::vector<Tensor> outputs;
  Status remote;
  Status s =
      runtime::read_blob(bytes, [&](capnp::MessageReader& r, std::shared_ptr<const void> keep) {
        auto msg = r.getRoot<schema::ShardReply>();
        if (msg.getError().size() > 0) {
          remote = runtime::make_error(runtime::Code::kAborted, msg.getError().cStr());
          return runtime::ok_status();
        }
        for (auto t : msg.getOutputs()) {
          TROUPE_ASSIGN_OR_RETURN(Tensor v, runtime::read_tensor(t, keep));
          outputs.push_back(std::move(v));
        }
        return runtime::ok_status();
      });
  if (!s.ok()) return s.with_context("shard reply");
  if (!remote.ok()) return remote;
  return outputs;
}

}  // namespace troupe::actors
