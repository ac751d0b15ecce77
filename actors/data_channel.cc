#include "actors/data_channel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
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
#include <mutex>
#include <new>
#include <optional>
#include <system_error>

#include "actors/messages.h"  // Bytes as a message
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

// A frame's buffer is allocated up to this much before its bytes arrive; past it, only once
// they have: a header is a claim, not a promise.
constexpr uint64_t kFirstFrameChunk = uint64_t(16) << 20;

void set_timeout(int fd, std::chrono::milliseconds timeout) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

}  // namespace

FrameReader::Got FrameReader::read(int fd, uint64_t max_bytes, runtime::Bytes* frame) {
  for (;;) {
    if (header_got_ == sizeof header_ && got_ == size_) {
      *frame = runtime::Bytes{body_, body_ ? body_.get() : nullptr, size_};
      header_got_ = 0;
      body_.reset();
      got_ = capacity_ = size_ = 0;
      return Got::kFrame;
    }
    char* into;
    size_t room;
    if (header_got_ < sizeof header_) {
      into = reinterpret_cast<char*>(header_) + header_got_;
      room = sizeof header_ - header_got_;
    } else {
      if (got_ == capacity_) {
        // Not zeroed: every byte is read over.
        const uint64_t grown = capacity_ == 0 ? std::min(size_, kFirstFrameChunk) : size_;
        std::shared_ptr<char[]> bigger(new (std::nothrow) char[grown]);
        if (!bigger) {
          why_ = "no memory for a frame of " + std::to_string(size_) + " bytes";
          return Got::kEnd;
        }
        if (got_ > 0) std::memcpy(bigger.get(), body_.get(), got_);
        body_ = std::move(bigger);
        capacity_ = grown;
      }
      into = body_.get() + got_;
      room = capacity_ - got_;
    }
    const ssize_t n = ::recv(fd, into, room, 0);
    if (n == 0) {
      why_ = "the connection was closed";
      return Got::kEnd;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Got::kAgain;
      why_ = errno_text();
      return Got::kEnd;
    }
    received_ += static_cast<uint64_t>(n);
    if (header_got_ == sizeof header_) {
      got_ += static_cast<uint64_t>(n);
      continue;
    }
    header_got_ += static_cast<size_t>(n);
    if (header_got_ < sizeof header_) continue;
    size_ = 0;
    for (int i = 0; i < 8; ++i) size_ |= uint64_t(header_[i]) << (8 * i);
    if (size_ > max_bytes) {
      why_ = "a frame of " + std::to_string(size_) + " bytes is longer than the limit of " +
             std::to_string(max_bytes);
      return Got::kEnd;
    }
  }
}

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kListenId = 0, kWakeId = 1;

std::string peer_of(const sockaddr_in& from) {
  char ip[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &from.sin_addr, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(ntohs(from.sin_port));
}

}  // namespace

// A frame to write: its 8-byte length, then a Cap'n Proto message's segment table and its
// segments where they lie (the frame holds the message and the tensors it points into: a call's
// inputs, a reply's outputs), or bytes of its own sent as they are (the handshake's). `next` is
// the first part not yet written in full. It points into itself, so it stays where it was framed
// (an element of a deque).
struct OutFrame {
  std::shared_ptr<capnp::MallocMessageBuilder> message;
  std::vector<runtime::Tensor> tensors;
  std::string raw;
  unsigned char header[8] = {};
  std::vector<uint32_t> table;
  std::vector<iovec> parts;
  size_t next = 0;
  uint64_t bytes = 0;  // the whole frame's

