#include "ops/conv_ops.h"

#include <algorithm>

#include "ops/array_ops.h"
#include "ops/op_def_names.h"
#include "ops/shape_fns.h"

namespace troupe::ops {

Status conv_geometry(int64_t in_h, int64_t in_w, int64_t k_h, int64_t k_w, int64_t stride_h,
                     int64_t stride_w, int64_t dilation_h, int64_t dilation_w,
                     const std::string& padding, ConvGeometry* g) {
  if (stride_h < 1 || stride_w < 1) return runtime::invalid_argument("strides must be >= 1");
  if (dilation_h < 1 || dilation_w < 1) return runtime::invalid_argument("dilations must be >= 1");
  if (padding != "SAME" && padding != "VALID") {
    return runtime::invalid_argument("padding must be SAME or VALID, got '", padding, "'");
  }
  g->in_h = in_h;
  g->in_w = in_w;
  g->k_h = k_h;
  g->k_w = k_w;
  g->stride_h = stride_h;
  g->stride_w = stride_w;
  g->dilation_h = dilation_h;
  g->dilation_w = dilation_w;
  auto one = [&](int64_t in, int64_t k, int64_t s, int64_t d, int64_t* out, int64_t* pad) {
    if (in < 0 || k < 0) {
      *out = -1;
      *pad = 0;
      return runtime::ok_status();
    }
    int64_t span = (k - 1) * d + 1;
    if (padding == "VALID") {
      if (in < span) {
        return runtime::invalid_argument("window of ", span, " is larger than the input's ", in);
      }
      *out = (in - span) / s + 1;
      *pad = 0;
    } else {
      *out = (in + s - 1) / s;
      int64_t total = std::max<int64_t>((*out - 1) * s + span - in, 0);
      *pad = total / 2;
    }
    return runtime::ok_status();
  };
  TROUPE_RETURN_IF_ERROR(one(in_h, k_h, stride_h, dilation_h, &g->out_h, &g->pad_top));
  return one(in_w, k_w, stride_w, dilation_w, &g->out_w, &g->pad_left);
}

Status conv_geometry_for(const Node& node, const Shape& input, const Shape& filter,
                         ConvGeometry* g) {
  const auto& strides = node.attr<std::vector<int64_t>>("strides");
  if (strides.size() != 4 || strides[0] != 1 || strides[3] != 1) {
    return runtime::invalid_argument("strides must be [1, h, w, 1] (NHWC)");
  }
  if (!input.rank_known() || input.rank() != 4) {
    return runtime::invalid_argument("input must be NHWC (rank 4), got ", input);
  }
  int64_t k_h, k_w, d_h = 1, d_w = 1;
  if (node.attrs.count("ksize")) {
    const auto& k = node.attr<std::vector<int64_t>>("ksize");
    if (k.size() != 4 || k[0] != 1 || k[3] != 1) {
      return runtime::invalid_argument("ksize must be [1, h, w, 1]");
    }
    k_h = k[1];
    k_w = k[2];
    g->out_c = input.dim(3);
  } else {
    if (!filter.rank_known() || filter.rank() != 4) {
      return runtime::invalid_argument("filter must be [h, w, in, out], got ", filter);
    }
    const auto& d = node.attr<std::vector<int64_t>>("dilations");
    if (d.size() != 4 || d[0] != 1 || d[3] != 1) {
      return runtime::invalid_argument("dilations must be [1, h, w, 1]");
    }
    d_h = d[1];
    d_w = d[2];
    k_h = filter.dim(0);
    k_w = filter.dim(1);
    g->out_c = filter.dim(3);
    if (input.dim(3) >= 0 && filter.dim(2) >= 0 && input.dim(3) != filter.dim(2)) {
      return runtime::invalid_argument("input has ", input.dim(3), " channels, the filter expects ",
                                       filter.dim(2));
    }
  }
  g->batch = input.dim(0);
  g->in_c = input.dim(3);
  return conv_geometry(input.dim(1), input.dim(2), k_h, k_w, strides[1], strides[2], d_h, d_w,
                       node.attr<std::string>("padding"), g);
}

namespace {

const runtime::AttrMap kConvDefaults{{"strides", std::vector<int64_t>{1, 1, 1, 1}},
                                     {"dilations", std::vector<int64_t>{1, 1, 1, 1}},
                                     {"padding", std::string("VALID")}};
const runtime::AttrMap kPoolDefaults{{"strides", std::vector<int64_t>{1, 1, 1, 1}},
                                     {"ksize", std::vector<int64_t>{1, 1, 1, 1}},
                                     {"padding", std::string("VALID")}};

Status conv_shape(InferenceContext& c) {
  TROUPE_RETURN_IF_ERROR(c.expect_floating(0));
  TROUPE_RETURN_IF_ERROR(c.expect_same_dtype(0, 1));
  ConvGeometry g;
  Status s = conv_geometry_for(c.node(), c.input_shape(0), c.input_shape(1), &g);
  if (!s.ok()) return c.error(s.message());
  c.set_output(0, c.input_dtype(0), Shape{g.batch, g.out_h, g.out_w, g.out_c});
  return runtime::ok_status();
}

// As conv_shape, with in_c * multiplier output channels.
Status depthwise_shape(InferenceContext& c) {
  TROUPE_RETURN_IF_ERROR(c.expect_floating(0));
  TROUPE_RETURN_IF_ERROR(c.expect_same_dtype(0, 1));
  ConvGeometry g;
  Status s = conv_geometry_for(c.node(), c.input_shape(0), c.input_shape(1), &g);
  if (!s.ok()) return c.error(s.message());
  const int64_t out_c = g.in_c < 0 || g.out_c < 0 ? -1 : g.in_c * g.out_c;
  c.set_output(0, c.input_dtype(0), Shape{g.batch, g.out_h, g.out_w, out_c});
  return runtime::ok_status();
}

Status pool_shape(InferenceContext& c) {
  TROUPE_RETURN_IF_ERROR(c.expect_floating(0));
  ConvGeometry g;
  Status s = conv_geometry_for(c.node(), c.input_shape(0), Shape{}, &g);
  if (!s.ok()) return c.error(s.message());
  c.set_output(0, c.input_dtype(0), Shape{g.batch, g.out_h, g.out_w, g.out_c});
  return runtime::ok_status();
}

// Output i is shaped like input `ref`, with the dtype of input `dtype_from`.
Status like_input(InferenceContext& c, int ref, int dtype_from) {
  c.set_output(0, c.input_dtype(dtype_from), c.input_shape(ref));
  return runtime::ok_status();
}

}  // namespace

// y = input * filter (cross-correlation, as TF). dinput and dfilter come from the two backprop
// ops, which reuse y's geometry.
TROUPE_REGISTER_OP(Conv2D)
    .input("input")
    .input("filter")
    .output("y")
    .attrs(kConvDefaults)
    .shape_fn(conv_shape)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      Output di = b.add("Conv2DBackpropInput", {n.inputs[0], n.inputs[1], dy[0]}, n.attrs);
      Output df = b.add("Conv2DBackpropFilter", {n.inputs[0], n.inputs[1], dy[0]}, n.attrs);
      return Grads{di, df};
    })
    .doc(
        "y[b,i,j,o] = sum_{di,dj,c} input[b, i*s+di*d-pad, j*s+dj*d-pad, c] * "
        "filter[di,dj,c,o] (NHWC input, HWIO filter)");

