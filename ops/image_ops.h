// tf.image's basics as graph ops: PNG and JPEG decoding and encoding, bilinear and nearest
// resizing (differentiable), flips, crops and per-image standardization, on [h, w, c] or
// [batch, h, w, c] images. The kernels run runtime/image.h, which an input pipeline's map may
// call directly on its tensors.
//
//   Output rgb = decode_image(b, contents, 3);                  // uint8 [h, w, 3]
//   Output x = resize_bilinear(b, cast(b, rgb, DType::kFloat32), 224, 224);
//   Output y = per_image_standardization(b, flip_left_right(b, x));
//
// Not thread-safe (builders).
#pragma once

#include <string>

#include "ops/builder_names.h"

namespace troupe::ops {

// A string scalar of PNG (or JPEG, or either) bytes to a uint8 [h, w, channels] image:
// `channels` 0 keeps the file's; a file that is not one is an error naming what is wrong.
Output decode_png(GraphBuilder& b, Output contents, int64_t channels = 0);
Output decode_jpeg(GraphBuilder& b, Output contents, int64_t channels = 0);
Output decode_image(GraphBuilder& b, Output contents, int64_t channels = 0);
// A uint8 [h, w, c] image to a string scalar of PNG (c 1 to 4) or JPEG (c 1 or 3) bytes.
Output encode_png(GraphBuilder& b, Output image);
Output encode_jpeg(GraphBuilder& b, Output image, int64_t quality = 95);

// float images resized to height x width; `half_pixel_centers` false is TF 1's sampling.
Output resize_bilinear(GraphBuilder& b, Output images, int64_t height, int64_t width,
                       bool half_pixel_centers = true);
Output resize_nearest_neighbor(GraphBuilder& b, Output images, int64_t height, int64_t width,
                               bool half_pixel_centers = true);
Output flip_left_right(GraphBuilder& b, Output images);
Output flip_up_down(GraphBuilder& b, Output images);
// The window of height x width at (top, left) of every image.
Output crop_to_bounding_box(GraphBuilder& b, Output images, int64_t top, int64_t left,
                            int64_t height, int64_t width);
// (x - mean) / max(stddev, 1 / sqrt(h w c)) over each image (its h, w and c known at build
// time).
Output per_image_standardization(GraphBuilder& b, Output images);

}  // namespace troupe::ops
