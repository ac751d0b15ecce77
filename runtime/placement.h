// Placement of variables on parameter-server tasks, as TF's replica_device_setter: every
// variable goes to one ps task, and every node that reads or writes it (its assignments, its
// optimizer's update, whose slots therefore live beside it) runs on that task, so that only
// gradients travel up and fresh values down.
//
//   std::vector<std::string> ps = {"/job:ps/task:0", "/job:ps/task:1"};
//   auto where = place_variables(&graph, ps, PsStrategy::kGreedyBytes);
//   // Result<map<variable, task>>; a Session with SessionOptions::cluster runs them there
//
// A node whose device the user set is left where it is (as TF's device setter leaves explicit
// devices), and so are the other nodes of that variable. Not thread-safe: call before the graph
// is shared.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "runtime/graph.h"
#include "runtime/status.h"

namespace troupe::runtime {

enum class PsStrategy {
  kRoundRobin,   // in the order the variables were created (TF's default)
  kGreedyBytes,  // each to the task holding the fewest bytes so far (GreedyLoadBalancingStrategy)
};

// "round_robin" or "greedy"; an error naming the word otherwise.
Result<PsStrategy> parse_ps_strategy(const std::string& name);

// Variable name -> task. An error when `tasks` is empty or a variable's size is unknown.
Result<std::map<std::string, std::string>> place_variables(Graph* graph,
                                                           const std::vector<std::string>& tasks,
                                                           PsStrategy strategy);

}  // namespace troupe::runtime
