// Executor: runs a graph's nodes in order on the calling thread, kernel after kernel. It is the
// reference semantics the actor runtime must reproduce, the engine of op tests, and the plain
// loop benchmarks compare node actors against.
//
//   VariableStore vars;
//   Executor exec(graph, {.variables = &vars});
//   Result<std::vector<Tensor>> out = exec.run({{x, batch}}, {loss}, {train_op.node});
//
// Only the nodes the fetches and targets need run; fed outputs cut the graph there. Plans are
// cached per (feeds, fetches, targets). An error names the node and op that failed; the executor
// stays usable. Not thread-safe: one run at a time.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/graph.h"
#include "runtime/kernel_registry.h"

namespace troupe::runtime {

struct ExecutorOptions {
  Allocator* allocator = nullptr;  // nullptr: cpu_allocator()
  VariableStore* variables = nullptr;
  DeviceType device = DeviceType::kCpu;
};

using FeedList = std::vector<std::pair<Output, Tensor>>;

// What one run asks for: the outputs it feeds, those it fetches, the nodes it targets. Executors
// and sessions cache a plan per signature, and find the one they used last without a map
// lookup, since a training loop asks for the same thing every step.
struct RunSignature {
  std::vector<Output> fed;
  std::vector<Output> fetches;
  std::vector<int> targets;

  bool operator==(const RunSignature& o) const {
    return fed == o.fed && fetches == o.fetches && targets == o.targets;
  }
  std::string key() const;
  // An error when a fetch or a target is not in `graph`.
  Status check(const Graph& graph) const;
};

// Checks a fed value against what the graph declares for that output.
Status check_feed(const Graph& graph, Output output, const Tensor& value);
// Checks the `count` outputs of `node` from `values`, computed elsewhere (by another process),
// against the dtypes and shapes the graph declares: they are trusted no more than a feed.
Status check_outputs(const Node& node, const Tensor* values, size_t count);

// The nodes that must run to compute `fetches` and `targets` with `fed` outputs given, in
// topological (id) order. Fails if a needed node's op is unknown to the graph.
std::vector<int> prune_graph(const Graph& graph, const std::vector<Output>& fed,
                             const std::vector<Output>& fetches, const std::vector<int>& targets);

class Executor {
 public:
  explicit Executor(const Graph& graph, ExecutorOptions options = {});
  ~Executor();

  Result<std::vector<Tensor>> run(const FeedList& feeds, const std::vector<Output>& fetches,
                                  const std::vector<int>& targets = {});

 private:
  struct Plan;
  Result<Plan*> plan_for(const RunSignature& signature);

  const Graph& graph_;
  ExecutorOptions options_;
  std::map<std::string, std::unique_ptr<Plan>> plans_;
  RunSignature last_signature_;
  Plan* last_plan_ = nullptr;
  std::vector<uint64_t> invocations_;  // per node id
};

}  // namespace troupe::runtime
