// The middleman of a cluster with a job secret: CAF's own connection machinery (BASP, proxies,
// monitoring, heartbeats) over connections that proved membership before CAF saw a byte of
// them, and whose every later byte travels sealed with the keys the handshake gave
// (net/sealed_scribe.h). It is CAF's middleman actor with its two socket-making steps
// replaced, as CAF's OpenSSL module replaces them: `connect` runs the job secret's
// challenge-response on the new socket before handing it to BASP, and `open` listens itself,
// checks each peer on a thread of its own (within the handshakes' budget below) and passes BASP
// only the connections that passed. A peer that fails is closed and logged with its address.
//
//   caf::actor mm = spawn_member_middleman(system, secret);   // Runtime does this
//   request(mm, infinite, publish_atom::value, port, whom, sigs, addr, reuse) -> uint16_t
//   request(mm, infinite, connect_atom::value, host, port) -> (node_id, strong_actor_ptr, sigs)
//
// Why not CAF's OpenSSL module (mutual TLS)? With libcaf_openssl 0.17.6 a server's other TLS
// connections stall for good once one peer disconnects (the case "members read and write a ps's
// state while another member leaves" in tests/actors/distributed_test.cc, run over that module),
// and members of a cluster come and go.
#pragma once

#include <caf/all.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "actors/job_secret.h"

namespace troupe::actors {

// Strangers' handshakes under way on CAF's port, in all and per source address: a newcomer over
// the budget ends the oldest (net/handshake_budget.h), so a member always finds room. Each has
// the handshake timeout it is spawned with in all (RuntimeOptions::handshake_timeout), which no
// byte extends.
constexpr int kMaxHandshakes = 64;
constexpr int kMaxHandshakesPerSource = 16;

// Whom this process means to reach at an address: what its handshake says it dials. Runtime
// notes it before each connect; thread-safe.
class DialBook {
 public:
  void expect(const std::string& host, uint16_t port, const std::string& task);
  std::string expected(const std::string& host, uint16_t port) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::string> tasks_;  // "host:port" -> task
};

// `self`: who this process is and which tasks may dial it (job_secret.h's Introduction).
caf::actor spawn_member_middleman(caf::actor_system& system,
                                  std::shared_ptr<const JobSecret> secret, Introduction self,
                                  std::shared_ptr<const DialBook> book,
                                  std::chrono::milliseconds handshake_timeout);

}  // namespace troupe::actors
