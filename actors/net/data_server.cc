#include "actors/net/data_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <map>
#include <string>

#include "actors/job_secret.h"
#include "actors/net/frame.h"
#include "actors/net/io_thread.h"
#include "actors/net/socket.h"
#include "runtime/log.h"

namespace troupe::actors::net {

using runtime::Status;

namespace {

using Clock = std::chrono::steady_clock;
// A socket as Asio waits on it; our own code reads and writes it (net/frame.h).
using Descriptor = boost::asio::posix::stream_descriptor;
using Wait = Descriptor::wait_type;

}  // namespace

// A peer's connection, as its server thread sees it.
struct DataServer::Connection {
  enum class Phase { kHello, kProof, kFrames };
  ~Connection() {
    if (!socket) ::close(fd);  // not yet adopted; once it is, `socket` owns the descriptor
  }
  uint64_t id = 0;
  int fd = -1;
  std::unique_ptr<Descriptor> socket;  // on the serving thread's loop
  std::string peer;
  Peer member;  // who it proved to be, and so what it may ask (a writer without a job secret)
  Phase phase = Phase::kFrames;
  std::string hello, answer, handshake;  // the job secret's exchange, as far as it went
  std::unique_ptr<Sealer> sealer;        // once a member proved itself: every frame sealed
  std::unique_ptr<Opener> opener;
  FrameReader reader;
  bool waiting = false;        // for a call's reply: read nothing more until it is out
  std::deque<OutFrame> out;    // to write, in order
  bool reading = false;        // an async_wait for bytes to read is pending
  bool writing = false;        // one for room to write
  Clock::time_point deadline;  // the handshake's end, or the idle limit
  Later later;                 // how a reply given later reaches it
};

// One of the server's threads (an Asio loop, net/io_thread.h) and the connections it serves.
// Everything but adopt() and a reply's post runs on its thread.
class DataServer::Loop {
 public:
  explicit Loop(DataServer& server) : server_(server) {}
  ~Loop() {
    stop();
    connections_.clear();  // while the loop's context, which their sockets are on, lives
    if (listener_) listener_->release();  // the server's to close
    listener_.reset();
    timer_.reset();
  }
  // `accepts`: it also watches the listening socket.
  Status start(bool accepts);
  void stop() {
    if (io_) io_->stop();
  }
  // Serves `c` from now on; from any thread. How many it serves counts `c` at once.
  void adopt(std::unique_ptr<Connection> c, Loop& caller);
  int load() const { return load_; }
  // After a failed accept: the listener is watched again at server_.accept_again_.
  void pause_accepting() { accepting_ = false; }
  // Serves `c` from now on; on the loop's thread. The acceptor runs handshakes so.
  void add(std::unique_ptr<Connection> c);
  void close(uint64_t id, const std::string& why = "");

 private:
  void wait_accept();
  void wait_for(Connection& c, Wait what);
  void on_ready(uint64_t id, Wait what, const boost::system::error_code& error);
  void read_handshake(Connection& c);
  void read_frames(Connection& c);
  void give_reply(uint64_t id, ShardReply reply);
  void queue_reply(Connection& c, ShardReply reply);
  bool write_out(Connection& c);  // false: the peer is gone
  void watch(Connection& c);      // waits for what `c` needs now
  void follow(const Connection& c);
  // The timer wakes the loop at the nearest deadline: a handshake's or an idle connection's
  // end, or the next accept after a failed one; and at least once a second.
  void schedule();
  void expire();

