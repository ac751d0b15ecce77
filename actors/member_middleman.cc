#include "actors/member_middleman.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/io/all.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman_actor_impl.hpp>
#include <caf/io/network/acceptor_impl.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/interfaces.hpp>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "actors/net/handshake_budget.h"
#include "actors/net/sealed_scribe.h"
#include "runtime/log.h"

namespace troupe::actors {

namespace {

using caf::io::network::default_multiplexer;
using caf::io::network::native_socket;

std::string peer_of(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "?";
  char ip[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(ntohs(a.sin_port));
}

// A connection that passed the handshake, with its keys.
struct Passed {
  int fd = -1;
  std::shared_ptr<const net::LinkKeys> keys;
};

// The listening side: accepts on the public port, checks each peer on a thread of its own,
// queues those that passed and wakes the multiplexer through a pipe, whose read end the
// doorman watches.
class Gate {
 public:
  Gate(int listen_fd, std::shared_ptr<const JobSecret> secret, Introduction self,
       std::chrono::milliseconds handshake_timeout)
      : listen_fd_(listen_fd),
        secret_(std::move(secret)),
        self_(std::move(self)),
        handshake_timeout_(handshake_timeout),
        budget_(net::handshake_budget(self_.members.size(), kMaxHandshakes),
                net::handshake_budget(self_.members.size(), kMaxHandshakesPerSource)) {
    if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) wake_[0] = wake_[1] = -1;
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~Gate() {
    stopping_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    acceptor_.join();
    std::unique_lock<std::mutex> lock(mu_);
    for (const auto& [id, fd] : checking_) ::shutdown(fd, SHUT_RDWR);
    idle_.wait(lock, [this] { return checking_.empty(); });
    for (const Passed& p : passed_) ::close(p.fd);
    ::close(listen_fd_);
    if (wake_[1] >= 0) ::close(wake_[1]);
    // wake_[0] belongs to the doorman's acceptor, which closes it.
  }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  int wake_fd() const { return wake_[0]; }
  int listen_fd() const { return listen_fd_; }
  // A connection that passed, or one with fd -1.
  Passed take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (passed_.empty()) return {};
    Passed p = std::move(passed_.front());
    passed_.pop_front();
    return p;
  }
  // The keys of the connection GatePolicy took last (the acceptor hands on only its socket).
  std::shared_ptr<const net::LinkKeys> taken_keys;

 private:
  void accept_loop() {
    while (!stopping_) {
      sockaddr_in from{};
      socklen_t from_len = sizeof from;
      const int fd =
          ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &from_len, SOCK_CLOEXEC);
      if (fd < 0) {
        if (stopping_ || errno == EBADF || errno == EINVAL) return;
        if (errno != EINTR && errno != ECONNABORTED) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));  // EMFILE and the like
        }
        continue;
      }
      const std::string peer = peer_of(fd);
      std::unique_lock<std::mutex> lock(mu_);
      // Over the budget, the oldest handshake (of this source, when it holds its share) ends:
      // its thread sees the socket shut and lets go. Its slot frees as it does; meanwhile the
      // threads may outnumber the budget by those on their way out.
      const uint64_t id = next_id_++;
      if (const uint64_t evict = budget_.admit(id, from.sin_addr.s_addr); evict != 0) {
        ::shutdown(checking_.at(evict), SHUT_RDWR);
        if (auto more = refusals_.allow()) {
          runtime::log_warning(
              "ended a handshake on port ", local_port(), " for a newer one (too many under way)",
              *more > 0 ? " (and " + std::to_string(*more) + " more not logged)" : std::string());
        }
      }
      checking_.emplace(id, fd);
      lock.unlock();
      try {
        std::thread([this, id, fd, peer] { check(id, fd, peer); }).detach();
      } catch (const std::system_error&) {
        done_checking(id);
        ::close(fd);
      }
    }
  }

  void check(uint64_t id, int fd, const std::string& peer) {
    auto keys = std::make_shared<net::LinkKeys>();
    const std::string refused = secret_->check_member(fd, self_, keys.get(), handshake_timeout_);
    // Uncounted before its socket closes: an eviction never shuts a descriptor reused since.
    done_checking(id);
    if (!refused.empty()) {
      if (auto more = refusals_.allow()) {
        runtime::log_warning(
            "refused ", peer, " on port ", local_port(), ": ", refused,
            *more > 0 ? " (and " + std::to_string(*more) + " more not logged)" : std::string());
      }
      ::close(fd);
      return;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::lock_guard<std::mutex> lock(mu_);
    passed_.push_back({fd, std::move(keys)});
    const char byte = 1;
    if (::write(wake_[1], &byte, 1) != 1) {
      // The pipe is full of wake-ups already: the doorman drains the queue on each.
    }
  }

  void done_checking(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    budget_.done(id);
    checking_.erase(id);
    idle_.notify_all();
  }

  uint16_t local_port() const {
    sockaddr_in a{};
    socklen_t len = sizeof a;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    return ntohs(a.sin_port);
  }

  int listen_fd_;
  std::shared_ptr<const JobSecret> secret_;
  const Introduction self_;
  const std::chrono::milliseconds handshake_timeout_;
  int wake_[2] = {-1, -1};
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::condition_variable idle_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, int> checking_;  // handshakes under way: their sockets
  net::HandshakeBudget budget_;
  net::LogLimiter refusals_;
  std::deque<Passed> passed_;
};

