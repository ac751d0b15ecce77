// Images as tensors: PNG and JPEG files another program wrote (Pillow) decode to their pixels;
// what troupe encodes decodes back (PNG exactly, JPEG closely); damaged bytes are errors naming
// them; resizing matches TF's values (half-pixel centres and TF 1's sampling), and flips, crops
// and standardization do what tf.image's do.
#include "runtime/image.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "harness/temp_dir.h"
#include "runtime/record_io.h"

using namespace troupe;
using namespace troupe::runtime;
namespace image = runtime::image;

namespace {

std::string slurp(const std::string& path) {
  std::string bytes;
  REQUIRE(read_file(path, &bytes).ok());
  return bytes;
}

Tensor floats(const Shape& s, std::vector<float> v) { return Tensor::from_vector<float>(s, v); }

}  // namespace

TEST_CASE("PNG and JPEG files Pillow wrote decode to their pixels") {
  const std::string dir = testing::temp_dir("images");
  std::filesystem::create_directories(dir);
  REQUIRE(std::system(("/usr/bin/python3 " TROUPE_IMAGE_WRITER " " + dir).c_str()) == 0);
  auto rgb = image::decode_png(slurp(dir + "/rgb.png"));
  REQUIRE_MESSAGE(rgb.ok(), rgb.status().to_string());
  CHECK(rgb->shape() == Shape{3, 5, 3});
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 5; ++x) {
      const uint8_t* p = rgb->data<uint8_t>() + (y * 5 + x) * 3;
      CHECK(p[0] == 40 * y + 10 * x);
      CHECK(p[1] == 255 - 40 * y);
      CHECK(p[2] == 7 * x + 3);
    }
  }
  // Channels as asked: RGBA kept, or its alpha dropped; 16-bit gray scaled to 8 bits.
  auto rgba = image::decode_png(slurp(dir + "/rgba.png"));
  REQUIRE(rgba.ok());
  CHECK(rgba->shape() == Shape{3, 5, 4});
  CHECK(rgba->data<uint8_t>()[3] == 200);
  auto gray = image::decode_image(slurp(dir + "/gray16.png"));
  REQUIRE_MESSAGE(gray.ok(), gray.status().to_string());
  CHECK(gray->shape() == Shape{3, 5, 1});
  CHECK(gray->data<uint8_t>()[2 * 5 + 4] == 120);
  auto jpeg = image::decode_image(slurp(dir + "/flat.jpg"));
  REQUIRE_MESSAGE(jpeg.ok(), jpeg.status().to_string());
  CHECK(jpeg->shape() == Shape{8, 16, 3});
  for (int i = 0; i < 8 * 16; ++i) {  // a flat colour survives JPEG within a step or two
    CHECK(std::abs(jpeg->data<uint8_t>()[3 * i] - 200) <= 2);
    CHECK(std::abs(jpeg->data<uint8_t>()[3 * i + 1] - 100) <= 2);
    CHECK(std::abs(jpeg->data<uint8_t>()[3 * i + 2] - 50) <= 2);
  }
  auto as_gray = image::decode_jpeg(slurp(dir + "/flat.jpg"), 1);
  REQUIRE(as_gray.ok());
  CHECK(as_gray->shape() == Shape{8, 16, 1});
  std::filesystem::remove_all(dir);
}

TEST_CASE("encode then decode: PNG exactly, JPEG closely; damaged bytes are errors") {
  Tensor pixels(DType::kUInt8, Shape{4, 6, 3});
  for (int64_t i = 0; i < pixels.num_elements(); ++i) pixels.data<uint8_t>()[i] = (i * 37) % 256;
  auto png = image::encode_png(pixels);
  REQUIRE_MESSAGE(png.ok(), png.status().to_string());
  CHECK(png->rfind("\x89PNG", 0) == 0);
  auto back = image::decode_png(*png);
  REQUIRE(back.ok());
  CHECK(back->shape() == pixels.shape());
  CHECK(back->to_vector<uint8_t>() == pixels.to_vector<uint8_t>());
  Tensor flat(DType::kUInt8, Shape{8, 8, 3});
  for (int64_t i = 0; i < flat.num_elements(); ++i) flat.data<uint8_t>()[i] = 90;
  auto jpeg = image::encode_jpeg(flat, 90);
  REQUIRE_MESSAGE(jpeg.ok(), jpeg.status().to_string());
  auto decoded = image::decode_jpeg(*jpeg);
  REQUIRE(decoded.ok());
  CHECK(std::abs(decoded->data<uint8_t>()[0] - 90) <= 2);

  for (std::string bad : {std::string("not an image"), png->substr(0, png->size() / 2),
                          jpeg->substr(0, 20), std::string("\x89PNG\r\n\x1a\n garbage")}) {
    auto r = image::decode_image(bad);
    CHECK_FALSE(r.ok());
  }
  CHECK(image::decode_png("xyz").status().message().find("not a PNG image") != std::string::npos);
  CHECK_FALSE(image::encode_png(Tensor(DType::kFloat32, Shape{2, 2, 3})).ok());
  CHECK_FALSE(image::encode_jpeg(Tensor(DType::kUInt8, Shape{2, 2, 4})).ok());
}

