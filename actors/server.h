// Server: one process of a cluster. It publishes a server actor on a TCP port (CAF's middleman)
// that runs, against its parameter shard, the nodes a remote Session places on its task: the
// variables' reads, assignments and optimizer updates.
//
//   actors::Runtime rt;
//   auto server = actors::Server::start(rt, {.port = 0});   // 0: any free port
//   uint16_t port = (*server)->port();
//   ... a Session elsewhere with cluster {{"/job:ps/task:0", "127.0.0.1:" + std::to_string(port)}}
//
// Bad bytes from a peer are answered with an error; they never crash the server.
#pragma once

#include <caf/all.hpp>

#include <functional>
#include <memory>
#include <string>

#include "actors/net/data_server.h"
#include "actors/runtime_system.h"
#include "runtime/status.h"
#include "runtime/variable_store.h"

namespace troupe::actors {

struct ServerOptions {
  uint16_t port = 0;
  std::string host = "127.0.0.1";
  uint16_t data_port = 0;  // where the data channel listens; 0: any free port
  // The data port peers are told to connect to; 0: data_port. For a forward in front of the
  // server (a NAT, a container's published port, a proxy), as the port peers dial differs from
  // the one it listens on. Peers dial it on the host they reached the server at.
  uint16_t advertised_data_port = 0;
  net::DataServerOptions data;  // bounds on the data channel's peers
  // Runs (on an actor's thread; it must only hand the news on) when the chief says training is
  // over (PsClient::finish).
  std::function<void()> on_finished;
};

class ShardCalls;  // parameter_shard.h

class Server {
 public:
  static runtime::Result<std::unique_ptr<Server>> start(Runtime& runtime,
                                                        ServerOptions options = {});
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  uint16_t port() const { return port_; }
  uint16_t data_port() const { return data_->port(); }  // where tensors travel (net/data_server.h)
  uint16_t advertised_data_port() const { return advertised_data_port_; }  // what peers dial
  int data_connections() { return data_->connections(); }
  runtime::VariableStore& variables() { return *variables_; }
  // The training replicas that have called this server since it started (ShardCalls).
  size_t replicas_known() const;
  // The calls that carried a replica's updates (ShardCalls::updates_served).
  uint64_t updates_served() const;

 private:
  explicit Server(Runtime& runtime) : runtime_(runtime) {}
  Runtime& runtime_;
  std::shared_ptr<runtime::VariableStore> variables_;
  std::shared_ptr<ShardCalls> calls_;
  caf::actor shard_;
  std::unique_ptr<net::DataServer> data_;  // tensors travel here; CAF's port for the rest
  uint16_t port_ = 0;
  uint16_t advertised_data_port_ = 0;
};

// Connects to "host:port", meaning to reach `task` there ("" for any: a server that says it is
// another task is refused); an error that names the address when nothing answers there.
runtime::Result<caf::actor> connect_server(Runtime& runtime, const std::string& address,
                                           const std::string& task = "");
// Why nothing took a connection at host:port, as a log names it: "refused: nothing listens",
// "no answer" (within a second), or that a socket connects but the handshake did not.
std::string why_unreachable(const std::string& host, uint16_t port);

}  // namespace troupe::actors
