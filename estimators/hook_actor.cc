#include "estimators/hook_actor.h"

#include <boost/core/demangle.hpp>

#include <exception>
#include <typeinfo>

#include "actors/messages.h"

namespace troupe::estimators {

namespace {

struct HookState {
  HookActorSpec spec;
  int64_t global_step = 0;  // at the last call (fixed_step)
};

using HookActor = caf::stateful_actor<HookState>;

HookReply call(HookActor* self, const HookCall& c) {
  HookState& st = self->state;
  st.global_step = c.global_step;
  HookContext ctx{c.global_step, *st.spec.variables, st.spec.model_dir};
  SessionRunHook& hook = *st.spec.hook;
  HookReply reply;
  switch (c.phase) {
    case HookPhase::kAfterCreateSession:
      reply.status = hook.after_create_session(ctx);
      break;
    case HookPhase::kSync:
      reply.status = hook.at_sync(ctx);
      break;
    case HookPhase::kEnd:
      reply.status = hook.end(ctx);
      break;
  }
  if (!reply.status.ok()) reply.status = reply.status.with_context(st.spec.name);
  reply.stop = ctx.stop;
  reply.stop_step = hook.stop_step();
  reply.next_sync_step = hook.next_sync_step(c.global_step);
  return reply;
}

caf::behavior hook_actor(HookActor* self, HookActorSpec spec) {
  self->state.spec = std::move(spec);
  const std::string name = self->state.spec.name;
  self->set_exception_handler([name](std::exception_ptr& e) -> caf::error {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      return caf::make_error(caf::sec::runtime_error, name + " threw: " + x.what());
    } catch (...) {
      return caf::make_error(caf::sec::runtime_error, name + " threw a non-exception");
    }
  });
  return {
      [self](actors::StepReport& r) {
        HookState& st = self->state;
        actors::StepAck ack{r.observer};
        // Every step of the report, as TF calls after_run after each: a stop or sync asked at
        // one still lets the hook see the steps that ran meanwhile; an error ends it there.
        for (const actors::ReportedStep& step : *r.steps) {
          StepContext sc(st.spec.fixed_step ? st.global_step : step.number, step.values,
                         st.spec.offset, st.spec.occasional_at);
          ack.status = st.spec.hook->after_run(sc);
          ack.stop = ack.stop || sc.stop_requested();
          ack.sync = ack.sync || sc.sync_requested();
          if (!ack.status.ok()) {
            ack.status = ack.status.with_context(st.spec.name);
            break;
          }
        }
        self->send(caf::actor_cast<caf::actor>(self->current_sender()), std::move(ack));
      },
      [self](hook_atom, HookCall& c) { return call(self, c); },
  };
}

}  // namespace

caf::actor spawn_hook_actor(caf::actor_system& system, HookActorSpec spec) {
  if (spec.hook->blocks()) return system.spawn<caf::detached>(hook_actor, std::move(spec));
  return system.spawn(hook_actor, std::move(spec));
}

std::string hook_name(const SessionRunHook& hook) {
  std::string n = boost::core::demangle(typeid(hook).name());
  const size_t colon = n.rfind("::");
  return colon == std::string::npos ? n : n.substr(colon + 2);
}

}  // namespace troupe::estimators
