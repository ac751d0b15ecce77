#include "ops/nn_ops.h"

#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/op_def_names.h"
#include "ops/random_ops.h"
#include "ops/shape_fns.h"

namespace troupe::ops {

namespace {
Output x_of(const Node& n) { return n.inputs[0]; }
Output out_of(const Node& n, int i = 0) { return Output{n.id, i}; }
Output positive(GraphBuilder& b, Output x) { return greater(b, x, scalar_like(b, x, 0.0)); }

constexpr double kSeluScale = 1.0507009873554804934193349852946;
constexpr double kSeluAlpha = 1.6732632423543772848170429916717;

Status gradient_pair(InferenceContext& c) {
  TROUPE_RETURN_IF_ERROR(c.expect_floating(0));
  TROUPE_RETURN_IF_ERROR(c.expect_same_dtype(0, 1));
  c.set_output(0, c.input_dtype(0), c.input_shape(0));
  return runtime::ok_status();
}

Status last_dim_rank2(InferenceContext& c) {
  TROUPE_RETURN_IF_ERROR(c.expect_floating(0));
  const Shape& s = c.input_shape(0);
  if (s.rank_known() && s.rank() < 1) return c.error("needs rank >= 1, got a scalar");
  c.set_output(0, c.input_dtype(0), s);
  return runtime::ok_status();
}
}  // namespace

// y = max(x, 0); dx = dy where y > 0, which is where x > 0. The mask is read from y, as TF
// does, so that x has one consumer: its producer's buffer dies at the Relu, which may then
// write into it, instead of living on until the backward pass.
TROUPE_REGISTER_OP(Relu)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_numeric)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{b.add("ReluGrad", {dy[0], out_of(n)})};
    })
    .doc("y = max(x, 0)");

TROUPE_REGISTER_OP(ReluGrad)
    .input("dy")
    .input("x")
    .output("dx")
    .shape_fn(gradient_pair)
    .no_gradient()
    .doc(
        "dx = dy where x > 0, else 0; x is the Relu's input or its output, positive at the same "
        "places (second derivatives are not supported)");

// y = min(max(x, 0), 6); dx = dy where 0 < x < 6
TROUPE_REGISTER_OP(Relu6)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_numeric)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      Output x = x_of(n);
      Output inside = logical_and(b, positive(b, x), less(b, x, scalar_like(b, x, 6.0)));
      return Grads{mul(b, dy[0], cast(b, inside, b.dtype(x)))};
    })
    .doc("y = min(max(x, 0), 6)");

// y = x if x > 0 else e^x - 1; dx = dy if x > 0 else dy (y + 1)
TROUPE_REGISTER_OP(Elu)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      Output neg_branch = mul(b, dy[0], add(b, out_of(n), 1.0));
      return Grads{select(b, positive(b, x_of(n)), dy[0], neg_branch)};
    })
    .doc("y = x if x > 0 else exp(x) - 1");

// y = s x if x > 0 else s a (e^x - 1); dx = s dy if x > 0 else dy (y + s a)
TROUPE_REGISTER_OP(Selu)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      Output pos = mul(b, dy[0], kSeluScale);
      Output neg_branch = mul(b, dy[0], add(b, out_of(n), kSeluScale * kSeluAlpha));
      return Grads{select(b, positive(b, x_of(n)), pos, neg_branch)};
    })
    .doc(
        "y = scale * (x if x > 0 else alpha * (exp(x) - 1)), with the self-normalising "
        "constants scale = 1.0507..., alpha = 1.6732...");

// y = x if x > 0 else alpha x; dx = dy if x > 0 else alpha dy
TROUPE_REGISTER_OP(LeakyRelu)
    .input("x")
    .output("y")
    .attr("alpha", 0.2)
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      Output scaled = mul(b, dy[0], n.attr<double>("alpha"));
      return Grads{select(b, positive(b, x_of(n)), dy[0], scaled)};
    })
    .doc("y = x if x > 0 else alpha * x");

