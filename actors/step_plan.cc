#include "actors/step_plan.h"

#include <algorithm>
#include <set>

#include "runtime/constant_folding.h"
#include "runtime/device.h"
#include "runtime/frame_executor.h"
#include "runtime/kernel_registry.h"
#include "runtime/op_registry.h"
#include "runtime/placement.h"
#include "runtime/remapper.h"

namespace troupe::actors {

using runtime::Graph;
using runtime::Output;
using runtime::Tensor;

namespace {

// The VariableGather that runs `gather` of `variable`'s rows where the variable lives.
std::shared_ptr<const runtime::Node> variable_gather(const runtime::Node& gather,
                                                     const runtime::Node& variable) {
  auto node = std::make_shared<runtime::Node>();
  node->id = gather.id;
  node->name = gather.name;
  node->op = "VariableGather";
  node->def = runtime::find_op(node->op);
  node->inputs = {gather.inputs[1]};
  node->control_inputs = gather.control_inputs;
  for (int c : variable.control_inputs) {
    auto& cs = node->control_inputs;
    if (std::find(cs.begin(), cs.end(), c) == cs.end()) cs.push_back(c);
  }
  for (const char* a : {"var", "shape", "dtype"}) node->attrs[a] = variable.attrs.at(a);
  node->device = variable.device;
  node->output_dtypes = gather.output_dtypes;
  node->output_shapes = gather.output_shapes;
  node->kernel_dtype = gather.output_dtypes[0];
  return node;
}

// Gathers of remote variables' rows run where the variables live; a variable nothing else
// reads (and nobody fetches) then has no node of its own.
template <class Remote>
void gather_where_variables_live(const Graph& g, const std::vector<int>& order,
                                 const std::vector<bool>& bound, const std::vector<bool>& reported,
                                 const std::vector<Output>& fed, const Remote& remote,
                                 std::map<int, std::shared_ptr<const runtime::Node>>* fused,
                                 std::vector<bool>* absorbed) {
  std::vector<bool> reads_whole = reported;
  for (int id : order) {
    const runtime::Node& n = g.node(id);
    const int v = bound[id] ? -1 : runtime::gathered_variable(g, n);
    const bool rows =
        v >= 0 && remote(g.node(v)) && std::find(fed.begin(), fed.end(), n.inputs[0]) == fed.end();
    if (rows) (*fused)[id] = variable_gather(n, g.node(v));
    for (size_t i = rows ? 1 : 0; i < n.inputs.size(); ++i) reads_whole[n.inputs[i].node] = true;
    for (int c : n.control_inputs) reads_whole[c] = true;
  }
  for (int id : order) {
    if (g.node(id).op == "Variable" && !reads_whole[id]) (*absorbed)[id] = true;
  }
}

// A step's reads of the variables on one task are one call, made by the first of them; the
// others' consumers and fetches take their values from its further outputs (`moved`). A read
// joins when its variable's gate opens with the others': a trainable variable (the optimizer
// updates them together), or one no write of which in the plan has a call of its own (the
// global step's increment riding on the task's update call; a learning rate or moving average
// the step does not write). The rest keep calls of their own: the global step whose increment
// waits for other tasks' updates (a step that waited for it too would add a round trip),
// variables assigned, reads that are targets or wait on control edges.
template <class Remote>
void batch_reads(const Graph& g, const std::vector<int>& order, const std::vector<bool>& bound,
                 const std::vector<bool>& targeted, const Remote& remote,
                 const std::set<std::string>& written_apart, std::vector<bool>* absorbed,
                 std::map<int, std::vector<int>>* reads_of, std::map<int, Output>* moved) {
  std::map<std::string, int> reader_on;  // task -> the read that makes the call
  for (int id : order) {
    const runtime::Node& n = g.node(id);
    if (n.op != "Variable" || bound[id] || (*absorbed)[id] || targeted[id] || !remote(n) ||
        !n.control_inputs.empty()) {
      continue;
    }
    if (!n.attr<bool>("trainable") && written_apart.count(n.attr<std::string>("var")) != 0) {
      continue;
    }
    auto [reader, first] = reader_on.emplace(n.device, id);
    if (first) continue;
    std::vector<int>& reads = (*reads_of)[reader->second];
    reads.push_back(id);
    (*absorbed)[id] = true;
    (*moved)[id] = Output{reader->second, static_cast<int>(reads.size())};
  }
}

// A step's updates of the variables on one task are one call too, made by the last of them
// (in the graph's order): the others' inputs become its further inputs, and whatever waited
// on them waits on it. An update joins when nothing takes its outputs (it is ordered by
// control edges only, fetched by no one) and it waits on nothing that waits on the call: on
// no other task's update (which would hold this task's call back), on nothing computed from
// an update that joined. The next step's reads wait for every update anyway (their gates).
// Assignments keep calls of their own (they carry no round of synchronous replication).
template <class Remote>
void batch_updates(const Graph& g, const std::vector<int>& order, const std::vector<bool>& bound,
                   const std::vector<bool>& reported, const Remote& remote,
                   std::vector<bool>* absorbed, std::map<int, std::vector<int>>* updates_of,
                   std::map<int, Output>* moved, std::set<std::string>* written_apart) {
  auto is_update = [&](const runtime::Node& n) {
    return runtime::is_update(*n.def) && !bound[n.id] && remote(n);
  };
  std::vector<bool> consumed(g.num_nodes(), false);
  for (int id : order) {
    for (const Output& in : g.node(id).inputs) consumed[in.node] = true;
  }
  std::map<std::string, std::vector<int>> members;  // task -> its updates that joined
  std::vector<std::string> joined(g.num_nodes());   // the task whose call a node joined
  // The tasks whose calls a node waits on, through any path.
  std::vector<std::vector<std::string>> after(g.num_nodes());
  auto waits_on = [&](int id, const std::string& task) {
    const auto& a = after[id];
    return joined[id] == task || std::find(a.begin(), a.end(), task) != a.end();
  };
  for (int id : order) {
    const runtime::Node& n = g.node(id);
    // A bound input (a constant, made under the updates' control dependencies, say) is there
    // before the step: it waits on nothing.
    std::vector<int> deps;
    bool free = true;  // waits on no other task's update, and on no joined update's result
    for (const Output& in : n.inputs) {
      if (bound[in.node]) continue;
      deps.push_back(in.node);
      free = free && !waits_on(in.node, n.device);
    }
    for (int c : n.control_inputs) {
      if (bound[c]) continue;
      deps.push_back(c);
      const bool internal = joined[c] == n.device;
      free = free && (internal || (!waits_on(c, n.device) && !is_update(g.node(c))));
    }
    if (is_update(n) && !consumed[id] && !reported[id] && free) {
      members[n.device].push_back(id);
      joined[id] = n.device;
    }
    for (int d : deps) {
      if (!joined[d].empty() && !waits_on(id, joined[d])) after[id].push_back(joined[d]);
      for (const std::string& t : after[d]) {
        if (!waits_on(id, t)) after[id].push_back(t);
      }
    }
  }
  // The variables some write of which in the plan does not ride on an update call.
  for (int id : order) {
    const runtime::Node& n = g.node(id);
    if (n.def->variable_access != runtime::VariableAccess::kWrite || bound[id]) continue;
    if (joined[id].empty() || members[joined[id]].size() < 2) {
      written_apart->insert(n.attr<std::string>("var"));
    }
  }
  for (auto& [task, ids] : members) {
    if (ids.size() < 2) continue;
    const int caller = ids.back();
    ids.pop_back();
    for (int id : ids) {
      (*absorbed)[id] = true;
      (*moved)[id] = Output{caller, 0};
    }
    (*updates_of)[caller] = std::move(ids);
  }
}

// What the plan makes of the pruned graph before it wires the nodes: values bound into their
// consumers (constants, and nodes whose values are fixed before any step), nodes absorbed into
// others (fused chains, gathers run where their variables live, reads and updates made by one
// call per task), and where an absorbed node's outputs now come from.
struct Rewrites {
  std::map<int, std::vector<Tensor>> folded;
  std::vector<bool> bound, absorbed;
  std::map<int, std::shared_ptr<const runtime::Node>> fused;
  std::map<int, Output> moved;  // a read or update made by another -> where its output comes from
  std::map<int, std::vector<int>> updates_of, reads_of;

