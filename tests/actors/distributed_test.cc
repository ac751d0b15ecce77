// A parameter shard in a second process on 127.0.0.1: a model trained against it matches the
// single-process run, and a dead server fails the next step cleanly, within seconds.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "actors/net/data_channel.h"
#include "actors/net/data_server.h"
#include "actors/parameter_shard.h"
#include "actors/ps_client.h"
#include "actors/server.h"
#include "actors/session.h"
#include "actors/shard_codec.h"
#include "harness/op_harness.h"
#include "harness/temp_dir.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/random_ops.h"
#include "ops/sparse_ops.h"
#include "ops/state_ops.h"
#include "ops/training_ops.h"
#include "runtime/placement.h"

using namespace troupe;
using runtime::DType;
using runtime::Output;
using runtime::Shape;
using runtime::Tensor;

namespace {

// A child forked to serve a parameter shard once told to (run_server), until its pipe from the
// parent closes. A test whose process runs threads forks its servers before they start: a
// child forked then is beyond ThreadSanitizer.
struct ForkedServer {
  pid_t pid = -1;
  int up = -1, down = -1;
};

// With a secret, the server speaks only to members of that job.
ForkedServer fork_server(std::shared_ptr<const actors::JobSecret> secret = nullptr,
                         const std::string& log = "", uint16_t at_port = 0) {
  int up[2], down[2];
  REQUIRE(pipe(up) == 0);
  REQUIRE(pipe(down) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(up[0]);
    close(down[1]);
    char c;
    if (read(down[0], &c, 1) != 1) _exit(0);  // never told to start
    if (!log.empty()) {
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd >= 0) dup2(fd, STDERR_FILENO);
    }
    {
      actors::Runtime rt(actors::RuntimeOptions{.secret = secret});
      auto server = actors::Server::start(rt, {.port = at_port});
      uint16_t p = server.ok() ? (*server)->port() : 0;
      if (write(up[1], &p, sizeof(p)) != sizeof(p)) _exit(1);
      while (read(down[0], &c, 1) > 0) {
      }
    }
    _exit(0);
  }
  close(up[1]);
  close(down[0]);
  return {pid, up[0], down[1]};
}

// Starts a forked server; returns its pid, with its port and the pipe that keeps it alive.
pid_t run_server(ForkedServer server, uint16_t* port, int* keep_alive_fd) {
  REQUIRE(write(server.down, "g", 1) == 1);
  REQUIRE(read(server.up, port, sizeof(*port)) == sizeof(*port));
  close(server.up);
  *keep_alive_fd = server.down;
  return server.pid;
}

// Forks a child that serves a parameter shard until its stdin pipe closes; returns its port.
pid_t start_server(uint16_t* port, int* keep_alive_fd,
                   std::shared_ptr<const actors::JobSecret> secret = nullptr,
                   const std::string& log = "", uint16_t at_port = 0) {
  return run_server(fork_server(std::move(secret), log, at_port), port, keep_alive_fd);
}

// Ends a server start_server forked: its stdin pipe closes, it exits, it is reaped.
void stop_server(pid_t child, int keep_alive_fd) {
  close(keep_alive_fd);
  int status = 0;
  waitpid(child, &status, 0);
}

// A ps server process per task, on 127.0.0.1; all stopped and reaped when it goes.
struct PsTasks {
  std::vector<pid_t> children;
  std::vector<int> keep_alive;
  std::map<std::string, std::string> cluster;  // task -> address

  explicit PsTasks(const std::vector<std::string>& tasks) {
    for (const std::string& task : tasks) {
      uint16_t port = 0;
      int fd = -1;
      children.push_back(start_server(&port, &fd));
      REQUIRE(port != 0);
      keep_alive.push_back(fd);
      cluster[task] = "127.0.0.1:" + std::to_string(port);
    }
  }
  ~PsTasks() {
    // Every pipe closed before any reaping: a later child holds copies of the earlier ones'.
    for (int fd : keep_alive) close(fd);
    for (pid_t c : children) waitpid(c, nullptr, 0);
  }
};

// Each step's loss in one process, from `init`: what a cluster's steps must give.
std::vector<float> losses_in_one_process(const runtime::Graph& g, int init, int train, Output loss,
                                         const std::vector<runtime::FeedList>& batches,
                                         runtime::VariableStore* store) {
  runtime::Executor exec(g, {.variables = store});
  REQUIRE(exec.run({}, {}, {init}).ok());
  std::vector<float> losses;
  for (const auto& f : batches) {
    auto got = exec.run(f, {loss}, {train});
    REQUIRE(got.ok());
    losses.push_back((*got)[0].data<float>()[0]);
  }
  return losses;
}

// Runs the same steps in `session`, each loss as `want` has it.
void check_losses(actors::Session& session, int train, Output loss,
                  const std::vector<runtime::FeedList>& batches, const std::vector<float>& want) {
  for (size_t i = 0; i < batches.size(); ++i) {
    auto got = session.run(batches[i], {loss}, {train});
    REQUIRE_MESSAGE(got.ok(), got.status().to_string());
    CHECK((*got)[0].data<float>()[0] == doctest::Approx(want[i]).epsilon(1e-5));
  }
}

struct Model {
  runtime::Graph g;
  Output x, y, loss, w;
  int train = -1, init = -1;
};

Model build() {
  Model m;
  m.g.set_seed(11);
  runtime::GraphBuilder b(&m.g);
  m.x = ops::placeholder(b, DType::kFloat32, Shape{-1, 6}, "x");
  m.y = ops::placeholder(b, DType::kInt32, Shape{-1}, "y");
  Output w2;
  {
    auto ps = b.device("/job:ps/task:0");
    m.w = ops::variable(b, "w", Shape{6, 8}, DType::kFloat32, ops::glorot_uniform(b, Shape{6, 8}));
    w2 = ops::variable(b, "w2", Shape{8, 3}, DType::kFloat32, ops::glorot_uniform(b, Shape{8, 3}));
  }
  Output logits = ops::matmul(b, ops::tanh(b, ops::matmul(b, m.x, m.w)), w2);
  m.loss = ops::reduce_mean(b, ops::sparse_softmax_cross_entropy_with_logits(b, m.y, logits));
  m.train = ops::minimize(b, m.loss, ops::Optimizer::adam(0.05));
  m.init = ops::global_variables_initializer(b);
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  return m;
}

runtime::FeedList batch(const Model& m, int i) {
  std::mt19937_64 rng(100 + i);
  Tensor x = testing::random_tensor<float>(Shape{16, 6}, rng);
  Tensor y(DType::kInt32, Shape{16});
  for (int k = 0; k < 16; ++k) y.data<int32_t>()[k] = (x.data<float>()[k * 6] > 0) + (k % 2);
  return {{m.x, x}, {m.y, y}};
}

}  // namespace

TEST_CASE(
    "training against a shard in another process matches one process; a dead server fails the "
    "step") {
  uint16_t port = 0;
  int keep_alive = -1;
  pid_t child = start_server(&port, &keep_alive);
  REQUIRE(port != 0);
  Model m = build();

  runtime::VariableStore local_vars;
  runtime::Executor exec(m.g, {.variables = &local_vars});
  REQUIRE(exec.run({}, {}, {m.init}).ok());
  std::vector<float> want;
  for (int i = 0; i < 8; ++i) {
    auto r = exec.run(batch(m, i), {m.loss}, {m.train});
    REQUIRE(r.ok());
    want.push_back((*r)[0].data<float>()[0]);
  }

  {
    actors::Runtime rt;
    actors::SessionOptions options;
    options.cluster = {{"/job:ps/task:0", "127.0.0.1:" + std::to_string(port)}};
    auto s = actors::Session::create(rt, m.g, options);
    REQUIRE_MESSAGE(s.ok(), s.status().to_string());
    REQUIRE((*s)->run({}, {}, {m.init}).ok());
    std::vector<float> got;
    for (int i = 0; i < 8; ++i) {
      auto r = (*s)->run(batch(m, i), {m.loss}, {m.train});
      REQUIRE_MESSAGE(r.ok(), r.status().to_string());
      got.push_back((*r)[0].data<float>()[0]);
    }
    for (size_t i = 0; i < want.size(); ++i)
      CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
    // The variables live on the server: the local shard never saw them.
    CHECK_FALSE((*s)->variables().contains("w"));
    auto w = (*s)->run({}, {m.w});
    REQUIRE(w.ok());
    CHECK(testing::max_error((*w)[0], *local_vars.read("w")) < 1e-5);

    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    auto start = std::chrono::steady_clock::now();
    auto r = (*s)->run(batch(m, 9), {m.loss}, {m.train});
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK_FALSE(r.ok());
    CHECK(r.status().message().find("the server for /job:ps/task:0 is unreachable") !=
          std::string::npos);
    CHECK(secs < 10);
  }
  close(keep_alive);

  actors::Runtime rt;
  actors::SessionOptions nobody;
  nobody.cluster = {{"/job:ps/task:0", "127.0.0.1:1"}};
  auto s = actors::Session::create(rt, m.g, nobody);
  CHECK_FALSE(s.ok());
  CHECK(s.status().message().find("no troupe server at 127.0.0.1:1") != std::string::npos);
}