// y = 1 / (1 + e^-x); dx = dy y (1 - y)
TROUPE_REGISTER_OP(Sigmoid)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{b.add("SigmoidGrad", {out_of(n), dy[0]})};
    })
    .doc("y = 1 / (1 + exp(-x))");

TROUPE_REGISTER_OP(SigmoidGrad)
    .input("y")
    .input("dy")
    .output("dx")
    .shape_fn(gradient_pair)
    .no_gradient()
    .doc("dx = dy * y * (1 - y) (second derivatives are not supported)");

// y = tanh x; dx = dy (1 - y^2)
TROUPE_REGISTER_OP(Tanh)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{b.add("TanhGrad", {out_of(n), dy[0]})};
    })
    .doc("y = tanh(x)");

TROUPE_REGISTER_OP(TanhGrad)
    .input("y")
    .input("dy")
    .output("dx")
    .shape_fn(gradient_pair)
    .no_gradient()
    .doc("dx = dy * (1 - y^2) (second derivatives are not supported)");

// y = ln(1 + e^x); dx = dy sigmoid(x)
TROUPE_REGISTER_OP(Softplus)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{mul(b, dy[0], sigmoid(b, x_of(n)))};
    })
    .doc("y = ln(1 + exp(x)), computed without overflow");

// y = x / (1 + |x|); dx = dy / (1 + |x|)^2
TROUPE_REGISTER_OP(Softsign)
    .input("x")
    .output("y")
    .shape_fn(shape_fns::unchanged_floating)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{div(b, dy[0], square(b, add(b, abs(b, x_of(n)), 1.0)))};
    })
    .doc("y = x / (1 + |x|)");

// y = value + bias along the last dim; dvalue = dy, dbias = dy summed over all other dims
TROUPE_REGISTER_OP(BiasAdd)
    .input("value")
    .input("bias")
    .output("y")
    .shape_fn([](InferenceContext& c) {
      TROUPE_RETURN_IF_ERROR(c.expect_same_dtype(0, 1));
      TROUPE_RETURN_IF_ERROR(c.expect_rank(1, 1));
      const Shape& v = c.input_shape(0);
      const Shape& bias = c.input_shape(1);
      if (v.rank_known() && v.rank() < 1) return c.error("value must have rank >= 1");
      if (v.rank_known() && bias.rank_known() && v.dim(v.rank() - 1) >= 0 && bias.dim(0) >= 0 &&
          v.dim(v.rank() - 1) != bias.dim(0)) {
        return c.error("bias of shape ", bias, " does not match the last dim of ", v);
      }
      c.set_output(0, c.input_dtype(0), v);
      return runtime::ok_status();
    })
    .gradient([](GraphBuilder& b, const Node&, const Grads& dy) {
      return Grads{dy[0], b.add("BiasAddGrad", {dy[0]})};
    })
    .doc("y = value + bias, bias broadcast along the last dim (NHWC channels)");

TROUPE_REGISTER_OP(BiasAddGrad)
    .input("dy")
    .output("dbias")
    .shape_fn([](InferenceContext& c) {
      const Shape& s = c.input_shape(0);
      c.set_output(0, c.input_dtype(0), s.rank_known() ? Shape{s.dim(s.rank() - 1)} : Shape{-1});
      return runtime::ok_status();
    })
    .no_gradient()
    .doc("dbias = dy summed over every dim but the last (second derivatives are not supported)");

// MatMul, BiasAdd and an optional activation in one node, as TF's _FusedMatMul. Graphs do not
// write it: a session puts it in place of such a chain when it makes a plan
// (runtime/remapper.h), which saves two hops and a pass over the product per dense layer.
TROUPE_REGISTER_OP(_FusedMatMul)
    .input("a")
    .input("b")
    .input("bias")
    .output("y")
    .attr("transpose_a", false)
    .attr("transpose_b", false)
    .attr("activation", std::string())
    .attr("fused_from", std::string())  // the nodes it stands for, named in its errors
    .shape_fn([](InferenceContext& c) {
      TROUPE_RETURN_IF_ERROR(shape_fns::matmul(c));
      return shape_fns::fused_bias_activation(c, 2);
    })
    .no_gradient()
    .doc("y = activation(op(a) · op(b) + bias); a plan-time fusion, not differentiated");

