#include "runtime/parallel_section.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>

namespace troupe::runtime {

namespace {
std::atomic<int> open_sections{0};
}  // namespace

namespace {
// The main thread's CPUs, not the caller's: a GEMM runs on the graph's worker, which is pinned
// to one core while training (actors/graph_core.h). Read once, off the GEMMs' path; empty when
// unknown.
const cpu_set_t& process_cores() {
  static const cpu_set_t set = [] {
    cpu_set_t s;
    if (sched_getaffinity(getpid(), sizeof(s), &s) != 0) CPU_ZERO(&s);
    return s;
  }();
  return set;
}
}  // namespace

int available_cores() {
  static const int cores = std::max(1, CPU_COUNT(&process_cores()));
  return cores;
}

void run_on_available_cores() {
  if (CPU_COUNT(&process_cores()) > 0) {
    sched_setaffinity(0, sizeof(cpu_set_t), &process_cores());
  }
}

ParallelSection::ParallelSection(int threads) : open_(threads >= available_cores()) {
  if (open_) open_sections.fetch_add(1, std::memory_order_relaxed);
}

ParallelSection::~ParallelSection() {
  if (open_) open_sections.fetch_sub(1, std::memory_order_relaxed);
}

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
