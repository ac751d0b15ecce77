// A ps server: its data server runs synchronous replicas' calls beside the shard actor's, it
// listens on the data port it is told and advertises another, a process without the job
// secret is refused on both ports, logged, and changes nothing, and a bit flipped on a member's
// connection after its handshake is noticed on both ports; a replica whose connections closed
// has left, and the rounds waiting for it close.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "actors/job_secret.h"
#include "actors/net/data_channel.h"
#include "actors/net/data_server.h"
#include "actors/parameter_shard.h"
#include "actors/ps_client.h"
#include "actors/server.h"
#include "actors/session.h"
#include "actors/shard_codec.h"
#include "harness/ps_process.h"
#include "harness/raw_socket.h"
#include "harness/tamper_proxy.h"
#include "harness/temp_dir.h"
#include "ops/array_ops.h"
#include "ops/state_ops.h"
#include "ops/training_ops.h"

using namespace troupe;
using namespace troupe::runtime;

namespace {

using Reply = runtime::Result<std::vector<Tensor>>;

// A data channel's reply to `self`, decoded, or nothing within `wait`.
std::optional<Reply> channel_reply(caf::scoped_actor& self, std::chrono::milliseconds wait) {
  std::optional<Reply> out;
  self->receive([&](actors::net::channel_reply_atom, uint64_t,
                    runtime::Bytes& r) { out = actors::decode_shard_reply(r); },
                [&](actors::net::channel_reply_atom, uint64_t, std::string& why) {
                  out = runtime::unavailable(why);
                },
                caf::after(wait) >> [] {});
  return out;
}

}  // namespace

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
              ->serve([calls](const runtime::Bytes& f, const actors::net::DataServer::Later& later,
                              const actors::Peer& from) { return calls->call(f, later, from); })
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
  // Replica 1 calls through the data channel; `wait` is how long its reply may take.
  auto send = [&](int node, std::vector<Tensor> inputs, actors::SyncTag sync) {
    auto message = actors::build_shard_call(g, g.node(node), inputs, {.sync = sync});
    REQUIRE(message.ok());
    (*channel)->call(actors::net::ChannelCall{std::move(*message), inputs}, self, 1);
  };
  auto receive = [&](std::chrono::milliseconds wait) { return channel_reply(self, wait); };
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

