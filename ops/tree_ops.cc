#include "ops/tree_ops.h"

#include <algorithm>

#include "ops/op_def_names.h"
#include "ops/state_ops.h"
#include "runtime/op_registry.h"

namespace troupe::ops {

namespace {

// x must be float32 [batch, features]; returns its width (-1 unknown) or an error.
Status expect_rows(InferenceContext& c, int i, const char* what, int64_t* width) {
  const Shape& s = c.input_shape(i);
  if (c.input_dtype(i) != DType::kFloat32) {
    return c.error(what, " must be float32, got ", runtime::dtype_name(c.input_dtype(i)));
  }
  if (s.rank_known() && s.rank() != 2) return c.error(what, " must be [batch, n], got ", s);
  *width = s.rank_known() ? s.dim(1) : -1;
  return runtime::ok_status();
}

Status check_width(InferenceContext& c, const char* what, int64_t got, int64_t want) {
  if (got >= 0 && want >= 0 && got != want) {
    return c.error(what, " has ", got, " columns where ", want, " are expected");
  }
  return runtime::ok_status();
}

// A [trees, 1 + max_nodes, 4 + dim] float32 ensemble.
Status expect_ensemble(InferenceContext& c, const Shape& s, DType dtype) {
  if (dtype != DType::kFloat32 || !s.rank_known() || s.rank() != 3 || s.dim(1) < 2 ||
      s.dim(2) <= kTreeFields) {
    return c.error("the ensemble must be float32 [trees, 1 + max_nodes, 4 + dim], got ",
                   runtime::dtype_name(dtype), s);
  }
  return runtime::ok_status();
}

const AttrMap kVariableAttrs{
    {"var", std::string()}, {"shape", Shape{}}, {"dtype", DType::kFloat32}};

AttrMap variable_attrs(GraphBuilder& b, Output var, const char* op) {
  const runtime::Node& v = b.graph().node(var.node);
  if (v.op != "Variable") {
    b.record_error(runtime::invalid_argument(op, ": '", v.name, "' is not a variable"));
    return {};
  }
  return {{"var", variable_name(v)}, {"shape", v.output_shapes[0]}, {"dtype", v.output_dtypes[0]}};
}

}  // namespace

runtime::Shape tree_ensemble_shape(int64_t trees, int64_t max_nodes, int64_t dim) {
  return Shape{trees, 1 + max_nodes, kTreeFields + dim};
}

std::vector<double> feature_importances(const runtime::Tensor& ensemble, int64_t features) {
  std::vector<double> gain(std::max<int64_t>(features, 0), 0.0);
  TreeEnsembleView e(ensemble);
  double total = 0;
  for (int64_t t = 0; t < e.trees(); ++t) {
    for (int64_t i = 0; i < e.nodes(t); ++i) {
      const float* n = e.node(t, i);
      const auto f = static_cast<int64_t>(n[kNodeFeature]);
      if (n[kNodeLeft] < 0 || f < 0 || f >= features) continue;
      gain[f] += n[kNodeGain];
      total += n[kNodeGain];
    }
  }
  if (total > 0) {
    for (double& g : gain) g /= total;
  }
  return gain;
}

TROUPE_REGISTER_OP(BucketBoundaries)
    .input("x")
    .output("boundaries")
    .attrs(kVariableAttrs)
    .writes_variable()
    .shape_fn([](InferenceContext& c) {
      int64_t width;
      TROUPE_RETURN_IF_ERROR(expect_rows(c, 0, "x", &width));
      const Shape& s = c.attr<Shape>("shape");
      if (c.attr<DType>("dtype") != DType::kFloat32 || s.rank() != 2 || s.dim(1) < 1 ||
          s.dim(1) > 255) {
        return c.error("boundaries must be float32 [features, 1..255], got ", s);
      }
      TROUPE_RETURN_IF_ERROR(check_width(c, "x", width, s.dim(0)));
      c.set_output(0, DType::kFloat32, s);
      return runtime::ok_status();
    })
    .no_gradient()
    .doc(
        "the first time (the variable holds NaN): per feature, up to max_buckets - 1 distinct "
        "quantiles of x's column below its largest value, padded with +inf; then unchanged");

TROUPE_REGISTER_OP(TreeEnsemblePredict)
    .input("x")
    .input("ensemble")
    .output("predictions")
    .required_attr<int64_t>("outputs")
    .attr("average", false)
    .shape_fn([](InferenceContext& c) {
      int64_t width;
      TROUPE_RETURN_IF_ERROR(expect_rows(c, 0, "x", &width));
      TROUPE_RETURN_IF_ERROR(expect_ensemble(c, c.input_shape(1), c.input_dtype(1)));
      const int64_t k = c.attr<int64_t>("outputs");
      const int64_t dim = c.input_shape(1).dim(2) - kTreeFields;
      if (k < 1 || (dim != 1 && dim != k)) {
        return c.error("trees of ", dim, " values cannot predict ", k, " outputs");
      }
      const Shape& x = c.input_shape(0);
      c.set_output(0, DType::kFloat32, Shape{x.rank_known() ? x.dim(0) : -1, k});
      return runtime::ok_status();
    })
    .no_gradient()
    .doc("predictions[i] = sum (or mean) over started trees of the leaf value row i reaches");

TROUPE_REGISTER_OP(GrowTreeLayer)
    .input("x")
    .input("gradients")
    .input("hessians")
    .input("boundaries")
    .output("trees_done")
    .attrs(kVariableAttrs)
    .attr("forest", false)
    .attr("trees_per_round", int64_t{1})
    .attr("max_depth", int64_t{6})
    .attr("learning_rate", 0.1)
    .attr("l1", 0.0)
    .attr("l2", 0.0)
    .attr("tree_complexity", 0.0)
    .attr("min_node_weight", 0.0)
    .attr("center_bias", false)
    .attr("features_per_node", int64_t{0})
    .attr("bagging", false)
    .attr("seed", int64_t{0})
    .attr("layers", int64_t{1})
    .writes_variable()
    .kernel_dtype_from_input(0)
    .shape_fn([](InferenceContext& c) {
      const Shape& s = c.attr<Shape>("shape");
      TROUPE_RETURN_IF_ERROR(expect_ensemble(c, s, c.attr<DType>("dtype")));
      int64_t width, g, h, bounds;
      TROUPE_RETURN_IF_ERROR(expect_rows(c, 0, "x", &width));
      TROUPE_RETURN_IF_ERROR(expect_rows(c, 1, "gradients", &g));
      TROUPE_RETURN_IF_ERROR(expect_rows(c, 2, "hessians", &h));
      TROUPE_RETURN_IF_ERROR(expect_rows(c, 3, "boundaries", &bounds));
      const int64_t dim = s.dim(2) - kTreeFields, trees = s.dim(0);
      const int64_t per_round = c.attr<int64_t>("trees_per_round");
      if (per_round < 1 || trees % per_round != 0) {
        return c.error(trees, " trees do not make rounds of ", per_round);
      }
      if (g >= 0 && dim != 1 && dim != g) {
        return c.error("trees of ", dim, " values cannot fit ", g, " gradient columns");
      }
      if (g >= 0 && h >= 0 && h != 1 && h != g) {
        return c.error(h, " hessian columns for ", g, " gradient columns");
      }
      if (width >= 0 && c.input_shape(3).rank_known() && c.input_shape(3).dim(0) >= 0) {
        TROUPE_RETURN_IF_ERROR(check_width(c, "boundaries", c.input_shape(3).dim(0), width));
      }
      if (c.attr<int64_t>("max_depth") < 0 || c.attr<int64_t>("layers") < 0 ||
          !(c.attr<double>("l2") >= 0) || !(c.attr<double>("l1") >= 0) ||
          !(c.attr<double>("min_node_weight") >= 0)) {
        return c.error("max_depth, layers, l1, l2 and min_node_weight must not be negative");
      }
      c.set_output(0, DType::kInt64, Shape{});
      return runtime::ok_status();
    })
    .no_gradient()
    .doc(
        "splits each leaf of the layer in progress where the histogram gain is largest, for "
        "`layers` layers (0: until the trees are grown); returns the number of finished trees");

Output bucket_boundaries(GraphBuilder& b, Output var, Output x) {
  if (!var.valid()) return Output{};
  AttrMap attrs = variable_attrs(b, var, "BucketBoundaries");
  auto device = b.device(b.graph().node(var.node).device);
  return b.add("BucketBoundaries", {x}, attrs);
}

Output tree_ensemble_predict(GraphBuilder& b, Output x, Output ensemble, int64_t outputs,
                             bool average) {
  return b.add("TreeEnsemblePredict", {x, ensemble}, {{"outputs", outputs}, {"average", average}});
}

Output grow_tree_layer(GraphBuilder& b, Output ensemble, Output x, Output gradients,
                       Output hessians, Output boundaries, const TreeGrowth& growth) {
  if (!ensemble.valid()) return Output{};
  AttrMap attrs = variable_attrs(b, ensemble, "GrowTreeLayer");
  attrs.insert({{"forest", growth.forest},
                {"trees_per_round", growth.trees_per_round},
                {"max_depth", growth.max_depth},
                {"learning_rate", growth.learning_rate},
                {"l1", growth.l1},
                {"l2", growth.l2},
                {"tree_complexity", growth.tree_complexity},
                {"min_node_weight", growth.min_node_weight},
                {"center_bias", growth.center_bias},
                {"features_per_node", growth.features_per_node},
                {"bagging", growth.bagging},
                {"seed", growth.seed},
                {"layers", growth.layers}});
  // Grown where the ensemble lives (its parameter server), as updates are.
  auto device = b.device(b.graph().node(ensemble.node).device);
  return b.add("GrowTreeLayer", {x, gradients, hessians, boundaries}, attrs);
}

}  // namespace troupe::ops
