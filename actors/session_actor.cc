#include "actors/session_actor.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>

#include "actors/data_channel.h"
#include "actors/messages.h"
#include "actors/node_actor.h"
#include "actors/queue.h"
#include "actors/step_plan.h"
#include "runtime/device.h"
#include "runtime/op_registry.h"

namespace troupe::actors {

using runtime::Graph;
using runtime::Output;
using runtime::Status;
using runtime::Tensor;

namespace {

// Ready batches a loop's dequeue takes at most: a few steps' worth, one message.
constexpr int64_t kBatchesPerDequeue = 8;

// Reads of a variable in step s wait for the writes of that variable in every earlier step, so
// that pipelined steps compute exactly what sequential ones would (no stale weights).
struct VarGate {
  std::deque<std::pair<uint64_t, int>> writes;  // (step, writers still to report), in step order
  std::vector<std::pair<uint64_t, RunStep>> waiting;  // (reader node, its RunStep)
};

struct Plan {
  int32_t id = 0;
  // Gates live in SessionState::gates (a map: they never move), found when the plan is made
  // rather than by name at every step.
  std::vector<std::pair<int, VarGate*>> gated_reads;  // (Variable node, its variable's gate)
  std::map<VarGate*, int> writes;                     // gate -> writer nodes in the plan
  std::map<int, std::vector<VarGate*>> writer_gates;  // a writer may write several
  std::vector<std::vector<std::pair<int, int32_t>>> feed_routes;  // per feed: (node, slot)
  std::vector<int> sources;  // nodes with no packets to wait for
  std::vector<FetchSource> fetches;
  int reporters = 0;
};

struct Step {
  int32_t plan = 0;
  int remaining = 0;
  std::vector<Tensor> values;
  Status error;
  std::function<void(RunResult)> done;
};

struct Loop {
  LoopRequest request;
  caf::typed_response_promise<LoopResult> promise;
  int64_t started = 0;
  int64_t finished = 0;
  int64_t succeeded = 0;
  Status error;
  bool stop = false;          // start no more steps
  bool halted = false;        // and report no more (an error, or on_step said stop)
  bool end_of_input = false;  // the input ran dry: steps in flight still report
  // A dequeue of ready batches is out: the next steps wait for what it brings, so that steps
  // take the queue's batches in its order.
  bool dequeuing = false;
  int64_t profiling = -1;      // the loop index of the step being profiled
  int64_t reported = 0;        // reports sent to the observers
  std::vector<int64_t> acked;  // per observer: reports acknowledged (INT64_MAX once it is gone)
  std::shared_ptr<std::vector<ReportedStep>> unreported;  // finished, to report together
  std::chrono::steady_clock::time_point last_report = std::chrono::steady_clock::now();
  bool stop_requested = false;
  bool sync_requested = false;
  bool abandoning = false;  // stopped with abandon_atom: the steps' failures are its doing
  int64_t slowest_ack() const {
    int64_t m = reported;
    for (int64_t a : acked) m = std::min(m, a);
    return m;
  }
};

struct SessionState {
  SessionSpec spec;
  std::vector<caf::actor> nodes;  // by node id; spawned when a plan first needs them
  std::map<std::string, int32_t> plan_ids;
  runtime::RunSignature last_signature;
  int32_t last_plan = -1;
  std::vector<Plan> plans;
  uint64_t next_step = 0;
  std::map<uint64_t, Step> steps;
  std::map<std::string, VarGate> gates;
  std::unique_ptr<Loop> loop;
  // Batches taken from the input queue and not yet fed (a dequeue brings every ready one; a
  // stopped loop leaves some): the next steps, or the next loop on the same queue, start with
  // them, so that ending a loop early loses no data.
  caf::actor leftover_input;
  std::deque<std::vector<Tensor>> leftover;
};

using SessionActor = caf::stateful_actor<SessionState>;

// The task of another process a node is placed on ("/job:ps/task:0"), or "". A gather of a
// variable's rows runs where the variable lives (step_plan.h).
std::string remote_task(const SessionState& st, const runtime::Node& node) {
  if (st.spec.remote_tasks.empty()) return "";
  const int gathered = gathered_variable(*st.spec.graph, node);
  const std::string& device = gathered >= 0 ? st.spec.graph->node(gathered).device : node.device;
  if (device.empty()) return "";
  auto spec = runtime::DeviceSpec::parse(device);
  if (!spec.ok() || spec->job.empty()) return "";
  std::string task =
      "/job:" + spec->job + "/task:" + std::to_string(spec->task < 0 ? 0 : spec->task);
  return st.spec.remote_tasks.count(task) ? task : "";
}

caf::actor remote_for(const SessionState& st, const runtime::Node& node) {
  const std::string task = remote_task(st, node);
  return task.empty() ? caf::actor() : st.spec.remote_tasks.at(task);
}

// Applies `f` to each data channel the session's nodes call other tasks over.
template <class F>
void for_each_channel(const SessionState& st, F f) {
  for (const auto& [task, channels] : st.spec.remote_channels) {
    for (const auto& channel : channels) f(*channel);
  }
}

std::shared_ptr<DataChannel> channel_for(const SessionState& st, const runtime::Node& node) {
  auto it = st.spec.remote_channels.find(remote_task(st, node));
  if (it == st.spec.remote_channels.end() || it->second.empty()) return nullptr;
  return it->second[static_cast<size_t>(node.id) % it->second.size()];
}

// What a remote node's calls say of synchronous replication: every call names the replica;
// updates (not initial assignments) and the barrier carry the round's size and timeout.
SyncTag sync_tag(const SessionState& st, const runtime::Node& n) {
  SyncTag tag;
  if (st.spec.sync.replica < 0) return tag;
  tag.replica = st.spec.sync.replica;
  const bool update = n.def->variable_access == runtime::VariableAccess::kWrite && n.op != "Assign";
  if (update || n.op == "SyncReplicasBarrier") {
    tag.aggregate = st.spec.sync.aggregate;
    tag.aggregate_timeout_ms = st.spec.sync.aggregate_timeout_ms;
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
                  sync_tag(st, st.spec.graph->node(id))};
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

// Starts one step; `done` runs when its last reporter has reported (or at once with an error).
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

void pump_loop(SessionActor* self);

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

// The number observers see for loop step `index`: counted from report_base, or the global step
// that the step's fetch read, plus one (the step's own increment), when workers share it.
int64_t step_number(const LoopRequest& r, int64_t index, const std::vector<Tensor>& values) {
  const int f = r.step_number_fetch;
  if (f < 0 || f >= static_cast<int>(values.size()) || values[f].num_elements() != 1 ||
      values[f].dtype() != runtime::DType::kInt64) {
    return r.report_base + index;
  }
  return values[f].data<int64_t>()[0] + 1;
}

// Sends the observers the steps finished and not yet reported.
void report(SessionActor* self) {
  Loop& loop = *self->state.loop;
  if (!loop.unreported) return;
  std::shared_ptr<const std::vector<ReportedStep>> steps = std::move(loop.unreported);
  loop.unreported = nullptr;
  if (loop.halted) return;
  const auto& observers = loop.request.observers;
  for (size_t k = 0; k < observers.size(); ++k) {
    self->send(observers[k], StepReport{static_cast<int32_t>(k), steps});
  }
  ++loop.reported;
  loop.last_report = std::chrono::steady_clock::now();
}

void finish_loop_step(SessionActor* self, int64_t index, RunResult result) {
  Loop& loop = *self->state.loop;
  ++loop.finished;
  if (index == loop.profiling) {
    loop.profiling = -1;
    std::vector<NodeTiming> timings = self->state.spec.profiler->take();
    if (result.status.ok() && loop.request.on_profile) {
      loop.request.on_profile(index, std::move(timings));
    }
  }
  if (!result.status.ok()) {
    if (loop.error.ok() && !loop.abandoning) {
      loop.error = result.status.with_context("step " + std::to_string(index));
    }
    loop.stop = loop.halted = true;
  } else {
    ++loop.succeeded;
    if (!loop.halted && loop.request.on_step && !loop.request.on_step(index, result.values)) {
      loop.stop = loop.halted = true;
    }
    const int64_t number = step_number(loop.request, index, result.values);
    if (number >= loop.request.last_number) loop.stop = true;
    // Steps that ran after an observer asked to stop are still reported: they changed the model.
    if (!loop.halted && !loop.request.observers.empty()) {
      if (!loop.unreported) loop.unreported = std::make_shared<std::vector<ReportedStep>>();
      loop.unreported->push_back({number, std::move(result.values)});
      if (static_cast<int64_t>(loop.unreported->size()) >= LoopRequest::kStepsPerReport ||
          std::chrono::steady_clock::now() - loop.last_report >= loop.request.report_interval) {
        report(self);
      }
    }
  }
  pump_loop(self);
}

void on_ack(SessionActor* self, const StepAck& ack) {
  if (!self->state.loop) return;
  Loop& loop = *self->state.loop;
  if (ack.observer < 0 || ack.observer >= static_cast<int32_t>(loop.acked.size())) return;
  if (loop.acked[ack.observer] < INT64_MAX) ++loop.acked[ack.observer];
  if (!ack.status.ok()) {
    if (loop.error.ok()) loop.error = ack.status;
    loop.stop = loop.halted = true;
  }
  if (ack.stop) loop.stop = loop.stop_requested = true;
  if (ack.sync) loop.stop = loop.sync_requested = true;
  pump_loop(self);
}

// An observer that is gone will not acknowledge: the loop fails instead of waiting for it.
void on_down(SessionActor* self, const caf::down_msg& down) {
  if (!self->state.loop) return;
  Loop& loop = *self->state.loop;
  const auto& observers = loop.request.observers;
  for (size_t k = 0; k < observers.size(); ++k) {
    if (observers[k].address() != down.source || loop.acked[k] == INT64_MAX) continue;
    loop.acked[k] = INT64_MAX;
    if (loop.error.ok()) {
      loop.error = runtime::unavailable(
          "step observer ", k, " stopped during the loop: ", self->system().render(down.reason));
    }
    loop.stop = loop.halted = true;
  }
  pump_loop(self);
}

// Starts step `index` of the loop with `feeds` plus what the loop's feed callback adds.
void begin_loop_step(SessionActor* self, int64_t index, runtime::FeedList feeds) {
  Loop& loop = *self->state.loop;
  if (loop.request.feed) {
    Status s = loop.request.feed(index, &feeds);
    if (s.code() == runtime::Code::kOutOfRange) {
      // The data's end, as a dry input queue: the steps in flight still report.
      loop.end_of_input = loop.stop = true;
      ++loop.finished;
      return;
    }
    if (!s.ok()) {
      loop.error = s.with_context("feeding step " + std::to_string(index));
      loop.stop = loop.halted = true;
      ++loop.finished;
      return;
    }
  }
  StepProfiler* profiler = self->state.spec.profiler.get();
  if (profiler && loop.profiling < 0 && loop.request.profile && loop.request.profile(index)) {
    loop.profiling = index;
    profiler->watch(self->state.next_step);  // the id start_step gives this step
  }
  start_step(self, feeds, loop.request.fetches, loop.request.targets,
             [self, index](RunResult r) { finish_loop_step(self, index, std::move(r)); });
}

runtime::FeedList feeds_of(const LoopRequest& req, std::vector<Tensor> components) {
  runtime::FeedList feeds;
  for (size_t k = 0; k < req.input_feeds.size(); ++k) {
    feeds.push_back({req.input_feeds[k], std::move(components[k])});
  }
  return feeds;
}

// Asks the input queue for step `index`'s batch; the step starts when it arrives. The queue
// answers in the order asked, so steps still start in order.
void request_batch(SessionActor* self, int64_t index) {
  const LoopRequest& req = self->state.loop->request;
  DequeueRequest dq{req.batch_size,
                    req.allow_smaller_final_batch ? DequeueMode::kUpTo : DequeueMode::kMany};
  // Elements that are whole batches: every one that is ready, the rest kept for the next
  // steps, so that a step with tiny batches does not pay a message round trip for its input.
  if (req.batch_size == 0) dq = DequeueRequest{kBatchesPerDequeue, DequeueMode::kReady};
  self->request(req.input, caf::infinite, dequeue_atom::value, dq)
      .then(
          [self, index](Batch& b) {
            if (!self->state.loop) return;
            Loop& loop = *self->state.loop;
            loop.dequeuing = false;
            const auto& names = loop.request.input_feeds;
            if (b.status.ok() && b.components.size() != names.size()) {
              b.status = runtime::invalid_argument("the input queue gives ", b.components.size(),
                                                   " components for ", names.size(), " feeds");
            }
            if (!b.status.ok()) {
              if (b.status.code() == runtime::Code::kOutOfRange) {
                loop.end_of_input = true;
              } else {
                if (loop.error.ok()) {
                  loop.error = b.status.with_context("input of step " + std::to_string(index));
                }
                loop.halted = true;
              }
              loop.stop = true;
              ++loop.finished;
            } else {
              // Batches beyond this step's wait for the next steps, or the next loop.
              SessionState& st = self->state;
              if (loop.stop || !b.more.empty()) st.leftover_input = loop.request.input;
              if (loop.stop) st.leftover.push_back(std::move(b.components));
              for (auto& batch : b.more) st.leftover.push_back(std::move(batch));
              if (loop.stop) {
                ++loop.finished;
              } else {
                begin_loop_step(self, index, feeds_of(loop.request, std::move(b.components)));
                if (!self->state.loop) return;
              }
            }
            pump_loop(self);
          },
          [self](caf::error& e) {
            if (!self->state.loop) return;
            Loop& loop = *self->state.loop;
            loop.dequeuing = false;
            if (loop.error.ok()) {
              loop.error = runtime::unavailable("input queue: ", self->system().render(e));
            }
            loop.stop = loop.halted = true;
            ++loop.finished;
            pump_loop(self);
          });
}

// Keeps up to pipeline_depth steps of the loop in flight (counting batches asked for); answers
// when all are done.
void pump_loop(SessionActor* self) {
  SessionState& st = self->state;
  Loop& loop = *st.loop;
  if (loop.request.stop && !loop.stop && loop.request.stop->load(std::memory_order_relaxed)) {
    loop.stop = loop.stop_requested = true;
  }
  while (!loop.stop && loop.started < loop.request.steps &&
         loop.started - loop.finished < std::max(1, st.spec.pipeline_depth) &&
         loop.reported - loop.slowest_ack() < std::max<int64_t>(1, loop.request.observer_window)) {
    if (loop.request.input && st.leftover_input == loop.request.input && !st.leftover.empty() &&
        st.leftover.front().size() == loop.request.input_feeds.size()) {
      std::vector<Tensor> batch = std::move(st.leftover.front());
      st.leftover.pop_front();
      begin_loop_step(self, loop.started++, feeds_of(loop.request, std::move(batch)));
      if (!st.loop) return;
      continue;
    }
    if (loop.request.input) {
      if (loop.dequeuing) break;
      loop.dequeuing = loop.request.batch_size == 0;
      request_batch(self, loop.started++);
      continue;
    }
    begin_loop_step(self, loop.started++, {});
    if (!st.loop) return;  // finished synchronously and answered already
  }
  // With no step in flight nothing more joins the steps waiting to be reported.
  if (loop.started == loop.finished) report(self);
  if (loop.started == loop.finished && (loop.stop || loop.started == loop.request.steps) &&
      loop.slowest_ack() >= loop.reported) {
    auto done = std::move(st.loop);
    for (const caf::actor& o : done->request.observers) self->demonitor(o);
    // Its steps are over: the next loop's calls are sent again.
    if (done->abandoning) for_each_channel(st, [](DataChannel& c) { c.resume(); });
    // The queue ran dry, but batches taken before the stop still wait for the next loop.
    const bool more = st.leftover_input == done->request.input && !st.leftover.empty();
    done->promise.deliver(LoopResult{done->error, done->succeeded, done->end_of_input && !more,
                                     done->stop_requested, done->sync_requested});
  }
}

caf::behavior session_actor(SessionActor* self, SessionSpec spec) {
  self->state.spec = std::move(spec);
  self->state.nodes.resize(self->state.spec.graph->num_nodes());
  self->set_down_handler([self](caf::down_msg& down) { on_down(self, down); });
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
      [self](loop_atom, LoopRequest& req) -> caf::typed_response_promise<LoopResult> {
        auto promise = self->make_response_promise<LoopResult>();
        if (self->state.loop) {
          promise.deliver(LoopResult{runtime::failed_precondition("a loop is already running"), 0});
          return promise;
        }
        if (req.input && (req.batch_size < 0 || req.input_feeds.empty())) {
          promise.deliver(LoopResult{
              runtime::invalid_argument("a loop with an input queue needs a batch size >= 0 and "
                                        "the feeds its components go to"),
              0});
          return promise;
        }
        if (req.input != self->state.leftover_input) {
          self->state.leftover.clear();  // from a queue this loop does not read
          self->state.leftover_input = nullptr;
        }
        auto loop = std::make_unique<Loop>();
        loop->request = std::move(req);
        loop->promise = promise;
        loop->acked.assign(loop->request.observers.size(), 0);
        for (const caf::actor& o : loop->request.observers) self->monitor(o);
        self->state.loop = std::move(loop);
        pump_loop(self);
        return promise;
      },
      [self](StepAck& ack) { on_ack(self, ack); },
      [self](stop_atom) {
        if (!self->state.loop) return;
        self->state.loop->stop = self->state.loop->stop_requested = true;
        pump_loop(self);
      },
      [self](stop_atom, abandon_atom) {
        SessionState& st = self->state;
        if (!st.loop) return;
        st.loop->stop = st.loop->stop_requested = st.loop->abandoning = true;
        for_each_channel(st, [](DataChannel& c) { c.abandon("the loop stopped waiting"); });
        pump_loop(self);
      },
      [self](StepError& e) {
        auto it = self->state.steps.find(e.step);
        if (it != self->state.steps.end() && it->second.error.ok()) it->second.error = e.status;
      },
  };
}

}  // namespace

caf::actor spawn_session(caf::actor_system& system, SessionSpec spec) {
  return system.spawn(session_actor, std::move(spec));
}

}  // namespace troupe::actors