// Conv2D, BiasAdd and an optional activation in one node, as TF's _FusedConv2D: what a session
// runs in place of such a chain (runtime/remapper.h), not something graphs write.
TROUPE_REGISTER_OP(_FusedConv2D)
    .input("input")
    .input("filter")
    .input("bias")
    .output("y")
    .attrs(kConvDefaults)
    .attr("activation", std::string())
    .attr("fused_from", std::string())  // the nodes it stands for, named in its errors
    .shape_fn([](InferenceContext& c) {
      TROUPE_RETURN_IF_ERROR(conv_shape(c));
      return shape_fns::fused_bias_activation(c, 2);
    })
    .no_gradient()
    .doc("y = activation(conv2d(input, filter) + bias); a plan-time fusion, not differentiated");

TROUPE_REGISTER_OP(Conv2DBackpropInput)
    .input("input")
    .input("filter")
    .input("dy")
    .output("dinput")
    .attrs(kConvDefaults)
    .kernel_dtype_from_input(2)
    .shape_fn([](InferenceContext& c) { return like_input(c, 0, 2); })
    // As conv2d_transpose's forward op: for g = dL/d(dinput), d(dy) = conv2d(g, filter) (the
    // adjoint of the adjoint), d(filter) = Conv2DBackpropFilter(g, filter, dy).
    .gradient([](GraphBuilder& b, const Node& n, const Grads& g) {
      Output d_dy = b.add("Conv2D", {g[0], n.inputs[1]}, n.attrs);
      Output d_filter = b.add("Conv2DBackpropFilter", {g[0], n.inputs[1], n.inputs[2]}, n.attrs);
      return Grads{Output{}, d_filter, d_dy};
    })
    .doc(
        "dinput = the gradient of Conv2D with respect to its input (input is read for its "
        "shape only), and the transposed convolution conv2d_transpose builds on it");

