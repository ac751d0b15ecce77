// DataServer: the server side of the data channel, where a ps task's shard calls arrive as
// frames (net/frame.h) over TCP connections of their own beside CAF's, and their replies leave.
// CAF's middleman handles a blob five times on its way (serialise, buffer, zero the read
// buffer, deserialise, copy); here the kernel copies it once on each side, which is what moving
// tensors to and from a parameter server needs (bench/actors_bench: tensor_loopback). CAF's
// connection stays for monitoring and heartbeats.
//
//   auto data = DataServer::listen(rt, "127.0.0.1", 0);     // 0: any free port
//   data->serve([calls](const runtime::Bytes& call, const DataServer::Later& later,
//                       const Peer& from) {
//     return calls->call(call, later, from);   // accepts; runs each call with the handler
//   });
//
// With a job secret in the Runtime, a peer proves membership before its first frame (an
// HMAC-SHA256 challenge-response, job_secret.h); one that cannot is closed and logged with its
// address, and nothing it sent reaches the shard. The handler is told who each caller proved to
// be, a writer or a reader (job_secret.h's Role), and so what it may ask.
//
// Event driven (Boost.Asio, net/io_thread.h): one thread accepts, and each of the others waits on
// the connections it was given (a new connection has a thread of its own, up to a limit, then goes
// to the thread serving the fewest), reads frames as their bytes arrive, runs each call itself
// (the handler: ShardCalls, thread-safe), and writes the reply, or the reply the handler gives
// later (a synchronous replica's update, answered when the other replicas have sent theirs).
// Replicas' calls so run side by side, each on the core its bytes woke, as TF's ps runs its ops
// on a pool: with one thread for all, a replica whose call came while another's ran waited, and
// its core idled (2 replicas on 2 cores: 9% idle, 2-4% now). Told to follow its peers, a thread
// serving one connection runs on the core that connection's packets arrive on
// (DataServerOptions::follow_incoming_cpu). A connection's calls run one at a time, in order,
// and while a reply is awaited or being written nothing more is read from that peer. It bounds
// what peers can take (DataServerOptions): connections (one over the limit is closed at once,
// with a log line naming its address), idle time (not counted while a reply is awaited), frame
// size, and a frame's buffer grows only as its bytes arrive. With a job secret, the accepting
// thread runs the handshakes (an HMAC each) within their own budget, and hands a connection to
// a serving thread once it proved membership. A frame longer than the limit, a
// short read or a timeout ends that connection; nothing crashes. A failed accept (EMFILE,
// ENFILE, ENOMEM) is logged and retried with a back-off. The server goes on.
//
// Thread-safe; the destructor stops its threads and closes every connection.
#pragma once

#include <sched.h>

#include <caf/all.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "actors/job_secret.h"
#include "actors/net/frame.h"
#include "actors/net/handshake_budget.h"
#include "actors/runtime_system.h"
#include "actors/shard_codec.h"
#include "runtime/status.h"
#include "runtime/tensor_wire.h"

namespace troupe::actors::net {

struct DataServerOptions {
  int max_connections = 64;  // members' (with a job secret) or anyone's (without)
  // With a job secret, strangers' handshakes have a budget of their own (HandshakeBudget,
  // net/handshake_budget.h): a newcomer over it ends the oldest, so members always find room.
  // A handshake has `handshake_timeout` in all, which no byte extends: a round trip or two on a
  // loaded machine, far less than a stranger needs to hold a slot for long.
  int max_handshakes = 64;
  int max_handshakes_per_source = 16;
  std::chrono::milliseconds handshake_timeout{2000};
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(10)};  // without a byte either way
  uint64_t max_frame_bytes = kMaxFrameBytes;
  // Each connection has a thread of its own until this many serve them; then they share.
  int threads = 16;
  // A thread serving one connection runs on the core that connection's packets arrive on
  // (SO_INCOMING_CPU), where its cache holds them. On one machine that is the calling replica's
  // core, idle while it waits for the reply: with replicas pinned to cores of their own, their
  // calls run as if the shard lived in their process (troupe server --pin). Off, the scheduler
  // places the threads, and may queue two replicas' calls on one core while the other idles.
  bool follow_incoming_cpu = false;
};

// (data_port_atom) -> uint16_t: where a server's data channel listens, 0 when it has none.
using data_port_atom = caf::atom_constant<caf::atom("dataport")>;

class DataServer {
 public:
  static runtime::Result<std::unique_ptr<DataServer>> listen(Runtime& runtime,
                                                             const std::string& host, uint16_t port,
                                                             DataServerOptions options = {});
  ~DataServer();
  DataServer(const DataServer&) = delete;
  DataServer& operator=(const DataServer&) = delete;

  // A reply the handler gives after it has returned; from any thread.
  using Later = std::function<void(ShardReply)>;
  // Runs a call's frame on the server's thread: its reply, or nothing when `later` (the
  // connection's, made once) gets it; the handler copies `later` only then. `from`: who the
  // connection proved to be (job_secret.h), what it may ask; a writer without a job secret.
  using Handler = std::function<std::optional<ShardReply>(const runtime::Bytes& frame,
                                                          const Later& later, const Peer& from)>;

  // Told, on a serving thread, that a member's connection ended (the peer closed it or went, or
  // it was closed here), with the Peer its calls were given: Peer::link is the connection's.
  using Closed = std::function<void(const Peer& from)>;

  uint16_t port() const { return port_; }
  // Accepts connections from now on; each one's calls run with `handler`, one at a time, and
  // `closed` (may be empty) hears of each one's end. An error when the server's thread cannot
  // be started.
  runtime::Status serve(Handler handler, Closed closed = {});
  // Connections open now (for tests and monitoring).
  int connections() const { return open_; }

 private:
  struct Connection;
  class Loop;
  DataServer(Runtime& runtime, int listen_fd, uint16_t port, DataServerOptions options);
  // On the thread that watches the listening socket:
  void accept_all(Loop& acceptor);
  Loop& loop_for_next();

  Runtime& runtime_;
  const int listen_fd_;
  const uint16_t port_;
  const DataServerOptions options_;
  Handler handler_;
  Closed closed_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> open_{0};
  std::unique_ptr<Loop> acceptor_;
  std::vector<std::unique_ptr<Loop>> loops_;  // serving connections; the acceptor adds them
  uint64_t next_id_ = 1;        // a connection's, never used again: a late event finds no one
  HandshakeBudget handshakes_;  // the accepting thread's
  LogLimiter refusals_;         // of strangers, logged at most once a second
  std::chrono::steady_clock::time_point accept_again_{};  // after a failed accept
  std::chrono::milliseconds backoff_{10};
  cpu_set_t cores_{};  // where the process may run, as it started: a thread following none
};

}  // namespace troupe::actors::net
