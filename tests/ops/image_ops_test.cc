// tf.image's ops in a graph: decoding what encoding wrote, resizing as runtime/image.h does
// (which an input pipeline's map calls directly), flips, crops and per-image standardization
// built from other ops, and a bad file's error naming the node.
#include "ops/image_ops.h"

#include <doctest/doctest.h>

#include "harness/op_harness.h"
#include "ops/math_ops.h"
#include "runtime/image.h"

using namespace troupe;
using namespace troupe::runtime;
using testing::OpTest;

namespace {
Tensor pixels(const Shape& s) {
  Tensor t(DType::kUInt8, s);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<uint8_t>()[i] = (i * 29) % 256;
  return t;
}
}  // namespace

TEST_CASE("encode_png and decode_image in a graph give the pixels back") {
  OpTest t;
  const Tensor rgb = pixels(Shape{3, 4, 3});
  Output png = ops::encode_png(t.b, t.feed(rgb));
  Output back = ops::decode_image(t.b, png, 3);
  CHECK(t.eval(back).to_vector<uint8_t>() == rgb.to_vector<uint8_t>());
  Output jpeg = ops::decode_jpeg(t.b, ops::encode_jpeg(t.b, t.feed(pixels(Shape{8, 8, 1})), 100));
  CHECK(t.eval(jpeg).shape() == Shape{8, 8, 1});
  OpTest bad;
  auto r = bad.run({ops::decode_png(bad.b, bad.feed(Tensor::scalar<std::string>("garbage")))});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("DecodePng") != std::string::npos);
  CHECK(r.status().message().find("not a PNG image") != std::string::npos);
}

TEST_CASE("resize, flips, crops and standardization as graph ops match runtime/image.h") {
  OpTest t;
  const Tensor x = image::to_float(pixels(Shape{2, 4, 6, 3}));
  Output in = t.feed(x);
  CHECK(testing::max_error(t.eval(ops::resize_bilinear(t.b, in, 3, 9)), *image::resize(x, 3, 9)) ==
        0);
  CHECK(testing::max_error(t.eval(ops::resize_nearest_neighbor(t.b, in, 7, 2)),
                           *image::resize(x, 7, 2, {image::Resize::kNearest})) == 0);
  CHECK(testing::max_error(t.eval(ops::flip_left_right(t.b, in)), *image::flip_left_right(x)) == 0);
  CHECK(testing::max_error(t.eval(ops::flip_up_down(t.b, in)), *image::flip_up_down(x)) == 0);
  CHECK(testing::max_error(t.eval(ops::crop_to_bounding_box(t.b, in, 1, 2, 2, 3)),
                           *image::crop_to_bounding_box(x, 1, 2, 2, 3)) == 0);
  CHECK(testing::max_error(t.eval(ops::per_image_standardization(t.b, in)),
                           *image::per_image_standardization(x)) < 1e-5);
}
