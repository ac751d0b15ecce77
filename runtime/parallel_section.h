// Marks the spans in which a kernel keeps every core busy (a GEMM that OpenBLAS runs on all its
// threads), so that background work with slack, such as an input pipeline stacking a batch ahead
// of the consumer, can step aside for them. A background thread that preempts one of the
// kernel's threads stalls all of them: the kernel ends when its slowest thread does.
//
//   { runtime::ParallelSection busy; cblas_sgemm(...); }      // a kernel, around the threaded call
//   runtime::yield_to_parallel_sections();                      // background work, every few us
//
// Thread-safe; sections may nest and overlap across threads. Costs two atomic operations a
// section and one load a yield when none is open.
#pragma once

namespace troupe::runtime {

class ParallelSection {
 public:
  ParallelSection();
  ~ParallelSection();
  ParallelSection(const ParallelSection&) = delete;
  ParallelSection& operator=(const ParallelSection&) = delete;
};

// Gives the CPU up while a parallel section is open, for at most `max_wait_us` in all, so that
// background work is delayed, never starved, when sections follow one another without a gap.
// Returns at once when none is open.
void yield_to_parallel_sections(int max_wait_us = 500);

}  // namespace troupe::runtime
