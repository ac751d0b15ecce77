#include "actors/server.h"

#include <caf/io/all.hpp>

#include <cerrno>
#include <cstring>

#include "actors/messages.h"
#include "actors/net/data_server.h"
#include "actors/net/socket.h"
#include "actors/parameter_shard.h"

namespace troupe::actors {

runtime::Result<std::unique_ptr<Server>> Server::start(Runtime& rt, ServerOptions options) {
  std::unique_ptr<Server> server(new Server(rt));
  server->variables_ = std::make_shared<runtime::VariableStore>();
  TROUPE_ASSIGN_OR_RETURN(
      server->data_, net::DataServer::listen(rt, options.host, options.data_port, options.data));
  server->advertised_data_port_ =
      options.advertised_data_port != 0 ? options.advertised_data_port : server->data_->port();
  auto calls = std::make_shared<ShardCalls>(server->variables_);
  server->calls_ = calls;
  server->shard_ = spawn_parameter_shard(rt.system(), calls, server->advertised_data_port_,
                                         std::move(options.on_finished));
  auto handler = [calls](const runtime::Bytes& frame, const net::DataServer::Later& later,
                         const Peer& from) { return calls->call(frame, later, from); };
  auto closed = [calls](const Peer& from) { calls->closed(from.link); };
  if (runtime::Status s = server->data_->serve(handler, closed); !s.ok()) {
    server->data_.reset();
    caf::anon_send_exit(server->shard_, caf::exit_reason::user_shutdown);
    server->shard_ = nullptr;
    return s;
  }
  auto port = rt.publish(server->shard_, options.port, options.host);
  if (!port.ok()) {
    server->data_.reset();
    caf::anon_send_exit(server->shard_, caf::exit_reason::user_shutdown);
    server->shard_ = nullptr;
    return runtime::make_error(runtime::Code::kUnavailable, "cannot serve on ", options.host, ":",
                               options.port, ": ", port.status().message());
  }
  server->port_ = *port;
  return server;
}

size_t Server::replicas_known() const { return calls_->replicas_known(); }
uint64_t Server::updates_served() const { return calls_->updates_served(); }

Server::~Server() {
  if (!shard_) return;
  runtime_.unpublish(shard_, port_);
  data_.reset();
  caf::anon_send_exit(shard_, caf::exit_reason::user_shutdown);
  shard_ = nullptr;
}

runtime::Result<caf::actor> connect_server(Runtime& rt, const std::string& address,
                                           const std::string& task) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 >= address.size()) {
    return runtime::invalid_argument("server address '", address, "' is not host:port");
  }
  const std::string host = address.substr(0, colon);
  int port = 0;
  try {
    port = std::stoi(address.substr(colon + 1));
  } catch (const std::exception&) {
    return runtime::invalid_argument("server address '", address, "': bad port");
  }
  if (port <= 0 || port > 65535)
    return runtime::invalid_argument("server address '", address, "': bad port");
  // Pods come up in any order and a name may not resolve yet; resolved on every try, so that a
  // task restarted at a new address is found there.
  if (auto resolved = net::resolve(host, static_cast<uint16_t>(port)); !resolved.ok()) {
    return runtime::unavailable("no troupe server at ", address,
                                ": the name is not resolvable yet (", resolved.status().message(),
                                ")");
  }
  auto actor = rt.remote_actor(host, static_cast<uint16_t>(port), task);
  if (!actor.ok()) {
    return runtime::unavailable("no troupe server at ", address, ": ",
                                why_unreachable(host, static_cast<uint16_t>(port)), " (",
                                actor.status().message(), ")");
  }
  return *actor;
}

std::string why_unreachable(const std::string& host, uint16_t port) {
  switch (const int err = net::probe_tcp(host, port, std::chrono::milliseconds(1000))) {
    case 0:
      return "it answers, but not as a troupe server that takes us";
    case ECONNREFUSED:
      return "refused: nothing listens";
    case EAGAIN:
    case EINPROGRESS:
    case ETIMEDOUT:
      return "no answer";
    default:
      return std::strerror(err);
  }
}

}  // namespace troupe::actors
