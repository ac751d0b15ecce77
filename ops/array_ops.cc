#include "ops/array_ops.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops/math_ops.h"
#include "ops/op_def_names.h"
#include "ops/shape_fns.h"
#include "ops/strided_slice.h"

namespace troupe::ops {

namespace {

const std::vector<int64_t>& ints(const InferenceContext& c, const char* name) {
  return c.attr<std::vector<int64_t>>(name);
}

Status shape_from_attr(InferenceContext& c) {
  c.set_output(0, c.attr<DType>("dtype"), c.attr<Shape>("shape"));
  return runtime::ok_status();
}

// The static shape of broadcasting x to `target`; target's dims must be known where x's are not 1.
Status broadcast_shape_fn(InferenceContext& c, const Shape& target) {
  Shape out;
  if (!runtime::broadcast_shapes(c.input_shape(0), target, &out) ||
      (out.rank_known() && target.rank_known() && out.rank() != target.rank())) {
    return c.error("cannot broadcast ", c.input_shape(0), " to ", target);
  }
  c.set_output(0, c.input_dtype(0), target.rank_known() ? target : out);
  return runtime::ok_status();
}

}  // namespace

TROUPE_REGISTER_OP(Const)
    .output("value")
    .required_attr<Tensor>("value")
    .shape_fn([](InferenceContext& c) {
      const Tensor& v = c.attr<Tensor>("value");
      if (!v.valid()) return c.error("the value is a null tensor");
      c.set_output(0, v.dtype(), v.shape());
      return runtime::ok_status();
    })
    .no_gradient()
    .doc("A tensor fixed when the graph is built");

TROUPE_REGISTER_OP(Placeholder)
    .output("value")
    .attr("dtype", DType::kFloat32)
    .attr("shape", Shape::unknown())
    .shape_fn(shape_from_attr)
    .no_gradient()
    .doc("A value fed at each step; running it unfed is an error that names it");

// y = x; dx = dy.
TROUPE_REGISTER_OP(Identity)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged)
    .gradient([](GraphBuilder&, const Node&, const Grads& dy) { return Grads{dy[0]}; })
    .doc("y = x (shares the buffer)");

TROUPE_REGISTER_OP(StopGradient)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged)
    .no_gradient()
    .doc("y = x in the forward pass; no gradient flows back through it");

TROUPE_REGISTER_OP(AssertInRange)
    .input("x")
    .output("y")
    .attr("lo", 0.0)
    .attr("hi", 0.0)
    .attr("what", std::string())
    .shape_fn(shape_fns::unchanged)
    .no_gradient()
    .doc("y = x when every element lies in [lo, hi]; otherwise the step's error, naming `what`");

// y = T(x); dx = cast(dy) back to x's dtype when both are floating.
TROUPE_REGISTER_OP(Cast)
    .input("x")
    .output("y")
    .attr("dtype", DType::kFloat32)
    .kernel_dtype_from_input(0)
    .shape_fn([](InferenceContext& c) {
      DType to = c.attr<DType>("dtype");
      if ((c.input_dtype(0) == DType::kString) != (to == DType::kString)) {
        return c.error("cannot cast ", runtime::dtype_name(c.input_dtype(0)), " to ",
                       runtime::dtype_name(to));
      }
      c.set_output(0, to, c.input_shape(0));
      return runtime::ok_status();
    })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      DType from = b.dtype(n.inputs[0]);
      if (!runtime::is_floating(from) || !runtime::is_floating(b.dtype(dy[0])))
        return Grads{Output{}};
      return Grads{cast(b, dy[0], from)};
    })
    .doc("y = x converted to `dtype` (float to int truncates toward zero; nonzero is true)");

// y = x with a new shape; dx = dy with x's shape.
TROUPE_REGISTER_OP(Reshape)
    .input("x")
    .output("y")
    .required_attr<std::vector<int64_t>>("shape")
    .shape_fn([](InferenceContext& c) {
      std::vector<int64_t> dims = ints(c, "shape");
      int unknown = -1;
      int64_t known = 1;
      for (size_t i = 0; i < dims.size(); ++i) {
        if (dims[i] == -1) {
          if (unknown >= 0) return c.error("more than one -1 in shape");
          unknown = static_cast<int>(i);
        } else if (dims[i] < 0) {
          return c.error("negative dimension ", dims[i], " in shape");
        } else if (__builtin_mul_overflow(known, dims[i], &known)) {
          return c.error("shape ", runtime::attr_debug_string(dims), " has too many elements");
        }
      }
      int64_t n = c.input_shape(0).num_elements();
      if (n >= 0) {
        if (unknown >= 0) {
          if (known == 0 || n % known != 0) {
            return c.error("cannot reshape ", c.input_shape(0), " to ",
                           runtime::attr_debug_string(dims));
          }
          dims[unknown] = n / known;
        } else if (n != known) {
          return c.error("cannot reshape ", c.input_shape(0), " (", n, " elements) to ",
                         runtime::attr_debug_string(dims), " (", known, " elements)");
        }
      }
      c.set_output(0, c.input_dtype(0), Shape(dims));
      return runtime::ok_status();
    })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{reshape_like(b, dy[0], n.inputs[0])};
    })
    .doc("y = x's elements in row-major order with `shape` (one dim may be -1)");

TROUPE_REGISTER_OP(ReshapeLike)
    .input("x")
    .input("ref")
    .output("y")
    .kernel_dtype_from_input(0)
    .shape_fn(shape_fns::like_input1)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{reshape_like(b, dy[0], n.inputs[0]), Output{}};
    })
    .doc("y = x's elements with ref's shape (element counts must match)");

TROUPE_REGISTER_OP(ExpandDims)
    .input("x")
    .output("y")
    .attr("axis", int64_t{0})
    .shape_fn([](InferenceContext& c) {
      const Shape& in = c.input_shape(0);
      if (!in.rank_known()) {
        c.set_output(0, c.input_dtype(0), Shape::unknown());
        return runtime::ok_status();
      }
      int64_t axis = c.attr<int64_t>("axis");
      int64_t r = in.rank() + 1;
      if (axis < -r || axis >= r) return c.error("axis ", axis, " out of range for ", in);
      if (axis < 0) axis += r;
      std::vector<int64_t> dims = in.dims();
      dims.insert(dims.begin() + axis, 1);
      c.set_output(0, c.input_dtype(0), Shape(dims));
      return runtime::ok_status();
    })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{reshape_like(b, dy[0], n.inputs[0])};
    })
    .doc("y = x with a size-1 dim inserted at `axis`");