  void frame() {
    kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments = message->getSegmentsForOutput();
    // The segment count less one, each segment's size in words, padded to a whole word.
    table.assign(segments.size() + 1 + (segments.size() % 2 == 0 ? 1 : 0), 0);
    table[0] = static_cast<uint32_t>(segments.size() - 1);
    uint64_t words = 0;
    for (size_t i = 0; i < segments.size(); ++i) {
      table[i + 1] = static_cast<uint32_t>(segments[i].size());
      words += segments[i].size();
    }
    const uint64_t n = table.size() * sizeof(uint32_t) + words * sizeof(capnp::word);
    for (int i = 0; i < 8; ++i) header[i] = static_cast<unsigned char>(n >> (8 * i));
    bytes = sizeof header + n;
    parts.push_back({header, sizeof header});
    parts.push_back({table.data(), table.size() * sizeof(uint32_t)});
    for (const auto& seg : segments) {
      parts.push_back({const_cast<capnp::word*>(seg.begin()), seg.size() * sizeof(capnp::word)});
    }
  }
  void frame_raw() {
    bytes = raw.size();
    parts.push_back({raw.data(), raw.size()});
  }
  bool done() const { return next >= parts.size(); }
  // Writes what the socket takes now: the bytes written, or -1 on an error (errno says).
  ssize_t write(int fd) {
    ssize_t written = 0;
    while (!done()) {
      msghdr msg{};
      msg.msg_iov = parts.data() + next;
      msg.msg_iovlen = std::min<size_t>(parts.size() - next, IOV_MAX);
      const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        return -1;
      }
      written += n;
      size_t left = static_cast<size_t>(n);
      while (!done() && left >= parts[next].iov_len) {
        left -= parts[next].iov_len;
        ++next;
      }
      if (!done()) {
        parts[next].iov_base = static_cast<char*>(parts[next].iov_base) + left;
        parts[next].iov_len -= left;
      }
    }
    return written;
  }
};

// A peer's connection, as its server thread sees it.
struct DataServer::Connection {
  enum class Phase { kHello, kProof, kFrames };
  uint64_t id = 0;
  int fd = -1;
  std::string peer;
  Phase phase = Phase::kFrames;
  std::string hello, answer, handshake;  // the job secret's exchange, as far as it went
  FrameReader reader;
  bool waiting = false;        // for a call's reply: read nothing more until it is out
  std::deque<OutFrame> out;    // to write, in order
  bool registered = false;     // with epoll
  uint32_t watching = 0;       // the events registered
  Clock::time_point deadline;  // the handshake's end, or the idle limit
  Later later;                 // how a reply given later reaches it
};

// What other threads hand a server thread: replies the handler gives later, connections
// accepted for it, and the eventfd that wakes it for them. Shared with the handler's `later`s,
// which may outlive the server.
struct DataServer::Replies {
  int wake_fd = -1;
  std::mutex mu;
  std::vector<std::pair<uint64_t, ShardReply>> ready;  // by connection
  std::vector<std::unique_ptr<Connection>> arriving;
  void wake() {
    const uint64_t one = 1;
    if (::write(wake_fd, &one, sizeof one) != sizeof one) {
      // The counter is full (it cannot be, at one a reply) or the server is gone: nothing to do.
    }
  }
  void post(uint64_t id, ShardReply reply) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ready.emplace_back(id, std::move(reply));
    }
    wake();
  }
  ~Replies() {
    if (wake_fd >= 0) ::close(wake_fd);
  }
};

// One of the server's threads and the connections it serves.
class DataServer::Loop {
 public:
  explicit Loop(DataServer& server) : server_(server) {}
  ~Loop() {
    for (auto& [id, c] : connections_) ::close(c->fd);
    for (auto& c : replies_->arriving) ::close(c->fd);
    if (epoll_fd_ >= 0) ::close(epoll_fd_);
  }
  // `accepts`: it also watches the listening socket.
  Status start(bool accepts);
  void stop() {
    if (!thread_.joinable()) return;
    replies_->wake();  // the thread sees stopping_
    thread_.join();
  }
  // Serves `c` from now on; from any thread. How many it serves counts `c` at once.
  void adopt(std::unique_ptr<Connection> c, Loop& caller);
  int load() const { return load_; }
  int epoll_fd() const { return epoll_fd_; }

