// The placer: where each node of a graph runs, decided in one pass before any plan is made and
// written into the graph (Node::device), as TF's Placer does; the plan compiler, the session and
// the Estimator only read it. Variables go to parameter-server tasks as TF's
// replica_device_setter puts them: every variable to one ps task, and every node that reads or
// writes it (its assignments, its optimizer's update, whose slots therefore live beside it) on
// that task, so that only gradients travel up and fresh values down. A gather of a variable's
// rows then runs where the variable lives, as TF colocates embedding_lookup's gathers with their
// params, so that only the rows travel.
//
//   std::vector<std::string> ps = {task_name("ps", 0), task_name("ps", 1)};  // "/job:ps/task:0"
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

// Variable name -> task. An error when `tasks` is empty or a variable's size is unknown. Gathers
// are colocated with their variables too (colocate_gathers).
Result<std::map<std::string, std::string>> place_variables(Graph* graph,
                                                           const std::vector<std::string>& tasks,
                                                           PsStrategy strategy);

// Puts each gather of a placed variable's rows (a Gather along dim 0 of its read, placed by no
// one) on the variable's device. A Session with a cluster runs this on its graph, so that a
// graph whose variables the user placed by hand gathers where they live too.
void colocate_gathers(Graph* graph);

// The Variable node whose rows `n` gathers where that variable lives (a Gather along dim 0 of
// its read, on the variable's device), or -1. Where the variable is on another task, the plan
// runs the gather there as a VariableGather (actors/step_plan.h).
int gathered_variable(const Graph& graph, const Node& n);

// How a task is named in devices and in a session's cluster: task_name("ps", 0) is
// "/job:ps/task:0".
std::string task_name(const std::string& job, int index);
// The task part of a device ("/job:ps/task:1/device:cpu:0" -> "/job:ps/task:1", a task left
// unset counting as 0), or "" when the device names no job.
std::string task_of(const std::string& device);

}  // namespace troupe::runtime