TROUPE_REGISTER_OP(Squeeze)
    .input("x")
    .output("y")
    .attr("axes", std::vector<int64_t>{})
    .shape_fn([](InferenceContext& c) {
      const Shape& in = c.input_shape(0);
      if (!in.rank_known()) return c.error("needs a known rank");
      const auto& axes = ints(c, "axes");
      std::vector<bool> drop(in.rank(), false);
      for (int64_t a : axes) {
        int ax;
        if (!in.canonical_axis(a, &ax)) return c.error("axis ", a, " out of range for ", in);
        if (in.dim(ax) > 1) return c.error("cannot squeeze dim ", ax, " of size ", in.dim(ax));
        drop[ax] = true;
      }
      std::vector<int64_t> dims;
      for (int i = 0; i < in.rank(); ++i) {
        if (axes.empty() && in.dim(i) < 0) {
          return c.error("dim ", i, " is unknown: name the axes to squeeze");
        }
        if (axes.empty() ? in.dim(i) != 1 : !drop[i]) dims.push_back(in.dim(i));
      }
      c.set_output(0, c.input_dtype(0), Shape(dims));
      return runtime::ok_status();
    })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{reshape_like(b, dy[0], n.inputs[0])};
    })
    .doc("y = x without its size-1 dims (or only those in `axes`)");

// y = transpose(x, perm); dx = transpose(dy, inverse(perm)).
TROUPE_REGISTER_OP(Transpose)
    .input("x")
    .output("y")
    .attr("perm", std::vector<int64_t>{})
    .shape_fn([](InferenceContext& c) {
      const Shape& in = c.input_shape(0);
      const auto& perm = ints(c, "perm");
      if (!in.rank_known()) return c.error("needs a known rank");
      if (static_cast<int>(perm.size()) != in.rank()) {
        return c.error("perm has ", perm.size(), " entries for rank ", in.rank());
      }
      std::vector<bool> seen(in.rank(), false);
      std::vector<int64_t> dims;
      for (int64_t p : perm) {
        if (p < 0 || p >= in.rank() || seen[p]) {
          return c.error("perm ", runtime::attr_debug_string(perm), " is not a permutation");
        }
        seen[p] = true;
        dims.push_back(in.dim(p));
      }
      c.set_output(0, c.input_dtype(0), Shape(dims));
      return runtime::ok_status();
    })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      const auto& perm = n.attr<std::vector<int64_t>>("perm");
      std::vector<int64_t> inv(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
      return Grads{transpose(b, dy[0], inv)};
    })
    .doc("y[i...] = x[perm applied to i...]");

namespace {
Status concat_shape(InferenceContext& c, int first, int count, int64_t axis_attr, Shape* out) {
  Shape result;
  int axis = -1;
  for (int i = first; i < first + count; ++i) {
    const Shape& s = c.input_shape(i);
    if (!s.rank_known()) {
      *out = Shape::unknown();
      return runtime::ok_status();
    }
    if (i == first) {
      if (!s.canonical_axis(axis_attr, &axis)) {
        return c.error("axis ", axis_attr, " out of range for ", s);
      }
      result = s;
      continue;
    }
    if (s.rank() != result.rank()) {
      return c.error("input ", i, " has shape ", s, ", input ", first, " has ", result);
    }
    for (int d = 0; d < s.rank(); ++d) {
      if (d == axis) {
        result.dim(d) = (result.dim(d) < 0 || s.dim(d) < 0) ? -1 : result.dim(d) + s.dim(d);
      } else if (result.dim(d) >= 0 && s.dim(d) >= 0 && result.dim(d) != s.dim(d)) {
        return c.error("input ", i, " has shape ", s, ", which differs from ", result,
                       " outside axis ", axis);
      } else if (result.dim(d) < 0) {
        result.dim(d) = s.dim(d);
      }
    }
  }
  *out = result;
  return runtime::ok_status();
}
}  // namespace

// y = [x_0, x_1, ...] along axis; dx_i = the matching part of dy.
TROUPE_REGISTER_OP(Concat)
    .variadic_input("values")
    .output("y")
    .attr("axis", int64_t{0})
    .shape_fn([](InferenceContext& c) {
      for (int i = 1; i < c.num_inputs(); ++i) TROUPE_RETURN_IF_ERROR(c.expect_same_dtype(0, i));
      Shape out;
      TROUPE_RETURN_IF_ERROR(concat_shape(c, 0, c.num_inputs(), c.attr<int64_t>("axis"), &out));
      c.set_output(0, c.input_dtype(0), out);
      return runtime::ok_status();
    })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return split_like(b, dy[0], n.inputs, n.attr<int64_t>("axis"));
    })
    .doc("y = the inputs joined along `axis`");

TROUPE_REGISTER_OP(Split)
    .input("x")
    .output("parts")
    .attr("num_split", int64_t{1})
    .attr("axis", int64_t{0})
    .shape_fn([](InferenceContext& c) {
      const Shape& in = c.input_shape(0);
      int64_t num = c.attr<int64_t>("num_split");
      if (num < 1) return c.error("num_split must be positive, got ", num);
      Shape part = in;
      if (in.rank_known()) {
        int axis;
        if (!in.canonical_axis(c.attr<int64_t>("axis"), &axis)) {
          return c.error("axis ", c.attr<int64_t>("axis"), " out of range for ", in);
        }
        if (in.dim(axis) >= 0) {
          if (in.dim(axis) % num != 0) {
            return c.error("dim ", axis, " of ", in, " does not split into ", num, " equal parts");
          }
          part.dim(axis) = in.dim(axis) / num;
        }
      }
      for (int i = 0; i < num; ++i) c.set_output(i, c.input_dtype(0), part);
      return runtime::ok_status();
    })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{concat(b, dy, n.attr<int64_t>("axis"))};
    })
    .doc("num_split equal parts of x along `axis`");

