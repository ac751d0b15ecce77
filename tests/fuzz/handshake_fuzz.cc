// Fuzz target: the job secret's handshake as a listener meets a stranger (the input's first 164
// bytes its hello, the next 32 its proof) and as a dialler meets a stranger posing as a server
// (the input its answer). Nothing crashes, and no forged proof or answer passes.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "actors/job_secret.h"

namespace {

const troupe::actors::JobSecret& job_secret() {
  static std::shared_ptr<const troupe::actors::JobSecret> secret = [] {
    const char* dir = std::getenv("TMPDIR");
    const std::string path = std::string(dir && *dir ? dir : "/tmp") + "/troupe_fuzz_secret_" +
                             std::to_string(::getpid());
    if (!troupe::actors::make_job_secret(path).ok()) std::abort();
    auto loaded = troupe::actors::load_job_secret(path);
    std::remove(path.c_str());
    if (!loaded.ok()) std::abort();
    return *loaded;
  }();
  return *secret;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using troupe::actors::JobSecret;
  const JobSecret& secret = job_secret();
  const std::string in(reinterpret_cast<const char*>(data), size);
  const std::string hello = in.substr(0, JobSecret::kHelloBytes);
  const std::string proof =
      in.size() > JobSecret::kHelloBytes ? in.substr(JobSecret::kHelloBytes, 32) : "";
  std::string answer;
  // A listener that knows its cluster: the names a stranger writes are checked too.
  static const troupe::actors::Introduction listener{
      "/job:ps/task:0", "", {"/job:ps/task:0", "/job:worker/task:0", "/job:chief/task:0"}};
  if (secret.answer_hello(hello, listener, &answer).empty()) {
    troupe::actors::net::LinkKeys keys;
    // The answer's nonce is fresh: a proof made before it cannot hold.
    if (secret.check_proof(hello, answer, proof, &keys).empty()) __builtin_trap();
  }
  int fd[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fd) != 0) return 0;
  const size_t n = std::min<size_t>(size, 4096);
  if (::send(fd[1], data, n, MSG_DONTWAIT) == static_cast<ssize_t>(n)) {
    ::shutdown(fd[1], SHUT_WR);
    troupe::actors::net::LinkKeys keys;
    if (secret
            .prove_member(fd[0], {"/job:worker/task:0", "/job:ps/task:0", {}}, &keys,
                          std::chrono::milliseconds(5))
            .empty()) {
      __builtin_trap();
    }
  }
  ::close(fd[0]);
  ::close(fd[1]);
  return 0;
}
