#include "actors/job_secret.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "runtime/log.h"

namespace troupe::actors {

using runtime::Result;
using runtime::Status;

namespace {

constexpr size_t kSecretBytes = 32;

}  // namespace

namespace {

using Mac = JobSecret::Mac;

Mac sign(const Mac& key, std::string_view message) {
  Mac mac{};
  unsigned int size = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac.data(), &size);
  return mac;
}

bool verify(const Mac& key, std::string_view message, const Mac& mac) {  // in constant time
  const Mac expected = sign(key, message);
  return CRYPTO_memcmp(expected.data(), mac.data(), mac.size()) == 0;
}

// 'B': the second handshake, which names the tasks.
constexpr char kMagic[4] = {'T', 'R', 'P', 'B'};
constexpr size_t kNonce = 32;
using Clock = std::chrono::steady_clock;

enum class Moved { kAll, kTimedOut, kClosed };

// All of `size` bytes, each way, waiting at most until `deadline`. Works on blocking and
// non-blocking sockets alike.
Moved transfer(int fd, char* data, size_t size, bool send, Clock::time_point deadline) {
  size_t done = 0;
  while (done < size) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return Moved::kTimedOut;
    pollfd p{fd, static_cast<short>(send ? POLLOUT : POLLIN), 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) return Moved::kTimedOut;
    if (ready < 0) return Moved::kClosed;
    const ssize_t n = send ? ::send(fd, data + done, size - done, MSG_NOSIGNAL | MSG_DONTWAIT)
                           : ::recv(fd, data + done, size - done, MSG_DONTWAIT);
    if (n == 0) return Moved::kClosed;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return Moved::kClosed;
    }
    done += static_cast<size_t>(n);
  }
  return Moved::kAll;
}

// Why a dialler's handshake did not finish, as its error says.
std::string unfinished(Moved moved) {
  return moved == Moved::kTimedOut
             ? "timed out before the handshake finished (the server is slow, or busy with "
               "other connections' handshakes)"
             : "the server closed the connection during the handshake: it does not hold this "
               "job's secret, has none, or ended the handshake for others";
}

std::string message(const char* role, std::string_view first, std::string_view second) {
  std::string m = role;
  m.append(first);
  m.append(second);
  return m;
}

// A task's name as the handshake carries it, and back ("" for a field that is no name).
bool put_name(const std::string& name, char* field) {
  if (name.size() > JobSecret::kNameBytes || name.find('\0') != std::string::npos) return false;
  std::memset(field, 0, JobSecret::kNameBytes);
  std::memcpy(field, name.data(), name.size());
  return true;
}
std::string name_in(const char* field) {
  return std::string(field, ::strnlen(field, JobSecret::kNameBytes));
}

bool is_evaluator(const std::string& task) { return task.rfind("/job:evaluator/", 0) == 0; }

// The evaluator is outside TF's cluster spec and a member all the same; "/job:worker/task:*"
// admits every task of a job whose tasks come and go.
bool is_member(const Introduction& me, const std::string& task) {
  if (me.members.empty() || task.empty() || is_evaluator(task)) return true;
  return std::any_of(me.members.begin(), me.members.end(), [&](const std::string& m) {
    if (m.empty() || m.back() != '*') return m == task;
    return task.size() >= m.size() && task.compare(0, m.size() - 1, m, 0, m.size() - 1) == 0;
  });
}

// What a dialler that proved itself with `key` and says it is `task` may do.
Role role_of(const JobSecret::Key& key, const std::string& task) {
  return key.role == Role::kReader || is_evaluator(task) ? Role::kReader : Role::kWriter;
}

std::string hex(const unsigned char* bytes, size_t size) {
  std::string text;
  for (size_t i = 0; i < size; ++i) {
    text += "0123456789abcdef"[bytes[i] >> 4];
    text += "0123456789abcdef"[bytes[i] & 15];
  }
  return text;
}

// A Kubernetes Secret mounted as a volume: `path` is a link into "..data/", which the kubelet
// swaps atomically, and the file may be group-readable (mode 0440 with the pod's fsGroup).
bool mounted_secret(const std::string& path) {
  char target[4096];
  const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
  return n > 0 && std::string_view(target, static_cast<size_t>(n)).rfind("..data/", 0) == 0;
}