// What CAF's acceptor calls on a readable wake-up pipe: the next connection that passed.
struct GatePolicy {
  std::shared_ptr<Gate> gate;
  bool try_accept(native_socket& result, native_socket wake_fd) {
    char buf[64];
    while (::read(wake_fd, buf, sizeof buf) > 0) {
    }
    Passed p = gate->take();
    if (p.fd < 0) return false;
    result = p.fd;
    gate->taken_keys = std::move(p.keys);
    caf::io::network::nonblocking(result, true);
    return true;
  }
};

class GateDoorman : public caf::io::doorman {
 public:
  GateDoorman(default_multiplexer& mpx, std::shared_ptr<Gate> gate)
      : doorman(caf::io::network::accept_hdl_from_socket(gate->wake_fd())),
        gate_(gate),
        acceptor_(mpx, gate->wake_fd(), GatePolicy{gate}) {}

  bool new_connection() override {
    if (detached()) return false;
    auto& mpx = acceptor_.backend();
    auto scribe = net::make_sealed_scribe(mpx, acceptor_.accepted_socket(), *gate_->taken_keys);
    gate_->taken_keys.reset();
    auto hdl = scribe->hdl();
    parent()->add_scribe(std::move(scribe));
    // More may have passed than the one wake-up read: take them all.
    for (Passed p; (p = gate_->take()).fd >= 0;) {
      caf::io::network::nonblocking(p.fd, true);
      auto more = net::make_sealed_scribe(mpx, p.fd, *p.keys);
      auto more_hdl = more->hdl();
      parent()->add_scribe(std::move(more));
      if (!doorman::new_connection(&mpx, more_hdl)) return false;
    }
    return doorman::new_connection(&mpx, hdl);
  }
  void graceful_shutdown() override {
    acceptor_.graceful_shutdown();
    detach(&acceptor_.backend(), false);
  }
  void launch() override { acceptor_.start(this); }
  std::string addr() const override {
    auto x = caf::io::network::local_addr_of_fd(gate_->listen_fd());
    return x ? *x : std::string();
  }
  uint16_t port() const override {
    auto x = caf::io::network::local_port_of_fd(gate_->listen_fd());
    return x ? *x : 0;
  }
  void add_to_loop() override { acceptor_.activate(this); }
  void remove_from_loop() override { acceptor_.passivate(); }

