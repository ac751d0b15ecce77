#include "actors/node_actor.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include <map>
#include <optional>

#include "actors/control_flow_region.h"
#include "actors/messages.h"
#include "actors/net/data_channel.h"
#include "actors/shard_codec.h"
#include "runtime/denormal.h"
#include "runtime/device.h"
#include "runtime/executor.h"
#include "runtime/kernel_registry.h"
#include "runtime/placement.h"

namespace troupe::actors {

using runtime::Status;
using runtime::Tensor;

namespace {

// What the node runs: its own kernel, or in some plans a fused node's (NodePlan::fused) or a
// control-flow region (NodePlan::region: `region`, or why it cannot run).
struct Exec {
  const runtime::Node* node = nullptr;
  runtime::KernelFn kernel = nullptr;
  std::unique_ptr<runtime::KernelContext> ctx;
  std::unique_ptr<RegionRunner> region;
  Status region_error;
};

struct PlanState {
  NodePlan plan;
  Exec fused;            // for a plan with a fused node
  Exec* exec = nullptr;  // what this plan runs: &fused or NodeState::own
  // Whose outputs a step gives, in order: what it runs, then the reads its call makes too.
  std::vector<const runtime::Node*> yields;
  // A remote node's call but for its inputs, the same every step: its reads and updates, and
  // whether it wants outputs back.
  ShardCallExtras call;
  // Its input slots: what it runs takes the first, each update the next as many as it has.
  size_t num_inputs = 0;
  // Where its outputs hold a read of global_step, for a synchronous replica's SyncStamp; -1.
  int stamp_output = -1;
};

bool reads_global_step(const runtime::Node& n) {
  auto var = n.attrs.find("var");
  if (n.op != "Variable" || var == n.attrs.end()) return false;
  const std::string* name = std::get_if<std::string>(&var->second);
  return name != nullptr && *name == "global_step";
}

size_t num_outputs(const PlanState& p) {
  size_t n = 0;
  for (const runtime::Node* y : p.yields) n += static_cast<size_t>(y->num_outputs());
  return n;
}

struct Pending {
  uint64_t step = 0;
  const PlanState* plan = nullptr;  // in NodeState::plans, whose nodes never move
  int32_t received = 0;
  std::vector<Tensor> inputs;
  bool dead = false;
};

struct NodeState {
  NodeSpec spec;
  const runtime::Node* node = nullptr;
  Exec own;  // no kernel or context for a node that runs on a remote server
  std::map<int32_t, PlanState> plans;
  // Steps in arrival order, which is step order: a few at most (the pipeline's depth), so a
  // vector, which unlike a deque allocates nothing as steps come and go.
  std::vector<Pending> queue;
  std::vector<std::vector<Tensor>> spare_inputs;  // input vectors of finished steps, for reuse
  bool busy = false;                              // a remote call is in flight
  uint64_t invocations = 0;
  // The call in flight (answered once: by its reply, its timeout, or the server's death).
  struct Call {
    Pending pending;
    int32_t plan = 0;
    bool answered = false;
    bool discard = false;  // no outputs asked for: nothing consumes or fetches them
    // What the data channel's reply names; a region's, its latest request (a region's run
    // makes one after another, answered one by one).
    uint64_t tag = 0;
  };
  std::shared_ptr<Call> call;
  uint64_t calls = 0;
  // The servers it calls (its own, when it runs on another task; those of a region's nodes),
  // each monitored once, and why each is unreachable once its proxy went down: a lost
  // connection fails the call in flight at once, and every later one, not at its timeout.
  std::map<caf::actor_addr, std::optional<std::string>> servers;
  caf::actor_addr calling;  // the server of the call in flight
};

using NodeActor = caf::stateful_actor<NodeState>;

// The kernel of `node` (found when the plan was made) and a context to run it in.
Exec make_exec(const NodeState& st, const runtime::Node& node) {
  Exec e;
  e.node = &node;
  e.kernel = runtime::kernel_registry().find(node.op, runtime::kernel_device(node.device),
                                             node.kernel_dtype);
  e.ctx = std::make_unique<runtime::KernelContext>(node, st.spec.allocator.get(),
                                                   st.spec.variables.get());
  return e;
}

// Keeps a finished step's input vector for the next step, without the tensors it held.
void recycle(NodeState& st, std::vector<Tensor>&& inputs) {
  for (Tensor& t : inputs) t = Tensor();
  st.spare_inputs.push_back(std::move(inputs));
}

Pending& pending_for(NodeState& st, uint64_t step, int32_t plan) {
  for (Pending& p : st.queue) {
    if (p.step == step) return p;
  }
  std::vector<Tensor> inputs;
  if (!st.spare_inputs.empty()) {
    inputs = std::move(st.spare_inputs.back());
    st.spare_inputs.pop_back();
  }
  PlanState& p = st.plans.at(plan);
  inputs.resize(p.num_inputs);
  for (const auto& [slot, value] : p.plan.bound_inputs) inputs[slot] = value;
  st.queue.push_back(Pending{step, &p, 0, std::move(inputs), false});
  return st.queue.back();
}

// Hands the step's outputs (or its death) to the consumers and, if this node reports, to the
// session. An output's last edge takes the value itself: a handle copy is two atomic operations.
void finish(NodeActor* self, const Pending& pd, const NodePlan& plan, std::vector<Tensor>& outputs,
            bool dead) {
  NodeState& st = self->state;
  if (plan.report) {
    NodeDone done{pd.step, st.node->id, {}, dead};
    if (!dead) {
      for (int32_t i : plan.fetched_outputs) done.outputs.push_back(outputs[i]);
    }
    self->send(st.spec.session, std::move(done));
  }
  for (const NodePlan::Out& out : plan.outs) {
    Packet pk{pd.step, plan.plan, out.input, Tensor(), dead};
    if (!dead && out.output >= 0) {
      pk.value = out.last_use ? std::move(outputs[out.output]) : outputs[out.output];
    }
    if (out.credit) out.credit->on_sent();
    self->send(out.consumer, std::move(pk));
  }
}

void fail(NodeActor* self, const Pending& pd, const NodePlan& plan, Status status) {
  self->send(self->state.spec.session, StepError{pd.step, std::move(status)});
  std::vector<Tensor> none;
  finish(self, pd, plan, none, /*dead=*/true);
}

// Frees the step's input slots; wakes producers that wait for one.
void return_credits(NodeActor* self, const NodePlan& plan) {
  for (size_t i = 0; i < plan.in_credits.size(); ++i) {
    EdgeCredit* c = plan.in_credits[i].get();
    if (!c) continue;
    if (c->on_consumed()) self->send(plan.in_producers[i], Resume{});
  }
}

// Watches `server` from its first call on; why it is unreachable, if it has gone.
const std::optional<std::string>& gone(NodeActor* self, const caf::actor& server) {
  auto [it, added] = self->state.servers.try_emplace(server.address());
  if (added) self->monitor(server);
  return it->second;
}

Status unreachable(NodeActor* self, const std::string& why) {
  const runtime::Node& n = *self->state.node;
  return runtime::make_error(runtime::Code::kUnavailable, n.op, " '", n.name, "': the server for ",
                             n.device, " is unreachable (", why, ")");
}

// Ends the call in flight, once, with its outputs or an error, and lets the next step go.
void answer(NodeActor* self, std::shared_ptr<NodeState::Call> call,
            runtime::Result<std::vector<Tensor>> outputs) {
  NodeState& st = self->state;
  if (call->answered) return;
  call->answered = true;
  st.busy = false;
  st.call.reset();
  const PlanState& p = st.plans.at(call->plan);
  const NodePlan& plan = p.plan;
  if (!outputs.ok()) {
    fail(self, call->pending, plan, outputs.status());
  } else if (outputs->size() != num_outputs(p)) {
    fail(self, call->pending, plan,
         runtime::internal_error("server returned ", outputs->size(), " outputs for ",
                                 st.node->name));
  } else {
    if (st.spec.stamp && p.stamp_output >= 0) {
      const Tensor& step = (*outputs)[static_cast<size_t>(p.stamp_output)];
      if (step.dtype() == runtime::DType::kInt64 && step.num_elements() == 1) {
        st.spec.stamp->set(call->pending.step, step.data<int64_t>()[0]);
      }
    }
    finish(self, call->pending, plan, *outputs, false);
  }
  self->send(self, Resume{});
}

// A peer's reply is trusted no more than a feed: local kernels read these outputs by the
// dtype and shape the graph declares.
Status check_remote_outputs(const PlanState& p, const std::vector<Tensor>& outputs) {
  if (outputs.size() != num_outputs(p)) {
    return runtime::data_loss("the reply holds ", outputs.size(), " outputs for ", num_outputs(p));
  }
  size_t at = 0;
  for (const runtime::Node* n : p.yields) {
    const size_t count = static_cast<size_t>(n->num_outputs());
    TROUPE_RETURN_IF_ERROR(runtime::check_outputs(*n, outputs.data() + at, count));
    at += count;
  }
  return runtime::ok_status();
}

// Ends the call in flight with the server's reply, checked against the graph.
void answer_remote(NodeActor* self, std::shared_ptr<NodeState::Call> call,
                   runtime::Result<std::vector<Tensor>> r) {
  const runtime::Node& n = *self->state.node;
  const PlanState& p = self->state.plans.at(call->plan);
  if (r.ok() && call->discard && r->empty()) {
    r->resize(num_outputs(p));  // never read: nothing consumes them
  } else if (r.ok()) {
    if (Status s = check_remote_outputs(p, *r); !s.ok()) r = s;
  }
  if (!r.ok()) r = r.status().with_context(n.op + " '" + n.name + "' on " + n.device);
  answer(self, call, std::move(r));
}

void run_remote(NodeActor* self, Pending pd, const NodePlan& plan) {
  NodeState& st = self->state;
  const runtime::Node& node = *pd.plan->exec->node;
  if (const auto& why = gone(self, st.spec.remote))
    return fail(self, pd, plan, unreachable(self, *why));
  // An update of synchronous training: its round is the global step its step read. One call
  // is in flight at a time, so the plan's call takes this one's stamp.
  ShardCallExtras& extras = st.plans.at(plan.plan).call;
  if (st.spec.stamp && extras.sync.aggregate > 0) extras.sync.stamp = st.spec.stamp->of(pd.step);
  const bool discard = extras.discard_outputs;
  // Over the data channel the call's segments go out as they are; over CAF, as one blob.
  net::ChannelCall message;
  std::vector<char> blob;
  if (st.spec.channel) {
    auto built = build_shard_call(*st.spec.graph, node, pd.inputs, extras);
    if (!built.ok()) return fail(self, pd, plan, built.status());
    message = net::ChannelCall{std::move(*built), pd.inputs};
  } else {
    Status s = encode_shard_call(*st.spec.graph, node, pd.inputs, &blob, extras);
    if (!s.ok()) return fail(self, pd, plan, s);
  }
  st.busy = true;
  auto call = std::make_shared<NodeState::Call>();
  call->pending = std::move(pd);
  call->plan = plan.plan;
  call->discard = discard;
  st.call = call;
  st.calling = st.spec.remote.address();
  if (st.spec.channel) {
    // The reply comes as a channel_reply_atom message; the channel bounds the wait itself.
    call->tag = ++st.calls;
    st.spec.channel->call(std::move(message), caf::actor_cast<caf::actor>(self), call->tag);
    return;
  }
  self->request(st.spec.remote, st.spec.remote_timeout, call_atom::value, std::move(blob))
      .then(
          [self, call](std::vector<char>& reply) {
            answer_remote(
                self, call,
                decode_shard_reply(std::make_shared<const std::vector<char>>(std::move(reply))));
          },
          [self, call](caf::error& err) {
            answer(self, call, unreachable(self, self->system().render(err)));
          });
}

void region_answer(NodeActor* self, std::shared_ptr<NodeState::Call> call, uint64_t tag,
                   runtime::Result<std::vector<Tensor>> outputs);

Status region_server_gone(const std::string& why) {
  return runtime::unavailable("its server is unreachable (", why, ")");
}

// The node of another task that a region waits for runs there: a call to its task's server
// over CAF, answered into the region's run (region_answer).
void call_for_region(NodeActor* self, std::shared_ptr<NodeState::Call> call) {
  NodeState& st = self->state;
  RegionRunner& region = *st.plans.at(call->plan).exec->region;
  const runtime::Node& node = *region.waiting();
  const uint64_t tag = call->tag = ++st.calls;  // answers to earlier calls of this run are stale
  auto server = st.spec.servers.find(runtime::task_of(node.device));
  if (server == st.spec.servers.end()) {
    return region_answer(self, call, tag,
                         runtime::internal_error("no server for ", node.device, " in the cluster"));
  }
  std::vector<char> blob;
  Status s = encode_shard_call(*st.spec.graph, node, region.waiting_inputs(), &blob,
                               ShardCallExtras{st.spec.sync, false, {}, {}});
  if (!s.ok()) return region_answer(self, call, tag, s);
  const caf::actor& to = server->second;
  if (const auto& why = gone(self, to))
    return region_answer(self, call, tag, region_server_gone(*why));
  st.calling = to.address();
  self->request(to, st.spec.remote_timeout, call_atom::value, std::move(blob))
      .then(
          [self, call, tag](std::vector<char>& reply) {
            region_answer(
                self, call, tag,
                decode_shard_reply(std::make_shared<const std::vector<char>>(std::move(reply))));
          },
          [self, call, tag](caf::error& err) {
            region_answer(self, call, tag, region_server_gone(self->system().render(err)));
          });
}

// The waited node's outputs go into the region's run, which waits for the next such node or
// ends the step.
void region_answer(NodeActor* self, std::shared_ptr<NodeState::Call> call, uint64_t tag,
                   runtime::Result<std::vector<Tensor>> outputs) {
  NodeState& st = self->state;
  if (call->answered || call->tag != tag) return;
  const PlanState& p = st.plans.at(call->plan);
  Exec& exec = *p.exec;
  RegionRunner& region = *exec.region;
  Status s;
  if (outputs.ok()) {
    runtime::ScopedFlushDenormal flush;  // the rest of the run's kernels, as in try_fire
    s = region.resume(std::move(*outputs));
  } else {
    const runtime::Node& n = *region.waiting();
    s = outputs.status().with_context(n.op + " '" + n.name + "' on " + n.device);
  }
  if (s.ok() && region.waiting()) return call_for_region(self, call);
  call->answered = true;
  st.busy = false;
  st.call.reset();
  std::vector<Tensor>& out = exec.ctx->outputs();
  if (s.ok()) s = region.finish(&out);
  if (s.ok()) {
    finish(self, call->pending, p.plan, out, false);
  } else {
    fail(self, call->pending, p.plan, s);
  }
  for (Tensor& t : out) t = Tensor();
  self->send(self, Resume{});
}

void try_fire(NodeActor* self) {
  NodeState& st = self->state;
  while (!st.busy && !st.queue.empty()) {
    Pending& front = st.queue.front();
    const NodePlan& plan = front.plan->plan;
    if (front.received < plan.expected) return;
    for (const NodePlan::Out& out : plan.outs) {
      // Without room the consumer sends Resume when it frees a slot.
      if (out.credit && !out.credit->room_or_wait()) return;
    }
    Pending pd = std::move(front);
    st.queue.erase(st.queue.begin());
    return_credits(self, plan);
    if (pd.dead) {
      std::vector<Tensor> none;
      finish(self, pd, plan, none, true);
      recycle(st, std::move(pd.inputs));
      continue;
    }
    if (st.spec.remote) {
      run_remote(self, std::move(pd), plan);
      continue;
    }
    const Exec& exec = *pd.plan->exec;
    runtime::KernelContext& ctx = *exec.ctx;
    ctx.inputs() = std::move(pd.inputs);
    ctx.set_invocation(st.invocations++);
    Status s;
    const bool profiled = st.spec.profiler && st.spec.profiler->watching(pd.step);
    const auto started =
        profiled ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    {
      runtime::ScopedFlushDenormal flush;
      if (exec.region) {
        s = exec.region->start(ctx.inputs());
        if (s.ok() && exec.region->waiting()) {
          recycle(st, std::move(ctx.inputs()));
          ctx.inputs().clear();
          st.busy = true;  // until the region's run ends
          st.call = std::make_shared<NodeState::Call>();
          st.call->pending = std::move(pd);
          st.call->plan = plan.plan;
          call_for_region(self, st.call);
          continue;
        }
        if (s.ok()) s = exec.region->finish(&ctx.outputs());
      } else if (!exec.region_error.ok()) {
        s = exec.region_error;
      } else {
        s = runtime::run_kernel(exec.kernel, ctx);
      }
    }
    if (profiled) {
      using std::chrono::duration_cast;
      using std::chrono::microseconds;
      const auto ended = std::chrono::steady_clock::now();
      st.spec.profiler->record(
          NodeTiming{exec.node->name, exec.node->op,
                     duration_cast<microseconds>(started.time_since_epoch()).count(),
                     duration_cast<microseconds>(ended - started).count(),
                     std::hash<std::thread::id>()(std::this_thread::get_id())});
    }
    recycle(st, std::move(ctx.inputs()));
    ctx.inputs().clear();
    if (!s.ok()) {
      fail(self, pd, plan, s);
    } else {
      finish(self, pd, plan, ctx.outputs(), false);
    }
    for (Tensor& t : ctx.outputs()) t = Tensor();
  }
}

caf::behavior node_actor(NodeActor* self, NodeSpec spec) {
  NodeState& st = self->state;
  st.spec = std::move(spec);
  st.node = &st.spec.graph->node(st.spec.node);
  st.own.node = st.node;
  if (!st.spec.remote) {
    st.own = make_exec(st, *st.node);
  } else {
    gone(self, st.spec.remote);  // watched before its first call
  }
  // A lost connection (or missed heartbeats) takes a server's proxy down.
  self->set_down_handler([self](caf::down_msg& dm) {
    NodeState& st = self->state;
    auto server = st.servers.find(dm.source);
    if (server == st.servers.end()) return;
    const std::string& why = *(server->second = self->system().render(dm.reason));
    if (!st.call || st.calling != dm.source) return;
    if (st.spec.remote) {
      answer(self, st.call, unreachable(self, why));
    } else {
      region_answer(self, st.call, st.call->tag, region_server_gone(why));
    }
  });
  // Packets first: CAF tries the cases in order, and each miss costs a type comparison.
  return {
      [self](Packet& p) {
        Pending& pd = pending_for(self->state, p.step, p.plan);
        if (p.dead) {
          pd.dead = true;
        } else if (p.input < static_cast<int32_t>(pd.inputs.size())) {
          pd.inputs[p.input] = std::move(p.value);
        }
        ++pd.received;
        try_fire(self);
      },
      [self](RunStep r) {
        ++pending_for(self->state, r.step, r.plan).received;
        try_fire(self);
      },
      [self](NodePlan& plan) {
        NodeState& st = self->state;
        PlanState& p = st.plans[plan.plan];
        p.plan = std::move(plan);
        // A remote node's plan may run a node of its own there (a VariableGather): no kernel here.
        if (p.plan.fused) {
          p.fused = st.spec.remote ? Exec{p.plan.fused.get(), nullptr, nullptr}
                                   : make_exec(st, *p.plan.fused);
        }
        if (p.plan.region) {
          std::vector<int32_t> wanted = p.plan.fetched_outputs;
          for (const NodePlan::Out& out : p.plan.outs) {
            if (out.output >= 0) wanted.push_back(out.output);
          }
          std::sort(wanted.begin(), wanted.end());
          wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
          auto runner = RegionRunner::make(*st.spec.graph, *p.plan.region, wanted,
                                           st.spec.allocator.get(), st.spec.variables.get());
          if (runner.ok()) {
            p.fused.region = std::move(*runner);
          } else {
            p.fused.region_error = runner.status();
          }
        }
        p.exec = p.plan.fused ? &p.fused : &st.own;
        p.yields = {p.exec->node};
        for (int r : p.plan.reads) p.yields.push_back(&st.spec.graph->node(r));
        int at = 0;
        for (const runtime::Node* y : p.yields) {
          if (st.spec.remote && reads_global_step(*y)) p.stamp_output = at;
          at += y->num_outputs();
        }
        p.num_inputs = p.exec->node->inputs.size();
        // An update ordered only by control edges needs no value back: the reply carries none.
        bool discard = p.plan.fetched_outputs.empty();
        for (const NodePlan::Out& out : p.plan.outs) discard = discard && out.output < 0;
        p.call = ShardCallExtras{st.spec.sync, discard, {}, {}};
        p.call.reads.assign(p.yields.begin() + 1, p.yields.end());
        for (int u : p.plan.updates) {
          p.call.updates.push_back(&st.spec.graph->node(u));
          p.num_inputs += p.call.updates.back()->inputs.size();
        }
      },
      [self](Resume) { try_fire(self); },
      // A data channel's reply: to the call in flight unless that was answered otherwise (the
      // server's death) and a later one has taken its place.
      [self](net::channel_reply_atom, uint64_t tag, runtime::Bytes& reply) {
        NodeState& st = self->state;
        if (st.call && st.call->tag == tag) answer_remote(self, st.call, decode_shard_reply(reply));
      },
      [self](net::channel_reply_atom, uint64_t tag, std::string& why) {
        NodeState& st = self->state;
        if (st.call && st.call->tag == tag) answer(self, st.call, unreachable(self, why));
      },
  };
}

}  // namespace

caf::actor spawn_node_actor(caf::event_based_actor* parent, NodeSpec spec) {
  return parent->spawn<caf::linked>(node_actor, std::move(spec));
}

}  // namespace troupe::actors
