// The data server as its peers meet it: garbage and oversized frames end only their own
// connection, peers are bounded (connections, idle time, frame size, descriptors), each peer's
// calls run on a thread of its own, and a thread told to follow its peer runs on the peer's core.
#include <doctest/doctest.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "actors/net/data_channel.h"
#include "actors/net/data_server.h"
#include "actors/server.h"
#include "actors/session.h"
#include "actors/shard_codec.h"
#include "harness/raw_socket.h"
#include "ops/array_ops.h"
#include "ops/state_ops.h"

using namespace troupe;
using namespace troupe::runtime;

TEST_CASE(
    "the data channel: garbage gets an error reply, a bad frame a closed connection; the "
    "server lives on and carries megabytes") {
  actors::Runtime server_rt;
  auto server = actors::Server::start(server_rt, {.port = 0});
  REQUIRE(server.ok());

  // Bytes that are no shard call: an error reply, and the connection goes on.
  const int fd = testing::connect_to((*server)->data_port());
  testing::send_all(fd, testing::frame_header(16) + std::string("sixteen garbage!"));
  std::string got;
  REQUIRE(testing::recv_frame(fd, &got));
  REQUIRE(!got.empty());
  REQUIRE(got.size() < 4096);
  auto reply =
      actors::decode_shard_reply(std::make_shared<const std::vector<char>>(got.begin(), got.end()));
  REQUIRE_FALSE(reply.ok());
  CHECK(reply.status().message().find("shard call") != std::string::npos);
  // A frame longer than any call: the server closes this connection.
  testing::send_all(fd, testing::frame_header(uint64_t(1) << 40));
  char c;
  CHECK(::recv(fd, &c, 1, 0) == 0);
  ::close(fd);
  // A peer that leaves halfway through a frame.
  const int half = testing::connect_to((*server)->data_port());
  testing::send_all(half, testing::frame_header(1000) + "only a few bytes");
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
  const int a = testing::connect_to(port), b = testing::connect_to(port);
  for (int i = 0; i < 50 && (*server)->data_connections() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK((*server)->data_connections() == 2);
  const int c = testing::connect_to(port);
  CHECK(closed_within(c, std::chrono::milliseconds(10000)));
  // Idle peers are let go after idle_timeout (300 ms), not held forever.
  CHECK(closed_within(a, std::chrono::milliseconds(10000)));
  CHECK(closed_within(b, std::chrono::milliseconds(10000)));
  for (const int fd : {a, b, c}) ::close(fd);

  // A frame over max_frame_bytes ends its connection before anything is allocated for it.
  const int big = testing::connect_to(port);
  testing::send_all(big, testing::frame_header((1 << 20) + 1));
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
  const int starved =
      testing::connect_to(port);  // the kernel queues it; the server cannot take it yet
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (const int fd : hog) ::close(fd);
  ::setrlimit(RLIMIT_NOFILE, &saved);
  // Once descriptors are back the queued connection is served: a call gets its reply.
  testing::send_all(starved, testing::frame_header(16) + std::string("sixteen garbage!"));
  char header[8];
  timeval tv{5, 0};
  ::setsockopt(starved, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  CHECK(::recv(starved, header, 8, MSG_WAITALL) == 8);
  ::close(starved);
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
    REQUIRE((*data)
                ->serve([meeting, patience](const runtime::Bytes&,
                                            const actors::net::DataServer::Later&,
                                            const actors::Peer&) {
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
      auto channel = actors::net::DataChannel::connect(rt, "127.0.0.1", (*data)->port(),
                                                       std::chrono::seconds(10));
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
                ->serve([&](const runtime::Bytes&, const actors::net::DataServer::Later&,
                            const actors::Peer&) {
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
    testing::send_all(fd, testing::frame_header(4) + "call");
    std::string reply;
    const bool replied = testing::recv_frame(fd, &reply);
    REQUIRE(::sched_setaffinity(0, sizeof mine, &mine) == 0);
    REQUIRE(replied);
  };
  const int first = cores[0], second = cores[1];
  {
    // A thread for each peer: each runs on its peer's core, and moves when the peer does.
    actors::Runtime rt;
    std::mutex mu;
    std::vector<Ran> ran;
    auto data = serve(rt, 16, mu, ran);
    const int a = testing::connect_to(data->port()), b = testing::connect_to(data->port());
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
    const int a = testing::connect_to(data->port());
    call_from(first, a);
    const int b = testing::connect_to(data->port());
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