TROUPE_REGISTER_OP(SplitLike)
    .input("x")
    .variadic_input("refs")
    .output("parts")
    .attr("axis", int64_t{0})
    .kernel_dtype_from_input(0)
    .shape_fn([](InferenceContext& c) {
      for (int i = 1; i < c.num_inputs(); ++i) {
        Shape s = c.input_shape(i);
        const Shape& x = c.input_shape(0);
        int axis;
        if (s.rank_known() && x.rank_known() && s.rank() == x.rank() &&
            x.canonical_axis(c.attr<int64_t>("axis"), &axis)) {
          for (int d = 0; d < s.rank(); ++d) {
            if (d != axis) s.dim(d) = x.dim(d);
          }
        }
        c.set_output(i - 1, c.input_dtype(0), s);
      }
      return runtime::ok_status();
    })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      Grads g(n.inputs.size());
      g[0] = concat(b, dy, n.attr<int64_t>("axis"));
      return g;
    })
    .doc("parts of x along `axis`, sized like each ref along it (Concat's gradient)");

// y = params[..., indices, ...] along axis; dparams = scatter-add of dy at indices.
// y = x with row `index` (along dim 0) replaced by value; in place when x's buffer is the
// kernel's alone (a loop filling its outputs row by row, as TF's TensorArray writes)
// dx = WriteRow(dy, index, 0); dvalue = dy[index]
TROUPE_REGISTER_OP(WriteRow)
    .input("x")
    .input("index")
    .input("value")
    .output("y")
    .kernel_dtype_from_input(0)
    .shape_fn([](InferenceContext& c) {
      DType it = c.input_dtype(1);
      if (it != DType::kInt32 && it != DType::kInt64) {
        return c.error("index must be int32 or int64, got ", runtime::dtype_name(it));
      }
      if (c.input_dtype(2) != c.input_dtype(0)) {
        return c.error("value of dtype ", runtime::dtype_name(c.input_dtype(2)), " for rows of ",
                       runtime::dtype_name(c.input_dtype(0)));
      }
      const Shape& x = c.input_shape(0);
      const Shape& v = c.input_shape(2);
      if (x.rank_known() && x.rank() == 0) return c.error("x must have rows, got a scalar");
      if (x.rank_known() && v.rank_known()) {
        const Shape row(std::vector<int64_t>(x.dims().begin() + 1, x.dims().end()));
        if (!row.compatible_with(v)) return c.error("a row of ", x, " cannot hold ", v);
      }
      c.set_output(0, c.input_dtype(0), x);
      return runtime::ok_status();
    })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{b.add("WriteRow", {dy[0], n.inputs[1], zeros_like(b, n.inputs[2])}), Output{},
                   gather(b, dy[0], n.inputs[1])};
    })
    .doc("y = x, but y[index] = value (in place when x is the kernel's alone)");

TROUPE_REGISTER_OP(Gather)
    .input("params")
    .input("indices")
    .output("y")
    .attr("axis", int64_t{0})
    .kernel_dtype_from_input(0)
    .shape_fn([](InferenceContext& c) {
      DType it = c.input_dtype(1);
      if (it != DType::kInt32 && it != DType::kInt64) {
        return c.error("indices must be int32 or int64, got ", runtime::dtype_name(it));
      }
      const Shape& p = c.input_shape(0);
      const Shape& i = c.input_shape(1);
      if (!p.rank_known() || !i.rank_known()) {
        c.set_output(0, c.input_dtype(0), Shape::unknown());
        return runtime::ok_status();
      }
      int axis;
      if (!p.canonical_axis(c.attr<int64_t>("axis"), &axis)) {
        return c.error("axis ", c.attr<int64_t>("axis"), " out of range for ", p);
      }
      std::vector<int64_t> dims(p.dims().begin(), p.dims().begin() + axis);
      dims.insert(dims.end(), i.dims().begin(), i.dims().end());
      dims.insert(dims.end(), p.dims().begin() + axis + 1, p.dims().end());
      c.set_output(0, c.input_dtype(0), Shape(dims));
      return runtime::ok_status();
    })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      Output g = b.add("GatherGrad", {n.inputs[0], n.inputs[1], dy[0]},
                       {{"axis", n.attr<int64_t>("axis")}});
      return Grads{g, Output{}};
    })
    .doc("y = params gathered along `axis` at `indices`; an index out of range is an error");

TROUPE_REGISTER_OP(GatherGrad)
    .input("params")
    .input("indices")
    .input("dy")
    .output("dparams")
    .attr("axis", int64_t{0})
    .kernel_dtype_from_input(2)
    .shape_fn([](InferenceContext& c) {
      c.set_output(0, c.input_dtype(2), c.input_shape(0));
      return runtime::ok_status();
    })
    .no_gradient()
    .doc(
        "zeros shaped like params with dy added at the gathered positions (second "
        "derivatives are not supported)");

namespace {

// A graph from a file or a peer may ask for any number of outputs.
constexpr int64_t kMaxPartitions = 1 << 16;

// The static shape of DynamicPartition's outputs and DynamicStitch's: an unknown count of rows,
// each shaped like data's dims after the indices' (or partitions') own.
runtime::Result<Shape> rows_shape(const InferenceContext& c, const Shape& data,
                                  const Shape& indices, const char* what) {
  if (!data.rank_known() || !indices.rank_known()) return Shape::unknown();
  bool prefix = indices.rank() <= data.rank();
  for (int i = 0; prefix && i < indices.rank(); ++i) {
    prefix = data.dim(i) < 0 || indices.dim(i) < 0 || data.dim(i) == indices.dim(i);
  }
  if (!prefix) return c.error(what, " ", indices, " are not a prefix of data ", data);
  std::vector<int64_t> dims{-1};
  dims.insert(dims.end(), data.dims().begin() + indices.rank(), data.dims().end());
  return Shape(dims);
}

Status expect_indices(const InferenceContext& c, int i) {
  const DType t = c.input_dtype(i);
  if (t == DType::kInt32 || t == DType::kInt64) return runtime::ok_status();
  return c.error("input ", i, " must be int32 or int64, got ", runtime::dtype_name(t));
}

}  // namespace

