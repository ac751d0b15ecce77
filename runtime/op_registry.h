// The op registry: what an op is (inputs, attributes with defaults, shape function, gradient),
// independent of any kernel that computes it. Ops register once, in ops/, with one macro:
//
//   TROUPE_REGISTER_OP(Square)
//       .input("x")
//       .output("y")
//       .shape_fn(shape_fns::unchanged)
//       .gradient([](GraphBuilder& b, const Node& n, const std::vector<Output>& dy) {
//         // y = x^2; dy/dx = 2x
//         return std::vector<Output>{mul(b, dy[0], mul(b, n.inputs[0], scalar_like(b, 2.0, ...)))};
//       })
//       .doc("y = x * x, elementwise");
//
// An op with no derivative says so with .no_gradient(); a self-test checks every op says one or
// the other. Registration happens during static initialisation; afterwards the registry is
// read-only and thread-safe.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "runtime/attr.h"
#include "runtime/graph.h"
#include "runtime/status.h"

namespace troupe::runtime {

class GraphBuilder;

// What a shape function sees: the inputs' dtypes and static shapes, and the node's attributes.
class InferenceContext {
 public:
  InferenceContext(const Node& node, std::vector<DType> in_dtypes, std::vector<Shape> in_shapes)
      : node_(node), in_dtypes_(std::move(in_dtypes)), in_shapes_(std::move(in_shapes)) {}

  int num_inputs() const { return static_cast<int>(in_dtypes_.size()); }
  DType input_dtype(int i) const { return in_dtypes_[i]; }
  const Shape& input_shape(int i) const { return in_shapes_[i]; }
  template <class T>
  const T& attr(const std::string& name) const {
    return node_.attr<T>(name);
  }
  const Node& node() const { return node_; }

  void set_output(int i, DType dtype, Shape shape);
  int num_outputs() const { return static_cast<int>(out_dtypes_.size()); }
  const std::vector<DType>& output_dtypes() const { return out_dtypes_; }
  const std::vector<Shape>& output_shapes() const { return out_shapes_; }

  // An error that names the node: "MatMul 'dense/MatMul': <what>".
  template <class... Args>
  Status error(const Args&... args) const {
    return invalid_argument(node_.op, " '", node_.name, "': ", args...);
  }
  // Checks that input i is one of the floating dtypes, or returns that error.
  Status expect_floating(int i) const;
  Status expect_same_dtype(int i, int j) const;
  Status expect_rank(int i, int rank) const;

 private:
  const Node& node_;
  std::vector<DType> in_dtypes_;
  std::vector<Shape> in_shapes_;
  std::vector<DType> out_dtypes_;
  std::vector<Shape> out_shapes_;
};

using ShapeFn = std::function<Status(InferenceContext&)>;
enum class VariableAccess { kNone, kRead, kWrite };
// Returns one gradient per input of `node` (an invalid Output where an input gets none), given the
// gradients flowing into its outputs (dy[i] is valid for every output).
using GradFn = std::function<std::vector<Output>(GraphBuilder&, const Node& node,
                                                 const std::vector<Output>& dy)>;

struct OpDef {
  std::string name;
  std::vector<std::string> inputs;  // names; with `variadic`, the last one repeats
  bool variadic = false;
  int min_inputs = 0;
  std::vector<std::string> outputs;  // documentation; the shape function sets the count
  AttrMap attr_defaults;
  // No default: the builder must be given these, of the type of the value named here (a graph
  // from a file or a peer may hold any type; a kernel reads its attributes unchecked).
  AttrMap required_attrs;
  ShapeFn shape_fn;
  GradFn grad_fn;
  bool no_gradient = false;  // not differentiable: its inputs get no gradient through it
  // Whether it reads or writes the variable named by its "var" attribute; runtimes order such
  // nodes across steps by this (a read waits for earlier steps' writes).
  VariableAccess variable_access = VariableAccess::kNone;
  int kernel_dtype_input = -1;  // kernels are keyed by this input's dtype; -1: output 0's dtype
  std::string doc;
};

// A training update of a variable (an optimizer's Apply*, AssignAdd, a moving average's): a
// write other than Assign, which initialises or restores it. Synchronous rounds aggregate these.
inline bool is_update(const OpDef& def) {
  return def.variable_access == VariableAccess::kWrite && def.name != "Assign";
}

class OpDefBuilder {
 public:
  explicit OpDefBuilder(const char* name) { def_.name = name; }
  OpDefBuilder&& input(const char* name) &&;
  // Any number (at least `min`) of inputs named name_0, name_1, ...
  OpDefBuilder&& variadic_input(const char* name, int min = 1) &&;
  OpDefBuilder&& output(const char* name) &&;
  OpDefBuilder&& attr(const char* name, AttrValue default_value) &&;
  // Several attributes with defaults at once, for families of ops that share them.
  OpDefBuilder&& attrs(const AttrMap& defaults) &&;
  // An attribute without a default, of type T: .required_attr<Shape>("shape").
  template <class T>
  OpDefBuilder&& required_attr(const char* name) && {
    def_.required_attrs[name] = T{};
    return std::move(*this);
  }
  OpDefBuilder&& shape_fn(ShapeFn fn) &&;
  OpDefBuilder&& gradient(GradFn fn) &&;
  OpDefBuilder&& no_gradient() &&;
  OpDefBuilder&& reads_variable() &&;
  OpDefBuilder&& writes_variable() &&;
  OpDefBuilder&& kernel_dtype_from_input(int i) &&;
  OpDefBuilder&& doc(const char* text) &&;
  OpDef&& release() && { return std::move(def_); }

 private:
  OpDef def_;
};

struct OpRegistrar {
  OpRegistrar(OpDefBuilder&& builder);  // NOLINT: implicit, so the macro reads as a chain
};

const OpDef* find_op(const std::string& name);
std::vector<const OpDef*> registered_ops();

}  // namespace troupe::runtime

// Registers op `Name`; continue with the OpDefBuilder chain and end with ';'.
#define TROUPE_REGISTER_OP(Name)                                          \
  static ::troupe::runtime::OpRegistrar TROUPE_CONCAT(troupe_op_, Name) = \
      ::troupe::runtime::OpDefBuilder(#Name)