TROUPE_REGISTER_OP(Conv2DBackpropFilter)
    .input("input")
    .input("filter")
    .input("dy")
    .output("dfilter")
    .attrs(kConvDefaults)
    .kernel_dtype_from_input(2)
    .shape_fn([](InferenceContext& c) { return like_input(c, 1, 2); })
    .no_gradient()
    .doc(
        "dfilter = the gradient of Conv2D with respect to its filter (filter is read for its "
        "shape only; second derivatives are not supported)");

// Depthwise: each input channel c is convolved with its own `multiplier` filters
// filter[., ., c, q], giving output channels c * multiplier + q (tf.nn.depthwise_conv2d).
TROUPE_REGISTER_OP(DepthwiseConv2dNative)
    .input("input")
    .input("filter")
    .output("y")
    .attrs(kConvDefaults)
    .shape_fn(depthwise_shape)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      Output di =
          b.add("DepthwiseConv2dNativeBackpropInput", {n.inputs[0], n.inputs[1], dy[0]}, n.attrs);
      Output df =
          b.add("DepthwiseConv2dNativeBackpropFilter", {n.inputs[0], n.inputs[1], dy[0]}, n.attrs);
      return Grads{di, df};
    })
    .doc(
        "y[b,i,j,c*m+q] = sum_{di,dj} input[b, i*s+di*d-pad, j*s+dj*d-pad, c] * "
        "filter[di,dj,c,q] (NHWC input, filter [h, w, in, multiplier])");

TROUPE_REGISTER_OP(DepthwiseConv2dNativeBackpropInput)
    .input("input")
    .input("filter")
    .input("dy")
    .output("dinput")
    .attrs(kConvDefaults)
    .kernel_dtype_from_input(2)
    .shape_fn([](InferenceContext& c) { return like_input(c, 0, 2); })
    // Linear in dy and in filter, as Conv2DBackpropInput: its adjoint in dy is the forward op.
    .gradient([](GraphBuilder& b, const Node& n, const Grads& g) {
      Output d_dy = b.add("DepthwiseConv2dNative", {g[0], n.inputs[1]}, n.attrs);
      Output d_filter =
          b.add("DepthwiseConv2dNativeBackpropFilter", {g[0], n.inputs[1], n.inputs[2]}, n.attrs);
      return Grads{Output{}, d_filter, d_dy};
    })
    .doc("dinput = the gradient of DepthwiseConv2dNative with respect to its input");

TROUPE_REGISTER_OP(DepthwiseConv2dNativeBackpropFilter)
    .input("input")
    .input("filter")
    .input("dy")
    .output("dfilter")
    .attrs(kConvDefaults)
    .kernel_dtype_from_input(2)
    .shape_fn([](InferenceContext& c) { return like_input(c, 1, 2); })
    .no_gradient()
    .doc(
        "dfilter = the gradient of DepthwiseConv2dNative with respect to its filter (second "
        "derivatives are not supported)");

// y = max over each window; dx routes dy to the first maximum of each window.
TROUPE_REGISTER_OP(MaxPool)
    .input("input")
    .output("y")
    .attrs(kPoolDefaults)
    .shape_fn(pool_shape)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{b.add("MaxPoolGrad", {n.inputs[0], Output{n.id, 0}, dy[0]}, n.attrs)};
    })
    .doc("y[b,i,j,c] = max over the window at (i*s - pad, j*s - pad) of input[b,.,.,c]");

