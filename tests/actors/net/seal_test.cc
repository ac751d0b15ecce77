// Sealed records over a socket pair: what one end seals the other opens, whatever the pieces;
// a record changed by one bit, replayed, reordered, cut to a false length or sealed with
// another connection's keys fails to open, says "integrity", and delivers nothing of itself;
// the two ends of a handshake derive matching keys, and another transcript other keys.
#include "actors/net/seal.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "actors/net/frame.h"
#include "harness/raw_socket.h"

using troupe::actors::net::derive_link_keys;
using troupe::actors::net::FrameReader;
using troupe::actors::net::kMaxRecordBytes;
using troupe::actors::net::LinkKeys;
using troupe::actors::net::Opener;
using troupe::actors::net::OutFrame;
using troupe::actors::net::Sealer;

namespace {

// Room for a record or two whole: the tests write, then read.
struct SocketPair : troupe::testing::SocketPair {
  SocketPair() : troupe::testing::SocketPair(1 << 20) {}
};

LinkKeys keys_for(const std::string& transcript, bool dialler) {
  const unsigned char job_key[32] = {1, 2, 3};
  LinkKeys keys;
  REQUIRE(derive_link_keys(job_key, sizeof job_key, transcript, dialler, &keys));
  return keys;
}

// The records `sealer` makes of `plain` (one per kMaxRecordBytes), as bytes on the wire.
std::vector<std::string> records_of(Sealer& sealer, const std::string& plain) {
  std::vector<std::string> records;
  iovec part{const_cast<char*>(plain.data()), plain.size()};
  while (part.iov_len > 0) {
    SocketPair pair;
    REQUIRE(sealer.seal(&part, 1) > 0);
    REQUIRE(sealer.send(pair.fd[0]) > 0);
    REQUIRE_FALSE(sealer.pending());
    std::string record(2 * kMaxRecordBytes, '\0');
    const ssize_t n = ::recv(pair.fd[1], record.data(), record.size(), 0);
    REQUIRE(n > 0);
    record.resize(static_cast<size_t>(n));
    records.push_back(record);
  }
  return records;
}

// All `opener` delivers of `wire`, and how it ended: "" when it delivered all there was.
std::string open_all(Opener& opener, const std::string& wire, std::string* plain,
                     size_t room = 1 << 20) {
  SocketPair pair;
  REQUIRE(::send(pair.fd[0], wire.data(), wire.size(), 0) == static_cast<ssize_t>(wire.size()));
  std::vector<char> buf(room);
  for (;;) {
    const ssize_t n = opener.read(pair.fd[1], buf.data(), buf.size());
    if (n < 0) return opener.why();
    if (n == 0) return "";
    plain->append(buf.data(), static_cast<size_t>(n));
  }
}

std::string text(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 7 % 253);
  return s;
}

}  // namespace

TEST_CASE("the two ends of a handshake derive matching keys; another transcript, others") {
  const LinkKeys dialler = keys_for("transcript", true);
  const LinkKeys listener = keys_for("transcript", false);
  CHECK(dialler.send.key == listener.receive.key);
  CHECK(dialler.send.iv == listener.receive.iv);
  CHECK(dialler.receive.key == listener.send.key);
  CHECK(dialler.send.key != dialler.receive.key);
  const LinkKeys other = keys_for("transcripT", true);
  CHECK(other.send.key != dialler.send.key);
}

TEST_CASE("what one end seals the other opens, in pieces of any size") {
  const LinkKeys a = keys_for("t", true), b = keys_for("t", false);
  Sealer sealer(a.send);
  Opener opener(b.receive);
  const std::string plain = text(3 * kMaxRecordBytes + 123);
  std::string wire;
  for (const std::string& r : records_of(sealer, plain)) wire += r;
  CHECK(wire.size() == plain.size() + 4 * 20);
  CHECK(wire.find(plain.substr(1000, 64)) == std::string::npos);  // not in the clear
  std::string got;
  // A reader that takes 8 bytes at a time: the rest of each record waits in the opener.
  CHECK(open_all(opener, wire, &got, 8) == "");
  CHECK(got == plain);
  CHECK(opener.buffered() == 0);
}

