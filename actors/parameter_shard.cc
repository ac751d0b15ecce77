#include "actors/parameter_shard.h"

#include <map>

#include "actors/data_channel.h"
#include "actors/messages.h"
#include "actors/shard_codec.h"
#include "ops/array_ops.h"
#include "runtime/denormal.h"
#include "runtime/graph_builder.h"
#include "runtime/kernel_registry.h"

namespace troupe::actors {

using runtime::Result;
using runtime::Status;
using runtime::Tensor;

namespace {

// A remote node, rebuilt once: a graph holding placeholders for its inputs and the node itself,
// checked by the builder like any user's node.
struct RemoteNode {
  runtime::Graph graph;
  int node = -1;
  runtime::KernelFn kernel = nullptr;
  std::unique_ptr<runtime::KernelContext> ctx;
  uint64_t invocations = 0;
};

runtime::Result<std::unique_ptr<RemoteNode>> build(const ShardCall& call,
                                                   runtime::VariableStore* store) {
  auto rn = std::make_unique<RemoteNode>();
  runtime::GraphBuilder b(&rn->graph);
  std::vector<runtime::Output> inputs;
  for (const Tensor& t : call.inputs) {
    inputs.push_back(ops::placeholder(b, t.dtype(), runtime::Shape::unknown()));
  }
  std::vector<runtime::Output> outs = b.add_node(call.op, inputs, call.attrs, call.node_name);
  if (!b.ok()) return b.status();
  rn->node = rn->graph.num_nodes() - 1;
  const runtime::Node& n = rn->graph.node(rn->node);
  TROUPE_ASSIGN_OR_RETURN(rn->kernel, runtime::find_kernel(n, runtime::DeviceType::kCpu));
  rn->ctx = std::make_unique<runtime::KernelContext>(n, runtime::cpu_allocator(), store);
  return rn;
}

using RemoteNodes = std::map<std::string, std::unique_ptr<RemoteNode>>;

// Runs one decoded call against the store; the reply's bytes either way.
std::vector<char> run_call(Result<ShardCall> decoded, RemoteNodes& nodes,
                           runtime::VariableStore* store) {
  std::vector<Tensor> outputs;
  Status status = [&]() -> Status {
    TROUPE_ASSIGN_OR_RETURN(ShardCall call, std::move(decoded));
    std::string key = call.node_name + "/" + call.op;
    for (const Tensor& t : call.inputs) key += std::string("/") + runtime::dtype_name(t.dtype());
    auto it = nodes.find(key);
    if (it == nodes.end()) {
      TROUPE_ASSIGN_OR_RETURN(auto rn, build(call, store));
      it = nodes.emplace(key, std::move(rn)).first;
    }
    RemoteNode& rn = *it->second;
    rn.ctx->inputs() = std::move(call.inputs);
    rn.ctx->set_invocation(rn.invocations++);
    runtime::ScopedFlushDenormal flush;
    Status s = runtime::run_kernel(rn.kernel, *rn.ctx);
    rn.ctx->inputs().clear();
    if (!s.ok()) return s;
    outputs = std::move(rn.ctx->outputs());
    rn.ctx->outputs().assign(outputs.size(), Tensor());
    return runtime::ok_status();
  }();
  std::vector<char> reply;
  Status encoded = encode_shard_reply(status, outputs, &reply);
  if (!encoded.ok()) encode_shard_reply(encoded, {}, &reply);
  return reply;
}

}  // namespace

caf::behavior parameter_shard(caf::event_based_actor* self,
                              std::shared_ptr<runtime::VariableStore> store, uint16_t data_port) {
  auto nodes = std::make_shared<RemoteNodes>();
  return {
      [=](call_atom, std::vector<char>& blob) {
        auto bytes = std::make_shared<const std::vector<char>>(std::move(blob));
        return run_call(decode_shard_call(std::move(bytes)), *nodes, store.get());
      },
      // From this process's data server: a frame as read from its socket, decoded in place.
      [=](call_atom, const runtime::Bytes& frame) {
        return run_call(decode_shard_call(frame), *nodes, store.get());
      },
      [](ping_atom) { return ping_atom::value; },
      [data_port](data_port_atom) { return data_port; },
  };
}

}  // namespace troupe::actors
