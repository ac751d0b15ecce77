#include "actors/data_channel.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <capnp/message.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <deque>
#include <new>
#include <system_error>

#include "actors/messages.h"
#include "runtime/log.h"

namespace troupe::actors {

using runtime::Status;

namespace {

std::string errno_text() { return std::strerror(errno); }

// An IPv4 address for a host name or dotted quad ("" for any), with `port`.
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

// Writes all of `parts`; false on an error or a timeout (errno says which). A peer that has
// gone is an error here, never a SIGPIPE that ends the process.
bool write_all(int fd, iovec* parts, int count) {
  while (count > 0) {
    msghdr msg{};
    msg.msg_iov = parts;
    msg.msg_iovlen = static_cast<size_t>(std::min(count, IOV_MAX));
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
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

// Reads exactly `size` bytes; false on an error, a timeout or the end of the stream (errno
// says which).
bool read_all(int fd, char* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::recv(fd, data + done, size - done, 0);
    if (n == 0) {
      errno = ECONNRESET;
      return false;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

// The message's segments as they are, after their frame header.
std::string write_message_frame(int fd, capnp::MessageBuilder& message) {
  // Cap'n Proto's segment table: the segment count less one, each segment's size in words,
  // padded to a whole word.
  kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments = message.getSegmentsForOutput();
  std::vector<uint32_t> table(segments.size() + 1 + (segments.size() % 2 == 0 ? 1 : 0), 0);
  table[0] = static_cast<uint32_t>(segments.size() - 1);
  uint64_t words = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    table[i + 1] = static_cast<uint32_t>(segments[i].size());
    words += segments[i].size();
  }
  const uint64_t n = table.size() * sizeof(uint32_t) + words * sizeof(capnp::word);
  unsigned char header[8];
  for (int i = 0; i < 8; ++i) header[i] = static_cast<unsigned char>(n >> (8 * i));
  std::vector<iovec> parts;
  parts.push_back({header, sizeof header});
  parts.push_back({table.data(), table.size() * sizeof(uint32_t)});
  for (const auto& s : segments) {
    parts.push_back({const_cast<capnp::word*>(s.begin()), s.size() * sizeof(capnp::word)});
  }
  return write_all(fd, parts.data(), static_cast<int>(parts.size())) ? "" : errno_text();
}

bool write_frame(int fd, const std::vector<char>& body) {
  unsigned char header[8];
  const uint64_t n = body.size();
  for (int i = 0; i < 8; ++i) header[i] = static_cast<unsigned char>(n >> (8 * i));
  iovec parts[2] = {{header, sizeof header}, {const_cast<char*>(body.data()), body.size()}};
  return write_all(fd, parts, body.empty() ? 1 : 2);
}

// A frame's buffer is allocated up to this much before its bytes arrive; past it, only once
// they have: a header is a claim, not a promise.
constexpr uint64_t kFirstFrameChunk = uint64_t(16) << 20;

std::string read_error() {
  return errno == EAGAIN || errno == EWOULDBLOCK ? "timed out" : errno_text();
}

// Reads one frame into a buffer of its own (not zeroed first: every byte is read over); an
// error message, empty on success.
std::string read_frame(int fd, uint64_t max_bytes, runtime::Bytes* body) {
  unsigned char header[8];
  if (!read_all(fd, reinterpret_cast<char*>(header), sizeof header)) return read_error();
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(header[i]) << (8 * i);
  if (n > max_bytes) {
    return "a frame of " + std::to_string(n) + " bytes is longer than the limit of " +
           std::to_string(max_bytes);
  }
  const uint64_t first = std::min(n, kFirstFrameChunk);
  std::shared_ptr<char[]> buffer(new (std::nothrow) char[first]);
  if (!buffer && first > 0) return "no memory for a frame of " + std::to_string(n) + " bytes";
  if (!read_all(fd, buffer.get(), first)) return read_error();
  if (n > first) {
    std::shared_ptr<char[]> whole(new (std::nothrow) char[n]);
    if (!whole) return "no memory for a frame of " + std::to_string(n) + " bytes";
    std::memcpy(whole.get(), buffer.get(), first);
    buffer = std::move(whole);
    if (!read_all(fd, buffer.get() + first, n - first)) return read_error();
  }
  *body = runtime::Bytes{buffer, buffer.get(), n};
  return "";
}

void set_timeout(int fd, std::chrono::milliseconds timeout) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// A reply read by a channel's reader thread, or why it could read none.
using channel_reply_atom = caf::atom_constant<caf::atom("chreply")>;

struct ChannelState {
  int fd = -1;
  std::string peer;
  std::string broken;  // why the connection is unusable, once it is
  // Calls sent and not yet answered, oldest first: the server answers a connection's calls in
  // the order they came.
  std::deque<caf::response_promise> waiting;
  std::shared_ptr<std::atomic<int>> outstanding;  // waiting's size, for the reader
};

// Ends the channel: every call waiting gets the error, and no later call may use the stream
// (a half-done exchange leaves it out of step).
void break_channel(ChannelState& st, std::string why) {
  if (st.broken.empty()) st.broken = std::move(why);
  ::shutdown(st.fd, SHUT_RDWR);
  for (caf::response_promise& p : st.waiting) {
    p.deliver(
        caf::make_error(caf::sec::runtime_error, "data channel to " + st.peer + ": " + st.broken));
  }
  st.waiting.clear();
  st.outstanding->store(0);
}

// The reader thread: hands each reply to the channel actor as it comes, and the first error.
// Waiting for a reply is bounded by `timeout`; an idle channel waits for calls as long as it
// is idle.
void read_replies(int fd, caf::weak_actor_ptr channel, std::chrono::milliseconds timeout,
                  std::shared_ptr<std::atomic<int>> outstanding) {
  auto hand_on = [&](auto&&... reply) {
    caf::strong_actor_ptr strong = channel.lock();
    if (!strong) return false;
    caf::anon_send(caf::actor_cast<caf::actor>(strong), channel_reply_atom::value,
                   std::forward<decltype(reply)>(reply)...);
    return true;
  };
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(timeout.count(), INT_MAX)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      if (outstanding->load() == 0) continue;
      hand_on(std::string("receiving: timed out"));
      return;
    }
    runtime::Bytes reply;
    std::string why =
        ready < 0 ? errno_text() : read_frame(fd, DataServerOptions{}.max_frame_bytes, &reply);
    if (!why.empty()) {
      hand_on("receiving: " + why);
      return;
    }
    outstanding->fetch_sub(1);
    if (!hand_on(std::move(reply))) return;
  }
}

// Calls are written as they come, without waiting for the replies of those before them (a
// reader thread takes those): a step's reads of several variables cost one round trip, not
// one each, where links are slow.
caf::behavior channel_actor(caf::stateful_actor<ChannelState>* self, int fd, std::string peer,
                            std::chrono::milliseconds timeout) {
  ChannelState& st = self->state;
  st.fd = fd;
  st.peer = std::move(peer);
  st.outstanding = std::make_shared<std::atomic<int>>(0);
  auto reader = std::make_shared<std::thread>(read_replies, fd, caf::weak_actor_ptr(self->ctrl()),
                                              timeout, st.outstanding);
  self->attach_functor([fd, reader] {
    ::shutdown(fd, SHUT_RDWR);  // ends the reader's wait
    // Run by the reader itself when it dropped the actor's last reference.
    if (reader->get_id() == std::this_thread::get_id()) {
      reader->detach();
    } else {
      reader->join();
    }
    ::close(fd);
  });
  return {
      [self](call_atom, ChannelCall& call) -> caf::result<runtime::Bytes> {
        ChannelState& st = self->state;
        if (st.broken.empty()) {
          std::string why = write_message_frame(st.fd, *call.message);
          if (!why.empty()) break_channel(st, "sending: " + why);
        }
        if (!st.broken.empty()) {
          return caf::make_error(caf::sec::runtime_error,
                                 "data channel to " + st.peer + ": " + st.broken);
        }
        st.outstanding->fetch_add(1);
        st.waiting.push_back(self->make_response_promise());
        return st.waiting.back();
      },
      [self](channel_reply_atom, runtime::Bytes& reply) {
        ChannelState& st = self->state;
        if (st.waiting.empty()) {
          if (st.broken.empty()) break_channel(st, "a reply to no call");
          return;
        }
        st.waiting.front().deliver(std::move(reply));
        st.waiting.pop_front();
      },
      [self](channel_reply_atom, std::string& why) { break_channel(self->state, std::move(why)); },
  };
}

}  // namespace

runtime::Result<std::unique_ptr<DataServer>> DataServer::listen(Runtime& runtime,
                                                                const std::string& host,
                                                                uint16_t port,
                                                                DataServerOptions options) {
  TROUPE_ASSIGN_OR_RETURN(sockaddr_in addr, resolve(host, port));
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return runtime::unavailable("data channel: socket: ", errno_text());
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 16) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = errno_text();
    ::close(fd);
    return runtime::unavailable("data channel: cannot listen on ", host, ":", port, ": ", why);
  }
  return std::unique_ptr<DataServer>(new DataServer(runtime, fd, ntohs(addr.sin_port), options));
}

