#include "actors/net/event_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "actors/net/socket.h"

namespace troupe::actors::net {

namespace {
constexpr int kMaxEvents = 64;
}  // namespace

runtime::Result<std::shared_ptr<EventLoop>> EventLoop::open() {
  const int epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  const int wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  const std::string why = errno_text();
  if (epoll_fd < 0 || wake_fd < 0) {
    if (epoll_fd >= 0) ::close(epoll_fd);
    if (wake_fd >= 0) ::close(wake_fd);
    return runtime::resource_exhausted("cannot wait on connections: ", why);
  }
  std::shared_ptr<EventLoop> loop(new EventLoop(epoll_fd, wake_fd));
  TROUPE_RETURN_IF_ERROR(loop->add(wake_fd, kWake, EPOLLIN));
  return loop;
}

EventLoop::~EventLoop() {
  ::close(epoll_fd_);
  ::close(wake_fd_);
}

runtime::Status EventLoop::add(int fd, uint64_t id, uint32_t events) {
  epoll_event e{events, {.u64 = id}};
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &e) != 0) {
    return runtime::resource_exhausted("epoll: ", errno_text());
  }
  return runtime::ok_status();
}

void EventLoop::modify(int fd, uint64_t id, uint32_t events) {
  epoll_event e{events, {.u64 = id}};
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &e);
}

void EventLoop::remove(int fd) { ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr); }

void EventLoop::wake() {
  const uint64_t one = 1;
  if (::write(wake_fd_, &one, sizeof one) != sizeof one) {
    // Only a full counter refuses, and every wait that reports the wake-up reads it to zero.
  }
}

runtime::Status EventLoop::wait(Clock::time_point until, std::vector<Event>* ready) {
  ready->clear();
  epoll_event events[kMaxEvents];
  const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
  const int n = ::epoll_wait(epoll_fd_, events, kMaxEvents,
                             static_cast<int>(std::max<int64_t>(0, wait.count()) + 1));
  if (n < 0) {
    return errno == EINTR ? runtime::ok_status()
                          : runtime::internal_error("epoll_wait: ", errno_text());
  }
  for (int i = 0; i < n; ++i) {
    if (events[i].data.u64 == kWake) {
      uint64_t count = 0;
      if (::read(wake_fd_, &count, sizeof count) != sizeof count) {
        // Nothing to read: an earlier wait drained it.
      }
    }
    ready->push_back({events[i].data.u64, events[i].events});
  }
  return runtime::ok_status();
}

}  // namespace troupe::actors::net