TROUPE_REGISTER_OP(MaxPoolGrad)
    .input("input")
    .input("y")
    .input("dy")
    .output("dinput")
    .attrs(kPoolDefaults)
    .kernel_dtype_from_input(0)
    .shape_fn([](InferenceContext& c) { return like_input(c, 0, 0); })
    .no_gradient()
    .doc(
        "dinput = dy added at the first maximum of each window (second derivatives are not "
        "supported)");

// y = mean over each window's elements inside the input; dx spreads dy back evenly.
TROUPE_REGISTER_OP(AvgPool)
    .input("input")
    .output("y")
    .attrs(kPoolDefaults)
    .shape_fn(pool_shape)
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      return Grads{b.add("AvgPoolGrad", {n.inputs[0], dy[0]}, n.attrs)};
    })
    .doc("y[b,i,j,c] = mean of input[b,.,.,c] over the window's positions inside the input");

TROUPE_REGISTER_OP(AvgPoolGrad)
    .input("input")
    .input("dy")
    .output("dinput")
    .attrs(kPoolDefaults)
    .kernel_dtype_from_input(1)
    .shape_fn([](InferenceContext& c) { return like_input(c, 0, 1); })
    .no_gradient()
    .doc("dinput = dy spread evenly over each window (second derivatives are not supported)");

Output conv2d_transpose(GraphBuilder& b, Output value, Output filter, const Shape& output_shape,
                        std::array<int64_t, 2> strides, const std::string& padding,
                        const std::string& name) {
  auto scope = b.name_scope(name.empty() ? "conv2d_transpose" : name);
  Output shaped = zeros(b, output_shape, b.dtype(value), "output_shape");
  return b.add("Conv2DBackpropInput", {shaped, filter, value},
               {{"strides", std::vector<int64_t>{1, strides[0], strides[1], 1}},
                {"dilations", std::vector<int64_t>{1, 1, 1, 1}},
                {"padding", padding}});
}

Output conv2d(GraphBuilder& b, Output input, Output filter, std::array<int64_t, 2> strides,
              const std::string& padding, std::array<int64_t, 2> dilations,
              const std::string& name) {
  return b.add("Conv2D", {input, filter},
               {{"strides", std::vector<int64_t>{1, strides[0], strides[1], 1}},
                {"dilations", std::vector<int64_t>{1, dilations[0], dilations[1], 1}},
                {"padding", padding}},
               name);
}

namespace {
Output pool(GraphBuilder& b, const char* op, Output input, std::array<int64_t, 2> ksize,
            std::array<int64_t, 2> strides, const std::string& padding, const std::string& name) {
  return b.add(op, {input},
               {{"ksize", std::vector<int64_t>{1, ksize[0], ksize[1], 1}},
                {"strides", std::vector<int64_t>{1, strides[0], strides[1], 1}},
                {"padding", padding}},
               name);
}
}  // namespace

Output depthwise_conv2d(GraphBuilder& b, Output input, Output filter,
                        std::array<int64_t, 2> strides, const std::string& padding,
                        std::array<int64_t, 2> dilations, const std::string& name) {
  return b.add("DepthwiseConv2dNative", {input, filter},
               {{"strides", std::vector<int64_t>{1, strides[0], strides[1], 1}},
                {"dilations", std::vector<int64_t>{1, dilations[0], dilations[1], 1}},
                {"padding", padding}},
               name);
}

Output max_pool(GraphBuilder& b, Output input, std::array<int64_t, 2> ksize,
                std::array<int64_t, 2> strides, const std::string& padding,
                const std::string& name) {
  return pool(b, "MaxPool", input, ksize, strides, padding, name);
}
Output avg_pool(GraphBuilder& b, Output input, std::array<int64_t, 2> ksize,
                std::array<int64_t, 2> strides, const std::string& padding,
                const std::string& name) {
  return pool(b, "AvgPool", input, ksize, strides, padding, name);
}

}  // namespace troupe::ops