namespace {

// [..., n] -> [..., k], for TopKV2's outputs.
Status top_k_shape(InferenceContext& c) {
  TROUPE_RETURN_IF_ERROR(c.expect_floating(0));
  const int64_t k = c.attr<int64_t>("k");
  if (k < 0) return c.error("k must be >= 0, got ", k);
  Shape s = c.input_shape(0);
  if (s.rank_known()) {
    if (s.rank() < 1) return c.error("needs rank >= 1, got a scalar");
    const int64_t n = s.dim(s.rank() - 1);
    if (n >= 0 && k > n) return c.error("k ", k, " is more than the last dimension of ", s);
    std::vector<int64_t> dims = s.dims();
    dims.back() = k;
    s = Shape(dims);
  }
  c.set_output(0, c.input_dtype(0), s);
  c.set_output(1, DType::kInt32, s);
  return runtime::ok_status();
}

}  // namespace

// values, indices = the k largest entries of each last-dimension row, largest first (ties: the
// lower index first); dx = dvalues routed to where each came from.
TROUPE_REGISTER_OP(TopKV2)
    .input("x")
    .output("values")
    .output("indices")
    .attr("k", int64_t{1})
    .shape_fn(top_k_shape)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{b.add("TopKGrad", {x_of(n), out_of(n, 1), dy[0]})};
    })
    .doc("values, indices = the k largest of each row of x's last dimension (tf.math.top_k)");

TROUPE_REGISTER_OP(TopKGrad)
    .input("x")
    .input("indices")
    .input("dvalues")
    .output("dx")
    .kernel_dtype_from_input(2)
    .shape_fn([](InferenceContext& c) {
      c.set_output(0, c.input_dtype(2), c.input_shape(0));
      return runtime::ok_status();
    })
    .no_gradient()
    .doc("dx = dvalues put back where TopKV2 took each value (x read for its shape)");

TROUPE_REGISTER_OP(InTopK)
    .input("predictions")
    .input("targets")
    .output("in_top_k")
    .attr("k", int64_t{1})
    .kernel_dtype_from_input(0)
    .shape_fn([](InferenceContext& c) -> Status {
      TROUPE_RETURN_IF_ERROR(c.expect_floating(0));
      TROUPE_RETURN_IF_ERROR(c.expect_rank(0, 2));
      TROUPE_RETURN_IF_ERROR(c.expect_rank(1, 1));
      const DType t = c.input_dtype(1);
      if (t != DType::kInt32 && t != DType::kInt64) {
        return c.error("targets must be int32 or int64, got ", runtime::dtype_name(t));
      }
      c.set_output(0, DType::kBool,
                   Shape{c.input_shape(0).rank_known() ? c.input_shape(0).dim(0) : int64_t{-1}});
      return runtime::ok_status();
    })
    .no_gradient()
    .doc(
        "in_top_k = whether each row's target class is among its k largest predictions "
        "(tf.math.in_top_k; ties count as in, a non-finite prediction or a target out of range "
        "as out)");

// y = e^x / sum e^x along the last dim; dx = (dy - sum(dy y)) y
TROUPE_REGISTER_OP(Softmax)
    .input("logits")
    .output("y")
    .shape_fn(last_dim_rank2)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      Output y = out_of(n);
      Output dot = reduce_sum(b, mul(b, dy[0], y), {-1}, true);
      return Grads{mul(b, sub(b, dy[0], dot), y)};
    })
    .doc("y = exp(x) / sum(exp(x)) along the last dim, computed stably");

// y = x - logsumexp(x) along the last dim; dx = dy - e^y sum(dy)
TROUPE_REGISTER_OP(LogSoftmax)
    .input("logits")
    .output("y")
    .shape_fn(last_dim_rank2)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      Output total = reduce_sum(b, dy[0], {-1}, true);
      return Grads{sub(b, dy[0], mul(b, exp(b, out_of(n)), total))};
    })
    .doc("y = x - log(sum(exp(x))) along the last dim, computed stably");

