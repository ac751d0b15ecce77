#include "estimators/selection/trials.h"

#include <algorithm>
#include <exception>
#include <string>
#include <thread>

#include "actors/messages.h"
#include "actors/runtime_system.h"

namespace troupe::estimators {

namespace {

using Trial = std::function<void(size_t)>;

struct Supervisor {
  size_t n = 0;
  size_t next = 0;
  size_t running = 0;
  std::string first_error;
  caf::response_promise done;
};

caf::behavior trial_actor(caf::event_based_actor*, const Trial* trial) {
  return {[trial](actors::run_atom, uint64_t i) -> std::string {
    try {
      (*trial)(static_cast<size_t>(i));
      return {};
    } catch (const std::exception& e) {
      return "trial " + std::to_string(i) + " threw: " + e.what();
    }
  }};
}

// Gives `worker` the next trial, or retires it; the last trial's end answers the run.
void feed(caf::stateful_actor<Supervisor>* self, caf::actor worker) {
  auto& st = self->state;
  if (st.next == st.n) {
    self->send_exit(worker, caf::exit_reason::user_shutdown);
    if (st.running == 0) st.done.deliver(st.first_error);
    return;
  }
  const uint64_t i = st.next++;
  ++st.running;
  self->request(worker, caf::infinite, actors::run_atom::value, i)
      .then([self, worker](const std::string& error) {
        --self->state.running;
        if (self->state.first_error.empty()) self->state.first_error = error;
        feed(self, worker);
      });
}

caf::behavior supervisor(caf::stateful_actor<Supervisor>* self, size_t n, size_t parallel,
                         const Trial* trial) {
  self->state.n = n;
  return {[=](actors::run_atom) {
    self->state.done = self->make_response_promise();
    // Trials block, so each worker is a detached actor with a thread of its own.
    for (size_t w = 0; w < parallel; ++w)
      feed(self, self->spawn<caf::detached>(trial_actor, trial));
    return self->state.done;
  }};
}

}  // namespace

size_t parallel_trials(int n_jobs) {
  if (n_jobs > 0) return static_cast<size_t>(n_jobs);
  return std::max(1u, std::thread::hardware_concurrency());
}

runtime::Status run_trials(size_t n, size_t parallel, const Trial& trial) {
  if (n == 0) return runtime::ok_status();
  actors::Runtime rt;
  caf::actor boss = rt.system().spawn(supervisor, n, std::clamp<size_t>(parallel, 1, n), &trial);
  caf::scoped_actor self{rt.system()};
  std::string error = "the trial supervisor ended without an answer";
  self->request(boss, caf::infinite, actors::run_atom::value)
      .receive([&](const std::string& e) { error = e; },
               [&](const caf::error& e) { error = rt.system().render(e); });
  self->send_exit(boss, caf::exit_reason::user_shutdown);
  if (!error.empty()) return runtime::internal_error(error);
  return runtime::ok_status();
}

}  // namespace troupe::estimators
