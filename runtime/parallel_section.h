// Marks the spans in which a kernel keeps every core busy (a GEMM that OpenBLAS runs on all its
// threads), so that background work with slack, such as an input pipeline stacking a batch ahead
// of the consumer, can step aside for them. A background thread that preempts one of the
// kernel's threads stalls all of them: the kernel ends when its slowest thread does. A kernel on
// fewer threads than the cores this process may use opens no section: the background thread has
// a core of its own, and yielding there would only spin it (OpenBLAS at one thread on two cores:
// the input thread spent 0.6 of a core in sched_yield).
//
//   { runtime::ParallelSection busy(openblas_get_num_threads()); cblas_sgemm(...); }
//   runtime::yield_to_parallel_sections();                      // background work, every few us
//
// Thread-safe; sections may nest and overlap across threads. Costs two atomic operations a
// section and one load a yield when none is open.
#pragma once

namespace troupe::runtime {

class ParallelSection {
 public:
  // `threads`: how many the kernel runs on.
  explicit ParallelSection(int threads);
  ~ParallelSection();
  ParallelSection(const ParallelSection&) = delete;
  ParallelSection& operator=(const ParallelSection&) = delete;

 private:
  bool open_;
};

// The cores this process may run on: its main thread's CPU affinity when first asked, as
// taskset sets it.
int available_cores();

// Lets the calling thread run on every one of those cores: a thread that a kernel starts from
// the graph's worker, which is pinned to one core while training (actors/graph_core.h), would
// otherwise share that core with the worker.
void run_on_available_cores();

// Gives the CPU up while a parallel section is open, for at most `max_wait_us` in all, so that
// background work is delayed, never starved, when sections follow one another without a gap.
// Returns at once when none is open.
void yield_to_parallel_sections(int max_wait_us = 500);

}  // namespace troupe::runtime
