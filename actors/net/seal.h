// Sealed records: what protects every byte of a member's connection after the job secret's
// handshake (job_secret.h), on both transports (CAF's port, member_middleman.h, and the data
// channel, net/data_server.h). Each direction of a connection has a key and an IV of its own,
// derived from the secret and both handshake nonces (HKDF-SHA256), and its bytes travel in
// records sealed with AES-128-GCM:
//
//   [4-byte little-endian length L, 1..kMaxRecordBytes] [L bytes of ciphertext] [16-byte tag]
//
// The tag covers the length and the ciphertext; the nonce is the IV xor the record's sequence
// number (as in TLS 1.3), so a record that is changed, dropped, replayed, reordered or moved to
// another connection fails as surely as a flipped bit. A failure ends the connection: nothing
// of a failed record is delivered.
//
//   Sealer sealer(keys.send);                 // LinkKeys from the handshake
//   sealer.seal(parts, count);                // takes up to kMaxRecordBytes of the iovecs
//   while (sealer.pending()) sealer.send(fd); // as the socket takes it
//
//   Opener opener(keys.receive);
//   ssize_t n = opener.read(fd, buf, size);   // plaintext, as recv would give it
//
// One Sealer and one Opener per connection, each used by one thread at a time.
#pragma once

#include <openssl/evp.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace troupe::actors::net {

// A record's plaintext is at most this long: big enough that a 4 MiB tensor costs 64 records,
// small enough that a record stays in the cache between its sealing and the kernel's copy.
constexpr size_t kMaxRecordBytes = size_t(64) << 10;
constexpr size_t kRecordHeaderBytes = 4, kRecordTagBytes = 16;

// One direction's secrets.
struct DirectionKey {
  std::array<unsigned char, 16> key{};
  std::array<unsigned char, 12> iv{};
};

// A connection's keys as one end sees them.
struct LinkKeys {
  DirectionKey send, receive;
  ~LinkKeys();
};

// The keys of a connection from the job's key and the handshake's transcript (HKDF-SHA256): the
// dialler's `send` is the listener's `receive` and the other way round. False only when
// OpenSSL cannot derive (no memory).
bool derive_link_keys(const unsigned char* job_key, size_t job_key_size,
                      const std::string& transcript, bool dialler, LinkKeys* keys);

namespace detail {
struct CipherFree {
  void operator()(EVP_CIPHER_CTX* ctx) const { EVP_CIPHER_CTX_free(ctx); }
};
// One direction's cipher: its key's schedule, made once, and the records' count. Not copyable:
// a sequence number used twice would repeat a nonce.
struct RecordCipher {
  RecordCipher(const DirectionKey& key, bool encrypt);
  ~RecordCipher();
  std::array<unsigned char, 12> next_nonce();       // the IV xor the sequence number, as TLS 1.3
  std::unique_ptr<EVP_CIPHER_CTX, CipherFree> ctx;  // null when OpenSSL had no memory
  DirectionKey key;
  uint64_t sequence = 0;
};
}  // namespace detail

class Sealer {
 public:
  explicit Sealer(const DirectionKey& key) : cipher_(key, true) {}

  // Seals the first bytes of `parts` (up to kMaxRecordBytes) as one record, and advances the
  // parts past them: how many plaintext bytes it took. Only when nothing is pending.
  size_t seal(iovec* parts, size_t count);
  // Writes what the socket takes of the pending record: bytes written, or -1 (errno says; not
  // EAGAIN, which writes nothing and returns 0).
  ssize_t send(int fd);
  bool pending() const { return sent_ < record_.size(); }

 private:
  detail::RecordCipher cipher_;
  std::vector<unsigned char> record_;
  size_t sent_ = 0;
};

class Opener {
 public:
  explicit Opener(const DirectionKey& key) : cipher_(key, false) {}

  // Up to `room` bytes of plaintext into `into`, from records opened earlier or from the
  // socket: how many (> 0); 0 while no record is whole (the socket has nothing more now); -1
  // at the end: the peer closed, the socket failed, or a record failed to open (why() says,
  // and integrity_failed()).
  ssize_t read(int fd, char* into, size_t room);
  // Bytes taken from the socket and not yet delivered (opened, or whole records and the start
  // of the next): read them before waiting on the socket again, which no longer shows them.
  size_t buffered() const { return plain_size_ - plain_at_ + (in_end_ - in_begin_); }
  const std::string& why() const { return why_; }
  bool integrity_failed() const { return integrity_failed_; }

 private:
  // Opens the record at the start of in_ into `to` (which may be in_ itself).
  bool open(unsigned char* to, size_t length);
  ssize_t fail(const std::string& why, bool integrity);

  detail::RecordCipher cipher_;
  std::vector<unsigned char> in_;  // received: whole records and the start of the next
  size_t in_begin_ = 0, in_end_ = 0;
  std::vector<unsigned char> plain_;  // an opened record the reader took in part
  size_t plain_at_ = 0, plain_size_ = 0;
  std::string why_;
  bool integrity_failed_ = false;
};

}  // namespace troupe::actors::net
