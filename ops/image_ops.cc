#include "ops/image_ops.h"

#include <cmath>

#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/op_def_names.h"
#include "ops/strided_slice.h"

namespace troupe::ops {

namespace {

Status decoded_shape(InferenceContext& c) {
  if (c.input_dtype(0) != DType::kString) {
    return c.error("contents must be a string scalar, got ", runtime::dtype_name(c.input_dtype(0)));
  }
  const int64_t channels = c.attr<int64_t>("channels");
  if (channels < 0 || channels > 4 || channels == 2) {
    return c.error("channels ", channels, " is not 0, 1, 3 or 4");
  }
  c.set_output(0, DType::kUInt8, Shape{-1, -1, channels == 0 ? -1 : channels});
  return runtime::ok_status();
}

Status encoded_shape(InferenceContext& c) {
  if (c.input_dtype(0) != DType::kUInt8) {
    return c.error("needs a uint8 image, got ", runtime::dtype_name(c.input_dtype(0)));
  }
  TROUPE_RETURN_IF_ERROR(c.expect_rank(0, 3));
  c.set_output(0, DType::kString, Shape{});
  return runtime::ok_status();
}

Status resized_shape(InferenceContext& c) {
  TROUPE_RETURN_IF_ERROR(c.expect_floating(0));
  const auto& size = c.attr<std::vector<int64_t>>("size");
  if (size.size() != 2 || size[0] < 1 || size[1] < 1) {
    return c.error("size must be [height, width] of positive numbers");
  }
  Shape s = c.input_shape(0);
  if (s.rank_known()) {
    if (s.rank() != 3 && s.rank() != 4) {
      return c.error("images are [h, w, c] or [batch, h, w, c], not ", s);
    }
    std::vector<int64_t> dims = s.dims();
    dims[dims.size() - 3] = size[0];
    dims[dims.size() - 2] = size[1];
    s = Shape(dims);
  }
  c.set_output(0, c.input_dtype(0), s);
  return runtime::ok_status();
}

// A resize's gradient: dy spread back by `grad_op` onto the images' shape.
runtime::GradFn resize_gradient(const char* grad_op) {
  return [grad_op](GraphBuilder& b, const Node& n, const Grads& dy) {
    return Grads{b.add(grad_op, {dy[0], n.inputs[0]},
                       {{"half_pixel_centers", n.attr<bool>("half_pixel_centers")}})};
  };
}

Status like_images(InferenceContext& c) {
  c.set_output(0, c.input_dtype(0), c.input_shape(1));
  return runtime::ok_status();
}

}  // namespace

TROUPE_REGISTER_OP(DecodePng)
    .input("contents")
    .output("image")
    .attr("channels", int64_t{0})
    .kernel_dtype_from_input(0)
    .shape_fn(decoded_shape)
    .no_gradient()
    .doc("image = the uint8 [h, w, c] pixels of a PNG file's bytes (tf.io.decode_png)");

TROUPE_REGISTER_OP(DecodeJpeg)
    .input("contents")
    .output("image")
    .attr("channels", int64_t{0})
    .kernel_dtype_from_input(0)
    .shape_fn(decoded_shape)
    .no_gradient()
    .doc("image = the uint8 [h, w, c] pixels of a JPEG file's bytes (tf.io.decode_jpeg)");

TROUPE_REGISTER_OP(DecodeImage)
    .input("contents")
    .output("image")
    .attr("channels", int64_t{0})
    .kernel_dtype_from_input(0)
    .shape_fn(decoded_shape)
    .no_gradient()
    .doc("image = the uint8 [h, w, c] pixels of a PNG or JPEG file's bytes (tf.io.decode_image)");

TROUPE_REGISTER_OP(EncodePng)
    .input("image")
    .output("contents")
    .kernel_dtype_from_input(0)
    .shape_fn(encoded_shape)
    .no_gradient()
    .doc("contents = a uint8 [h, w, c] image as PNG bytes (tf.io.encode_png)");

TROUPE_REGISTER_OP(EncodeJpeg)
    .input("image")
    .output("contents")
    .attr("quality", int64_t{95})
    .kernel_dtype_from_input(0)
    .shape_fn(encoded_shape)
    .no_gradient()
    .doc("contents = a uint8 [h, w, 1 or 3] image as JPEG bytes (tf.io.encode_jpeg)");

// y = images resized with bilinear weights; dimages = dy spread back by the same weights.
TROUPE_REGISTER_OP(ResizeBilinear)
    .input("images")
    .output("y")
    .attr("size", std::vector<int64_t>{})
    .attr("half_pixel_centers", true)
    .shape_fn(resized_shape)
    .gradient(resize_gradient("ResizeBilinearGrad"))
    .doc("y = images resized to size with bilinear interpolation (tf.image.resize)");

TROUPE_REGISTER_OP(ResizeBilinearGrad)
    .input("dy")
    .input("images")
    .output("dimages")
    .attr("half_pixel_centers", true)
    .kernel_dtype_from_input(0)
    .shape_fn(like_images)
    .no_gradient()
    .doc("dimages = dy spread back onto images' shape (images read for its shape)");

// y = the nearest pixel's value; dimages = dy summed onto the pixels each came from.
TROUPE_REGISTER_OP(ResizeNearestNeighbor)
    .input("images")
    .output("y")
    .attr("size", std::vector<int64_t>{})
    .attr("half_pixel_centers", true)
    .shape_fn(resized_shape)
    .gradient(resize_gradient("ResizeNearestNeighborGrad"))
    .doc("y = images resized to size, each pixel its nearest source pixel (tf.image.resize)");

TROUPE_REGISTER_OP(ResizeNearestNeighborGrad)
    .input("dy")
    .input("images")
    .output("dimages")
    .attr("half_pixel_centers", true)
    .kernel_dtype_from_input(0)
    .shape_fn(like_images)
    .no_gradient()
    .doc("dimages = dy summed onto the pixels of images each came from");

Output decode_png(GraphBuilder& b, Output contents, int64_t channels) {
  return b.add("DecodePng", {contents}, {{"channels", channels}});
}
Output decode_jpeg(GraphBuilder& b, Output contents, int64_t channels) {
  return b.add("DecodeJpeg", {contents}, {{"channels", channels}});
}
Output decode_image(GraphBuilder& b, Output contents, int64_t channels) {
  return b.add("DecodeImage", {contents}, {{"channels", channels}});
}
Output encode_png(GraphBuilder& b, Output image) { return b.add("EncodePng", {image}); }
Output encode_jpeg(GraphBuilder& b, Output image, int64_t quality) {
  return b.add("EncodeJpeg", {image}, {{"quality", quality}});
}

Output resize_bilinear(GraphBuilder& b, Output images, int64_t height, int64_t width,
                       bool half_pixel_centers) {
  return b.add(
      "ResizeBilinear", {images},
      {{"size", std::vector<int64_t>{height, width}}, {"half_pixel_centers", half_pixel_centers}});
}
Output resize_nearest_neighbor(GraphBuilder& b, Output images, int64_t height, int64_t width,
                               bool half_pixel_centers) {
  return b.add(
      "ResizeNearestNeighbor", {images},
      {{"size", std::vector<int64_t>{height, width}}, {"half_pixel_centers", half_pixel_centers}});
}

Output flip_left_right(GraphBuilder& b, Output images) { return reverse(b, images, {-2}); }
Output flip_up_down(GraphBuilder& b, Output images) { return reverse(b, images, {-3}); }

Output crop_to_bounding_box(GraphBuilder& b, Output images, int64_t top, int64_t left,
                            int64_t height, int64_t width) {
  const bool batched = b.graph().shape(images).rank() == 4;
  std::vector<int64_t> begin = {top, left, 0}, size = {height, width, -1};
  if (batched) {
    begin.insert(begin.begin(), 0);
    size.insert(size.begin(), -1);
  }
  return slice(b, images, begin, size);
}

Output per_image_standardization(GraphBuilder& b, Output images) {
  auto scope = b.name_scope("per_image_standardization");
  const Shape& s = b.graph().shape(images);
  int64_t n = 1;
  for (int d = s.rank() - 3; d >= 0 && d < s.rank(); ++d) n *= s.dim(d);
  if (s.rank() < 3 || n <= 0) {
    b.record_error(runtime::invalid_argument(
        "per_image_standardization: images need a known [.., h, w, c] shape, not ", s));
    return Output{};
  }
  Moments m = moments(b, images, {-3, -2, -1}, /*keep_dims=*/true);
  Output floor = scalar_like(b, m.variance, 1 / std::sqrt(static_cast<double>(n)));
  return div(b, sub(b, images, m.mean), maximum(b, sqrt(b, m.variance), floor));
}

}  // namespace troupe::ops
