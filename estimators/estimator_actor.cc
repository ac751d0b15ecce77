#include "estimators/estimator_actor.h"

#include <algorithm>
#include <cstdio>

#include "actors/messages.h"
#include "runtime/log.h"

namespace troupe::estimators {

using runtime::Status;

namespace {

// Failures of the machinery, not of the model or the data: worth a restart.
bool retryable(const Status& s) {
  return s.code() == runtime::Code::kUnavailable || s.code() == runtime::Code::kAborted ||
         s.code() == runtime::Code::kInternal;
}

struct RunState {
  EstimatorActorSpec spec;
  caf::typed_response_promise<TrainOutcome> promise;
  std::vector<caf::actor> hooks;
  std::vector<HookReply> wants;  // per hook, from its last reply
  std::shared_ptr<double> loss = std::make_shared<double>(0);
  TrainOutcome outcome;
  bool stop = false;
  bool done = false;
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
  self->monitor(st.spec.parts.input);
  st.hooks.clear();
  for (const HookActorSpec& h : st.spec.hooks) {
    caf::actor a = spawn_hook_actor(self->system(), h);
    self->monitor(a);
    st.hooks.push_back(a);
  }
  st.wants.assign(st.hooks.size(), HookReply{});
  st.lost.clear();
}

void unwatch(RunActor* self) {
  RunState& st = self->state;
  self->demonitor(st.spec.parts.session);
  self->demonitor(st.spec.parts.input);
  for (const caf::actor& h : st.hooks) {
    self->demonitor(h);
    self->send_exit(h, caf::exit_reason::user_shutdown);
  }
  st.hooks.clear();
}

void finish(RunActor* self, Status status) {
  RunState& st = self->state;
  if (st.done) return;
  st.done = true;
  st.outcome.status = std::move(status);
  st.outcome.loss = *st.loss;
  unwatch(self);
  st.promise.deliver(st.outcome);
  self->quit();
}

void segment(RunActor* self);
void call_hooks(RunActor* self, HookPhase phase, std::function<void()> next);

// A failure: restart from the latest checkpoint when the machinery failed and the budget allows.
void fail(RunActor* self, Status why) {
  RunState& st = self->state;
  if (st.done) return;
  // A run asked to stop ends, whatever failed meanwhile (a cluster stopping around it).
  if (!retryable(why) || st.outcome.restarts >= st.spec.max_restarts || !st.spec.restart ||
      st.outcome.stopped) {
    return finish(self, std::move(why));
  }
  ++st.outcome.restarts;
  runtime::log_warning("training failed at step ", global_step(st), ": ", why.to_string());
  runtime::log_warning("restarting from ",
                       st.spec.restart_point ? st.spec.restart_point() : "the initial values",
                       " (restart ", st.outcome.restarts, " of ", st.spec.max_restarts, ")");
  unwatch(self);
  auto parts = st.spec.restart();
  if (!parts.ok()) return finish(self, parts.status().with_context("restarting training"));
  st.spec.parts = *parts;
  st.stop = st.outcome.stopped;
  watch(self);
  call_hooks(self, HookPhase::kAfterCreateSession, [self] { segment(self); });
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

// Runs the steps up to the next sync point (or the end) as one loop in the session actor.
void segment(RunActor* self) {
  RunState& st = self->state;
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
  if (st.spec.step_fetch >= 0) {
    loop.step_number_fetch = st.spec.step_fetch;
    loop.last_number = stop_at;
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
  if (st.spec.feed) {
    loop.feed = [feed = st.spec.feed](int64_t, runtime::FeedList* f) { return feed(f); };
  }
  loop.on_step = [loss = st.loss](int64_t, const std::vector<runtime::Tensor>& v) {
    *loss = v[0].scalar_as_double();
    return true;
  };
  self->request(st.spec.parts.session, caf::infinite, actors::loop_atom::value, std::move(loop))
      .then(
          [self, profile_error](actors::LoopResult& r) {
            RunState& st = self->state;
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

caf::behavior estimator_actor(RunActor* self, EstimatorActorSpec spec) {
  self->state.spec = std::move(spec);
  self->set_down_handler([self](caf::down_msg& d) {
    RunState& st = self->state;
    std::string what;
    if (d.source == st.spec.parts.session.address()) what = "the session actor";
    if (d.source == st.spec.parts.input.address()) what = "the input queue";
    for (size_t k = 0; k < st.hooks.size(); ++k) {
      if (d.source == st.hooks[k].address()) what = st.spec.hooks[k].name;
    }
    if (!what.empty()) st.lost = what + " stopped: " + self->system().render(d.reason);
  });
  return {
      [self](train_atom) -> caf::typed_response_promise<TrainOutcome> {
        RunState& st = self->state;
        st.promise = self->make_response_promise<TrainOutcome>();
        st.outcome.first_step = global_step(st);
        watch(self);
        call_hooks(self, HookPhase::kAfterCreateSession, [self] { segment(self); });
        return st.promise;
      },
      // A stop between segments ends the run at the next; one during a segment ends its loop.
      [self](actors::stop_atom) {
        RunState& st = self->state;
        st.stop = st.outcome.stopped = true;
        self->send(st.spec.parts.session, actors::stop_atom::value);
      },
  };
}

}  // namespace

caf::actor spawn_estimator_actor(caf::actor_system& system, EstimatorActorSpec spec) {
  return system.spawn<caf::detached>(estimator_actor, std::move(spec));
}

}  // namespace troupe::estimators
