// The data channel's framing over a socket pair: a message's segments written from where they
// lie arrive as one frame that decodes to the same message, whatever the pieces the socket
// takes; a header that claims more than the limit is refused before anything is allocated; a
// closed peer ends the reader.
#include "actors/net/frame.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <capnp/serialize.h>

#include <cstring>
#include <string>

#include "harness/raw_socket.h"

using troupe::actors::net::FrameReader;
using troupe::actors::net::OutFrame;

using troupe::testing::SocketPair;

namespace {

// A message whose root is a blob of `n` bytes, each its index modulo 251.
std::shared_ptr<capnp::MallocMessageBuilder> blob_message(size_t n) {
  auto message = std::make_shared<capnp::MallocMessageBuilder>();
  capnp::Data::Builder blob = message->initRoot<capnp::AnyPointer>().initAs<capnp::Data>(n);
  for (size_t i = 0; i < n; ++i) blob[i] = static_cast<kj::byte>(i % 251);
  return message;
}

// Reads until a whole frame is in or `tries` rounds found nothing.
FrameReader::Got read_frame(FrameReader& reader, int fd, troupe::runtime::Bytes* frame,
                            uint64_t limit = uint64_t(1) << 32) {
  for (int tries = 0; tries < 1000; ++tries) {
    const FrameReader::Got got = reader.read(fd, limit, frame);
    if (got != FrameReader::Got::kAgain) return got;
    ::usleep(1000);
  }
  return FrameReader::Got::kAgain;
}

}  // namespace

TEST_CASE("a framed message arrives whole and decodes to the message it was") {
  SocketPair pair;
  // Bigger than a socket pair's buffer: the writer goes in pieces, the reader reads as they come.
  const size_t n = 3 << 20;
  OutFrame out;
  out.message = blob_message(n);
  out.frame();
  CHECK(out.bytes > n);
  FrameReader reader;
  troupe::runtime::Bytes frame;
  FrameReader::Got got = FrameReader::Got::kAgain;
  while (!out.done() || got == FrameReader::Got::kAgain) {
    if (!out.done()) REQUIRE(out.write(pair.fd[0]) >= 0);
    got = reader.read(pair.fd[1], uint64_t(1) << 32, &frame);
    if (got == FrameReader::Got::kEnd) break;
  }
  REQUIRE(got == FrameReader::Got::kFrame);
  CHECK(frame.size + 8 == out.bytes);
  CHECK(reader.received() == out.bytes);
  kj::ArrayPtr<const capnp::word> words(reinterpret_cast<const capnp::word*>(frame.data),
                                        frame.size / sizeof(capnp::word));
  capnp::FlatArrayMessageReader decoded(words);
  capnp::Data::Reader blob = decoded.getRoot<capnp::AnyPointer>().getAs<capnp::Data>();
  REQUIRE(blob.size() == n);
  bool same = true;
  for (size_t i = 0; i < n && same; ++i) same = blob[i] == static_cast<kj::byte>(i % 251);
  CHECK(same);
}

TEST_CASE("raw bytes go as they are; frames follow each other on one stream") {
  SocketPair pair;
  OutFrame raw;
  raw.raw = std::string("\x05\0\0\0\0\0\0\0hello", 13);
  raw.frame_raw();
  OutFrame message;
  message.message = blob_message(10);
  message.frame();
  REQUIRE(raw.write(pair.fd[0]) == 13);
  REQUIRE(message.write(pair.fd[0]) == static_cast<ssize_t>(message.bytes));
  FrameReader reader;
  troupe::runtime::Bytes frame;
  REQUIRE(read_frame(reader, pair.fd[1], &frame) == FrameReader::Got::kFrame);
  CHECK(std::string(frame.data, frame.size) == "hello");
  REQUIRE(read_frame(reader, pair.fd[1], &frame) == FrameReader::Got::kFrame);
  CHECK(frame.size + 8 == message.bytes);
}

TEST_CASE("a frame's claim costs memory only as its bytes come") {
  SocketPair pair;
  const int size = 4 << 20;
  ::setsockopt(pair.fd[1], SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  const std::string claim("\x00\x00\x00\x00\x01\x00\x00\x00", 8);  // 4 GiB
  REQUIRE(::send(pair.fd[0], claim.data(), claim.size(), 0) == 8);
  FrameReader reader;
  troupe::runtime::Bytes frame;
  const std::string chunk(1 << 16, 'x');
  uint64_t sent = 0;
  // 16 MiB and one byte more, as the socket takes them.
  while (sent < (uint64_t(16) << 20) + 1) {
    const size_t want = std::min<uint64_t>(chunk.size(), (uint64_t(16) << 20) + 1 - sent);
    const ssize_t n = ::send(pair.fd[0], chunk.data(), want, 0);
    if (n > 0) sent += static_cast<uint64_t>(n);
    REQUIRE(reader.read(pair.fd[1], uint64_t(1) << 33, &frame) == FrameReader::Got::kAgain);
  }
  while (reader.read(pair.fd[1], uint64_t(1) << 33, &frame) == FrameReader::Got::kAgain &&
         reader.received() < 8 + sent) {
  }
  CHECK(reader.received() == 8 + sent);
  CHECK(reader.allocated() <= uint64_t(32) << 20);
}

TEST_CASE("a frame over the limit and a closed peer end the reader, saying why") {
  {
    SocketPair pair;
    const std::string claim("\x00\x00\x00\x00\x01\x00\x00\x00", 8);  // 4 GiB
    REQUIRE(::send(pair.fd[0], claim.data(), claim.size(), 0) == 8);
    FrameReader reader;
    troupe::runtime::Bytes frame;
    CHECK(read_frame(reader, pair.fd[1], &frame, 1 << 20) == FrameReader::Got::kEnd);
    CHECK(reader.why().find("longer than the limit of 1048576") != std::string::npos);
  }
  SocketPair pair;
  const std::string half(
      "\x10\x00\x00\x00\x00\x00\x00\x00"
      "abc",
      11);
  REQUIRE(::send(pair.fd[0], half.data(), half.size(), 0) == 11);
  ::shutdown(pair.fd[0], SHUT_WR);
  FrameReader reader;
  troupe::runtime::Bytes frame;
  CHECK(read_frame(reader, pair.fd[1], &frame) == FrameReader::Got::kEnd);
  CHECK(reader.why() == "the connection was closed");
}
