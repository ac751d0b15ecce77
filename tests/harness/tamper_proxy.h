// A TCP forward on 127.0.0.1 that flips one bit on the way: what a man in the middle, or a bad
// link, does to a member's connection after its handshake. Connections are numbered from 0 in
// the order they come; a flip names one connection, a direction, and the byte (counted from the
// connection's start in that direction) whose lowest bit it flips. Every other byte, and every
// other connection, passes unchanged.
//
//   testing::TamperProxy proxy(server_port, {{.connection = 0, .to_server = true, .at = 4096}});
//   ... dial proxy.port() instead of server_port;  proxy.flipped() == 1 once it happened
//
// Two threads per connection: a test tool. The destructor closes every socket and joins them.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace troupe::testing {

struct Flip {
  int connection = 0;
  bool to_server = true;
  uint64_t at = 0;
};

class TamperProxy {
 public:
  TamperProxy(uint16_t target_port, std::vector<Flip> flips);
  ~TamperProxy();
  TamperProxy(const TamperProxy&) = delete;
  TamperProxy& operator=(const TamperProxy&) = delete;

  uint16_t port() const { return port_; }
  int flipped() const { return flipped_; }
  int connections() const { return connections_; }

 private:
  void accept_loop();
  void pump(int from, int to, int connection, bool to_server);

  const uint16_t target_port_;
  const std::vector<Flip> flips_;
  uint16_t port_ = 0;
  int listen_fd_ = -1;
  std::atomic<int> flipped_{0}, connections_{0};
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::vector<int> fds_;
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

}  // namespace troupe::testing
