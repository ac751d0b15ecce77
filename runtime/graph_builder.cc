#include "runtime/graph_builder.h"

#include <algorithm>
#include <memory>

#include "runtime/device.h"
#include "runtime/kernel_registry.h"

namespace troupe::runtime {

void GraphBuilder::record_error(Status s) {
  if (status_.ok() && !s.ok()) status_ = std::move(s);
}

std::string GraphBuilder::unique_name(const std::string& base) {
  std::string prefix;
  for (const std::string& s : scopes_) prefix += s + "/";
  std::string name = prefix + base;
  if (graph_->find(name) < 0) return name;
  for (int i = 1;; ++i) {
    std::string candidate = name + "_" + std::to_string(i);
    if (graph_->find(candidate) < 0) return candidate;
  }
}

ScopeGuard GraphBuilder::name_scope(const std::string& scope) {
  scopes_.push_back(scope);
  return ScopeGuard([this] { scopes_.pop_back(); });
}

ScopeGuard GraphBuilder::device(const std::string& device) {
  Result<DeviceSpec> spec = DeviceSpec::parse(device);
  if (!spec.ok()) record_error(spec.status());
  devices_.push_back(device);
  return ScopeGuard([this] { devices_.pop_back(); });
}

ScopeGuard GraphBuilder::control_dependencies(const std::vector<int>& nodes) {
  control_deps_.push_back(nodes);
  return ScopeGuard([this] { control_deps_.pop_back(); });
}

ScopeGuard GraphBuilder::root_name_scope() {
  auto saved = std::make_shared<std::vector<std::string>>(std::move(scopes_));
  scopes_.clear();
  return ScopeGuard([this, saved] { scopes_ = std::move(*saved); });
}

std::pair<int64_t, int64_t> GraphBuilder::random_seeds(int64_t op_seed) const {
  if (graph_->has_seed()) {
    return {graph_->seed(), op_seed != 0 ? op_seed : graph_->num_nodes() + 1};
  }
  if (op_seed != 0) return {87654321, op_seed};  // TF's default graph seed when only op's is set
  return {0, 0};                                 // nondeterministic
}

int GraphBuilder::add_context(std::unique_ptr<ControlFlowContext> context) {
  contexts_.push_back(std::move(context));
  outer_of_.push_back(current_context_);
  return static_cast<int>(contexts_.size());
}

ScopeGuard GraphBuilder::enter_context(int id) {
  const int saved = current_context_;
  current_context_ = id;
  return ScopeGuard([this, saved] { current_context_ = saved; });
}

void GraphBuilder::set_context(int node, int id) {
  if (node >= static_cast<int>(node_context_.size())) node_context_.resize(node + 1, 0);
  node_context_[node] = id;
}

int GraphBuilder::loop_around(int id) const {
  for (int c = id; c != 0; c = outer_of_[c]) {
    if (contexts_[c - 1]->is_loop()) return c;
  }
  return 0;
}

ScopeGuard GraphBuilder::map_gradient_contexts(std::function<int(int)> map) {
  auto saved = std::make_shared<std::function<int(int)>>(std::move(gradient_context_));
  gradient_context_ = std::move(map);
  return ScopeGuard([this, saved] { gradient_context_ = std::move(*saved); });
}

Output GraphBuilder::capture(Output o) {
  if (!status_.ok() || !o.valid()) return {};
  if (Status s = bring_in(&o); !s.ok()) {
    record_error(s);
    return {};
  }
  return o;
}

Status GraphBuilder::bring_in(Output* in) {
  const int from = context_of(in->node);
  if (from == current_context_) return ok_status();
  std::vector<int> chain;  // the current context and those around it, inside `from`
  int c = current_context_;
  while (c != 0 && c != from) {
    chain.push_back(c);
    c = outer_of_[c];
  }
  if (c != from) {
    // Not built around here: a context on the way may still take it (a loop's gradient).
    auto importer = std::find_if(chain.begin(), chain.end(),
                                 [&](int k) { return context(k).imports_from(from); });
    if (importer == chain.end()) {
      return invalid_argument("'", graph_->output_name(*in), "' was built inside ",
                              context(from).name(), " and is used outside it: use what the ",
                              context(from).name(), " returns");
    }
    chain.erase(importer + 1, chain.end());
  }
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const int inner = *it;
    const int before = graph_->num_nodes();
    Output captured;
    {
      // What capture builds lives outside the context: the control dependencies in force
      // inside it (on a node of the loop's body, say) are not its, as TF's AddValue clears them.
      auto outer = enter_context(outer_of_[inner]);
      std::vector<std::vector<int>> deps = std::move(control_deps_);
      control_deps_.clear();
      captured = context(inner).capture(*this, *in);
      control_deps_ = std::move(deps);
    }
    // What capture built around the context belongs to it; what it built elsewhere stays.
    for (int id = before; id < graph_->num_nodes(); ++id) {
      if (context_of(id) == outer_of_[inner]) set_context(id, inner);
    }
    if (!captured.valid()) return status_.ok() ? internal_error("capture failed") : status_;
    *in = captured;
  }
  return ok_status();
}

