// FrameExecutor: runs a plan whose graph has control flow (ops/control_flow_ops.h) as TF's
// executor does: every value is tagged with a frame and an iteration, and may be dead. Enter
// takes a value into a child frame (made for each iteration of its parent frame that enters
// it), NextIteration to its frame's next iteration, Exit back to the parent; a Switch sends a
// dead tensor down the output it does not pick; a node with a dead input is dead and runs no
// kernel (but a ControlTrigger, which only orders); a Merge forwards the first live input. A
// frame whose work is done while some Exit never sent a live value (a loop on a branch not
// taken) sends dead ones from them.
//
//   auto frames = FrameExecutor::plan(graph, nodes, fed);   // nodes: a pruned run, in id order
//   auto out = frames->run(kernels, feeds, fetches);          // kernels[i]: nodes[i]'s
//
// Executor (executor.h) uses it for runs that need a control-flow op, and runs straight-line
// ones without. Sequential: nodes run one at a time on the calling thread, earliest iteration
// first, so that a loop's iterations push their values on its gradient's stacks (StackPush) in
// order. Not thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/graph.h"
#include "runtime/kernel_registry.h"

namespace troupe::runtime {

// Whether `op` is one of the control-flow ops.
bool is_control_flow_op(const std::string& op);

class FrameExecutor {
 public:
  // The static frames of `nodes` (Enter opens the frame it names, Exit closes it). An error
  // when a value crosses frames other than through Enter and Exit. `outside_controls_ran`: a
  // control input from a node not in `nodes` has run before every run (a part of a plan that
  // waits for it), rather than being an error. `stand_ins`: nodes that run in the place of the
  // graph's node of their id, with their own inputs (a fused chain's node, say).
  using StandIns = std::map<int, std::shared_ptr<const Node>>;
  static Result<std::unique_ptr<FrameExecutor>> plan(const Graph& graph,
                                                     const std::vector<int>& nodes,
                                                     const std::vector<Output>& fed,
                                                     bool outside_controls_ran = false,
                                                     const StandIns& stand_ins = {});
  ~FrameExecutor();

  // The kernel of each node and the context it runs in, in `nodes`' order.
  struct Kernel {
    KernelFn fn = nullptr;
    KernelContext* ctx = nullptr;
  };
  // Runs once; `feeds` in the order of `fed`. A fetch that is dead (on a branch not taken) is
  // an error naming it. `invocations` (by node id) counts each node's runs, iterations included.
  Result<std::vector<Tensor>> run(const std::vector<Kernel>& kernels,
                                  const std::vector<Tensor>& feeds,
                                  const std::vector<Output>& fetches,
                                  std::vector<uint64_t>* invocations) const;

  class Run;
  // A run in parts, for plans with nodes that run elsewhere (a Kernel without fn: a node of
  // another process): it stops at each such node, when it would have run it, and goes on when
  // resume() brings that node's outputs. Nothing else runs meanwhile, so the order of every
  // node's runs (a gradient's stack pushes) is the one a run in one part has.
  //
  //   auto run = frames->start(kernels, feeds, fetches, &invocations);
  //   while (run->waiting()) run->resume(outputs_of(run->waiting(), run->waiting_inputs()));
  //   auto out = run->results();
  class Resumable {
   public:
    ~Resumable();
    // What the run waits for: the node (its stand-in where it has one), or null.
    const Node* waiting() const;
    std::vector<Tensor>& waiting_inputs();
    // The waited node's outputs, checked against its declared dtypes and shapes; then runs on.
    Status resume(std::vector<Tensor> outputs);
    // Once nothing is waited for: the fetches' values, or why the run failed.
    Result<std::vector<Tensor>> results();
    // Whether the run has failed so far.
    const Status& status() const { return status_; }

   private:
    friend class FrameExecutor;
    std::unique_ptr<Run> run_;
    const std::vector<Output>* fetches_ = nullptr;
    Status status_;
  };
  // `kernels`, `fetches` and `invocations` must outlive the run.
  std::unique_ptr<Resumable> start(const std::vector<Kernel>& kernels, std::vector<Tensor> feeds,
                                   const std::vector<Output>& fetches,
                                   std::vector<uint64_t>* invocations) const;

 private:
  struct Item;
  struct Frame;
  explicit FrameExecutor(const Graph& graph);

  const Graph& graph_;
  std::vector<Item> items_;    // in the order of the plan's nodes
  std::vector<int> item_of_;   // node id -> item, -1 when not in the plan
  std::vector<Frame> frames_;  // static frames; 0 is the root
  std::vector<Output> fed_;
  std::vector<std::vector<int>> fed_to_;  // per fed output: the items it feeds, and where
  std::vector<std::vector<int>> fed_at_;
  std::vector<int> sources_;  // items with no inputs at all
  StandIns stand_ins_;        // the items' own, kept alive
};

}  // namespace troupe::runtime
