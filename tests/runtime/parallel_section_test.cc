// Parallel sections: background work waits while one is open, for no longer than it is told,
// and not at all when none is.
#include "runtime/parallel_section.h"

#include <doctest/doctest.h>

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

// Opens a section on another thread and closes it when told.
class OpenElsewhere {
 public:
  OpenElsewhere() {
    thread_ = std::thread([this] {
      runtime::ParallelSection busy;
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

TEST_CASE("a section that stays open delays background work by at most the limit") {
  OpenElsewhere section;
  const double waited = ms_yielding(/*max_wait_us=*/20000);
  CHECK(waited >= 19);
  CHECK(waited < 2000);
}
