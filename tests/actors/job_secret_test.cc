// The job secret's file and handshake: a secret is written where a planted symlink cannot
// redirect it, a handshake without random bytes for its nonce is refused on both sides
// (OpenSSL's RAND_bytes failing, through a shim this binary puts in front of it), and the tasks
// the handshake names are checked: a dialler outside the cluster, or one that dialled another
// task, is refused; an evaluator is a member, and a reader; a reader's secret proves a reader.
#include "actors/job_secret.h"

#include <dlfcn.h>
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "harness/ps_process.h"
#include "harness/temp_dir.h"

using namespace troupe;

namespace {
std::atomic<bool> random_fails{false};
}  // namespace

// Ahead of libcrypto's: fails while a test says so, else is the real one.
extern "C" int RAND_bytes(unsigned char* buf, int num) {
  if (random_fails) return 0;
  using Real = int (*)(unsigned char*, int);
  static Real real = reinterpret_cast<Real>(::dlsym(RTLD_NEXT, "RAND_bytes"));
  return real(buf, num);
}

TEST_CASE("a secret goes to its file, not through a symlink planted beside it") {
  const std::string dir = testing::temp_dir("planted");
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/job.secret", victim = dir + "/victim";
  std::ofstream(victim) << "keep me\n";
  std::filesystem::create_symlink(victim, path + ".tmp");
  REQUIRE(actors::make_job_secret(path).ok());
  std::ifstream in(victim);
  std::string kept;
  std::getline(in, kept);
  CHECK(kept == "keep me");
  struct stat st;
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(actors::load_job_secret(path).ok());
  // Nothing left beside it but what was there.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.exists() ? 1 : 0;
  CHECK(files == 3);
}

TEST_CASE("a Kubernetes Secret's mount: a link into ..data/, group-readable, is accepted") {
  const std::string dir = testing::temp_dir("mounted");
  std::filesystem::create_directories(dir + "/..2026_12_05_10_00_00.123/");
  const std::string real = dir + "/..2026_12_05_10_00_00.123/job.secret";
  REQUIRE(actors::make_job_secret(real).ok());
  std::filesystem::create_directory_symlink("..2026_12_05_10_00_00.123", dir + "/..data");
  std::filesystem::create_symlink("..data/job.secret", dir + "/job.secret");
  for (mode_t mode : {0400, 0440}) {
    ::chmod(real.c_str(), mode);
    auto mounted = actors::load_job_secret(dir + "/job.secret");
    CHECK_MESSAGE(mounted.ok(), mode, ": ", mounted.status().to_string());
  }
  // Anywhere else a group may not read it, and through a mount others may not either.
  auto plain = actors::load_job_secret(real);
  REQUIRE_FALSE(plain.ok());
  CHECK(plain.status().message().find("readable by others: chmod 600 it") != std::string::npos);
  ::chmod(real.c_str(), 0444);
  CHECK_FALSE(actors::load_job_secret(dir + "/job.secret").ok());
  std::filesystem::remove_all(dir);
}

namespace {

// One handshake over a socket pair, `dialling` proving itself to `listening`.
struct Verdicts {
  std::string heard, said;  // the listener's, the dialler's: "" when it passed
  actors::net::LinkKeys dialler, listener;
  actors::Peer peer;  // as the listener saw the dialler
};
Verdicts handshake(const actors::JobSecret& dialling, const actors::JobSecret& listening,
                   const actors::Introduction& dialler = {},
                   const actors::Introduction& listener = {}) {
  int fd[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fd) == 0);
  Verdicts v;
  std::thread server([&] {
    v.heard = listening.check_member(fd[1], listener, &v.listener, std::chrono::milliseconds(2000),
                                     &v.peer);
    ::shutdown(fd[1], SHUT_RDWR);
  });
  v.said = dialling.prove_member(fd[0], dialler, &v.dialler, std::chrono::milliseconds(2000));
  server.join();
  ::close(fd[0]);
  ::close(fd[1]);
  return v;
}

}  // namespace

