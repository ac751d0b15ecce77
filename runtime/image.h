// Images as tensors, as tf.image has them: PNG and JPEG coded with Debian's libpng and
// libjpeg-turbo, resizing (bilinear, nearest) and its gradient, flips, crops and per-image
// standardization, on [height, width, channels] or [batch, height, width, channels] tensors.
// What the image ops' kernels run (ops/image_ops.h), and what an input pipeline's map calls.
//
//   TROUPE_ASSIGN_OR_RETURN(Tensor rgb, image::decode_image(bytes, 3));  // uint8 [h, w, 3]
//   TROUPE_ASSIGN_OR_RETURN(Tensor small, image::resize(image::to_float(rgb), 14, 14));
//   TROUPE_ASSIGN_OR_RETURN(std::string png, image::encode_png(rgb));
//
// Bad bytes are an error naming what is wrong with them, never a crash: libpng's and libjpeg's
// errors are caught. Thread-safe (no state).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/status.h"
#include "runtime/tensor.h"

namespace troupe::runtime::image {

// uint8 [height, width, channels]: `channels` 0 keeps the file's (1 gray, 2 gray + alpha, 3 RGB,
// 4 RGBA), else converts to 1, 3 or 4. 16-bit PNGs are scaled to 8 bits.
Result<Tensor> decode_png(std::string_view bytes, int channels = 0);
Result<Tensor> decode_jpeg(std::string_view bytes, int channels = 0);  // 1 or 3 channels
// PNG or JPEG, told by their first bytes (tf.io.decode_image for those two).
Result<Tensor> decode_image(std::string_view bytes, int channels = 0);
// uint8 [height, width, 1 | 2 | 3 | 4] as PNG; [height, width, 1 | 3] as JPEG of `quality`.
Result<std::string> encode_png(const Tensor& image);
Result<std::string> encode_jpeg(const Tensor& image, int quality = 95);

// float32 of any numeric image, as tf.image.convert_image_dtype: uint8 scaled to [0, 1].
Tensor to_float(const Tensor& image);

enum class Resize { kBilinear, kNearest };
struct ResizeOptions {
  Resize method = Resize::kBilinear;
  // TF 2's (and PIL's and OpenCV's) sampling at pixel centres; false: TF 1's resize_images
  // (align_corners and half_pixel_centers both false), which shifts the image.
  bool half_pixel_centers = true;
};
// float32 or float64 images resized to height x width.
Result<Tensor> resize(const Tensor& images, int64_t height, int64_t width,
                      ResizeOptions options = {});
// The gradient of resize with respect to its images: dy spread back onto `input_shape`.
Result<Tensor> resize_grad(const Tensor& dy, const Shape& input_shape, ResizeOptions options = {});

// Any dtype: mirrored left to right (width) or up and down (height).
Result<Tensor> flip_left_right(const Tensor& images);
Result<Tensor> flip_up_down(const Tensor& images);
// Any dtype: the window of height x width from (top, left); an error when it leaves the image.
Result<Tensor> crop_to_bounding_box(const Tensor& images, int64_t top, int64_t left, int64_t height,
                                    int64_t width);
// The centre `fraction` (0, 1] of each side, as tf.image.central_crop.
Result<Tensor> central_crop(const Tensor& images, double fraction);
// float32 or float64: (x - mean) / max(stddev, 1 / sqrt(elements)) over each image.
Result<Tensor> per_image_standardization(const Tensor& images);

}  // namespace troupe::runtime::image