// `text` at `path`, mode 0600, through a name no one could have planted (a symlink there would
// have the secret written through it), made with O_EXCL, then renamed over `path`.
Status write_private(const std::string& path, std::string text, const char* what) {
  std::string tmp = path + ".XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) {
    OPENSSL_cleanse(text.data(), text.size());
    return runtime::failed_precondition("cannot write the ", what, " ", path, ": ",
                                        std::strerror(errno));
  }
  const bool written = ::fchmod(fd, 0600) == 0 &&
                       ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                       ::fsync(fd) == 0;
  OPENSSL_cleanse(text.data(), text.size());
  const bool closed = ::close(fd) == 0;
  if (!written || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return runtime::internal_error("cannot write the ", what, " ", path);
  }
  return runtime::ok_status();
}

// A nonce that is not random makes a recorded exchange replayable: no handshake without one.
bool random_nonce(char* into) {
  return RAND_bytes(reinterpret_cast<unsigned char*>(into), kNonce) == 1;
}

constexpr char kNoRandom[] =
    "no random bytes for the handshake's nonce (OpenSSL's RAND_bytes failed)";

}  // namespace

std::string JobSecret::keys_of(const Key& key, std::string_view hello, std::string_view answer,
                               std::string_view proof, bool dialler, net::LinkKeys* keys) const {
  std::string transcript;
  transcript.reserve(hello.size() + answer.size() + proof.size());
  transcript.append(hello).append(answer).append(proof);
  if (!net::derive_link_keys(key.secret.data(), key.secret.size(), transcript, dialler, keys)) {
    return "cannot derive the connection's keys";
  }
  return "";
}

std::string JobSecret::prove_member(int fd, const Introduction& me, net::LinkKeys* keys,
                                    std::chrono::milliseconds timeout) const {
  const auto deadline = Clock::now() + timeout;
  const std::vector<Key> held = secrets();
  if (held.empty()) return "no job secret to prove membership with (" + path_ + ")";
  const Key& key = held.front();
  char hello[kHelloBytes];
  std::memcpy(hello, kMagic, sizeof kMagic);
  char* mine = hello + sizeof kMagic;
  std::memcpy(mine + kNonce, key.id.data(), kKeyIdBytes);
  char* names = mine + kNonce + kKeyIdBytes;
  if (!put_name(me.task, names) || !put_name(me.dialled, names + kNameBytes)) {
    return "a task name longer than " + std::to_string(kNameBytes) + " bytes";
  }
  if (!random_nonce(mine)) return kNoRandom;
  if (Moved m = transfer(fd, hello, sizeof hello, true, deadline); m != Moved::kAll) {
    return unfinished(m);
  }
  char answer[kAnswerBytes];
  if (Moved m = transfer(fd, answer, sizeof answer, false, deadline); m != Moved::kAll) {
    return unfinished(m);
  }
  Mac theirs{};
  std::memcpy(theirs.data(), answer + kNonce + kNameBytes, theirs.size());
  const std::string_view said(answer, kNonce + kNameBytes);
  if (!verify(key.secret, message("troupe server", {hello, sizeof hello}, said), theirs)) {
    return "the server does not hold this job's secret";
  }
  const std::string reached = name_in(answer + kNonce);
  if (!me.dialled.empty() && !reached.empty() && reached != me.dialled) {
    return "reached " + reached + ", not " + me.dialled + " as dialled";
  }
  Mac proof =
      sign(key.secret, message("troupe client", {hello, sizeof hello}, {answer, sizeof answer}));
  if (Moved m = transfer(fd, reinterpret_cast<char*>(proof.data()), proof.size(), true, deadline);
      m != Moved::kAll) {
    return unfinished(m);
  }
  return keys_of(key, {hello, sizeof hello}, {answer, sizeof answer},
                 {reinterpret_cast<const char*>(proof.data()), proof.size()}, true, keys);
}

