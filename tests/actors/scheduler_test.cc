// The quiet scheduler: actors run on CAF's work-stealing workers with no per-job logger lookup,
// messages all arrive across two workers, whether idle workers park at once or poll first, and
// the system shuts down with nothing left running.
#include "actors/scheduler.h"

#include <doctest/doctest.h>

#include <caf/all.hpp>

#include <chrono>
#include <thread>

#include "actors/runtime_system.h"

using namespace troupe;

namespace {

using probe_atom = caf::atom_constant<caf::atom("probe")>;

// Answers whether this worker thread had no logger when the message's job started, then
// spawns an actor, which is what sets the thread's logger in CAF, for the next job to find.
caf::behavior prober(caf::event_based_actor* self) {
  return {[self](probe_atom) {
    const bool quiet = caf::logger::current_logger() == nullptr;
    self->spawn([](caf::event_based_actor* child) { child->quit(); });
    return quiet;
  }};
}

// Passes a count on down a chain; the last one sends it to `sink`.
caf::behavior forwarder(caf::event_based_actor* self, caf::actor next, caf::actor sink) {
  return {[self, next, sink](int hops) { self->send(next ? next : sink, hops + 1); }};
}

void check_chains(actors::RuntimeOptions options) {
  actors::Runtime rt(options);
  {
    caf::scoped_actor self{rt.system()};
    std::vector<caf::actor> heads;
    for (int c = 0; c < 8; ++c) {
      caf::actor next;
      for (int i = 0; i < 50; ++i) next = rt.system().spawn(forwarder, next, caf::actor(self));
      heads.push_back(next);
    }
    for (int round = 0; round < 20; ++round) {
      for (const caf::actor& h : heads) self->send(h, 0);
    }
    int answers = 0;
    self->receive_for(answers, 8 * 20)([](int hops) { CHECK(hops == 50); });
    CHECK(answers == 8 * 20);
  }
  for (int i = 0; i < 1000 && rt.running_actors() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(rt.running_actors() == 0);
}

}  // namespace

TEST_CASE("a job runs on a worker whose logger pointer the quiet loop cleared") {
  actors::Runtime rt;
  caf::scoped_actor self{rt.system()};
  // CAF's own worker loop sets the pointer when it starts; the spawn in each probe sets it again.
  // A fresh prober per probe: a message to an actor still inside its job (it may take the next
  // message in the same resume, under load) would find the pointer its own spawn had just set.
  for (int i = 0; i < 3; ++i) {
    caf::actor p = rt.system().spawn(prober);
    bool quiet = false;
    self->request(p, std::chrono::seconds(10), probe_atom::value)
        .receive([&](bool q) { quiet = q; }, [](caf::error&) {});
    CHECK(quiet);
    self->send_exit(p, caf::exit_reason::user_shutdown);
  }
}

TEST_CASE("chains of actors on two quiet workers deliver every message and shut down") {
  // Workers that park at once, and workers that poll for their next job first (a server's).
  for (const auto spin : {std::chrono::microseconds(0), std::chrono::microseconds(300)}) {
    INFO("idle spin ", spin.count(), " us");
    check_chains({.worker_threads = 2, .idle_spin = spin});
  }
}

TEST_CASE("the idle spin a runtime is given reaches its workers' configuration") {
  actors::Runtime rt({.idle_spin = std::chrono::microseconds(300)});
  CHECK(caf::get_or(rt.system().config(), actors::kIdleSpinKey, caf::timespan{0}) ==
        std::chrono::microseconds(300));
  actors::Runtime plain;
  CHECK(caf::get_or(plain.system().config(), actors::kIdleSpinKey, caf::timespan{1}) ==
        caf::timespan{0});
}