TEST_CASE("a flipped bit, a replay, a reordering, a false length or other keys: integrity") {
  const LinkKeys a = keys_for("t", true), b = keys_for("t", false);
  const std::string plain = text(2 * kMaxRecordBytes);
  auto sealed = [&] {
    Sealer sealer(a.send);
    return records_of(sealer, plain);
  };
  const std::vector<std::string> records = sealed();
  REQUIRE(records.size() == 2);
  // One bit in the second record: in its length, its ciphertext, its tag.
  for (size_t at : {size_t(0), size_t(4), size_t(1000), records[1].size() - 1}) {
    CAPTURE(at);
    std::string second = records[1];
    second[at] ^= 0x10;
    Opener opener(b.receive);
    std::string got;
    const std::string why = open_all(opener, records[0] + second, &got);
    CHECK(why.find("integrity") != std::string::npos);
    CHECK(opener.integrity_failed());
    CHECK(got == plain.substr(0, kMaxRecordBytes));  // the first only
  }
  for (const std::string& wire : {records[0] + records[0], records[1] + records[0]}) {
    Opener opener(b.receive);
    std::string got;
    CHECK(open_all(opener, wire, &got).find("integrity") != std::string::npos);
    CHECK(got.size() <= kMaxRecordBytes);
  }
  {
    Opener opener(b.receive);
    std::string got;
    const std::string huge("\xff\xff\xff\x7f", 4);
    CHECK(open_all(opener, huge, &got).find("claims") != std::string::npos);
    CHECK(got.empty());
  }
  {
    const LinkKeys c = keys_for("another connection", false);
    Opener opener(c.receive);
    std::string got;
    CHECK(open_all(opener, records[0], &got).find("integrity") != std::string::npos);
    CHECK(got.empty());
  }
}

TEST_CASE("frames go sealed through a sealer and come out of an opener whole") {
  const LinkKeys a = keys_for("t", true), b = keys_for("t", false);
  Sealer sealer(a.send);
  Opener opener(b.receive);
  SocketPair pair;
  OutFrame out;
  out.raw = text(3 << 20);
  out.frame_raw();
  OutFrame small;
  small.raw = std::string("\x03\0\0\0\0\0\0\0abc", 11);
  small.frame_raw();
  FrameReader reader;
  troupe::runtime::Bytes frame;
  // The raw bytes hold a frame header: a 3 MiB frame of text, less 8 bytes that follow.
  for (int i = 0; i < 8; ++i) out.raw[i] = static_cast<char>(((uint64_t(3) << 20) - 8) >> (8 * i));
  FrameReader::Got got = FrameReader::Got::kAgain;
  for (int rounds = 0; rounds < 100000 && got != FrameReader::Got::kFrame; ++rounds) {
    if (!out.done()) REQUIRE(out.write(pair.fd[0], &sealer) >= 0);
    got = reader.read(pair.fd[1], uint64_t(1) << 32, &frame, &opener);
    REQUIRE(got != FrameReader::Got::kEnd);
  }
  REQUIRE(got == FrameReader::Got::kFrame);
  CHECK(std::string(frame.data, frame.size) == out.raw.substr(8));
  REQUIRE(small.write(pair.fd[0], &sealer) > 0);
  CHECK(small.done());
  for (int rounds = 0; rounds < 1000; ++rounds) {
    got = reader.read(pair.fd[1], 1 << 20, &frame, &opener);
    if (got != FrameReader::Got::kAgain) break;
  }
  REQUIRE(got == FrameReader::Got::kFrame);
  CHECK(std::string(frame.data, frame.size) == "abc");
}

TEST_CASE("records taken from the socket and not yet delivered count as buffered") {
  const LinkKeys a = keys_for("t", true), b = keys_for("t", false);
  Sealer sealer(a.send);
  Opener opener(b.receive);
  const std::string plain = text(2 * kMaxRecordBytes);
  std::string wire;
  for (const std::string& r : records_of(sealer, plain)) wire += r;
  SocketPair pair;
  REQUIRE(::send(pair.fd[0], wire.data(), wire.size(), 0) == static_cast<ssize_t>(wire.size()));
  std::vector<char> buf(plain.size());
  // One read takes both records from the socket and delivers the first: the second waits in
  // the opener, which a server that stops reading must know before it waits on the socket.
  REQUIRE(opener.read(pair.fd[1], buf.data(), buf.size()) == static_cast<ssize_t>(kMaxRecordBytes));
  CHECK(opener.buffered() > 0);
  REQUIRE(opener.read(pair.fd[1], buf.data() + kMaxRecordBytes, buf.size() - kMaxRecordBytes) ==
          static_cast<ssize_t>(kMaxRecordBytes));
  CHECK(opener.buffered() == 0);
  CHECK(std::string(buf.data(), buf.size()) == plain);
}
