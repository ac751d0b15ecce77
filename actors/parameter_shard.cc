#include "actors/parameter_shard.h"

#include <algorithm>
#include <map>
#include <set>

#include "actors/data_channel.h"
#include "actors/messages.h"
#include "actors/shard_codec.h"
#include "actors/sync_rounds.h"
#include "ops/array_ops.h"
#include "runtime/checkpoint.h"
#include "runtime/denormal.h"
#include "runtime/graph_builder.h"
#include "runtime/kernel_registry.h"
#include "runtime/op_registry.h"

namespace troupe::actors {

using runtime::Result;
using runtime::Status;
using runtime::Tensor;

// A remote node, rebuilt when a call differs: a graph holding placeholders for its inputs and
// the node itself, checked by the builder like any user's node.
struct ShardCalls::Node {
  runtime::AttrMap attrs;  // as the call gave them: a call with others rebuilds the node
  uint64_t last_used = 0;
  runtime::Graph graph;
  runtime::KernelFn kernel = nullptr;
  std::unique_ptr<runtime::KernelContext> ctx;
  uint64_t invocations = 0;
};

ShardCalls::~ShardCalls() = default;

namespace {

Result<std::unique_ptr<ShardCalls::Node>> build(const ShardCall& call,
                                                runtime::VariableStore* store) {
  auto rn = std::make_unique<ShardCalls::Node>();
  rn->attrs = call.attrs;
  runtime::GraphBuilder b(&rn->graph);
  std::vector<runtime::Output> inputs;
  for (const Tensor& t : call.inputs) inputs.push_back(ops::placeholder(b, t.dtype(), t.shape()));
  b.add_node(call.op, inputs, call.attrs, call.node_name);
  if (!b.ok()) return b.status();
  const runtime::Node& n = rn->graph.node(rn->graph.num_nodes() - 1);
  // A shard's variables are in its host's memory, whatever device the caller's node had.
  TROUPE_ASSIGN_OR_RETURN(rn->kernel, runtime::find_kernel(n, runtime::DeviceType::kCpu));
  rn->ctx = std::make_unique<runtime::KernelContext>(n, runtime::cpu_allocator(), store);
  return rn;
}

}  // namespace

// Workers call the same few nodes every step with the same shapes; a peer that names a new
// node in every call must not grow the shard without bound.
Result<ShardCalls::Node*> ShardCalls::node_for(const ShardCall& call) {
  std::string key = call.node_name + "/" + call.op;
  for (const Tensor& t : call.inputs) {
    key += "/" + std::string(runtime::dtype_name(t.dtype())) + t.shape().to_string();
  }
  auto it = nodes_.find(key);
  if (it == nodes_.end() || !runtime::attrs_equal(it->second->attrs, call.attrs)) {
    TROUPE_ASSIGN_OR_RETURN(auto rn, build(call, store_.get()));
    if (it != nodes_.end()) {
      it->second = std::move(rn);
    } else {
      if (nodes_.size() >= kMaxNodes) {
        nodes_.erase(std::min_element(nodes_.begin(), nodes_.end(), [](auto& a, auto& b) {
          return a.second->last_used < b.second->last_used;
        }));
      }
      it = nodes_.emplace(key, std::move(rn)).first;
    }
  }
  it->second->last_used = ++calls_;
  return it->second.get();
}

namespace {

// The variable a call reads (a Variable's or a VariableGather's), or null for any other call.
const std::string* variable_read(const ShardCall& call) {
  const runtime::OpDef* def = runtime::find_op(call.op);
  auto var = call.attrs.find("var");
  if (!def || def->variable_access != runtime::VariableAccess::kRead || var == call.attrs.end()) {
    return nullptr;
  }
  return std::get_if<std::string>(&var->second);
}

}  // namespace

Status ShardCalls::run_one(ShardCall& call, std::vector<Tensor>* outputs) {
  TROUPE_ASSIGN_OR_RETURN(Node * node, node_for(call));
  node->ctx->inputs() = std::move(call.inputs);
  node->ctx->set_invocation(node->invocations++);
  runtime::ScopedFlushDenormal flush;
  Status s = runtime::run_kernel(node->kernel, *node->ctx);
  node->ctx->inputs().clear();
  if (!s.ok()) return s;
  for (Tensor& t : node->ctx->outputs()) outputs->push_back(std::move(t));
  return runtime::ok_status();
}

void ShardCalls::between_calls(const std::function<void()>& f) {
  std::lock_guard<std::mutex> lock(mu_);
  f();
}

size_t ShardCalls::cached_nodes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return nodes_.size();
}

std::optional<std::vector<char>> ShardCalls::run_here(const runtime::Bytes& frame) {
  Result<ShardCall> decoded = decode_shard_call(frame);
  // The actor decodes a replica's call again: a few microseconds, in synchronous training only.
  if (decoded.ok() && decoded->sync.replica >= 0) return std::nullopt;
  return run(std::move(decoded));
}

std::vector<char> ShardCalls::run(Result<ShardCall> decoded) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Tensor> outputs;
  bool discard = false;
  Status status = [&]() -> Status {
    TROUPE_ASSIGN_OR_RETURN(ShardCall call, std::move(decoded));
    discard = call.discard_outputs;
    TROUPE_RETURN_IF_ERROR(run_one(call, &outputs));
    // Each variable once: a peer's list naming one many times would make a reply of any size.
    std::set<std::string> read;
    for (ShardCall& r : call.reads) {
      // Only reads ride along: anything else would run without its inputs or its ordering.
      const std::string* name = variable_read(r);
      if (name == nullptr || !runtime::find_op(r.op)->inputs.empty()) {
        return runtime::invalid_argument("shard call: '", r.node_name, "' (", r.op,
                                         ") is not a variable read without inputs");
      }
      if (!read.insert(*name).second) {
        return runtime::invalid_argument("shard call: '", r.node_name,
                                         "' reads a variable the call reads already");
      }
      TROUPE_RETURN_IF_ERROR(run_one(r, &outputs).with_context(r.node_name));
    }
    return runtime::ok_status();
  }();
  if (discard) outputs.clear();
  std::vector<char> reply;
  Status encoded = encode_shard_reply(status, outputs, &reply);
  if (!encoded.ok()) encode_shard_reply(encoded, {}, &reply);
  return reply;
}

