// The session actor's plans, steps and variable gates, and where a node's calls go when it is
// placed on another task; the loop driver is session_loop.cc.
#include "actors/session_actor.h"

#include <algorithm>
#include <cstdint>
#include <functional>

#include "actors/messages.h"
#include "actors/net/data_channel.h"
#include "actors/node_actor.h"
#include "actors/session_state.h"
#include "actors/step_plan.h"
#include "runtime/op_registry.h"
#include "runtime/placement.h"

namespace troupe::actors::session {

using runtime::Output;
using runtime::Status;
using runtime::Tensor;

namespace {

// The task of another process a node is placed on ("/job:ps/task:0"), or "": the placer wrote
// it into the node's device (runtime/placement.h).
std::string remote_task(const SessionState& st, const runtime::Node& node) {
  if (st.spec.remote_tasks.empty()) return "";
  std::string task = runtime::task_of(node.device);
  return st.spec.remote_tasks.count(task) ? task : "";
}

caf::actor remote_for(const SessionState& st, const runtime::Node& node) {
  const std::string task = remote_task(st, node);
  return task.empty() ? caf::actor() : st.spec.remote_tasks.at(task);
}

std::shared_ptr<net::DataChannel> channel_for(const SessionState& st, const runtime::Node& node) {
  auto it = st.spec.remote_channels.find(remote_task(st, node));
  if (it == st.spec.remote_channels.end() || it->second.empty()) return nullptr;
  return it->second[static_cast<size_t>(node.id) % it->second.size()];
}

// What a remote node's calls say of replication: every call names the replica (and whether it
// trains asynchronously); in synchronous training, updates (not initial assignments) and the
// barrier carry the round's size and timeout.
SyncTag sync_tag(const SessionState& st, const runtime::Node& n) {
  SyncTag tag;
  if (st.spec.sync.replica < 0) return tag;
  tag.replica = st.spec.sync.replica;
  tag.asynchronous = st.spec.sync.asynchronous;
  if (!tag.asynchronous && (runtime::is_update(*n.def) || n.op == "SyncReplicasBarrier")) {
    tag.aggregate = st.spec.sync.aggregate;
    tag.aggregate_timeout_ms = st.spec.sync.aggregate_timeout_ms;
    tag.min_aggregate = st.spec.sync.min_aggregate;
  }
  return tag;
}

caf::actor node_for(SessionActor* self, int id) {
  SessionState& st = self->state;
  if (!st.nodes[id]) {
    NodeSpec spec{st.spec.graph,
                  id,
                  caf::actor_cast<caf::actor>(self),
                  st.spec.allocator,
                  st.spec.variables,
                  remote_for(st, st.spec.graph->node(id)),
                  channel_for(st, st.spec.graph->node(id)),
                  st.spec.remote_timeout,
                  st.spec.profiler,
                  sync_tag(st, st.spec.graph->node(id)),
                  st.spec.remote_tasks,
                  st.spec.stamp};
    st.nodes[id] = spawn_node_actor(self, std::move(spec));
  }
  return st.nodes[id];
}

// The compiled plan (step_plan.h) as this session runs it: a gate per variable, a credit per
// edge, a node actor per node, each sent its NodePlan.
runtime::Result<int32_t> make_plan(SessionActor* self, const runtime::RunSignature& signature) {
  SessionState& st = self->state;
  if (st.last_plan >= 0 && signature == st.last_signature) return st.last_plan;
  const std::string key = signature.key();
  auto found = st.plan_ids.find(key);
  if (found != st.plan_ids.end()) {
    st.last_signature = signature;
    return st.last_plan = found->second;
  }
  CompileOptions options;
  options.fuse_ops = st.spec.fuse_ops;
  options.remote = [&st](const runtime::Node& n) { return static_cast<bool>(remote_for(st, n)); };
  TROUPE_ASSIGN_OR_RETURN(StepPlan compiled, compile_plan(*st.spec.graph, signature, options));
  Plan plan;
  plan.id = static_cast<int32_t>(st.plans.size());
  plan.feed_routes = std::move(compiled.feed_routes);
  plan.sources = std::move(compiled.sources);
  plan.fetches = std::move(compiled.fetches);
  plan.reporters = compiled.reporters;
  for (const auto& [id, var] : compiled.gated_reads)
    plan.gated_reads.push_back({id, &st.gates[var]});
  for (const auto& [id, vars] : compiled.writers) {
    for (const std::string& var : vars) {
      VarGate* gate = &st.gates[var];
      ++plan.writes[gate];
      plan.writer_gates[id].push_back(gate);
    }
  }
  std::map<int, NodePlan> specs;
  for (auto& [id, step] : compiled.nodes) {
    NodePlan& p = specs[id];
    p.plan = plan.id;
    p.expected = step.expected;
    p.in_credits.resize(step.slots);
    p.in_producers.resize(step.slots);
    p.bound_inputs = std::move(step.bound_inputs);
    p.fetched_outputs = std::move(step.fetched_outputs);
    p.report = step.report;
    p.fused = std::move(step.fused);
    p.region = std::move(step.region);
    p.reads = std::move(step.reads);
    p.updates = std::move(step.updates);
  }
  const uint64_t slots = static_cast<uint64_t>(std::max(1, st.spec.pipeline_depth));
  for (const auto& [id, step] : compiled.nodes) {
    for (const NodeStep::Edge& e : step.outs) {
      auto credit = std::make_shared<EdgeCredit>(slots);
      specs[id].outs.push_back(
          NodePlan::Out{node_for(self, e.consumer), e.input, e.output, credit, e.last_use});
      specs[e.consumer].in_credits[e.input] = credit;
      specs[e.consumer].in_producers[e.input] = node_for(self, id);
    }
  }
  for (auto& [id, spec] : specs) self->send(node_for(self, id), std::move(spec));
  st.plans.push_back(std::move(plan));
  st.plan_ids[key] = st.plans.back().id;
  st.last_signature = signature;
  return st.last_plan = st.plans.back().id;
}

}  // namespace

void start_step(SessionActor* self, const runtime::FeedList& feeds,
                const std::vector<Output>& fetches, const std::vector<int>& targets,
                std::function<void(RunResult)> done) {
  SessionState& st = self->state;
  runtime::RunSignature signature{{}, fetches, targets};
  for (const auto& [o, t] : feeds) {
    Status s = runtime::check_feed(*st.spec.graph, o, t);
    if (!s.ok()) return done(RunResult{s, {}});
    signature.fed.push_back(o);
  }
  auto plan_id = make_plan(self, signature);
  if (!plan_id.ok()) return done(RunResult{plan_id.status(), {}});
  const Plan& plan = st.plans[*plan_id];
  const uint64_t step = st.next_step++;
  Step& s = st.steps[step];
  s.plan = plan.id;
  s.remaining = plan.reporters;
  s.values.resize(fetches.size());
  s.done = std::move(done);
  for (size_t i = 0; i < plan.fetches.size(); ++i) {
    if (plan.fetches[i].feed >= 0) s.values[i] = feeds[plan.fetches[i].feed].second;
  }
  for (size_t f = 0; f < plan.feed_routes.size(); ++f) {
    for (const auto& [node, slot] : plan.feed_routes[f]) {
      self->send(st.nodes[node], Packet{step, plan.id, slot, feeds[f].second, false});
    }
  }
  for (int id : plan.sources) self->send(st.nodes[id], RunStep{step, plan.id});
  for (const auto& [id, gate] : plan.gated_reads) {
    if (gate->writes.empty()) {
      self->send(st.nodes[id], RunStep{step, plan.id});
    } else {
      gate->waiting.push_back({static_cast<uint64_t>(id), RunStep{step, plan.id}});
    }
  }
  for (const auto& [gate, writers] : plan.writes) gate->writes.push_back({step, writers});
  if (s.remaining == 0) {
    RunResult r{s.error, std::move(s.values)};
    auto cb = std::move(s.done);
    st.steps.erase(step);
    cb(std::move(r));
  }
}

namespace {

// A writer of the gate's variable finished step `step`: reads of later steps may go once no
// earlier write is due.
void release_reads(SessionActor* self, VarGate& gate, uint64_t step) {
  for (auto& [s, remaining] : gate.writes) {
    if (s == step) --remaining;
  }
  while (!gate.writes.empty() && gate.writes.front().second == 0) gate.writes.pop_front();
  std::vector<std::pair<uint64_t, RunStep>> still;
  for (auto& [node, run] : gate.waiting) {
    if (gate.writes.empty() || gate.writes.front().first >= run.step) {
      self->send(self->state.nodes[node], run);
    } else {
      still.push_back({node, run});
    }
  }
  gate.waiting = std::move(still);
}

caf::behavior session_actor(SessionActor* self, SessionSpec spec) {
  self->state.spec = std::move(spec);
  self->state.nodes.resize(self->state.spec.graph->num_nodes());
  self->set_down_handler([self](caf::down_msg& down) { on_observer_down(self, down); });
  // NodeDone first: CAF tries the cases in order, and each miss costs a type comparison.
  return {
      [self](NodeDone& d) {
        SessionState& st = self->state;
        auto it = st.steps.find(d.step);
        if (it == st.steps.end()) return;
        Step& s = it->second;
        const Plan& plan = st.plans[s.plan];
        auto writer = plan.writer_gates.find(d.node);
        if (writer != plan.writer_gates.end()) {
          for (VarGate* gate : writer->second) release_reads(self, *gate, d.step);
        }
        if (!d.dead) {
          for (size_t i = 0; i < plan.fetches.size(); ++i) {
            const FetchSource& f = plan.fetches[i];
            if (f.node == d.node) s.values[i] = std::move(d.outputs[f.position]);
          }
        }
        if (--s.remaining > 0) return;
        RunResult r{s.error, std::move(s.values)};
        auto cb = std::move(s.done);
        st.steps.erase(it);
        cb(std::move(r));
      },
      [self](run_atom, RunRequest& req) -> caf::typed_response_promise<RunResult> {
        auto rp = self->make_response_promise<RunResult>();
        start_step(self, req.feeds, req.fetches, req.targets,
                   [rp](RunResult r) mutable { rp.deliver(std::move(r)); });
        return rp;
      },
      [self](loop_atom, LoopRequest& req) { return start_loop(self, req); },
      [self](StepAck& ack) { on_step_ack(self, ack); },
      [self](stop_atom) { stop_loop(self, false); },
      [self](stop_atom, abandon_atom) { stop_loop(self, true); },
      [self](StepError& e) {
        auto it = self->state.steps.find(e.step);
        if (it != self->state.steps.end() && it->second.error.ok()) it->second.error = e.status;
      },
  };
}

}  // namespace
}  // namespace troupe::actors::session

namespace troupe::actors {

caf::actor spawn_session(caf::actor_system& system, SessionSpec spec) {
  return system.spawn(session::session_actor, std::move(spec));
}

}  // namespace troupe::actors