Status DataServer::serve(caf::actor shard) {
  shard_ = std::move(shard);
  try {
    acceptor_ = std::thread([this] { accept_loop(); });
  } catch (const std::system_error& e) {
    return runtime::resource_exhausted("data channel: cannot start its accepting thread: ",
                                       e.what());
  }
  return runtime::ok_status();
}

int DataServer::connections() {
  std::lock_guard<std::mutex> lock(mu_);
  reap_finished();
  return static_cast<int>(connections_.size());
}

void DataServer::accept_loop() {
  auto backoff = std::chrono::milliseconds(10);
  while (!stopping_) {
    sockaddr_in from{};
    socklen_t from_len = sizeof from;
    const int fd =
        ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &from_len, SOCK_CLOEXEC);
    if (fd < 0) {
      if (stopping_ || errno == EBADF || errno == EINVAL) return;  // shut down
      if (errno == EINTR || errno == ECONNABORTED) continue;
      // Out of descriptors or memory: the listener is fine and the shortage may pass.
      runtime::log_warning("data channel on port ", port_, ": accept failed (", errno_text(),
                           "); retrying in ", backoff.count(), " ms");
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
      continue;
    }
    backoff = std::chrono::milliseconds(10);
    char ip[INET_ADDRSTRLEN] = "?";
    ::inet_ntop(AF_INET, &from.sin_addr, ip, sizeof ip);
    const std::string peer = std::string(ip) + ":" + std::to_string(ntohs(from.sin_port));
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      ::close(fd);
      return;
    }
    admit(fd, peer);
  }
}

