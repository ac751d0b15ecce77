// A parameter shard in a second process on 127.0.0.1: a model trained against it matches the
// single-process run, and a dead server fails the next step cleanly, within seconds.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "actors/server.h"
#include "actors/session.h"
#include "harness/op_harness.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/state_ops.h"
#include "ops/training_ops.h"

using namespace troupe;
using runtime::DType;
using runtime::Output;
using runtime::Shape;
using runtime::Tensor;

namespace {

// Forks a child that serves a parameter shard until its stdin pipe closes; returns its port.
pid_t start_server(uint16_t* port, int* keep_alive_fd) {
  int up[2], down[2];
  REQUIRE(pipe(up) == 0);
  REQUIRE(pipe(down) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(up[0]);
    close(down[1]);
    {
      actors::Runtime rt;
      auto server = actors::Server::start(rt, {.port = 0});
      uint16_t p = server.ok() ? (*server)->port() : 0;
      if (write(up[1], &p, sizeof(p)) != sizeof(p)) _exit(1);
      char c;
      while (read(down[0], &c, 1) > 0) {
      }
    }
    _exit(0);
  }
  close(up[1]);
  close(down[0]);
  REQUIRE(read(up[0], port, sizeof(*port)) == sizeof(*port));
  close(up[0]);
  *keep_alive_fd = down[1];
  return pid;
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
