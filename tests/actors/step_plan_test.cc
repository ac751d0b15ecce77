// The plan compiler without actors: which nodes take part in a signature's steps, what is bound,
// fused, fed, gated and reported, and how nodes on another task are left alone.
#include "actors/step_plan.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "ops/array_ops.h"
#include "ops/control_flow_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/rnn.h"
#include "ops/state_ops.h"
#include "ops/training_ops.h"
#include "runtime/graph_builder.h"
#include "runtime/placement.h"

using namespace troupe;
using actors::compile_plan;
using actors::StepPlan;
using namespace troupe::runtime;

namespace {

// loss = sum(relu(x w + b)) on a variable w and a constant b; train by SGD.
struct Model {
  runtime::Graph g;
  Output x, w, relu, loss;
  int train = -1, unused = -1;
};

std::unique_ptr<Model> model() {
  auto m = std::make_unique<Model>();
  runtime::GraphBuilder b(&m->g);
  m->x = ops::placeholder(b, DType::kFloat32, Shape{-1, 3}, "x");
  m->w = ops::variable(b, "w", Shape{3, 4}, DType::kFloat32,
                       ops::zeros(b, Shape{3, 4}, DType::kFloat32));
  Output bias = ops::zeros(b, Shape{4}, DType::kFloat32, "bias");
  m->relu = ops::relu(b, ops::bias_add(b, ops::matmul(b, m->x, m->w), bias));
  m->loss = ops::reduce_sum(b, m->relu);
  m->unused = ops::square(b, m->x).node;
  m->train = ops::minimize(b, m->loss, ops::Optimizer::sgd(0.1));
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  return m;
}

const runtime::Node& node(const runtime::Graph& g, int id) { return g.node(id); }

}  // namespace

TEST_CASE("a plan binds constants, fuses the dense chain, routes the feed and gates the read") {
  auto m = model();
  auto plan = compile_plan(m->g, {{m->x}, {m->relu}, {}});
  REQUIRE_MESSAGE(plan.ok(), plan.status().to_string());
  // The Relu runs the whole MatMul -> BiasAdd -> Relu chain; the constant bias is bound into it.
  REQUIRE(plan->nodes.count(m->relu.node) == 1);
  const actors::NodeStep& root = plan->nodes.at(m->relu.node);
  REQUIRE(root.fused != nullptr);
  CHECK(root.fused->op == "_FusedMatMul");
  CHECK(root.bound_inputs.size() == 1);
  for (const auto& [id, step] : plan->nodes) {
    CHECK_MESSAGE(node(m->g, id).op != "Const", "a constant got an actor");
    CHECK_MESSAGE(node(m->g, id).op != "BiasAdd", "an absorbed node got an actor");
  }
  CHECK(plan->nodes.count(m->unused) == 0);  // pruned: nothing fetched needs it
  // x goes to the fused node's first slot; w's read waits on earlier writes of w.
  REQUIRE(plan->feed_routes.size() == 1);
  REQUIRE(plan->feed_routes[0].size() == 1);
  CHECK(plan->feed_routes[0][0] == std::make_pair(m->relu.node, int32_t{0}));
  REQUIRE(plan->gated_reads.size() == 1);
  CHECK(plan->gated_reads[0] == std::make_pair(m->w.node, std::string("w")));
  // One fetch, reported by the Relu.
  REQUIRE(plan->fetches.size() == 1);
  CHECK(plan->fetches[0].node == m->relu.node);
  CHECK(root.report);
  CHECK(plan->reporters == 1);
}

