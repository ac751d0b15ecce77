#include "actors/net/seal.h"

#include <openssl/crypto.h>
#include <openssl/kdf.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "actors/net/socket.h"

namespace troupe::actors::net {

namespace {

constexpr size_t kRecordOverhead = kRecordHeaderBytes + kRecordTagBytes;

}  // namespace

namespace detail {

RecordCipher::RecordCipher(const DirectionKey& k, bool encrypt)
    : ctx(EVP_CIPHER_CTX_new()), key(k) {
  if (!ctx) return;
  // The key's schedule is made once; each record only sets its nonce.
  const int ok =
      encrypt ? EVP_EncryptInit_ex(ctx.get(), EVP_aes_128_gcm(), nullptr, key.key.data(), nullptr)
              : EVP_DecryptInit_ex(ctx.get(), EVP_aes_128_gcm(), nullptr, key.key.data(), nullptr);
  if (ok != 1) ctx.reset();
}

RecordCipher::~RecordCipher() { OPENSSL_cleanse(&key, sizeof key); }

// TLS 1.3's per-record nonce: the IV with the sequence number xored into its last 8 bytes.
std::array<unsigned char, 12> RecordCipher::next_nonce() {
  std::array<unsigned char, 12> nonce = key.iv;
  for (int i = 0; i < 8; ++i) nonce[11 - i] ^= static_cast<unsigned char>(sequence >> (8 * i));
  ++sequence;
  return nonce;
}

}  // namespace detail

LinkKeys::~LinkKeys() {
  OPENSSL_cleanse(&send, sizeof send);
  OPENSSL_cleanse(&receive, sizeof receive);
}

bool derive_link_keys(const unsigned char* job_key, size_t job_key_size,
                      const std::string& transcript, bool dialler, LinkKeys* keys) {
  // Dialler to listener's key and IV, then the other way.
  unsigned char out[2 * (16 + 12)];
  size_t size = sizeof out;
  static constexpr char kInfo[] = "troupe link keys v1";
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr);
  const bool derived =
      ctx != nullptr && EVP_PKEY_derive_init(ctx) == 1 &&
      EVP_PKEY_CTX_set_hkdf_md(ctx, EVP_sha256()) == 1 &&
      EVP_PKEY_CTX_set1_hkdf_salt(ctx, reinterpret_cast<const unsigned char*>(transcript.data()),
                                  static_cast<int>(transcript.size())) == 1 &&
      EVP_PKEY_CTX_set1_hkdf_key(ctx, job_key, static_cast<int>(job_key_size)) == 1 &&
      EVP_PKEY_CTX_add1_hkdf_info(ctx, reinterpret_cast<const unsigned char*>(kInfo),
                                  sizeof kInfo - 1) == 1 &&
      EVP_PKEY_derive(ctx, out, &size) == 1 && size == sizeof out;
  EVP_PKEY_CTX_free(ctx);
  if (derived) {
    DirectionKey& out_of_dialler = dialler ? keys->send : keys->receive;
    DirectionKey& out_of_listener = dialler ? keys->receive : keys->send;
    std::memcpy(out_of_dialler.key.data(), out, 16);
    std::memcpy(out_of_dialler.iv.data(), out + 16, 12);
    std::memcpy(out_of_listener.key.data(), out + 28, 16);
    std::memcpy(out_of_listener.iv.data(), out + 44, 12);
  }
  OPENSSL_cleanse(out, sizeof out);
  return derived;
}

size_t Sealer::seal(iovec* parts, size_t count) {
  size_t length = 0;
  for (size_t i = 0; i < count && length < kMaxRecordBytes; ++i) {
    length += std::min(parts[i].iov_len, kMaxRecordBytes - length);
  }
  if (length == 0) return 0;
  record_.resize(kRecordOverhead + length);
  unsigned char* header = record_.data();
  for (size_t i = 0; i < kRecordHeaderBytes; ++i)
    header[i] = static_cast<unsigned char>(length >> (8 * i));
  const auto nonce = cipher_.next_nonce();
  EVP_CIPHER_CTX* ctx = cipher_.ctx.get();
  int out = 0;
  bool ok = ctx != nullptr &&
            EVP_EncryptInit_ex(ctx, nullptr, nullptr, nullptr, nonce.data()) == 1 &&
            EVP_EncryptUpdate(ctx, nullptr, &out, header, kRecordHeaderBytes) == 1;
  size_t done = 0;
  for (size_t i = 0; ok && i < count && done < length; ++i) {
    const size_t take = std::min(parts[i].iov_len, length - done);
    ok = EVP_EncryptUpdate(ctx, header + kRecordHeaderBytes + done, &out,
                           static_cast<const unsigned char*>(parts[i].iov_base),
                           static_cast<int>(take)) == 1;
    parts[i].iov_base = static_cast<char*>(parts[i].iov_base) + take;
    parts[i].iov_len -= take;
    done += take;
  }
  ok = ok && EVP_EncryptFinal_ex(ctx, header + kRecordHeaderBytes + length, &out) == 1 &&
       EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, kRecordTagBytes,
                           header + kRecordHeaderBytes + length) == 1;
  // A cipher that fails (no memory for its context) sends a record that can never open: the
  // peer ends the connection rather than taking unsealed bytes.
  if (!ok) std::memset(header + kRecordHeaderBytes, 0, length + kRecordTagBytes);
  sent_ = 0;
  return length;
}

