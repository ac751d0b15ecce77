// Plain sockets on 127.0.0.1 for tests that speak the data channel's frames by hand: a peer
// that sends garbage, a server that answers late or never. Failures are doctest REQUIREs.
//
//   const int fd = testing::connect_to(port);
//   testing::send_all(fd, testing::frame_header(4) + "call");
//   std::string reply;  REQUIRE(testing::recv_frame(fd, &reply));
#pragma once

#include <cstdint>
#include <string>

namespace troupe::testing {

int connect_to(uint16_t port);  // a blocking connection to 127.0.0.1:port
void send_all(int fd, const std::string& bytes);
std::string frame_header(uint64_t n);  // the 8-byte little-endian length
// Reads one frame's body whole; false when the peer closed or failed first.
bool recv_frame(int fd, std::string* body);
// A port bound and not listening (`fd` holds it): connections to it are refused, and no other
// program can take it while it is held.
uint16_t held_port(int* fd);
// A listening socket on a free port.
int listen_on(uint16_t* port);

// A connected pair of non-blocking Unix sockets, closed when it goes; `buffer` > 0 sets each
// side's send and receive buffers (room for what a test writes before it reads).
struct SocketPair {
  int fd[2] = {-1, -1};
  explicit SocketPair(int buffer = 0);
  ~SocketPair();
  SocketPair(const SocketPair&) = delete;
  SocketPair& operator=(const SocketPair&) = delete;
};

}  // namespace troupe::testing
