// The data channel's framing: a frame is an 8-byte little-endian length and that many bytes (a
// shard call or reply, shard_codec.h; the job secret's handshake is written raw). OutFrame writes
// a Cap'n Proto message's segments from where they lie (a call's inputs, a reply's outputs: a
// variable's value straight from the ps's store); FrameReader reads a frame into a buffer of its
// own, decoded in place. Each side's kernel copies the bytes once, nothing else does. On a
// member's connection both take the connection's Sealer and Opener (net/seal.h): the frames
// travel in sealed records, sealed as the socket takes them and opened as they come.
//
//   OutFrame out;  out.message = call.message;  out.tensors = call.inputs;  out.frame();
//   while (!out.done()) if (out.write(fd) < 0) ...;      // a non-blocking socket: as it takes
//
//   FrameReader reader;  runtime::Bytes frame;
//   switch (reader.read(fd, max_bytes, &frame)) { case FrameReader::Got::kFrame: ... }
//
// One of each per connection, used by one thread at a time.
#pragma once

#include <sys/uio.h>

#include <capnp/message.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/net/seal.h"
#include "runtime/tensor.h"
#include "runtime/tensor_wire.h"

namespace troupe::actors::net {

// The longest frame either side reads unless told otherwise (DataServerOptions).
constexpr uint64_t kMaxFrameBytes = uint64_t(1) << 32;

// Reads length-prefixed frames from a non-blocking socket as their bytes come: the header, then
// a body whose buffer grows as the bytes arrive, at most doubling what has come (a header is a
// claim, not a promise: one that claims gigabytes costs nothing until they come).
class FrameReader {
 public:
  enum class Got { kFrame, kAgain, kEnd };  // kEnd: closed, failed or refused; why() says
  // Reads until a whole frame is in `frame` or the socket has nothing more for now; through
  // `opener` when the connection is sealed (then, before waiting on the socket again, read
  // until kAgain: the opener may hold bytes the socket no longer shows).
  Got read(int fd, uint64_t max_bytes, runtime::Bytes* frame, Opener* opener = nullptr);
  const std::string& why() const { return why_; }
  uint64_t received() const { return received_; }   // bytes so far, headers included
  uint64_t allocated() const { return capacity_; }  // the buffer of the frame coming

 private:
  bool took(size_t n, uint64_t max_bytes);  // `n` more bytes came: false when refused

  unsigned char header_[8] = {};
  size_t header_got_ = 0;
  uint64_t size_ = 0, got_ = 0, capacity_ = 0, received_ = 0;
  std::shared_ptr<char[]> body_;
  std::string why_;
};

// A frame to write: its 8-byte length, then a Cap'n Proto message's segment table and its
// segments where they lie (the frame holds the message and the tensors it points into), or
// bytes of its own sent as they are (the handshake's). `next` is the first part not yet written
// (or sealed) in full. It points into itself, so it stays where it was framed (an element of a
// deque). A connection writes its frames in order, one at a time, through one Sealer.
struct OutFrame {
  std::shared_ptr<capnp::MallocMessageBuilder> message;
  std::vector<runtime::Tensor> tensors;
  std::string raw;
  unsigned char header[8] = {};
  std::vector<uint32_t> table;
  std::vector<iovec> parts;
  size_t next = 0;
  uint64_t bytes = 0;      // the whole frame's
  bool in_sealer = false;  // its last record is sealed and not yet all written

  void frame();      // `message` as a frame
  void frame_raw();  // `raw` as it is
  bool done() const { return next >= parts.size() && !in_sealer; }
  // Writes what the socket takes now, sealed by `sealer` when there is one: the bytes written,
  // or -1 on an error (errno says).
  ssize_t write(int fd, Sealer* sealer = nullptr);

 private:
  ssize_t write_plain(int fd);
  ssize_t write_sealed(int fd, Sealer& sealer);
};

}  // namespace troupe::actors::net
