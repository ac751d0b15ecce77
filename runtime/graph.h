// Graph: the dataflow graph of a model, as TensorFlow 1.x has it. Nodes are added only through a
// GraphBuilder, which checks them; a node refers only to nodes added before it, so node ids are
// already a topological order, but for one kind of edge: a loop's back edge, from a
// NextIteration to the Merge at the top of its loop (ops/control_flow_ops.h), set once the
// loop's body is built (set_back_edge). is_back_edge() says which edges those are.
//
//   Graph g;
//   GraphBuilder b(&g);
//   Output x = ops::placeholder(b, DType::kFloat32, Shape{-1, 784}, "x");
//   g.num_nodes();  g.node(x.node).name;  g.shape(x);   // [?,784]
//
// Ownership: a Graph owns its nodes; Outputs are plain (node id, output index) pairs.
// Thread-safety: build from one thread; a finished graph may be read from many.
#pragma once

#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/attr.h"
#include "runtime/dtype.h"
#include "runtime/shape.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

namespace troupe::runtime {

struct OpDef;

// One output of one node: what an edge carries.
struct Output {
  int node = -1;
  int index = 0;
  bool valid() const { return node >= 0; }
  bool operator==(const Output& o) const { return node == o.node && index == o.index; }
  bool operator!=(const Output& o) const { return !(*this == o); }
  bool operator<(const Output& o) const { return node != o.node ? node < o.node : index < o.index; }
};

struct Node {
  int id = -1;
  std::string name;  // unique in the graph, with its name scopes: "dense/MatMul"
  std::string op;
  const OpDef* def = nullptr;
  std::vector<Output> inputs;
  std::vector<int> control_inputs;  // nodes that must run first in the same step
  AttrMap attrs;
  std::string device;  // placement as written by the user, e.g. "/job:ps/task:0"
  std::vector<DType> output_dtypes;
  std::vector<Shape> output_shapes;      // as far as known when the graph was built
  DType kernel_dtype = DType::kInvalid;  // the dtype its kernel is looked up by

  template <class T>
  const T& attr(const std::string& name) const {
    return attr_get<T>(attrs, name);
  }
  int num_outputs() const { return static_cast<int>(output_dtypes.size()); }
};

class Graph {
 public:
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  const Node& node(int id) const { return nodes_[id]; }
  // A deque, so that references to nodes stay valid while more are added (gradient functions
  // add nodes while they read the node they differentiate).
  const std::deque<Node>& nodes() const { return nodes_; }
  // -1 when there is no node of that name.
  int find(const std::string& name) const;
  // Whether `o` is an output of a node of this graph.
  bool has(Output o) const {
    return o.node >= 0 && o.node < num_nodes() && o.index >= 0 &&
           o.index < nodes_[o.node].num_outputs();
  }
  // kInvalid and an unknown shape for an output the graph does not have: a builder that failed
  // hands out invalid Outputs, and its error, not a crash, must reach the user.
  DType dtype(Output o) const {
    return has(o) ? nodes_[o.node].output_dtypes[o.index] : DType::kInvalid;
  }
  const Shape& shape(Output o) const;
  std::string output_name(Output o) const;  // "dense/MatMul:0"
  // Parses "name" or "name:index"; an invalid Output when there is no such output.
  Output find_output(const std::string& name) const;

  // The graph-level random seed; op seeds derive from it (tf.set_random_seed).
  bool has_seed() const { return has_seed_; }
  int64_t seed() const { return seed_; }
  void set_seed(int64_t seed) {
    seed_ = seed;
    has_seed_ = true;
  }

  // Named lists of node ids, as TF's collections ("variable_initializers", "summaries").
  void add_to_collection(const std::string& key, int node) { collections_[key].push_back(node); }
  const std::vector<int>& collection(const std::string& key) const;
  std::vector<std::string> collection_keys() const;

  // The model's Variable nodes, in the order they were created; only `trainable` ones with the
  // flag. Local variables (a streaming metric's counts) are not among them.
  std::vector<int> variables(bool trainable_only = false) const;
  // Local Variable nodes (ops::local_variable): placed with the session that runs them, never
  // saved, set anew by their own initializer.
  std::vector<int> local_variables() const;

  std::string debug_string() const;

  // Places a node (placement.h), before the graph is shared with sessions.
  void set_device(int id, std::string device) { nodes_[id].device = std::move(device); }
  // Sets a node's attribute, before the graph is shared with sessions (a loaded export's
  // batch_invariant products, estimators/export/predictor.h).
  void set_attr(int id, const std::string& name, AttrValue value) {
    nodes_[id].attrs[name] = std::move(value);
  }
  // Makes node `id` wait in each step for node `first`, built before it (a control input),
  // before the graph is shared with sessions: a synchronous replica's updates wait for its read
  // of the global step, whose value they carry (estimators/model_graph.cc). An error when
  // either is no node of the graph or `first` was not built before `id`.
  Status add_control_input(int id, int first);
  // Turns Variable node `id` into a Const holding `value`, as TF's
  // convert_variables_to_constants does, before the graph is shared with sessions: a loaded
  // export's weights, which nothing writes, then bind into their readers like any constant,
  // with no node to run and no message per step. An error when the node is not a Variable or
  // the value's dtype or shape is not the variable's.
  Status freeze_variable(int id, const Tensor& value);

  // Makes input `index` of Merge node `merge` the output of NextIteration node `next`: the back
  // edge that closes a while loop, added after the loop's body. An error unless those are the
  // ops, and the dtypes agree.
  Status set_back_edge(int merge, int index, Output next);
  // Whether input `index` of `n` is a loop's back edge (from a later node).
  bool is_back_edge(const Node& n, int index) const { return n.inputs[index].node >= n.id; }

 private:
  friend class GraphBuilder;
  int add(Node node);

  std::deque<Node> nodes_;
  std::unordered_map<std::string, int> by_name_;
  std::map<std::string, std::vector<int>> collections_;
  int64_t seed_ = 0;
  bool has_seed_ = false;
};

}  // namespace troupe::runtime