 private:
  std::shared_ptr<Gate> gate_;
  caf::io::network::acceptor_impl<GatePolicy> acceptor_;
};

class MemberMiddleman : public caf::io::middleman_actor_impl {
 public:
  MemberMiddleman(caf::actor_config& cfg, caf::actor broker,
                  std::shared_ptr<const JobSecret> secret, Introduction self,
                  std::shared_ptr<const DialBook> book, std::chrono::milliseconds handshake_timeout)
      : caf::io::middleman_actor_impl(cfg, std::move(broker)),
        secret_(std::move(secret)),
        self_(std::move(self)),
        book_(std::move(book)),
        handshake_timeout_(handshake_timeout) {}

  const char* name() const override { return "troupe::member_middleman"; }

 protected:
  // Runs on this actor's own thread (it is detached): the handshake may block.
  caf::expected<caf::io::scribe_ptr> connect(const std::string& host, uint16_t port) override {
    auto fd = caf::io::network::new_tcp_connection(host, port);
    if (!fd) return std::move(fd.error());
    caf::io::network::nonblocking(*fd, true);
    net::LinkKeys keys;
    Introduction me = self_;
    me.dialled = book_->expected(host, port);
    const std::string refused = secret_->prove_member(*fd, me, &keys);
    if (!refused.empty()) {
      ::close(*fd);
      runtime::log_warning("connecting to ", host, ":", port, ": ", refused);
      return caf::make_error(caf::sec::cannot_connect_to_node,
                             host + ":" + std::to_string(port) + ": " + refused);
    }
    return net::make_sealed_scribe(mpx(), *fd, keys);
  }

  caf::expected<caf::io::doorman_ptr> open(uint16_t port, const char* addr, bool reuse) override {
    auto fd = caf::io::network::new_tcp_acceptor_impl(port, addr, reuse);
    if (!fd) return std::move(fd.error());
    // The gate's own thread accepts: blocking, as the handshakes are.
    int flags = ::fcntl(*fd, F_GETFL, 0);
    ::fcntl(*fd, F_SETFL, flags & ~O_NONBLOCK);
    // CAF delivers any message to any actor a peer can name: a reader cannot be held to reads
    // here, so only writers come in (a reader reads on a ps's data port, call by call).
    Introduction writers_only = self_;
    writers_only.readers = false;
    auto gate = std::make_shared<Gate>(*fd, secret_, std::move(writers_only), handshake_timeout_);
    if (gate->wake_fd() < 0) return caf::make_error(caf::sec::cannot_open_port, "no pipe");
    return caf::make_counted<GateDoorman>(mpx(), std::move(gate));
  }

 private:
  default_multiplexer& mpx() {
    return static_cast<default_multiplexer&>(system().middleman().backend());
  }
  std::shared_ptr<const JobSecret> secret_;
  const Introduction self_;
  std::shared_ptr<const DialBook> book_;
  const std::chrono::milliseconds handshake_timeout_;
};

}  // namespace

void DialBook::expect(const std::string& host, uint16_t port, const std::string& task) {
  std::lock_guard<std::mutex> lock(mu_);
  tasks_[host + ":" + std::to_string(port)] = task;
}

std::string DialBook::expected(const std::string& host, uint16_t port) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tasks_.find(host + ":" + std::to_string(port));
  return it == tasks_.end() ? std::string() : it->second;
}

caf::actor spawn_member_middleman(caf::actor_system& system,
                                  std::shared_ptr<const JobSecret> secret, Introduction self,
                                  std::shared_ptr<const DialBook> book,
                                  std::chrono::milliseconds handshake_timeout) {
  auto broker = system.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  auto mm = system.spawn<MemberMiddleman, caf::detached + caf::hidden>(
      std::move(broker), std::move(secret), std::move(self), std::move(book), handshake_timeout);
  return caf::actor_cast<caf::actor>(mm);
}

}  // namespace troupe::actors
