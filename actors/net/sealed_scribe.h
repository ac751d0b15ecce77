// A CAF scribe whose bytes travel sealed (net/seal.h): what BASP writes to a member's connection
// on CAF's port is sealed record by record before the socket sees it, and what it reads was
// opened and checked first. It is CAF's own scribe (the stream that reads and writes for BASP)
// with its socket policy replaced, as CAF's OpenSSL module replaces it. A record that fails to
// open ends the connection, logged with the peer's address and the word "integrity"; BASP sees a
// closed connection, and nothing of the record reaches an actor.
//
//   net::LinkKeys keys;  secret->prove_member(fd, &keys);      // the handshake's keys
//   caf::io::scribe_ptr s = make_sealed_scribe(mpx, fd, keys); // BASP's from here on
//
// Used on the multiplexer's thread, as every scribe.
#pragma once

#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/scribe.hpp>

#include "actors/net/seal.h"

namespace troupe::actors::net {

caf::io::scribe_ptr make_sealed_scribe(caf::io::network::default_multiplexer& mpx,
                                       caf::io::network::native_socket fd, const LinkKeys& keys);

}  // namespace troupe::actors::net
