#include "harness/raw_socket.h"

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace troupe::testing {

namespace {

sockaddr_in loopback(uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  return addr;
}

}  // namespace

int connect_to(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = loopback(port);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  return fd;
}

void send_all(int fd, const std::string& bytes) {
  REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(bytes.size()));
}

std::string frame_header(uint64_t n) {
  std::string h(8, '\0');
  for (int i = 0; i < 8; ++i) h[i] = static_cast<char>(n >> (8 * i));
  return h;
}

bool recv_frame(int fd, std::string* body) {
  unsigned char header[8];
  if (::recv(fd, header, 8, MSG_WAITALL) != 8) return false;
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(header[i]) << (8 * i);
  body->assign(n, '\0');
  return n == 0 || ::recv(fd, body->data(), n, MSG_WAITALL) == static_cast<ssize_t>(n);
}

uint16_t held_port(int* fd) {
  *fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = loopback(0);
  socklen_t len = sizeof addr;
  REQUIRE(::bind(*fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::getsockname(*fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  return ntohs(addr.sin_port);
}

int listen_on(uint16_t* port) {
  int fd = -1;
  *port = held_port(&fd);
  REQUIRE(::listen(fd, 4) == 0);
  return fd;
}

SocketPair::SocketPair(int buffer) {
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fd) == 0);
  for (int f : fd) {
    ::fcntl(f, F_SETFL, ::fcntl(f, F_GETFL) | O_NONBLOCK);
    if (buffer > 0) {
      ::setsockopt(f, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
      ::setsockopt(f, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);
    }
  }
}

SocketPair::~SocketPair() {
  for (int f : fd) ::close(f);
}

}  // namespace troupe::testing