// outputs[i] = data's rows (the entries of its leading dims) whose partition is i, in order.
TROUPE_REGISTER_OP(DynamicPartition)
    .input("data")
    .input("partitions")
    .output("outputs")
    .attr("num_partitions", int64_t{1})
    .kernel_dtype_from_input(0)
    .shape_fn([](InferenceContext& c) {
      const int64_t num = c.attr<int64_t>("num_partitions");
      if (num < 1 || num > kMaxPartitions) {
        return c.error("num_partitions ", num, " is not in [1, ", kMaxPartitions, "]");
      }
      TROUPE_RETURN_IF_ERROR(expect_indices(c, 1));
      TROUPE_ASSIGN_OR_RETURN(Shape rows,
                              rows_shape(c, c.input_shape(0), c.input_shape(1), "partitions"));
      for (int64_t i = 0; i < num; ++i) c.set_output(static_cast<int>(i), c.input_dtype(0), rows);
      return runtime::ok_status();
    })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      // Each part's gradient goes back to the rows it came from, as TF's.
      Output positions = range_like(b, n.inputs[1]);
      std::vector<Output> where =
          dynamic_partition(b, positions, n.inputs[1], n.attr<int64_t>("num_partitions"));
      return Grads{reshape_like(b, dynamic_stitch(b, where, dy), n.inputs[0]), Output{}};
    })
    .doc(
        "outputs[i] = the rows of data (indexed by partitions' dims) whose partition is i; a "
        "partition outside [0, num_partitions) is an error");

// merged[indices[m][k]] = data[m][k]; inputs are the N indices, then the N data.
TROUPE_REGISTER_OP(DynamicStitch)
    .variadic_input("indices_then_data", 2)
    .output("merged")
    .attr("N", int64_t{1})
    .shape_fn([](InferenceContext& c) {
      const int64_t n = c.attr<int64_t>("N");
      if (n < 1 || 2 * n != c.num_inputs()) {
        return c.error("N ", n, " with ", c.num_inputs(), " inputs (N indices, then N data)");
      }
      const int m = static_cast<int>(n);
      Shape out = Shape::unknown();
      for (int i = 0; i < m; ++i) {
        TROUPE_RETURN_IF_ERROR(expect_indices(c, i));
        TROUPE_RETURN_IF_ERROR(c.expect_same_dtype(m, m + i));
        TROUPE_ASSIGN_OR_RETURN(Shape rows,
                                rows_shape(c, c.input_shape(m + i), c.input_shape(i), "indices"));
        if (!rows.compatible_with(out) && out.rank_known()) {
          return c.error("data ", m + i, " has rows ", rows, ", data ", m, " has ", out);
        }
        if (!out.rank_known()) out = rows;
      }
      c.set_output(0, c.input_dtype(m), out);
      return runtime::ok_status();
    })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      const size_t m = n.inputs.size() / 2;
      Grads g(n.inputs.size());
      for (size_t i = 0; i < m; ++i) g[m + i] = gather(b, dy[0], n.inputs[i]);
      return g;
    })
    .doc(
        "merged[indices[m][k]] = data[m][k], rows as many as the largest index + 1 (rows no "
        "index names are zero); a negative index is an error");

TROUPE_REGISTER_OP(Tile)
    .input("x")
    .output("y")
    .required_attr<std::vector<int64_t>>("multiples")
    .shape_fn([](InferenceContext& c) {
      const Shape& in = c.input_shape(0);
      const auto& m = ints(c, "multiples");
      if (!in.rank_known()) return c.error("needs a known rank");
      if (static_cast<int>(m.size()) != in.rank()) {
        return c.error("multiples has ", m.size(), " entries for ", in);
      }
      std::vector<int64_t> dims;
      for (int i = 0; i < in.rank(); ++i) {
        if (m[i] < 0) return c.error("negative multiple ", m[i]);
        int64_t d = -1;
        if (in.dim(i) >= 0 && __builtin_mul_overflow(in.dim(i), m[i], &d)) {
          return c.error("multiple ", m[i], " of dim ", i, " has too many elements");
        }
        dims.push_back(d);
      }
      c.set_output(0, c.input_dtype(0), Shape(dims));
      return runtime::ok_status();
    })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{b.add("TileGrad", {n.inputs[0], dy[0]},
                         {{"multiples", n.attr<std::vector<int64_t>>("multiples")}})};
    })
    .doc("y = x repeated multiples[i] times along each dim i");

TROUPE_REGISTER_OP(TileGrad)
    .input("x")
    .input("dy")
    .output("dx")
    .required_attr<std::vector<int64_t>>("multiples")
    .kernel_dtype_from_input(1)
    .shape_fn([](InferenceContext& c) {
      c.set_output(0, c.input_dtype(1), c.input_shape(0));
      return runtime::ok_status();
    })
    .no_gradient()
    .doc("dx = the sum of dy over the tiles (second derivatives are not supported)");

// y = x padded; dx = the middle of dy.
TROUPE_REGISTER_OP(Pad)
    .input("x")
    .output("y")
    .required_attr<std::vector<int64_t>>("paddings")
    .attr("constant_value", 0.0)
    .shape_fn([](InferenceContext& c) {
      const Shape& in = c.input_shape(0);
      const auto& p = ints(c, "paddings");
      if (!in.rank_known()) return c.error("needs a known rank");
      if (static_cast<int>(p.size()) != 2 * in.rank()) {
        return c.error("paddings has ", p.size() / 2, " pairs for ", in);
      }
      std::vector<int64_t> dims;
      for (int i = 0; i < in.rank(); ++i) {
        if (p[2 * i] < 0 || p[2 * i + 1] < 0) return c.error("negative padding in dim ", i);
        int64_t d = -1;
        if (in.dim(i) >= 0 && (__builtin_add_overflow(in.dim(i), p[2 * i], &d) ||
                               __builtin_add_overflow(d, p[2 * i + 1], &d))) {
          return c.error("padding of dim ", i, " has too many elements");
        }
        dims.push_back(d);
      }
      c.set_output(0, c.input_dtype(0), Shape(dims));
      return runtime::ok_status();
    })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      const auto& p = n.attr<std::vector<int64_t>>("paddings");
      StridedSliceSpec s;
      for (size_t i = 0; i < p.size() / 2; ++i) {
        s.begin.push_back(p[2 * i]);
        s.end.push_back(-p[2 * i + 1]);
        s.strides.push_back(1);
        if (p[2 * i + 1] == 0) s.end_mask |= int64_t(1) << i;
      }
      return Grads{strided_slice(b, dy[0], s)};
    })
    .doc("y = x with paddings[2i] values before and paddings[2i+1] after it in dim i");

