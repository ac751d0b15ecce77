#include "runtime/tensor.h"

#include <doctest/doctest.h>

using namespace troupe::runtime;

TEST_CASE("tensors are handles: copies share, clone copies") {
  Tensor x = Tensor::from_vector<float>(Shape{2, 2}, {1, 2, 3, 4});
  Tensor y = x;
  CHECK(y.shares_buffer_with(x));
  y.data<float>()[0] = 9;
  CHECK(x.data<float>()[0] == 9);
  Tensor z = x.clone();
  CHECK_FALSE(z.shares_buffer_with(x));
  z.data<float>()[1] = -1;
  CHECK(x.data<float>()[1] == 2);
  Tensor r = x.reshaped(Shape{4});
  CHECK(r.shares_buffer_with(x));
  CHECK(r.shape() == Shape{4});
  CHECK(x.debug_string() == "float32[2,2] {9, 2, 3, 4}");
}

TEST_CASE("buffers are 64-byte aligned and zero-initialised") {
  for (int64_t n : {1, 3, 1000, 100000}) {
    Tensor t(DType::kFloat64, Shape{n});
    CHECK(reinterpret_cast<uintptr_t>(t.raw_data()) % 64 == 0);
    for (int64_t i = 0; i < n; i += 97) CHECK(t.data<double>()[i] == 0.0);
  }
}

TEST_CASE("string tensors hold std::string elements") {
  Tensor t(DType::kString, Shape{3});
  t.data<std::string>()[1] = "hello";
  Tensor c = t.clone();
  CHECK(c.data<std::string>()[1] == "hello");
  CHECK(c.data<std::string>()[0].empty());
}

TEST_CASE("the pool reuses freed blocks and enforces its limit") {
  PoolAllocator pool(/*limit_bytes=*/1 << 20);
  void* a = pool.allocate(1000);
  REQUIRE(a);
  pool.deallocate(a, 1000);
  void* b = pool.allocate(900);  // same size class: the cached block comes back
  CHECK(b == a);
  CHECK(pool.stats().bytes_in_use == 1024);
  CHECK(pool.allocate(2 << 20) == nullptr);
  auto t = Tensor::empty(DType::kFloat32, Shape{1 << 20}, &pool);
  CHECK_FALSE(t.ok());
  CHECK(t.status().code() == Code::kResourceExhausted);
  pool.deallocate(b, 900);
  CHECK(pool.stats().bytes_in_use == 0);
  CHECK(pool.stats().peak_bytes_in_use == 1024);
}

TEST_CASE("tensors of unknown shape cannot be allocated") {
  auto t = Tensor::empty(DType::kFloat32, Shape{-1, 3}, cpu_allocator());
  CHECK_FALSE(t.ok());
  CHECK(t.status().message().find("[?,3]") != std::string::npos);
}

TEST_CASE("sizes from outside are checked before anything is allocated; the pool never wraps") {
  // An element count that wraps int64, a byte size that wraps, a dimension below -1.
  for (const Shape& s : {Shape{int64_t(1) << 62, 4}, Shape{int64_t(1) << 62}, Shape{3, -7}}) {
    auto t = Tensor::empty(DType::kFloat32, s, cpu_allocator());
    REQUIRE_FALSE(t.ok());
    CHECK_MESSAGE(t.status().message().find(s.to_string()) != std::string::npos,
                  t.status().message());
  }
  CHECK_FALSE(check_tensor_size(DType::kFloat64, Shape{-1, int64_t(1) << 61}).ok());
  CHECK(check_tensor_size(DType::kFloat32, Shape{-1, 784}).ok());

  // The cap is the user's to set; over it is ResourceExhausted naming the limit.
  const int64_t saved = max_tensor_bytes();
  set_max_tensor_bytes(1 << 20);
  auto big = Tensor::empty(DType::kFloat32, Shape{1 << 18, 2}, cpu_allocator());
  CHECK(big.status().code() == Code::kResourceExhausted);
  CHECK(big.status().message().find("limit of 1048576") != std::string::npos);
  CHECK(Tensor::empty(DType::kFloat32, Shape{1 << 18}, cpu_allocator()).ok());
  set_max_tensor_bytes(saved);

  // Sizes no power of two holds: refused, not an endless doubling.
  PoolAllocator pool;
  CHECK(pool.allocate(SIZE_MAX) == nullptr);
  CHECK(pool.allocate((SIZE_MAX >> 1) + 2) == nullptr);
  CHECK(pool.stats().bytes_in_use == 0);
}

TEST_CASE("slice_rows and concat_rows copy whole rows along dimension 0, strings too") {
  const Tensor t = Tensor::from_vector<float>(Shape{3, 2}, {1, 2, 3, 4, 5, 6});
  const Tensor mid = slice_rows(t, 1, 2);
  CHECK(mid.shape() == Shape{2, 2});
  CHECK(mid.to_vector<float>() == std::vector<float>{3, 4, 5, 6});
  CHECK(!mid.shares_buffer_with(t));
  const Tensor back = concat_rows({slice_rows(t, 0, 1), mid});
  CHECK(back.shape() == Shape{3, 2});
  CHECK(back.to_vector<float>() == t.to_vector<float>());
  Tensor s(DType::kString, Shape{2});
  s.data<std::string>()[0] = "a";
  s.data<std::string>()[1] = "bc";
  const Tensor ss = concat_rows({s, slice_rows(s, 1, 1)});
  CHECK(ss.to_vector<std::string>() == std::vector<std::string>{"a", "bc", "bc"});
}
