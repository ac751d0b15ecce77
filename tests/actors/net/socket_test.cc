// The data channel's sockets: listening on a free port, connecting to it by name or address,
// and errors that name what could not be reached.
#include "actors/net/socket.h"

#include <doctest/doctest.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace troupe::actors::net;

TEST_CASE("a socket listens on a free port, and a connection reaches it by name or address") {
  auto listening = listen_tcp("127.0.0.1", 0);
  REQUIRE_MESSAGE(listening.ok(), listening.status().to_string());
  CHECK(listening->port != 0);
  for (const char* host : {"127.0.0.1", "localhost"}) {
    auto fd = connect_tcp(host, listening->port, std::chrono::seconds(5));
    REQUIRE_MESSAGE(fd.ok(), fd.status().to_string());
    CHECK(set_nonblocking(*fd).empty());
    ::close(*fd);
  }
  auto address = resolve("127.0.0.1", 80);
  REQUIRE(address.ok());
  CHECK(peer_of(*address) == "127.0.0.1:80");
  // The same port again: refused, naming it.
  auto again = listen_tcp("127.0.0.1", listening->port);
  REQUIRE_FALSE(again.ok());
  CHECK(again.status().message().find("cannot listen on 127.0.0.1:" +
                                      std::to_string(listening->port)) != std::string::npos);
  ::close(listening->fd);
}

TEST_CASE("connecting where nobody listens, or to a name that does not resolve, says where") {
  auto listening = listen_tcp("127.0.0.1", 0);
  REQUIRE(listening.ok());
  const uint16_t port = listening->port;
  ::close(listening->fd);  // nobody listens there now
  auto refused = connect_tcp("127.0.0.1", port, std::chrono::seconds(5));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("data channel to 127.0.0.1:" + std::to_string(port)) == 0);
  auto unknown = resolve("no-such-host.invalid", 1);
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().message().find("cannot resolve 'no-such-host.invalid'") !=
        std::string::npos);
}
