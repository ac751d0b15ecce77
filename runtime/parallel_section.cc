#include "runtime/parallel_section.h"

#include <sched.h>

#include <atomic>
#include <chrono>

namespace troupe::runtime {

namespace {
std::atomic<int> open_sections{0};
}  // namespace

ParallelSection::ParallelSection() { open_sections.fetch_add(1, std::memory_order_relaxed); }

ParallelSection::~ParallelSection() { open_sections.fetch_sub(1, std::memory_order_relaxed); }

void yield_to_parallel_sections(int max_wait_us) {
  if (open_sections.load(std::memory_order_relaxed) == 0) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(max_wait_us);
  // sched_yield, not a sleep: the section usually ends within tens of microseconds, and a
  // timer's wake-up would cost more than that.
  while (open_sections.load(std::memory_order_relaxed) > 0 &&
         std::chrono::steady_clock::now() < until) {
    sched_yield();
  }
}

}  // namespace troupe::runtime
