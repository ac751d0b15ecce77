#include "bench/strangers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <string>

namespace troupe::bench {

std::unique_ptr<Strangers> Strangers::start(std::vector<uint16_t> ports, int per_port,
                                            std::chrono::milliseconds period) {
  std::unique_ptr<Strangers> s(new Strangers(std::move(ports), per_port, period));
  s->thread_ = std::thread([p = s.get()] { p->run(); });
  return s;
}

Strangers::Strangers(std::vector<uint16_t> ports, int per_port, std::chrono::milliseconds period)
    : ports_(std::move(ports)), per_port_(per_port), period_(period) {}

Strangers::~Strangers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Strangers::top_up(std::vector<Held>* held) {
  // The start of a hello (the magic, then bytes that name no secret), its rest never sent.
  const std::string partial = "TRPB" + std::string(100, 'x');
  for (size_t p = 0; p < ports_.size(); ++p) {
    int have = static_cast<int>(
        std::count_if(held->begin(), held->end(), [p](const Held& h) { return h.port == p; }));
    for (; have < per_port_; ++have) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) return;
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(ports_[p]);
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(fd);
        break;  // nothing listens there now
      }
      ++opened_;
      if (have % 2 == 1) {
        [[maybe_unused]] const ssize_t n =
            ::send(fd, partial.data(), partial.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      held->push_back({fd, p});
    }
  }
}

void Strangers::reap(std::vector<Held>* held) {
  std::vector<pollfd> polls;
  for (const Held& h : *held) polls.push_back({h.fd, POLLIN, 0});
  if (polls.empty() || ::poll(polls.data(), polls.size(), 0) <= 0) return;
  std::vector<Held> kept;
  for (size_t i = 0; i < polls.size(); ++i) {
    // A stranger is never answered: readable means ended.
    if (polls[i].revents != 0) {
      ::close((*held)[i].fd);
    } else {
      kept.push_back((*held)[i]);
    }
  }
  *held = std::move(kept);
}

void Strangers::run() {
  std::vector<Held> held;
  auto renew = std::chrono::steady_clock::now() + period_;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    if (std::chrono::steady_clock::now() >= renew) {
      for (const Held& h : held) ::close(h.fd);
      held.clear();
      renew += period_;
    }
    reap(&held);
    top_up(&held);
    lock.lock();
    wake_.wait_for(lock, std::chrono::milliseconds(20), [this] { return stopping_; });
  }
  for (const Held& h : held) ::close(h.fd);
}

}  // namespace troupe::bench
