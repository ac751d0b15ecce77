#include "actors/data_channel.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "actors/messages.h"

namespace troupe::actors {

using runtime::Status;

namespace {

std::string errno_text() { return std::strerror(errno); }

// Writes all of `parts`; false on an error or a timeout (errno says which).
bool write_all(int fd, iovec* parts, int count) {
  while (count > 0) {
    const ssize_t n = ::writev(fd, parts, count);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    size_t left = static_cast<size_t>(n);
    while (count > 0 && left >= parts->iov_len) {
      left -= parts->iov_len;
      ++parts;
      --count;
    }
    if (count > 0) {
      parts->iov_base = static_cast<char*>(parts->iov_base) + left;
      parts->iov_len -= left;
    }
  }
  return true;
}

// Reads exactly `size` bytes; 0 on success, 1 at a clean end of stream before the first byte,
// -1 on an error, a timeout or a stream that ends inside.
int read_all(int fd, char* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::recv(fd, data + done, size - done, 0);
    if (n == 0) {
      errno = ECONNRESET;
      return done == 0 ? 1 : -1;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    done += static_cast<size_t>(n);
  }
  return 0;
}

bool write_frame(int fd, const std::vector<char>& body) {
  unsigned char header[8];
  const uint64_t n = body.size();
  for (int i = 0; i < 8; ++i) header[i] = static_cast<unsigned char>(n >> (8 * i));
  iovec parts[2] = {{header, sizeof header}, {const_cast<char*>(body.data()), body.size()}};
  return write_all(fd, parts, body.empty() ? 1 : 2);
}

// Reads one frame into `body`; an error message, empty on success; `*end` at a clean end.
std::string read_frame(int fd, std::vector<char>* body, bool* end) {
  unsigned char header[8];
  const int r = read_all(fd, reinterpret_cast<char*>(header), sizeof header);
  if (r == 1 && end) *end = true;
  if (r != 0) return errno == EAGAIN ? "timed out" : errno_text();
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(header[i]) << (8 * i);
  if (n > kMaxFrameBytes) return "a frame of " + std::to_string(n) + " bytes is too long";
  body->resize(n);
  if (read_all(fd, body->data(), n) != 0) return errno == EAGAIN ? "timed out" : errno_text();
  return "";
}

void set_timeout(int fd, std::chrono::milliseconds timeout) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

struct ChannelState {
  int fd = -1;
  std::string peer;
  std::string broken;  // why the connection is unusable, once it is
};

caf::behavior channel_actor(caf::stateful_actor<ChannelState>* self, int fd, std::string peer) {
  self->state.fd = fd;
  self->state.peer = std::move(peer);
  self->attach_functor([fd] { ::close(fd); });
  return {
      [self](call_atom, std::vector<char>& call) -> caf::result<std::vector<char>> {
        ChannelState& st = self->state;
        if (st.broken.empty() && !write_frame(st.fd, call)) {
          st.broken = "sending: " + errno_text();
        }
        std::vector<char> reply;
        if (st.broken.empty()) {
          bool end = false;
          std::string why = read_frame(st.fd, &reply, &end);
          if (!why.empty()) st.broken = "receiving: " + why;
        }
        if (!st.broken.empty()) {
          // A half-done exchange leaves the stream out of step: no later call may use it.
          ::shutdown(st.fd, SHUT_RDWR);
          return caf::make_error(caf::sec::runtime_error,
                                 "data channel to " + st.peer + ": " + st.broken);
        }
        return reply;
      },
  };
}

}  // namespace

runtime::Result<std::unique_ptr<DataServer>> DataServer::listen(Runtime& runtime,
                                                                const std::string& host) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return runtime::unavailable("data channel: socket: ", errno_text());
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    ::close(fd);
    return runtime::invalid_argument("data channel: '", host, "' is not an IPv4 address");
  }
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 16) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = errno_text();
    ::close(fd);
    return runtime::unavailable("data channel: cannot listen on ", host, ": ", why);
  }
  return std::unique_ptr<DataServer>(new DataServer(runtime, fd, ntohs(addr.sin_port)));
}

void DataServer::serve(caf::actor shard) {
  shard_ = std::move(shard);
  acceptor_ = std::thread([this] { accept_loop(); });
}

void DataServer::accept_loop() {
  while (!stopping_) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // the listening socket was shut down
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      ::close(fd);
      return;
    }
    connections_.emplace_back(fd, std::thread([this, fd] { serve_connection(fd); }));
  }
}

// One call at a time: read it, let the shard run it, write its reply. Whatever a peer sends,
// the worst it gets is a closed connection (the shard answers bad bytes with an error reply).
void DataServer::serve_connection(int fd) {
  caf::scoped_actor self{runtime_.system()};
  while (!stopping_) {
    std::vector<char> call;
    bool end = false;
    if (!read_frame(fd, &call, &end).empty()) break;
    std::vector<char> reply;
    bool answered = false;
    self->request(shard_, caf::infinite, call_atom::value, std::move(call))
        .receive(
            [&](std::vector<char>& r) {
              reply = std::move(r);
              answered = true;
            },
            [&](caf::error&) {});
    if (!answered || !write_frame(fd, reply)) break;
  }
  ::shutdown(fd, SHUT_RDWR);
}

DataServer::~DataServer() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  ::close(listen_fd_);
  std::vector<std::pair<int, std::thread>> connections;
  {
    std::lock_guard<std::mutex> lock(mu_);
    connections = std::move(connections_);
  }
  for (auto& [fd, thread] : connections) {
    ::shutdown(fd, SHUT_RDWR);
    thread.join();
    ::close(fd);
  }
}

runtime::Result<caf::actor> connect_data_channel(Runtime& runtime, const std::string& host,
                                                 uint16_t port, std::chrono::milliseconds timeout) {
  const std::string peer = host + ":" + std::to_string(port);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return runtime::invalid_argument("data channel: '", host, "' is not an IPv4 address");
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return runtime::unavailable("data channel to ", peer, ": ", errno_text());
  set_timeout(fd, timeout);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const std::string why = errno_text();
    ::close(fd);
    return runtime::unavailable("data channel to ", peer, ": ", why);
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return runtime.system().spawn<caf::detached>(channel_actor, fd, peer);
}

}  // namespace troupe::actors
