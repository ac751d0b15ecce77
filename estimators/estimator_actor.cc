#include "estimators/estimator_actor.h"

#include <algorithm>
#include <atomic>
#include <cstdio>

#include "actors/messages.h"
#include "runtime/log.h"

namespace troupe::estimators {

using runtime::Status;

namespace {

using restart_atom = caf::atom_constant<caf::atom("restart")>;

// A restart's new parts, or why there are none.
struct Restarted {
  Status status;
  TrainingParts parts;
};

}  // namespace
}  // namespace troupe::estimators

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::estimators::Restarted)

namespace troupe::estimators {
namespace {

// Failures of the machinery, not of the model or the data: worth a restart.
bool retryable(const Status& s) {
  return s.code() == runtime::Code::kUnavailable || s.code() == runtime::Code::kAborted ||
         s.code() == runtime::Code::kInternal;
}

// What an evaluation's or prediction's consumer and its EstimatorActor share. The EstimatorActor
// reads it between loops, when the loop has answered (after every report was acknowledged).
struct Consumption {
  std::function<runtime::Result<bool>(const std::vector<runtime::Tensor>&)> consume;
  std::atomic<int64_t> consumed{0};
  // It refused a batch: not the machinery's failure, whatever its code, and the same batch
  // would fail again after a restart.
  std::atomic<bool> failed{false};
  Status error;
  std::atomic<bool> enough{false};  // it said false
};

// Hands one step's values to the consumer; whether the loop goes on.
bool take(Consumption& c, const std::vector<runtime::Tensor>& values) {
  if (c.failed || c.enough) return false;  // a step that was in flight: dropped
  runtime::Result<bool> more = false;
  try {
    more = c.consume(values);
  } catch (const std::exception& e) {
    more = runtime::internal_error("consuming batch ", c.consumed.load(), " threw: ", e.what());
  }
  if (!more.ok()) {
    c.error = more.status();
    c.failed = true;
    return false;
  }
  ++c.consumed;
  if (!*more) c.enough = true;
  return *more;
}

// A consumer that may block, in an actor of its own observing the loop: the loop waits for its
// answer only when it is a few steps ahead (LoopRequest::observer_window).
caf::behavior consumer_actor(caf::event_based_actor* self, std::shared_ptr<Consumption> c) {
  return {
      [self, c](actors::StepReport& r) {
        bool more = true;
        for (const actors::ReportedStep& step : *r.steps) more = take(*c, step.values) && more;
        actors::StepAck ack{r.observer, runtime::ok_status(), !more, false};
        self->send(caf::actor_cast<caf::actor>(self->current_sender()), std::move(ack));
      },
  };
}

struct RunState {
  EstimatorActorSpec spec;
  caf::typed_response_promise<RunOutcome> promise;
  std::vector<caf::actor> hooks;
  std::vector<HookReply> wants;  // per hook, from its last reply
  std::shared_ptr<double> loss = std::make_shared<double>(0);
  // Training in a cluster: the global step after the last step, as its fetch read it. A failure
  // names it without asking the ps tasks, which may be what failed.
  std::shared_ptr<int64_t> step = std::make_shared<int64_t>(0);
  RunOutcome outcome;
  bool stop = false;
  bool done = false;
  bool restarting = false;  // the parts are being rebuilt: the old ones' failures are this one
  // Evaluation and prediction: what the consumer took, and the actor taking it.
  std::shared_ptr<Consumption> consumption;
  caf::actor consumer;
  std::string lost;  // the part that stopped, from its down message
};

using RunActor = caf::stateful_actor<RunState>;

int64_t global_step(const RunState& st) {
  if (st.spec.global_step) return st.spec.global_step();
  return st.spec.variables->read_int64_scalar("global_step").value_or(0);
}

// A failure's message, with the part that stopped if a down message named one.
std::string lost_part(const RunState& st) { return st.lost.empty() ? "" : " (" + st.lost + ")"; }

void watch(RunActor* self) {
  RunState& st = self->state;
  self->monitor(st.spec.parts.session);
  if (st.spec.parts.input) self->monitor(st.spec.parts.input);
  st.hooks.clear();
  for (HookActorSpec h : st.spec.hooks) {
    h.occasional_at = st.spec.fetches.size();
    caf::actor a = spawn_hook_actor(self->system(), h);
    self->monitor(a);
    st.hooks.push_back(a);
  }
  st.wants.assign(st.hooks.size(), HookReply{});
  st.lost.clear();
  if (st.consumption) {
    st.consumer = st.spec.consumer_blocks
                      ? self->system().spawn<caf::detached>(consumer_actor, st.consumption)
                      : self->system().spawn(consumer_actor, st.consumption);
    self->monitor(st.consumer);
  }
}

void unwatch(RunActor* self) {
  RunState& st = self->state;
  self->demonitor(st.spec.parts.session);
  if (st.spec.parts.input) self->demonitor(st.spec.parts.input);
  for (const caf::actor& h : st.hooks) {
    self->demonitor(h);
    self->send_exit(h, caf::exit_reason::user_shutdown);
  }
  st.hooks.clear();
  if (st.consumer) {
    self->demonitor(st.consumer);
    self->send_exit(st.consumer, caf::exit_reason::user_shutdown);
    st.consumer = nullptr;
  }
}

void finish(RunActor* self, Status status) {
  RunState& st = self->state;
  if (st.done) return;
  st.done = true;
  st.outcome.status = std::move(status);
  st.outcome.loss = *st.loss;
  if (st.consumption) st.outcome.consumed = st.consumption->consumed;
  unwatch(self);
  st.promise.deliver(st.outcome);
  self->quit();
}

void segment(RunActor* self);
void consume_all(RunActor* self);
void call_hooks(RunActor* self, HookPhase phase, std::function<void()> next);

// Runs (or runs on) what the run's mode does between its hooks' after_create_session and end.
void run_steps(RunActor* self) {
  if (self->state.spec.mode == Mode::kTrain) return segment(self);
  consume_all(self);
}

// A failure: restart from the latest checkpoint when the machinery failed and the budget allows.
void fail(RunActor* self, Status why) {
  RunState& st = self->state;
  if (st.done || st.restarting) return;
  // The consumer's own error (a metric refusing a batch, the caller's function failing) ends
  // the run with that error, whatever the loop reported after it.
  if (st.consumption && st.consumption->failed) return finish(self, st.consumption->error);
  // A run asked to stop ends, whatever failed meanwhile (a cluster stopping around it).
  if (!retryable(why) || st.outcome.restarts >= st.spec.max_restarts || !st.spec.restart ||
      st.outcome.stopped) {
    return finish(self, std::move(why));
  }
  ++st.outcome.restarts;
  if (st.consumption) st.outcome.consumed = st.consumption->consumed;
  const std::string what = st.spec.mode == Mode::kTrain  ? "training"
                           : st.spec.mode == Mode::kEval ? "evaluation"
                                                         : "prediction";
  std::string where = "after " + std::to_string(st.outcome.consumed) + " batches";
  if (st.spec.mode == Mode::kTrain) {
    // A replica that joined as its ps died has done no step, and may never have read one.
    const int64_t step = st.spec.step_fetch >= 0 ? *st.step : global_step(st);
    where = st.outcome.steps > 0 ? "at step " + std::to_string(step)
            : step > 0 ? "before its first step (global step " + std::to_string(step) + ")"
                       : "before its first step";
  }
  runtime::log_warning(what, " failed ", where, ": ", why.to_string());
  runtime::log_warning(st.spec.mode == Mode::kTrain
                           ? "restarting from " + (st.spec.restart_point ? st.spec.restart_point()
                                                                         : "the initial values")
                           : "restarting, reading on " + where,
                       " (restart ", st.outcome.restarts, " of ", st.spec.max_restarts, ")");
  unwatch(self);
  // Rebuilding blocks on the new session, and this actor may share the graph's worker: a
  // helper on a thread of its own does it.
  st.restarting = true;
  caf::actor helper = self->spawn<caf::detached>(
      [restart = st.spec.restart](caf::event_based_actor* h) -> caf::behavior {
        return {
            [h, restart](restart_atom, int64_t consumed) {
              auto parts = restart(consumed);
              h->quit();
              return parts.ok() ? Restarted{runtime::ok_status(), std::move(*parts)}
                                : Restarted{parts.status(), {}};
            },
        };
      });
  self->request(helper, caf::infinite, restart_atom::value, st.outcome.consumed)
      .then(
          [self, what](Restarted& r) {
            RunState& st = self->state;
            st.restarting = false;
            if (!r.status.ok()) return finish(self, r.status.with_context("restarting " + what));
            st.spec.parts = std::move(r.parts);
            st.stop = st.outcome.stopped;
            watch(self);
            call_hooks(self, HookPhase::kAfterCreateSession, [self] { run_steps(self); });
          },
          [self, what](caf::error& e) {
            self->state.restarting = false;
            finish(self,
                   runtime::internal_error("restarting ", what, ": ", self->system().render(e)));
          });
}

// Calls the hooks one after the other, in their order (TF's), then `next`. They all see the
// global step read once, as TF's hooks share one run context (in a cluster it is a question to
// a ps, and other replicas move it meanwhile).
void call_hooks_from(RunActor* self, HookPhase phase, int64_t step, size_t k,
                     std::function<void()> next) {
  RunState& st = self->state;
  if (k == st.hooks.size()) return next();
  self->request(st.hooks[k], caf::infinite, hook_atom::value, HookCall{phase, step})
      .then(
          [self, phase, step, k, next](HookReply& r) {
            RunState& st = self->state;
            if (!r.status.ok()) return fail(self, r.status);
            st.wants[k] = r;
            if (r.stop) st.stop = true;
            call_hooks_from(self, phase, step, k + 1, next);
          },
          [self, k](caf::error& e) {
            RunState& st = self->state;
            fail(self, runtime::unavailable(st.spec.hooks[k].name, " did not answer: ",
                                            self->system().render(e), lost_part(st)));
          });
}

void call_hooks(RunActor* self, HookPhase phase, std::function<void()> next) {
  call_hooks_from(self, phase, global_step(self->state), 0, std::move(next));
}

void end_run(RunActor* self) {
  call_hooks(self, HookPhase::kEnd, [self] { finish(self, runtime::ok_status()); });
}

// The loop's feed: the input's batch when the loop reads it itself, then the hooks' feeds.
std::function<Status(int64_t, runtime::FeedList*)> loop_feed(const EstimatorActorSpec& spec) {
  if (!spec.parts.read_input && !spec.feed) return nullptr;
  return [read = spec.parts.read_input, feed = spec.feed](int64_t, runtime::FeedList* f) {
    if (read) TROUPE_RETURN_IF_ERROR(read(f));
    return feed ? feed(f) : runtime::ok_status();
  };
}

// Runs the steps up to the next sync point (or the end) as one loop in the session actor.
void segment(RunActor* self) {
  RunState& st = self->state;
  if (st.spec.stop && *st.spec.stop) st.stop = st.outcome.stopped = true;
  const int64_t at = global_step(st);
  int64_t stop_at = st.spec.last_step;
  for (const HookReply& w : st.wants) stop_at = std::min(stop_at, w.stop_step);
  if (st.stop || stop_at <= at) return end_run(self);
  int64_t end = stop_at;
  for (const HookReply& w : st.wants) end = std::min(end, std::max(at + 1, w.next_sync_step));

  actors::LoopRequest loop;
  loop.steps = end == INT64_MAX ? INT64_MAX : end - at;
  loop.fetches = st.spec.fetches;
  loop.targets = {st.spec.train_op};
  loop.input = st.spec.parts.input;
  loop.input_feeds = st.spec.input_feeds;
  loop.batch_size = 0;
  loop.observers = st.hooks;
  loop.report_base = at + 1;
  loop.stop = st.spec.stop;
  if (st.spec.step_fetch >= 0) {
    loop.step_number_fetch = st.spec.step_fetch;
    loop.last_number = stop_at;
  }
  if (!st.spec.occasional_fetches.empty()) {
    loop.occasional_fetches = st.spec.occasional_fetches;
    loop.occasional = [at, every = st.spec.occasional_every](int64_t i) {
      return std::any_of(every.begin(), every.end(),
                         [&](int64_t e) { return (at + i + 1) % e == 0; });
    };
  }
  auto profile_error = std::make_shared<Status>();
  if (st.spec.profile_every > 0) {
    const int64_t every = st.spec.profile_every;
    loop.profile = [at, every](int64_t i) { return (at + i + 1) % every == 0; };
    loop.on_profile = [sink = st.spec.profile_sink, profile_error, at](
                          int64_t i, std::vector<actors::NodeTiming> t) {
      Status s = sink(at + i + 1, std::move(t));
      if (!s.ok() && profile_error->ok()) *profile_error = s;
    };
  }
  loop.feed = loop_feed(st.spec);
  *st.step = at;
  loop.on_step = [loss = st.loss, step = st.step, fetch = st.spec.step_fetch](
                     int64_t, const std::vector<runtime::Tensor>& v) {
    *loss = v[0].scalar_as_double();
    if (fetch >= 0) *step = static_cast<int64_t>(v[fetch].scalar_as_double()) + 1;
    return true;
  };
  self->request(st.spec.parts.session, caf::infinite, actors::loop_atom::value, std::move(loop))
      .then(
          [self, profile_error](actors::LoopResult& r) {
            RunState& st = self->state;
            st.outcome.steps += r.steps_done;
            if (!r.status.ok()) return fail(self, r.status);
            if (!profile_error->ok()) return fail(self, *profile_error);
            if (r.end_of_input) {
              st.outcome.end_of_input = st.stop = true;
              if (st.spec.on_end_of_input) st.spec.on_end_of_input();
            }
            if (r.stop_requested) st.stop = true;
            if (r.steps_done == 0 && !r.sync_requested) st.stop = true;
            call_hooks(self, HookPhase::kSync, [self] { segment(self); });
          },
          [self](caf::error& e) {
            fail(self, runtime::unavailable("the session did not answer: ",
                                            self->system().render(e), lost_part(self->state)));
          });
}

// Evaluation and prediction: one loop over the rest of the input. A consumer that does not
// block takes each step's values inside the session actor, as the loop's on_step, which costs
// no message; one that may block is the loop's first observer.
void consume_all(RunActor* self) {
  RunState& st = self->state;
  st.outcome.consumed = st.consumption->consumed;
  if (st.stop || st.outcome.consumed >= st.spec.max_steps) return end_run(self);
  actors::LoopRequest loop;
  loop.steps = st.spec.max_steps == INT64_MAX ? INT64_MAX : st.spec.max_steps - st.outcome.consumed;
  loop.fetches = st.spec.fetches;
  loop.input = st.spec.parts.input;
  loop.input_feeds = st.spec.input_feeds;
  loop.batch_size = 0;
  if (st.consumer) {
    loop.observers = {st.consumer};
  } else {
    loop.on_step = [c = st.consumption](int64_t, const std::vector<runtime::Tensor>& v) {
      return take(*c, v);
    };
  }
  loop.observers.insert(loop.observers.end(), st.hooks.begin(), st.hooks.end());
  loop.feed = loop_feed(st.spec);
  self->request(st.spec.parts.session, caf::infinite, actors::loop_atom::value, std::move(loop))
      .then(
          [self](actors::LoopResult& r) {
            RunState& st = self->state;
            if (st.consumption->failed) return fail(self, st.consumption->error);
            if (!r.status.ok()) return fail(self, r.status);
            st.outcome.end_of_input = r.end_of_input;
            end_run(self);
          },
          [self](caf::error& e) {
            fail(self, runtime::unavailable("the session did not answer: ",
                                            self->system().render(e), lost_part(self->state)));
          });
}

caf::behavior estimator_actor(RunActor* self, EstimatorActorSpec spec) {
  self->state.spec = std::move(spec);
  self->set_down_handler([self](caf::down_msg& d) {
    RunState& st = self->state;
    std::string what;
    if (d.source == st.spec.parts.session.address()) what = "the session actor";
    if (d.source == st.spec.parts.input.address()) what = "the input queue";
    if (d.source == st.consumer.address()) what = "the consumer";
    for (size_t k = 0; k < st.hooks.size(); ++k) {
      if (d.source == st.hooks[k].address()) what = st.spec.hooks[k].name;
    }
    if (!what.empty()) st.lost = what + " stopped: " + self->system().render(d.reason);
  });
  return {
      [self](start_run_atom) -> caf::typed_response_promise<RunOutcome> {
        RunState& st = self->state;
        st.promise = self->make_response_promise<RunOutcome>();
        if (st.spec.mode != Mode::kTrain) {
          st.consumption = std::make_shared<Consumption>();
          st.consumption->consume = st.spec.consume;
        }
        watch(self);
        call_hooks(self, HookPhase::kAfterCreateSession, [self] { run_steps(self); });
        return st.promise;
      },
      // A stop between segments ends the run at the next; one during a segment ends its loop.
      [self](actors::stop_atom) {
        RunState& st = self->state;
        st.stop = st.outcome.stopped = true;
        if (st.spec.stop) *st.spec.stop = true;
        if (st.spec.abandon_on_stop) {
          self->send(st.spec.parts.session, actors::stop_atom::value, actors::abandon_atom::value);
        } else {
          self->send(st.spec.parts.session, actors::stop_atom::value);
        }
      },
  };
}

}  // namespace

caf::actor spawn_estimator_actor(caf::actor_system& system, EstimatorActorSpec spec) {
  if (spec.blocks) return system.spawn<caf::detached>(estimator_actor, std::move(spec));
  return system.spawn(estimator_actor, std::move(spec));
}

}  // namespace troupe::estimators
