#include "runtime/graph.h"

#include <algorithm>
#include <sstream>

#include "runtime/op_registry.h"

namespace troupe::runtime {

int Graph::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? -1 : it->second;
}

const Shape& Graph::shape(Output o) const {
  static const Shape unknown = Shape::unknown();
  return has(o) ? nodes_[o.node].output_shapes[o.index] : unknown;
}

std::string Graph::output_name(Output o) const {
  if (!has(o)) return "<invalid output>";
  return nodes_[o.node].name + ":" + std::to_string(o.index);
}

Output Graph::find_output(const std::string& name) const {
  std::string node_name = name;
  int index = 0;
  auto colon = name.rfind(':');
  if (colon != std::string::npos) {
    node_name = name.substr(0, colon);
    const std::string digits = name.substr(colon + 1);
    if (digits.empty() || digits.size() > 6 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      return Output{};
    }
    index = std::stoi(digits);
  }
  int id = find(node_name);
  if (id < 0 || index >= nodes_[id].num_outputs()) return Output{};
  return Output{id, index};
}

const std::vector<int>& Graph::collection(const std::string& key) const {
  static const std::vector<int> kEmpty;
  auto it = collections_.find(key);
  return it == collections_.end() ? kEmpty : it->second;
}

std::vector<std::string> Graph::collection_keys() const {
  std::vector<std::string> keys;
  for (const auto& [k, v] : collections_) keys.push_back(k);
  return keys;
}

namespace {

bool is_local(const Node& n) {
  auto it = n.attrs.find("local");  // graphs written before local variables lack it
  return it != n.attrs.end() && std::get<bool>(it->second);
}

}  // namespace

std::vector<int> Graph::variables(bool trainable_only) const {
  std::vector<int> ids;
  for (const Node& n : nodes_) {
    if (n.op != "Variable" || is_local(n)) continue;
    if (trainable_only && !n.attr<bool>("trainable")) continue;
    ids.push_back(n.id);
  }
  return ids;
}

std::vector<int> Graph::local_variables() const {
  std::vector<int> ids;
  for (const Node& n : nodes_) {
    if (n.op == "Variable" && is_local(n)) ids.push_back(n.id);
  }
  return ids;
}

Status Graph::freeze_variable(int id, const Tensor& value) {
  if (id < 0 || id >= num_nodes() || nodes_[id].op != "Variable") {
    return invalid_argument("node ", id, " is not a Variable");
  }
  Node& n = nodes_[id];
  if (value.dtype() != n.output_dtypes[0] || !n.output_shapes[0].compatible_with(value.shape())) {
    return invalid_argument("variable '", n.name, "' is ", dtype_name(n.output_dtypes[0]), " ",
                            n.output_shapes[0].to_string(), ", not ", dtype_name(value.dtype()),
                            " ", value.shape().to_string());
  }
  const OpDef* def = find_op("Const");
  if (!def) return not_found("no Const op to freeze variable '", n.name, "' into");
  n.op = "Const";
  n.def = def;
  n.attrs = {{"value", value}};
  n.output_shapes[0] = value.shape();
  n.kernel_dtype = value.dtype();
  return ok_status();
}

Status Graph::add_control_input(int id, int first) {
  if (id < 0 || id >= num_nodes() || first < 0 || first >= id) {
    return invalid_argument("control input: node ", first, " is not a node built before node ", id);
  }
  std::vector<int>& controls = nodes_[id].control_inputs;
  if (std::find(controls.begin(), controls.end(), first) == controls.end()) {
    controls.push_back(first);
  }
  return ok_status();
}

Status Graph::set_back_edge(int merge, int index, Output next) {
  if (merge < 0 || merge >= num_nodes() || nodes_[merge].op != "Merge") {
    return invalid_argument("back edge: node ", merge, " is not a Merge");
  }
  Node& m = nodes_[merge];
  if (index < 0 || index >= static_cast<int>(m.inputs.size())) {
    return invalid_argument("back edge: Merge '", m.name, "' has no input ", index);
  }
  if (!has(next) || nodes_[next.node].op != "NextIteration") {
    return invalid_argument("back edge into Merge '", m.name, "': not a NextIteration's output");
  }
  if (dtype(next) != m.output_dtypes[0]) {
    return invalid_argument("back edge into Merge '", m.name, "': ", dtype_name(dtype(next)),
                            ", where the loop carries ", dtype_name(m.output_dtypes[0]));
  }
  m.inputs[index] = next;
  return ok_status();
}

int Graph::add(Node node) {
  node.id = num_nodes();
  by_name_[node.name] = node.id;
  nodes_.push_back(std::move(node));
  return nodes_.back().id;
}

std::string Graph::debug_string() const {
  std::ostringstream os;
  for (const Node& n : nodes_) {
    os << n.name << " = " << n.op << "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) os << (i ? ", " : "") << output_name(n.inputs[i]);
    for (int c : n.control_inputs) os << ", ^" << nodes_[c].name;
    os << ")";
    for (int i = 0; i < n.num_outputs(); ++i) {
      os << (i ? ", " : " -> ") << dtype_name(n.output_dtypes[i]) << n.output_shapes[i];
    }
    if (!n.device.empty()) os << " @" << n.device;
    os << "\n";
  }
  return os.str();
}

}  // namespace troupe::runtime
