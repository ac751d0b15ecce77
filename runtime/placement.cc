#include "runtime/placement.h"

#include <algorithm>

#include "runtime/device.h"
#include "runtime/op_registry.h"

namespace troupe::runtime {

Result<PsStrategy> parse_ps_strategy(const std::string& name) {
  if (name == "round_robin") return PsStrategy::kRoundRobin;
  if (name == "greedy") return PsStrategy::kGreedyBytes;
  return invalid_argument("ps strategy '", name, "' is neither round_robin nor greedy");
}

namespace {

// The variable a node reads or writes, or "" for the rest.
const std::string* variable_of(const Node& n) {
  if (n.op != "Variable" && n.def->variable_access == VariableAccess::kNone) return nullptr;
  auto it = n.attrs.find("var");
  if (it == n.attrs.end()) return nullptr;
  const std::string* name = std::get_if<std::string>(&it->second);
  return name != nullptr && !name->empty() ? name : nullptr;
}

}  // namespace

Result<std::map<std::string, std::string>> place_variables(Graph* graph,
                                                           const std::vector<std::string>& tasks,
                                                           PsStrategy strategy) {
  if (tasks.empty()) return invalid_argument("placing variables: no ps task");
  std::map<std::string, std::string> where;
  std::vector<int64_t> bytes(tasks.size(), 0);
  size_t next = 0;
  for (int id : graph->variables()) {
    const Node& v = graph->node(id);
    const std::string* name = variable_of(v);
    if (name == nullptr || where.count(*name)) continue;
    if (!v.device.empty()) {
      where[*name] = v.device;
      continue;
    }
    int64_t elements = 0;
    if (!v.output_shapes[0].checked_num_elements(&elements) || elements < 0) {
      return invalid_argument("placing variables: '", v.name, "' has shape ",
                              v.output_shapes[0].to_string(), ", not a fixed size");
    }
    size_t task = 0;
    if (strategy == PsStrategy::kRoundRobin) {
      task = next++ % tasks.size();
    } else {
      task = static_cast<size_t>(std::min_element(bytes.begin(), bytes.end()) - bytes.begin());
    }
    bytes[task] += elements * static_cast<int64_t>(dtype_size(v.output_dtypes[0]));
    where[*name] = tasks[task];
  }
  for (int id = 0; id < graph->num_nodes(); ++id) {
    const Node& n = graph->node(id);
    const std::string* name = variable_of(n);
    if (name == nullptr || !n.device.empty()) continue;
    auto it = where.find(*name);
    if (it != where.end()) graph->set_device(id, it->second);
  }
  colocate_gathers(graph);
  return where;
}

void colocate_gathers(Graph* graph) {
  for (int id = 0; id < graph->num_nodes(); ++id) {
    const Node& n = graph->node(id);
    if (n.op != "Gather" || !n.device.empty() || n.inputs.size() != 2 ||
        n.attr<int64_t>("axis") != 0) {
      continue;
    }
    const Node& v = graph->node(n.inputs[0].node);
    if (v.op == "Variable" && !v.device.empty()) graph->set_device(id, v.device);
  }
}

int gathered_variable(const Graph& graph, const Node& n) {
  if (n.op != "Gather" || n.inputs.size() != 2 || n.attr<int64_t>("axis") != 0) return -1;
  const Node& v = graph.node(n.inputs[0].node);
  return v.op == "Variable" && v.device == n.device ? v.id : -1;
}

std::string task_name(const std::string& job, int index) {
  return "/job:" + job + "/task:" + std::to_string(index);
}

std::string task_of(const std::string& device) {
  if (device.empty()) return "";
  Result<DeviceSpec> spec = DeviceSpec::parse(device);
  if (!spec.ok() || spec->job.empty()) return "";
  return task_name(spec->job, spec->task < 0 ? 0 : spec->task);
}

}  // namespace troupe::runtime