 private:
  void run();
  void add(std::unique_ptr<Connection> c);
  void on_event(Connection& c, uint32_t events);
  void read_handshake(Connection& c);
  void read_frames(Connection& c);
  void take_replies();
  void queue_reply(Connection& c, ShardReply reply);
  bool write_out(Connection& c);  // false: the peer is gone
  void watch(Connection& c);      // the events `c` waits for now
  void close(uint64_t id, const std::string& why = "");
  void follow(const Connection& c);

  DataServer& server_;
  bool accepts_ = false;
  int epoll_fd_ = -1;
  std::shared_ptr<Replies> replies_ = std::make_shared<Replies>();
  std::map<uint64_t, std::unique_ptr<Connection>> connections_;  // the thread's alone
  std::atomic<int> load_{0};  // connections served and handed over
  std::thread thread_;
  int on_cpu_ = -1;  // the core it follows, or -1: the process's
};

runtime::Result<std::unique_ptr<DataServer>> DataServer::listen(Runtime& runtime,
                                                                const std::string& host,
                                                                uint16_t port,
                                                                DataServerOptions options) {
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
  return std::unique_ptr<DataServer>(new DataServer(runtime, fd, ntohs(addr.sin_port), options));
}

DataServer::DataServer(Runtime& runtime, int listen_fd, uint16_t port, DataServerOptions options)
    : runtime_(runtime), listen_fd_(listen_fd), port_(port), options_(options) {
  if (::sched_getaffinity(0, sizeof cores_, &cores_) != 0) CPU_ZERO(&cores_);
}

Status DataServer::serve(Handler handler) {
  handler_ = std::move(handler);
  acceptor_ = std::make_unique<Loop>(*this);
  return acceptor_->start(true);
}

// The thread for a new connection: one with none, else a new one while there may be more, else
// the one serving the fewest. The accepting thread serves none: a call it ran would hold up
// the peers connecting meanwhile.
DataServer::Loop& DataServer::loop_for_next() {
  const auto fewest =
      std::min_element(loops_.begin(), loops_.end(),
                       [](const auto& a, const auto& b) { return a->load() < b->load(); });
  const bool room = static_cast<int>(loops_.size()) < options_.threads;
  if (fewest != loops_.end() && ((*fewest)->load() == 0 || !room)) return **fewest;
  auto loop = std::make_unique<Loop>(*this);
  if (Status s = loop->start(false); !s.ok()) {
    runtime::log_warning("data channel on port ", port_, ": ", s.message(), "; connections share");
    return fewest != loops_.end() ? **fewest : *acceptor_;
  }
  loops_.push_back(std::move(loop));
  return *loops_.back();
}

Status DataServer::Loop::start(bool accepts) {
  accepts_ = accepts;
  replies_->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (replies_->wake_fd < 0 || epoll_fd_ < 0) {
    return runtime::resource_exhausted("data channel: cannot wait on connections: ", errno_text());
  }
  epoll_event listen_event{EPOLLIN, {.u64 = kListenId}};
  epoll_event wake_event{EPOLLIN, {.u64 = kWakeId}};
  if ((accepts && ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, server_.listen_fd_, &listen_event) != 0) ||
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, replies_->wake_fd, &wake_event) != 0) {
    return runtime::resource_exhausted("data channel: epoll: ", errno_text());
  }
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::system_error& e) {
    return runtime::resource_exhausted("data channel: cannot start its thread: ", e.what());
  }
  return runtime::ok_status();
}

DataServer::~DataServer() {
  stopping_ = true;
  // The accepting thread first: until it has ended, it may add threads.
  if (acceptor_) acceptor_->stop();
  for (auto& loop : loops_) loop->stop();
  loops_.clear();
  acceptor_.reset();
  ::close(listen_fd_);
}