TEST_CASE("resize: TF's bilinear and nearest values, half-pixel centres and TF 1's") {
  const Tensor x = floats(Shape{2, 2, 1}, {0, 1, 2, 3});
  auto up = image::resize(x, 4, 4);
  REQUIRE(up.ok());
  CHECK(up->shape() == Shape{4, 4, 1});
  CHECK(up->to_vector<float>() == std::vector<float>{0, 0.25, 0.75, 1, 0.5, 0.75, 1.25, 1.5,  //
                                                     1.5, 1.75, 2.25, 2.5, 2, 2.25, 2.75, 3});
  auto legacy = image::resize(x, 4, 4, {image::Resize::kBilinear, false});
  REQUIRE(legacy.ok());
  CHECK(legacy->to_vector<float>() == std::vector<float>{0, 0.5, 1, 1, 1, 1.5, 2, 2,  //
                                                         2, 2.5, 3, 3, 2, 2.5, 3, 3});
  auto nearest = image::resize(x, 4, 4, {image::Resize::kNearest});
  REQUIRE(nearest.ok());
  CHECK(nearest->to_vector<float>() == std::vector<float>{0, 0, 1, 1, 0, 0, 1, 1,  //
                                                          2, 2, 3, 3, 2, 2, 3, 3});
  // A batch, and channels, resize each on its own; shrinking averages (half-pixel: the centre).
  const Tensor batch = floats(Shape{2, 2, 2, 2}, {0, 10, 1, 11, 2, 12, 3, 13,  //
                                                  4, 0, 4, 0, 4, 0, 4, 0});
  auto one = image::resize(batch, 1, 1);
  REQUIRE(one.ok());
  CHECK(one->to_vector<float>() == std::vector<float>{1.5, 11.5, 4, 0});
  // The gradient spreads dy back by the same weights: its total is dy's.
  auto grad = image::resize_grad(floats(Shape{4, 4, 1}, std::vector<float>(16, 1)), x.shape());
  REQUIRE(grad.ok());
  CHECK(grad->to_vector<float>() == std::vector<float>{4, 4, 4, 4});
  CHECK_FALSE(image::resize(Tensor(DType::kUInt8, Shape{2, 2, 1}), 3, 3).ok());
  CHECK_FALSE(image::resize(x, 0, 3).ok());
  CHECK_FALSE(image::resize(floats(Shape{4}, {1, 2, 3, 4}), 2, 2).ok());
}

TEST_CASE("flips, crops and per-image standardization, as tf.image's") {
  const Tensor x = floats(Shape{2, 3, 1}, {1, 2, 3, 4, 5, 6});
  CHECK(image::flip_left_right(x)->to_vector<float>() == std::vector<float>{3, 2, 1, 6, 5, 4});
  CHECK(image::flip_up_down(x)->to_vector<float>() == std::vector<float>{4, 5, 6, 1, 2, 3});
  auto crop = image::crop_to_bounding_box(x, 1, 1, 1, 2);
  REQUIRE(crop.ok());
  CHECK(crop->shape() == Shape{1, 2, 1});
  CHECK(crop->to_vector<float>() == std::vector<float>{5, 6});
  auto outside = image::crop_to_bounding_box(x, 1, 2, 1, 2);
  REQUIRE_FALSE(outside.ok());
  CHECK(outside.status().message().find("leaves the 2x3 image") != std::string::npos);
  const Tensor square =
      floats(Shape{4, 4, 1}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  auto centre = image::central_crop(square, 0.5);
  REQUIRE(centre.ok());
  CHECK(centre->to_vector<float>() == std::vector<float>{5, 6, 9, 10});
  auto standard = image::per_image_standardization(x);
  REQUIRE(standard.ok());
  // mean 3.5, stddev sqrt(35/12); the result has mean 0 and stddev 1.
  const std::vector<float> s = standard->to_vector<float>();
  double mean = 0, squares = 0;
  for (float v : s) mean += v / 6;
  for (float v : s) squares += (v - mean) * (v - mean) / 6;
  CHECK(mean == doctest::Approx(0).epsilon(1e-6));
  CHECK(squares == doctest::Approx(1).epsilon(1e-5));
  CHECK(s[0] == doctest::Approx((1 - 3.5) / std::sqrt(35.0 / 12)));
  // A flat image: the stddev floor 1/sqrt(n) keeps it finite (zeros).
  auto flat = image::per_image_standardization(floats(Shape{1, 2, 1}, {7, 7}));
  REQUIRE(flat.ok());
  CHECK(flat->to_vector<float>() == std::vector<float>{0, 0});
}
