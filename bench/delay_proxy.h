// A TCP forward that holds every byte for a fixed delay in each direction: a link with that
// much latency in front of a server, to measure how much of a step's communication overlaps its
// computation (netem needs privileges these machines do not give).
//
//   auto proxy = bench::DelayProxy::start("127.0.0.1", server_port, std::chrono::milliseconds(1));
//   ... peers dial (*proxy)->port() instead of server_port
//   (*proxy)->bytes();   // forwarded so far, both directions together
//
// Each connection gets one to the target; a chunk read at time t is written at t + delay, in
// order (latency, not bandwidth: chunks do not wait for each other's delay). A side that closes
// is closed on the other side once its bytes are written. Undelayed (0), the reading thread
// writes the bytes on itself, so that the baseline costs one hop, not a hop and a hand-off.
// Four threads per connection: a bench tool, not a server.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/status.h"

namespace troupe::bench {

class DelayProxy {
 public:
  static runtime::Result<std::unique_ptr<DelayProxy>> start(const std::string& host,
                                                            uint16_t target_port,
                                                            std::chrono::microseconds delay);
  ~DelayProxy();
  DelayProxy(const DelayProxy&) = delete;
  DelayProxy& operator=(const DelayProxy&) = delete;

  uint16_t port() const { return port_; }
  uint64_t bytes() const { return bytes_; }

 private:
  struct Link;
  DelayProxy(std::string host, uint16_t target_port, std::chrono::microseconds delay, int fd,
             uint16_t port);
  void accept_loop();

  const std::string host_;
  const uint16_t target_port_;
  const std::chrono::microseconds delay_;
  const int listen_fd_;
  const uint16_t port_;
  std::atomic<uint64_t> bytes_{0};
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Link>> links_;
};

}  // namespace troupe::bench