namespace {
int connect_to(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  return fd;
}

void send_all(int fd, const std::string& bytes) {
  REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(bytes.size()));
}

std::string frame_header(uint64_t n) {
  std::string h(8, '\0');
  for (int i = 0; i < 8; ++i) h[i] = static_cast<char>(n >> (8 * i));
  return h;
}
}  // namespace

TEST_CASE(
    "the data channel: garbage gets an error reply, a bad frame a closed connection; the "
    "server lives on and carries megabytes") {
  actors::Runtime server_rt;
  auto server = actors::Server::start(server_rt, {.port = 0});
  REQUIRE(server.ok());

  // Bytes that are no shard call: an error reply, and the connection goes on.
  const int fd = connect_to((*server)->data_port());
  send_all(fd, frame_header(16) + std::string("sixteen garbage!"));
  char header[8];
  REQUIRE(::recv(fd, header, 8, MSG_WAITALL) == 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(static_cast<unsigned char>(header[i])) << (8 * i);
  REQUIRE(n > 0);
  REQUIRE(n < 4096);
  auto body = std::make_shared<std::vector<char>>(n);
  REQUIRE(::recv(fd, body->data(), n, MSG_WAITALL) == static_cast<ssize_t>(n));
  auto reply = actors::decode_shard_reply(body);
  REQUIRE_FALSE(reply.ok());
  CHECK(reply.status().message().find("shard call") != std::string::npos);
  // A frame longer than any call: the server closes this connection.
  send_all(fd, frame_header(uint64_t(1) << 40));
  CHECK(::recv(fd, header, 1, 0) == 0);
  ::close(fd);
  // A peer that leaves halfway through a frame.
  const int half = connect_to((*server)->data_port());
  send_all(half, frame_header(1000) + "only a few bytes");
  ::close(half);

  // The server still serves: a 4 MiB variable read and updated over the data channel.
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output w;
  {
    auto ps = b.device("/job:ps/task:0");
    w = ops::variable(b, "big", Shape{1 << 20}, DType::kFloat32,
                      ops::zeros(b, Shape{1 << 20}, DType::kFloat32));
  }
  Output step = ops::placeholder(b, DType::kFloat32, Shape{1 << 20}, "step");
  int grow = -1;
  {
    auto ps = b.device("/job:ps/task:0");
    grow = ops::assign_add(b, w, step).node;
  }
  int init = ops::global_variables_initializer(b);
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  actors::Runtime rt;
  actors::SessionOptions options;
  options.cluster = {{"/job:ps/task:0", "127.0.0.1:" + std::to_string((*server)->port())}};
  auto s = actors::Session::create(rt, g, options);
  REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  REQUIRE((*s)->run({}, {}, {init}).ok());
  std::vector<float> ones(1 << 20, 1.0f);
  for (int i = 0; i < 3; ++i) {
    REQUIRE((*s)->run({{step, Tensor::from_vector(Shape{1 << 20}, ones)}}, {}, {grow}).ok());
  }
  auto value = (*s)->run({}, {w});
  REQUIRE(value.ok());
  CHECK((*value)[0].data<float>()[0] == 3.0f);
  CHECK((*value)[0].data<float>()[(1 << 20) - 1] == 3.0f);
  CHECK(server_rt.running_actors() > 0);

  // Sessions come and go; the server's connections go with them, threads and descriptors.
  auto open_fds = [] {
    size_t n = 0;
    for (auto& e : std::filesystem::directory_iterator("/proc/self/fd")) n += e.exists() ? 1 : 0;
    return n;
  };
  const size_t before = open_fds();
  for (int i = 0; i < 10; ++i) {
    auto brief = actors::Session::create(rt, g, options);
    REQUIRE(brief.ok());
    REQUIRE((*brief)->run({}, {w}).ok());
  }
  // Each new session's connections reap the finished ones; give the ended ones time to close.
  size_t after = open_fds();
  for (int i = 0; i < 20 && after >= before + 12; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto last = actors::Session::create(rt, g, options);
    REQUIRE(last.ok());
    REQUIRE((*last)->run({}, {w}).ok());
    last->reset();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    after = open_fds();
  }
  CHECK(after < before + 12);  // not 10 sessions x 2 connections x 2 ends

  // Host names resolve for the data channel as for CAF's connection.
  auto named = actors::Server::start(server_rt, {.port = 0, .host = "localhost"});
  REQUIRE_MESSAGE(named.ok(), named.status().to_string());
  actors::SessionOptions by_name;
  by_name.cluster = {{"/job:ps/task:0", "localhost:" + std::to_string((*named)->port())}};
  auto s2 = actors::Session::create(rt, g, by_name);
  REQUIRE_MESSAGE(s2.ok(), s2.status().to_string());
  REQUIRE((*s2)->run({}, {}, {init}).ok());
  auto zeros = (*s2)->run({}, {w});
  REQUIRE(zeros.ok());
  CHECK((*zeros)[0].data<float>()[7] == 0.0f);
}

TEST_CASE("the data channel bounds its peers: connections, idle time, frame size, out of fds") {
  actors::Runtime server_rt;
  actors::ServerOptions options{.port = 0};
  options.data = {.max_connections = 2,
                  .idle_timeout = std::chrono::milliseconds(300),
                  .max_frame_bytes = 1 << 20};
  auto server = actors::Server::start(server_rt, options);
  REQUIRE(server.ok());
  const uint16_t port = (*server)->data_port();
  auto closed_within = [](int fd, std::chrono::milliseconds limit) {
    timeval tv{0, static_cast<suseconds_t>(limit.count() * 1000)};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char c;
    return ::recv(fd, &c, 1, 0) == 0;
  };

  // A third connection while two are open is closed at once; the two stay until idle.
  const int a = connect_to(port), b = connect_to(port);
  for (int i = 0; i < 50 && (*server)->data_connections() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK((*server)->data_connections() == 2);
  const int c = connect_to(port);
  CHECK(closed_within(c, std::chrono::milliseconds(10000)));
  // Idle peers are let go after idle_timeout (300 ms), not held forever.
  CHECK(closed_within(a, std::chrono::milliseconds(10000)));
  CHECK(closed_within(b, std::chrono::milliseconds(10000)));
  for (const int fd : {a, b, c}) ::close(fd);

  // A frame over max_frame_bytes ends its connection before anything is allocated for it.
  const int big = connect_to(port);
  send_all(big, frame_header((1 << 20) + 1));
  CHECK(closed_within(big, std::chrono::milliseconds(10000)));
  ::close(big);

  // Out of descriptors: accept fails with EMFILE, the acceptor waits and goes on.
  rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved) == 0);
  rlimit low = saved;
  low.rlim_cur = std::min<rlim_t>(saved.rlim_cur, 512);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
  std::vector<int> hog;
  while (true) {
    const int fd = ::dup(0);
    if (fd < 0) break;
    hog.push_back(fd);
  }
  REQUIRE(errno == EMFILE);
  ::close(hog.back());  // one for our own socket; none left for the server's accept
  hog.pop_back();
  const int starved = connect_to(port);  // the kernel queues it; the server cannot take it yet
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (const int fd : hog) ::close(fd);
  ::setrlimit(RLIMIT_NOFILE, &saved);
  // Once descriptors are back the queued connection is served: a call gets its reply.
  send_all(starved, frame_header(16) + std::string("sixteen garbage!"));
  char header[8];
  timeval tv{5, 0};
  ::setsockopt(starved, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  CHECK(::recv(starved, header, 8, MSG_WAITALL) == 8);
  ::close(starved);
}

namespace {
// A port bound and not listening (`fd` holds it): connections to it are refused, and no other
// program can take it while it is held.
uint16_t held_port(int* fd) {
  *fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  socklen_t len = sizeof addr;
  REQUIRE(::bind(*fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::getsockname(*fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  return ntohs(addr.sin_port);
}

int listen_on(uint16_t* port) {
  int fd = -1;
  *port = held_port(&fd);
  REQUIRE(::listen(fd, 4) == 0);
  return fd;
}

// The data port a server tells its peers; 0 when it does not answer.
uint16_t data_port_told(actors::Runtime& rt, const caf::actor& server) {
  uint16_t port = 0;
  caf::scoped_actor self{rt.system()};
  self->request(server, std::chrono::seconds(5), actors::net::data_port_atom::value)
      .receive([&](uint16_t p) { port = p; }, [](caf::error&) {});
  return port;
}
}  // namespace

TEST_CASE("a data channel writes calls without waiting for replies; they come back in order") {
  // A server that answers nothing until it holds two calls: a channel that waited for each
  // reply before the next call would never get one.
  uint16_t port = 0;
  const int listener = listen_on(&port);
  std::thread server([listener] {
    const int fd = ::accept(listener, nullptr, nullptr);
    bool both = true;
    for (int i = 0; i < 2 && both; ++i) {
      char header[8];
      both = ::recv(fd, header, 8, MSG_WAITALL) == 8;
      uint64_t n = 0;
      for (int k = 0; k < 8; ++k) n |= uint64_t(static_cast<unsigned char>(header[k])) << (8 * k);
      std::string body(both ? n : 0, '\0');
      both = both && ::recv(fd, body.data(), n, MSG_WAITALL) == static_cast<ssize_t>(n);
    }
    const std::string replies = frame_header(5) + "first" + frame_header(6) + "second";
    if (both) ::send(fd, replies.data(), replies.size(), MSG_NOSIGNAL);
    ::close(fd);  // a third call finds the connection gone
  });
  actors::Runtime rt;
  auto channel = actors::net::DataChannel::connect(rt, "127.0.0.1", port, std::chrono::seconds(10));
  REQUIRE(channel.ok());
  auto call = [] {
    auto message = std::make_shared<capnp::MallocMessageBuilder>();
    message->initRoot<capnp::AnyPointer>();
    return actors::net::ChannelCall{message, {}};
  };
  caf::scoped_actor self{rt.system()};
  // Each reply as "<tag>:<bytes>", an error as "<tag>!<why>".
  auto next_reply = [&] {
    std::string got = "none";
    self->receive(
        [&](actors::net::channel_reply_atom, uint64_t tag, runtime::Bytes& r) {
          got = std::to_string(tag) + ":" + std::string(r.data, r.size);
        },
        [&](actors::net::channel_reply_atom, uint64_t tag, std::string& why) {
          got = std::to_string(tag) + "!" + why;
        },
        caf::after(std::chrono::seconds(10)) >> [] {});
    return got;
  };
  (*channel)->call(call(), self, 7);
  (*channel)->call(call(), self, 8);
  CHECK(next_reply() == "7:first");
  CHECK(next_reply() == "8:second");
  server.join();
  // The server has closed the connection: a third call gets the error, naming the peer.
  (*channel)->call(call(), self, 9);
  const std::string error = next_reply();
  CHECK_MESSAGE(error.rfind("9!data channel to 127.0.0.1:" + std::to_string(port), 0) == 0, error);
  ::close(listener);
}

TEST_CASE("a runtime's data channels share one thread, which puts replies together as they come") {
  // Three servers, each answering one call with a reply sent in pieces: the header split, the
  // body in three parts, a pause between each.
  constexpr int kServers = 3;
  uint16_t ports[kServers] = {};
  int listeners[kServers] = {};
  std::vector<std::thread> servers;
  for (int i = 0; i < kServers; ++i) {
    listeners[i] = listen_on(&ports[i]);
    servers.emplace_back([listener = listeners[i], i] {
      const int fd = ::accept(listener, nullptr, nullptr);
      char header[8];
      bool ok = ::recv(fd, header, 8, MSG_WAITALL) == 8;
      uint64_t n = 0;
      for (int k = 0; k < 8; ++k) n |= uint64_t(static_cast<unsigned char>(header[k])) << (8 * k);
      std::string body(ok ? n : 0, '\0');
      ok = ok && ::recv(fd, body.data(), n, MSG_WAITALL) == static_cast<ssize_t>(n);
      const std::string reply = std::string(3000 * (i + 1), static_cast<char>('a' + i));
      const std::string frame = frame_header(reply.size()) + reply;
      const size_t cuts[] = {0, 3, 8, 1000, 2500, frame.size()};
      for (size_t k = 0; ok && k + 1 < std::size(cuts); ++k) {
        const size_t piece = cuts[k + 1] - cuts[k];
        ok = ::send(fd, frame.data() + cuts[k], piece, MSG_NOSIGNAL) == ssize_t(piece);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      ::close(fd);
    });
  }
  auto threads = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/task"),
                         std::filesystem::directory_iterator{});
  };
  actors::Runtime rt;
  const auto before = threads();
  std::vector<std::shared_ptr<actors::net::DataChannel>> channels;
  for (int i = 0; i < kServers; ++i) {
    auto channel =
        actors::net::DataChannel::connect(rt, "127.0.0.1", ports[i], std::chrono::seconds(10));
    REQUIRE_MESSAGE(channel.ok(), channel.status().to_string());
    channels.push_back(*channel);
  }
  CHECK(threads() == before + 1);
  caf::scoped_actor self{rt.system()};
  for (int i = 0; i < kServers; ++i) {
    auto message = std::make_shared<capnp::MallocMessageBuilder>();
    message->initRoot<capnp::AnyPointer>();
    channels[i]->call(actors::net::ChannelCall{message, {}}, self, static_cast<uint64_t>(i));
  }
  std::map<uint64_t, std::string> replies;
  for (int i = 0; i < kServers; ++i) {
    self->receive(
        [&](actors::net::channel_reply_atom, uint64_t tag, runtime::Bytes& r) {
          replies[tag] = std::string(r.data, r.size);
        },
        [&](actors::net::channel_reply_atom, uint64_t tag, std::string& why) { replies[tag] = why; },
        caf::after(std::chrono::seconds(10)) >> [] {});
  }
  for (int i = 0; i < kServers; ++i) {
    CHECK(replies[i] == std::string(3000 * (i + 1), static_cast<char>('a' + i)));
    CHECK(channels[i]->traffic().bytes_received == 8 + 3000 * (i + 1));
  }
  for (auto& t : servers) t.join();
  for (int fd : listeners) ::close(fd);
}

TEST_CASE("a data channel's call bigger than the socket takes at once arrives whole, in order") {
  // A server that reads nothing for a while: the first call's 16 MB cannot all go at once, so
  // the channel's thread writes the rest when there is room, and the second call waits its turn.
  uint16_t port = 0;
  const int listener = listen_on(&port);
  std::vector<uint64_t> sizes;
  std::vector<std::string> tails;
  std::thread server([&] {
    const int fd = ::accept(listener, nullptr, nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    for (int i = 0; i < 2; ++i) {
      char header[8];
      if (::recv(fd, header, 8, MSG_WAITALL) != 8) break;
      uint64_t n = 0;
      for (int k = 0; k < 8; ++k) n |= uint64_t(static_cast<unsigned char>(header[k])) << (8 * k);
      std::string body(n, '\0');
      if (::recv(fd, body.data(), n, MSG_WAITALL) != static_cast<ssize_t>(n)) break;
      sizes.push_back(n);
      tails.push_back(body.substr(n - 8));  // the blob's last bytes
    }
    const std::string replies = frame_header(3) + "one" + frame_header(3) + "two";
    ::send(fd, replies.data(), replies.size(), MSG_NOSIGNAL);
    ::close(fd);
  });
  actors::Runtime rt;
  auto channel = actors::net::DataChannel::connect(rt, "127.0.0.1", port, std::chrono::seconds(10));
  REQUIRE(channel.ok());
  // A message whose root is a blob of `n` bytes ending in `last`.
  auto call = [](size_t n, char last) {
    auto message = std::make_shared<capnp::MallocMessageBuilder>();
    capnp::Data::Builder blob = message->initRoot<capnp::AnyPointer>().initAs<capnp::Data>(n);
    std::memset(blob.begin(), 'x', n);
    blob[n - 1] = static_cast<kj::byte>(last);
    return actors::net::ChannelCall{message, {}};
  };
  caf::scoped_actor self{rt.system()};
  (*channel)->call(call(16 << 20, 'A'), self, 1);
  (*channel)->call(call(1000, 'B'), self, 2);
  std::vector<std::string> replies;
  for (int i = 0; i < 2; ++i) {
    self->receive(
        [&](actors::net::channel_reply_atom, uint64_t tag, runtime::Bytes& r) {
          replies.push_back(std::to_string(tag) + ":" + std::string(r.data, r.size));
        },
        [&](actors::net::channel_reply_atom, uint64_t tag, std::string& why) {
          replies.push_back(std::to_string(tag) + "!" + why);
        },
        caf::after(std::chrono::seconds(10)) >> [] {});
  }
  server.join();
  CHECK(replies == std::vector<std::string>{"1:one", "2:two"});
  REQUIRE(sizes.size() == 2);
  CHECK(sizes[0] > (16u << 20));
  CHECK(sizes[1] < 2000u);
  // Cap'n Proto pads a blob to whole words: its last byte sits just before the padding.
  CHECK(tails[0].find('A') != std::string::npos);
  CHECK(tails[1].find('B') != std::string::npos);
  ::close(listener);
}

TEST_CASE(
    "a data server runs its peers' calls side by side, each connection on a thread of its own") {
  // The first call to come waits for the second, which a server running one call at a time
  // reads only once the first has given up.
  auto meet_with = [](int threads, std::chrono::milliseconds patience) {
    actors::Runtime rt;
    auto data = actors::net::DataServer::listen(rt, "127.0.0.1", 0, {.threads = threads});
    REQUIRE(data.ok());
    struct Meeting {
      std::mutex mu;
      std::condition_variable cv;
      int came = 0;
    };
    auto meeting = std::make_shared<Meeting>();
    REQUIRE(
        (*data)
            ->serve([meeting, patience](const runtime::Bytes&, const actors::net::DataServer::Later&) {
              std::unique_lock<std::mutex> lock(meeting->mu);
              ++meeting->came;
              meeting->cv.notify_all();
              const bool met =
                  meeting->cv.wait_for(lock, patience, [&] { return meeting->came >= 2; });
              return std::optional<actors::ShardReply>(actors::make_shard_reply(
                  runtime::ok_status(), {Tensor::scalar<int32_t>(met ? 1 : 0)}));
            })
            .ok());
    caf::scoped_actor self{rt.system()};
    std::vector<std::shared_ptr<actors::net::DataChannel>> peers;
    for (uint64_t tag = 0; tag < 2; ++tag) {
      auto channel =
          actors::net::DataChannel::connect(rt, "127.0.0.1", (*data)->port(), std::chrono::seconds(10));
      REQUIRE(channel.ok());
      peers.push_back(*channel);
      auto message = std::make_shared<capnp::MallocMessageBuilder>();
      message->initRoot<capnp::AnyPointer>();
      (*channel)->call(actors::net::ChannelCall{message, {}}, self, tag);
    }
    int met = 0;
    for (int i = 0; i < 2; ++i) {
      self->receive(
          [&](actors::net::channel_reply_atom, uint64_t, runtime::Bytes& r) {
            auto outputs = actors::decode_shard_reply(r);
            REQUIRE(outputs.ok());
            met += (*outputs)[0].data<int32_t>()[0];
          },
          [&](actors::net::channel_reply_atom, uint64_t, std::string& why) { FAIL(why); },
          caf::after(std::chrono::seconds(20)) >> [] { FAIL("no reply"); });
    }
    return met;
  };
  CHECK(meet_with(16, std::chrono::seconds(10)) == 2);
  // One thread for both: the first call waits alone, and only the second finds the first.
  CHECK(meet_with(1, std::chrono::milliseconds(300)) == 1);
}

TEST_CASE(
    "a data server told to follow its peers runs each one's calls on the core it sends from") {
  cpu_set_t mine;
  REQUIRE(::sched_getaffinity(0, sizeof mine, &mine) == 0);
  std::vector<int> cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &mine)) cores.push_back(cpu);
  }
  if (cores.size() < 2) {
    MESSAGE("skipped: one core, nothing to follow");
    return;
  }
  // Where each call ran, and on how many cores its thread might have.
  struct Ran {
    int cpu, may_use;
  };
  auto serve = [](actors::Runtime& rt, int threads, std::mutex& mu, std::vector<Ran>& ran) {
    auto data = actors::net::DataServer::listen(rt, "127.0.0.1", 0,
                                           {.threads = threads, .follow_incoming_cpu = true});
    REQUIRE(data.ok());
    REQUIRE((*data)
                ->serve([&](const runtime::Bytes&, const actors::net::DataServer::Later&) {
                  cpu_set_t set;
                  ::sched_getaffinity(0, sizeof set, &set);
                  std::lock_guard<std::mutex> lock(mu);
                  ran.push_back({::sched_getcpu(), CPU_COUNT(&set)});
                  return std::optional<actors::ShardReply>(
                      actors::make_shard_reply(runtime::ok_status(), {}));
                })
                .ok());
    return std::move(*data);
  };
  // A call on `fd` from `core` (this thread, moved there for it), and its reply.
  auto call_from = [&mine](int core, int fd) {
    cpu_set_t there;
    CPU_ZERO(&there);
    CPU_SET(core, &there);
    REQUIRE(::sched_setaffinity(0, sizeof there, &there) == 0);
    send_all(fd, frame_header(4) + "call");
    char header[8];
    const bool replied = ::recv(fd, header, 8, MSG_WAITALL) == 8;
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= uint64_t(static_cast<unsigned char>(header[i])) << (8 * i);
    std::string body(replied ? n : 0, '\0');
    const bool whole = ::recv(fd, body.data(), body.size(), MSG_WAITALL) == ssize_t(body.size());
    REQUIRE(::sched_setaffinity(0, sizeof mine, &mine) == 0);
    REQUIRE(replied);
    REQUIRE(whole);
  };
  const int first = cores[0], second = cores[1];
  {
    // A thread for each peer: each runs on its peer's core, and moves when the peer does.
    actors::Runtime rt;
    std::mutex mu;
    std::vector<Ran> ran;
    auto data = serve(rt, 16, mu, ran);
    const int a = connect_to(data->port()), b = connect_to(data->port());
    call_from(first, a);
    call_from(second, b);
    call_from(second, a);
    std::lock_guard<std::mutex> lock(mu);
    REQUIRE(ran.size() == 3);
    CHECK(ran[0].cpu == first);
    CHECK(ran[1].cpu == second);
    CHECK(ran[2].cpu == second);
    for (const Ran& r : ran) CHECK(r.may_use == 1);
    ::close(a);
    ::close(b);
  }
  {
    // One thread for two peers: it follows neither.
    actors::Runtime rt;
    std::mutex mu;
    std::vector<Ran> ran;
    auto data = serve(rt, 1, mu, ran);
    const int a = connect_to(data->port());
    call_from(first, a);
    const int b = connect_to(data->port());
    call_from(second, b);
    call_from(second, a);
    std::lock_guard<std::mutex> lock(mu);
    REQUIRE(ran.size() == 3);
    CHECK(ran[0].may_use == 1);
    CHECK(ran[1].may_use == static_cast<int>(cores.size()));
    CHECK(ran[2].may_use == static_cast<int>(cores.size()));
    ::close(a);
    ::close(b);
  }
}

TEST_CASE(
    "a ps's data server runs sync replicas' calls itself; their rounds are the shard actor's too") {
  // Replica 1 calls over a data channel, replica 2 over CAF: an update's reply comes when its
  // round closes, whichever way the call that closes it came.
  actors::Runtime rt;
  auto store = std::make_shared<runtime::VariableStore>();
  store->assign("w", Tensor::from_vector<float>(Shape{2}, {1, 2}));
  store->assign("global_step", Tensor::scalar<int64_t>(0));
  auto calls = std::make_shared<actors::ShardCalls>(store);
  caf::actor shard = actors::spawn_parameter_shard(rt.system(), calls, uint16_t{0});
  auto data = actors::net::DataServer::listen(rt, "127.0.0.1", 0);
  REQUIRE(data.ok());
  REQUIRE((*data)
              ->serve([calls](const runtime::Bytes& f, const actors::net::DataServer::Later& later) {
                return calls->call(f, later);
              })
              .ok());
  auto channel =
      actors::net::DataChannel::connect(rt, "127.0.0.1", (*data)->port(), std::chrono::seconds(10));
  REQUIRE(channel.ok());

  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  auto v =
      ops::variable(b, "w", Shape{2}, DType::kFloat32, ops::zeros(b, Shape{2}, DType::kFloat32));
  auto add = ops::assign_add(b, v, ops::placeholder(b, DType::kFloat32, Shape{2}));
  Output step = ops::global_step(b);
  auto increment = ops::assign_add(b, step, ops::placeholder(b, DType::kInt64, Shape{}));
  const int barrier = ops::sync_replicas_barrier(b, step, add.node);
  REQUIRE(b.ok());
  caf::scoped_actor self{rt.system()};
  using Reply = runtime::Result<std::vector<Tensor>>;
  // Replica 1 calls through the data channel; `wait` is how long its reply may take.
  auto send = [&](int node, std::vector<Tensor> inputs, actors::SyncTag sync) {
    auto message = actors::build_shard_call(g, g.node(node), inputs, {.sync = sync});
    REQUIRE(message.ok());
    (*channel)->call(actors::net::ChannelCall{std::move(*message), inputs}, self, 1);
  };
  auto receive = [&](std::chrono::milliseconds wait) -> std::optional<Reply> {
    std::optional<Reply> out;
    self->receive([&](actors::net::channel_reply_atom, uint64_t,
                      runtime::Bytes& r) { out = actors::decode_shard_reply(r); },
                  [&](actors::net::channel_reply_atom, uint64_t, std::string& why) {
                    out = runtime::unavailable(why);
                  },
                  caf::after(wait) >> [] {});
    return out;
  };
  // Replica 2 calls the shard actor over CAF.
  auto request = [&](int node, std::vector<Tensor> inputs, actors::SyncTag sync) {
    std::vector<char> blob;
    REQUIRE(actors::encode_shard_call(g, g.node(node), inputs, &blob, {.sync = sync}).ok());
    Reply out = runtime::internal_error("no reply");
    self->request(shard, std::chrono::seconds(10), actors::call_atom::value, std::move(blob))
        .receive(
            [&](std::vector<char>& r) {
              out = actors::decode_shard_reply(std::make_shared<const std::vector<char>>(r));
            },
            [&](caf::error& e) { out = runtime::internal_error(rt.system().render(e)); });
    return out;
  };
  const actors::SyncTag one{1, 2, 5000}, two{2, 2, 5000};
  const std::chrono::seconds plenty(10);

  // Replica 1's update waits for its round: its reply comes when replica 2's closes it.
  send(add.node, {Tensor::from_vector<float>(Shape{2}, {10, 20})}, one);
  CHECK_FALSE(receive(std::chrono::milliseconds(300)));
  CHECK(store->read("w")->to_vector<float>() == std::vector<float>{1, 2});  // not applied yet
  auto applied = request(add.node, {Tensor::from_vector<float>(Shape{2}, {30, 40})}, two);
  REQUIRE_MESSAGE(applied.ok(), applied.status().to_string());
  CHECK((*applied)[0].to_vector<float>() == std::vector<float>{21, 32});  // 1 + mean(10, 30)
  auto held = receive(plenty);  // the round closed on the actor's thread, for the channel
  REQUIRE(held);
  REQUIRE_MESSAGE(held->ok(), held->status().to_string());
  CHECK((**held)[0].to_vector<float>() == std::vector<float>{21, 32});
  // The other way round for the global step: the channel's update closes the actor's round.
  std::optional<Reply> increment_two;
  std::vector<char> blob;
  REQUIRE(actors::encode_shard_call(g, g.node(increment.node), {Tensor::scalar<int64_t>(1)}, &blob,
                                    {.sync = two})
              .ok());
  std::thread second([&] {
    caf::scoped_actor other{rt.system()};
    other->request(shard, plenty, actors::call_atom::value, std::move(blob))
        .receive([&](std::vector<char>&) { increment_two = Reply(std::vector<Tensor>{}); },
                 [&](caf::error& e) { increment_two = runtime::internal_error(to_string(e)); });
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // replica 2's comes first
  send(increment.node, {Tensor::scalar<int64_t>(1)}, one);
  auto stepped = receive(plenty);
  second.join();
  REQUIRE(stepped);
  REQUIRE_MESSAGE(stepped->ok(), stepped->status().to_string());
  REQUIRE(increment_two);
  REQUIRE_MESSAGE(increment_two->ok(), increment_two->status().to_string());
  CHECK(store->read_int64_scalar("global_step").value() == 1);
  // A barrier on a step passed already is answered at once.
  send(barrier, {Tensor::scalar<int64_t>(0)}, one);
  auto passed = receive(plenty);
  REQUIRE(passed);
  REQUIRE_MESSAGE(passed->ok(), passed->status().to_string());
  CHECK((**passed)[0].data<int64_t>()[0] == 1);

  // A barrier nobody passes fails at its timeout: the actor's tick expires the server's wait.
  send(barrier, {Tensor::scalar<int64_t>(1)}, actors::SyncTag{1, 2, 200});
  auto late = receive(plenty);
  REQUIRE(late);
  REQUIRE_FALSE(late->ok());
  CHECK(late->status().message().find("global step 1 was not passed") != std::string::npos);
  // The connection goes on; a call of no replica runs at once.
  send(add.node, {Tensor::from_vector<float>(Shape{2}, {1, 1})}, {});
  auto async = receive(plenty);
  REQUIRE(async);
  REQUIRE_MESSAGE(async->ok(), async->status().to_string());
  CHECK((**async)[0].to_vector<float>() == std::vector<float>{22, 33});
  caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
}

TEST_CASE("a data channel fails a call that gets no reply within its timeout, naming the peer") {
  uint16_t port = 0;
  const int listener = listen_on(&port);
  int accepted = -1;
  std::thread server([&] { accepted = ::accept(listener, nullptr, nullptr); });  // never answers
  actors::Runtime rt;
  auto channel =
      actors::net::DataChannel::connect(rt, "127.0.0.1", port, std::chrono::milliseconds(300));
  REQUIRE(channel.ok());
  server.join();
  auto message = std::make_shared<capnp::MallocMessageBuilder>();
  message->initRoot<capnp::AnyPointer>();
  caf::scoped_actor self{rt.system()};
  const auto sent = std::chrono::steady_clock::now();
  (*channel)->call(actors::net::ChannelCall{message, {}}, self, 1);
  std::string error;
  self->receive([&](actors::net::channel_reply_atom, uint64_t, runtime::Bytes&) { error = "a reply"; },
                [&](actors::net::channel_reply_atom, uint64_t, std::string& why) { error = why; },
                caf::after(std::chrono::seconds(10)) >> [] {});
  const auto waited = std::chrono::steady_clock::now() - sent;
  CHECK_MESSAGE(error.find("data channel to 127.0.0.1:" + std::to_string(port)) == 0, error);
  CHECK_MESSAGE(error.find("timed out") != std::string::npos, error);
  CHECK(waited >= std::chrono::milliseconds(300));
  CHECK(waited < std::chrono::seconds(5));
  ::close(accepted);
  ::close(listener);
}

TEST_CASE("a ps on a data port it is told, advertising another: peers are told the other") {
  int free_fd = -1, refusing_fd = -1;
  const uint16_t data_port = held_port(&free_fd), advertised = held_port(&refusing_fd);
  ::close(free_fd);  // for the server to take
  actors::Runtime server_rt;
  actors::ServerOptions options;
  options.data_port = data_port;
  options.advertised_data_port = advertised;
  auto server = actors::Server::start(server_rt, options);
  REQUIRE_MESSAGE(server.ok(), server.status().to_string());
  CHECK((*server)->data_port() == data_port);
  CHECK((*server)->advertised_data_port() == advertised);
  ::close(connect_to(data_port));  // it listens where told

  actors::Runtime rt;
  const std::string address = "127.0.0.1:" + std::to_string((*server)->port());
  auto shard = actors::connect_server(rt, address);
  REQUIRE(shard.ok());
  CHECK(data_port_told(rt, *shard) == advertised);

  // Nothing listens at the advertised port: a session says so and its tensors take CAF's
  // connection; training works all the same.
  Model m = build();
  actors::SessionOptions so;
  so.cluster = {{"/job:ps/task:0", address}};
  auto s = actors::Session::create(rt, m.g, so);
  REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  REQUIRE((*s)->run({}, {}, {m.init}).ok());
  auto r = (*s)->run(batch(m, 0), {m.loss}, {m.train});
  CHECK_MESSAGE(r.ok(), r.status().to_string());
  CHECK((*server)->variables().contains("w"));

  // A second server cannot take the same data port, and says which.
  actors::Runtime other_rt;
  auto second = actors::Server::start(other_rt, options);
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().message().find("cannot listen on 127.0.0.1:" + std::to_string(data_port)) !=
        std::string::npos);
  ::close(refusing_fd);
}

TEST_CASE("a ps client waits for its server, sends it a state and reads it back, slots included") {
  uint16_t port = 0;
  int keep_alive = -1;
  pid_t child = start_server(&port, &keep_alive);
  REQUIRE(port != 0);
  {
    actors::Runtime rt;
    const std::string task = "/job:ps/task:0";
    auto ps = actors::PsClient::connect(rt, {{task, "127.0.0.1:" + std::to_string(port)}}, {});
    REQUIRE_MESSAGE(ps.ok(), ps.status().to_string());
    const actors::PsClient::Placement where = {{"w", task}, {"global_step", task}};
    auto missing = (*ps)->missing(where);
    REQUIRE(missing.ok());
    CHECK(missing->size() == 2);

    runtime::VariableStore mine;
    mine.assign("w", Tensor::from_vector<float>(Shape{2}, {1.5f, -2}));
    mine.assign("w/Adam_m", Tensor::from_vector<float>(Shape{2}, {0.25f, 0.5f}));
    mine.assign("global_step", Tensor::scalar<int64_t>(41));
    mine.assign("not_placed", Tensor::scalar<float>(1));
    REQUIRE((*ps)->push(mine, where).ok());
    CHECK((*ps)->missing(where)->empty());
    CHECK((*ps)->read_int64("global_step", task).value() == 41);

    runtime::VariableStore back;
    REQUIRE((*ps)->pull(&back).ok());
    CHECK(back.read("w/Adam_m")->data<float>()[1] == 0.5f);
    CHECK(back.read("w")->data<float>()[0] == 1.5f);
    CHECK_FALSE(back.contains("not_placed"));  // it stayed where it was
    CHECK((*ps)->read_int64("w", task).status().message().find("not an int64 scalar") !=
          std::string::npos);
  }
  stop_server(child, keep_alive);
}

TEST_CASE("a ps killed and started again at its address: connecting anew reaches the new one") {
  // CAF keeps the proxy of a server it reached at an address until it hears the connection
  // drop; a member that reconnects at once (its steps failed on that drop) must not get the
  // dead server's proxy back.
  const std::string task = "/job:ps/task:0";
  for (int round = 0; round < 5; ++round) {
    uint16_t port = 0, again = 0;
    int keep_alive = -1, keep_alive2 = -1;
    pid_t child = start_server(&port, &keep_alive);
    REQUIRE(port != 0);
    ForkedServer later = fork_server(nullptr, "", port);  // before this process has threads
    actors::Runtime rt;
    const std::string address = "127.0.0.1:" + std::to_string(port);
    const actors::PsClient::Placement where = {{"w", task}};
    {
      auto ps = actors::PsClient::connect(rt, {{task, address}}, {});
      REQUIRE_MESSAGE(ps.ok(), ps.status().to_string());
      REQUIRE((*ps)->missing(where).ok());
    }
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    {
      // At once, while CAF may not have heard yet: no server, or one that answers.
      actors::WaitOptions soon;
      soon.poll = std::chrono::milliseconds(10);
      soon.deadline = std::chrono::milliseconds(200);
      auto stale = actors::PsClient::connect(rt, {{task, address}}, soon);
      if (stale.ok()) {
        auto asked = (*stale)->missing(where);
        CHECK_MESSAGE(asked.ok(), asked.status().to_string());
      }
    }
    pid_t second = run_server(later, &again, &keep_alive2);
    REQUIRE(again == port);
    actors::WaitOptions wait;
    wait.poll = std::chrono::milliseconds(20);
    wait.deadline = std::chrono::milliseconds(10000);
    auto ps = actors::PsClient::connect(rt, {{task, address}}, wait);
    REQUIRE_MESSAGE(ps.ok(), ps.status().to_string());
    auto missing = (*ps)->missing(where);
    REQUIRE_MESSAGE(missing.ok(), missing.status().to_string());
    CHECK(missing->size() == 1);
    close(keep_alive);
    stop_server(second, keep_alive2);
  }
}

TEST_CASE("waiting for a server that never comes ends at the deadline, naming task and address") {
  actors::Runtime rt;
  actors::WaitOptions wait;
  wait.poll = std::chrono::milliseconds(20);
  wait.deadline = std::chrono::milliseconds(300);
  const auto start = std::chrono::steady_clock::now();
  auto ps = actors::PsClient::connect(rt, {{"/job:ps/task:3", "127.0.0.1:1"}}, wait);
  REQUIRE_FALSE(ps.ok());
  CHECK(ps.status().code() == runtime::Code::kUnavailable);
  CHECK(ps.status().message().find("/job:ps/task:3 at 127.0.0.1:1") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
}

TEST_CASE("with a job secret, members read and write a ps's state while another member leaves") {
  const std::string dir = testing::temp_dir("tls");
  std::filesystem::create_directories(dir);
  REQUIRE(actors::make_job_secret(dir + "/job.secret").ok());
  auto secret = actors::load_job_secret(dir + "/job.secret");
  REQUIRE_MESSAGE(secret.ok(), secret.status().to_string());
  uint16_t port = 0;
  int keep_alive = -1;
  pid_t child = start_server(&port, &keep_alive, *secret);
  REQUIRE(port != 0);
  const std::string task = "/job:ps/task:0";
  // A second member hammering the same server from its own process.
  pid_t other = fork();
  if (other == 0) {
    int code = 0;
    {
      actors::Runtime rt2(actors::RuntimeOptions{.secret = *secret});
      auto ps2 = actors::PsClient::connect(rt2, {{task, "127.0.0.1:" + std::to_string(port)}}, {});
      for (int i = 0; ps2.ok() && i < 5 && code == 0; ++i) {
        runtime::VariableStore back;
        if (!(*ps2)->pull(&back).ok()) code = 3;
      }
      if (!ps2.ok()) code = 2;
    }
    _exit(code);
  }
  {
    actors::Runtime rt(actors::RuntimeOptions{.secret = *secret});
    auto ps = actors::PsClient::connect(rt, {{task, "127.0.0.1:" + std::to_string(port)}}, {});
    REQUIRE_MESSAGE(ps.ok(), ps.status().to_string());
    runtime::VariableStore mine;
    mine.assign("w", Tensor::zeros(DType::kFloat32, Shape{64, 64}).value());
    mine.assign("global_step", Tensor::scalar<int64_t>(0));
    const actors::PsClient::Placement where = {{"w", task}, {"global_step", task}};
    for (int i = 0; i < 200; ++i) {
      // By now the other member has left: its connection's end must not disturb this one.
      if (i == 100) std::this_thread::sleep_for(std::chrono::milliseconds(500));
      mine.assign("global_step", Tensor::scalar<int64_t>(i));
      auto pushed = (*ps)->push(mine, where);
      REQUIRE_MESSAGE(pushed.ok(), i, ": ", pushed.to_string());
      auto step = (*ps)->read_int64("global_step", task);
      REQUIRE_MESSAGE(step.ok(), i, ": ", step.status().to_string());
      CHECK(*step == i);
      runtime::VariableStore back;
      REQUIRE((*ps)->pull(&back).ok());
    }
    int other_status = 0;
    waitpid(other, &other_status, 0);
    CHECK(WEXITSTATUS(other_status) == 0);
  }
  stop_server(child, keep_alive);
}

TEST_CASE(
    "a process without the job secret is refused on both ports, logged, and changes nothing") {
  const std::string dir = testing::temp_dir("refused");
  std::filesystem::create_directories(dir);
  REQUIRE(actors::make_job_secret(dir + "/job.secret").ok());
  REQUIRE(actors::make_job_secret(dir + "/other.secret").ok());
  auto secret = actors::load_job_secret(dir + "/job.secret");
  auto other = actors::load_job_secret(dir + "/other.secret");
  REQUIRE(secret.ok());
  REQUIRE(other.ok());
  uint16_t port = 0;
  int keep_alive = -1;
  const std::string log = dir + "/server.log";
  pid_t child = start_server(&port, &keep_alive, *secret, log);
  REQUIRE(port != 0);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  {
    // Another job's secret: the handshake fails at once, on CAF's port.
    actors::Runtime rt(actors::RuntimeOptions{.secret = *other});
    auto server = actors::connect_server(rt, address);
    REQUIRE_FALSE(server.ok());
    CHECK(server.status().message().find("does not hold this job's secret") != std::string::npos);
  }
  {
    // Bytes that are no handshake (what a plain CAF peer, or anyone, would send first).
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    const char junk[40] = "GET / HTTP/1.0\r\n\r\n and more of it";
    REQUIRE(write(fd, junk, sizeof junk) == sizeof junk);
    char c;
    CHECK(read(fd, &c, 1) <= 0);  // closed (or reset), unanswered
    close(fd);
  }
  {
    // A member: it connects, and finds that nobody else wrote anything.
    actors::Runtime rt(actors::RuntimeOptions{.secret = *secret});
    const std::string task = "/job:ps/task:0";
    auto ps = actors::PsClient::connect(rt, {{task, address}}, {});
    REQUIRE_MESSAGE(ps.ok(), ps.status().to_string());
    runtime::VariableStore held;
    REQUIRE((*ps)->pull(&held).ok());
    CHECK(held.names().empty());
    // Its data channel: a member's works, one without the secret is refused.
    auto server = actors::connect_server(rt, address);
    REQUIRE(server.ok());
    const uint16_t data_port = data_port_told(rt, *server);
    REQUIRE(data_port != 0);
    auto channel =
        actors::net::DataChannel::connect(rt, "127.0.0.1", data_port, std::chrono::seconds(5));
    CHECK(channel.ok());
    actors::Runtime stranger(actors::RuntimeOptions{.secret = *other});
    auto refused =
        actors::net::DataChannel::connect(stranger, "127.0.0.1", data_port, std::chrono::seconds(5));
    REQUIRE_FALSE(refused.ok());
  }
  stop_server(child, keep_alive);
  std::ifstream in(log);
  const std::string logged((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK_MESSAGE(logged.find("refused 127.0.0.1:") != std::string::npos, logged);
  CHECK_MESSAGE(logged.find("not a troupe member's handshake") != std::string::npos, logged);
  CHECK_MESSAGE(logged.find("data channel on port") != std::string::npos, logged);
}

TEST_CASE("sync replicas: 2 workers of batch 8 give the weights of one process of batch 16") {
  // Softmax regression, SGD: the mean of the two halves' gradients is the whole batch's.
  runtime::Graph g;
  g.set_seed(5);
  runtime::GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{-1, 6}, "x");
  Output y = ops::placeholder(b, DType::kInt32, Shape{-1}, "y");
  Output w =
      ops::variable(b, "w", Shape{6, 3}, DType::kFloat32, ops::glorot_uniform(b, Shape{6, 3}));
  Output bias =
      ops::variable(b, "b", Shape{3}, DType::kFloat32, ops::zeros(b, Shape{3}, DType::kFloat32));
  Output logits = ops::add(b, ops::matmul(b, x, w), bias);
  Output loss = ops::reduce_mean(b, ops::sparse_softmax_cross_entropy_with_logits(b, y, logits));
  Output step = ops::global_step(b);
  const int train = ops::minimize(b, loss, ops::Optimizer::sgd(0.5));
  const int synced = ops::sync_replicas_barrier(b, step, train);
  const int init = ops::global_variables_initializer(b);
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  const std::string task = "/job:ps/task:0";
  auto where = runtime::place_variables(&g, {task}, runtime::PsStrategy::kRoundRobin);
  REQUIRE(where.ok());
  g.set_device(synced, task);

  std::mt19937_64 rng(9);
  std::vector<runtime::FeedList> batches;
  for (int i = 0; i < 6; ++i) {
    Tensor xs = testing::random_tensor<float>(Shape{16, 6}, rng);
    Tensor ys(DType::kInt32, Shape{16});
    for (int k = 0; k < 16; ++k) ys.data<int32_t>()[k] = k % 3;
    batches.push_back({{x, xs}, {y, ys}});
  }
  // Rows [8 part, 8 part + 8) of each fed tensor.
  auto half = [&](const runtime::FeedList& f, int part) {
    runtime::FeedList out;
    for (const auto& [o, t] : f) {
      std::vector<int64_t> dims = t.shape().dims();
      dims[0] = 8;
      Tensor h(t.dtype(), Shape(dims));
      const size_t bytes = h.byte_size();
      std::memcpy(h.raw_data(), static_cast<const char*>(t.raw_data()) + part * bytes, bytes);
      out.push_back({o, h});
    }
    return out;
  };

  runtime::VariableStore alone;
  runtime::Executor exec(g, {.variables = &alone});
  REQUIRE(exec.run({}, {}, {init}).ok());
  for (const auto& f : batches) REQUIRE(exec.run(f, {}, {train}).ok());

  uint16_t port = 0;
  int keep_alive = -1;
  pid_t child = start_server(&port, &keep_alive);
  REQUIRE(port != 0);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  {
    actors::Runtime rt;
    std::vector<std::unique_ptr<actors::Session>> replicas;
    for (int r = 0; r < 2; ++r) {
      actors::SessionOptions o;
      o.cluster = {{task, address}};
      o.replica = r;
      o.replicas_to_aggregate = 2;
      o.sync_timeout = std::chrono::seconds(20);
      auto s = actors::Session::create(rt, g, o);
      REQUIRE_MESSAGE(s.ok(), s.status().to_string());
      replicas.push_back(std::move(*s));
    }
    REQUIRE(replicas[0]->run({}, {}, {init}).ok());
    std::vector<runtime::Status> failed(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        for (const auto& f : batches) {
          auto done = replicas[r]->run(half(f, r), {}, {synced});
          if (!done.ok()) failed[r] = done.status();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (const auto& s : failed) CHECK_MESSAGE(s.ok(), s.to_string());
    auto ps = actors::PsClient::connect(rt, {{task, address}}, {});
    REQUIRE(ps.ok());
    runtime::VariableStore held;
    REQUIRE((*ps)->pull(&held).ok());
    CHECK(testing::max_error(*held.read("w"), *alone.read("w")) < 1e-5);
    CHECK(testing::max_error(*held.read("b"), *alone.read("b")) < 1e-5);
    // One global step per round, not one per replica.
    CHECK(held.read_int64_scalar("global_step").value() == 6);
  }
  stop_server(child, keep_alive);
}

// Replica 0 of 2 synchronous replicas, alone against a ps process: its rounds never fill, and
// each goes on with its one replica after the round's timeout.
struct LoneReplica {
  runtime::Graph g;
  Output w, step;
  int synced = -1;
  runtime::FeedList batch;
  uint16_t port = 0;
  int keep_alive = -1;
  pid_t child = -1;
  std::unique_ptr<actors::Runtime> rt;  // after the fork: a child of a threaded process may hang
  std::unique_ptr<actors::Session> session;

  LoneReplica(std::chrono::milliseconds sync_timeout, std::chrono::milliseconds remote_timeout) {
    runtime::GraphBuilder b(&g);
    Output x = ops::placeholder(b, DType::kFloat32, Shape{-1, 6}, "x");
    Output y = ops::placeholder(b, DType::kInt32, Shape{-1}, "y");
    w = ops::variable(b, "w", Shape{6, 3}, DType::kFloat32,
                      ops::zeros(b, Shape{6, 3}, DType::kFloat32));
    Output loss = ops::reduce_mean(
        b, ops::sparse_softmax_cross_entropy_with_logits(b, y, ops::matmul(b, x, w)));
    step = ops::global_step(b);
    synced = ops::sync_replicas_barrier(b, step, ops::minimize(b, loss, ops::Optimizer::sgd(0.5)));
    const int init = ops::global_variables_initializer(b);
    REQUIRE_MESSAGE(b.ok(), b.status().to_string());
    const std::string task = "/job:ps/task:0";
    REQUIRE(runtime::place_variables(&g, {task}, runtime::PsStrategy::kRoundRobin).ok());
    g.set_device(synced, task);
    std::mt19937_64 rng(4);
    batch = {{x, testing::random_tensor<float>(Shape{8, 6}, rng)},
             {y, Tensor(DType::kInt32, Shape{8})}};
    child = start_server(&port, &keep_alive);
    REQUIRE(port != 0);
    rt = std::make_unique<actors::Runtime>();
    actors::SessionOptions o;
    o.cluster = {{task, "127.0.0.1:" + std::to_string(port)}};
    o.replica = 0;
    o.replicas_to_aggregate = 2;
    o.sync_timeout = sync_timeout;
    o.remote_timeout = remote_timeout;
    auto s = actors::Session::create(*rt, g, o);
    REQUIRE_MESSAGE(s.ok(), s.status().to_string());
    session = std::move(*s);
    REQUIRE(session->run({}, {}, {init}).ok());
  }
  ~LoneReplica() {
    session.reset();
    rt.reset();
    if (child > 0) stop_server(child, keep_alive);
  }
};

TEST_CASE("a sync replica's loop stopped with abandon ends at once as stopped, not at the round") {
  using std::chrono::seconds;
  LoneReplica r(seconds(3), seconds(30));
  std::atomic<bool> started{false};
  actors::LoopRequest loop;
  loop.steps = 5;
  loop.targets = {r.synced};
  loop.feed = [&](int64_t, runtime::FeedList* f) {
    *f = r.batch;
    started = true;
    return runtime::ok_status();
  };
  runtime::Result<int64_t> done = runtime::internal_error("the loop did not answer");
  std::thread looping([&] { done = r.session->run_loop(std::move(loop)); });
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  caf::anon_send(r.session->actor(), actors::stop_atom::value, actors::abandon_atom::value);
  looping.join();
  // The step waiting for the round failed at once: the loop ends, stopped, with no step done
  // (waiting, its one step would have gone on alone after 3 s).
  REQUIRE_MESSAGE(done.ok(), done.status().to_string());
  CHECK(*done == 0);
  // The calls go again, and each gets its own reply once the abandoned ones have come (the
  // round's timeout answers the barrier, and that reply goes to no one).
  auto read = r.session->run({}, {r.w, r.step});
  REQUIRE_MESSAGE(read.ok(), read.status().to_string());
  CHECK(read->at(0).shape() == Shape{6, 3});
  CHECK(read->at(1).dtype() == DType::kInt64);
}

TEST_CASE("a sync replica's barrier waits for its round longer than a call's timeout") {
  using std::chrono::seconds;
  LoneReplica r(seconds(2), seconds(1));
  // The round waits 2 s for the missing replica, then goes on with this one's update.
  auto done = r.session->run(r.batch, {}, {r.synced});
  REQUIRE_MESSAGE(done.ok(), done.status().to_string());
  auto read = r.session->run({}, {r.step});
  REQUIRE_MESSAGE(read.ok(), read.status().to_string());
  CHECK(read->at(0).data<int64_t>()[0] == 1);
}

TEST_CASE("a variable partitioned over 3 ps processes: a part on each, training as in one") {
  runtime::Graph g;
  g.set_seed(21);
  runtime::GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{-1, 7}, "x");
  Output y = ops::placeholder(b, DType::kInt32, Shape{-1}, "y");
  Output w = ops::partitioned_variable(b, "w", Shape{7, 3}, DType::kFloat32,
                                       ops::glorot_uniform(b, Shape{7, 3}), 3);
  Output logits = ops::matmul(b, x, w);
  Output loss = ops::reduce_mean(b, ops::sparse_softmax_cross_entropy_with_logits(b, y, logits));
  const int train = ops::minimize(b, loss, ops::Optimizer::adam(0.05));
  const int init = ops::global_variables_initializer(b);
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  std::vector<std::string> tasks;
  for (int i = 0; i < 3; ++i) tasks.push_back("/job:ps/task:" + std::to_string(i));
  auto where = runtime::place_variables(&g, tasks, runtime::PsStrategy::kRoundRobin);
  REQUIRE(where.ok());
  // Rows 3, 2 and 2, one part on each task.
  CHECK(where->at("w/part_0") == tasks[0]);
  CHECK(where->at("w/part_1") == tasks[1]);
  CHECK(where->at("w/part_2") == tasks[2]);

  std::mt19937_64 rng(4);
  std::vector<runtime::FeedList> batches;
  for (int i = 0; i < 5; ++i) {
    Tensor xs = testing::random_tensor<float>(Shape{12, 7}, rng);
    Tensor ys(DType::kInt32, Shape{12});
    for (int k = 0; k < 12; ++k) ys.data<int32_t>()[k] = (xs.data<float>()[k * 7] > 0) + k % 2;
    batches.push_back({{x, xs}, {y, ys}});
  }
  runtime::VariableStore alone;
  const std::vector<float> want = losses_in_one_process(g, init, train, loss, batches, &alone);

  PsTasks ps(tasks);
  const std::map<std::string, std::string>& cluster = ps.cluster;
  {
    actors::Runtime rt;
    auto s = actors::Session::create(rt, g, {.cluster = cluster});
    REQUIRE_MESSAGE(s.ok(), s.status().to_string());
    REQUIRE((*s)->run({}, {}, {init}).ok());
    check_losses(**s, train, loss, batches, want);
    // Each ps holds its part, with its Adam slots, and nothing of the others.
    for (int i = 0; i < 3; ++i) {
      runtime::VariableStore held;
      auto one = actors::PsClient::connect(rt, {{tasks[i], cluster.at(tasks[i])}}, {});
      REQUIRE(one.ok());
      REQUIRE((*one)->pull(&held).ok());
      const std::string part = "w/part_" + std::to_string(i);
      CHECK(held.contains(part));
      CHECK(held.contains(part + "/Adam_m"));
      CHECK(testing::max_error(*held.read(part), *alone.read(part)) < 1e-5);
      for (int j = 0; j < 3; ++j) {
        if (j != i) CHECK_FALSE(held.contains("w/part_" + std::to_string(j)));
      }
    }
  }
}

TEST_CASE("an embedding on a ps trains by sparse updates there, as in one process") {
  // The rows a batch gathers travel to the ps as IndexedSlices; SparseApplyAdagrad runs there.
  runtime::Graph g;
  g.set_seed(5);
  runtime::GraphBuilder b(&g);
  Output ids = ops::placeholder(b, DType::kInt64, Shape{-1}, "ids");
  Output emb;
  {
    auto ps = b.device("/job:ps/task:0");
    emb = ops::variable(b, "emb", Shape{100, 4}, DType::kFloat32,
                        ops::glorot_uniform(b, Shape{100, 4}));
  }
  Output loss = ops::reduce_sum(b, ops::square(b, ops::gather(b, emb, ids)));
  const int train = ops::minimize(b, loss, ops::Optimizer::adagrad(0.1));
  const int init = ops::global_variables_initializer(b);
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  bool sparse = false;
  for (int n = 0; n < g.num_nodes(); ++n) sparse |= g.node(n).op == "SparseApplyAdagrad";
  REQUIRE(sparse);
  auto feed = [&](int i) {
    return runtime::FeedList{{ids, Tensor::from_vector<int64_t>(Shape{3}, {i % 5, 7, 90 + i % 3})}};
  };
  runtime::VariableStore local;
  runtime::Executor exec(g, {.variables = &local});
  REQUIRE(exec.run({}, {}, {init}).ok());
  const std::vector<float> before = local.read("emb")->to_vector<float>();
  for (int i = 0; i < 6; ++i) REQUIRE(exec.run(feed(i), {}, {train}).ok());
  const std::vector<float> want = local.read("emb")->to_vector<float>();

  uint16_t port = 0;
  int keep_alive = -1;
  pid_t child = start_server(&port, &keep_alive);
  REQUIRE(port != 0);
  {
    actors::Runtime rt;
    actors::SessionOptions options;
    options.cluster = {{"/job:ps/task:0", "127.0.0.1:" + std::to_string(port)}};
    auto s = actors::Session::create(rt, g, options);
    REQUIRE_MESSAGE(s.ok(), s.status().to_string());
    REQUIRE((*s)->run({}, {}, {init}).ok());
    for (int i = 0; i < 6; ++i) REQUIRE((*s)->run(feed(i), {}, {train}).ok());
    auto got = (*s)->run({}, {emb});
    REQUIRE(got.ok());
    const std::vector<float> remote = (*got)[0].to_vector<float>();
    CHECK(testing::max_error((*got)[0], *local.read("emb")) < 1e-6);
    // Row 50 was never gathered: it is as initialized, on both sides.
    for (int k = 0; k < 4; ++k) {
      CHECK(remote[50 * 4 + k] == before[50 * 4 + k]);
      CHECK(want[7 * 4 + k] != before[7 * 4 + k]);
    }
  }
  stop_server(child, keep_alive);
}

TEST_CASE("an embedding in 3 parts on 3 ps processes: each part's rows are gathered there") {
  // A table of 960 KB; a step looks up 24 ids, 768 bytes of rows. TF's embedding_lookup with
  // its gathers colocated with the parts sends the ids and the rows, not the table.
  constexpr int64_t kRows = 30000, kDim = 8;
  runtime::Graph g;
  g.set_seed(9);
  runtime::GraphBuilder b(&g);
  ops::SparseOutput ids = ops::sparse_placeholder(b, DType::kInt64, "ids");
  Output y = ops::placeholder(b, DType::kFloat32, Shape{-1}, "y");
  std::vector<Output> parts =
      ops::variable_parts(b, "emb", Shape{kRows, kDim}, DType::kFloat32,
                          ops::truncated_normal(b, Shape{kRows, kDim}, 0, 0.3), 3);
  Output x = ops::embedding_lookup_sparse(b, parts, ids, Output{}, "mean");
  Output guess = ops::reduce_sum(b, x, {1});
  Output loss = ops::reduce_mean(b, ops::square(b, ops::sub(b, guess, y)));
  const int train = ops::minimize(b, loss, ops::Optimizer::adagrad(0.5));
  const int init = ops::global_variables_initializer(b);
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  std::vector<std::string> tasks;
  for (int i = 0; i < 3; ++i) tasks.push_back("/job:ps/task:" + std::to_string(i));
  REQUIRE(runtime::place_variables(&g, tasks, runtime::PsStrategy::kRoundRobin).ok());

  std::mt19937_64 rng(3);
  std::vector<runtime::FeedList> batches;
  for (int i = 0; i < 8; ++i) {
    std::vector<std::vector<int64_t>> rows(8);
    Tensor ys(DType::kFloat32, Shape{8});
    for (int r = 0; r < 8; ++r) {
      for (int k = 0; k < 3; ++k) rows[r].push_back(static_cast<int64_t>(rng() % kRows));
      ys.data<float>()[r] = static_cast<float>(r % 3) - 1;
    }
    runtime::FeedList f{{y, ys}};
    ops::feed_sparse(&f, ids, runtime::SparseTensor::from_rows<int64_t>(rows));
    batches.push_back(std::move(f));
  }
  runtime::VariableStore alone;
  const std::vector<float> want = losses_in_one_process(g, init, train, loss, batches, &alone);

  PsTasks ps(tasks);
  const std::map<std::string, std::string>& cluster = ps.cluster;
  {
    actors::Runtime rt;
    auto s = actors::Session::create(rt, g, {.cluster = cluster});
    REQUIRE_MESSAGE(s.ok(), s.status().to_string());
    REQUIRE((*s)->run({}, {}, {init}).ok());
    const auto before = (*s)->traffic();
    check_losses(**s, train, loss, batches, want);
    const auto after = (*s)->traffic();
    const double per_step = double(after.bytes_sent + after.bytes_received - before.bytes_sent -
                                   before.bytes_received) /
                            double(batches.size());
    // Per part and step: a gather (ids up, rows down), an update (rows and ids up) and the
    // global step's; a few KB in all against the table's 960 KB.
    INFO("bytes per step: ", per_step);
    CHECK(per_step > 768);
    CHECK(per_step < 16 * 1024);
    // Each part trained on its ps as in one process.
    for (int i = 0; i < 3; ++i) {
      runtime::VariableStore held;
      auto one = actors::PsClient::connect(rt, {{tasks[i], cluster.at(tasks[i])}}, {});
      REQUIRE(one.ok());
      REQUIRE((*one)->pull(&held).ok());
      const std::string part = "emb/part_" + std::to_string(i);
      REQUIRE(held.contains(part));
      CHECK(testing::max_error(*held.read(part), *alone.read(part)) < 1e-5);
    }
  }
}