void DataServer::Loop::run() {
  std::vector<epoll_event> events(64);
  while (!server_.stopping_) {
    // Wake for the nearest deadline: a handshake's or an idle connection's end, or the next
    // accept after a failed one.
    auto next = Clock::now() + std::chrono::seconds(1);
    for (const auto& [id, c] : connections_) {
      if (!c->waiting) next = std::min(next, c->deadline);
    }
    if (accepts_ && server_.accept_again_ != Clock::time_point{}) {
      next = std::min(next, server_.accept_again_);
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now());
    const int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()),
                               static_cast<int>(std::max<int64_t>(0, wait.count()) + 1));
    if (n < 0 && errno != EINTR) {
      runtime::log_error("data channel on port ", server_.port_, ": epoll_wait: ", errno_text());
      return;
    }
    for (int i = 0; i < n && !server_.stopping_; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == kListenId) {
        server_.accept_all(*this);
      } else if (id == kWakeId) {
        take_replies();
      } else if (auto it = connections_.find(id); it != connections_.end()) {
        on_event(*it->second, events[i].events);
      }
    }
    const auto now = Clock::now();
    if (accepts_ && server_.accept_again_ != Clock::time_point{} && now >= server_.accept_again_) {
      server_.accept_again_ = {};
      epoll_event listen_event{EPOLLIN, {.u64 = kListenId}};
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, server_.listen_fd_, &listen_event);
    }
    std::vector<uint64_t> idle;
    for (const auto& [id, c] : connections_) {
      if (!c->waiting && now >= c->deadline) idle.push_back(id);
    }
    for (uint64_t id : idle) {
      close(id, connections_.at(id)->phase == Connection::Phase::kFrames
                    ? ""
                    : "no proof of membership in time");
    }
  }
}

void DataServer::accept_all(Loop& acceptor) {
  for (;;) {
    sockaddr_in from{};
    socklen_t from_len = sizeof from;
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &from_len,
                             SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR || errno == ECONNABORTED) continue;
      // Out of descriptors or memory: the listener is fine and the shortage may pass. It stays
      // unwatched for a while, or its waiting connection would wake this thread at once again.
      runtime::log_warning("data channel on port ", port_, ": accept failed (", errno_text(),
                           "); retrying in ", backoff_.count(), " ms");
      epoll_event none{0, {.u64 = kListenId}};
      ::epoll_ctl(acceptor.epoll_fd(), EPOLL_CTL_MOD, listen_fd_, &none);
      accept_again_ = Clock::now() + backoff_;
      backoff_ = std::min(backoff_ * 2, std::chrono::milliseconds(1000));
      return;
    }
    backoff_ = std::chrono::milliseconds(10);
    const std::string peer = peer_of(from);
    if (open_ >= options_.max_connections) {
      runtime::log_warning("data channel on port ", port_, ": refused ", peer, ": ",
                           options_.max_connections, " connections already");
      ::close(fd);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto c = std::make_unique<Connection>();
    c->id = next_id_++;
    c->fd = fd;
    c->peer = peer;
    const bool members_only = runtime_.secret() != nullptr;
    c->phase = members_only ? Connection::Phase::kHello : Connection::Phase::kFrames;
    c->deadline =
        Clock::now() +
        (members_only
             ? std::chrono::duration_cast<std::chrono::milliseconds>(JobSecret::kHandshakeTimeout)
             : options_.idle_timeout);
    ++open_;
    Loop& to = loop_for_next();
    to.adopt(std::move(c), acceptor);
  }
}

void DataServer::Loop::adopt(std::unique_ptr<Connection> c, Loop& caller) {
  ++load_;
  c->later = [replies = replies_, id = c->id](ShardReply r) { replies->post(id, std::move(r)); };
  if (&caller == this) return add(std::move(c));
  {
    std::lock_guard<std::mutex> lock(replies_->mu);
    replies_->arriving.push_back(std::move(c));
  }
  replies_->wake();
}

