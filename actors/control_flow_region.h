// Control flow in a step plan: the nodes between control-flow ops (a while loop with its body,
// a cond's branches, and whatever lies between a loop and its gradient's loop) form regions,
// each run as one node of the plan on runtime::FrameExecutor, with frames, iterations and dead
// branches as the reference executor has them; the rest of the graph runs on node actors
// around it.
//
//   std::vector<ControlFlowRegion> regions = find_regions(graph, order);  // order: pruned
//   auto runner = RegionRunner::make(graph, regions[0], wanted, allocator, variables);
//   Status s = (*runner)->start(inputs);            // inputs in regions[0].inputs' order
//   while (s.ok() && (*runner)->waiting()) s = (*runner)->resume(run_there(...));
//   if (s.ok()) s = (*runner)->finish(&outputs);
//
// Its values come in and go out as the node's inputs and outputs. Its variables are read and
// written behind the gates of the variables it touches (step_plan.h); a node of another task
// (a ps variable read each iteration) runs there, the run waiting for it (`elsewhere`). Not
// thread-safe.
#pragma once

#include <memory>
#include <vector>

#include "runtime/frame_executor.h"
#include "runtime/graph.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

namespace troupe::actors {

struct ControlFlowRegion {
  std::vector<int> nodes;                // in id order; the first stands for the region in the plan
  std::vector<runtime::Output> inputs;   // values from outside it, in its input slots' order
  std::vector<int> controls;             // nodes outside it that must run first
  std::vector<runtime::Output> outputs;  // every output of its nodes, in order: its outputs
  // What the plan makes of its nodes (step_plan.cc), as outside regions: a node whose value is
  // fixed runs as a constant (still in its frame, dead with its branch), a MatMul or Conv2D
  // chain as one fused node in its last node's place, and the chain's other nodes not at all.
  runtime::FrameExecutor::StandIns stand_ins;
  std::vector<int> absorbed;
  std::vector<int> elsewhere;  // its nodes that run on another task, in id order
};

// The regions of `order` (a pruned run in id order): each connected set of nodes that are
// control-flow ops or lie both downstream and upstream of one.
std::vector<ControlFlowRegion> find_regions(const runtime::Graph& graph,
                                            const std::vector<int>& order);

// The nodes of `region` that run in it: all but the fused chains' absorbed ones.
std::vector<int> running_nodes(const ControlFlowRegion& region);

class RegionRunner {
 public:
  // `wanted`: the region's outputs (positions in region.outputs) that leave it in this plan.
  static runtime::Result<std::unique_ptr<RegionRunner>> make(const runtime::Graph& graph,
                                                             const ControlFlowRegion& region,
                                                             const std::vector<int32_t>& wanted,
                                                             runtime::Allocator* allocator,
                                                             runtime::VariableStore* variables);
  // Starts a run: `inputs` holds the region's inputs first (then its control slots, ignored).
  // It runs until it is done or until a node of another task is to run: waiting() names it,
  // waiting_inputs() holds its inputs, and resume() takes its outputs and runs on. Done, finish()
  // gives `outputs` (one per region output) the wanted ones.
  runtime::Status start(std::vector<runtime::Tensor>& inputs);
  const runtime::Node* waiting() const { return run_ ? run_->waiting() : nullptr; }
  std::vector<runtime::Tensor>& waiting_inputs() { return run_->waiting_inputs(); }
  runtime::Status resume(std::vector<runtime::Tensor> outputs) {
    return run_->resume(std::move(outputs));
  }
  runtime::Status finish(std::vector<runtime::Tensor>* outputs);

 private:
  RegionRunner() = default;
  const ControlFlowRegion* region_ = nullptr;
  std::unique_ptr<runtime::FrameExecutor> frames_;
  std::unique_ptr<runtime::FrameExecutor::Resumable> run_;
  std::vector<std::unique_ptr<runtime::KernelContext>> contexts_;
  std::vector<runtime::FrameExecutor::Kernel> kernels_;
  std::vector<runtime::Output> fetches_;
  std::vector<int32_t> wanted_;
  std::vector<uint64_t> invocations_;
};

}  // namespace troupe::actors
