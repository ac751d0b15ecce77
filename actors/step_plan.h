// The plan compiler: what each node of a graph does in the steps of one signature (its feeds,
// fetches and targets): the pruned subgraph, constants and pre-step values folded into their
// consumers, MatMul/Conv2D chains fused (runtime/remapper.h), gathers of a remote variable's rows
// run where it lives, a step's reads of one task's variables made in one call and its updates
// in another, the edges between the nodes that remain, which nodes start a step, which wait on
// a variable's earlier writes, and where each fetch comes from. Nodes that run on another task
// (a parameter server) get no local kernel and no fusion. Control flow (cond, while_loop and
// their gradients) runs in regions (actors/control_flow_region.h), one node of the plan each. It
// sends nothing and spawns nothing: the session actor turns a StepPlan into one NodePlan message
// per node, credits and actor handles included.
//
//   CompileOptions o{.fuse_ops = true, .remote = [&](const Node& n) { return on_ps(n); }};
//   Result<StepPlan> plan = compile_plan(graph, {fed, fetches, targets}, o);
//
// Pure: thread-safe for graphs nobody changes meanwhile.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actors/control_flow_region.h"
#include "runtime/executor.h"
#include "runtime/graph.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

namespace troupe::actors {

struct CompileOptions {
  bool fuse_ops = true;
  // Whether a node runs on another task; null: every node runs here.
  std::function<bool(const runtime::Node&)> remote;
};

// One node's part in a plan.
struct NodeStep {
  struct Edge {
    int consumer = -1;
    int32_t input = 0;     // slot at the consumer
    int32_t output = -1;   // which output of this node (-1: a control edge)
    bool last_use = true;  // no later edge sends this output: the handle moves, not copies
  };
  int32_t slots = 0;  // input slots: data inputs, then control inputs
  // Messages per step: the slots not bound to constants, and the session's RunStep for a source
  // or a variable's read (sent when its gate opens).
  int32_t expected = 0;
  std::vector<Edge> outs;
  std::vector<std::pair<int32_t, runtime::Tensor>> bound_inputs;  // constants, by slot
  std::vector<int32_t> fetched_outputs;        // reported to the session, in the fetches' order
  bool report = false;                         // a fetch or a target: the session hears when done
  std::shared_ptr<const runtime::Node> fused;  // the chain it runs instead of its own node
  // The control-flow region it runs (its `fused` node then has the region's inputs, control
  // inputs and outputs).
  std::shared_ptr<const ControlFlowRegion> region;
  // Variables on the same task whose reads this node's call makes too (it is a read there):
  // their values are its further outputs, 1, 2, ...
  std::vector<int> reads;
  // Updates on the same task this node's call makes too, after its own (it is an update
  // there): their inputs are its further inputs, after its own, in this order.
  std::vector<int> updates;
};

// Where a fetch comes from: a fed value, or output `position` of a reporting node's report.
struct FetchSource {
  int feed = -1;
  int node = -1;
  int position = 0;
};

struct StepPlan {
  std::map<int, NodeStep> nodes;  // the nodes that take part, by id (one actor each)
  std::vector<std::vector<std::pair<int, int32_t>>> feed_routes;  // per feed: (node, slot)
  std::vector<int> sources;                                       // nodes with nothing to wait for
  // Reads of a variable wait for its writes of every earlier step (no stale weights).
  std::vector<std::pair<int, std::string>> gated_reads;  // (Variable node, variable)
  std::map<int, std::vector<std::string>> writers;       // writer node -> the variables
  std::vector<FetchSource> fetches;
  int reporters = 0;
};

// An error names what does not fit: a fetch or feed not in the graph, a node with no kernel.
runtime::Result<StepPlan> compile_plan(const runtime::Graph& graph,
                                       const runtime::RunSignature& signature,
                                       const CompileOptions& options = {});

}  // namespace troupe::actors
