#include "actors/control_flow_region.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "runtime/device.h"
#include "runtime/kernel_registry.h"

namespace troupe::actors {

using runtime::Graph;
using runtime::Output;
using runtime::Status;
using runtime::Tensor;

namespace {

// Union-find over node ids, for the connected sets of region nodes.
int root(std::vector<int>& parent, int x) {
  while (parent[x] != x) x = parent[x] = parent[parent[x]];
  return x;
}

}  // namespace

std::vector<ControlFlowRegion> find_regions(const Graph& g, const std::vector<int>& order) {
  const int n = g.num_nodes();
  std::vector<bool> in_run(n, false), cf(n, false), down(n, false), up(n, false);
  for (int id : order) {
    in_run[id] = true;
    cf[id] = runtime::is_control_flow_op(g.node(id).op);
  }
  // Edges of the run, data and control alike (back edges too: a loop is one region).
  auto for_producers = [&](int id, auto&& f) {
    for (const Output& in : g.node(id).inputs) {
      if (in_run[in.node]) f(in.node);
    }
    for (int c : g.node(id).control_inputs) {
      if (in_run[c]) f(c);
    }
  };
  for (int id : order) {
    down[id] = cf[id];
    for_producers(id, [&](int p) { down[id] = down[id] || down[p]; });
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (cf[*it]) up[*it] = true;
    if (!up[*it]) continue;
    for_producers(*it, [&](int p) { up[p] = true; });
  }
  // up[] also marks producers upstream of a region through their consumers: a node is in a
  // region when it is both downstream and upstream of a control-flow op.
  std::vector<bool> inside(n, false);
  for (int id : order) inside[id] = cf[id] || (down[id] && up[id]);
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  for (int id : order) {
    if (!inside[id]) continue;
    for_producers(id, [&](int p) {
      if (inside[p]) parent[root(parent, p)] = root(parent, id);
    });
  }
  std::map<int, ControlFlowRegion> by_root;
  for (int id : order) {
    if (inside[id]) by_root[root(parent, id)].nodes.push_back(id);
  }
  std::vector<ControlFlowRegion> regions;
  for (auto& [r, region] : by_root) {
    for (int id : region.nodes) {
      const runtime::Node& node = g.node(id);
      for (const Output& in : node.inputs) {
        if (inside[in.node] && root(parent, in.node) == r) continue;
        auto& ins = region.inputs;
        if (std::find(ins.begin(), ins.end(), in) == ins.end()) ins.push_back(in);
      }
      for (int c : node.control_inputs) {
        if (inside[c] && root(parent, c) == r) continue;
        auto& cs = region.controls;
        if (std::find(cs.begin(), cs.end(), c) == cs.end()) cs.push_back(c);
      }
      for (int i = 0; i < node.num_outputs(); ++i) region.outputs.push_back(Output{id, i});
    }
    regions.push_back(std::move(region));
  }
  std::sort(regions.begin(), regions.end(),
            [](const ControlFlowRegion& a, const ControlFlowRegion& b) {
              return a.nodes.front() < b.nodes.front();
            });
  return regions;
}

std::vector<int> running_nodes(const ControlFlowRegion& region) {
  std::vector<int> nodes;
  for (int id : region.nodes) {
    const auto& gone = region.absorbed;
    if (std::find(gone.begin(), gone.end(), id) == gone.end()) nodes.push_back(id);
  }
  return nodes;
}

runtime::Result<std::unique_ptr<RegionRunner>> RegionRunner::make(
    const Graph& g, const ControlFlowRegion& region, const std::vector<int32_t>& wanted,
    runtime::Allocator* allocator, runtime::VariableStore* variables) {
  std::unique_ptr<RegionRunner> r(new RegionRunner());
  r->region_ = &region;
  const std::vector<int> nodes = running_nodes(region);
  TROUPE_ASSIGN_OR_RETURN(
      r->frames_, runtime::FrameExecutor::plan(g, nodes, region.inputs,
                                               /*outside_controls_ran=*/true, region.stand_ins));
  for (int id : nodes) {
    const auto& there = region.elsewhere;
    if (std::find(there.begin(), there.end(), id) != there.end()) {
      r->kernels_.push_back({});  // the run waits for it
      continue;
    }
    auto stand_in = region.stand_ins.find(id);
    const runtime::Node& node = stand_in != region.stand_ins.end() ? *stand_in->second : g.node(id);
    TROUPE_ASSIGN_OR_RETURN(runtime::KernelFn fn,
                            runtime::find_kernel(node, runtime::kernel_device(node.device)));
    r->contexts_.push_back(std::make_unique<runtime::KernelContext>(node, allocator, variables));
    r->kernels_.push_back({fn, r->contexts_.back().get()});
  }
  r->wanted_ = wanted;
  for (int32_t w : wanted) r->fetches_.push_back(region.outputs[w]);
  r->invocations_.assign(g.num_nodes(), 0);
  return r;
}

Status RegionRunner::start(std::vector<Tensor>& inputs) {
  std::vector<Tensor> feeds(inputs.begin(), inputs.begin() + region_->inputs.size());
  run_ = frames_->start(kernels_, std::move(feeds), fetches_, &invocations_);
  return run_->status();
}

Status RegionRunner::finish(std::vector<Tensor>* outputs) {
  auto got = run_->results();
  run_.reset();
  TROUPE_RETURN_IF_ERROR(got.status());
  outputs->resize(region_->outputs.size());
  for (size_t k = 0; k < wanted_.size(); ++k) (*outputs)[wanted_[k]] = std::move((*got)[k]);
  return runtime::ok_status();
}

}  // namespace troupe::actors
