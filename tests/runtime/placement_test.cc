// Placement of variables on ps tasks: round-robin in creation order, greedy by bytes, every
// reader and writer of a variable (optimizer updates included) beside it, explicit devices kept.
#include "runtime/placement.h"

#include <doctest/doctest.h>

#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/state_ops.h"
#include "ops/training_ops.h"
#include "runtime/graph_builder.h"

using namespace troupe;
using namespace troupe::runtime;

namespace {

const std::vector<std::string> kTasks = {"/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:2"};

// A linear model with variables of 1000, 10, 10 and 10 floats (and a global step).
struct Model {
  runtime::Graph g;
  int train = -1;
};

std::unique_ptr<Model> model(const std::string& pinned = "") {
  auto m = std::make_unique<Model>();
  runtime::GraphBuilder b(&m->g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{-1, 100}, "x");
  Output big = ops::variable(b, "big", Shape{100, 10}, DType::kFloat32,
                             ops::zeros(b, Shape{100, 10}, DType::kFloat32));
  Output a =
      ops::variable(b, "a", Shape{10}, DType::kFloat32, ops::zeros(b, Shape{10}, DType::kFloat32));
  Output c;
  {
    auto scope = b.device(pinned);
    c = ops::variable(b, "c", Shape{10}, DType::kFloat32,
                      ops::zeros(b, Shape{10}, DType::kFloat32));
  }
  Output d =
      ops::variable(b, "d", Shape{10}, DType::kFloat32, ops::zeros(b, Shape{10}, DType::kFloat32));
  Output y = ops::add(b, ops::add(b, ops::matmul(b, x, big), a), ops::add(b, c, d));
  Output loss = ops::reduce_sum(b, ops::square(b, y));
  ops::global_step(b);
  m->train = ops::minimize(b, loss, ops::Optimizer::adam(0.1));
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  return m;
}

// Every node that touches `var` runs on `task`.
void check_beside(const runtime::Graph& g, const std::string& var, const std::string& task) {
  int touching = 0;
  for (const runtime::Node& n : g.nodes()) {
    auto it = n.attrs.find("var");
    if (it == n.attrs.end() || std::get<std::string>(it->second) != var) continue;
    ++touching;
    CHECK_MESSAGE(n.device == task, n.name, " (", n.op, ") is on '", n.device, "'");
  }
  CHECK_MESSAGE(touching >= 2, var, ": only ", touching, " nodes touch it");
}

}  // namespace

TEST_CASE("round-robin placement deals the variables out in creation order") {
  auto m = model();
  auto where = runtime::place_variables(&m->g, kTasks, PsStrategy::kRoundRobin);
  REQUIRE_MESSAGE(where.ok(), where.status().to_string());
  CHECK(where->at("big") == kTasks[0]);
  CHECK(where->at("a") == kTasks[1]);
  CHECK(where->at("c") == kTasks[2]);
  CHECK(where->at("d") == kTasks[0]);
  CHECK(where->at("global_step") == kTasks[1]);
  for (const auto& [var, task] : *where) check_beside(m->g, var, task);
}

TEST_CASE("greedy placement balances bytes: the big variable gets a task of its own") {
  auto m = model();
  auto where = runtime::place_variables(&m->g, kTasks, PsStrategy::kGreedyBytes);
  REQUIRE_MESSAGE(where.ok(), where.status().to_string());
  const std::string big = where->at("big");
  for (const auto& [var, task] : *where) {
    if (var != "big") CHECK_MESSAGE(task != big, var, " shares ", big, " with 'big'");
  }
  for (const auto& [var, task] : *where) check_beside(m->g, var, task);
}

TEST_CASE("placement keeps a device the user set, for the variable's other nodes too") {
  auto m = model("/job:ps/task:7");
  auto where = runtime::place_variables(&m->g, kTasks, PsStrategy::kRoundRobin);
  REQUIRE(where.ok());
  CHECK(where->at("c") == "/job:ps/task:7");
  CHECK(where->at("d") == kTasks[2]);  // c took no turn
  check_beside(m->g, "c", "/job:ps/task:7");
}

TEST_CASE("placement refuses no tasks and an unknown strategy, naming it") {
  auto m = model();
  auto none = runtime::place_variables(&m->g, {}, PsStrategy::kRoundRobin);
  CHECK(none.status().message().find("no ps task") != std::string::npos);
  CHECK(runtime::parse_ps_strategy("greedy").value() == PsStrategy::kGreedyBytes);
  auto bad = runtime::parse_ps_strategy("random");
  REQUIRE(!bad.ok());
  CHECK(bad.status().message().find("'random'") != std::string::npos);
}

TEST_CASE("placement puts a gather of a variable's rows beside it, and no other gather") {
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output ids = ops::placeholder(b, DType::kInt64, Shape{-1}, "ids");
  Output emb = ops::variable(b, "emb", Shape{50, 4}, DType::kFloat32,
                             ops::zeros(b, Shape{50, 4}, DType::kFloat32));
  Output rows = ops::gather(b, emb, ids);
  Output columns = ops::gather(b, emb, ids, /*axis=*/1);       // not a lookup of rows
  Output computed = ops::gather(b, ops::square(b, emb), ids);  // rows of no variable
  Output pinned;
  {
    auto scope = b.device("/job:worker/task:0");
    pinned = ops::gather(b, emb, ids);
  }
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  auto where = runtime::place_variables(&g, {"/job:ps/task:0"}, PsStrategy::kRoundRobin);
  REQUIRE(where.ok());
  CHECK(g.node(rows.node).device == "/job:ps/task:0");
  CHECK(runtime::gathered_variable(g, g.node(rows.node)) == emb.node);
  CHECK(g.node(columns.node).device.empty());
  CHECK(g.node(computed.node).device.empty());
  CHECK(g.node(pinned.node).device == "/job:worker/task:0");  // the user's word stands
  CHECK(runtime::gathered_variable(g, g.node(pinned.node)) == -1);
  // Placing again changes nothing: the placer's result is what it reads.
  runtime::colocate_gathers(&g);
  CHECK(g.node(rows.node).device == "/job:ps/task:0");
  CHECK(g.node(pinned.node).device == "/job:worker/task:0");
}

TEST_CASE("a task's name is spelled in one place, and read back from a device") {
  CHECK(runtime::task_name("ps", 2) == "/job:ps/task:2");
  CHECK(runtime::task_of("/job:ps/task:1/device:cpu:0") == "/job:ps/task:1");
  CHECK(runtime::task_of("/job:ps") == "/job:ps/task:0");  // a task left unset is the first
  CHECK(runtime::task_of("/device:cpu:0").empty());
  CHECK(runtime::task_of("").empty());
  CHECK(runtime::task_of("not a device").empty());
}