runtime::Result<std::string> snapshot(const runtime::VariableStore& store,
                                      const std::vector<std::string>& names) {
  runtime::CheckpointData data;
  for (const std::string& name : names.empty() ? store.names() : names) {
    TROUPE_ASSIGN_OR_RETURN(data.tensors[name], store.read(name));
  }
  data.global_step = store.read_int64_scalar("global_step").value_or(0);
  return runtime::encode_checkpoint(data);
}

namespace {

using sync_tick_atom = caf::atom_constant<caf::atom("synctick")>;

// Sync rounds have deadlines: a tick when the next is due (one pending at a time).
struct ShardState {
  std::shared_ptr<ShardCalls> calls;
  std::unique_ptr<SyncRounds> sync;
  SyncRounds::Clock::time_point tick_at = SyncRounds::Clock::time_point::max();
};

void schedule_tick(caf::stateful_actor<ShardState>* self) {
  ShardState& st = self->state;
  const auto next = st.sync->next_deadline();
  if (next == SyncRounds::Clock::time_point::max() || next >= st.tick_at) return;
  st.tick_at = next;
  const auto in = std::max(
      std::chrono::milliseconds(1),
      std::chrono::duration_cast<std::chrono::milliseconds>(next - SyncRounds::Clock::now()));
  self->delayed_send(self, in, sync_tick_atom::value);
}

// Which value of a variable a replica's read saw, so that its gradients can be told stale.
void note_read(SyncRounds& sync, const ShardCall& call) {
  if (const std::string* name = variable_read(call)) sync.note_read(call.sync.replica, *name);
}

// A call from a worker: run at once, or, from a replica of synchronous training, accumulated
// (updates) or held until its round has closed (the barrier).
caf::result<std::vector<char>> handle(caf::stateful_actor<ShardState>* self,
                                      runtime::Result<ShardCall> decoded) {
  ShardState& st = self->state;
  if (!decoded.ok() || decoded->sync.replica < 0) return st.calls->run(std::move(decoded));
  ShardCall& call = *decoded;
  const auto now = SyncRounds::Clock::now();
  auto var = call.attrs.find("var");
  const std::string* name =
      var == call.attrs.end() ? nullptr : std::get_if<std::string>(&var->second);
  if (call.op == "SyncReplicasBarrier") {
    auto promise = self->make_response_promise<std::vector<char>>();
    st.sync->wait(
        call, [promise](SyncRounds::Reply r) mutable { promise.deliver(std::move(r)); }, now);
    schedule_tick(self);
    return promise;
  }
  note_read(*st.sync, call);
  for (const ShardCall& read : call.reads) note_read(*st.sync, read);
  if (call.sync.aggregate > 0 && name != nullptr) {
    auto reply = st.sync->contribute(std::move(call), *st.calls, now);
    schedule_tick(self);
    return reply;
  }
  return st.calls->run(std::move(decoded));
}

caf::behavior parameter_shard(caf::stateful_actor<ShardState>* self,
                              std::shared_ptr<ShardCalls> calls, uint16_t data_port) {
  std::shared_ptr<runtime::VariableStore> store = calls->store();
  self->state.calls = std::move(calls);
  self->state.sync = std::make_unique<SyncRounds>(store);
  return {
      [=](call_atom, std::vector<char>& blob) {
        auto bytes = std::make_shared<const std::vector<char>>(std::move(blob));
        return handle(self, decode_shard_call(std::move(bytes)));
      },
      // From this process's data server: a frame as read from its socket, decoded in place.
      [=](call_atom, const runtime::Bytes& frame) {
        return handle(self, decode_shard_call(frame));
      },
      [](ping_atom) { return ping_atom::value; },
      [data_port](data_port_atom) { return data_port; },
      [=](varnames_atom) { return store->names(); },
      [=](snapshot_atom, const std::vector<std::string>& names) -> caf::result<std::vector<char>> {
        runtime::Result<std::string> bytes = runtime::internal_error("no snapshot");
        self->state.calls->between_calls([&] { bytes = snapshot(*store, names); });
        if (!bytes.ok())
          return caf::make_error(caf::sec::runtime_error, bytes.status().to_string());
        return std::vector<char>(bytes->begin(), bytes->end());
      },
      [=](load_atom, const std::vector<char>& file) -> std::string {
        auto data = runtime::parse_checkpoint(std::string_view(file.data(), file.size()),
                                              "the state sent to this shard");
        if (!data.ok()) return data.status().to_string();
        self->state.calls->between_calls([&] { runtime::load_into(*data, store.get()); });
        return std::string();
      },
      [=](sync_tick_atom) {
        ShardState& st = self->state;
        st.tick_at = SyncRounds::Clock::time_point::max();
        st.sync->expire(SyncRounds::Clock::now(), *st.calls);
        schedule_tick(self);
      },
  };
}

}  // namespace

caf::actor spawn_parameter_shard(caf::actor_system& system, std::shared_ptr<ShardCalls> calls,
                                 uint16_t data_port) {
  return system.spawn(parameter_shard, std::move(calls), data_port);
}

}  // namespace troupe::actors