namespace {
Status xent_shape(InferenceContext& c, bool sparse) {
  TROUPE_RETURN_IF_ERROR(c.expect_floating(0));
  TROUPE_RETURN_IF_ERROR(c.expect_rank(0, 2));
  const Shape& f = c.input_shape(0);
  const Shape& l = c.input_shape(1);
  if (sparse) {
    DType t = c.input_dtype(1);
    if (t != DType::kInt32 && t != DType::kInt64) {
      return c.error("labels must be int32 or int64 class ids, got ", runtime::dtype_name(t));
    }
    TROUPE_RETURN_IF_ERROR(c.expect_rank(1, 1));
    if (f.rank_known() && l.rank_known() && !Shape{f.dim(0)}.compatible_with(l)) {
      return c.error("labels of shape ", l, " for logits of shape ", f);
    }
  } else {
    TROUPE_RETURN_IF_ERROR(c.expect_same_dtype(0, 1));
    if (!f.compatible_with(l)) return c.error("labels of shape ", l, " for logits of shape ", f);
  }
  int64_t batch = f.rank_known() ? f.dim(0) : -1;
  c.set_output(0, c.input_dtype(0), Shape{batch});
  c.set_output(1, c.input_dtype(0), f.rank_known() ? f : Shape{-1, -1});
  return runtime::ok_status();
}
}  // namespace

// loss = -sum(labels log softmax(features)); backprop = softmax(features) - labels.
// dfeatures = dloss backprop; dlabels = -dloss log_softmax(features).
TROUPE_REGISTER_OP(SoftmaxCrossEntropyWithLogits)
    .input("features")
    .input("labels")
    .output("loss")
    .output("backprop")
    .shape_fn([](InferenceContext& c) { return xent_shape(c, false); })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      Output g = expand_dims(b, dy[0], -1);
      Output dfeatures = mul(b, g, out_of(n, 1));
      Output dlabels = mul(b, g, neg(b, log_softmax(b, n.inputs[0])));
      return Grads{dfeatures, dlabels};
    })
    .doc(
        "loss[i] = -sum_j labels[i,j] * log(softmax(features[i])[j]); backprop = its "
        "gradient with respect to features");

TROUPE_REGISTER_OP(SparseSoftmaxCrossEntropyWithLogits)
    .input("features")
    .input("labels")
    .output("loss")
    .output("backprop")
    .shape_fn([](InferenceContext& c) { return xent_shape(c, true); })
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{mul(b, expand_dims(b, dy[0], -1), out_of(n, 1)), Output{}};
    })
    .doc(
        "loss[i] = -log(softmax(features[i])[labels[i]]); a label outside [0, classes) is an "
        "error");

Output relu(GraphBuilder& b, Output x) { return b.add("Relu", {x}); }
Output relu6(GraphBuilder& b, Output x) { return b.add("Relu6", {x}); }
Output elu(GraphBuilder& b, Output x) { return b.add("Elu", {x}); }
Output selu(GraphBuilder& b, Output x) { return b.add("Selu", {x}); }
Output leaky_relu(GraphBuilder& b, Output x, double alpha) {
  return b.add("LeakyRelu", {x}, {{"alpha", alpha}});
}
Output sigmoid(GraphBuilder& b, Output x) { return b.add("Sigmoid", {x}); }
Output tanh(GraphBuilder& b, Output x) { return b.add("Tanh", {x}); }
Output softplus(GraphBuilder& b, Output x) { return b.add("Softplus", {x}); }
Output softsign(GraphBuilder& b, Output x) { return b.add("Softsign", {x}); }
Output bias_add(GraphBuilder& b, Output value, Output bias) {
  return b.add("BiasAdd", {value, bias});
}
Output softmax(GraphBuilder& b, Output logits) { return b.add("Softmax", {logits}); }
Output log_softmax(GraphBuilder& b, Output logits) { return b.add("LogSoftmax", {logits}); }