TEST_CASE("a fetch of a fed value comes from the feed; writers are known by their variable") {
  auto m = model();
  auto plan = compile_plan(m->g, {{m->x}, {m->x, m->loss}, {m->train}});
  REQUIRE(plan.ok());
  CHECK(plan->fetches[0].feed == 0);
  CHECK(plan->fetches[1].node == m->loss.node);
  bool writes_w = false;
  for (const auto& [id, vars] : plan->writers) {
    writes_w |=
        vars == std::vector<std::string>{"w"} && node(m->g, id).op == "ApplyGradientDescent";
    CHECK(plan->nodes.at(id).report);  // the session must hear when a write is done
  }
  CHECK(writes_w);
  // Every edge ends at a node of the plan, in a slot it has.
  for (const auto& [id, step] : plan->nodes) {
    for (const auto& e : step.outs) {
      REQUIRE(plan->nodes.count(e.consumer) == 1);
      CHECK(e.input < plan->nodes.at(e.consumer).slots);
    }
  }
}

TEST_CASE("nodes on another task are neither fused nor looked up here") {
  auto m = model();
  actors::CompileOptions o;
  o.remote = [](const runtime::Node& n) { return n.op == "Variable" || n.op == "MatMul"; };
  auto plan = compile_plan(m->g, {{m->x}, {m->relu}, {}}, o);
  REQUIRE(plan.ok());
  CHECK(plan->nodes.count(m->relu.node) == 1);
  CHECK(plan->nodes.at(m->relu.node).fused == nullptr);  // its MatMul runs elsewhere
}

TEST_CASE("a gather of a remote variable's rows runs there; a read waits for its gate too") {
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output ids = ops::placeholder(b, DType::kInt64, Shape{-1}, "ids");
  Output emb, table;
  {
    auto on_ps = b.device("/job:ps/task:0");
    emb = ops::variable(b, "emb", Shape{100, 4}, DType::kFloat32,
                        ops::zeros(b, Shape{100, 4}, DType::kFloat32));
    table = ops::variable(b, "table", Shape{100, 4}, DType::kFloat32,
                          ops::zeros(b, Shape{100, 4}, DType::kFloat32));
  }
  Output rows = ops::gather(b, emb, ids);
  Output more = ops::gather(b, table, ids);
  Output whole = ops::reduce_sum(b, table);  // reads all of `table`
  REQUIRE(b.ok());
  // The placer puts the gathers beside their variables before any plan is made.
  CHECK(runtime::gathered_variable(g, node(g, rows.node)) == -1);
  runtime::colocate_gathers(&g);
  CHECK(node(g, rows.node).device == "/job:ps/task:0");
  CHECK(runtime::gathered_variable(g, node(g, rows.node)) == emb.node);
  CHECK(runtime::gathered_variable(g, node(g, whole.node)) == -1);
  actors::CompileOptions o;
  o.remote = [](const runtime::Node& n) { return n.device.rfind("/job:ps", 0) == 0; };
  auto plan = compile_plan(g, {{ids}, {rows, more, whole}, {}}, o);
  REQUIRE_MESSAGE(plan.ok(), plan.status().to_string());
  // Only the ids go to the gather, which reads emb's rows on the ps: emb has no node here.
  const actors::NodeStep& gather = plan->nodes.at(rows.node);
  REQUIRE(gather.fused != nullptr);
  CHECK(gather.fused->op == "VariableGather");
  CHECK(gather.fused->device == "/job:ps/task:0");
  CHECK(gather.fused->attr<std::string>("var") == "emb");
  CHECK(gather.fused->inputs == std::vector<Output>{ids});
  CHECK(gather.slots == 1);
  CHECK(gather.expected == 2);  // the ids and the gate of emb
  CHECK(plan->nodes.count(emb.node) == 0);
  // `table` is read whole as well: its read stays, and its gather still goes to the ps.
  CHECK(plan->nodes.count(table.node) == 1);
  CHECK(plan->nodes.at(more.node).fused != nullptr);
  std::vector<std::pair<int, std::string>> gated(plan->gated_reads);
  std::sort(gated.begin(), gated.end());
  std::vector<std::pair<int, std::string>> expected{
      {table.node, "table"}, {rows.node, "emb"}, {more.node, "table"}};
  std::sort(expected.begin(), expected.end());
  CHECK(gated == expected);
  CHECK(plan->nodes.at(table.node).expected == 1);  // its gate

  // Fed, the read is not the store's: the gather takes the fed value where it runs.
  auto fed = compile_plan(g, {{ids, emb}, {rows}, {}}, o);
  REQUIRE(fed.ok());
  CHECK(fed->nodes.at(rows.node).fused == nullptr);
  // In one process nothing changes: the gather reads the variable's value here.
  auto local = compile_plan(g, {{ids}, {rows}, {}});
  REQUIRE(local.ok());
  CHECK(local->nodes.at(rows.node).fused == nullptr);
  CHECK(local->nodes.count(emb.node) == 1);
}