TROUPE_REGISTER_OP(OneHot)
    .input("indices")
    .output("y")
    .required_attr<int64_t>("depth")
    .attr("on_value", 1.0)
    .attr("off_value", 0.0)
    .attr("axis", int64_t{-1})
    .attr("dtype", DType::kFloat32)
    .shape_fn([](InferenceContext& c) {
      DType it = c.input_dtype(0);
      if (it != DType::kInt32 && it != DType::kInt64 && it != DType::kUInt8) {
        return c.error("indices must be an integer dtype, got ", runtime::dtype_name(it));
      }
      int64_t depth = c.attr<int64_t>("depth");
      if (depth < 0) return c.error("negative depth ", depth);
      const Shape& in = c.input_shape(0);
      if (!in.rank_known()) return c.error("needs a known rank");
      int64_t axis = c.attr<int64_t>("axis");
      if (axis < -1 || axis > in.rank()) return c.error("axis ", axis, " out of range");
      std::vector<int64_t> dims = in.dims();
      dims.insert(axis == -1 ? dims.end() : dims.begin() + axis, depth);
      c.set_output(0, c.attr<DType>("dtype"), Shape(dims));
      return runtime::ok_status();
    })
    .no_gradient()
    .doc(
        "y[..., i, ...] = on_value where i == indices[...], else off_value (indices outside "
        "[0, depth) give a row of off_value, as in TF)");

TROUPE_REGISTER_OP(Fill)
    .output("y")
    .required_attr<Shape>("shape")
    .attr("value", 0.0)
    .attr("dtype", DType::kFloat32)
    .shape_fn([](InferenceContext& c) {
      const Shape& s = c.attr<Shape>("shape");
      if (!s.fully_defined()) return c.error("shape ", s, " must be fully defined");
      c.set_output(0, c.attr<DType>("dtype"), s);
      return runtime::ok_status();
    })
    .no_gradient()
    .doc("y = `value` everywhere, with `shape`");

TROUPE_REGISTER_OP(ZerosLike)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged)
    .no_gradient()
    .doc("y = 0 with x's shape and dtype");

TROUPE_REGISTER_OP(OnesLike)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged)
    .no_gradient()
    .doc("y = 1 with x's shape and dtype");

TROUPE_REGISTER_OP(RangeLike)
    .input("x")
    .output("y")
    .attr("dtype", DType::kInt64)
    .shape_fn([](InferenceContext& c) {
      const DType t = c.attr<DType>("dtype");
      if (t != DType::kInt32 && t != DType::kInt64) {
        return c.error("dtype must be int32 or int64, got ", runtime::dtype_name(t));
      }
      c.set_output(0, t, c.input_shape(0));
      return runtime::ok_status();
    })
    .no_gradient()
    .doc("y = 0, 1, 2, ... in x's shape, row-major (tf.reshape(tf.range(tf.size(x)), x.shape))");

TROUPE_REGISTER_OP(Range)
    .output("y")
    .required_attr<double>("start")
    .required_attr<double>("limit")
    .attr("delta", 1.0)
    .attr("dtype", DType::kInt32)
    .shape_fn([](InferenceContext& c) {
      double start = c.attr<double>("start"), limit = c.attr<double>("limit"),
             delta = c.attr<double>("delta");
      if (delta == 0) return c.error("delta must not be zero");
      if ((delta > 0 && start > limit) || (delta < 0 && start < limit)) {
        return c.error("start ", start, " to limit ", limit, " never reached with delta ", delta);
      }
      const double n = std::ceil(std::abs((limit - start) / delta));
      // Beyond 2^53 elements the count is not even exact; check_tensor_size refuses far less.
      if (!(n <= 9007199254740992.0)) {
        return c.error("start ", start, " to limit ", limit, " with delta ", delta,
                       " is not a countable range");
      }
      c.set_output(0, c.attr<DType>("dtype"), Shape{static_cast<int64_t>(n)});
      return runtime::ok_status();
    })
    .no_gradient()
    .doc("y = [start, start + delta, ...) while below `limit`, as np.arange");

TROUPE_REGISTER_OP(BroadcastTo)
    .input("x")
    .output("y")
    .required_attr<Shape>("shape")
    .shape_fn([](InferenceContext& c) { return broadcast_shape_fn(c, c.attr<Shape>("shape")); })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{sum_to_shape_of(b, dy[0], n.inputs[0])};
    })
    .doc("y = x broadcast to `shape` with numpy's rules");

TROUPE_REGISTER_OP(BroadcastToShapeOf)
    .input("x")
    .input("ref")
    .output("y")
    .kernel_dtype_from_input(0)
    .shape_fn([](InferenceContext& c) { return broadcast_shape_fn(c, c.input_shape(1)); })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{sum_to_shape_of(b, dy[0], n.inputs[0]), Output{}};
    })
    .doc("y = x broadcast to ref's run-time shape");

TROUPE_REGISTER_OP(SumToShapeOf)
    .input("x")
    .input("ref")
    .output("y")
    .kernel_dtype_from_input(0)
    .shape_fn(shape_fns::like_input1)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{broadcast_to_shape_of(b, dy[0], n.inputs[0]), Output{}};
    })
    .doc(
        "y = x summed over the dims along which ref broadcasts to x (leading dims and dims "
        "where ref has size 1); y has ref's shape");

// y = cond ? a : c; da = dy where cond, dc = dy elsewhere (each summed to its shape).
TROUPE_REGISTER_OP(Select)
    .input("cond")
    .input("a")
    .input("c")
    .output("y")
    .kernel_dtype_from_input(1)
    .shape_fn([](InferenceContext& c) {
      if (c.input_dtype(0) != DType::kBool) {
        return c.error("cond must be bool, got ", runtime::dtype_name(c.input_dtype(0)));
      }
      TROUPE_RETURN_IF_ERROR(c.expect_same_dtype(1, 2));
      Shape ac, out;
      if (!runtime::broadcast_shapes(c.input_shape(1), c.input_shape(2), &ac) ||
          !runtime::broadcast_shapes(c.input_shape(0), ac, &out)) {
        return c.error("shapes ", c.input_shape(0), ", ", c.input_shape(1), " and ",
                       c.input_shape(2), " cannot be broadcast together");
      }
      c.set_output(0, c.input_dtype(1), out);
      return runtime::ok_status();
    })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      Output zero = zeros_like(b, dy[0]);
      Output da = select(b, n.inputs[0], dy[0], zero);
      Output dc = select(b, n.inputs[0], zero, dy[0]);
      return Grads{Output{}, sum_to_shape_of(b, da, n.inputs[1]),
                   sum_to_shape_of(b, dc, n.inputs[2])};
    })
    .doc("y = cond ? a : c elementwise, all three broadcast (tf.where)");

