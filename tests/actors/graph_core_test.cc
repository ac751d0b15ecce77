// The graph's core: while reserved, the worker that runs actors stays on one CPU and threads
// the actor system starts, or that ask, run on the others; released, everything gets its CPUs
// back. With fewer than two CPUs, or two worker threads, nothing is pinned.
#include "actors/graph_core.h"

#include <doctest/doctest.h>
#include <sched.h>

#include <caf/all.hpp>

#include <chrono>
#include <set>

#include "actors/runtime_system.h"

using namespace troupe;

namespace {

using cpus_atom = caf::atom_constant<caf::atom("cpus")>;

std::set<int> my_cpus() {
  cpu_set_t mask;
  REQUIRE(sched_getaffinity(0, sizeof mask, &mask) == 0);
  std::set<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &mask)) cpus.insert(c);
  }
  return cpus;
}

caf::behavior cpu_reporter(caf::event_based_actor*) {
  return {[](cpus_atom) {
    const std::set<int> cpus = my_cpus();
    return std::vector<int>(cpus.begin(), cpus.end());
  }};
}

// The CPUs an actor of `system` may run on: on the worker, or on a thread of its own.
template <caf::spawn_options Options = caf::no_spawn_options>
std::set<int> actor_cpus(caf::actor_system& system) {
  caf::scoped_actor self{system};
  caf::actor a = system.spawn<Options>(cpu_reporter);
  std::set<int> cpus;
  self->request(a, std::chrono::seconds(10), cpus_atom::value)
      .receive([&](std::vector<int>& v) { cpus.insert(v.begin(), v.end()); }, [](caf::error&) {});
  self->send_exit(a, caf::exit_reason::user_shutdown);
  return cpus;
}

// Puts the calling thread's CPUs back as they were when it was made.
struct RestoreCpus {
  cpu_set_t mask;
  RestoreCpus() { sched_getaffinity(0, sizeof mask, &mask); }
  ~RestoreCpus() { sched_setaffinity(0, sizeof mask, &mask); }
};

}  // namespace

TEST_CASE("reserving the graph's core pins the worker and moves other threads off it") {
  RestoreCpus restore;
  actors::Runtime rt;
  const std::set<int> all = actor_cpus(rt.system());
  REQUIRE(!all.empty());
  CHECK(actors::graph_core() == -1);
  {
    actors::GraphCore reserved = actors::GraphCore::reserve();
    const int core = actors::graph_core();
    if (all.size() < 2) {
      CHECK(core == -1);
      CHECK(actor_cpus(rt.system()) == all);
      return;
    }
    REQUIRE(all.count(core) == 1);
    CHECK(actor_cpus(rt.system()) == std::set<int>{core});
    std::set<int> others = all;
    others.erase(core);
    CHECK(actor_cpus<caf::detached>(rt.system()) == others);  // a thread started now
    actors::leave_graph_core();
    CHECK(my_cpus() == others);
    {
      // A second reservation changes nothing and its end gives nothing back yet.
      actors::GraphCore again = actors::GraphCore::reserve();
      CHECK(actors::graph_core() == core);
    }
    CHECK(actors::graph_core() == core);
    CHECK(actor_cpus(rt.system()) == std::set<int>{core});
  }
  CHECK(actors::graph_core() == -1);
  CHECK(actor_cpus(rt.system()) == all);
}

TEST_CASE("with two workers, none is the graph's: a reservation pins nothing") {
  actors::Runtime rt({.worker_threads = 2});
  const std::set<int> all = actor_cpus(rt.system());
  actors::GraphCore reserved = actors::GraphCore::reserve();
  CHECK(actors::graph_core() == -1);
  CHECK(actor_cpus(rt.system()) == all);
}

TEST_CASE(
    "a runtime started during a reservation keeps all CPUs for its worker, and ends the pinning: "
    "with two workers, none is the graph's") {
  actors::Runtime first;
  const std::set<int> all = actor_cpus(first.system());
  actors::GraphCore reserved = actors::GraphCore::reserve();
  actors::Runtime second;
  CHECK(actor_cpus(second.system()) == all);
  CHECK(actors::graph_core() == -1);
  CHECK(actor_cpus(first.system()) == all);
}

TEST_CASE("a moved reservation is released once") {
  actors::Runtime rt;
  const std::set<int> all = actor_cpus(rt.system());
  {
    actors::GraphCore a = actors::GraphCore::reserve();
    actors::GraphCore b = std::move(a);
    actors::GraphCore c;
    c = std::move(b);
    if (all.size() >= 2) CHECK(actors::graph_core() >= 0);
  }
  CHECK(actors::graph_core() == -1);
  CHECK(actor_cpus(rt.system()) == all);
}
