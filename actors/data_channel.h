// The data channel: TCP connections beside CAF's that carry shard calls between processes as
// length-prefixed byte blobs. CAF's middleman handles a blob five times on its way (serialise,
// buffer, zero the read buffer, deserialise, copy); here the kernel copies it once on each side,
// which is what moving tensors to and from a parameter server needs (bench/actors_bench:
// tensor_loopback). CAF's connection stays for monitoring and heartbeats.
//
//   auto data = DataServer::listen(rt, "127.0.0.1");        // server: Result<unique_ptr<...>>
//   caf::actor shard = spawn(parameter_shard, store, data->port());
//   data->serve(shard);                                      // accepts, forwards calls to shard
//
//   auto ch = connect_data_channel(rt, "127.0.0.1", port, timeout);   // client: Result<actor>
//   request(*ch, timeout, call_atom::value, ChannelCall{...}) -> runtime::Bytes reply
//
// A frame is an 8-byte little-endian length and that many bytes (a shard call or reply,
// shard_codec.h). A call's segments are written as they are (the inputs' data from where it
// lies) and a frame is read into a buffer of its own, decoded in place: each side's kernel
// copies the bytes once, nothing else does. A frame longer than kMaxFrameBytes, a short read or a
// timeout ends the connection with an error naming the peer; the call fails, nothing crashes.
#pragma once

#include <caf/all.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actors/runtime_system.h"
#include "runtime/status.h"
#include "runtime/tensor.h"
#include "runtime/tensor_wire.h"

namespace troupe::actors {

constexpr uint64_t kMaxFrameBytes = uint64_t(1) << 32;

// A shard call to send: its message references `inputs`, which it keeps alive.
struct ChannelCall {
  std::shared_ptr<capnp::MallocMessageBuilder> message;
  std::vector<runtime::Tensor> inputs;
};

using data_port_atom = caf::atom_constant<caf::atom("dataport")>;

class DataServer {
 public:
  static runtime::Result<std::unique_ptr<DataServer>> listen(Runtime& runtime,
                                                             const std::string& host);
  ~DataServer();
  DataServer(const DataServer&) = delete;
  DataServer& operator=(const DataServer&) = delete;

  uint16_t port() const { return port_; }
  // Accepts connections from now on; each one's calls go to `shard`, one at a time.
  void serve(caf::actor shard);

 private:
  DataServer(Runtime& runtime, int fd, uint16_t port)
      : runtime_(runtime), listen_fd_(fd), port_(port) {}
  struct Connection {
    int fd = -1;
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  void accept_loop();
  void serve_connection(int fd);
  void reap_finished();  // under mu_

  Runtime& runtime_;
  int listen_fd_;
  uint16_t port_;
  caf::actor shard_;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<Connection> connections_;  // a long-lived server reaps the finished ones
};

// A detached actor owning one connection to a DataServer: it sends a call and waits for its
// reply, one call at a time, each way bounded by `timeout`.
runtime::Result<caf::actor> connect_data_channel(Runtime& runtime, const std::string& host,
                                                 uint16_t port, std::chrono::milliseconds timeout);

}  // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::ChannelCall)
