// Plan-time op fusion, as TF's Grappler remapper does it: a MatMul (Conv2D) whose product goes
// only to a BiasAdd, whose sum goes only to a Relu (or anywhere, without the Relu), runs as one
// _FusedMatMul (_FusedConv2D) node. A runtime that makes a plan runs the fused node in the place
// of the chain's last node (same id, same outputs) and gives the other nodes of the chain nothing
// to do.
//
//   std::vector<bool> runs = ...;       // per node id: the plan runs it (somewhere)
//   std::vector<bool> eligible = ...;   // ... and it may fuse: computed each step, local
//   for (const Fusion& f : fuse_product_chains(graph, runs, eligible, fed, fetches, targets)) {
//     run *f.node where f.root is; skip f.absorbed;
//   }
//
// Each fused node computes the same values, bit for bit, as its chain (see its kernel).
#pragma once

#include <memory>
#include <vector>

#include "runtime/graph.h"

namespace troupe::runtime {

struct Fusion {
  int root = -1;              // the chain's last node: the fused node has its id and outputs
  std::vector<int> absorbed;  // the chain's other nodes
  std::shared_ptr<const Node> node;
};

// `runs[id]`: the plan runs node id, here or on another process, and it reads its inputs then.
// `eligible[id]`: it runs, on this process, and may join a chain (it is no constant, nothing
// folded, no part of a loop that fuses apart). A chain is fused only when all its nodes are
// eligible and placed alike, no value inside it is fed, fetched or read by another node that
// runs, none of its nodes is a target, and a CPU kernel of the fused op takes its dtype.
std::vector<Fusion> fuse_product_chains(const Graph& graph, const std::vector<bool>& runs,
                                        const std::vector<bool>& eligible,
                                        const std::vector<Output>& fed,
                                        const std::vector<Output>& fetches,
                                        const std::vector<int>& targets);

}  // namespace troupe::runtime