TEST_CASE("a step's reads of one task's variables are one call, made by the first of them") {
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  auto var = [&](const char* name, const char* device) {
    auto on = b.device(device);
    return ops::variable(b, name, Shape{2}, DType::kFloat32,
                         ops::zeros(b, Shape{2}, DType::kFloat32));
  };
  Output a = var("a", "/job:ps/task:0"), c = var("c", "/job:ps/task:1");
  Output d = var("d", "/job:ps/task:0"), e = var("e", "");
  Output sum = ops::add_n(b, {a, c, d, e});
  Output twice = ops::mul(b, d, 2.0);
  Output step;
  {
    auto on = b.device("/job:ps/task:0");
    step = ops::global_step(b);
  }
  Output steps = ops::cast(b, step, DType::kFloat32);
  REQUIRE(b.ok());
  actors::CompileOptions o;
  o.remote = [](const runtime::Node& n) { return n.device.rfind("/job:ps", 0) == 0; };
  auto plan = compile_plan(g, {{}, {sum, twice, steps}, {}}, o);
  REQUIRE_MESSAGE(plan.ok(), plan.status().to_string());
  // a reads d too: d has no node, and its consumers take a's output 1. The global step rides
  // along as well, trainable or not: nothing in this plan writes it, so its gate opens with
  // the others' (a learning rate, a moving average in evaluation); its cast takes output 2.
  REQUIRE(plan->nodes.count(a.node) == 1);
  CHECK(plan->nodes.count(d.node) == 0);
  CHECK(plan->nodes.count(step.node) == 0);
  const actors::NodeStep& reader = plan->nodes.at(a.node);
  CHECK(reader.reads == std::vector<int>{d.node, step.node});
  CHECK(reader.expected == 3);  // the three gates
  int to_sum = 0, to_twice = 0, to_steps = 0;
  for (const auto& edge : reader.outs) {
    to_sum += edge.consumer == sum.node &&
              ((edge.output == 0 && edge.input == 0) || (edge.output == 1 && edge.input == 2));
    to_twice += edge.consumer == twice.node && edge.output == 1 && edge.input == 0;
    to_steps += edge.consumer == steps.node && edge.output == 2 && edge.input == 0;
  }
  CHECK(to_sum == 2);
  CHECK(to_twice == 1);
  CHECK(to_steps == 1);
  // c is alone on its task, e is here: each keeps its own read.
  CHECK(plan->nodes.at(c.node).reads.empty());
  CHECK(plan->nodes.at(e.node).reads.empty());
  int gates_of_a = 0;
  for (const auto& [id, v] : plan->gated_reads) gates_of_a += id == a.node;
  CHECK(gates_of_a == 3);
  // A fetched read rides along too: its value is fetched from a's output 1.
  auto fetched = compile_plan(g, {{}, {sum, d}, {}}, o);
  REQUIRE(fetched.ok());
  CHECK(fetched->nodes.count(d.node) == 0);
  CHECK(fetched->nodes.at(a.node).reads == std::vector<int>{d.node});
  CHECK(fetched->fetches[1].node == a.node);
  CHECK(fetched->nodes.at(a.node).report);
  CHECK(fetched->nodes.at(a.node).fetched_outputs[fetched->fetches[1].position] == 1);
  // A read that is a target keeps its own call.
  auto targeted = compile_plan(g, {{}, {sum}, {d.node}}, o);
  REQUIRE(targeted.ok());
  CHECK(targeted->nodes.count(d.node) == 1);
  CHECK(targeted->nodes.at(a.node).reads.empty());
}

