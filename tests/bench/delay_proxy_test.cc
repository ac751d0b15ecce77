// The benchmarks' delay proxy: bytes pass intact both ways, each way later by the delay, a
// close passes through, and a proxy with nothing behind it or ended mid-connection closes its
// clients instead of hanging.
#include "bench/delay_proxy.h"

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

namespace {

using troupe::bench::DelayProxy;

// A socket bound to a free port of 127.0.0.1; not listening, connections to it are refused.
int bind_any(uint16_t* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  *port = ntohs(addr.sin_port);
  return fd;
}

int listen_any(uint16_t* port) {
  const int fd = bind_any(port);
  REQUIRE(::listen(fd, 4) == 0);
  return fd;
}

int connect_to(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  timeval tv{10, 0};  // a hang fails the test instead of stalling it
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// Echoes one connection's bytes until it closes, then closes.
std::thread echo_once(int listen_fd) {
  return std::thread([listen_fd] {
    const int fd = ::accept(listen_fd, nullptr, nullptr);
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) {
      if (::write(fd, buf, static_cast<size_t>(n)) != n) break;
    }
    ::close(fd);
  });
}

std::string read_exactly(int fd, size_t n) {
  std::string got(n, '\0');
  size_t at = 0;
  while (at < n) {
    const ssize_t k = ::read(fd, got.data() + at, n - at);
    if (k <= 0) break;
    at += static_cast<size_t>(k);
  }
  got.resize(at);
  return got;
}

}  // namespace

TEST_CASE("the delay proxy passes bytes intact both ways, each way later by its delay") {
  uint16_t target = 0;
  const int listener = listen_any(&target);
  std::thread echo = echo_once(listener);
  auto proxy = DelayProxy::start("127.0.0.1", target, std::chrono::milliseconds(20));
  REQUIRE_MESSAGE(proxy.ok(), proxy.status().to_string());
  const int fd = connect_to((*proxy)->port());

  std::string sent(100000, '\0');
  for (size_t i = 0; i < sent.size(); ++i) sent[i] = static_cast<char>(i * 7 + i / 251);
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(::write(fd, sent.data(), 1) == 1);  // a round trip of one byte first
  CHECK(read_exactly(fd, 1) == sent.substr(0, 1));
  const double round_trip =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(round_trip >= 0.040);  // 20 ms there, 20 ms back
  CHECK(round_trip < 5.0);

  std::thread writer([&] {
    for (size_t at = 1; at < sent.size();) {
      const ssize_t k = ::write(fd, sent.data() + at, sent.size() - at);
      if (k <= 0) break;
      at += static_cast<size_t>(k);
    }
  });
  CHECK(read_exactly(fd, sent.size() - 1) == sent.substr(1));
  writer.join();
  CHECK((*proxy)->bytes() == 2 * sent.size());

  // Our close reaches the server through the proxy, and its close comes back.
  ::shutdown(fd, SHUT_WR);
  char c;
  CHECK(::read(fd, &c, 1) == 0);
  echo.join();
  ::close(fd);
  ::close(listener);
}

TEST_CASE("the delay proxy closes its clients when nothing is behind it, or when it ends") {
  // A port bound and not listening: refused, and no other program can take it meanwhile.
  uint16_t target = 0;
  const int bound = bind_any(&target);
  auto empty = DelayProxy::start("127.0.0.1", target, std::chrono::milliseconds(1));
  REQUIRE(empty.ok());
  const int refused = connect_to((*empty)->port());
  char c;
  CHECK(::read(refused, &c, 1) == 0);
  ::close(refused);
  ::close(bound);

  uint16_t port = 0;
  const int live = listen_any(&port);
  std::thread echo = echo_once(live);
  auto proxy = DelayProxy::start("127.0.0.1", port, std::chrono::milliseconds(0));  // undelayed
  REQUIRE(proxy.ok());
  const int fd = connect_to((*proxy)->port());
  REQUIRE(::write(fd, "xyz", 3) == 3);
  CHECK(read_exactly(fd, 3) == "xyz");
  CHECK((*proxy)->bytes() == 6);
  proxy->reset();  // mid-connection: both sides are closed, no thread is left waiting
  CHECK(::read(fd, &c, 1) == 0);
  echo.join();
  ::close(fd);
  ::close(live);
}
