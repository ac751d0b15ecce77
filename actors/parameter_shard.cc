#include "actors/parameter_shard.h"

#include <algorithm>
#include <map>
#include <set>

#include "actors/messages.h"
#include "actors/net/data_server.h"
#include "actors/shard_codec.h"
#include "actors/sync_rounds.h"
#include "ops/array_ops.h"
#include "runtime/checkpoint.h"
#include "runtime/denormal.h"
#include "runtime/graph_builder.h"
#include "runtime/kernel_registry.h"
#include "runtime/log.h"
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
  std::mutex mu;              // held while it runs: its context is one
  std::mutex* var = nullptr;  // its variable's lock, when it has a variable
};

ShardCalls::ShardCalls(std::shared_ptr<runtime::VariableStore> store)
    : store_(std::move(store)),
      sync_([this](const std::string& var) { return read_var(var); },
            [this](ShardCall call) { return execute(std::move(call)); }) {}

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

std::mutex& ShardCalls::var_lock(const std::string& var) {
  return var_locks_[std::hash<std::string>{}(var) % var_locks_.size()];
}

Result<Tensor> ShardCalls::read_var(const std::string& var) {
  std::lock_guard<std::mutex> lock(var_lock(var));
  return store_->read(var);
}

// Workers call the same few nodes every step with the same shapes; a peer that names a new
// node in every call must not grow the shard without bound. A node rebuilt or dropped here
// lives on while a call runs it.
Result<std::shared_ptr<ShardCalls::Node>> ShardCalls::node_for(const ShardCall& call) {
  std::string key = call.node_name + "/" + call.op;
  for (const Tensor& t : call.inputs) {
    key += "/" + std::string(runtime::dtype_name(t.dtype())) + t.shape().to_string();
  }
  std::lock_guard<std::mutex> lock(nodes_mu_);
  auto it = nodes_.find(key);
  if (it == nodes_.end() || !runtime::attrs_equal(it->second->attrs, call.attrs)) {
    TROUPE_ASSIGN_OR_RETURN(std::shared_ptr<Node> rn, build(call, store_.get()));
    if (auto var = call.attrs.find("var"); var != call.attrs.end()) {
      if (const auto* name = std::get_if<std::string>(&var->second)) rn->var = &var_lock(*name);
    }
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
  return it->second;
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

// Updates ride along only on a call that needs no outputs, and only updates: a read there
// would return nothing, and a step waits for an update's call as a whole.
Status check_updates(const ShardCall& call) {
  if (call.updates.empty()) return runtime::ok_status();
  if (!call.discard_outputs) {
    return runtime::invalid_argument("shard call: '", call.node_name,
                                     "' carries updates but asks for its outputs");
  }
  for (const ShardCall& u : call.updates) {
    const runtime::OpDef* def = runtime::find_op(u.op);
    if (def == nullptr || def->variable_access != runtime::VariableAccess::kWrite) {
      return runtime::invalid_argument("shard call: '", u.node_name, "' (", u.op,
                                       ") is not a variable update");
    }
  }
  return runtime::ok_status();
}

// A replica's gradients: an update (not an initial assignment) or updates riding along.
bool carries_update(const ShardCall& call) {
  if (!call.updates.empty()) return true;
  const runtime::OpDef* def = runtime::find_op(call.op);
  return def != nullptr && runtime::is_update(*def);
}

// A reader's call is a variable's read, with further reads only (execute checks those), and
// takes no part in synchronous rounds, whose reads mark what a replica's gradients came from.
Status check_role(const ShardCall& call, const Peer& from) {
  if (from.role == Role::kWriter) return runtime::ok_status();
  auto refuse = [&](const ShardCall& c, const char* why) {
    return runtime::failed_precondition("refused: ", from.task.empty() ? "a reader" : from.task,
                                        " may only read a ps's variables, and '", c.node_name,
                                        "' (", c.op, ") ", why);
  };
  if (call.sync.replica >= 0 || call.sync.aggregate > 0) {
    return refuse(call, call.sync.asynchronous ? "is a training replica's"
                                               : "takes part in synchronous training");
  }
  if (!call.updates.empty()) return refuse(call.updates.front(), "is an update");
  if (variable_read(call) == nullptr) return refuse(call, "is not a variable's read");
  return runtime::ok_status();
}

}  // namespace

Status ShardCalls::run_one(ShardCall& call, std::vector<Tensor>* outputs) {
  TROUPE_ASSIGN_OR_RETURN(std::shared_ptr<Node> node, node_for(call));
  std::lock_guard<std::mutex> node_lock(node->mu);
  std::unique_lock<std::mutex> var_lock;
  if (node->var) var_lock = std::unique_lock<std::mutex>(*node->var);
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
  std::lock_guard<std::mutex> waiting(turnstile_);
  std::unique_lock<std::shared_mutex> alone(gate_);
  f();
}

void ShardCalls::load(const runtime::CheckpointData& data) {
  between_calls([&] {
    runtime::load_into(data, store_.get());
    std::lock_guard<std::mutex> lock(sync_mu_);
    sync_.restart();
  });
}

size_t ShardCalls::cached_nodes() const {
  std::lock_guard<std::mutex> lock(nodes_mu_);
  return nodes_.size();
}

namespace {

// A call's hold on the gate, taken behind any between_calls() waiting.
std::shared_lock<std::shared_mutex> enter(std::mutex& turnstile, std::shared_mutex& gate) {
  { std::lock_guard<std::mutex> behind(turnstile); }
  return std::shared_lock<std::shared_mutex>(gate);
}

}  // namespace

ShardReply ShardCalls::run(Result<ShardCall> decoded) {
  auto calling = enter(turnstile_, gate_);
  return execute(std::move(decoded));
}

ShardReply ShardCalls::execute(Result<ShardCall> decoded) {
  std::vector<Tensor> outputs;
  bool discard = false;
  Status status = [&]() -> Status {
    TROUPE_ASSIGN_OR_RETURN(ShardCall call, std::move(decoded));
    discard = call.discard_outputs;
    TROUPE_RETURN_IF_ERROR(check_updates(call));
    TROUPE_RETURN_IF_ERROR(run_one(call, &outputs));
    for (ShardCall& u : call.updates) {
      TROUPE_RETURN_IF_ERROR(run_one(u, &outputs).with_context(u.node_name));
    }
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
  return make_shard_reply(status, std::move(outputs));
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

// Which value of a variable a replica's read saw, so that its gradients can be told stale.
void note_read(SyncRounds& sync, const ShardCall& call) {
  if (const std::string* name = variable_read(call)) sync.note_read(call.sync.replica, *name);
}

}  // namespace

std::optional<ShardReply> ShardCalls::call(Result<ShardCall> decoded, const Later& later,
                                           const Peer& from) {
  if (decoded.ok()) {
    if (Status refused = check_role(*decoded, from); !refused.ok()) {
      std::lock_guard<std::mutex> lock(refused_mu_);
      if (auto more = refused_.allow()) {
        runtime::log_warning(
            "ps ", refused.message(),
            *more > 0 ? " (and " + std::to_string(*more) + " more not logged)" : std::string());
      }
      return make_shard_reply(refused, {});
    }
  }
  if (decoded.ok() && decoded->sync.replica >= 0 && from.link != 0) {
    note_link(from.link, decoded->sync.replica);
  }
  if (decoded.ok() && carries_update(*decoded)) {
    updates_served_.fetch_add(1, std::memory_order_relaxed);
  }
  auto calling = enter(turnstile_, gate_);
  if (!decoded.ok() || decoded->sync.replica < 0 || decoded->sync.asynchronous) {
    return execute(std::move(decoded));
  }
  std::lock_guard<std::mutex> lock(sync_mu_);
  ShardCall& call = *decoded;
  const auto now = Clock::now();
  std::optional<ShardReply> reply;
  if (call.op == "SyncReplicasBarrier") {
    reply = sync_.wait(call, later, now);
  } else {
    note_read(sync_, call);
    for (const ShardCall& read : call.reads) note_read(sync_, read);
    // An update waits for its round; a read, or an assignment, runs now.
    if (call.sync.aggregate > 0) {
      reply = contribute(std::move(call), now, later);
    } else {
      reply = execute(std::move(decoded));
    }
  }
  if (const auto next = sync_.next_deadline(); next < tick_at_) {
    tick_at_ = next;
    if (on_deadline_) on_deadline_(next);
  }
  return reply;
}

// Each update of the call contributes to its own variable's round, in order, and the call is
// answered once each has been: with the first error, else the last reply. What they share is
// touched under sync_mu_ alone, as SyncRounds answers under it.
std::optional<ShardReply> ShardCalls::contribute(ShardCall call, Clock::time_point now,
                                                 const Later& later) {
  if (Status s = check_updates(call); !s.ok()) return make_shard_reply(s, {});
  std::vector<ShardCall> parts = std::move(call.updates);
  call.updates.clear();
  parts.insert(parts.begin(), std::move(call));
  struct Joint {
    size_t pending = 0;
    std::optional<ShardReply> reply;
    Later later;  // once the call has returned without its reply
    void take(ShardReply r) {
      if (!reply || reply->status.ok()) reply = std::move(r);
      if (--pending == 0 && later) later(std::move(*reply));
    }
  };
  auto joint = std::make_shared<Joint>();
  joint->pending = parts.size();
  for (size_t i = 0; i < parts.size(); ++i) {
    if (joint->reply && !joint->reply->status.ok()) {
      joint->pending -= parts.size() - i;  // an error ends the call: the rest contribute nothing
      break;
    }
    auto now_reply = sync_.contribute(
        std::move(parts[i]), [joint](ShardReply r) { joint->take(std::move(r)); }, now);
    if (now_reply) joint->take(std::move(*now_reply));
  }
  if (joint->pending == 0) return std::move(*joint->reply);
  joint->later = later;
  return std::nullopt;
}

std::optional<ShardReply> ShardCalls::call(const runtime::Bytes& frame, const Later& later,
                                           const Peer& from) {
  return call(decode_shard_call(frame), later, from);
}

void ShardCalls::note_link(uint64_t link, int replica) {
  std::lock_guard<std::mutex> lock(links_mu_);
  if (link_replica_.emplace(link, replica).second) {
    ++replica_links_[replica];
    known_.insert(replica);
  }
}

size_t ShardCalls::replicas_known() {
  std::lock_guard<std::mutex> lock(links_mu_);
  return known_.size();
}

void ShardCalls::closed(uint64_t link) {
  int replica = -1;
  {
    std::lock_guard<std::mutex> lock(links_mu_);
    auto it = link_replica_.find(link);
    if (it == link_replica_.end()) return;
    replica = it->second;
    link_replica_.erase(it);
    if (--replica_links_[replica] > 0) return;
    replica_links_.erase(replica);
  }
  // Rounds it leaves may close now, running their updates: as a call does, inside the gate.
  auto calling = enter(turnstile_, gate_);
  std::lock_guard<std::mutex> lock(sync_mu_);
  sync_.leave(replica);
}

std::vector<int> ShardCalls::live_replicas() {
  std::vector<int> connected;
  {
    std::lock_guard<std::mutex> lock(links_mu_);
    for (const auto& [replica, links] : replica_links_) connected.push_back(replica);
  }
  std::lock_guard<std::mutex> lock(sync_mu_);
  std::vector<int> out;
  for (int r : connected) {
    if (!sync_.gone(r)) out.push_back(r);
  }
  return out;
}

void ShardCalls::on_deadline(std::function<void(Clock::time_point)> f) {
  std::lock_guard<std::mutex> lock(sync_mu_);
  on_deadline_ = std::move(f);
  if (tick_at_ != Clock::time_point::max()) on_deadline_(tick_at_);
}

ShardCalls::Clock::time_point ShardCalls::expire(Clock::time_point now) {
  auto calling = enter(turnstile_, gate_);
  std::lock_guard<std::mutex> lock(sync_mu_);
  sync_.expire(now);
  tick_at_ = sync_.next_deadline();
  return tick_at_;
}

namespace {

using sync_tick_atom = caf::atom_constant<caf::atom("synctick")>;
using deadline_atom = caf::atom_constant<caf::atom("deadline")>;
using waited_atom = caf::atom_constant<caf::atom("waited")>;

// The replies to calls that wait (a synchronous replica's barrier), by key, and the tick that
// expires the rounds (one pending at a time, at the earliest deadline it was told).
struct ShardState {
  std::shared_ptr<ShardCalls> calls;
  std::map<uint64_t, caf::response_promise> waiting;
  uint64_t next_key = 0;
  // Replicas' callers over CAF, watched: one that goes down is a link closed (ShardCalls).
  std::map<caf::actor_addr, uint64_t> links;
  ShardCalls::Clock::time_point tick_at = ShardCalls::Clock::time_point::max();
};

void schedule_tick(caf::stateful_actor<ShardState>* self, ShardCalls::Clock::time_point at) {
  ShardState& st = self->state;
  if (at == ShardCalls::Clock::time_point::max() || at >= st.tick_at) return;
  st.tick_at = at;
  const auto in = std::max(std::chrono::milliseconds(1),
                           std::chrono::duration_cast<std::chrono::milliseconds>(
                               at - ShardCalls::Clock::now() + std::chrono::microseconds(999)));
  self->delayed_send(self, in, sync_tick_atom::value);
}

// A call over CAF's connection. A reply that comes later comes from whichever thread closes the
// round: it is sent here as a message, as a promise is delivered on its actor's thread only.
caf::result<std::vector<char>> handle(caf::stateful_actor<ShardState>* self,
                                      runtime::Result<ShardCall> decoded) {
  ShardState& st = self->state;
  const uint64_t key = ++st.next_key;
  auto me = caf::actor_cast<caf::weak_actor_ptr>(self);
  Peer from;
  if (decoded.ok() && decoded->sync.replica >= 0 && self->current_sender()) {
    const auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
    auto at = st.links.find(sender);
    if (at == st.links.end()) {
      at = st.links.emplace(sender, Peer::kCafLink | key).first;  // no two calls share a key
      self->monitor(self->current_sender());
    }
    from.link = at->second;
  }
  auto reply = st.calls->call(
      std::move(decoded),
      [me, key](ShardReply r) {
        if (auto actor = caf::actor_cast<caf::actor>(me)) {
          caf::anon_send(actor, waited_atom::value, key, r.flat());
        }
      },
      from);
  if (reply) return reply->flat();
  auto promise = self->make_response_promise<std::vector<char>>();
  st.waiting.emplace(key, promise);
  return promise;
}

caf::behavior parameter_shard(caf::stateful_actor<ShardState>* self,
                              std::shared_ptr<ShardCalls> calls, uint16_t data_port,
                              std::function<void()> on_finished) {
  std::shared_ptr<runtime::VariableStore> store = calls->store();
  auto me = caf::actor_cast<caf::weak_actor_ptr>(self);
  calls->on_deadline([me](ShardCalls::Clock::time_point at) {
    const caf::timespan since_epoch = at.time_since_epoch();
    if (auto actor = caf::actor_cast<caf::actor>(me)) {
      caf::anon_send(actor, deadline_atom::value, since_epoch);
    }
  });
  self->state.calls = std::move(calls);
  self->set_down_handler([self](caf::down_msg& down) {
    ShardState& st = self->state;
    auto it = st.links.find(down.source);
    if (it == st.links.end()) return;
    st.calls->closed(it->second);
    st.links.erase(it);
  });
  return {
      [=](call_atom, std::vector<char>& blob) {
        auto bytes = std::make_shared<const std::vector<char>>(std::move(blob));
        return handle(self, decode_shard_call(std::move(bytes)));
      },
      [](ping_atom) { return ping_atom::value; },
      [self](members_atom) {
        std::vector<std::string> live;
        for (int r : self->state.calls->live_replicas()) live.push_back(std::to_string(r));
        return live;
      },
      [on_finished](finished_atom) {
        if (on_finished) on_finished();
        return true;
      },
      [data_port](net::data_port_atom) { return data_port; },
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
        self->state.calls->load(*data);
        return std::string();
      },
      [=](waited_atom, uint64_t key, std::vector<char>& reply) {
        auto it = self->state.waiting.find(key);
        if (it == self->state.waiting.end()) return;
        it->second.deliver(std::move(reply));
        self->state.waiting.erase(it);
      },
      [=](deadline_atom, caf::timespan since_epoch) {
        schedule_tick(self,
                      ShardCalls::Clock::time_point(
                          std::chrono::duration_cast<ShardCalls::Clock::duration>(since_epoch)));
      },
      [=](sync_tick_atom) {
        ShardState& st = self->state;
        st.tick_at = ShardCalls::Clock::time_point::max();
        schedule_tick(self, st.calls->expire(ShardCalls::Clock::now()));
      },
  };
}

}  // namespace

caf::actor spawn_parameter_shard(caf::actor_system& system, std::shared_ptr<ShardCalls> calls,
                                 uint16_t data_port, std::function<void()> on_finished) {
  return system.spawn(parameter_shard, std::move(calls), data_port, std::move(on_finished));
}

}  // namespace troupe::actors