  DataServer& server_;
  std::unique_ptr<IoThread> io_;  // first in, last out: the rest lives on its context
  std::unique_ptr<boost::asio::steady_timer> timer_;
  bool timer_armed_ = false;
  Clock::time_point timer_at_{};
  std::unique_ptr<Descriptor> listener_;  // the acceptor's alone
  bool accepting_ = false;
  std::map<uint64_t, std::unique_ptr<Connection>> connections_;  // the thread's alone
  std::atomic<int> load_{0};  // connections served and handed over
  int on_cpu_ = -1;           // the core it follows, or -1: the process's
};

runtime::Result<std::unique_ptr<DataServer>> DataServer::listen(Runtime& runtime,
                                                                const std::string& host,
                                                                uint16_t port,
                                                                DataServerOptions options) {
  TROUPE_ASSIGN_OR_RETURN(Listening listening, listen_tcp(host, port));
  return std::unique_ptr<DataServer>(
      new DataServer(runtime, listening.fd, listening.port, options));
}

DataServer::DataServer(Runtime& runtime, int listen_fd, uint16_t port, DataServerOptions options)
    : runtime_(runtime),
      listen_fd_(listen_fd),
      port_(port),
      options_(options),
      handshakes_(options.max_handshakes, options.max_handshakes_per_source) {
  if (::sched_getaffinity(0, sizeof cores_, &cores_) != 0) CPU_ZERO(&cores_);
}

Status DataServer::serve(Handler handler, Closed closed) {
  handler_ = std::move(handler);
  closed_ = std::move(closed);
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
  TROUPE_ASSIGN_OR_RETURN(io_,
                          IoThread::start("data channel on port " + std::to_string(server_.port_)));
  timer_ = std::make_unique<boost::asio::steady_timer>(io_->context());
  if (accepts) {
    listener_ = std::make_unique<Descriptor>(io_->context());
    boost::system::error_code error;
    listener_->assign(server_.listen_fd_, error);
    if (error) return runtime::resource_exhausted("data channel: ", error.message());
  }
  io_->post([this, accepts] {
    if (accepts) wait_accept();
    schedule();
  });
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

void DataServer::Loop::wait_accept() {
  accepting_ = true;
  listener_->async_wait(Descriptor::wait_read, [this](const boost::system::error_code& error) {
    if (error || server_.stopping_) return;
    server_.accept_all(*this);
    if (accepting_) wait_accept();
    schedule();
  });
}

void DataServer::Loop::schedule() {
  auto next = Clock::now() + std::chrono::seconds(1);
  for (const auto& [id, c] : connections_) {
    if (!c->waiting) next = std::min(next, c->deadline);
  }
  if (!accepting_ && server_.accept_again_ != Clock::time_point{}) {
    next = std::min(next, server_.accept_again_);
  }
  if (timer_armed_ && timer_at_ <= next) return;
  timer_armed_ = true;
  timer_at_ = next;
  timer_->expires_at(next);  // a wait set for later ends, aborted
  timer_->async_wait([this](const boost::system::error_code& error) {
    if (error) return;  // set again, sooner
    timer_armed_ = false;
    expire();
    schedule();
  });
}

void DataServer::Loop::expire() {
  const auto now = Clock::now();
  if (listener_ && !accepting_ && server_.accept_again_ != Clock::time_point{} &&
      now >= server_.accept_again_) {
    server_.accept_again_ = {};
    wait_accept();
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
      acceptor.pause_accepting();
      accept_again_ = Clock::now() + backoff_;
      backoff_ = std::min(backoff_ * 2, std::chrono::milliseconds(1000));
      return;
    }
    backoff_ = std::chrono::milliseconds(10);
    const std::string peer = peer_of(from);
    const bool members_only = runtime_.secret() != nullptr;
    if (!members_only && open_ >= options_.max_connections) {
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
    if (!members_only) {
      c->deadline = Clock::now() + options_.idle_timeout;
      ++open_;
      Loop& to = loop_for_next();
      to.adopt(std::move(c), acceptor);
      continue;
    }
    // A stranger until it proves itself: its handshake runs here, within the budget.
    c->phase = Connection::Phase::kHello;
    c->deadline = Clock::now() + options_.handshake_timeout;
    const uint64_t evict = handshakes_.admit(c->id, from.sin_addr.s_addr);
    if (evict != 0) acceptor.close(evict, "ended for a newer handshake (too many under way)");
    acceptor.add(std::move(c));
  }
}

void DataServer::Loop::adopt(std::unique_ptr<Connection> c, Loop& caller) {
  ++load_;
  c->member.link = c->id;
  // The reply's post holds the loop's context, not the loop: once the loop has stopped, a
  // reply posted to it is dropped unrun.
  c->later = [io = io_->shared_context(), loop = this, id = c->id](ShardReply r) {
    boost::asio::post(
        *io, [loop, id, r = std::move(r)]() mutable { loop->give_reply(id, std::move(r)); });
  };
  if (&caller == this) return add(std::move(c));
  io_->post([this, c = std::move(c)]() mutable { add(std::move(c)); });
}

void DataServer::Loop::add(std::unique_ptr<Connection> c) {
  auto socket = std::make_unique<Descriptor>(io_->context());
  boost::system::error_code error;
  socket->assign(c->fd, error);
  const uint64_t id = c->id;
  if (!error) c->socket = std::move(socket);
  Connection& added = *c;
  connections_.emplace(id, std::move(c));
  if (error) return close(id, "cannot wait on its socket: " + error.message());
  // Reset, or closed both ways: reported whatever else it waits for, so the connection ends
  // now (a call awaiting its reply included: the reply has nowhere to go).
  added.socket->async_wait(Descriptor::wait_error, [this, id](const boost::system::error_code& e) {
    if (e != boost::asio::error::operation_aborted) close(id);
  });
  watch(added);
  schedule();
}

void DataServer::Loop::watch(Connection& c) {
  if (!c.waiting && c.out.empty()) wait_for(c, Descriptor::wait_read);
  if (!c.out.empty()) wait_for(c, Descriptor::wait_write);
}

void DataServer::Loop::wait_for(Connection& c, Wait what) {
  bool& pending = what == Descriptor::wait_read ? c.reading : c.writing;
  if (pending) return;
  pending = true;
  c.socket->async_wait(what, [this, id = c.id, what](const boost::system::error_code& error) {
    on_ready(id, what, error);
  });
}

void DataServer::Loop::on_ready(uint64_t id, Wait what, const boost::system::error_code& error) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;  // closed meanwhile
  Connection& c = *it->second;
  (what == Descriptor::wait_read ? c.reading : c.writing) = false;
  if (error) return close(id);
  if (what == Descriptor::wait_write && !write_out(c)) return close(id);
  // After a write, only when a sealed connection's next call waits in its opener, which the
  // socket no longer shows (otherwise the read wait reports it).
  const bool in_opener = c.opener && c.opener->buffered() > 0;
  if ((what == Descriptor::wait_read || in_opener) && !c.waiting &&
      c.out.empty()) {  // else a wait set earlier: its bytes keep
    if (c.phase == Connection::Phase::kFrames) {
      read_frames(c);
    } else {
      read_handshake(c);
    }
  }
  if (connections_.count(id) == 0) return;
  watch(c);
  schedule();
}

void DataServer::Loop::close(uint64_t id, const std::string& why) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  const bool stranger = it->second->phase != Connection::Phase::kFrames;
  if (!why.empty()) {
    std::optional<uint64_t> more = stranger ? server_.refusals_.allow() : uint64_t{0};
    if (more) {
      runtime::log_warning(
          "data channel on port ", server_.port_, ": refused ", it->second->peer, ": ", why,
          *more > 0 ? " (and " + std::to_string(*more) + " more not logged)" : std::string());
    }
  }
  // Uncounted before the peer can see the close: a peer that reconnects at once must find
  // its slot free.
  if (stranger) {
    server_.handshakes_.done(id);
  } else {
    --load_;
    --server_.open_;
  }
  const Peer member = it->second->member;
  connections_.erase(it);  // its socket closes, and its waits end, aborted
  if (!stranger && server_.closed_) server_.closed_(member);
}

