// Runtime: the CAF actor system, configured for training as measured (DESIGN.md §3,
// reference/node-actor-prototype.md): one CAF worker runs the graph's node actors, so that a
// step's wave stays on one core, sent with self->send, and big kernels get both cores through
// OpenBLAS's threads instead of two GEMMs fighting over them. With more workers, idle ones park
// at once (aggressive-poll-attempts=1, moderate-poll-attempts=0, relaxed sleep 10 ms). The
// scheduler is CAF's work stealing without its per-job logging bookkeeping (scheduler.h). Middleman
// loaded for remote servers, with heartbeats so that a dead peer is noticed within seconds; with
// a job secret, every connection proves membership first (member_middleman.h).
//
//   actors::Runtime rt;                                    // one per process
//   auto session = actors::Session::create(rt, graph);
//
// Destroying the Runtime waits for every actor to finish: destroy sessions and servers first.
#pragma once

#include <caf/all.hpp>

#include <chrono>
#include <memory>
#include <mutex>

#include "actors/job_secret.h"
#include "actors/member_middleman.h"
#include "runtime/status.h"

namespace troupe::actors {

namespace net {
class ChannelPoller;  // net/data_channel.h
}

struct RuntimeOptions {
  // CAF workers. One runs the whole graph: with a second one, even parked, it sometimes steals
  // one of two independent GEMMs, and two GEMMs with two OpenBLAS threads each then share two
  // cores (bench/actors_bench: 0.84-1.09 of one worker on the 784-512-512-10 MLP across runs).
  // Blocking I/O belongs in detached actors instead.
  size_t worker_threads = 1;
  // Keep CAF's own scheduler defaults instead (max(4, cores) stealing workers that poll): for
  // benchmarks that show what the tuning buys.
  bool caf_scheduler_defaults = false;
  // Tuned settings, but CAF's own worker loop with its per-job logging bookkeeping instead of
  // the quiet one (scheduler.h): for benchmarks that show what leaving it out buys.
  bool caf_worker_loop = false;
  // How long an idle worker polls for its next job before it parks (scheduler.h). Servers of
  // one-off steps set it: waking a parked worker adds 10-20 us to each step here, and the
  // next request of a client often comes sooner than that after the answer. 0 for training,
  // whose worker is seldom idle, and for the processes of a cluster that share cores.
  std::chrono::microseconds idle_spin{0};
  std::chrono::milliseconds heartbeat{1000};
  std::chrono::milliseconds connection_timeout{5000};
  // A cluster's job secret: every connection, CAF's and the data channels', proves membership
  // with it before its first message (job_secret.h). Null: plain TCP, anyone may connect.
  std::shared_ptr<const JobSecret> secret = nullptr;
  // Who this process is in the cluster ("/job:worker/task:0"; "" for none) and the cluster
  // spec's tasks: the handshake states them, and a listener refuses a dialler outside them
  // (job_secret.h's Introduction).
  std::string task;
  std::vector<std::string> members;
  // How long a peer has for the whole handshake on CAF's port, which no byte it sends extends
  // (a data server has its own, net::DataServerOptions): a round trip or two on a loaded
  // machine, little for a stranger to hold a slot with (member_middleman.h).
  std::chrono::milliseconds handshake_timeout{2000};
};

class Runtime {
 public:
  explicit Runtime(RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  caf::actor_system& system() { return *system_; }
  const std::shared_ptr<const JobSecret>& secret() const { return secret_; }
  // CAF's publish and remote_actor, through the member middleman when there is a secret; the
  // errors are CAF's, rendered.
  runtime::Result<uint16_t> publish(const caf::actor& whom, uint16_t port, const std::string& host);
  void unpublish(const caf::actor& whom, uint16_t port);
  // `task`: whom the caller means to reach there; a listener that says it is another is refused.
  runtime::Result<caf::actor> remote_actor(const std::string& host, uint16_t port,
                                           const std::string& task = "");
  // How this process introduces itself in a handshake, dialling `task` ("" for any).
  Introduction introduction(const std::string& task = "") const;
  // Actors still running; 0 after every session and server is gone.
  size_t running_actors() const;
  // The one thread that serves this runtime's data channels (net/data_channel.h), started on the
  // first call.
  runtime::Result<std::shared_ptr<net::ChannelPoller>> channel_poller();

 private:
  std::unique_ptr<caf::actor_system_config> config_;
  std::unique_ptr<caf::actor_system> system_;
  std::shared_ptr<const JobSecret> secret_;
  Introduction self_;
  std::shared_ptr<DialBook> dial_book_;
  caf::actor member_middleman_;
  std::mutex poller_mu_;
  std::shared_ptr<net::ChannelPoller> poller_;
};

}  // namespace troupe::actors