namespace {

// Switch, Merge, Enter, Exit, NextIteration: they join contexts, so their inputs stay as given.
bool joins_contexts(const std::string& op) {
  return op == "Switch" || op == "Merge" || op == "Enter" || op == "Exit" || op == "NextIteration";
}

Status check_attrs(const OpDef& def, const std::string& node_name, AttrMap* attrs) {
  for (auto& [name, value] : *attrs) {
    auto it = def.attr_defaults.find(name);
    if (it == def.attr_defaults.end()) it = def.required_attrs.find(name);
    if (it == def.required_attrs.end()) {
      return invalid_argument(def.name, " '", node_name, "': unknown attribute '", name, "'");
    }
    if (it->second.index() != value.index()) {
      return invalid_argument(def.name, " '", node_name, "': attribute '", name, "' must be ",
                              attr_type_name(it->second), ", got ", attr_type_name(value));
    }
  }
  for (const auto& [name, type] : def.required_attrs) {
    if (!attrs->count(name)) {
      return invalid_argument(def.name, " '", node_name, "': missing attribute '", name, "'");
    }
  }
  for (auto& [name, value] : def.attr_defaults) attrs->emplace(name, value);
  return ok_status();
}

}  // namespace

std::vector<Output> GraphBuilder::add_node(const std::string& op, const std::vector<Output>& inputs,
                                           AttrMap attrs, const std::string& name) {
  if (!status_.ok()) return {};
  for (const Output& in : inputs) {
    // An invalid input comes from an earlier failure, which status_ already holds, or from a
    // caller bug; either way no node can be built.
    if (!in.valid() || in.node >= graph_->num_nodes() ||
        in.index >= graph_->node(in.node).num_outputs()) {
      record_error(invalid_argument(op, " '", name.empty() ? op : name,
                                    "': an input is not an output of this graph"));
      return {};
    }
  }
  const OpDef* def = find_op(op);
  if (!def) {
    record_error(not_found("unknown op '", op, "' (is its library linked in?)"));
    return {};
  }
  // Inputs from outside the current control-flow context enter it (a Switch for a cond's
  // branch, an Enter for a loop's frame); an input from inside a context left is an error.
  std::vector<Output> inputs_here = inputs;
  if (!joins_contexts(op)) {
    for (Output& in : inputs_here) {
      if (Status s = bring_in(&in); !s.ok()) {
        record_error(invalid_argument(op, " '", name.empty() ? op : name, "': ", s.message()));
        return {};
      }
    }
  }
  Node node;
  node.name = unique_name(name.empty() ? op : name);
  node.op = op;
  node.def = def;
  node.inputs = inputs_here;
  node.device = devices_.empty() ? std::string() : devices_.back();
  for (const auto& deps : control_deps_) {
    node.control_inputs.insert(node.control_inputs.end(), deps.begin(), deps.end());
  }
  if (current_context_ != 0) {
    ControlFlowContext& here = context(current_context_);
    // Within one frame (a loop's body and the conds inside it) control edges are free.
    const int frame = loop_around(current_context_);
    for (int c : node.control_inputs) {
      if (frame != 0 && loop_around(context_of(c)) != frame) {
        record_error(invalid_argument(op, " '", node.name, "': a control dependency on '",
                                      graph_->node(c).name, "', built outside ",
                                      context(frame).name(),
                                      ", cannot reach into its frame: depend on it before the "
                                      "loop, or pass its value in"));
        return {};
      }
    }
    if (node.inputs.empty() && here.pivot() >= 0) node.control_inputs.push_back(here.pivot());
  }
  int n_in = static_cast<int>(node.inputs.size());
  bool count_ok =
      def->variadic ? n_in >= def->min_inputs : n_in == static_cast<int>(def->inputs.size());
  if (!count_ok) {
    record_error(invalid_argument(op, " '", node.name, "': takes ",
                                  def->variadic ? "at least " : "", def->min_inputs,
                                  " inputs, got ", n_in));
    return {};
  }
  if (Status s = check_attrs(*def, node.name, &attrs); !s.ok()) {
    record_error(s);
    return {};
  }
  node.attrs = std::move(attrs);

  std::vector<DType> in_dtypes;
  std::vector<Shape> in_shapes;
  for (const Output& in : node.inputs) {
    in_dtypes.push_back(graph_->dtype(in));
    in_shapes.push_back(graph_->shape(in));
  }
  InferenceContext ctx(node, in_dtypes, in_shapes);
  if (def->shape_fn) {
    if (Status s = def->shape_fn(ctx); !s.ok()) {
      record_error(s);
      return {};
    }
  }
  node.output_dtypes = ctx.output_dtypes();
  node.output_shapes = ctx.output_shapes();
  // A shape from an attribute, a file or a peer may ask for more than memory: refuse it here,
  // naming the node, before a kernel tries to allocate it.
  for (size_t i = 0; i < node.output_shapes.size(); ++i) {
    if (Status s = check_tensor_size(node.output_dtypes[i], node.output_shapes[i]); !s.ok()) {
      record_error(make_error(s.code(), op, " '", node.name, "': output ", i, ": ", s.message()));
      return {};
    }
  }
  if (def->kernel_dtype_input >= 0 && def->kernel_dtype_input < n_in) {
    node.kernel_dtype = in_dtypes[def->kernel_dtype_input];
  } else if (!node.output_dtypes.empty()) {
    node.kernel_dtype = node.output_dtypes[0];
  } else if (!in_dtypes.empty()) {
    node.kernel_dtype = in_dtypes[0];
  }

  // Refuse a dtype no kernel computes now rather than at the first step. Ops without any kernel
  // of the device (composites, or a build without kernels) are not checked.
  const DeviceType dev = kernel_device(node.device);
  const KernelRegistry& kernels = kernel_registry();
  if (kernels.has_any(op, dev) && !kernels.find(op, dev, node.kernel_dtype)) {
    std::string have;
    for (DType t : kernels.dtypes(op, dev))
      have += std::string(have.empty() ? "" : ", ") + dtype_name(t);
    record_error(invalid_argument(op, " '", node.name, "': no ", device_type_name(dev),
                                  " kernel for dtype ", dtype_name(node.kernel_dtype),
                                  " (have: ", have, ")"));
    return {};
  }

  int id = graph_->add(std::move(node));
  if (current_context_ != 0) set_context(id, current_context_);
  std::vector<Output> outs;
  for (int i = 0; i < graph_->node(id).num_outputs(); ++i) outs.push_back(Output{id, i});
  return outs;
}

Output GraphBuilder::add(const std::string& op, const std::vector<Output>& inputs, AttrMap attrs,
                         const std::string& name) {
  std::vector<Output> outs = add_node(op, inputs, std::move(attrs), name);
  return outs.empty() ? Output{} : outs[0];
}

}  // namespace troupe::runtime