namespace {

// Trains sum((a + c + d) * x) by SGD, a and c on ps task 0, d on `d_task`, the global step on
// task 0; each update where its variable lives.
struct Placed {
  runtime::Graph g;
  Output x, loss, step_value;
  int train = -1, step = -1;
  std::map<std::string, int> update;  // variable -> its update node
};

std::unique_ptr<Placed> placed(const char* d_task) {
  auto m = std::make_unique<Placed>();
  runtime::GraphBuilder b(&m->g);
  auto var = [&](const char* name, const char* device) {
    auto on = b.device(device);
    return ops::variable(b, name, Shape{2}, DType::kFloat32,
                         ops::zeros(b, Shape{2}, DType::kFloat32));
  };
  Output a = var("a", "/job:ps/task:0"), c = var("c", "/job:ps/task:0"), d = var("d", d_task);
  {
    auto on = b.device("/job:ps/task:0");
    m->step_value = ops::global_step(b);
  }
  m->x = ops::placeholder(b, DType::kFloat32, Shape{2}, "x");
  m->loss = ops::reduce_sum(b, ops::mul(b, ops::add_n(b, {a, c, d}), m->x));
  m->train = ops::minimize(b, m->loss, ops::Optimizer::sgd(0.1));
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  std::map<std::string, std::string> where{{"a", "/job:ps/task:0"},
                                           {"c", "/job:ps/task:0"},
                                           {"d", d_task},
                                           {"global_step", "/job:ps/task:0"}};
  for (int id = 0; id < m->g.num_nodes(); ++id) {
    const runtime::Node& n = m->g.node(id);
    if (n.def->variable_access != runtime::VariableAccess::kWrite || n.op == "Assign") continue;
    const std::string v = n.attr<std::string>("var");
    m->g.set_device(id, where.at(v));
    if (v == "global_step") {
      m->step = id;
    } else {
      m->update[v] = id;
    }
  }
  REQUIRE(m->step >= 0);
  REQUIRE(m->update.size() == 3);
  return m;
}

actors::CompileOptions on_ps() {
  actors::CompileOptions o;
  o.remote = [](const runtime::Node& n) { return n.device.rfind("/job:ps", 0) == 0; };
  return o;
}

bool has_edge(const StepPlan& plan, int from, int to) {
  for (const auto& e : plan.nodes.at(from).outs) {
    if (e.consumer == to) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("a step's updates of one task's variables are one call, made by the last of them") {
  auto m = placed("/job:ps/task:0");
  auto plan = compile_plan(m->g, {{m->x}, {m->loss}, {m->train}}, on_ps());
  REQUIRE_MESSAGE(plan.ok(), plan.status().to_string());
  // The global step's increment comes last and makes the call: every update rides on it.
  for (const auto& [v, id] : m->update) CHECK(plan->nodes.count(id) == 0);
  REQUIRE(plan->nodes.count(m->step) == 1);
  const actors::NodeStep& caller = plan->nodes.at(m->step);
  std::vector<int> made = caller.updates;
  std::sort(made.begin(), made.end());
  CHECK(made == std::vector<int>{m->update["a"], m->update["c"], m->update["d"]});
  std::vector<std::string> written = plan->writers.at(m->step);
  std::sort(written.begin(), written.end());
  CHECK(written == std::vector<std::string>{"a", "c", "d", "global_step"});
  CHECK(plan->writers.size() == 1);
  // Its slots: each update's inputs after its own one; no control slot for the updates it
  // makes (it would wait for itself); the train op waits for it.
  int32_t inputs = static_cast<int32_t>(m->g.node(m->step).inputs.size());
  for (int u : caller.updates) inputs += static_cast<int32_t>(m->g.node(u).inputs.size());
  CHECK(caller.slots == inputs);
  CHECK(has_edge(*plan, m->step, m->train));
  for (const auto& [id, step] : plan->nodes) {
    for (const auto& e : step.outs) CHECK(e.input < plan->nodes.at(e.consumer).slots);
  }

  // A fetched update keeps its own call: its value goes back. The increment, which waits for
  // that call, keeps its own too; c and d go together.
  auto fetched = compile_plan(m->g, {{m->x}, {Output{m->update["a"], 0}}, {m->train}}, on_ps());
  REQUIRE(fetched.ok());
  CHECK(fetched->nodes.at(m->update["a"]).updates.empty());
  CHECK(fetched->nodes.at(m->step).updates.empty());
  const int first = std::min(m->update["c"], m->update["d"]);
  const int last = std::max(m->update["c"], m->update["d"]);
  CHECK(fetched->nodes.count(first) == 0);
  CHECK(fetched->nodes.at(last).updates == std::vector<int>{first});
}

TEST_CASE("the global step's read joins the step's read call when its increment rides along") {
  auto together = placed("/job:ps/task:0");
  auto plan = compile_plan(
      together->g, {{together->x}, {together->loss, together->step_value}, {together->train}},
      on_ps());
  REQUIRE_MESSAGE(plan.ok(), plan.status().to_string());
  // Its gate opens with the others' (the same call writes them all): one read call a step,
  // which the fetch of the global step takes its value from.
  CHECK(plan->nodes.count(together->step_value.node) == 0);
  const actors::FetchSource& from = plan->fetches[1];
  REQUIRE(plan->nodes.count(from.node) == 1);
  const actors::NodeStep& reader = plan->nodes.at(from.node);
  CHECK(std::count(reader.reads.begin(), reader.reads.end(), together->step_value.node) == 1);
  CHECK(reader.fetched_outputs[from.position] >= 1);
  // With d on task 1 the increment waits for d's call and has one of its own: the read too.
  auto apart = placed("/job:ps/task:1");
  auto split = compile_plan(
      apart->g, {{apart->x}, {apart->loss, apart->step_value}, {apart->train}}, on_ps());
  REQUIRE(split.ok());
  REQUIRE(split->nodes.count(apart->step_value.node) == 1);
  CHECK(split->fetches[1].node == apart->step_value.node);
  for (const auto& [id, step] : split->nodes) {
    CHECK(std::count(step.reads.begin(), step.reads.end(), apart->step_value.node) == 0);
  }
}

TEST_CASE("an update that waits on another task's keeps its own call") {
  auto m = placed("/job:ps/task:1");
  auto plan = compile_plan(m->g, {{m->x}, {m->loss}, {m->train}}, on_ps());
  REQUIRE_MESSAGE(plan.ok(), plan.status().to_string());
  // The increment waits for d's update on task 1: joining a and c's call, it would hold their
  // call back until task 1 answered. The later of a and c makes theirs; d is alone.
  const int first = std::min(m->update["a"], m->update["c"]);
  const int last = std::max(m->update["a"], m->update["c"]);
  CHECK(plan->nodes.count(first) == 0);
  REQUIRE(plan->nodes.count(last) == 1);
  CHECK(plan->nodes.at(last).updates == std::vector<int>{first});
  CHECK(plan->nodes.at(m->update["d"]).updates.empty());
  CHECK(plan->nodes.at(m->step).updates.empty());
  CHECK(has_edge(*plan, last, m->step));
  CHECK(has_edge(*plan, m->update["d"], m->step));
  std::vector<std::string> written = plan->writers.at(last);
  std::sort(written.begin(), written.end());
  CHECK(written == std::vector<std::string>{"a", "c"});
  // In one process nothing is batched.
  auto local = compile_plan(m->g, {{m->x}, {m->loss}, {m->train}});
  REQUIRE(local.ok());
  for (const auto& [id, step] : local->nodes) CHECK(step.updates.empty());
}

TEST_CASE("a variable's read under a control dependency still waits for its gate") {
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{}, "x");
  Output first = ops::square(b, x);
  Output v;
  {
    auto deps = b.control_dependencies({first.node});
    v = ops::variable(b, "v", Shape{}, DType::kFloat32, ops::zeros(b, Shape{}, DType::kFloat32));
  }
  REQUIRE(b.ok());
  REQUIRE(node(g, v.node).control_inputs == std::vector<int>{first.node});
  auto plan = compile_plan(g, {{x}, {v}, {}});
  REQUIRE(plan.ok());
  // The control packet and the gate's RunStep: a read never fires on the packet alone, before
  // an earlier step's write of v is done.
  CHECK(plan->nodes.at(v.node).expected == 2);
  REQUIRE(plan->gated_reads.size() == 1);
  CHECK(plan->sources.empty());
}

TEST_CASE("a plan refuses a fetch that is not in the graph") {
  auto m = model();
  auto plan = compile_plan(m->g, {{}, {Output{9999, 0}}, {}});
  REQUIRE_FALSE(plan.ok());
}

TEST_CASE(
    "a loop is one node of the plan, gated on the variables it reads; its ps nodes run there") {
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{}, "x");
  Output w = ops::variable(b, "w", Shape{}, DType::kFloat32, ops::scalar(b, 2, DType::kFloat32));
  Output scaled;
  std::vector<Output> loop = ops::while_loop(
      b,
      [](runtime::GraphBuilder& b, const std::vector<Output>& v) {
        return ops::less(b, v[0], ops::scalar(b, 3, DType::kInt32));
      },
      [&](runtime::GraphBuilder& b, const std::vector<Output>& v) {
        scaled = ops::mul(b, v[1], w);
        return std::vector<Output>{ops::add(b, v[0], ops::scalar(b, 1, DType::kInt32)), scaled};
      },
      {ops::scalar(b, 0, DType::kInt32), x});
  Output after = ops::neg(b, loop[1]);
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  auto plan = compile_plan(g, {{x}, {after}, {}});
  REQUIRE_MESSAGE(plan.ok(), plan.status().to_string());
  // The variable (read outside the loop, entered into it), the region and the Neg after it.
  int regions = 0, region = -1;
  for (const auto& [id, step] : plan->nodes) {
    if (step.region) {
      ++regions;
      region = id;
    }
  }
  REQUIRE(regions == 1);
  CHECK(plan->nodes.size() == 3);
  CHECK(plan->nodes.count(scaled.node) == 0);  // absorbed into the region
  CHECK(has_edge(*plan, region, after.node));
  CHECK(plan->nodes.count(w.node) == 1);
  CHECK(has_edge(*plan, w.node, region));

  // A node of another task inside the loop runs there, a call the region waits for; it
  // neither folds nor fuses here.
  actors::CompileOptions o;
  o.remote = [](const runtime::Node& n) { return n.op == "Mul"; };
  auto there = compile_plan(g, {{x}, {after}, {}}, o);
  REQUIRE_MESSAGE(there.ok(), there.status().to_string());
  CHECK(there->nodes.at(region).region->elsewhere == std::vector<int>{scaled.node});
  // The loop's own ops stay with it.
  o.remote = [](const runtime::Node& n) { return n.op == "Merge"; };
  auto refused = compile_plan(g, {{x}, {after}, {}}, o);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == Code::kUnimplemented);
  CHECK(refused.status().message().find("a loop's control flow and stacks run where the loop "
                                        "runs") != std::string::npos);
}

