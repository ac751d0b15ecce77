// PsClient against ps processes: waiting for a server, pushing a state and pulling it back
// (slots included), reaching a ps started again at the same address, a deadline that names the
// task, and members sharing a ps under a job secret.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "actors/job_secret.h"
#include "actors/ps_client.h"
#include "harness/ps_process.h"
#include "harness/temp_dir.h"

using namespace troupe;
using namespace troupe::runtime;

TEST_CASE("a ps client waits for its server, sends it a state and reads it back, slots included") {
  uint16_t port = 0;
  int keep_alive = -1;
  pid_t child = testing::start_server(&port, &keep_alive);
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
  testing::stop_server(child, keep_alive);
}

TEST_CASE("a ps killed and started again at its address: connecting anew reaches the new one") {
  // CAF keeps the proxy of a server it reached at an address until it hears the connection
  // drop; a member that reconnects at once (its steps failed on that drop) must not get the
  // dead server's proxy back.
  const std::string task = "/job:ps/task:0";
  for (int round = 0; round < 5; ++round) {
    uint16_t port = 0, again = 0;
    int keep_alive = -1, keep_alive2 = -1;
    pid_t child = testing::start_server(&port, &keep_alive);
    REQUIRE(port != 0);
    testing::ForkedServer later =
        testing::fork_server(nullptr, "", port);  // before this process has threads
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
    pid_t second = testing::run_server(later, &again, &keep_alive2);
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
    testing::stop_server(second, keep_alive2);
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
  pid_t child = testing::start_server(&port, &keep_alive, *secret);
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
  testing::stop_server(child, keep_alive);
}
