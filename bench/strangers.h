// Strangers: connections that hold a server's ports without a job secret, as a flood of
// them would: `per_port` on each port, half silent and half sending the start of a hello that
// never finishes; one the server ends is opened again at once (within 20 ms), and all are
// closed and opened anew every `period`. What they cost members (a cluster starting, a ps
// restarting, a worker rejoining) is what cluster_bench's membership_churn bar measures.
//
//   auto strangers = bench::Strangers::start({ps_port, ps_data_port}, 80, 4500ms);
//   ... members come and go ...
//   strangers->opened();   // connections the servers accepted so far
//
// A port nothing listens on (yet, or while its server restarts) is tried again every 20 ms.
// One thread; the destructor stops it and closes every connection.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace troupe::bench {

class Strangers {
 public:
  static std::unique_ptr<Strangers> start(std::vector<uint16_t> ports, int per_port,
                                          std::chrono::milliseconds period);
  ~Strangers();
  Strangers(const Strangers&) = delete;
  Strangers& operator=(const Strangers&) = delete;

  uint64_t opened() const { return opened_; }

 private:
  Strangers(std::vector<uint16_t> ports, int per_port, std::chrono::milliseconds period);
  struct Held {
    int fd;
    size_t port;  // index into ports_
  };
  void run();
  // Opens connections until each port holds per_port_ (or refuses one).
  void top_up(std::vector<Held>* held);
  // Closes those the servers ended.
  void reap(std::vector<Held>* held);

  const std::vector<uint16_t> ports_;
  const int per_port_;
  const std::chrono::milliseconds period_;
  std::atomic<uint64_t> opened_{0};
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace troupe::bench