// y = sum of the inputs; each dx_i = dy.
TROUPE_REGISTER_OP(AddN)
    .variadic_input("values")
    .output("y")
    .shape_fn([](InferenceContext& c) {
      Shape out = c.input_shape(0);
      for (int i = 1; i < c.num_inputs(); ++i) {
        TROUPE_RETURN_IF_ERROR(c.expect_same_dtype(0, i));
        if (!c.input_shape(i).compatible_with(out)) {
          return c.error("input ", i, " has shape ", c.input_shape(i), ", input 0 has ", out);
        }
        if (!out.fully_defined() && c.input_shape(i).fully_defined()) out = c.input_shape(i);
      }
      c.set_output(0, c.input_dtype(0), out);
      return runtime::ok_status();
    })
    .gradient([](GraphBuilder&, const Node& n, const Grads& dy) {
      return Grads(n.inputs.size(), dy[0]);
    })
    .doc("y = x_0 + x_1 + ... (same shapes, no broadcasting)");

TROUPE_REGISTER_OP(Size)
    .input("x")
    .output("n")
    .shape_fn([](InferenceContext& c) {
      c.set_output(0, DType::kInt64, Shape{});
      return runtime::ok_status();
    })
    .no_gradient()
    .doc("n = the number of elements of x, as an int64 scalar");

TROUPE_REGISTER_OP(Shape)
    .input("x")
    .output("shape")
    .shape_fn([](InferenceContext& c) {
      const Shape& s = c.input_shape(0);
      c.set_output(0, DType::kInt64, s.rank_known() ? Shape{s.rank()} : Shape{-1});
      return runtime::ok_status();
    })
    .no_gradient()
    .doc("shape = the dimensions of x at run time, as an int64 vector (tf.shape)");

TROUPE_REGISTER_OP(Rank)
    .input("x")
    .output("rank")
    .shape_fn([](InferenceContext& c) {
      c.set_output(0, DType::kInt64, Shape{});
      return runtime::ok_status();
    })
    .no_gradient()
    .doc("rank = the number of dimensions of x, as an int64 scalar (tf.rank)");

// Row b's first seq_lengths[b] entries along seq_axis reversed, the rest as they are.
TROUPE_REGISTER_OP(ReverseSequence)
    .input("x")
    .input("seq_lengths")
    .output("y")
    .attr("seq_axis", int64_t{1})
    .attr("batch_axis", int64_t{0})
    .shape_fn([](InferenceContext& c) -> Status {
      const Shape& s = c.input_shape(0);
      const int64_t seq = c.attr<int64_t>("seq_axis"), batch = c.attr<int64_t>("batch_axis");
      const DType t = c.input_dtype(1);
      if (t != DType::kInt32 && t != DType::kInt64) {
        return c.error("seq_lengths must be int32 or int64, got ", runtime::dtype_name(t));
      }
      if (s.rank_known() &&
          (seq < 0 || batch < 0 || seq >= s.rank() || batch >= s.rank() || seq == batch)) {
        return c.error("seq_axis ", seq, " and batch_axis ", batch, " must be two axes of ", s);
      }
      c.set_output(0, c.input_dtype(0), s);
      return runtime::ok_status();
    })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      // Its own inverse: the gradient reverses the same spans back.
      return Grads{b.add("ReverseSequence", {dy[0], n.inputs[1]}, n.attrs), Output{}};
    })
    .doc("y = x with each batch row's first seq_lengths entries along seq_axis reversed");

// y = x with the order of `axes` reversed; dx = dy reversed the same way.
TROUPE_REGISTER_OP(ReverseV2)
    .input("x")
    .output("y")
    .attr("axes", std::vector<int64_t>{})
    .shape_fn([](InferenceContext& c) -> Status {
      const Shape& s = c.input_shape(0);
      for (int64_t a : c.attr<std::vector<int64_t>>("axes")) {
        int axis;
        if (s.rank_known() && !s.canonical_axis(a, &axis)) {
          return c.error("axis ", a, " out of range for ", s);
        }
      }
      c.set_output(0, c.input_dtype(0), s);
      return runtime::ok_status();
    })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{reverse(b, dy[0], n.attr<std::vector<int64_t>>("axes"))};
    })
    .doc("y = x with each of `axes` in reverse order (tf.reverse)");

namespace {

// GatherNd's result: indices' leading dims, then params' dims past the index depth.
Status gather_nd_shape(InferenceContext& c, const Shape& params, const Shape& indices, DType dt) {
  const DType it = c.input_dtype(1);
  if (it != DType::kInt32 && it != DType::kInt64) {
    return c.error("indices must be int32 or int64, got ", runtime::dtype_name(it));
  }
  if (!params.rank_known() || !indices.rank_known() || indices.dim(indices.rank() - 1) < 0) {
    c.set_output(0, dt, Shape::unknown());
    return runtime::ok_status();
  }
  if (indices.rank() < 1) return c.error("indices need a last dimension, got ", indices);
  const int64_t depth = indices.dim(indices.rank() - 1);
  if (depth > params.rank()) {
    return c.error("indices of depth ", depth, " index more dimensions than ", params, " has");
  }
  std::vector<int64_t> dims(indices.dims().begin(), indices.dims().end() - 1);
  dims.insert(dims.end(), params.dims().begin() + depth, params.dims().end());
  c.set_output(0, dt, Shape(dims));
  return runtime::ok_status();
}

}  // namespace

// y[i...] = params[indices[i..., :]]; dparams scatters dy back (summed where indices repeat).
TROUPE_REGISTER_OP(GatherNd)
    .input("params")
    .input("indices")
    .output("y")
    .kernel_dtype_from_input(0)
    .shape_fn([](InferenceContext& c) {
      return gather_nd_shape(c, c.input_shape(0), c.input_shape(1), c.input_dtype(0));
    })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{b.add("GatherNdGrad", {n.inputs[0], n.inputs[1], dy[0]}), Output{}};
    })
    .doc(
        "y = slices of params at the index tuples in indices' last dimension (tf.gather_nd); an "
        "index out of range is an error");