TEST_CASE("a ps on a data port it is told, advertising another: peers are told the other") {
  int free_fd = -1, refusing_fd = -1;
  const uint16_t data_port = testing::held_port(&free_fd),
                 advertised = testing::held_port(&refusing_fd);
  ::close(free_fd);  // for the server to take
  actors::Runtime server_rt;
  actors::ServerOptions options;
  options.data_port = data_port;
  options.advertised_data_port = advertised;
  auto server = actors::Server::start(server_rt, options);
  REQUIRE_MESSAGE(server.ok(), server.status().to_string());
  CHECK((*server)->data_port() == data_port);
  CHECK((*server)->advertised_data_port() == advertised);
  ::close(testing::connect_to(data_port));  // it listens where told

  actors::Runtime rt;
  const std::string address = "127.0.0.1:" + std::to_string((*server)->port());
  auto shard = actors::connect_server(rt, address);
  REQUIRE(shard.ok());
  CHECK(testing::data_port_told(rt, *shard) == advertised);

  // Nothing listens at the advertised port: a session says so and its tensors take CAF's
  // connection; training works all the same.
  testing::PsModel m = testing::ps_model();
  actors::SessionOptions so;
  so.cluster = {{"/job:ps/task:0", address}};
  auto s = actors::Session::create(rt, m.g, so);
  REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  REQUIRE((*s)->run({}, {}, {m.init}).ok());
  auto r = (*s)->run(testing::ps_batch(m, 0), {m.loss}, {m.train});
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
  pid_t child = testing::start_server(&port, &keep_alive, *secret, log);
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
    const int fd = testing::connect_to(port);
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
    const uint16_t data_port = testing::data_port_told(rt, *server);
    REQUIRE(data_port != 0);
    auto channel =
        actors::net::DataChannel::connect(rt, "127.0.0.1", data_port, std::chrono::seconds(5));
    CHECK(channel.ok());
    actors::Runtime stranger(actors::RuntimeOptions{.secret = *other});
    auto refused = actors::net::DataChannel::connect(stranger, "127.0.0.1", data_port,
                                                     std::chrono::seconds(5));
    REQUIRE_FALSE(refused.ok());
  }
  testing::stop_server(child, keep_alive);
  std::ifstream in(log);
  const std::string logged((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK_MESSAGE(logged.find("refused 127.0.0.1:") != std::string::npos, logged);
  CHECK_MESSAGE(logged.find("not a troupe member's handshake") != std::string::npos, logged);
  CHECK_MESSAGE(logged.find("data channel on port") != std::string::npos, logged);
}

namespace {

// What this process writes to stderr while it lives, for a test to read.
class StderrCapture {
 public:
  explicit StderrCapture(const std::string& path) : path_(path) {
    std::fflush(stderr);
    saved_ = ::dup(STDERR_FILENO);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    ::dup2(fd, STDERR_FILENO);
    ::close(fd);
  }
  ~StderrCapture() { restore(); }
  std::string text() {
    restore();
    std::ifstream in(path_);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    saved_ = -1;
  }
  std::string path_;
  int saved_ = -1;
};

// Trains the ps model through `address` until a step fails (its error) or `steps` passed ("");
// `calls`: how many calls its data channels carried.
std::string train_until_failure(std::shared_ptr<const actors::JobSecret> secret,
                                const std::string& address, int steps, uint64_t* calls = nullptr) {
  actors::Runtime rt(actors::RuntimeOptions{.secret = secret});
  testing::PsModel m = testing::ps_model();
  actors::SessionOptions so;
  so.cluster = {{"/job:ps/task:0", address}};
  so.remote_timeout = std::chrono::seconds(10);
  auto s = actors::Session::create(rt, m.g, so);
  if (!s.ok()) return s.status().to_string();
  if (Status init = (*s)->run({}, {}, {m.init}).status(); !init.ok()) return init.to_string();
  for (int i = 0; i < steps; ++i) {
    auto r = (*s)->run(testing::ps_batch(m, i), {m.loss}, {m.train});
    if (!r.ok()) return r.status().to_string();
  }
  if (calls != nullptr) *calls = (*s)->traffic().calls;
  return "";
}

}  // namespace

TEST_CASE("a bit flipped after the handshake, either way, on either port: integrity, closed") {
  const auto secret = testing::new_job_secret("tampered");
  const std::string dir = testing::temp_dir("tampered_log");
  std::filesystem::create_directories(dir);
  StderrCapture captured(dir + "/stderr.log");

  // The data channel: a session's two channels (connections 0, 1) have a bit flipped on the
  // way to the ps, the next session's (2, 3) on the way back; the third session's pass.
  {
    int free_fd = -1;
    const uint16_t data_port = testing::held_port(&free_fd);
    ::close(free_fd);
    testing::TamperProxy proxy(
        data_port, {{0, true, 1500}, {1, true, 1500}, {2, false, 1500}, {3, false, 1500}});
    actors::Runtime server_rt(actors::RuntimeOptions{.secret = secret});
    actors::ServerOptions options;
    options.data_port = data_port;
    options.advertised_data_port = proxy.port();
    auto server = actors::Server::start(server_rt, options);
    REQUIRE(server.ok());
    const std::string address = "127.0.0.1:" + std::to_string((*server)->port());
    const std::string to_ps = train_until_failure(secret, address, 60);
    CHECK_MESSAGE(to_ps.find("data channel") != std::string::npos, to_ps);
    const std::string from_ps = train_until_failure(secret, address, 60);
    CHECK_MESSAGE(from_ps.find("integrity") != std::string::npos, from_ps);
    CHECK(proxy.flipped() >= 2);
    CHECK(train_until_failure(secret, address, 10) == "");
  }
  // CAF's port, its tensors too (the advertised data port refuses): connection 0 flipped on
  // the way to the ps, connection 1 on the way back, connection 2 passes.
  {
    int refusing_fd = -1;
    const uint16_t refusing = testing::held_port(&refusing_fd);
    actors::Runtime server_rt(actors::RuntimeOptions{.secret = secret});
    actors::ServerOptions options;
    options.advertised_data_port = refusing;
    auto server = actors::Server::start(server_rt, options);
    REQUIRE(server.ok());
    testing::TamperProxy proxy((*server)->port(), {{0, true, 4000}, {1, false, 4000}});
    const std::string address = "127.0.0.1:" + std::to_string(proxy.port());
    CHECK(train_until_failure(secret, address, 60) != "");
    CHECK(train_until_failure(secret, address, 60) != "");
    CHECK(proxy.flipped() == 2);
    CHECK(train_until_failure(secret, address, 10) == "");
    ::close(refusing_fd);
  }
  const std::string logged = captured.text();
  CHECK_MESSAGE(logged.find("refused 127.0.0.1:") != std::string::npos, logged);
  CHECK_MESSAGE(logged.find("CAF connection from 127.0.0.1") != std::string::npos, logged);
  size_t integrity = 0;
  for (size_t at = 0; (at = logged.find("integrity", at)) != std::string::npos; ++at) ++integrity;
  CHECK_MESSAGE(integrity >= 4, logged);
}

TEST_CASE("strangers holding 80 connections on each port: members join, strangers are ended") {
  const auto secret = testing::new_job_secret("strangers");
  const std::string dir = testing::temp_dir("strangers_log");
  std::filesystem::create_directories(dir);
  StderrCapture captured(dir + "/stderr.log");
  actors::Runtime server_rt(actors::RuntimeOptions{.secret = secret});
  auto server = actors::Server::start(server_rt, {});
  REQUIRE(server.ok());
  const std::string address = "127.0.0.1:" + std::to_string((*server)->port());
  // Half say nothing, half the start of a hello and then nothing.
  auto strangers = [&] {
    std::vector<int> fds;
    for (uint16_t port : {(*server)->port(), (*server)->data_port()}) {
      for (int i = 0; i < 80; ++i) {
        const int fd = testing::connect_to(port);
        if (i % 2 == 1) {
          // A hello's start: the rest, which would name a secret, never comes.
          testing::send_all(fd, "TRPB" + std::string(100, static_cast<char>(i)));
        }
        fds.push_back(fd);
      }
    }
    return fds;
  };
  auto member_trains = [&] {
    uint64_t calls = 0;
    CHECK(train_until_failure(secret, address, 3, &calls) == "");
    // Its tensors took the data channel: the strangers left it room.
    CHECK(calls > 0);
  };
  std::vector<int> first = strangers();
  member_trains();
  // Reopened while the first still hold theirs: members still join.
  std::vector<int> second = strangers();
  member_trains();
  // No byte extends a handshake: every stranger is ended within the handshake's time.
  const auto since = std::chrono::steady_clock::now();
  int ended = 0;
  for (int fd : second) {
    timeval wait{6, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
    char buf[128];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) {
    }
    if (n == 0 || errno == ECONNRESET) ++ended;
  }
  CHECK(ended == static_cast<int>(second.size()));
  CHECK(std::chrono::steady_clock::now() - since < std::chrono::seconds(6));
  for (int fd : first) ::close(fd);
  for (int fd : second) ::close(fd);
  const std::string logged = captured.text();
  CHECK_MESSAGE(logged.find("more not logged") != std::string::npos, logged);
}

TEST_CASE("a handshake's deadline is the one configured, on both ports: a silent peer ends there") {
  const auto secret = testing::new_job_secret("deadline");
  const auto deadline = std::chrono::milliseconds(200);
  actors::Runtime server_rt(
      actors::RuntimeOptions{.secret = secret, .handshake_timeout = deadline});
  auto server = actors::Server::start(server_rt, {.data = {.handshake_timeout = deadline}});
  REQUIRE(server.ok());
  for (uint16_t port : {(*server)->port(), (*server)->data_port()}) {
    const int fd = testing::connect_to(port);
    const auto since = std::chrono::steady_clock::now();
    // Well inside the default of 2 s: the configured deadline ended it, not the default.
    timeval wait{1, 500000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
    char c;
    const ssize_t n = ::read(fd, &c, 1);
    CHECK_MESSAGE((n == 0 || (n < 0 && errno == ECONNRESET)), "port ", port, " still open");
    CHECK(std::chrono::steady_clock::now() - since >= deadline - std::chrono::milliseconds(20));
    ::close(fd);
  }
}

TEST_CASE("a session that dials ps 0 and reaches ps 1 is refused; dialling ps 1 there works") {
  const auto secret = testing::new_job_secret("wrong_task");
  const std::string dir = testing::temp_dir("wrong_task_log");
  std::filesystem::create_directories(dir);
  StderrCapture captured(dir + "/stderr.log");
  const std::vector<std::string> cluster = {"/job:worker/task:0", "/job:ps/task:0",
                                            "/job:ps/task:1"};
  actors::Runtime server_rt(
      actors::RuntimeOptions{.secret = secret, .task = "/job:ps/task:1", .members = cluster});
  auto server = actors::Server::start(server_rt, {});
  REQUIRE(server.ok());
  const std::string address = "127.0.0.1:" + std::to_string((*server)->port());
  actors::Runtime rt(
      actors::RuntimeOptions{.secret = secret, .task = "/job:worker/task:0", .members = cluster});
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  {
    auto ps = b.device("/job:ps/task:0");
    ops::variable(b, "v", Shape{1}, DType::kFloat32, ops::zeros(b, Shape{1}, DType::kFloat32));
  }
  actors::SessionOptions wrong;
  wrong.cluster = {{"/job:ps/task:0", address}};
  auto refused = actors::Session::create(rt, g, wrong);
  REQUIRE_FALSE(refused.ok());
  CHECK_MESSAGE(refused.status().message().find(address) != std::string::npos,
                refused.status().to_string());
  // The same server, dialled as the task it is.
  auto ps1 = actors::connect_server(rt, address, "/job:ps/task:1");
  CHECK_MESSAGE(ps1.ok(), ps1.status().to_string());
  const std::string logged = captured.text();
  CHECK_MESSAGE(
      logged.find("dialled /job:ps/task:0, but this is /job:ps/task:1") != std::string::npos,
      logged);
}

TEST_CASE("the evaluator reads a ps's variables on its data port; its writes and CAF's port not") {
  const auto job = testing::new_job_secret("roles");
  const auto reader = testing::reader_secret(*job);
  const std::string dir = testing::temp_dir("roles_log");
  std::filesystem::create_directories(dir);
  StderrCapture captured(dir + "/stderr.log");
  const std::string ps0 = "/job:ps/task:0", evaluator_task = "/job:evaluator/task:0";
  const std::vector<std::string> cluster = {"/job:chief/task:0", "/job:worker/task:0", ps0};
  actors::Runtime server_rt(actors::RuntimeOptions{.secret = job, .task = ps0, .members = cluster});
  auto server = actors::Server::start(server_rt, {});
  REQUIRE(server.ok());
  (*server)->variables().assign("w", Tensor::from_vector<float>(Shape{2}, {1, 2}));
  // The calls: a read of "w", and an update of it.
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  const Output initial = ops::zeros(b, Shape{2}, DType::kFloat32);
  const Output v = ops::variable(b, "w", Shape{2}, DType::kFloat32, initial);
  const Output add = ops::assign_add(b, v, ops::placeholder(b, DType::kFloat32, Shape{2}));
  REQUIRE(b.ok());
  // One call on a data channel of its own, as `rt`'s task.
  auto call = [&](actors::Runtime& rt, int node, std::vector<Tensor> inputs,
                  actors::SyncTag sync) -> Reply {
    auto channel = actors::net::DataChannel::connect(rt, "127.0.0.1", (*server)->data_port(),
                                                     std::chrono::seconds(10), ps0);
    if (!channel.ok()) return channel.status();
    auto message = actors::build_shard_call(g, g.node(node), inputs, {.sync = sync});
    REQUIRE(message.ok());
    caf::scoped_actor self{rt.system()};
    (*channel)->call(actors::net::ChannelCall{std::move(*message), inputs}, self, 1);
    Reply out = runtime::internal_error("no reply");
    self->receive([&](actors::net::channel_reply_atom, uint64_t,
                      runtime::Bytes& r) { out = actors::decode_shard_reply(r); },
                  [&](actors::net::channel_reply_atom, uint64_t, std::string& why) {
                    out = runtime::unavailable(why);
                  },
                  caf::after(std::chrono::seconds(10)) >> [] {});
    return out;
  };
  const std::vector<Tensor> ten_twenty = {Tensor::from_vector<float>(Shape{2}, {10, 20})};

  actors::Runtime evaluator(
      actors::RuntimeOptions{.secret = reader, .task = evaluator_task, .members = cluster});
  const Reply read = call(evaluator, v.node, {}, {});
  REQUIRE_MESSAGE(read.ok(), read.status().to_string());
  CHECK((*read)[0].to_vector<float>() == std::vector<float>{1, 2});
  const Reply wrote = call(evaluator, add.node, ten_twenty, {});
  REQUIRE_FALSE(wrote.ok());
  const std::string refusal = wrote.status().message();
  CHECK_MESSAGE(refusal.find("refused: /job:evaluator/task:0 may only read") != std::string::npos,
                refusal);
  CHECK_MESSAGE(refusal.find("'" + g.node(add.node).name + "' (AssignAdd)") != std::string::npos,
                refusal);
  // A read as a replica of synchronous training would mark what that replica's gradients read.
  const Reply as_replica = call(evaluator, v.node, {}, actors::SyncTag{0, 0, 0});
  REQUIRE_FALSE(as_replica.ok());
  CHECK(as_replica.status().message().find("synchronous") != std::string::npos);
  CHECK((*server)->variables().read("w")->to_vector<float>() == std::vector<float>{1, 2});

  // A worker's same write applies.
  actors::Runtime worker(
      actors::RuntimeOptions{.secret = job, .task = "/job:worker/task:0", .members = cluster});
  const Reply applied = call(worker, add.node, ten_twenty, {});
  REQUIRE_MESSAGE(applied.ok(), applied.status().to_string());
  CHECK((*server)->variables().read("w")->to_vector<float>() == std::vector<float>{11, 22});

  // CAF delivers any message to any actor a peer names: a reader does not get in there at all,
  // by its secret or by its name.
  const std::string address = "127.0.0.1:" + std::to_string((*server)->port());
  CHECK_FALSE(actors::connect_server(evaluator, address, ps0).ok());
  actors::Runtime named_evaluator(
      actors::RuntimeOptions{.secret = job, .task = evaluator_task, .members = cluster});
  CHECK_FALSE(actors::connect_server(named_evaluator, address, ps0).ok());
  CHECK(actors::connect_server(worker, address, ps0).ok());
  const std::string logged = captured.text();
  CHECK_MESSAGE(logged.find("ps refused: /job:evaluator/task:0 may only read") != std::string::npos,
                logged);
  CHECK_MESSAGE(
      logged.find("/job:evaluator/task:0 may only read, and this port takes") != std::string::npos,
      logged);
}

TEST_CASE("a replica whose connections all closed has left: the round waiting for it closes") {
  // Replicas 1 and 3 call over data channels, replica 2 over CAF's connection; rounds of 3 with
  // a minute's timeout. Replica 1 sends its update; 2 and 3 go without theirs. The round closes
  // as their connections do, not at its timeout, and the ps's view of who trains follows.
  actors::Runtime server_rt;
  auto server = actors::Server::start(server_rt, {});
  REQUIRE_MESSAGE(server.ok(), server.status().to_string());
  (*server)->variables().assign("w", Tensor::from_vector<float>(Shape{2}, {1, 2}));
  actors::Runtime rt;
  const std::string task = "/job:ps/task:0";
  const std::string address = "127.0.0.1:" + std::to_string((*server)->port());
  auto shard = actors::connect_server(rt, address);
  REQUIRE(shard.ok());
  auto ps = actors::PsClient::connect(rt, {{task, address}}, {});
  REQUIRE(ps.ok());
  auto live = [&] {
    auto r = (*ps)->live_replicas(task);
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    return *r;
  };
  auto until_live = [&](const std::vector<int>& want) {
    for (int i = 0; i < 200 && live() != want; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return live();
  };

  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  auto v =
      ops::variable(b, "w", Shape{2}, DType::kFloat32, ops::zeros(b, Shape{2}, DType::kFloat32));
  auto add = ops::assign_add(b, v, ops::placeholder(b, DType::kFloat32, Shape{2}));
  REQUIRE(b.ok());
  caf::scoped_actor self{rt.system()};
  auto channel = [&] {
    auto c = actors::net::DataChannel::connect(rt, "127.0.0.1", (*server)->data_port(),
                                               std::chrono::seconds(10));
    REQUIRE(c.ok());
    return *c;
  };
  auto send = [&](actors::net::DataChannel& c, int node, std::vector<Tensor> inputs,
                  actors::SyncTag sync) {
    auto message = actors::build_shard_call(g, g.node(node), inputs, {.sync = sync});
    REQUIRE(message.ok());
    c.call(actors::net::ChannelCall{std::move(*message), inputs}, self, 1);
  };
  auto receive = [&](std::chrono::milliseconds wait) { return channel_reply(self, wait); };
  auto one = channel(), three = channel();
  for (auto [c, replica] : {std::pair{one, 1}, std::pair{three, 3}}) {
    send(*c, v.node, {}, actors::SyncTag{replica});
    auto read = receive(std::chrono::seconds(10));
    REQUIRE(read);
    REQUIRE_MESSAGE(read->ok(), read->status().to_string());
  }
  {
    caf::scoped_actor two{rt.system()};
    std::vector<char> blob;
    REQUIRE(
        actors::encode_shard_call(g, g.node(v.node), {}, &blob, {.sync = actors::SyncTag{2}}).ok());
    bool read = false;
    two->request(*shard, std::chrono::seconds(10), actors::call_atom::value, std::move(blob))
        .receive([&](std::vector<char>&) { read = true; }, [](caf::error&) {});
    REQUIRE(read);
    CHECK(live() == std::vector<int>{1, 2, 3});
    send(*one, add.node, {Tensor::from_vector<float>(Shape{2}, {10, 20})},
         actors::SyncTag{1, 3, 60000});
    CHECK_FALSE(receive(std::chrono::milliseconds(300)));  // the round waits for 2 and 3
  }  // replica 2's caller ends: CAF tells the ps
  CHECK(until_live({1, 3}) == std::vector<int>{1, 3});
  CHECK_FALSE(receive(std::chrono::milliseconds(100)));  // replica 3 may still send its update
  three.reset();                                         // its connection closes
  auto applied = receive(std::chrono::seconds(10));      // far less than the round's minute
  REQUIRE(applied);
  REQUIRE_MESSAGE(applied->ok(), applied->status().to_string());
  CHECK((**applied)[0].to_vector<float>() == std::vector<float>{11, 22});  // replica 1's alone
  CHECK(until_live({1}) == std::vector<int>{1});

  // An asynchronous replica is named too: the ps knows it trains until its connection closes.
  auto four = channel();
  send(*four, add.node, {Tensor::from_vector<float>(Shape{2}, {1, 1})},
       actors::SyncTag{4, 0, 0, 0, true});
  auto async = receive(std::chrono::seconds(10));
  REQUIRE(async);
  REQUIRE_MESSAGE(async->ok(), async->status().to_string());
  CHECK((**async)[0].to_vector<float>() == std::vector<float>{12, 23});  // applied at once
  CHECK(live() == std::vector<int>{1, 4});
  four.reset();
  CHECK(until_live({1}) == std::vector<int>{1});
}