TEST_CASE("without random bytes for a nonce, neither side of a handshake goes on") {
  const auto secret = testing::new_job_secret("no_random");
  // The dialler's nonce.
  {
    int fd[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fd) == 0);
    random_fails = true;
    actors::net::LinkKeys keys;
    const std::string why = secret->prove_member(fd[0], {}, &keys, std::chrono::milliseconds(200));
    random_fails = false;
    CHECK(why.find("no random bytes") != std::string::npos);
    char c;
    CHECK(::recv(fd[1], &c, 1, MSG_DONTWAIT) < 0);  // nothing was sent
    ::close(fd[0]);
    ::close(fd[1]);
  }
  // The listener's nonce: a member's hello (as a dialler sends it) gets no answer.
  {
    int fd[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fd) == 0);
    actors::net::LinkKeys unused;
    std::thread dialler(
        [&] { secret->prove_member(fd[0], {}, &unused, std::chrono::milliseconds(300)); });
    std::string hello(actors::JobSecret::kHelloBytes, '\0');
    REQUIRE(::recv(fd[1], hello.data(), hello.size(), MSG_WAITALL) ==
            static_cast<ssize_t>(hello.size()));
    dialler.join();
    ::close(fd[0]);
    ::close(fd[1]);
    std::string answer;
    random_fails = true;
    const std::string why = secret->answer_hello(hello, {}, &answer);
    random_fails = false;
    CHECK(why.find("no random bytes") != std::string::npos);
  }
  // And with them, a handshake passes and both ends hold the same keys.
  const Verdicts v = handshake(*secret, *secret);
  CHECK(v.heard == "");
  CHECK(v.said == "");
  CHECK(v.dialler.send.key == v.listener.receive.key);
  CHECK(v.dialler.receive.iv == v.listener.send.iv);
}

TEST_CASE("the tasks a handshake names: outsiders and wrong numbers are refused") {
  const auto secret = testing::new_job_secret("names");
  const std::vector<std::string> cluster = {"/job:chief/task:0", "/job:worker/task:0",
                                            "/job:ps/task:0", "/job:ps/task:1"};
  const actors::Introduction ps0{"/job:ps/task:0", "", cluster};
  {  // A worker of the cluster dialling ps 0 reaches it.
    const Verdicts v =
        handshake(*secret, *secret, {"/job:worker/task:0", "/job:ps/task:0", {}}, ps0);
    CHECK(v.heard == "");
    CHECK(v.said == "");
  }
  {  // Dialling ps 1 and reaching ps 0 (a relay, a stale address): refused.
    const Verdicts v =
        handshake(*secret, *secret, {"/job:worker/task:0", "/job:ps/task:1", {}}, ps0);
    CHECK(v.heard == "dialled /job:ps/task:1, but this is /job:ps/task:0");
    CHECK(v.said != "");
  }
  {  // A task the cluster spec does not have: refused.
    const Verdicts v = handshake(*secret, *secret, {"/job:worker/task:7", "", {}}, ps0);
    CHECK(v.heard == "says it is /job:worker/task:7, which is not in the cluster");
    CHECK(v.said != "");
  }
  {  // The evaluator is outside TF's cluster spec, and a member.
    const Verdicts v =
        handshake(*secret, *secret, {"/job:evaluator/task:0", "/job:ps/task:0", {}}, ps0);
    CHECK(v.heard == "");
    CHECK(v.said == "");
  }
  {  // A job whose tasks come and go (Kubeflow's dynamic workers): any of its tasks, no other.
    const actors::Introduction open_ps{
        "/job:ps/task:0", "", {"/job:chief/task:0", "/job:worker/task:*", "/job:ps/task:0"}};
    CHECK(handshake(*secret, *secret, {"/job:worker/task:17", "", {}}, open_ps).heard == "");
    CHECK(handshake(*secret, *secret, {"/job:worker/task:", "", {}}, open_ps).heard != "");
    CHECK(handshake(*secret, *secret, {"/job:workers/task:1", "", {}}, open_ps).heard != "");
    CHECK(handshake(*secret, *secret, {"/job:ps/task:1", "", {}}, open_ps).heard != "");
  }
  {  // A name too long for the handshake is the dialler's own error.
    const Verdicts v = handshake(*secret, *secret, {std::string(65, 'x'), "", {}}, ps0);
    CHECK(v.said.find("longer than 64 bytes") != std::string::npos);
    CHECK(v.heard != "");
  }
}