Output softmax_cross_entropy_with_logits(GraphBuilder& b, Output labels, Output logits) {
  std::vector<Output> out = b.add_node("SoftmaxCrossEntropyWithLogits", {logits, labels});
  return out.empty() ? Output{} : out[0];
}
Output sparse_softmax_cross_entropy_with_logits(GraphBuilder& b, Output labels, Output logits) {
  std::vector<Output> out = b.add_node("SparseSoftmaxCrossEntropyWithLogits", {logits, labels});
  return out.empty() ? Output{} : out[0];
}
Output sigmoid_cross_entropy_with_logits(GraphBuilder& b, Output labels, Output logits) {
  auto scope = b.name_scope("sigmoid_cross_entropy");
  Output zero = zeros_like(b, logits);
  Output relu_x = select(b, greater_equal(b, logits, zero), logits, zero);
  Output log_term = log1p(b, exp(b, neg(b, abs(b, logits))));
  return add(b, sub(b, relu_x, mul(b, logits, labels)), log_term);
}
Output mean_squared_error(GraphBuilder& b, Output labels, Output predictions) {
  auto scope = b.name_scope("mean_squared_error");
  return reduce_mean(b, square(b, sub(b, predictions, labels)));
}
Output l2_loss(GraphBuilder& b, Output x) {
  auto scope = b.name_scope("l2_loss");
  return mul(b, reduce_sum(b, square(b, x)), 0.5);
}
Output dropout(GraphBuilder& b, Output x, double rate, bool training, int64_t seed) {
  if (!training || rate == 0) return x;
  if (rate < 0 || rate >= 1) {
    b.record_error(runtime::invalid_argument("dropout: rate must be in [0, 1), got ", rate));
    return Output{};
  }
  auto scope = b.name_scope("dropout");
  Output u = random_uniform_like(b, x, seed);
  Output keep = cast(b, greater_equal(b, u, scalar_like(b, u, rate)), b.dtype(x));
  return mul(b, x, mul(b, keep, 1.0 / (1.0 - rate)));
}

Output l2_normalize(GraphBuilder& b, Output x, const std::vector<int64_t>& axes, double epsilon) {
  auto scope = b.name_scope("l2_normalize");
  Output sum = reduce_sum(b, square(b, x), axes, /*keep_dims=*/true);
  return mul(b, x, rsqrt(b, maximum(b, sum, scalar_like(b, sum, epsilon))));
}

TopK top_k(GraphBuilder& b, Output x, int64_t k) {
  std::vector<Output> out = b.add_node("TopKV2", {x}, {{"k", k}});
  if (out.size() != 2) return {};  // the builder holds the error
  return {out[0], out[1]};
}

Output in_top_k(GraphBuilder& b, Output predictions, Output targets, int64_t k) {
  return b.add("InTopK", {predictions, targets}, {{"k", k}});
}

Moments moments(GraphBuilder& b, Output x, const std::vector<int64_t>& axes, bool keep_dims) {
  auto scope = b.name_scope("moments");
  Output mean = reduce_mean(b, x, axes, /*keep_dims=*/true);
  Output variance = reduce_mean(b, square(b, sub(b, x, stop_gradient(b, mean))), axes, keep_dims);
  // The variance's gradient through the mean is zero (the deviations sum to nothing), so
  // stopping it there changes no value and saves the backward pass a term.
  return {keep_dims ? mean : squeeze(b, mean, axes), variance};
}

Output batch_normalization(GraphBuilder& b, Output x, Output mean, Output variance, Output offset,
                           Output scale, double epsilon) {
  auto scope = b.name_scope("batchnorm");
  Output inv = rsqrt(b, add(b, variance, epsilon));
  if (scale.valid()) inv = mul(b, inv, scale);
  Output y = mul(b, sub(b, x, mean), inv);
  return offset.valid() ? add(b, y, offset) : y;
}

}  // namespace troupe::ops