void DataServer::Loop::add(std::unique_ptr<Connection> c) {
  Connection& added = *c;
  connections_.emplace(c->id, std::move(c));
  watch(added);
}

void DataServer::Loop::watch(Connection& c) {
  uint32_t want = 0;
  if (!c.waiting && c.out.empty()) want |= EPOLLIN;
  if (!c.out.empty()) want |= EPOLLOUT;
  if (c.registered && want == c.watching) return;
  epoll_event e{want, {.u64 = c.id}};
  ::epoll_ctl(epoll_fd_, c.registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c.fd, &e);
  c.registered = true;
  c.watching = want;
}

void DataServer::Loop::close(uint64_t id, const std::string& why) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  if (!why.empty()) {
    runtime::log_warning("data channel on port ", server_.port_, ": refused ", it->second->peer,
                         ": ", why);
  }
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second->fd, nullptr);
  ::close(it->second->fd);
  connections_.erase(it);
  --load_;
  --server_.open_;
}

void DataServer::Loop::on_event(Connection& c, uint32_t events) {
  const uint64_t id = c.id;
  // Reset or closed both ways: reported whatever is watched, so it must end the connection now
  // (a call awaiting its reply included: the reply has nowhere to go).
  if (events & (EPOLLHUP | EPOLLERR)) return close(id);
  if ((events & EPOLLOUT) && !write_out(c)) return close(id);
  if (events & EPOLLIN) {
    if (c.phase == Connection::Phase::kFrames) {
      read_frames(c);
    } else {
      read_handshake(c);
    }
  }
}

void DataServer::Loop::read_handshake(Connection& c) {
  const uint64_t id = c.id;
  const size_t want =
      c.phase == Connection::Phase::kHello ? JobSecret::kHelloBytes : JobSecret::kProofBytes;
  char buf[64];
  const ssize_t n = ::recv(c.fd, buf, want - c.handshake.size(), 0);
  if (n == 0) return close(id, "gone during the handshake");
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
    return close(id, "gone during the handshake");
  }
  c.handshake.append(buf, static_cast<size_t>(n));
  if (c.handshake.size() < want) return;
  const JobSecret& secret = *server_.runtime_.secret();
  if (c.phase == Connection::Phase::kHello) {
    c.hello = std::move(c.handshake);
    c.handshake.clear();
    if (std::string why = secret.answer_hello(c.hello, &c.answer); !why.empty()) {
      return close(id, why);
    }
    c.out.emplace_back();
    c.out.back().raw = c.answer;
    c.out.back().frame_raw();
    c.phase = Connection::Phase::kProof;
    if (!write_out(c)) return close(id, "gone during the handshake");
    return watch(c);
  }
  if (std::string why = secret.check_proof(c.hello, c.answer, c.handshake); !why.empty()) {
    return close(id, why);
  }
  c.phase = Connection::Phase::kFrames;
  c.handshake.clear();
  c.deadline = Clock::now() + server_.options_.idle_timeout;
  read_frames(c);  // a first frame may have come with the proof
}

// Reads what has come of the current frame; a whole one runs, and reading stops until its reply
// is out: a peer that does not read its replies is not read either, and holds one reply at
// most.
void DataServer::Loop::read_frames(Connection& c) {
  const uint64_t id = c.id;
  const DataServerOptions& options = server_.options_;
  while (!c.waiting && c.out.empty()) {
    const uint64_t before = c.reader.received();
    runtime::Bytes call;
    const FrameReader::Got got = c.reader.read(c.fd, options.max_frame_bytes, &call);
    if (c.reader.received() != before) c.deadline = Clock::now() + options.idle_timeout;
    if (got == FrameReader::Got::kEnd) return close(id);
    if (got == FrameReader::Got::kAgain) break;
    if (options.follow_incoming_cpu) follow(c);
    std::optional<ShardReply> reply;
    try {
      reply = server_.handler_(call, c.later);
    } catch (const std::exception& e) {  // out of memory in a kernel, say: this call's end
      runtime::log_warning("data channel on port ", server_.port_, ": a call from ", c.peer,
                           " failed: ", e.what());
      return close(id);
    }
    if (!reply) {
      c.waiting = true;
      break;
    }
    queue_reply(c, std::move(*reply));
    if (!write_out(c)) return close(id);
  }
  watch(c);
}