TROUPE_REGISTER_OP(GatherNdGrad)
    .input("params")
    .input("indices")
    .input("dy")
    .output("dparams")
    .kernel_dtype_from_input(2)
    .shape_fn([](InferenceContext& c) {
      c.set_output(0, c.input_dtype(2), c.input_shape(0));
      return runtime::ok_status();
    })
    .no_gradient()
    .doc("dparams = dy scattered into params' shape at indices (params read for its shape)");

// y = zeros of `shape` with updates added at indices; dupdates = dy gathered at indices.
TROUPE_REGISTER_OP(ScatterNd)
    .input("indices")
    .input("updates")
    .output("y")
    .attr("shape", std::vector<int64_t>{})
    .kernel_dtype_from_input(1)
    .shape_fn([](InferenceContext& c) -> Status {
      const DType it = c.input_dtype(0);
      if (it != DType::kInt32 && it != DType::kInt64) {
        return c.error("indices must be int32 or int64, got ", runtime::dtype_name(it));
      }
      const Shape out(c.attr<std::vector<int64_t>>("shape"));
      const Shape& i = c.input_shape(0);
      const Shape& u = c.input_shape(1);
      if (i.rank_known() && u.rank_known() && i.rank() >= 1 && i.dim(i.rank() - 1) >= 0) {
        const int64_t depth = i.dim(i.rank() - 1);
        std::vector<int64_t> want(i.dims().begin(), i.dims().end() - 1);
        if (depth > out.rank()) return c.error("indices of depth ", depth, " for ", out);
        want.insert(want.end(), out.dims().begin() + depth, out.dims().end());
        if (!Shape(want).compatible_with(u)) {
          return c.error("updates ", u, " do not fit indices ", i, " into ", out, ": expected ",
                         Shape(want));
        }
      }
      c.set_output(0, c.input_dtype(1), out);
      return runtime::ok_status();
    })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{Output{}, gather_nd(b, dy[0], n.inputs[0])};
    })
    .doc(
        "y = a tensor of `shape`, zero but where updates are added at indices (tf.scatter_nd; "
        "repeated indices sum); an index out of range is an error");

TROUPE_REGISTER_OP(NoOp)
    .shape_fn(shape_fns::no_outputs)
    .no_gradient()
    .doc("Does nothing; its control inputs make it a step's target (a train op)");

Output constant(GraphBuilder& b, const Tensor& value, const std::string& name) {
  return b.add("Const", {}, {{"value", value}}, name);
}

Output scalar(GraphBuilder& b, double value, DType dtype, const std::string& name) {
  Tensor t(dtype, Shape{});
  if (!t.fill(value)) {
    b.record_error(runtime::invalid_argument("scalar: no numeric value of dtype ",
                                             runtime::dtype_name(dtype)));
    return Output{};
  }
  return constant(b, t, name);
}

Output scalar_like(GraphBuilder& b, Output x, double value) {
  if (!x.valid()) return Output{};
  return scalar(b, value, b.dtype(x));
}

Output placeholder(GraphBuilder& b, DType dtype, const Shape& shape, const std::string& name) {
  return b.add("Placeholder", {}, {{"dtype", dtype}, {"shape", shape}},
               name.empty() ? "Placeholder" : name);
}

Output identity(GraphBuilder& b, Output x, const std::string& name) {
  return b.add("Identity", {x}, {}, name);
}
Output assert_in_range(GraphBuilder& b, Output x, double lo, double hi, const std::string& what) {
  return b.add("AssertInRange", {x}, {{"lo", lo}, {"hi", hi}, {"what", what}});
}
Output stop_gradient(GraphBuilder& b, Output x, const std::string& name) {
  return b.add("StopGradient", {x}, {}, name);
}
Output cast(GraphBuilder& b, Output x, DType dtype, const std::string& name) {
  return b.add("Cast", {x}, {{"dtype", dtype}}, name);
}
Output reshape(GraphBuilder& b, Output x, const std::vector<int64_t>& shape,
               const std::string& name) {
  return b.add("Reshape", {x}, {{"shape", shape}}, name);
}
Output reshape_like(GraphBuilder& b, Output x, Output ref) {
  return b.add("ReshapeLike", {x, ref});
}
Output expand_dims(GraphBuilder& b, Output x, int64_t axis, const std::string& name) {
  return b.add("ExpandDims", {x}, {{"axis", axis}}, name);
}
Output squeeze(GraphBuilder& b, Output x, const std::vector<int64_t>& axes,
               const std::string& name) {
  return b.add("Squeeze", {x}, {{"axes", axes}}, name);
}
Output transpose(GraphBuilder& b, Output x, const std::vector<int64_t>& perm,
                 const std::string& name) {
  std::vector<int64_t> p = perm;
  if (p.empty() && x.valid() && b.shape(x).rank_known()) {
    for (int i = b.shape(x).rank() - 1; i >= 0; --i) p.push_back(i);
  }
  return b.add("Transpose", {x}, {{"perm", p}}, name);
}
Output concat(GraphBuilder& b, const std::vector<Output>& values, int64_t axis,
              const std::string& name) {
  return b.add("Concat", values, {{"axis", axis}}, name);
}
std::vector<Output> split(GraphBuilder& b, Output x, int num, int64_t axis,
                          const std::string& name) {
  return b.add_node("Split", {x}, {{"num_split", int64_t{num}}, {"axis", axis}}, name);
}
std::vector<Output> split_like(GraphBuilder& b, Output x, const std::vector<Output>& refs,
                               int64_t axis) {
  std::vector<Output> inputs{x};
  inputs.insert(inputs.end(), refs.begin(), refs.end());
  return b.add_node("SplitLike", inputs, {{"axis", axis}});
}
Output write_row(GraphBuilder& b, Output x, Output index, Output value) {
  return b.add("WriteRow", {x, index, value});
}