std::string JobSecret::answer_hello(std::string_view hello, const Introduction& me,
                                    std::string* answer) const {
  if (hello.size() != kHelloBytes || std::memcmp(hello.data(), kMagic, sizeof kMagic) != 0) {
    return "not a troupe member's handshake";
  }
  const char* names = hello.data() + sizeof kMagic + kNonce + kKeyIdBytes;
  const std::string claims = name_in(names), dialled = name_in(names + kNameBytes);
  Key key;
  if (!key_for(hello, &key)) {
    return "proves itself with a secret this member does not hold (another job's, or one "
           "rotated out or not yet in)";
  }
  if (!is_member(me, claims)) return "says it is " + claims + ", which is not in the cluster";
  if (!dialled.empty() && !me.task.empty() && dialled != me.task) {
    return "dialled " + dialled + ", but this is " + me.task;
  }
  if (key.role == Role::kReader && !claims.empty() && !is_evaluator(claims)) {
    return "proves itself with a reader's secret, which speaks for the evaluator only, and says "
           "it is " +
           claims;
  }
  if (role_of(key, claims) == Role::kReader && !me.readers) {
    return (claims.empty() ? std::string("a reader") : claims) +
           " may only read, and this port takes the chief's and the workers' calls alone (a "
           "reader reads on a ps's data port)";
  }
  answer->assign(kAnswerBytes, '\0');
  if (!random_nonce(answer->data())) return kNoRandom;
  if (!put_name(me.task, answer->data() + kNonce)) return "this task's name is too long";
  const Mac mac = sign(key.secret, message("troupe server", hello,
                                           std::string_view(answer->data(), kNonce + kNameBytes)));
  std::memcpy(answer->data() + kNonce + kNameBytes, mac.data(), mac.size());
  return "";
}

bool JobSecret::may_start_hello(std::string_view first) {
  return std::memcmp(first.data(), kMagic, std::min(first.size(), sizeof kMagic)) == 0;
}

std::string JobSecret::check_proof(std::string_view hello, std::string_view answer,
                                   std::string_view proof, net::LinkKeys* keys, Peer* peer) const {
  Mac mac{};
  if (proof.size() != mac.size()) return "no proof of membership";
  std::memcpy(mac.data(), proof.data(), mac.size());
  Key key;
  if (!key_for(hello, &key) || !verify(key.secret, message("troupe client", hello, answer), mac)) {
    return "a wrong job secret";
  }
  if (peer != nullptr) {  // answer_hello checked the same hello's claims
    peer->task = name_in(hello.data() + sizeof kMagic + kNonce + kKeyIdBytes);
    peer->role = role_of(key, peer->task);
  }
  return keys_of(key, hello, answer, proof, false, keys);
}

std::string JobSecret::check_member(int fd, const Introduction& me, net::LinkKeys* keys,
                                    std::chrono::milliseconds timeout, Peer* peer) const {
  const auto deadline = Clock::now() + timeout;
  std::string hello(kHelloBytes, '\0'), answer, proof(kProofBytes, '\0');
  if (transfer(fd, hello.data(), sizeof kMagic, false, deadline) != Moved::kAll) {
    return "no handshake in time";
  }
  if (!may_start_hello(hello)) return "not a troupe member's handshake";
  if (transfer(fd, hello.data() + sizeof kMagic, hello.size() - sizeof kMagic, false, deadline) !=
      Moved::kAll) {
    return "no handshake in time";
  }
  if (std::string why = answer_hello(hello, me, &answer); !why.empty()) return why;
  if (transfer(fd, answer.data(), answer.size(), true, deadline) != Moved::kAll)
    return "gone during the handshake";
  if (transfer(fd, proof.data(), proof.size(), false, deadline) != Moved::kAll) {
    return "no proof of membership in time";
  }
  return check_proof(hello, answer, proof, keys, peer);
}

Result<std::vector<JobSecret::Key>> JobSecret::read_keys(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return runtime::not_found("job secret ", path, ": no such file");
  }
  if ((st.st_mode & (mounted_secret(path) ? S_IRWXO | S_IWGRP | S_IXGRP : S_IRWXG | S_IRWXO)) !=
      0) {
    return runtime::failed_precondition("job secret ", path,
                                        " is readable by others: chmod 600 it");
  }
  std::ifstream in(path);
  std::vector<Key> keys;
  auto name = [](Key& key) {
    const Mac id = sign(key.secret, "troupe key id");
    std::memcpy(key.id.data(), id.data(), kKeyIdBytes);
  };
  static constexpr std::string_view kReader = "reader ";
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    Key key;
    const bool reader = line.compare(0, kReader.size(), kReader) == 0;
    const std::string_view digits = std::string_view(line).substr(reader ? kReader.size() : 0);
    if (digits.size() < 2 * kSecretBytes || (reader && digits.size() != 2 * kSecretBytes) ||
        digits.find_first_not_of("0123456789abcdef") != std::string::npos) {
      OPENSSL_cleanse(line.data(), line.size());
      return runtime::invalid_argument(
          "job secret ", path, ": line ", keys.size() + 1, " is not ", 2 * kSecretBytes,
          " or more hexadecimal digits, nor \"reader\" and ", 2 * kSecretBytes,
          " (troupe secret FILE makes one, troupe secret --reader JOB FILE the other)");
    }
    if (reader) {
      key.role = Role::kReader;
      auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
      for (size_t i = 0; i < kSecretBytes; ++i) {
        key.secret[i] =
            static_cast<unsigned char>(nibble(digits[2 * i]) << 4 | nibble(digits[2 * i + 1]));
      }
    } else {
      SHA256(reinterpret_cast<const unsigned char*>(digits.data()), digits.size(),
             key.secret.data());
    }
    OPENSSL_cleanse(line.data(), line.size());
    name(key);
    keys.push_back(key);
  }
  if (keys.empty()) return runtime::invalid_argument("job secret ", path, " is empty");
  if (keys.size() > 2) {
    return runtime::invalid_argument("job secret ", path, " holds ", keys.size(),
                                     " secrets: one, or two while rotating");
  }
  // A holder of the job secret knows its readers' secrets, and accepts them as readers.
  for (size_t i = 0, lines = keys.size(); i < lines; ++i) {
    if (keys[i].role != Role::kWriter) continue;
    Key reader;
    reader.secret = sign(keys[i].secret, "troupe reader");
    reader.role = Role::kReader;
    reader.derived = true;
    name(reader);
    keys.push_back(reader);
  }
  return keys;
}