// DataServerOptions::follow_incoming_cpu. Asked each call (a system call; calls are
// milliseconds apart), so the thread moves when the peer does, and back to every core while it
// serves more than one connection, whose packets may come to different ones.
void DataServer::Loop::follow(const Connection& c) {
  if (CPU_COUNT(&server_.cores_) < 2) return;
  int cpu = -1;
  socklen_t len = sizeof cpu;
  if (connections_.size() != 1 ||
      ::getsockopt(c.fd, SOL_SOCKET, SO_INCOMING_CPU, &cpu, &len) != 0 || cpu < 0 ||
      cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &server_.cores_)) {
    cpu = -1;
  }
  if (cpu == on_cpu_) return;
  cpu_set_t set = server_.cores_;
  if (cpu >= 0) {
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
  }
  if (::sched_setaffinity(0, sizeof set, &set) == 0) on_cpu_ = cpu;
}

void DataServer::Loop::queue_reply(Connection& c, ShardReply reply) {
  c.out.emplace_back();
  c.out.back().message = std::move(reply.message);
  c.out.back().tensors = std::move(reply.outputs);
  c.out.back().frame();
  c.deadline = Clock::now() + server_.options_.idle_timeout;
}

void DataServer::Loop::take_replies() {
  uint64_t count = 0;
  if (::read(replies_->wake_fd, &count, sizeof count) < 0) {
    // Nothing to read: another event drained it first.
  }
  std::vector<std::pair<uint64_t, ShardReply>> ready;
  std::vector<std::unique_ptr<Connection>> arriving;
  {
    std::lock_guard<std::mutex> lock(replies_->mu);
    ready.swap(replies_->ready);
    arriving.swap(replies_->arriving);
  }
  for (auto& c : arriving) add(std::move(c));
  for (auto& [id, reply] : ready) {
    auto it = connections_.find(id);
    if (it == connections_.end() || !it->second->waiting) continue;  // the peer left meanwhile
    Connection& c = *it->second;
    queue_reply(c, std::move(reply));
    c.waiting = false;
    if (!write_out(c)) {
      close(id);
      continue;
    }
    read_frames(c);  // the next call may be here already
  }
}

bool DataServer::Loop::write_out(Connection& c) {
  while (!c.out.empty()) {
    const ssize_t n = c.out.front().write(c.fd);
    if (n < 0) return false;
    if (n > 0) c.deadline = Clock::now() + server_.options_.idle_timeout;
    if (!c.out.front().done()) break;
    c.out.pop_front();
  }
  watch(c);
  return true;
}

runtime::Result<std::shared_ptr<DataChannel>> DataChannel::connect(
    Runtime& runtime, const std::string& host, uint16_t port, std::chrono::milliseconds timeout) {
  const std::string peer = host + ":" + std::to_string(port);
  TROUPE_ASSIGN_OR_RETURN(sockaddr_in addr, resolve(host, port));
  TROUPE_ASSIGN_OR_RETURN(std::shared_ptr<ChannelPoller> poller, runtime.channel_poller());
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
  // From here on the poller's thread reads as bytes come, and a call writes what the socket
  // takes at once.
  if (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
    const std::string why = errno_text();
    ::close(fd);
    return runtime::unavailable("data channel to ", peer, ": ", why);
  }
  std::shared_ptr<DataChannel> channel(new DataChannel(fd, poller, peer, timeout));
  Status added = poller->add(channel.get(), fd);
  if (!added.ok()) return added.with_context("data channel to " + peer);
  return channel;
}

