// 2-D convolution and pooling on NHWC tensors, with TF's SAME/VALID padding. The geometry below
// is shared by the shape functions and the kernels.
//
//   Output y = conv2d(b, images, filters, {1, 1}, "SAME");        // filters: [kh, kw, in, out]
//   Output d = depthwise_conv2d(b, images, f, {1, 1}, "SAME");    // f: [kh, kw, in, mult]
//   Output p = max_pool(b, y, {2, 2}, {2, 2}, "VALID");
//
// Not thread-safe (builders); conv_geometry is a pure function.
#pragma once

#include <array>
#include <string>

#include "ops/builder_names.h"

namespace troupe::ops {

struct ConvGeometry {
  int64_t batch = 0, in_h = 0, in_w = 0, in_c = 0;
  int64_t k_h = 0, k_w = 0, out_c = 0;
  int64_t stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t out_h = 0, out_w = 0, pad_top = 0, pad_left = 0;
};

// Output size and padding for an input of [batch, in_h, in_w, in_c] and a window of k_h x k_w;
// dims may be -1 (then the outputs that depend on them are -1 too).
runtime::Status conv_geometry(int64_t in_h, int64_t in_w, int64_t k_h, int64_t k_w,
                              int64_t stride_h, int64_t stride_w, int64_t dilation_h,
                              int64_t dilation_w, const std::string& padding, ConvGeometry* g);
// Reads strides/dilations/padding (and ksize for pools) from a node and fills g from shapes.
runtime::Status conv_geometry_for(const runtime::Node& node, const runtime::Shape& input,
                                  const runtime::Shape& filter_or_empty, ConvGeometry* g);

Output conv2d(GraphBuilder& b, Output input, Output filter, std::array<int64_t, 2> strides,
              const std::string& padding, std::array<int64_t, 2> dilations = {1, 1},
              const std::string& name = "");
// tf.nn.conv2d_transpose (a "deconvolution"): the transpose of conv2d, which maps `value`
// [batch, h, w, in_c] to `output_shape` [batch, H, W, out_c] such that conv2d of the output
// with the same filter [kh, kw, out_c, in_c], strides and padding has value's shape.
Output conv2d_transpose(GraphBuilder& b, Output value, Output filter, const Shape& output_shape,
                        std::array<int64_t, 2> strides, const std::string& padding,
                        const std::string& name = "");
// tf.nn.depthwise_conv2d: filter [kh, kw, in_c, multiplier]; each input channel is convolved
// with its own filters, giving in_c * multiplier output channels (MobileNet's separable
// convolutions: a depthwise_conv2d, then a 1x1 conv2d).
Output depthwise_conv2d(GraphBuilder& b, Output input, Output filter,
                        std::array<int64_t, 2> strides, const std::string& padding,
                        std::array<int64_t, 2> dilations = {1, 1}, const std::string& name = "");
Output max_pool(GraphBuilder& b, Output input, std::array<int64_t, 2> ksize,
                std::array<int64_t, 2> strides, const std::string& padding,
                const std::string& name = "");
// Averages over the window's elements inside the input (SAME padding does not count zeros).
Output avg_pool(GraphBuilder& b, Output input, std::array<int64_t, 2> ksize,
                std::array<int64_t, 2> strides, const std::string& padding,
                const std::string& name = "");

}  // namespace troupe::ops