TEST_CASE("inside a loop, fixed values run as constants of their frame and dense chains fuse") {
  // h = relu(h w + bias) * (0.5 * 3), three times; in the iterations where i < 1 it also adds
  // 2 * 4 on a branch of a cond.
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{2, 4}, "x");
  Output w = ops::placeholder(b, DType::kFloat32, Shape{4, 4}, "w");
  Output bias = ops::placeholder(b, DType::kFloat32, Shape{4}, "bias");
  Output product, sum, dense, scale, offset;
  std::vector<Output> loop = ops::while_loop(
      b,
      [](runtime::GraphBuilder& b, const std::vector<Output>& v) {
        return ops::less(b, v[0], ops::scalar(b, 3, DType::kInt32));
      },
      [&](runtime::GraphBuilder& b, const std::vector<Output>& v) {
        product = ops::matmul(b, v[1], w);
        sum = ops::bias_add(b, product, bias);
        dense = ops::relu(b, sum);
        scale =
            ops::mul(b, ops::scalar(b, 0.5, DType::kFloat32), ops::scalar(b, 3, DType::kFloat32));
        Output h = ops::mul(b, dense, scale);
        std::vector<Output> next = ops::cond(
            b, ops::less(b, v[0], ops::scalar(b, 1, DType::kInt32)),
            [&](runtime::GraphBuilder& b) {
              offset = ops::mul(b, ops::scalar(b, 2, DType::kFloat32),
                                ops::scalar(b, 4, DType::kFloat32));
              return std::vector<Output>{ops::add(b, h, offset)};
            },
            [&](runtime::GraphBuilder&) { return std::vector<Output>{h}; });
        return std::vector<Output>{ops::add(b, v[0], ops::scalar(b, 1, DType::kInt32)), next[0]};
      },
      {ops::scalar(b, 0, DType::kInt32), x});
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());

  auto region_of = [&](const actors::CompileOptions& o) {
    auto plan = compile_plan(g, {{x, w, bias}, {loop[1]}, {}}, o);
    REQUIRE_MESSAGE(plan.ok(), plan.status().to_string());
    std::shared_ptr<const actors::ControlFlowRegion> region;
    for (const auto& [id, step] : plan->nodes) {
      if (step.region) region = step.region;
    }
    REQUIRE(region);
    return region;
  };
  auto fused = region_of({});
  const auto& stand_ins = fused->stand_ins;
  REQUIRE(stand_ins.count(scale.node) == 1);
  CHECK(stand_ins.at(scale.node)->op == "Const");
  CHECK(stand_ins.at(scale.node)->attr<Tensor>("value").data<float>()[0] == 1.5f);
  // Still in its frame: it takes the constants that wait for the loop's pivot.
  CHECK(stand_ins.at(scale.node)->inputs == g.node(scale.node).inputs);
  REQUIRE(stand_ins.count(offset.node) == 1);
  CHECK(stand_ins.at(offset.node)->attr<Tensor>("value").data<float>()[0] == 8.0f);
  REQUIRE(stand_ins.count(dense.node) == 1);
  CHECK(stand_ins.at(dense.node)->op == "_FusedMatMul");
  CHECK(fused->absorbed == std::vector<int>{product.node, sum.node});
  const std::vector<int> running = actors::running_nodes(*fused);
  CHECK(std::find(running.begin(), running.end(), product.node) == running.end());
  CHECK(std::find(running.begin(), running.end(), dense.node) != running.end());

  // Unfused, the constants still fold; the chain runs node by node.
  auto plain = region_of({.fuse_ops = false});
  CHECK(plain->stand_ins.size() == 2);
  CHECK(plain->absorbed.empty());
}

TEST_CASE("a composite LSTM's loop, trained, runs each step's gates as one fused node") {
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{-1, 5, 3}, "x");
  auto cell = ops::lstm_cell(b, "lstm", 3, 8, 1.0, /*fused=*/false);
  REQUIRE(cell);
  Output h = ops::dynamic_rnn(b, *cell, x).final_state[1];
  Output loss = ops::reduce_sum(b, ops::square(b, h));
  const int train = ops::minimize(b, loss, ops::Optimizer::sgd(0.1));
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  auto plan = compile_plan(g, {{x}, {loss}, {train}});
  REQUIRE_MESSAGE(plan.ok(), plan.status().to_string());
  std::vector<std::string> fused;
  for (const auto& [id, step] : plan->nodes) {
    if (!step.region) continue;
    for (const auto& [node, stand_in] : step.region->stand_ins) {
      if (stand_in->op == "_FusedMatMul")
        fused.push_back(stand_in->attr<std::string>("fused_from"));
    }
  }
  CHECK(fused == std::vector<std::string>{"rnn/while/MatMul, rnn/while/BiasAdd"});
}
