#include "runtime/executor.h"

#include "runtime/denormal.h"
#include "runtime/frame_executor.h"

#include <algorithm>

namespace troupe::runtime {

Status check_feed(const Graph& graph, Output output, const Tensor& value) {
  if (!output.valid() || output.node >= graph.num_nodes() ||
      output.index >= graph.node(output.node).num_outputs()) {
    return invalid_argument("feed: not an output of this graph");
  }
  // Checked on every step: the output's name is only spelled out for an error.
  auto name = [&] { return graph.output_name(output); };
  if (!value.valid()) return invalid_argument("feed '", name(), "': null tensor");
  if (value.dtype() != graph.dtype(output)) {
    return invalid_argument("feed '", name(), "': expects ", dtype_name(graph.dtype(output)),
                            ", got ", dtype_name(value.dtype()));
  }
  if (!value.shape().compatible_with(graph.shape(output))) {
    return invalid_argument("feed '", name(), "': expects shape ", graph.shape(output), ", got ",
                            value.shape());
  }
  return ok_status();
}

Status check_outputs(const Node& node, const Tensor* values, size_t count) {
  if (count != static_cast<size_t>(node.num_outputs())) {
    return data_loss(node.op, " '", node.name, "' came back with ", count, " outputs for ",
                     node.num_outputs());
  }
  for (size_t i = 0; i < count; ++i) {
    const Tensor& t = values[i];
    if (!t.valid() || t.dtype() != node.output_dtypes[i] ||
        !t.shape().compatible_with(node.output_shapes[i])) {
      return data_loss(node.op, " '", node.name, "' came back with output ", i, " ",
                       t.valid() ? dtype_name(t.dtype()) : "null", t.shape(),
                       " where the graph declares ", dtype_name(node.output_dtypes[i]),
                       node.output_shapes[i]);
    }
  }
  return ok_status();
}

std::string RunSignature::key() const {
  std::string key;
  for (const Output& o : fed) key += std::to_string(o.node) + ":" + std::to_string(o.index) + ",";
  key += "|";
  for (const Output& o : fetches)
    key += std::to_string(o.node) + ":" + std::to_string(o.index) + ",";
  key += "|";
  for (int t : targets) key += std::to_string(t) + ",";
  return key;
}

Status RunSignature::check(const Graph& graph) const {
  for (const Output& o : fetches) {
    if (!o.valid() || o.node >= graph.num_nodes() || o.index >= graph.node(o.node).num_outputs()) {
      return invalid_argument("fetch: not an output of this graph");
    }
  }
  for (int t : targets) {
    if (t < 0 || t >= graph.num_nodes()) {
      return invalid_argument("target: node ", t, " is not in this graph");
    }
  }
  return ok_status();
}

std::vector<int> prune_graph(const Graph& graph, const std::vector<Output>& fed,
                             const std::vector<Output>& fetches, const std::vector<int>& targets) {
  const int n = graph.num_nodes();
  std::vector<bool> needed(n, false);
  std::vector<int> stack;
  auto fed_output = [&](const Output& o) {
    return std::find(fed.begin(), fed.end(), o) != fed.end();
  };
  for (const Output& f : fetches) {
    if (!fed_output(f)) stack.push_back(f.node);
  }
  for (int t : targets) stack.push_back(t);
  while (!stack.empty()) {
    int id = stack.back();
    stack.pop_back();
    if (needed[id]) continue;
    needed[id] = true;
    const Node& node = graph.node(id);
    for (const Output& in : node.inputs) {
      if (!fed_output(in)) stack.push_back(in.node);
    }
    for (int c : node.control_inputs) stack.push_back(c);
  }
  std::vector<int> order;
  for (int id = 0; id < n; ++id) {
    if (needed[id]) order.push_back(id);
  }
  return order;
}

// A compiled run: which kernel each node runs, where its inputs come from, and when each value
// can be dropped (so that a kernel can reuse a buffer nobody else needs).
struct Executor::Plan {
  struct Step {
    int node;
    KernelFn kernel;
    std::unique_ptr<KernelContext> ctx;
    std::vector<int> input_slots;   // value slot of each input
    std::vector<int> output_slots;  // value slot of each output (-1: unused)
  };
  std::vector<Step> steps;
  int num_slots = 0;
  std::vector<int> feed_slots;
  std::vector<int> fetch_slots;
  std::vector<int> uses;  // per slot: consumers in steps + fetches
  // With control flow, the steps run as frames let them (frame_executor.h), not in order.
  std::unique_ptr<FrameExecutor> frames;
  std::vector<FrameExecutor::Kernel> frame_kernels;
};

Executor::Executor(const Graph& graph, ExecutorOptions options) : graph_(graph), options_(options) {
  if (!options_.allocator) options_.allocator = cpu_allocator();
}

Executor::~Executor() = default;

Result<Executor::Plan*> Executor::plan_for(const RunSignature& signature) {
  if (last_plan_ && signature == last_signature_) return last_plan_;
  const std::string key = signature.key();
  auto it = plans_.find(key);
  if (it != plans_.end()) {
    last_signature_ = signature;
    return last_plan_ = it->second.get();
  }
  TROUPE_RETURN_IF_ERROR(signature.check(graph_));
  const std::vector<Output>& fed = signature.fed;
  const std::vector<Output>& fetches = signature.fetches;
  const std::vector<int>& targets = signature.targets;

  auto plan = std::make_unique<Plan>();
  std::map<Output, int> slot_of;
  auto slot = [&](Output o) {
    auto [pos, inserted] = slot_of.emplace(o, plan->num_slots);
    if (inserted) ++plan->num_slots;
    return pos->second;
  };
  for (const Output& o : fed) plan->feed_slots.push_back(slot(o));
  const std::vector<int> order = prune_graph(graph_, fed, fetches, targets);
  for (int id : order) {
    const Node& node = graph_.node(id);
    Plan::Step step;
    step.node = id;
    TROUPE_ASSIGN_OR_RETURN(step.kernel, find_kernel(node, options_.device));
    step.ctx = std::make_unique<KernelContext>(node, options_.allocator, options_.variables);
    for (const Output& in : node.inputs) step.input_slots.push_back(slot(in));
    for (int i = 0; i < node.num_outputs(); ++i) step.output_slots.push_back(slot(Output{id, i}));
    plan->steps.push_back(std::move(step));
  }
  for (const Output& o : fetches) plan->fetch_slots.push_back(slot(o));
  if (std::any_of(order.begin(), order.end(),
                  [&](int id) { return is_control_flow_op(graph_.node(id).op); })) {
    TROUPE_ASSIGN_OR_RETURN(plan->frames, FrameExecutor::plan(graph_, order, fed));
    for (Plan::Step& s : plan->steps) plan->frame_kernels.push_back({s.kernel, s.ctx.get()});
  }
  plan->uses.assign(plan->num_slots, 0);
  for (const Plan::Step& s : plan->steps) {
    for (int in : s.input_slots) ++plan->uses[in];
  }
  for (int f : plan->fetch_slots) ++plan->uses[f];
  if (invocations_.size() < static_cast<size_t>(graph_.num_nodes())) {
    invocations_.resize(graph_.num_nodes(), 0);
  }
  last_signature_ = signature;
  last_plan_ = plan.get();
  plans_[key] = std::move(plan);
  return last_plan_;
}

Result<std::vector<Tensor>> Executor::run(const FeedList& feeds, const std::vector<Output>& fetches,
                                          const std::vector<int>& targets) {
  for (const auto& [o, t] : feeds) TROUPE_RETURN_IF_ERROR(check_feed(graph_, o, t));
  RunSignature signature{{}, fetches, targets};
  for (const auto& [o, t] : feeds) signature.fed.push_back(o);
  TROUPE_ASSIGN_OR_RETURN(Plan * plan, plan_for(signature));

  ScopedFlushDenormal flush;
  if (plan->frames) {
    std::vector<Tensor> fed_values;
    for (const auto& [o, t] : feeds) fed_values.push_back(t);
    return plan->frames->run(plan->frame_kernels, fed_values, fetches, &invocations_);
  }
  std::vector<Tensor> values(plan->num_slots);
  std::vector<int> remaining = plan->uses;
  for (size_t i = 0; i < feeds.size(); ++i) values[plan->feed_slots[i]] = feeds[i].second;

  for (Plan::Step& step : plan->steps) {
    KernelContext& ctx = *step.ctx;
    std::vector<Tensor>& inputs = ctx.inputs();
    inputs.resize(step.input_slots.size());
    for (size_t i = 0; i < step.input_slots.size(); ++i) {
      int s = step.input_slots[i];
      // The last reader takes the value, so that its kernel may reuse the buffer in place.
      inputs[i] = --remaining[s] == 0 ? std::move(values[s]) : values[s];
    }
    ctx.set_invocation(invocations_[step.node]++);
    Status status = run_kernel(step.kernel, ctx);
    inputs.clear();
    if (!status.ok()) {
      for (Tensor& t : ctx.outputs()) t = Tensor();
      return status;
    }
    std::vector<Tensor>& outs = ctx.outputs();
    for (size_t i = 0; i < step.output_slots.size(); ++i) {
      if (!outs[i].valid()) {
        const Node& n = graph_.node(step.node);
        return internal_error(n.op, " '", n.name, "': kernel produced no output ", i);
      }
      int s = step.output_slots[i];
      if (remaining[s] > 0) values[s] = std::move(outs[i]);
      outs[i] = Tensor();
    }
  }
  std::vector<Tensor> result;
  for (int s : plan->fetch_slots) result.push_back(values[s]);
  return result;
}

}  // namespace troupe::runtime
