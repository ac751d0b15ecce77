#include "harness/tamper_proxy.h"

#include <doctest/doctest.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness/raw_socket.h"

namespace troupe::testing {

TamperProxy::TamperProxy(uint16_t target_port, std::vector<Flip> flips)
    : target_port_(target_port), flips_(std::move(flips)) {
  listen_fd_ = listen_on(&port_);
  acceptor_ = std::thread([this] { accept_loop(); });
}

TamperProxy::~TamperProxy() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
  }
  for (std::thread& t : threads_) t.join();
  for (int fd : fds_) ::close(fd);
  ::close(listen_fd_);
}

void TamperProxy::accept_loop() {
  while (!stopping_) {
    const int client = ::accept(listen_fd_, nullptr, nullptr);
    if (client < 0) {
      if (stopping_) return;
      continue;
    }
    const int server = connect_to(target_port_);
    const int n = connections_++;
    std::lock_guard<std::mutex> lock(mu_);
    fds_.push_back(client);
    fds_.push_back(server);
    threads_.emplace_back([this, client, server, n] { pump(client, server, n, true); });
    threads_.emplace_back([this, client, server, n] { pump(server, client, n, false); });
  }
}

void TamperProxy::pump(int from, int to, int connection, bool to_server) {
  uint64_t offset = 0;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::recv(from, buf, sizeof buf, 0);
    if (n <= 0) break;
    for (const Flip& f : flips_) {
      if (f.connection == connection && f.to_server == to_server && f.at >= offset &&
          f.at < offset + static_cast<uint64_t>(n)) {
        buf[f.at - offset] ^= 1;
        ++flipped_;
      }
    }
    offset += static_cast<uint64_t>(n);
    for (ssize_t sent = 0; sent < n;) {
      const ssize_t m = ::send(to, buf + sent, static_cast<size_t>(n - sent), MSG_NOSIGNAL);
      if (m <= 0) {
        ::shutdown(from, SHUT_RDWR);
        return;
      }
      sent += m;
    }
  }
  ::shutdown(to, SHUT_RDWR);
}

}  // namespace troupe::testing
