// Fuzz target: a sealed connection's bytes from a peer (actors/net/seal.h), opened and read as
// frames. The input's first byte picks how: even, the rest is the wire as it comes; odd, the
// rest is xored onto records a sealer made of a known text. Nothing crashes, and whatever the
// opener delivers is a prefix of what was sealed: no changed byte is ever delivered.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "actors/net/frame.h"
#include "actors/net/seal.h"
#include "fuzz/fuzz_input.h"

namespace {

using troupe::actors::net::LinkKeys;

const LinkKeys& keys() {
  static const LinkKeys k = [] {
    const unsigned char job_key[32] = {7, 7, 7};
    LinkKeys made;
    if (!troupe::actors::net::derive_link_keys(job_key, sizeof job_key, "fuzz", true, &made)) {
      __builtin_trap();
    }
    return made;
  }();
  return k;
}

// Frames of the known text: a small one, then one of 5000 bytes (two records' worth at most).
std::string known_text() {
  std::string text("\x03\0\0\0\0\0\0\0abc", 11);
  std::string body(5000, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i * 31 % 251);
  for (int i = 0; i < 8; ++i) text += static_cast<char>(body.size() >> (8 * i));
  return text + body;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  troupe::fuzz::cap_memory();
  if (size == 0 || size > (1 << 16)) return 0;
  const bool mutate = data[0] % 2 == 1;
  std::string wire(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string text = known_text();
  int fd[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fd) != 0) return 0;
  const int room = 1 << 18;
  ::setsockopt(fd[0], SOL_SOCKET, SO_SNDBUF, &room, sizeof room);
  ::setsockopt(fd[1], SOL_SOCKET, SO_RCVBUF, &room, sizeof room);
  if (mutate) {
    troupe::actors::net::Sealer sealer(keys().send);
    std::string sealed;
    iovec part{const_cast<char*>(text.data()), text.size()};
    int pipe_fd[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, pipe_fd) != 0) return 0;
    while (part.iov_len > 0) {
      sealer.seal(&part, 1);
      while (sealer.pending()) sealer.send(pipe_fd[0]);
    }
    ::shutdown(pipe_fd[0], SHUT_WR);
    char buf[4096];
    for (ssize_t n; (n = ::recv(pipe_fd[1], buf, sizeof buf, 0)) > 0;) sealed.append(buf, n);
    ::close(pipe_fd[0]);
    ::close(pipe_fd[1]);
    for (size_t i = 0; i < wire.size() && i < sealed.size(); ++i) sealed[i] ^= wire[i];
    wire = sealed;
  }
  if (::send(fd[0], wire.data(), wire.size(), MSG_DONTWAIT) != static_cast<ssize_t>(wire.size())) {
    ::close(fd[0]);
    ::close(fd[1]);
    return 0;
  }
  ::shutdown(fd[0], SHUT_WR);
  ::fcntl(fd[1], F_SETFL, ::fcntl(fd[1], F_GETFL) | O_NONBLOCK);
  troupe::actors::net::Opener opener(keys().receive);
  troupe::actors::net::FrameReader reader;
  std::string delivered;
  for (;;) {
    troupe::runtime::Bytes frame;
    const auto got = reader.read(fd[1], 1 << 20, &frame, &opener);
    if (got != troupe::actors::net::FrameReader::Got::kFrame) break;
    delivered += std::string(frame.data, frame.size);
  }
  // The frames' bodies, in order, are the text less its headers.
  const std::string bodies = text.substr(8, 3) + text.substr(19);
  if (mutate && bodies.compare(0, delivered.size(), delivered) != 0) __builtin_trap();
  ::close(fd[0]);
  ::close(fd[1]);
  return 0;
}
