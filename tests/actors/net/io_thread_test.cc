// IoThread: a posted function runs on the loop's own thread and in order; a socket's readiness
// completes an async_wait there; stop() ends the loop with a wait still pending, and what is
// posted afterwards never runs.
#include "actors/net/io_thread.h"

#include <doctest/doctest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/posix/stream_descriptor.hpp>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

using troupe::actors::net::IoThread;
namespace asio = boost::asio;

TEST_CASE("an io thread runs what is posted, in order, on its own thread") {
  auto io = IoThread::start("test loop");
  REQUIRE(io.ok());
  CHECK_FALSE((*io)->on_this_thread());
  std::vector<int> order;
  std::promise<bool> on_loop;
  for (int i = 0; i < 3; ++i) (*io)->post([&order, i] { order.push_back(i); });
  (*io)->post([&] { on_loop.set_value((*io)->on_this_thread()); });
  auto done = on_loop.get_future();
  REQUIRE(done.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(done.get());
  CHECK(order == std::vector<int>{0, 1, 2});
}

TEST_CASE("a socket's readiness completes its wait on the loop; stop() leaves a wait unrun") {
  auto io = IoThread::start("test loop");
  REQUIRE(io.ok());
  int fd[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fd) == 0);
  asio::posix::stream_descriptor reader((*io)->context(), fd[1]);  // closes fd[1]
  std::promise<char> got;
  (*io)->post([&] {
    reader.async_wait(asio::posix::descriptor_base::wait_read,
                      [&](const boost::system::error_code& error) {
                        char c = 0;
                        if (!error && ::read(fd[1], &c, 1) == 1) got.set_value(c);
                      });
  });
  // Nothing to read yet: the wait stays pending.
  auto byte = got.get_future();
  CHECK(byte.wait_for(std::chrono::milliseconds(30)) == std::future_status::timeout);
  REQUIRE(::write(fd[0], "x", 1) == 1);
  REQUIRE(byte.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(byte.get() == 'x');

  // A second wait, then stop: it never completes, and a later post does not run.
  std::atomic<bool> ran{false};
  std::promise<void> armed;
  (*io)->post([&] {
    reader.async_wait(asio::posix::descriptor_base::wait_read,
                      [&](const boost::system::error_code&) { ran = true; });
    armed.set_value();
  });
  armed.get_future().wait();
  (*io)->stop();
  REQUIRE(::write(fd[0], "y", 1) == 1);
  (*io)->post([&] { ran = true; });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK_FALSE(ran);
  ::close(fd[0]);
}
