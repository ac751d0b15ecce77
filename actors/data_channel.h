// The data channel: TCP connections beside CAF's that carry shard calls between processes as
// length-prefixed byte blobs. CAF's middleman handles a blob five times on its way (serialise,
// buffer, zero the read buffer, deserialise, copy); here the kernel copies it once on each side,
// which is what moving tensors to and from a parameter server needs (bench/actors_bench:
// tensor_loopback). CAF's connection stays for monitoring and heartbeats.
//
//   auto data = DataServer::listen(rt, "127.0.0.1", 0);     // server (0: any free port)
//   caf::actor shard = spawn(parameter_shard, store, data->port());
//   data->serve(shard);                                      // accepts, forwards calls to shard
//
//   auto ch = connect_data_channel(rt, "127.0.0.1", port, timeout);   // client: Result<actor>
//   request(*ch, timeout, call_atom::value, ChannelCall{...}) -> runtime::Bytes reply
//
// Calls do not wait for the replies of those before them (pipelined, as HTTP/1.1's): where a
// link is slow, a step's calls to one server cost about one round trip, not one each.
//
// A frame is an 8-byte little-endian length and that many bytes (a shard call or reply,
// shard_codec.h). A call's segments are written as they are (the inputs' data from where it
// lies) and a frame is read into a buffer of its own, decoded in place: each side's kernel
// copies the bytes once, nothing else does. A frame longer than the limit, a short read or a
// timeout ends the connection with an error naming the peer; the call fails, nothing crashes.
//
// With a job secret in the Runtime, both sides prove membership before the first frame (an
// HMAC-SHA256 challenge-response, job_secret.h); a peer that cannot is closed and logged with
// its address, and nothing it sent reaches the shard.
//
// The server is event driven, as CAF's multiplexer: one thread waits on every connection
// (epoll), reads frames as their bytes arrive, hands each call to the shard through an actor
// and writes the reply when it comes; a connection's calls run one at a time, in order, and
// while one is at the shard nothing more is read from that peer. It bounds what peers can take
// (DataServerOptions): connections (one over the limit is closed at once, with a log line
// naming its address), idle time (not counted while a call is at the shard), frame size, and a
// frame's buffer grows only as its bytes arrive, so a header claiming gigabytes costs nothing
// until they come. A failed accept (EMFILE, ENFILE, ENOMEM) is logged and retried with a
// back-off. The server goes on.
#pragma once

#include <caf/all.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "actors/runtime_system.h"
#include "runtime/status.h"
#include "runtime/tensor.h"
#include "runtime/tensor_wire.h"

namespace troupe::actors {

struct DataServerOptions {
  int max_connections = 64;
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(10)};  // without a byte either way
  uint64_t max_frame_bytes = uint64_t(1) << 32;
};

// A shard call to send: its message references `inputs`, which it keeps alive.
struct ChannelCall {
  std::shared_ptr<capnp::MallocMessageBuilder> message;
  std::vector<runtime::Tensor> inputs;
};

using data_port_atom = caf::atom_constant<caf::atom("dataport")>;

class DataServer {
 public:
  static runtime::Result<std::unique_ptr<DataServer>> listen(Runtime& runtime,
                                                             const std::string& host, uint16_t port,
                                                             DataServerOptions options = {});
  ~DataServer();
  DataServer(const DataServer&) = delete;
  DataServer& operator=(const DataServer&) = delete;

  uint16_t port() const { return port_; }
  // Accepts connections from now on; each one's calls go to `shard`, one at a time. An error
  // when the server's thread cannot be started.
  runtime::Status serve(caf::actor shard);
  // Connections open now (for tests and monitoring).
  int connections() const { return open_; }

 private:
  struct Connection;
  struct Replies;
  DataServer(Runtime& runtime, int listen_fd, uint16_t port, DataServerOptions options);
  void run();
  void accept_all();
  void on_event(Connection& c, uint32_t events);
  void read_handshake(Connection& c);
  void read_frames(Connection& c);
  void take_replies();
  bool write_out(Connection& c);  // false: the peer is gone
  void watch(Connection& c);      // the events `c` waits for now
  void close(uint64_t id, const std::string& why = "");

  Runtime& runtime_;
  const int listen_fd_;
  const uint16_t port_;
  const DataServerOptions options_;
  int epoll_fd_ = -1;
  std::shared_ptr<Replies> replies_;  // from the shard, via the relay actor; wakes the thread
  caf::actor relay_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> open_{0};
  std::thread thread_;
  std::map<uint64_t, std::unique_ptr<Connection>> connections_;  // the thread's alone
  uint64_t next_id_ = 2;  // 0 and 1 name the listening socket and the wake-up in epoll
  std::chrono::steady_clock::time_point accept_again_{};  // after a failed accept
  std::chrono::milliseconds backoff_{10};
};

// A detached actor owning one connection to a DataServer: it writes each call as it comes and
// a thread of its own reads the replies, which come in the calls' order; a reply is awaited
// at most `timeout`, as is a write.
runtime::Result<caf::actor> connect_data_channel(Runtime& runtime, const std::string& host,
                                                 uint16_t port, std::chrono::milliseconds timeout);

}  // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::ChannelCall)
