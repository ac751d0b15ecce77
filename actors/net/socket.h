// The TCP sockets of the data channel (net/data_server.h, net/data_channel.h): a listening
// socket, a connected one, and the words an error or a log line names a peer with. IPv4, as
// the cluster's addresses are; every socket is close-on-exec.
//
//   auto listening = listen_tcp("127.0.0.1", 0);        // Result<Listening>{fd, port}
//   auto fd = connect_tcp("127.0.0.1", port, timeout);  // blocking, with send/receive timeouts
//
// Stateless functions; any thread.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "runtime/status.h"

namespace troupe::actors::net {

// strerror(errno), as the error messages quote it.
std::string errno_text();

// An IPv4 address for a host name or dotted quad ("" for any), with `port`.
runtime::Result<sockaddr_in> resolve(const std::string& host, uint16_t port);

// "10.0.0.5:41234": how logs name a peer.
std::string peer_of(const sockaddr_in& address);

struct Listening {
  int fd = -1;        // non-blocking
  uint16_t port = 0;  // the one bound (port 0 asks for any free one)
};
runtime::Result<Listening> listen_tcp(const std::string& host, uint16_t port);

// A blocking connection with TCP_NODELAY, whose reads and writes fail after `timeout`.
runtime::Result<int> connect_tcp(const std::string& host, uint16_t port,
                                 std::chrono::milliseconds timeout);
// Whether a connection to host:port opens within `timeout` (closed again at once): 0, or the
// errno it failed with (ECONNREFUSED: nothing listens; EINPROGRESS or ETIMEDOUT: no answer),
// or EHOSTUNREACH for a name that does not resolve. What a log says of a peer not reached.
int probe_tcp(const std::string& host, uint16_t port, std::chrono::milliseconds timeout);

// O_NONBLOCK on from now on; an error text, or "" when it is set.
std::string set_nonblocking(int fd);

}  // namespace troupe::actors::net