TEST_CASE("rotating the secret: two in the file, the first proves, both are accepted, read anew") {
  const std::string dir = testing::temp_dir("rotation");
  std::filesystem::create_directories(dir);
  REQUIRE(actors::make_job_secret(dir + "/old").ok());
  REQUIRE(actors::make_job_secret(dir + "/new").ok());
  auto line = [&](const std::string& name) {
    std::ifstream in(dir + "/" + name);
    std::string text;
    std::getline(in, text);
    return text;
  };
  auto write = [&](const std::string& name, const std::string& text) {
    const std::string tmp = dir + "/" + name + ".tmp";
    std::ofstream(tmp) << text;
    ::chmod(tmp.c_str(), 0600);
    std::filesystem::rename(tmp, dir + "/" + name);
  };
  const std::string old_line = line("old"), new_line = line("new");
  auto listener = actors::load_job_secret(dir + "/old");  // a member not yet told
  REQUIRE(listener.ok());
  write("dialler", new_line + "\n" + old_line + "\n");  // a member told first: proves with new
  auto dialler = actors::load_job_secret(dir + "/dialler");
  REQUIRE(dialler.ok());
  const Verdicts refused = handshake(**dialler, **listener);
  CHECK(refused.said != "");
  CHECK(refused.heard.find("does not hold") != std::string::npos);
  // Phase one of a rotation: every member accepts the new one, and still proves with the old.
  write("old", old_line + "\n" + new_line + "\n");
  const Verdicts itself = handshake(**listener, **listener);  // the old one proves
  CHECK(itself.heard == "");
  CHECK(itself.said == "");
  // The listener read its file anew: the dialler's new secret passes.
  const Verdicts passed = handshake(**dialler, **listener);
  CHECK(passed.heard == "");
  CHECK(passed.said == "");
  CHECK(passed.dialler.send.key == passed.listener.receive.key);
  // A damaged file keeps the secrets read before, and says so.
  write("old", "not hex\n");
  const Verdicts kept = handshake(**listener, **listener);
  CHECK(kept.heard == "");
  CHECK(kept.said == "");
}

TEST_CASE("a reader's secret proves the evaluator, a reader; a port of writers alone refuses it") {
  const auto job = testing::new_job_secret("reader");
  const auto reader = testing::reader_secret(*job);
  std::string job_line, reader_line;
  std::getline(std::ifstream(job->path()), job_line);
  std::getline(std::ifstream(reader->path()), reader_line);
  CHECK(reader_line.rfind("reader ", 0) == 0);
  CHECK(reader_line.size() == 7 + 64);
  CHECK(reader_line.find(job_line.substr(0, 16)) == std::string::npos);
  struct stat st;
  REQUIRE(::stat(reader->path().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);

  const std::vector<std::string> cluster = {"/job:chief/task:0", "/job:worker/task:0",
                                            "/job:ps/task:0"};
  const actors::Introduction ps0{"/job:ps/task:0", "", cluster};
  const actors::Introduction evaluator{"/job:evaluator/task:0", "/job:ps/task:0", {}};
  const actors::Introduction worker{"/job:worker/task:0", "/job:ps/task:0", {}};
  {  // The evaluator with its reader's secret: a member, a reader, with keys both ends share.
    const Verdicts v = handshake(*reader, *job, evaluator, ps0);
    CHECK(v.heard == "");
    CHECK(v.said == "");
    CHECK(v.peer.task == "/job:evaluator/task:0");
    CHECK(v.peer.role == actors::Role::kReader);
    CHECK(v.dialler.send.key == v.listener.receive.key);
  }
  {  // A reader's secret speaks for no one else.
    const Verdicts v = handshake(*reader, *job, worker, ps0);
    CHECK(v.heard.find("reader's secret, which speaks for the evaluator only") !=
          std::string::npos);
    CHECK(v.said != "");
  }
  {  // A holder of the job secret is a writer, unless it says it is the evaluator.
    const Verdicts w = handshake(*job, *job, worker, ps0);
    CHECK(w.heard == "");
    CHECK(w.peer.role == actors::Role::kWriter);
    const Verdicts e = handshake(*job, *job, evaluator, ps0);
    CHECK(e.heard == "");
    CHECK(e.peer.role == actors::Role::kReader);
  }
  {  // A port that takes writers alone (CAF's) refuses readers, by secret or by name.
    actors::Introduction writers = ps0;
    writers.readers = false;
    const Verdicts r = handshake(*reader, *job, evaluator, writers);
    CHECK(r.heard.find("/job:evaluator/task:0 may only read") != std::string::npos);
    CHECK(r.said != "");
    const Verdicts e = handshake(*job, *job, evaluator, writers);
    CHECK(e.heard.find("may only read") != std::string::npos);
    const Verdicts w = handshake(*job, *job, worker, writers);
    CHECK(w.heard == "");
  }
  {  // A reader cannot pose as a ps to a writer: it does not hold the writer's secret.
    const Verdicts v = handshake(*job, *reader, worker, ps0);
    CHECK(v.heard.find("does not hold") != std::string::npos);
    CHECK(v.said != "");
  }
  {  // A damaged reader's line is an error naming the form.
    const std::string bad = job->path() + ".bad";
    std::ofstream(bad) << "reader 1234\n";
    ::chmod(bad.c_str(), 0600);
    auto loaded = actors::load_job_secret(bad);
    REQUIRE_FALSE(loaded.ok());
    CHECK(loaded.status().message().find("\"reader\"") != std::string::npos);
  }
}