std::vector<JobSecret::Key> JobSecret::secrets() const {
  std::lock_guard<std::mutex> lock(mu_);
  struct stat now;
  const bool changed =
      ::stat(path_.c_str(), &now) == 0 &&
      (now.st_ino != seen_.st_ino || now.st_size != seen_.st_size ||
       now.st_mtim.tv_sec != seen_.st_mtim.tv_sec || now.st_mtim.tv_nsec != seen_.st_mtim.tv_nsec);
  if (changed) {
    auto read = read_keys(path_);
    if (read.ok()) {
      keys_ = std::move(*read);
      const auto lines =
          std::count_if(keys_.begin(), keys_.end(), [](auto& k) { return !k.derived; });
      runtime::log_info("job secret ", path_, " read again: ", lines,
                        lines == 1 ? " secret" : " secrets (a rotation)");
    } else {
      runtime::log_warning(read.status().message(), "; the secrets read before stay");
    }
    seen_ = now;  // a bad file is reported once, not at every handshake
  }
  return keys_;
}

bool JobSecret::key_for(std::string_view hello, Key* key) const {
  const char* id = hello.data() + sizeof kMagic + kNonce;
  for (const Key& k : secrets()) {
    if (CRYPTO_memcmp(k.id.data(), id, kKeyIdBytes) == 0) {
      *key = k;
      return true;
    }
  }
  return false;
}

Result<std::shared_ptr<const JobSecret>> load_job_secret(const std::string& path) {
  TROUPE_ASSIGN_OR_RETURN(std::vector<JobSecret::Key> keys, JobSecret::read_keys(path));
  auto secret = std::make_shared<JobSecret>();
  secret->path_ = path;
  secret->keys_ = std::move(keys);
  ::stat(path.c_str(), &secret->seen_);
  return std::shared_ptr<const JobSecret>(std::move(secret));
}

Status make_job_secret(const std::string& path) {
  unsigned char bytes[kSecretBytes];
  if (RAND_bytes(bytes, sizeof bytes) != 1) {
    return runtime::internal_error("making a job secret: no random bytes");
  }
  std::string text = hex(bytes, sizeof bytes) + "\n";
  OPENSSL_cleanse(bytes, sizeof bytes);
  return write_private(path, std::move(text), "job secret");
}

Status make_reader_secret(const std::string& job_file, const std::string& path) {
  TROUPE_ASSIGN_OR_RETURN(std::vector<JobSecret::Key> keys, JobSecret::read_keys(job_file));
  std::string text;
  for (const JobSecret::Key& k : keys) {
    // A reader's own line stays one; a job secret's becomes its derived reader's.
    if (k.role == Role::kReader) text += "reader " + hex(k.secret.data(), k.secret.size()) + "\n";
  }
  for (JobSecret::Key& k : keys) OPENSSL_cleanse(k.secret.data(), k.secret.size());
  return write_private(path, std::move(text), "reader's secret");
}

Result<std::shared_ptr<const JobSecret>> job_secret_from_env() {
  const char* path = std::getenv("TROUPE_JOB_SECRET");
  if (path == nullptr || *path == '\0') return std::shared_ptr<const JobSecret>();
  return load_job_secret(path);
}

}  // namespace troupe::actors
