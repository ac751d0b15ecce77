// Tells the CPU that the calling thread is polling for a value another thread will write, so
// that the poll loop yields the core's shared resources and leaves it without a pipeline flush.
//
//   while (queue.empty() && std::chrono::steady_clock::now() < until) runtime::cpu_relax();
//
// Used where a thread polls briefly before it blocks (actors/scheduler.h, actors/session.h).
#pragma once

namespace troupe::runtime {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace troupe::runtime
