#include "bench/delay_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>

namespace troupe::bench {

namespace {

using Clock = std::chrono::steady_clock;

sockaddr_in address(const std::string& host, uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
  return addr;
}

void no_delay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// One direction of a link: what `from` sent, held until its time, then written to `to`.
struct Direction {
  int from = -1, to = -1;
  std::mutex mu;
  std::condition_variable ready;
  std::deque<std::pair<Clock::time_point, std::string>> chunks;
  bool ended = false;  // `from` closed or failed: nothing more comes
  std::thread reader, writer;

  void read_loop(std::chrono::microseconds delay, std::atomic<uint64_t>& bytes) {
    std::string buf(1 << 16, '\0');
    for (;;) {
      const ssize_t n = ::read(from, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n > 0 && delay.count() == 0) {
        // Undelayed, the bytes go on from here: a hand-off to the writer would cost more than
        // the forward itself and make the baseline slower than a link.
        bytes += static_cast<uint64_t>(n);
        if (write_all(buf.data(), static_cast<size_t>(n))) continue;
      }
      std::lock_guard<std::mutex> lock(mu);
      if (n <= 0 || delay.count() == 0) {  // closed, failed, or (undelayed) its peer is gone
        ended = true;
        ready.notify_one();
        return;
      }
      bytes += static_cast<uint64_t>(n);
      chunks.emplace_back(Clock::now() + delay, buf.substr(0, static_cast<size_t>(n)));
      ready.notify_one();
    }
  }

  void write_loop() {
    for (;;) {
      std::pair<Clock::time_point, std::string> chunk;
      {
        std::unique_lock<std::mutex> lock(mu);
        ready.wait(lock, [&] { return ended || !chunks.empty(); });
        if (chunks.empty()) break;
        chunk = std::move(chunks.front());
        chunks.pop_front();
      }
      std::this_thread::sleep_until(chunk.first);
      if (!write_all(chunk.second.data(), chunk.second.size())) return;
    }
    ::shutdown(to, SHUT_WR);
  }

  // False when `to` is gone; then `from` is shut too, so that its reader stops.
  bool write_all(const char* data, size_t size) {
    for (size_t at = 0; at < size;) {
      const ssize_t n = ::write(to, data + at, size - at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::shutdown(from, SHUT_RDWR);
        return false;
      }
      at += static_cast<size_t>(n);
    }
    return true;
  }
};

}  // namespace

struct DelayProxy::Link {
  int client = -1, target = -1;
  Direction up, down;  // client to target, target to client

  ~Link() {
    for (int fd : {client, target}) ::shutdown(fd, SHUT_RDWR);
    for (Direction* d : {&up, &down}) {
      for (std::thread* t : {&d->reader, &d->writer}) {
        if (t->joinable()) t->join();
      }
    }
    ::close(client);
    ::close(target);
  }
};

DelayProxy::DelayProxy(std::string host, uint16_t target_port, std::chrono::microseconds delay,
                       int fd, uint16_t port)
    : host_(std::move(host)),
      target_port_(target_port),
      delay_(delay),
      listen_fd_(fd),
      port_(port) {}

runtime::Result<std::unique_ptr<DelayProxy>> DelayProxy::start(const std::string& host,
                                                               uint16_t target_port,
                                                               std::chrono::microseconds delay) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = address(host, 0);
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(fd, 64) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return runtime::unavailable("delay proxy: cannot listen on ", host, ": ", why);
  }
  std::unique_ptr<DelayProxy> proxy(
      new DelayProxy(host, target_port, delay, fd, ntohs(addr.sin_port)));
  proxy->acceptor_ = std::thread([p = proxy.get()] { p->accept_loop(); });
  return proxy;
}

DelayProxy::~DelayProxy() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);  // wakes the acceptor
  acceptor_.join();
  ::close(listen_fd_);
  std::lock_guard<std::mutex> lock(mu_);
  links_.clear();
}

void DelayProxy::accept_loop() {
  while (!stopping_) {
    const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // shut down
    }
    const int target = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const sockaddr_in to = address(host_, target_port_);
    if (target < 0 || ::connect(target, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) {
      // Nothing behind the proxy: the client sees its connection closed, as it would see a
      // refusal.
      if (target >= 0) ::close(target);
      ::close(client);
      continue;
    }
    no_delay(client);
    no_delay(target);
    auto link = std::make_unique<Link>();
    link->client = client;
    link->target = target;
    link->up.from = link->down.to = client;
    link->up.to = link->down.from = target;
    for (Direction* d : {&link->up, &link->down}) {
      d->reader = std::thread([this, d] { d->read_loop(delay_, bytes_); });
      d->writer = std::thread([d] { d->write_loop(); });
    }
    std::lock_guard<std::mutex> lock(mu_);
    links_.push_back(std::move(link));
  }
}

}  // namespace troupe::bench
