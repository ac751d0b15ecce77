// EventLoop: a socket's readiness reported with its id, a wake-up from another thread reported
// as kWake and drained, a deadline that ends the wait, and a removed socket no longer reported.
#include "actors/net/event_loop.h"

#include <doctest/doctest.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

using troupe::actors::net::EventLoop;

TEST_CASE("an event loop reports ready sockets by id, wake-ups as kWake, and times out") {
  auto opened = EventLoop::open();
  REQUIRE(opened.ok());
  EventLoop& loop = **opened;
  int fd[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fd) == 0);
  REQUIRE(loop.add(fd[1], 7, EPOLLIN).ok());
  std::vector<EventLoop::Event> ready;

  // Nothing ready: the wait ends at its deadline, with nothing.
  const auto start = EventLoop::Clock::now();
  REQUIRE(loop.wait(start + std::chrono::milliseconds(30), &ready).ok());
  CHECK(ready.empty());
  CHECK(EventLoop::Clock::now() - start >= std::chrono::milliseconds(25));

  REQUIRE(::write(fd[0], "x", 1) == 1);
  REQUIRE(loop.wait(EventLoop::Clock::now() + std::chrono::seconds(5), &ready).ok());
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].id == 7);
  CHECK((ready[0].events & EPOLLIN) != 0);

  // Watching for nothing, then removed: the unread byte is no longer reported.
  loop.modify(fd[1], 7, 0);
  REQUIRE(loop.wait(EventLoop::Clock::now() + std::chrono::milliseconds(10), &ready).ok());
  CHECK(ready.empty());
  loop.remove(fd[1]);

  // A wake-up from another thread ends a long wait.
  std::thread waker([&loop] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    loop.wake();
  });
  REQUIRE(loop.wait(EventLoop::Clock::now() + std::chrono::seconds(10), &ready).ok());
  waker.join();
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].id == EventLoop::kWake);
  // Wake-ups that came before a wait are reported once and drained: the next wait times out.
  loop.wake();
  loop.wake();
  REQUIRE(loop.wait(EventLoop::Clock::now() + std::chrono::seconds(10), &ready).ok());
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].id == EventLoop::kWake);
  REQUIRE(loop.wait(EventLoop::Clock::now() + std::chrono::milliseconds(10), &ready).ok());
  CHECK(ready.empty());
  ::close(fd[0]);
  ::close(fd[1]);
}