  Tensor bound_value(const Graph& g, const Output& o) const {
    auto it = folded.find(o.node);
    return it != folded.end() ? it->second[o.index] : g.node(o.node).attr<Tensor>("value");
  }
  std::map<int, std::shared_ptr<const ControlFlowRegion>> regions;  // by the node standing for it
  Output source_of(Output o) const {
    auto it = moved.find(o.node);
    return it == moved.end() ? o : Output{it->second.node, it->second.index + o.index};
  }
};

// The node a region runs as: the region's first node, with the region's inputs, control inputs
// and outputs.
std::shared_ptr<const runtime::Node> region_node(const Graph& g, const ControlFlowRegion& region) {
  auto node = std::make_shared<runtime::Node>();
  const runtime::Node& first = g.node(region.nodes.front());
  node->id = first.id;
  node->name = first.name;
  node->op = "ControlFlowRegion";
  node->def = runtime::find_op("NoOp");
  node->inputs = region.inputs;
  node->control_inputs = region.controls;
  node->device = first.device;
  for (const Output& o : region.outputs) {
    node->output_dtypes.push_back(g.dtype(o));
    node->output_shapes.push_back(g.shape(o));
  }
  return node;
}

// Each region runs as its first node; the others' outputs come from its outputs.
void run_in_regions(const Graph& g, const std::vector<ControlFlowRegion>& regions, Rewrites* r) {
  for (const ControlFlowRegion& region : regions) {
    const int first = region.nodes.front();
    int base = 0;
    for (int id : region.nodes) {
      if (id != first) {
        r->absorbed[id] = true;
        r->moved[id] = Output{first, base};
      }
      base += g.node(id).num_outputs();
    }
    r->fused[first] = region_node(g, region);
    r->regions[first] = std::make_shared<const ControlFlowRegion>(region);
  }
}

// A node whose value is fixed, as a constant that still takes its inputs: inside a region it
// must come once per iteration of its frame, and be dead on a branch not taken. Null when no
// constant kernel takes its dtype.
std::shared_ptr<const runtime::Node> as_constant(const runtime::Node& n,
                                                 const std::vector<Tensor>& values) {
  if (values.size() != 1 || !runtime::kernel_registry().find(
                                "Const", runtime::kernel_device(n.device), values[0].dtype())) {
    return nullptr;
  }
  auto node = std::make_shared<runtime::Node>(n);
  node->op = "Const";
  node->def = runtime::find_op("Const");
  node->attrs = {{"value", values[0]}, {"dtype", values[0].dtype()}};
  node->kernel_dtype = values[0].dtype();
  return node;
}

// A region's nodes fold and fuse as the others do (`runs`: the plan's nodes that read their
// inputs each step, in regions or not): the values fixed before any step are computed once,
// product chains run as one node.
void rewrite_region(const Graph& g, const std::vector<bool>& runs,
                    const runtime::RunSignature& signature, bool fuse, ControlFlowRegion* region) {
  const auto& there = region->elsewhere;
  for (const auto& [id, values] : runtime::fold_constants(g, region->nodes, signature.fed)) {
    if (std::find(there.begin(), there.end(), id) != there.end()) continue;
    if (auto constant = as_constant(g.node(id), values)) region->stand_ins[id] = constant;
  }
  if (!fuse) return;
  std::vector<bool> eligible(g.num_nodes(), false);
  for (int id : region->nodes) {
    const runtime::Node& n = g.node(id);
    eligible[id] = !runtime::is_control_flow_op(n.op) && n.op != "Const" &&
                   region->stand_ins.count(id) == 0 &&
                   std::find(there.begin(), there.end(), id) == there.end();
  }
  for (runtime::Fusion& f : runtime::fuse_product_chains(g, runs, eligible, signature.fed,
                                                         signature.fetches, signature.targets)) {
    region->absorbed.insert(region->absorbed.end(), f.absorbed.begin(), f.absorbed.end());
    region->stand_ins[f.root] = std::move(f.node);
  }
}

template <class Remote>
Rewrites rewrite(const Graph& g, const std::vector<int>& order,
                 const runtime::RunSignature& signature, const CompileOptions& options,
                 const Remote& remote, std::vector<ControlFlowRegion> regions) {
  const std::vector<Output>& fed = signature.fed;
  Rewrites r;
  // Bound values are neither fetched nor targets: no actor, no message per step. A region's
  // nodes run in it, folded and fused on their own.
  std::vector<bool> in_region(g.num_nodes(), false);
  for (const ControlFlowRegion& region : regions) {
    for (int id : region.nodes) in_region[id] = true;
  }
  std::vector<int> plain;
  for (int id : order) {
    if (!in_region[id]) plain.push_back(id);
  }
  r.folded = runtime::fold_constants(g, plain, fed);
  r.bound.assign(g.num_nodes(), false);
  for (int id : plain) r.bound[id] = g.node(id).op == "Const" || r.folded.count(id) > 0;
  for (const Output& o : signature.fetches) r.bound[o.node] = false;
  for (int t : signature.targets) r.bound[t] = false;
  // Chains that run as one fused node (runtime/remapper.h): its root runs it, the rest idle.
  r.absorbed.assign(g.num_nodes(), false);
  std::vector<bool> runs(g.num_nodes(), false);
  for (int id : order) runs[id] = !r.bound[id];
  if (options.fuse_ops) {
    std::vector<bool> eligible(g.num_nodes(), false);
    for (int id : plain) eligible[id] = !r.bound[id] && !remote(g.node(id));
    for (runtime::Fusion& f : runtime::fuse_product_chains(g, runs, eligible, fed,
                                                           signature.fetches, signature.targets)) {
      for (int a : f.absorbed) r.absorbed[a] = true;
      r.fused[f.root] = std::move(f.node);
    }
  }
  for (ControlFlowRegion& region : regions)
    rewrite_region(g, runs, signature, options.fuse_ops, &region);
  std::vector<bool> reported(g.num_nodes(), false), targeted(g.num_nodes(), false);
  for (const Output& o : signature.fetches) reported[o.node] = true;
  for (int t : signature.targets) reported[t] = targeted[t] = true;
  // A region's nodes of other tasks are its own calls: they join no gather, read or update.
  auto remote_plain = [&](const runtime::Node& n) { return !in_region[n.id] && remote(n); };
  gather_where_variables_live(g, order, r.bound, reported, fed, remote_plain, &r.fused,
                              &r.absorbed);
  std::set<std::string> written_apart;
  batch_updates(g, order, r.bound, reported, remote_plain, &r.absorbed, &r.updates_of, &r.moved,
                &written_apart);
  batch_reads(g, order, r.bound, targeted, remote_plain, written_apart, &r.absorbed, &r.reads_of,
              &r.moved);
  run_in_regions(g, regions, &r);
  return r;
}

// A region's frames live in the actor that runs it: a node of another task inside it (a ps
// variable read or updated each iteration) runs there as a call the region's run waits for,
// which only a node that keeps no frame state can be. The gates of the variables it touches
// hold the region.
template <class Remote>
runtime::Status check_region(const Graph& g, const Remote& remote, ControlFlowRegion* region) {
  for (int id : region->nodes) {
    const runtime::Node& n = g.node(id);
    if (!remote(n)) continue;
    if (runtime::is_control_flow_op(n.op) || n.op == "ControlTrigger" || n.op == "StackPush" ||
        n.op == "StackPop") {
      return runtime::unimplemented(n.op, " '", n.name, "' is placed on ", n.device,
                                    ": a loop's control flow and stacks run where the loop runs");
    }
    region->elsewhere.push_back(id);
  }
  // Its frames, checked now rather than in the actor that runs it.
  return runtime::FrameExecutor::plan(g, region->nodes, region->inputs,
                                      /*outside_controls_ran=*/true)
      .status();
}

int feed_index(const std::vector<Output>& fed, const Output& o) {
  for (size_t i = 0; i < fed.size(); ++i) {
    if (fed[i] == o) return static_cast<int>(i);
  }
  return -1;
}

// Node `id`'s part of the plan: its slots and the edges into them (from producers, feeds or bound
// values), and whether it is a gated read, a source or a writer.
void wire_node(const Graph& g, int id, const Rewrites& r, const std::vector<Output>& fed,
               StepPlan* plan) {
  NodeStep& c = plan->nodes[id];
  auto fusion = r.fused.find(id);
  if (fusion != r.fused.end()) c.fused = fusion->second;
  if (auto region = r.regions.find(id); region != r.regions.end()) c.region = region->second;
  const runtime::Node& n = c.fused ? *c.fused : g.node(id);
  // A call that makes other updates too waits for their inputs after its own, and for their
  // control inputs less the updates it makes.
  std::vector<Output> inputs = n.inputs;
  std::vector<int> controls = n.control_inputs;
  if (auto batch = r.updates_of.find(id); batch != r.updates_of.end()) {
    c.updates = batch->second;
    for (int u : c.updates) {
      const runtime::Node& un = g.node(u);
      inputs.insert(inputs.end(), un.inputs.begin(), un.inputs.end());
      controls.insert(controls.end(), un.control_inputs.begin(), un.control_inputs.end());
    }
    std::vector<int> kept;
    for (int x : controls) {
      const bool made_here = std::find(c.updates.begin(), c.updates.end(), x) != c.updates.end();
      if (!made_here && std::find(kept.begin(), kept.end(), x) == kept.end()) kept.push_back(x);
    }
    controls = std::move(kept);
  }
  c.slots = static_cast<int32_t>(inputs.size() + controls.size());
  int32_t waits = c.slots;
  auto connect = [&](int producer, int32_t output, int32_t slot) {
    plan->nodes[producer].outs.push_back(NodeStep::Edge{id, slot, output});
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int f = feed_index(fed, inputs[i]);
    if (f >= 0) {
      plan->feed_routes[f].push_back({id, static_cast<int32_t>(i)});
    } else if (r.bound[inputs[i].node]) {
      c.bound_inputs.push_back({static_cast<int32_t>(i), r.bound_value(g, inputs[i])});
      --waits;
    } else {
      const Output from = r.source_of(inputs[i]);
      connect(from.node, from.index, static_cast<int32_t>(i));
    }
  }
  for (size_t k = 0; k < controls.size(); ++k) {
    if (r.bound[controls[k]]) {
      --waits;  // a constant is always ready
    } else {
      const int from = r.source_of(Output{controls[k], 0}).node;
      connect(from, -1, static_cast<int32_t>(inputs.size() + k));
    }
  }
  // A read also waits for its gate to open (the session's RunStep), a source for its start.
  c.expected = waits;
  std::vector<std::string> reads, writes;
  auto note = [&](const runtime::Node& x) {
    const runtime::VariableAccess access = x.def->variable_access;
    if (access == runtime::VariableAccess::kNone) return;
    auto& vars = access == runtime::VariableAccess::kRead ? reads : writes;
    const std::string& var = x.attr<std::string>("var");
    if (std::find(vars.begin(), vars.end(), var) == vars.end()) vars.push_back(var);
  };
  if (c.region) {
    for (int m : c.region->nodes) note(g.node(m));
  } else {
    note(n);
    if (auto batch = r.reads_of.find(id); batch != r.reads_of.end()) {
      c.reads = batch->second;
      for (int read : c.reads) note(g.node(read));
    }
    for (int u : c.updates) note(g.node(u));
  }
  for (const std::string& var : reads) {
    plan->gated_reads.push_back({id, var});
    ++c.expected;
  }
  if (reads.empty() && waits == 0) {
    plan->sources.push_back(id);
    ++c.expected;
  }
  if (!writes.empty()) {
    plan->writers[id] = writes;
    c.report = true;  // the session must know when the writes are done
  }
}

}  // namespace

runtime::Result<StepPlan> compile_plan(const Graph& g, const runtime::RunSignature& signature,
                                       const CompileOptions& options) {
  TROUPE_RETURN_IF_ERROR(signature.check(g));
  const std::vector<Output>& fed = signature.fed;
  auto remote = [&](const runtime::Node& n) { return options.remote && options.remote(n); };
  std::vector<int> order = runtime::prune_graph(g, fed, signature.fetches, signature.targets);
  for (int id : order) {
    const runtime::Node& n = g.node(id);
    if (!remote(n)) {
      TROUPE_RETURN_IF_ERROR(runtime::find_kernel(n, runtime::kernel_device(n.device)).status());
    }
  }
  std::vector<ControlFlowRegion> regions = find_regions(g, order);
  for (ControlFlowRegion& region : regions)
    TROUPE_RETURN_IF_ERROR(check_region(g, remote, &region));
  const Rewrites r = rewrite(g, order, signature, options, remote, regions);
  StepPlan plan;
  plan.feed_routes.resize(fed.size());
  for (int id : order) {
    if (!r.bound[id] && !r.absorbed[id]) plan.nodes[id];
  }
  for (int id : order) {
    if (!r.bound[id] && !r.absorbed[id]) wire_node(g, id, r, fed, &plan);
  }
  for (const Output& o : signature.fetches) {
    FetchSource src;
    src.feed = feed_index(fed, o);
    if (src.feed < 0) {
      const Output from = r.source_of(o);  // a read another makes: that one's output
      NodeStep& p = plan.nodes[from.node];
      src.node = from.node;
      src.position = static_cast<int>(p.fetched_outputs.size());
      p.fetched_outputs.push_back(from.index);
      p.report = true;
    }
    plan.fetches.push_back(src);
  }
  for (int t : signature.targets) plan.nodes[r.source_of(Output{t, 0}).node].report = true;
  for (auto& [id, step] : plan.nodes) {
    if (step.report) ++plan.reporters;
    for (size_t i = 0; i < step.outs.size(); ++i) {
      for (size_t j = i + 1; j < step.outs.size(); ++j) {
        if (step.outs[j].output == step.outs[i].output) step.outs[i].last_use = false;
      }
    }
  }
  return plan;
}

}  // namespace troupe::actors
