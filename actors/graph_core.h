// Keeps the CAF worker that runs the graph on a core of its own while background work (a queue
// runner stacking batches, its readers decoding) runs beside training, and the background
// threads on the other cores.
//
//   actors::GraphCore core = actors::GraphCore::reserve();   // for as long as a runner lives
//   actors::leave_graph_core();                               // a background thread, first thing
//
// Why: on two cores a training step keeps the graph's worker busy all the time and OpenBLAS's
// second thread busy during GEMMs; between GEMMs that thread only spins. A runner that lands on
// the worker's core delays the whole step, and the scheduler put it there often enough to cost
// 9-13% of training against batches already in memory (bench/input_bench). Beside OpenBLAS's
// second thread, stepping aside while a GEMM runs (runtime/parallel_section.h), it costs 1-7%
// (a median of 3% over 14 runs).
//
// The worker stays on the core it is on when the first reservation is made and gets its own
// CPUs back when the last one ends. Nothing happens with fewer than two CPUs or unless exactly
// one quiet worker (scheduler.h) runs in the process: with several, none of them is the
// graph's. Every thread CAF starts while a reservation lives leaves the core (GraphCoreHook),
// so detached actors spawned from the worker do not inherit its one CPU. Thread-safe.
#pragma once

#include <caf/thread_hook.hpp>

#include <chrono>

namespace troupe::actors {

class GraphCore {
 public:
  static GraphCore reserve();
  GraphCore() = default;  // holds nothing
  GraphCore(GraphCore&& other) noexcept : held_(other.held_) { other.held_ = false; }
  GraphCore& operator=(GraphCore&& other) noexcept;
  ~GraphCore();
  GraphCore(const GraphCore&) = delete;
  GraphCore& operator=(const GraphCore&) = delete;

 private:
  bool held_ = false;
};

// Moves the calling thread off the graph's core while one is reserved; otherwise does nothing.
void leave_graph_core();
// The graph's core while one is reserved, else -1.
int graph_core();

// The quiet worker loop (scheduler.h) registers its thread for as long as it runs. A worker
// that registers while another is pinned ends the reservation's pinning: with several workers,
// none of them is the graph's.
void register_worker_thread();
void unregister_worker_thread();
// How many quiet workers have registered in this process so far, and a wait (up to `limit`)
// until `count` have: a Runtime waits for its own, so that a reservation made next sees them all
// (on a loaded machine a worker thread may not have run yet).
int workers_registered();
void await_workers(int count, std::chrono::milliseconds limit);

// Runs leave_graph_core() in every thread the actor system starts.
class GraphCoreHook : public caf::thread_hook {
 public:
  void init(caf::actor_system&) override {}
  void thread_started() override { leave_graph_core(); }
  void thread_terminates() override {}
};

}  // namespace troupe::actors