Output gather(GraphBuilder& b, Output params, Output indices, int64_t axis,
              const std::string& name) {
  return b.add("Gather", {params, indices}, {{"axis", axis}}, name);
}
Output tile(GraphBuilder& b, Output x, const std::vector<int64_t>& multiples,
            const std::string& name) {
  return b.add("Tile", {x}, {{"multiples", multiples}}, name);
}
Output pad(GraphBuilder& b, Output x, const std::vector<std::pair<int64_t, int64_t>>& paddings,
           double value, const std::string& name) {
  std::vector<int64_t> flat;
  for (const auto& [before, after] : paddings) {
    flat.push_back(before);
    flat.push_back(after);
  }
  return b.add("Pad", {x}, {{"paddings", flat}, {"constant_value", value}}, name);
}
Output one_hot(GraphBuilder& b, Output indices, int64_t depth, double on_value, double off_value,
               int64_t axis, DType dtype, const std::string& name) {
  return b.add("OneHot", {indices},
               {{"depth", depth},
                {"on_value", on_value},
                {"off_value", off_value},
                {"axis", axis},
                {"dtype", dtype}},
               name);
}
Output fill(GraphBuilder& b, const Shape& shape, double value, DType dtype,
            const std::string& name) {
  return b.add("Fill", {}, {{"shape", shape}, {"value", value}, {"dtype", dtype}}, name);
}
Output zeros(GraphBuilder& b, const Shape& shape, DType dtype, const std::string& name) {
  return fill(b, shape, 0.0, dtype, name.empty() ? "zeros" : name);
}
Output ones(GraphBuilder& b, const Shape& shape, DType dtype, const std::string& name) {
  return fill(b, shape, 1.0, dtype, name.empty() ? "ones" : name);
}
Output zeros_like(GraphBuilder& b, Output x) { return b.add("ZerosLike", {x}); }
Output ones_like(GraphBuilder& b, Output x) { return b.add("OnesLike", {x}); }
Output range(GraphBuilder& b, double start, double limit, double delta, DType dtype,
             const std::string& name) {
  return b.add("Range", {},
               {{"start", start}, {"limit", limit}, {"delta", delta}, {"dtype", dtype}}, name);
}
Output range_like(GraphBuilder& b, Output x, DType dtype) {
  return b.add("RangeLike", {x}, {{"dtype", dtype}});
}
std::vector<Output> dynamic_partition(GraphBuilder& b, Output data, Output partitions,
                                      int64_t num_partitions, const std::string& name) {
  return b.add_node("DynamicPartition", {data, partitions}, {{"num_partitions", num_partitions}},
                    name);
}
Output dynamic_stitch(GraphBuilder& b, const std::vector<Output>& indices,
                      const std::vector<Output>& data, const std::string& name) {
  if (indices.size() != data.size()) {
    b.record_error(runtime::invalid_argument("dynamic_stitch: ", indices.size(), " indices for ",
                                             data.size(), " data"));
    return Output{};
  }
  std::vector<Output> inputs = indices;
  inputs.insert(inputs.end(), data.begin(), data.end());
  return b.add("DynamicStitch", inputs, {{"N", static_cast<int64_t>(indices.size())}}, name);
}
Output broadcast_to(GraphBuilder& b, Output x, const Shape& shape, const std::string& name) {
  return b.add("BroadcastTo", {x}, {{"shape", shape}}, name);
}
Output broadcast_to_shape_of(GraphBuilder& b, Output x, Output ref) {
  return b.add("BroadcastToShapeOf", {x, ref});
}
Output sum_to_shape_of(GraphBuilder& b, Output x, Output ref) {
  if (!x.valid() || !ref.valid()) return Output{};
  // Nothing to undo when both shapes are fully known and equal.
  if (b.shape(x).fully_defined() && b.shape(x) == b.shape(ref)) return x;
  return b.add("SumToShapeOf", {x, ref});
}
Output select(GraphBuilder& b, Output cond, Output a, Output c, const std::string& name) {
  return b.add("Select", {cond, a, c}, {}, name);
}
Output add_n(GraphBuilder& b, const std::vector<Output>& values, const std::string& name) {
  if (values.size() == 1) return values[0];
  return b.add("AddN", values, {}, name);
}
Output stack(GraphBuilder& b, const std::vector<Output>& values, int64_t axis) {
  if (values.empty()) {
    b.record_error(runtime::invalid_argument("stack: no values"));
    return Output{};
  }
  auto scope = b.name_scope("stack");
  std::vector<Output> expanded;
  for (const Output& v : values) expanded.push_back(expand_dims(b, v, axis));
  const int64_t rank =
      b.graph().shape(values[0]).rank_known() ? b.graph().shape(values[0]).rank() : 0;
  return concat(b, expanded, axis < 0 ? axis + rank + 1 : axis);
}

std::vector<Output> unstack(GraphBuilder& b, Output x, int64_t axis) {
  if (!b.ok() || !x.valid()) return {};
  const Shape& s = b.graph().shape(x);
  const int64_t rank = s.rank_known() ? s.rank() : -1;
  const int64_t a = axis < 0 && rank >= 0 ? axis + rank : axis;
  if (rank < 0 || a < 0 || a >= rank || s.dim(static_cast<int>(a)) < 0) {
    b.record_error(runtime::invalid_argument("unstack: axis ", axis, " of ",
                                             b.graph().output_name(x), " (shape ", s,
                                             ") has no known size"));
    return {};
  }
  auto scope = b.name_scope("unstack");
  std::vector<Output> out;
  for (const Output& part : split(b, x, static_cast<int>(s.dim(static_cast<int>(a))), a)) {
    out.push_back(squeeze(b, part, {a}));
  }
  return out;
}

Output size(GraphBuilder& b, Output x) { return b.add("Size", {x}); }
Output shape(GraphBuilder& b, Output x) { return b.add("Shape", {x}); }
Output rank(GraphBuilder& b, Output x) { return b.add("Rank", {x}); }
Output reverse(GraphBuilder& b, Output x, const std::vector<int64_t>& axes) {
  return b.add("ReverseV2", {x}, {{"axes", axes}});
}
Output gather_nd(GraphBuilder& b, Output params, Output indices) {
  return b.add("GatherNd", {params, indices});
}
Output reverse_sequence(GraphBuilder& b, Output x, Output seq_lengths, int64_t seq_axis,
                        int64_t batch_axis) {
  return b.add("ReverseSequence", {x, seq_lengths},
               {{"seq_axis", seq_axis}, {"batch_axis", batch_axis}});
}
Output scatter_nd(GraphBuilder& b, Output indices, Output updates, const Shape& shape) {
  return b.add("ScatterNd", {indices, updates}, {{"shape", shape.dims()}});
}
int no_op(GraphBuilder& b, const std::vector<int>& deps, const std::string& name) {
  auto scope = b.control_dependencies(deps);
  std::vector<runtime::Output> outs = b.add_node("NoOp", {}, {}, name);
  if (!b.ok()) return -1;
  return b.graph().num_nodes() - 1;
}

}  // namespace troupe::ops