void DataServer::admit(int fd, const std::string& peer) {
  reap_finished();
  if (static_cast<int>(connections_.size()) >= options_.max_connections) {
    runtime::log_warning("data channel on port ", port_, ": refused ", peer, ": ",
                         options_.max_connections, " connections open");
    ::close(fd);
    return;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  set_timeout(fd, options_.idle_timeout);
  auto done = std::make_shared<std::atomic<bool>>(false);
  try {
    connections_.push_back(Connection{fd, std::thread([this, fd, done, peer] {
                                        serve_connection(fd, peer);
                                        *done = true;
                                      }),
                                      done});
  } catch (const std::system_error& e) {
    runtime::log_warning("data channel on port ", port_, ": refused ", peer, ": no thread (",
                         e.what(), ")");
    ::close(fd);
  }
}

// Sessions come and go (an Estimator restarting, an evaluator polling): their connections'
// threads and descriptors go with them. Closed here, not by their threads, so that a number
// the kernel hands out again is never shut down by mistake.
void DataServer::reap_finished() {
  auto finished = [](Connection& c) {
    if (!*c.done) return false;
    c.thread.join();
    ::close(c.fd);
    return true;
  };
  connections_.erase(std::remove_if(connections_.begin(), connections_.end(), finished),
                     connections_.end());
}

// One call at a time: read it, let the shard run it, write its reply. Whatever a peer sends,
// the worst it gets is a closed connection (the shard answers bad bytes with an error reply).
void DataServer::serve_connection(int fd, const std::string& peer) {
  if (const auto& secret = runtime_.secret()) {
    const std::string refused = secret->check_member(fd);
    if (!refused.empty()) {
      runtime::log_warning("data channel on port ", port_, ": refused ", peer, ": ", refused);
      ::shutdown(fd, SHUT_RDWR);
      return;
    }
  }
  caf::scoped_actor self{runtime_.system()};
  while (!stopping_) {
    runtime::Bytes call;
    if (!read_frame(fd, options_.max_frame_bytes, &call).empty()) break;
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
  std::vector<Connection> connections;
  {
    std::lock_guard<std::mutex> lock(mu_);
    connections = std::move(connections_);
  }
  for (Connection& c : connections) {
    ::shutdown(c.fd, SHUT_RDWR);
    c.thread.join();
    ::close(c.fd);
  }
}

runtime::Result<caf::actor> connect_data_channel(Runtime& runtime, const std::string& host,
                                                 uint16_t port, std::chrono::milliseconds timeout) {
  const std::string peer = host + ":" + std::to_string(port);
  TROUPE_ASSIGN_OR_RETURN(sockaddr_in addr, resolve(host, port));
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
  if (const auto& secret = runtime.secret()) {
    const std::string refused = secret->prove_member(fd);
    if (!refused.empty()) {
      ::close(fd);
      return runtime::unavailable("data channel to ", peer, ": ", refused);
    }
  }
  return runtime.system().spawn<caf::detached>(channel_actor, fd, peer, timeout);
}

}  // namespace troupe::actors
