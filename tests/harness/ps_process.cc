#include "harness/ps_process.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>

#include "actors/net/data_server.h"
#include "actors/ps_client.h"
#include "actors/server.h"
#include "harness/op_harness.h"
#include "harness/temp_dir.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/state_ops.h"
#include "ops/training_ops.h"
#include "runtime/placement.h"

namespace troupe::testing {

using runtime::DType;
using runtime::Output;
using runtime::Shape;
using runtime::Tensor;

// With a secret, the server speaks only to members of that job.
ForkedServer fork_server(std::shared_ptr<const actors::JobSecret> secret, const std::string& log,
                         uint16_t at_port) {
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
                   std::shared_ptr<const actors::JobSecret> secret, const std::string& log,
                   uint16_t at_port) {
  return run_server(fork_server(std::move(secret), log, at_port), port, keep_alive_fd);
}

// Ends a server start_server forked: its stdin pipe closes, it exits, it is reaped.
void stop_server(pid_t child, int keep_alive_fd) {
  close(keep_alive_fd);
  int status = 0;
  waitpid(child, &status, 0);
}

std::vector<std::string> PsTasks::named(int n) {
  std::vector<std::string> tasks;
  for (int i = 0; i < n; ++i) tasks.push_back(runtime::task_name("ps", i));
  return tasks;
}

void PsTasks::pull(actors::Runtime& rt, const std::string& task,
                   runtime::VariableStore* held) const {
  auto one = actors::PsClient::connect(rt, {{task, cluster.at(task)}}, {});
  REQUIRE_MESSAGE(one.ok(), one.status().to_string());
  REQUIRE((*one)->pull(held).ok());
}

PsTasks::PsTasks(const std::vector<std::string>& tasks) {
  for (const std::string& task : tasks) {
    uint16_t port = 0;
    int fd = -1;
    children.push_back(start_server(&port, &fd));
    REQUIRE(port != 0);
    keep_alive.push_back(fd);
    cluster[task] = "127.0.0.1:" + std::to_string(port);
  }
}

PsTasks::~PsTasks() {
  // Every pipe closed before any reaping: a later child holds copies of the earlier ones'.
  for (int fd : keep_alive) {
    if (fd >= 0) close(fd);
  }
  for (pid_t c : children) {
    if (c > 0) waitpid(c, nullptr, 0);
  }
}

void PsTasks::stop(size_t i) {
  stop_server(children[i], keep_alive[i]);
  children[i] = -1;
  keep_alive[i] = -1;
}

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

PsModel ps_model() {
  PsModel m;
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

runtime::FeedList ps_batch(const PsModel& m, int i) {
  std::mt19937_64 rng(100 + i);
  Tensor x = testing::random_tensor<float>(Shape{16, 6}, rng);
  Tensor y(DType::kInt32, Shape{16});
  for (int k = 0; k < 16; ++k) y.data<int32_t>()[k] = (x.data<float>()[k * 6] > 0) + (k % 2);
  return {{m.x, x}, {m.y, y}};
}

std::shared_ptr<const actors::JobSecret> new_job_secret(const std::string& name) {
  const std::string dir = temp_dir(name);
  std::filesystem::create_directories(dir);
  REQUIRE(actors::make_job_secret(dir + "/job.secret").ok());
  auto secret = actors::load_job_secret(dir + "/job.secret");
  REQUIRE(secret.ok());
  return *secret;
}

std::shared_ptr<const actors::JobSecret> reader_secret(const actors::JobSecret& job) {
  const std::string path = job.path() + ".reader";
  REQUIRE(actors::make_reader_secret(job.path(), path).ok());
  auto secret = actors::load_job_secret(path);
  REQUIRE(secret.ok());
  return *secret;
}

uint16_t data_port_told(actors::Runtime& rt, const caf::actor& server) {
  uint16_t port = 0;
  caf::scoped_actor self{rt.system()};
  self->request(server, std::chrono::seconds(5), actors::net::data_port_atom::value)
      .receive([&](uint16_t p) { port = p; }, [](caf::error&) {});
  return port;
}

}  // namespace troupe::testing
