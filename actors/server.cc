#include "actors/server.h"

#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include "actors/data_channel.h"
#include "actors/messages.h"
#include "actors/parameter_shard.h"

namespace troupe::actors {

runtime::Result<std::unique_ptr<Server>> Server::start(Runtime& rt, ServerOptions options) {
  std::unique_ptr<Server> server(new Server(rt));
  server->variables_ = std::make_shared<runtime::VariableStore>();
  TROUPE_ASSIGN_OR_RETURN(server->data_, DataServer::listen(rt, options.host, options.data));
  server->shard_ = rt.system().spawn(parameter_shard, server->variables_, server->data_->port());
  if (runtime::Status s = server->data_->serve(server->shard_); !s.ok()) {
    server->data_.reset();
    caf::anon_send_exit(server->shard_, caf::exit_reason::user_shutdown);
    server->shard_ = nullptr;
    return s;
  }
  auto port = rt.secret()
                  ? caf::openssl::publish(server->shard_, options.port, options.host.c_str(),
                                          /*reuse=*/true)
                  : rt.system().middleman().publish(server->shard_, options.port,
                                                    options.host.c_str(), /*reuse_addr=*/true);
  if (!port) {
    server->data_.reset();
    caf::anon_send_exit(server->shard_, caf::exit_reason::user_shutdown);
    server->shard_ = nullptr;
    return runtime::make_error(runtime::Code::kUnavailable, "cannot serve on ", options.host, ":",
                               options.port, ": ", rt.system().render(port.error()));
  }
  server->port_ = *port;
  return server;
}

Server::~Server() {
  if (!shard_) return;
  if (runtime_.secret()) {
    // caf/openssl/unpublish.hpp does not compile in 0.17.6; its manager takes the message.
    caf::anon_send(runtime_.system().openssl_manager().actor_handle(), caf::unpublish_atom::value,
                   shard_.address(), port_);
  } else {
    runtime_.system().middleman().unpublish(shard_, port_);
  }
  data_.reset();
  caf::anon_send_exit(shard_, caf::exit_reason::user_shutdown);
  shard_ = nullptr;
}

runtime::Result<caf::actor> connect_server(Runtime& rt, const std::string& address) {
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
  auto actor = rt.secret()
                   ? caf::openssl::remote_actor(rt.system(), host, static_cast<uint16_t>(port))
                   : rt.system().middleman().remote_actor(host, static_cast<uint16_t>(port));
  if (!actor) {
    return runtime::make_error(runtime::Code::kUnavailable, "no troupe server at ", address, ": ",
                               rt.system().render(actor.error()));
  }
  return *actor;
}

}  // namespace troupe::actors