DataChannel::DataChannel(int fd, std::shared_ptr<ChannelPoller> poller, std::string peer,
                         std::chrono::milliseconds timeout)
    : fd_(fd), poller_(std::move(poller)), peer_(std::move(peer)), timeout_(timeout) {}

DataChannel::~DataChannel() {
  poller_->remove(id_, fd_);
  ::close(fd_);
}

void DataChannel::call(ChannelCall call, const caf::actor& reply_to, uint64_t tag) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!broken_.empty() || !abandoned_.empty()) {
    caf::anon_send(reply_to, channel_reply_atom::value, tag,
                   "data channel to " + peer_ + ": " + (broken_.empty() ? abandoned_ : broken_));
    return;
  }
  // Queued before it goes: its reply may come before the write returns.
  waiting_.push_back({caf::actor_cast<caf::weak_actor_ptr>(reply_to), tag, Clock::now()});
  out_.emplace_back();
  out_.back().message = std::move(call.message);
  out_.back().tensors = std::move(call.inputs);
  out_.back().frame();
  calls_.fetch_add(1, std::memory_order_relaxed);
  sent_.fetch_add(out_.back().bytes, std::memory_order_relaxed);
  if (out_.size() > 1) return;  // behind another call's bytes: the poller writes both
  if (!write_pending()) return;
  watch_locked();  // the rest, if any, waits for room in the socket: the poller's to write
}

bool DataChannel::write_pending() {
  while (!out_.empty()) {
    if (out_.front().write(fd_) < 0) {
      fail_locked("sending: " + errno_text());
      return false;
    }
    if (!out_.front().done()) return true;
    out_.pop_front();
  }
  return true;
}

void DataChannel::abandon(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  abandoned_ = why;
  for (Waiting& w : waiting_) {
    if (caf::strong_actor_ptr to = w.to.lock()) {
      caf::anon_send(caf::actor_cast<caf::actor>(to), channel_reply_atom::value, w.tag,
                     "data channel to " + peer_ + ": " + why);
    }
    w.to.reset();
  }
}

void DataChannel::resume() {
  std::lock_guard<std::mutex> lock(mu_);
  abandoned_.clear();
}

void DataChannel::fail(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_locked(why);
}

// Every call waiting gets the error, and no later call may use the stream (a half-done
// exchange leaves it out of step).
void DataChannel::fail_locked(const std::string& why) {
  if (broken_.empty()) broken_ = why;
  ::shutdown(fd_, SHUT_RDWR);
  const std::string message = "data channel to " + peer_ + ": " + broken_;
  for (const Waiting& w : waiting_) {
    if (caf::strong_actor_ptr to = w.to.lock()) {
      caf::anon_send(caf::actor_cast<caf::actor>(to), channel_reply_atom::value, w.tag, message);
    }
  }
  waiting_.clear();
  out_.clear();
  watch_locked();  // nothing more: a shut socket would report itself for ever
}

void DataChannel::watch_locked() {
  const uint32_t want = !broken_.empty() ? 0 : out_.empty() ? EPOLLIN : EPOLLIN | EPOLLOUT;
  if (want == watching_) return;
  watching_ = want;
  poller_->watch(id_, fd_, want);
}

std::chrono::steady_clock::time_point DataChannel::deadline() {
  std::lock_guard<std::mutex> lock(mu_);
  return (waiting_.empty() ? Clock::now() : waiting_.front().since) + timeout_;
}

