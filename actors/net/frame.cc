#include "actors/net/frame.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <new>

#include "actors/net/socket.h"

namespace troupe::actors::net {

namespace {

// A frame's buffer is allocated up to this much before its bytes arrive; past it, only once
// they have: a header is a claim, not a promise.
constexpr uint64_t kFirstFrameChunk = uint64_t(16) << 20;

}  // namespace

FrameReader::Got FrameReader::read(int fd, uint64_t max_bytes, runtime::Bytes* frame,
                                   Opener* opener) {
  for (;;) {
    if (header_got_ == sizeof header_ && got_ == size_) {
      *frame = runtime::Bytes{body_, body_ ? body_.get() : nullptr, size_};
      header_got_ = 0;
      body_.reset();
      got_ = capacity_ = size_ = 0;
      return Got::kFrame;
    }
    char* into;
    size_t room;
    if (header_got_ < sizeof header_) {
      into = reinterpret_cast<char*>(header_) + header_got_;
      room = sizeof header_ - header_got_;
    } else {
      if (got_ == capacity_) {
        // Not zeroed: every byte is read over. Doubling: what a claim costs is at most twice
        // what has come.
        const uint64_t grown = std::min(size_, std::max(kFirstFrameChunk, 2 * capacity_));
        std::shared_ptr<char[]> bigger(new (std::nothrow) char[grown]);
        if (!bigger) {
          why_ = "no memory for a frame of " + std::to_string(size_) + " bytes";
          return Got::kEnd;
        }
        if (got_ > 0) std::memcpy(bigger.get(), body_.get(), got_);
        body_ = std::move(bigger);
        capacity_ = grown;
      }
      into = body_.get() + got_;
      room = capacity_ - got_;
    }
    if (opener != nullptr) {
      const ssize_t n = opener->read(fd, into, room);
      if (n == 0) return Got::kAgain;
      if (n < 0) {
        why_ = opener->why();
        return Got::kEnd;
      }
      if (!took(static_cast<size_t>(n), max_bytes)) return Got::kEnd;
      continue;
    }
    const ssize_t n = ::recv(fd, into, room, 0);
    if (n == 0) {
      why_ = "the connection was closed";
      return Got::kEnd;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Got::kAgain;
      why_ = errno_text();
      return Got::kEnd;
    }
    if (!took(static_cast<size_t>(n), max_bytes)) return Got::kEnd;
  }
}

bool FrameReader::took(size_t n, uint64_t max_bytes) {
  received_ += n;
  if (header_got_ == sizeof header_) {
    got_ += n;
    return true;
  }
  header_got_ += n;
  if (header_got_ < sizeof header_) return true;
  size_ = 0;
  for (int i = 0; i < 8; ++i) size_ |= uint64_t(header_[i]) << (8 * i);
  if (size_ > max_bytes) {
    why_ = "a frame of " + std::to_string(size_) + " bytes is longer than the limit of " +
           std::to_string(max_bytes);
    return false;
  }
  return true;
}

void OutFrame::frame() {
  kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments = message->getSegmentsForOutput();
  // The segment count less one, each segment's size in words, padded to a whole word.
  table.assign(segments.size() + 1 + (segments.size() % 2 == 0 ? 1 : 0), 0);
  table[0] = static_cast<uint32_t>(segments.size() - 1);
  uint64_t words = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    table[i + 1] = static_cast<uint32_t>(segments[i].size());
    words += segments[i].size();
  }
  const uint64_t n = table.size() * sizeof(uint32_t) + words * sizeof(capnp::word);
  for (int i = 0; i < 8; ++i) header[i] = static_cast<unsigned char>(n >> (8 * i));
  bytes = sizeof header + n;
  parts.push_back({header, sizeof header});
  parts.push_back({table.data(), table.size() * sizeof(uint32_t)});
  for (const auto& seg : segments) {
    parts.push_back({const_cast<capnp::word*>(seg.begin()), seg.size() * sizeof(capnp::word)});
  }
}

void OutFrame::frame_raw() {
  bytes = raw.size();
  parts.push_back({raw.data(), raw.size()});
}

ssize_t OutFrame::write(int fd, Sealer* sealer) {
  return sealer != nullptr ? write_sealed(fd, *sealer) : write_plain(fd);
}

// A record at a time: sealed from the parts, then written while it is in the cache.
ssize_t OutFrame::write_sealed(int fd, Sealer& sealer) {
  ssize_t written = 0;
  for (;;) {
    if (sealer.pending()) {
      const ssize_t n = sealer.send(fd);
      if (n < 0) return -1;
      written += n;
      if (sealer.pending()) break;
    }
    while (next < parts.size() && parts[next].iov_len == 0) ++next;
    if (next >= parts.size()) break;
    sealer.seal(parts.data() + next, parts.size() - next);
  }
  in_sealer = sealer.pending();
  return written;
}

ssize_t OutFrame::write_plain(int fd) {
  ssize_t written = 0;
  while (!done()) {
    msghdr msg{};
    msg.msg_iov = parts.data() + next;
    msg.msg_iovlen = std::min<size_t>(parts.size() - next, IOV_MAX);
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return -1;
    }
    written += n;
    size_t left = static_cast<size_t>(n);
    while (!done() && left >= parts[next].iov_len) {
      left -= parts[next].iov_len;
      ++next;
    }
    if (!done()) {
      parts[next].iov_base = static_cast<char*>(parts[next].iov_base) + left;
      parts[next].iov_len -= left;
    }
  }
  return written;
}

}  // namespace troupe::actors::net
