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
        StepContext sc(st.spec.fixed_step ? st.global_step : r.number, *r.values, st.spec.offset);
        runtime::Status s = st.spec.hook->after_run(sc);
        if (!s.ok()) s = s.with_context(st.spec.name);
        self->send(
            caf::actor_cast<caf::actor>(self->current_sender()),
            actors::StepAck{r.observer, std::move(s), sc.stop_requested(), sc.sync_requested()});
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
