// A Session whose variables live on ps processes: training matches one process (a dead server
// fails the step within seconds), synchronous replicas give one process's weights, a lone
// replica's rounds close at their timeout, and partitioned variables and embeddings train
// where their parts live, gathering rows there.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <thread>

#include "actors/ps_client.h"
#include "actors/session.h"
#include "harness/op_harness.h"
#include "harness/ps_process.h"
#include "harness/temp_dir.h"
#include "ops/array_ops.h"
#include "ops/control_flow_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/random_ops.h"
#include "ops/sparse_ops.h"
#include "ops/state_ops.h"
#include "ops/training_ops.h"
#include "runtime/placement.h"

using namespace troupe;
using namespace troupe::runtime;

namespace {

// A session of `g` on the cluster of `ps`, its variables initialized.
std::unique_ptr<actors::Session> ps_session(actors::Runtime& rt, const runtime::Graph& g,
                                            const testing::PsTasks& ps, int init) {
  actors::SessionOptions options;
  options.cluster = ps.cluster;
  auto s = actors::Session::create(rt, g, options);
  REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  REQUIRE((*s)->run({}, {}, {init}).ok());
  return std::move(*s);
}

}  // namespace

TEST_CASE(
    "training against a shard in another process matches one process; a dead server fails the "
    "step") {
  uint16_t port = 0;
  int keep_alive = -1;
  pid_t child = testing::start_server(&port, &keep_alive);
  REQUIRE(port != 0);
  testing::PsModel m = testing::ps_model();

  runtime::VariableStore local_vars;
  runtime::Executor exec(m.g, {.variables = &local_vars});
  REQUIRE(exec.run({}, {}, {m.init}).ok());
  std::vector<float> want;
  for (int i = 0; i < 8; ++i) {
    auto r = exec.run(testing::ps_batch(m, i), {m.loss}, {m.train});
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
      auto r = (*s)->run(testing::ps_batch(m, i), {m.loss}, {m.train});
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
    auto r = (*s)->run(testing::ps_batch(m, 9), {m.loss}, {m.train});
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
  pid_t child = testing::start_server(&port, &keep_alive);
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
  testing::stop_server(child, keep_alive);
}

// Three replicas in rounds of two on two ps processes, w on one and b on the other: a replica
// in three falls out of each round, and with rounds counted by each variable apart, replicas of
// different steps met in one variable's round and waited for each other until the timeout. Each
// update carries the global step its step read (ops::stamp_updates): no round waits for its
// timeout, and w and b, each moved by the mean of one round's gradients (1) a global step,
// stay equal to minus the global step.
TEST_CASE("3 sync replicas in rounds of 2 on 2 ps: rounds are global steps' and none waits") {
  const std::string logs[2] = {testing::temp_dir("stamped_ps0.log"),
                               testing::temp_dir("stamped_ps1.log")};
  uint16_t ports[2] = {0, 0};
  int keep_alive[2] = {-1, -1};
  pid_t children[2];
  for (int i = 0; i < 2; ++i) {
    children[i] = testing::start_server(&ports[i], &keep_alive[i], nullptr, logs[i]);
    REQUIRE(ports[i] != 0);
  }
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output step = ops::global_step(b);  // first: the updates wait for its read
  Output w =
      ops::variable(b, "w", Shape{2}, DType::kFloat32, ops::zeros(b, Shape{2}, DType::kFloat32));
  Output bias =
      ops::variable(b, "b", Shape{2}, DType::kFloat32, ops::zeros(b, Shape{2}, DType::kFloat32));
  Output loss = ops::add(b, ops::reduce_sum(b, w), ops::reduce_sum(b, bias));
  const int train = ops::minimize(b, loss, ops::Optimizer::sgd(1));
  REQUIRE(ops::stamp_updates(b).ok());
  const int init = ops::global_variables_initializer(b);
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  const std::vector<std::string> tasks = testing::PsTasks::named(2);
  REQUIRE(runtime::place_variables(&g, tasks, runtime::PsStrategy::kRoundRobin).ok());
  REQUIRE(runtime::task_of(g.node(w.node).device) != runtime::task_of(g.node(bias.node).device));
  std::map<std::string, std::string> cluster;
  for (int i = 0; i < 2; ++i) cluster[tasks[i]] = "127.0.0.1:" + std::to_string(ports[i]);
  constexpr int64_t kSteps = 150;
  {
    actors::Runtime rt;
    std::vector<std::unique_ptr<actors::Session>> replicas;
    for (int r = 0; r < 3; ++r) {
      actors::SessionOptions o;
      o.cluster = cluster;
      o.replica = r;
      o.replicas_to_aggregate = 2;
      o.sync_timeout = std::chrono::seconds(30);
      auto s = actors::Session::create(rt, g, o);
      REQUIRE_MESSAGE(s.ok(), s.status().to_string());
      replicas.push_back(std::move(*s));
    }
    REQUIRE(replicas[0]->run({}, {}, {init}).ok());
    std::vector<runtime::Status> failed(3);
    std::vector<std::thread> threads;
    for (int r = 0; r < 3; ++r) {
      // Each trains until the global step it reads has reached the end, then goes: the rounds
      // the others are in stop waiting for it (its connections close).
      threads.emplace_back([&, r] {
        for (;;) {
          auto done = replicas[r]->run({}, {step}, {train});
          if (!done.ok()) {
            failed[r] = done.status();
            break;
          }
          if ((*done)[0].data<int64_t>()[0] >= kSteps) break;
        }
        replicas[r].reset();
      });
    }
    for (auto& t : threads) t.join();
    for (const auto& s : failed) CHECK_MESSAGE(s.ok(), s.to_string());
    runtime::VariableStore held[2];
    for (int i = 0; i < 2; ++i) {
      auto ps = actors::PsClient::connect(rt, {{tasks[i], cluster[tasks[i]]}}, {});
      REQUIRE(ps.ok());
      REQUIRE((*ps)->pull(&held[i]).ok());
    }
    const runtime::VariableStore& on_w =
        held[runtime::task_of(g.node(w.node).device) == tasks[0] ? 0 : 1];
    const runtime::VariableStore& on_b =
        held[runtime::task_of(g.node(bias.node).device) == tasks[0] ? 0 : 1];
    const runtime::VariableStore& on_step =
        held[runtime::task_of(g.node(step.node).device) == tasks[0] ? 0 : 1];
    const int64_t steps = on_step.read_int64_scalar("global_step").value();
    CHECK(steps >= kSteps);
    const float moved = -static_cast<float>(steps);
    CHECK(on_w.read("w")->to_vector<float>() == std::vector<float>{moved, moved});
    CHECK(on_b.read("b")->to_vector<float>() == std::vector<float>{moved, moved});
  }
  // The second child holds the first's pipe too (it was forked after): it goes first.
  for (int i : {1, 0}) testing::stop_server(children[i], keep_alive[i]);
  for (int i = 0; i < 2; ++i) {
    std::ifstream in(logs[i]);
    const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK_MESSAGE(log.find("closed after") == std::string::npos, log);
  }
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
    child = testing::start_server(&port, &keep_alive);
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
    if (child > 0) testing::stop_server(child, keep_alive);
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
  const std::vector<std::string> tasks = testing::PsTasks::named(3);
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
  const std::vector<float> want =
      testing::losses_in_one_process(g, init, train, loss, batches, &alone);

  testing::PsTasks ps(tasks);
  const std::map<std::string, std::string>& cluster = ps.cluster;
  {
    actors::Runtime rt;
    auto s = actors::Session::create(rt, g, {.cluster = cluster});
    REQUIRE_MESSAGE(s.ok(), s.status().to_string());
    REQUIRE((*s)->run({}, {}, {init}).ok());
    testing::check_losses(**s, train, loss, batches, want);
    // Each ps holds its part, with its Adam slots, and nothing of the others.
    for (int i = 0; i < 3; ++i) {
      runtime::VariableStore held;
      ps.pull(rt, tasks[i], &held);
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

  testing::PsTasks ps(testing::PsTasks::named(1));
  {
    actors::Runtime rt;
    auto s = ps_session(rt, g, ps, init);
    for (int i = 0; i < 6; ++i) REQUIRE(s->run(feed(i), {}, {train}).ok());
    auto got = s->run({}, {emb});
    REQUIRE(got.ok());
    const std::vector<float> remote = (*got)[0].to_vector<float>();
    CHECK(testing::max_error((*got)[0], *local.read("emb")) < 1e-6);
    // Row 50 was never gathered: it is as initialized, on both sides.
    for (int k = 0; k < 4; ++k) {
      CHECK(remote[50 * 4 + k] == before[50 * 4 + k]);
      CHECK(want[7 * 4 + k] != before[7 * 4 + k]);
    }
  }
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
  const std::vector<std::string> tasks = testing::PsTasks::named(3);
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
  const std::vector<float> want =
      testing::losses_in_one_process(g, init, train, loss, batches, &alone);

  testing::PsTasks ps(tasks);
  const std::map<std::string, std::string>& cluster = ps.cluster;
  {
    actors::Runtime rt;
    auto s = actors::Session::create(rt, g, {.cluster = cluster});
    REQUIRE_MESSAGE(s.ok(), s.status().to_string());
    REQUIRE((*s)->run({}, {}, {init}).ok());
    const auto before = (*s)->traffic();
    testing::check_losses(**s, train, loss, batches, want);
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
      ps.pull(rt, tasks[i], &held);
      const std::string part = "emb/part_" + std::to_string(i);
      REQUIRE(held.contains(part));
      CHECK(testing::max_error(*held.read(part), *alone.read(part)) < 1e-5);
    }
  }
}

TEST_CASE(
    "a loop whose body updates and reads a ps variable each iteration runs them there, as one "
    "process") {
  // Each of n iterations adds the loop's value into `total`, which lives on the ps, reads the
  // sum back and goes on with it: the loop waits for the ps twice every iteration.
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  const std::string task = "/job:ps/task:0";
  Output x = ops::placeholder(b, DType::kFloat32, Shape{}, "x");
  Output n = ops::placeholder(b, DType::kInt32, Shape{}, "n");
  Output total;
  {
    auto on_ps = b.device(task);
    total = ops::variable(b, "total", Shape{}, DType::kFloat32, ops::scalar(b, 0, DType::kFloat32),
                          /*trainable=*/false);
  }
  Output added;
  std::vector<Output> loop = ops::while_loop(
      b,
      [&](runtime::GraphBuilder& b, const std::vector<Output>& v) { return ops::less(b, v[0], n); },
      [&](runtime::GraphBuilder& b, const std::vector<Output>& v) {
        {
          auto on_ps = b.device(task);
          added = ops::assign_add(b, total, v[1]);
        }
        auto after = b.control_dependencies({added.node});
        Output seen = ops::read_value(b, total);  // read on the ps, where total lives
        REQUIRE(g.node(seen.node).op == "Add");
        return std::vector<Output>{ops::add(b, v[0], ops::scalar(b, 1, DType::kInt32)),
                                   ops::add(b, v[1], seen)};
      },
      {ops::scalar(b, 0, DType::kInt32), x});
  // A loop whose only contact with the ps is inside it, the AssignAdd's sum.
  Output counted;
  Output counting = ops::while_loop(
      b,
      [&](runtime::GraphBuilder& b, const std::vector<Output>& v) { return ops::less(b, v[0], n); },
      [&](runtime::GraphBuilder& b, const std::vector<Output>& v) {
        {
          auto on_ps = b.device(task);
          counted = ops::assign_add(b, total, v[1]);
        }
        return std::vector<Output>{ops::add(b, v[0], ops::scalar(b, 1, DType::kInt32)), counted};
      },
      {ops::scalar(b, 0, DType::kInt32), x})[1];
  const int init = ops::global_variables_initializer(b);
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  REQUIRE(g.node(added.node).device == task);

  runtime::VariableStore local;
  runtime::Executor exec(g, {.variables = &local});
  REQUIRE(exec.run({}, {}, {init}).ok());
  const std::vector<std::pair<float, int32_t>> runs = {{1, 3}, {0.5f, 2}, {2, 0}};
  std::vector<float> want;
  for (const auto& [xv, nv] : runs) {
    auto r =
        exec.run({{x, Tensor::scalar<float>(xv)}, {n, Tensor::scalar<int32_t>(nv)}}, {loop[1]});
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    want.push_back((*r)[0].data<float>()[0]);
  }
  CHECK(want[0] == 13);  // 1 -> total 1, value 2 -> total 3, value 5 -> total 8, value 13

  testing::PsTasks ps({task});
  {
    actors::Runtime rt;
    auto s = ps_session(rt, g, ps, init);
    for (size_t i = 0; i < runs.size(); ++i) {
      const auto& [xv, nv] = runs[i];
      auto r =
          s->run({{x, Tensor::scalar<float>(xv)}, {n, Tensor::scalar<int32_t>(nv)}}, {loop[1]});
      REQUIRE_MESSAGE(r.ok(), r.status().to_string());
      CHECK((*r)[0].data<float>()[0] == want[i]);
    }
    // The sum lives on the ps: this process never held it.
    CHECK_FALSE(s->variables().contains("total"));
    auto t = s->run({}, {total});
    REQUIRE(t.ok());
    CHECK((*t)[0].data<float>()[0] == local.read("total")->data<float>()[0]);

    // A dead ps fails the loop's step, naming the node, within seconds.
    ps.stop(0);
    auto start = std::chrono::steady_clock::now();
    auto r = s->run({{x, Tensor::scalar<float>(1)}, {n, Tensor::scalar<int32_t>(2)}}, {counting});
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == Code::kUnavailable);
    CHECK(r.status().message().find("AssignAdd '" + g.node(counted.node).name + "' on " + task) !=
          std::string::npos);
    CHECK(secs < 10);
  }
}
