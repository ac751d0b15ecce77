#include "runtime/shape.h"

#include <doctest/doctest.h>

#include "runtime/dtype.h"
#include "runtime/status.h"

using namespace troupe::runtime;

TEST_CASE("shape: rank, elements, unknown dims") {
  Shape s{-1, 784};
  CHECK(s.rank() == 2);
  CHECK_FALSE(s.fully_defined());
  CHECK(s.num_elements() == -1);
  CHECK(s.to_string() == "[?,784]");
  CHECK(Shape{}.num_elements() == 1);
  CHECK(Shape{3, 0}.num_elements() == 0);
  CHECK(Shape::unknown().to_string() == "<unknown>");
  CHECK(s.compatible_with(Shape{128, 784}));
  CHECK_FALSE(s.compatible_with(Shape{128, 783}));
  CHECK_FALSE(s.compatible_with(Shape{784}));
  int axis;
  CHECK(s.canonical_axis(-1, &axis));
  CHECK(axis == 1);
  CHECK_FALSE(s.canonical_axis(2, &axis));
}

TEST_CASE("shape: numpy broadcasting") {
  Shape out;
  CHECK(broadcast_shapes(Shape{4, 1, 3}, Shape{5, 1}, &out));
  CHECK(out == Shape{4, 5, 3});
  CHECK(broadcast_shapes(Shape{}, Shape{2, 2}, &out));
  CHECK(out == Shape{2, 2});
  CHECK(broadcast_shapes(Shape{-1, 3}, Shape{3}, &out));
  CHECK(out == Shape{-1, 3});
  CHECK(broadcast_shapes(Shape{0, 3}, Shape{1, 3}, &out));
  CHECK(out == Shape{0, 3});
  CHECK_FALSE(broadcast_shapes(Shape{2, 3}, Shape{4, 3}, &out));
}

TEST_CASE("dtype names and sizes round-trip") {
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64, DType::kUInt8,
                  DType::kBool, DType::kString}) {
    DType back;
    REQUIRE(dtype_from_name(dtype_name(t), &back));
    CHECK(back == t);
  }
  CHECK(dtype_size(DType::kFloat64) == 8);
  DType unused;
  CHECK_FALSE(dtype_from_name("float16", &unused));
}

TEST_CASE("status and result carry the message") {
  Status s = invalid_argument("MatMul 'x': inner dims ", 3, " vs ", 4);
  CHECK_FALSE(s.ok());
  CHECK(s.to_string() == "invalid argument: MatMul 'x': inner dims 3 vs 4");
  CHECK(s.with_context("step 7").message() == "step 7: MatMul 'x': inner dims 3 vs 4");
  Result<int> r = s;
  CHECK_FALSE(r.ok());
  Result<int> v = 5;
  CHECK(*v == 5);
}
