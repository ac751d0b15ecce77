#include "runtime/tensor_codec.h"

#include <doctest/doctest.h>

#include <random>

using namespace troupe::runtime;

namespace {
std::shared_ptr<const std::vector<char>> encode(const Tensor& t) {
  std::vector<char> blob;
  REQUIRE(encode_tensor(t, &blob).ok());
  return std::make_shared<const std::vector<char>>(std::move(blob));
}
}  // namespace

TEST_CASE("every dtype round-trips through Cap'n Proto") {
  std::vector<Tensor> cases = {
      Tensor::from_vector<float>(Shape{2, 3}, {1, 2, 3, 4, 5, 6.5f}),
      Tensor::from_vector<double>(Shape{3}, {-1e300, 0, 1e-300}),
      Tensor::from_vector<int32_t>(Shape{1, 1}, {-7}),
      Tensor::from_vector<int64_t>(Shape{2}, {int64_t(1) << 62, -1}),
      Tensor::from_vector<uint8_t>(Shape{4}, {0, 1, 254, 255}),
      Tensor::from_vector<bool>(Shape{3}, {true, false, true}),
      Tensor::scalar<float>(3.5f),
      Tensor(DType::kFloat32, Shape{0, 5}),
  };
  Tensor s(DType::kString, Shape{2});
  s.data<std::string>()[0] = "héllo";
  s.data<std::string>()[1] = std::string("a\0b", 3);
  cases.push_back(s);
  for (const Tensor& t : cases) {
    auto back = decode_tensor(encode(t));
    REQUIRE_MESSAGE(back.ok(), back.status().to_string());
    CHECK(back->dtype() == t.dtype());
    CHECK(back->shape() == t.shape());
    CHECK(back->debug_string(100) == t.debug_string(100));
  }
}

TEST_CASE("decoding reads the data in place and keeps the blob alive") {
  Tensor t = Tensor::from_vector<float>(Shape{1024}, std::vector<float>(1024, 2.0f));
  auto blob = encode(t);
  auto back = decode_tensor(blob);
  REQUIRE(back.ok());
  const char* begin = blob->data();
  const char* p = static_cast<const char*>(back->raw_data());
  CHECK(p >= begin);
  CHECK(p < begin + blob->size());
  CHECK_FALSE(back->exclusively_owned());  // borrowed bytes are never written by kernels
  blob.reset();
  CHECK(back->data<float>()[1023] == 2.0f);
}

TEST_CASE("malformed, truncated or inconsistent bytes are errors, never crashes") {
  Tensor t = Tensor::from_vector<float>(Shape{4, 4}, std::vector<float>(16, 1.0f));
  std::vector<char> good;
  REQUIRE(encode_tensor(t, &good).ok());
  for (size_t cut = 0; cut < good.size(); cut += 8) {
    std::vector<char> bad(good.begin(), good.begin() + cut);
    CHECK_FALSE(decode_tensor(std::make_shared<const std::vector<char>>(bad)).ok());
  }
  CHECK_FALSE(decode_tensor_copy(good.data(), good.size() - 3).ok());
  std::mt19937 rng(1);
  int rejected = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<char> bad = good;
    for (int k = 0; k < 4; ++k) bad[rng() % bad.size()] = static_cast<char>(rng());
    auto r = decode_tensor(std::make_shared<const std::vector<char>>(bad));
    if (!r.ok()) {
      ++rejected;
      CHECK(r.status().message().find("tensor blob") != std::string::npos);
    } else {
      CHECK(r->byte_size() == r->num_elements() * dtype_size(r->dtype()));
    }
  }
  CHECK(rejected > 0);
  std::vector<char> garbage(64, '\x7f');
  CHECK_FALSE(decode_tensor(std::make_shared<const std::vector<char>>(garbage)).ok());
  CHECK_FALSE(decode_tensor(nullptr).ok());
}
