#include "runtime/remapper.h"

#include <algorithm>

#include "runtime/device.h"
#include "runtime/kernel_registry.h"
#include "runtime/op_registry.h"

namespace troupe::runtime {

namespace {

// Who reads each node's outputs in the plan, counting fetches and control edges too.
struct Readers {
  std::vector<std::vector<int>> of;  // per node id: eligible readers of its output 0, by node
  std::vector<int> others;  // per node id: reads of any other kind (fetch, control, feed, a node
                            // that may not fuse)
};

Readers readers_of(const Graph& g, const std::vector<bool>& runs, const std::vector<bool>& eligible,
                   const std::vector<Output>& fed, const std::vector<Output>& fetches,
                   const std::vector<int>& targets) {
  Readers r{std::vector<std::vector<int>>(g.num_nodes()), std::vector<int>(g.num_nodes(), 0)};
  for (int id = 0; id < g.num_nodes(); ++id) {
    if (!runs[id]) continue;
    const Node& n = g.node(id);
    for (const Output& in : n.inputs) {
      if (in.index == 0 && eligible[id]) {
        r.of[in.node].push_back(id);
      } else {
        ++r.others[in.node];
      }
    }
    for (int c : n.control_inputs) ++r.others[c];
  }
  for (const Output& o : fetches) ++r.others[o.node];
  for (const Output& o : fed) ++r.others[o.node];
  for (int t : targets) ++r.others[t];
  return r;
}

// The one eligible reader of `id`'s output, if it is an `op` reading it as input 0.
int sole_reader(const Graph& g, const Readers& r, int id, const char* op) {
  if (r.others[id] != 0 || r.of[id].size() != 1) return -1;
  const Node& next = g.node(r.of[id][0]);
  if (next.op != op || next.inputs[0] != Output{id, 0}) return -1;
  if (next.device != g.node(id).device) return -1;
  return next.id;
}

// The products that fuse with the BiasAdd (and Relu) after them, and the op that runs them.
struct FusableProduct {
  const char* op;
  const char* fused_op;
};
constexpr FusableProduct kProducts[] = {{"MatMul", "_FusedMatMul"}, {"Conv2D", "_FusedConv2D"}};

std::shared_ptr<const Node> fused_node(const Node& product, const Node& bias_add, const Node& root,
                                       const OpDef* def, bool relu) {
  auto node = std::make_shared<Node>();
  node->id = root.id;
  node->name = root.name;
  node->op = def->name;
  node->def = def;
  node->inputs = {product.inputs[0], product.inputs[1], bias_add.inputs[1]};
  for (const Node* n : {&product, &bias_add, &root}) {
    for (int c : n->control_inputs) {
      auto& cs = node->control_inputs;
      if (std::find(cs.begin(), cs.end(), c) == cs.end()) cs.push_back(c);
    }
  }
  std::string from = product.name + ", " + bias_add.name;
  if (relu) from += ", " + root.name;
  node->attrs = product.attrs;  // transposes, or strides, padding and dilations
  node->attrs["activation"] = std::string(relu ? "Relu" : "");
  node->attrs["fused_from"] = from;
  node->device = root.device;
  node->output_dtypes = root.output_dtypes;
  node->output_shapes = root.output_shapes;
  node->kernel_dtype = product.kernel_dtype;
  return node;
}

}  // namespace

std::vector<Fusion> fuse_product_chains(const Graph& g, const std::vector<bool>& runs,
                                        const std::vector<bool>& eligible,
                                        const std::vector<Output>& fed,
                                        const std::vector<Output>& fetches,
                                        const std::vector<int>& targets) {
  std::vector<Fusion> fusions;
  const Readers readers = readers_of(g, runs, eligible, fed, fetches, targets);
  for (int id = 0; id < g.num_nodes(); ++id) {
    const Node& product = g.node(id);
    if (!eligible[id]) continue;
    const FusableProduct* kind = std::find_if(std::begin(kProducts), std::end(kProducts),
                                              [&](const auto& p) { return product.op == p.op; });
    if (kind == std::end(kProducts)) continue;
    const OpDef* def = find_op(kind->fused_op);
    if (!def ||
        !kernel_registry().find(def->name, kernel_device(product.device), product.kernel_dtype))
      continue;
    const int bias_add = sole_reader(g, readers, id, "BiasAdd");
    if (bias_add < 0) continue;
    const int relu = sole_reader(g, readers, bias_add, "Relu");
    const int root = relu >= 0 ? relu : bias_add;
    Fusion f;
    f.root = root;
    f.absorbed = relu >= 0 ? std::vector<int>{id, bias_add} : std::vector<int>{id};
    f.node = fused_node(product, g.node(bias_add), g.node(root), def, relu >= 0);
    fusions.push_back(std::move(f));
  }
  return fusions;
}

}  // namespace troupe::runtime
