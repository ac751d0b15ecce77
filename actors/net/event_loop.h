// EventLoop: the one wait of a thread that serves sockets, an epoll set and the eventfd that
// wakes it, shared by each of a DataServer's threads (net/data_server.h) and the channels'
// poller (net/data_channel.h). Event driven, as CAF's multiplexer: a thread waits on all its
// sockets at once and handles what is ready.
//
//   auto loop = EventLoop::open();                  // Result<std::shared_ptr<EventLoop>>
//   (*loop)->add(fd, /*id=*/2, EPOLLIN);
//   std::vector<EventLoop::Event> ready;
//   (*loop)->wait(Clock::now() + 1s, &ready);       // {id, EPOLLIN...}; {kWake, ...} when woken
//   (*loop)->wake();                                // from any thread
//
// One thread waits; add, modify, remove and wake may be called from any thread (epoll's own).
// Shared, so that what wakes it (a reply given later) may outlive the thread that waited.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/status.h"

namespace troupe::actors::net {

class EventLoop {
 public:
  using Clock = std::chrono::steady_clock;
  // The id a wake-up is reported with; sockets take other ids.
  static constexpr uint64_t kWake = 0;
  struct Event {
    uint64_t id;
    uint32_t events;  // EPOLLIN, EPOLLOUT, EPOLLHUP, EPOLLERR
  };

  static runtime::Result<std::shared_ptr<EventLoop>> open();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  runtime::Status add(int fd, uint64_t id, uint32_t events);
  // Waits for `events` on `fd` from now on (0: for nothing, as for a socket that is done).
  void modify(int fd, uint64_t id, uint32_t events);
  void remove(int fd);
  // wait() returns, reporting kWake.
  void wake();
  // Until an event or `until` (a millisecond later at most): what is ready, at most 64. A wake-up
  // is drained before it is reported. An error only when epoll itself fails.
  runtime::Status wait(Clock::time_point until, std::vector<Event>* ready);

 private:
  EventLoop(int epoll_fd, int wake_fd) : epoll_fd_(epoll_fd), wake_fd_(wake_fd) {}
  const int epoll_fd_;
  const int wake_fd_;  // an eventfd
};

}  // namespace troupe::actors::net
