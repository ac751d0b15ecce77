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