// Writes what calls left, reads the replies and hands each to its caller.
void DataChannel::on_events(uint32_t events) {
  if (events & EPOLLOUT) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!write_pending()) return;
    watch_locked();
  }
  if (!(events & (EPOLLIN | EPOLLERR | EPOLLHUP))) return;
  for (;;) {
    runtime::Bytes reply;
    const FrameReader::Got got = reader_.read(fd_, DataServerOptions{}.max_frame_bytes, &reply);
    if (got == FrameReader::Got::kAgain) return;
    if (got == FrameReader::Got::kEnd) return fail("receiving: " + reader_.why());
    received_.fetch_add(8 + reply.size, std::memory_order_relaxed);
    Waiting w;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (waiting_.empty()) return fail_locked("a reply to no call");
      w = std::move(waiting_.front());
      waiting_.pop_front();
      if (!waiting_.empty()) waiting_.front().since = Clock::now();
    }
    if (caf::strong_actor_ptr to = w.to.lock()) {
      caf::anon_send(caf::actor_cast<caf::actor>(to), channel_reply_atom::value, w.tag,
                     std::move(reply));
    }
  }
}

runtime::Result<std::shared_ptr<ChannelPoller>> ChannelPoller::start() {
  const int epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  const int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  const std::string why = errno_text();
  if (epoll_fd < 0 || wake < 0) {
    if (epoll_fd >= 0) ::close(epoll_fd);
    if (wake >= 0) ::close(wake);
    return runtime::resource_exhausted("data channels: cannot wait on connections: ", why);
  }
  std::shared_ptr<ChannelPoller> poller(new ChannelPoller(epoll_fd, wake));
  epoll_event wake_event{EPOLLIN, {.u64 = 0}};
  if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake, &wake_event) != 0) {
    return runtime::resource_exhausted("data channels: epoll: ", errno_text());
  }
  try {
    poller->thread_ = std::thread([p = poller.get()] { p->run(); });
  } catch (const std::system_error& e) {
    return runtime::resource_exhausted("data channels: cannot start their thread: ", e.what());
  }
  return poller;
}

ChannelPoller::~ChannelPoller() {
  stopping_ = true;
  const uint64_t one = 1;
  if (::write(wake_fd_, &one, sizeof one) != sizeof one) {
    // Only a full counter refuses, and the thread reads it to zero at every wake-up.
  }
  if (thread_.joinable()) thread_.join();
  ::close(epoll_fd_);
  ::close(wake_fd_);
}

Status ChannelPoller::add(DataChannel* channel, int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_id_++;
  channel->id_ = id;
  channel->watching_ = EPOLLIN;
  epoll_event e{EPOLLIN, {.u64 = id}};
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &e) != 0) {
    return runtime::resource_exhausted("epoll: ", errno_text());
  }
  channels_.emplace(id, channel);
  return runtime::ok_status();
}

void ChannelPoller::remove(uint64_t id, int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  if (channels_.erase(id) > 0) ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
}

void ChannelPoller::watch(uint64_t id, int fd, uint32_t events) {
  if (events == 0) {
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    return;
  }
  epoll_event e{events, {.u64 = id}};
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &e);
}

// Between events it looks at least once a second: a call made while it waited is bounded too.
void ChannelPoller::run() {
  std::vector<epoll_event> events(64);
  auto next = Clock::now() + std::chrono::seconds(1);
  while (!stopping_) {
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now());
    const int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()),
                               static_cast<int>(std::max<int64_t>(0, wait.count()) + 1));
    if (n < 0 && errno != EINTR) {
      runtime::log_error("data channels: epoll_wait: ", errno_text());
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < n && !stopping_; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == 0) {
        uint64_t count = 0;
        if (::read(wake_fd_, &count, sizeof count) != sizeof count) {
          // Nothing to read: another wake-up took it.
        }
      } else if (auto it = channels_.find(id); it != channels_.end()) {
        it->second->on_events(events[i].events);
      }
    }
    const auto now = Clock::now();
    next = now + std::chrono::seconds(1);
    for (const auto& [id, channel] : channels_) {
      const auto due = channel->deadline();
      if (due <= now) {
        channel->fail("receiving: timed out");
      } else {
        next = std::min(next, due);
      }
    }
  }
}

}  // namespace troupe::actors
