// The job secret: what proves that a process is a member of a cluster. A file of random
// hexadecimal digits (mode 600), made once per job (`troupe cluster` makes one per run,
// `troupe secret FILE` one for machines of your own) and given to every member. Both of a
// cluster's transports check it before any message of a connection reaches an actor: CAF's
// port through the member middleman (member_middleman.h), the data channel before its first
// frame (net/data_server.h), each with an HMAC-SHA256 challenge-response, both ways, so that the
// secret itself never travels. The handshake's transcript and the secret give the connection
// its keys (net/seal.h), and every byte after the handshake travels sealed with them.
//
//   auto secret = actors::load_job_secret("/run/job.secret");   // Result<shared_ptr<const ...>>
//   actors::Runtime rt({.secret = *secret});                      // every connection checked
//
// Thread-safe once loaded.
#pragma once

#include <sys/stat.h>

#include <array>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "actors/net/seal.h"
#include "runtime/status.h"

namespace troupe::actors {

// Who takes part in a handshake, as one end sees it; both ends' names travel in it and the MACs
// and the keys cover them. A listener refuses a dialler that names a task outside `members`
// (when it has members; an evaluator's task is always one) or that dialled another task than
// `task`; a dialler refuses a listener that says it is another task than `dialled`. An empty
// name checks nothing: a process that plays no task, a test's server.
struct Introduction {
  std::string task;     // this end's: "/job:ps/task:0", or "" for none
  std::string dialled;  // a dialler's: whom it means to reach, "" for any
  // A listener's: the cluster spec's tasks ("/job:worker/task:*": any of that job's), empty for
  // any.
  std::vector<std::string> members;
  bool readers = true;  // a listener's: whether it lets a reader in (Role)
};

// What a member may ask of a ps. A writer (the chief, a worker: a holder of the job secret)
// runs any shard call; a reader only reads variables. A connection is a reader's when it proved
// itself with a reader's secret (`troupe secret --reader`: what an evaluator is given, from
// which the job secret cannot be had) or says it is the evaluator.
enum class Role { kWriter, kReader };
struct Peer {
  std::string task;  // what its handshake said, "" for none
  Role role = Role::kWriter;
  // The connection it called on, for a shard's view of which replicas are still connected
  // (ShardCalls::closed): a data server's connection number, or one with kCafLink set for a
  // caller over CAF's connection; 0: not followed (a caller in the shard's own process).
  uint64_t link = 0;
  static constexpr uint64_t kCafLink = uint64_t{1} << 63;
};

// The file may hold two secrets, one a line, during a rotation: the first is the one this
// process proves itself with, and both are accepted from others. It is read again when it
// changes (at the next handshake), so a running cluster rotates without a restart (README). A
// line "reader HEX" is a reader's secret (make_reader_secret): it proves a reader, and a holder
// of the job secret accepts it as one.
class JobSecret {
 public:
  using Mac = std::array<unsigned char, 32>;
  const std::string& path() const { return path_; }

  // The challenge-response on a connected socket, before any other byte: the client sends a
  // magic, a nonce, which secret it proves with (a hash of it: its id), its task and the task it
  // dials; the server answers, with that secret, its nonce, its task
  // and an HMAC over all of it, proving that it holds the secret; the client answers with an
  // HMAC over everything so far. Each returns "" when the peer proved membership and is whom
  // `me` accepts, with the connection's keys in `keys` (and who it is in `peer`, when given),
  // otherwise why not; each gives up after `timeout`.
  std::string prove_member(int fd, const Introduction& me, net::LinkKeys* keys,
                           std::chrono::milliseconds timeout = kHandshakeTimeout) const;
  std::string check_member(int fd, const Introduction& me, net::LinkKeys* keys,
                           std::chrono::milliseconds timeout = kHandshakeTimeout,
                           Peer* peer = nullptr) const;
  static constexpr std::chrono::milliseconds kHandshakeTimeout{5000};

  // check_member in steps, for a server that waits on many sockets at once: the client's hello
  // (kHelloBytes) gets the answer to send (kAnswerBytes), then its proof (kProofBytes) is
  // checked. Each returns "" or why the peer is refused.
  static constexpr size_t kNameBytes = 64;  // a task's name, zero-padded
  static constexpr size_t kKeyIdBytes = 8;
  static constexpr size_t kHelloBytes = 4 + 32 + kKeyIdBytes + 2 * kNameBytes,
                          kAnswerBytes = 32 + kNameBytes + 32, kProofBytes = 32;
  std::string answer_hello(std::string_view hello, const Introduction& me,
                           std::string* answer) const;
  // Whether the bytes of a hello so far (any number) may start one: a stranger speaking
  // something else is refused at its first bytes, not at the deadline.
  static bool may_start_hello(std::string_view first);
  // `peer`, when given, is told who passed and as what.
  std::string check_proof(std::string_view hello, std::string_view answer, std::string_view proof,
                          net::LinkKeys* keys, Peer* peer = nullptr) const;

  // One secret this process holds, as the handshake uses it.
  struct Key {
    Mac secret{};
    std::array<unsigned char, kKeyIdBytes> id{};
    Role role = Role::kWriter;
    bool derived = false;  // a job secret's reader key, accepted but in no line of the file
  };

 private:
  friend runtime::Result<std::shared_ptr<const JobSecret>> load_job_secret(const std::string&);
  friend runtime::Status make_reader_secret(const std::string&, const std::string&);
  static runtime::Result<std::vector<Key>> read_keys(const std::string& path);
  // The secrets as the file holds them now: read again when it changed since the last look.
  std::vector<Key> secrets() const;
  // The one a hello names, when this process holds it.
  bool key_for(std::string_view hello, Key* key) const;
  std::string keys_of(const Key& key, std::string_view hello, std::string_view answer,
                      std::string_view proof, bool dialler, net::LinkKeys* keys) const;
  std::string path_;
  mutable std::mutex mu_;
  mutable std::vector<Key> keys_;
  mutable struct stat seen_ {};  // the file when keys_ were read
};

// Reads and checks a secret file; an error naming the file and what is wrong (missing, readable
// by others, too short, not hexadecimal).
runtime::Result<std::shared_ptr<const JobSecret>> load_job_secret(const std::string& path);
// Writes a new secret (256 random bits as hexadecimal digits) to `path`, mode 0600.
runtime::Status make_job_secret(const std::string& path);
// Writes to `path` (mode 0600) the reader's secret of each job secret in `job_file`: a line
// "reader HEX" each, an HMAC of it, which proves a reader and cannot be turned back into it.
runtime::Status make_reader_secret(const std::string& job_file, const std::string& path);
// The file TROUPE_JOB_SECRET names, loaded; null when the variable is unset.
runtime::Result<std::shared_ptr<const JobSecret>> job_secret_from_env();

}  // namespace troupe::actors