void DataServer::Loop::read_handshake(Connection& c) {
  const uint64_t id = c.id;
  const size_t want =
      c.phase == Connection::Phase::kHello ? JobSecret::kHelloBytes : JobSecret::kProofBytes;
  char buf[JobSecret::kHelloBytes];  // the longest step of a handshake
  const ssize_t n = ::recv(c.fd, buf, want - c.handshake.size(), 0);
  if (n == 0) return close(id, "gone during the handshake");
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
    return close(id, "gone during the handshake");
  }
  c.handshake.append(buf, static_cast<size_t>(n));
  if (c.phase == Connection::Phase::kHello && !JobSecret::may_start_hello(c.handshake)) {
    return close(id, "not a troupe member's handshake");
  }
  if (c.handshake.size() < want) return;
  const JobSecret& secret = *server_.runtime_.secret();
  if (c.phase == Connection::Phase::kHello) {
    c.hello = std::move(c.handshake);
    c.handshake.clear();
    if (std::string why = secret.answer_hello(c.hello, server_.runtime_.introduction(), &c.answer);
        !why.empty()) {
      return close(id, why);
    }
    c.out.emplace_back();
    c.out.back().raw = c.answer;
    c.out.back().frame_raw();
    c.phase = Connection::Phase::kProof;
    if (!write_out(c)) return close(id, "gone during the handshake");
    return watch(c);
  }
  LinkKeys keys;
  if (std::string why = secret.check_proof(c.hello, c.answer, c.handshake, &keys, &c.member);
      !why.empty()) {
    return close(id, why);
  }
  if (server_.open_ >= server_.options_.max_connections) {
    return close(
        id, std::to_string(server_.options_.max_connections) + " members' connections already");
  }
  // A member: served by a thread of the server's from now on, as a connection without a
  // secret is from the start. Its waits here end, aborted, and find no one.
  c.sealer = std::make_unique<Sealer>(keys.send);
  c.opener = std::make_unique<Opener>(keys.receive);
  c.handshake.clear();
  c.deadline = Clock::now() + server_.options_.idle_timeout;
  server_.handshakes_.done(id);
  ++server_.open_;
  auto it = connections_.find(id);
  std::unique_ptr<Connection> member = std::move(it->second);
  connections_.erase(it);
  member->socket->release();
  member->socket.reset();
  member->reading = member->writing = false;
  member->phase = Connection::Phase::kFrames;  // a first frame may have come with the proof
  server_.loop_for_next().adopt(std::move(member), *this);
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
    const FrameReader::Got got =
        c.reader.read(c.fd, options.max_frame_bytes, &call, c.opener.get());
    if (c.reader.received() != before) c.deadline = Clock::now() + options.idle_timeout;
    if (got == FrameReader::Got::kEnd) {
      return close(id, c.opener && c.opener->integrity_failed()
                           ? c.reader.why() + "; the connection is closed and nothing of it applied"
                           : "");
    }
    if (got == FrameReader::Got::kAgain) break;
    if (options.follow_incoming_cpu) follow(c);
    std::optional<ShardReply> reply;
    try {
      reply = server_.handler_(call, c.later, c.member);
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

void DataServer::Loop::give_reply(uint64_t id, ShardReply reply) {
  auto it = connections_.find(id);
  if (it == connections_.end() || !it->second->waiting) return;  // the peer left meanwhile
  Connection& c = *it->second;
  queue_reply(c, std::move(reply));
  c.waiting = false;
  if (!write_out(c)) return close(id);
  read_frames(c);  // the next call may be here already
  if (connections_.count(id) != 0) schedule();
}

bool DataServer::Loop::write_out(Connection& c) {
  while (!c.out.empty()) {
    const ssize_t n = c.out.front().write(c.fd, c.sealer.get());
    if (n < 0) return false;
    // A handshake's deadline stays: no byte extends it.
    if (n > 0 && c.phase == Connection::Phase::kFrames) {
      c.deadline = Clock::now() + server_.options_.idle_timeout;
    }
    if (!c.out.front().done()) break;
    c.out.pop_front();
  }
  watch(c);
  return true;
}

}  // namespace troupe::actors::net