ssize_t Sealer::send(int fd) {
  ssize_t written = 0;
  while (pending()) {
    const ssize_t n =
        ::send(fd, record_.data() + sent_, record_.size() - sent_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return -1;
    }
    sent_ += static_cast<size_t>(n);
    written += n;
  }
  if (!pending()) {
    record_.clear();
    sent_ = 0;
  }
  return written;
}

ssize_t Opener::fail(const std::string& why, bool integrity) {
  why_ = why;
  integrity_failed_ = integrity;
  return -1;
}

bool Opener::open(unsigned char* to, size_t length) {
  unsigned char* record = in_.data() + in_begin_;
  const auto nonce = cipher_.next_nonce();
  EVP_CIPHER_CTX* ctx = cipher_.ctx.get();
  int out = 0;
  return ctx != nullptr && EVP_DecryptInit_ex(ctx, nullptr, nullptr, nullptr, nonce.data()) == 1 &&
         EVP_DecryptUpdate(ctx, nullptr, &out, record, kRecordHeaderBytes) == 1 &&
         EVP_DecryptUpdate(ctx, to, &out, record + kRecordHeaderBytes, static_cast<int>(length)) ==
             1 &&
         EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, kRecordTagBytes,
                             record + kRecordHeaderBytes + length) == 1 &&
         EVP_DecryptFinal_ex(ctx, to + length, &out) == 1;
}

ssize_t Opener::read(int fd, char* into, size_t room) {
  if (!why_.empty()) return -1;
  if (room == 0) return 0;
  if (plain_at_ < plain_size_) {
    const size_t n = std::min(room, plain_size_ - plain_at_);
    std::memcpy(into, plain_.data() + plain_at_, n);
    plain_at_ += n;
    return static_cast<ssize_t>(n);
  }
  if (in_.empty()) in_.resize(2 * (kMaxRecordBytes + kRecordOverhead));
  for (;;) {
    const size_t have = in_end_ - in_begin_;
    size_t need = kRecordHeaderBytes;
    if (have >= kRecordHeaderBytes) {
      size_t length = 0;
      for (size_t i = 0; i < kRecordHeaderBytes; ++i) {
        length |= size_t(in_[in_begin_ + i]) << (8 * i);
      }
      if (length == 0 || length > kMaxRecordBytes) {
        return fail("integrity: a sealed record claims " + std::to_string(length) + " bytes", true);
      }
      need = kRecordOverhead + length;
      if (have >= need) {
        unsigned char* to = reinterpret_cast<unsigned char*>(into);
        if (room < length) {
          plain_.resize(kMaxRecordBytes);
          to = plain_.data();
        }
        if (!open(to, length)) {
          return fail(
              "integrity: a sealed record does not open (changed, replayed, reordered "
              "or from another connection)",
              true);
        }
        in_begin_ += need;
        if (in_begin_ == in_end_) in_begin_ = in_end_ = 0;
        if (room >= length) return static_cast<ssize_t>(length);
        plain_size_ = length;
        std::memcpy(into, plain_.data(), room);
        plain_at_ = room;
        return static_cast<ssize_t>(room);
      }
    }
    // The record's start moves to the front when the rest would not fit behind it.
    if (in_.size() - in_begin_ < need) {
      std::memmove(in_.data(), in_.data() + in_begin_, have);
      in_begin_ = 0;
      in_end_ = have;
    }
    const ssize_t n = ::recv(fd, in_.data() + in_end_, in_.size() - in_end_, 0);
    if (n == 0) return fail("the connection was closed", false);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      return fail(errno_text(), false);
    }
    in_end_ += static_cast<size_t>(n);
  }
}

}  // namespace troupe::actors::net
