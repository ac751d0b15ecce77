#include "actors/net/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace troupe::actors::net {

std::string errno_text() { return std::strerror(errno); }

runtime::Result<sockaddr_in> resolve(const std::string& host, uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (host.empty() || ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) == 1) return addr;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || !found) {
    return runtime::unavailable("data channel: cannot resolve '", host, "': ", gai_strerror(rc));
  }
  addr.sin_addr = reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr;
  ::freeaddrinfo(found);
  return addr;
}

std::string peer_of(const sockaddr_in& address) {
  char ip[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &address.sin_addr, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(ntohs(address.sin_port));
}

runtime::Result<Listening> listen_tcp(const std::string& host, uint16_t port) {
  TROUPE_ASSIGN_OR_RETURN(sockaddr_in addr, resolve(host, port));
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return runtime::unavailable("data channel: socket: ", errno_text());
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 64) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = errno_text();
    ::close(fd);
    return runtime::unavailable("data channel: cannot listen on ", host, ":", port, ": ", why);
  }
  return Listening{fd, ntohs(addr.sin_port)};
}

namespace {

// A blocking socket connected to `addr` within `timeout`, reads and writes timing out alike;
// -1 with errno set when it is not.
int connected_socket(const sockaddr_in& addr, std::chrono::milliseconds timeout) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

}  // namespace

int probe_tcp(const std::string& host, uint16_t port, std::chrono::milliseconds timeout) {
  auto addr = resolve(host, port);
  if (!addr.ok()) return EHOSTUNREACH;
  const int fd = connected_socket(*addr, timeout);
  if (fd < 0) return errno;
  ::close(fd);
  return 0;
}

runtime::Result<int> connect_tcp(const std::string& host, uint16_t port,
                                 std::chrono::milliseconds timeout) {
  const std::string peer = host + ":" + std::to_string(port);
  TROUPE_ASSIGN_OR_RETURN(sockaddr_in addr, resolve(host, port));
  const int fd = connected_socket(addr, timeout);
  if (fd < 0) return runtime::unavailable("data channel to ", peer, ": ", errno_text());
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

std::string set_nonblocking(int fd) {
  return ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK) == 0 ? "" : errno_text();
}

}  // namespace troupe::actors::net
