// Parallel sections: background work waits while one is open, for no longer than it is told,
// and not at all when none is, or when the kernel leaves a core free; a kernel's helper thread
// leaves the one core of the worker that started it.
#include "runtime/parallel_section.h"

#include <doctest/doctest.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

using namespace troupe;
using Clock = std::chrono::steady_clock;

namespace {

// How long yield_to_parallel_sections(max_wait_us) kept the caller, in milliseconds.
double ms_yielding(int max_wait_us) {
  const auto start = Clock::now();
  runtime::yield_to_parallel_sections(max_wait_us);
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Opens a section of `threads` on another thread and closes it when told.
class OpenElsewhere {
 public:
  explicit OpenElsewhere(int threads = runtime::available_cores()) {
    thread_ = std::thread([this, threads] {
      runtime::ParallelSection busy(threads);
      opened_ = true;
      while (!close_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    while (!opened_) std::this_thread::yield();
  }
  void close() {
    close_ = true;
    if (thread_.joinable()) thread_.join();
  }
  ~OpenElsewhere() { close(); }

 private:
  std::atomic<bool> opened_{false}, close_{false};
  std::thread thread_;
};

}  // namespace

TEST_CASE("yielding to parallel sections returns at once when none is open") {
  CHECK(ms_yielding(/*max_wait_us=*/3000000) < 1000);
}

TEST_CASE("background work waits while a section is open, until it closes") {
  OpenElsewhere section;
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    section.close();
  });
  const double waited = ms_yielding(/*max_wait_us=*/5000000);
  closer.join();
  CHECK(waited >= 40);
  CHECK(waited < 4000);  // it returned when the section closed, not at its limit
}

TEST_CASE("overlapping sections: the wait lasts until the last one closes") {
  OpenElsewhere first;
  std::optional<OpenElsewhere> second(std::in_place);
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    first.close();
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
    second.reset();
  });
  const double waited = ms_yielding(/*max_wait_us=*/5000000);
  closer.join();
  CHECK(waited >= 50);
  CHECK(waited < 4000);
}

TEST_CASE("a kernel on fewer threads than this process's cores holds no background work") {
  cpu_set_t set;
  REQUIRE(sched_getaffinity(getpid(), sizeof(set), &set) == 0);
  CHECK(runtime::available_cores() == CPU_COUNT(&set));
  if (runtime::available_cores() == 1) return;  // one thread takes every core there is
  OpenElsewhere section(runtime::available_cores() - 1);
  CHECK(ms_yielding(/*max_wait_us=*/3000000) < 1000);
  // Counted for the process from a thread pinned to one core, as the graph's worker is while
  // training: the cores it may not use are still free for background work.
  std::thread pinned([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) {
        CPU_SET(c, &one);
        break;
      }
    }
    CHECK(sched_setaffinity(0, sizeof(one), &one) == 0);
    CHECK(runtime::available_cores() == CPU_COUNT(&set));
  });
  pinned.join();
}

TEST_CASE("a section that stays open delays background work by at most the limit") {
  OpenElsewhere section;
  const double waited = ms_yielding(/*max_wait_us=*/20000);
  CHECK(waited >= 19);
  CHECK(waited < 2000);
}

TEST_CASE("a thread started from a thread pinned to one core runs on every core again") {
  if (runtime::available_cores() < 2) return;  // nothing to spread over
  // The graph's worker is pinned to one core while training; a kernel's helper thread inherits
  // that core, and two threads on it run no faster than one.
  int cpus_after = 0, cpus_inherited = 0;
  std::thread pinned([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
    std::thread helper([&] {
      cpu_set_t set;
      REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
      cpus_inherited = CPU_COUNT(&set);
      runtime::run_on_available_cores();
      REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
      cpus_after = CPU_COUNT(&set);
    });
    helper.join();
  });
  pinned.join();
  CHECK(cpus_inherited == 1);
  CHECK(cpus_after == runtime::available_cores());
}
