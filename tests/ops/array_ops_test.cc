// Array ops against hand-computed expectations (numpy semantics).
#include "ops/array_ops.h"

#include <doctest/doctest.h>

#include "harness/op_harness.h"
#include "ops/strided_slice.h"

using namespace troupe;
using namespace troupe::runtime;
using testing::OpTest;

namespace {
Tensor iota(const Shape& s) {
  Tensor t(DType::kFloat32, s);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = float(i);
  return t;
}
std::vector<float> floats(const Tensor& t) { return t.to_vector<float>(); }
}  // namespace

TEST_CASE("reshape, expand_dims, squeeze share the buffer and resolve -1") {
  OpTest t;
  Output x = t.feed(iota(Shape{2, 3, 1}));
  Tensor r = t.eval(ops::reshape(t.b, x, {3, -1}));
  CHECK(r.shape() == Shape{3, 2});
  CHECK(t.eval(ops::expand_dims(t.b, x, 0)).shape() == Shape{1, 2, 3, 1});
  CHECK(t.eval(ops::expand_dims(t.b, x, -1)).shape() == Shape{2, 3, 1, 1});
  CHECK(t.eval(ops::squeeze(t.b, x)).shape() == Shape{2, 3});
  CHECK(t.eval(ops::squeeze(t.b, x, {2})).shape() == Shape{2, 3});
  OpTest bad;
  ops::reshape(bad.b, bad.feed(iota(Shape{2, 3})), {4, -1});
  CHECK(bad.b.status().message().find("cannot reshape [2,3]") != std::string::npos);
  OpTest bad2;
  ops::squeeze(bad2.b, bad2.feed(iota(Shape{2, 3})), {0});
  CHECK_FALSE(bad2.b.ok());
}

TEST_CASE("reshape with an unknown batch dim resolves at run time") {
  OpTest t;
  Output x = ops::placeholder(t.b, DType::kFloat32, Shape{-1, 4});
  t.feeds.push_back({x, iota(Shape{3, 4})});
  Output r = ops::reshape(t.b, x, {-1, 2});
  CHECK(t.g.shape(r) == Shape{-1, 2});
  CHECK(t.eval(r).shape() == Shape{6, 2});
}

TEST_CASE("transpose matches numpy") {
  OpTest t;
  Output x = t.feed(iota(Shape{2, 3, 4}));
  Tensor y = t.eval(ops::transpose(t.b, x, {2, 0, 1}));
  CHECK(y.shape() == Shape{4, 2, 3});
  // y[k, i, j] = x[i, j, k] = i*12 + j*4 + k
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) CHECK(y.data<float>()[(k * 2 + i) * 3 + j] == i * 12 + j * 4 + k);
  Tensor m = t.eval(ops::transpose(t.b, t.feed(iota(Shape{2, 3}))));
  CHECK(floats(m) == std::vector<float>{0, 3, 1, 4, 2, 5});
}

TEST_CASE("concat and split along an axis") {
  OpTest t;
  Output a = t.feed(iota(Shape{2, 2}));
  Output c = t.feed(Tensor::from_vector<float>(Shape{2, 1}, {10, 11}));
  Tensor y = t.eval(ops::concat(t.b, {a, c}, 1));
  CHECK(y.shape() == Shape{2, 3});
  CHECK(floats(y) == std::vector<float>{0, 1, 10, 2, 3, 11});
  CHECK(t.eval(ops::concat(t.b, {a, a}, -2)).shape() == Shape{4, 2});
  auto parts = ops::split(t.b, t.feed(iota(Shape{2, 4})), 2, 1);
  REQUIRE(parts.size() == 2);
  CHECK(floats(t.eval(parts[1])) == std::vector<float>{2, 3, 6, 7});
  OpTest bad;
  ops::concat(bad.b, {bad.feed(iota(Shape{2, 2})), bad.feed(iota(Shape{3, 3}))}, 0);
  CHECK(bad.b.status().message().find("differs") != std::string::npos);
  OpTest bad2;
  ops::split(bad2.b, bad2.feed(iota(Shape{3})), 2, 0);
  CHECK_FALSE(bad2.b.ok());
}

TEST_CASE("strided_slice follows numpy indexing with TF's masks") {
  OpTest t;
  Output x = t.feed(iota(Shape{3, 4}));
  ops::StridedSliceSpec col;  // x[:, 1]
  col.begin = {0, 1};
  col.end = {0, 2};
  col.strides = {1, 1};
  col.begin_mask = 1;
  col.end_mask = 1;
  col.shrink_axis_mask = 2;
  Tensor c = t.eval(ops::strided_slice(t.b, x, col));
  CHECK(c.shape() == Shape{3});
  CHECK(floats(c) == std::vector<float>{1, 5, 9});

  ops::StridedSliceSpec rev;  // x[::-1, ::2]
  rev.begin = {0, 0};
  rev.end = {0, 0};
  rev.strides = {-1, 2};
  rev.begin_mask = 3;
  rev.end_mask = 3;
  Tensor r = t.eval(ops::strided_slice(t.b, x, rev));
  CHECK(r.shape() == Shape{3, 2});
  CHECK(floats(r) == std::vector<float>{8, 10, 4, 6, 0, 2});

  ops::StridedSliceSpec neg;  // x[-2:, ..., None]
  neg.begin = {-2, 0, 0};
  neg.end = {0, 0, 0};
  neg.strides = {1, 1, 1};
  neg.end_mask = 1;
  neg.ellipsis_mask = 2;
  neg.new_axis_mask = 4;
  Tensor n = t.eval(ops::strided_slice(t.b, x, neg));
  CHECK(n.shape() == Shape{2, 4, 1});
  CHECK(n.data<float>()[0] == 4);

  Tensor s = t.eval(ops::slice(t.b, x, {1, 1}, {-1, 2}));
  CHECK(s.shape() == Shape{2, 2});
  CHECK(floats(s) == std::vector<float>{5, 6, 9, 10});

  ops::StridedSliceSpec out_of_range;
  out_of_range.begin = {5};
  out_of_range.end = {6};
  out_of_range.strides = {1};
  out_of_range.shrink_axis_mask = 1;
  OpTest bad;
  ops::strided_slice(bad.b, bad.feed(iota(Shape{3})), out_of_range);
  CHECK(bad.b.status().message().find("out of range") != std::string::npos);
}

TEST_CASE("gather along axes; an index out of range is an error naming it") {
  OpTest t;
  Output p = t.feed(iota(Shape{3, 2}));
  Output idx = t.feed(Tensor::from_vector<int64_t>(Shape{2, 2}, {2, 0, 1, 1}));
  Tensor g = t.eval(ops::gather(t.b, p, idx));
  CHECK(g.shape() == Shape{2, 2, 2});
  CHECK(floats(g) == std::vector<float>{4, 5, 0, 1, 2, 3, 2, 3});
  Output idx1 = t.feed(Tensor::from_vector<int32_t>(Shape{3}, {1, 0, 1}));
  Tensor g1 = t.eval(ops::gather(t.b, p, idx1, 1));
  CHECK(g1.shape() == Shape{3, 3});
  CHECK(floats(g1) == std::vector<float>{1, 0, 1, 3, 2, 3, 5, 4, 5});
  Output bad = t.feed(Tensor::from_vector<int32_t>(Shape{1}, {3}));
  auto r = t.run({ops::gather(t.b, p, bad)});
  CHECK(r.status().message().find("index 3 at position 0 is out of range [0, 3)") !=
        std::string::npos);
}

TEST_CASE("dynamic_partition splits rows by partition; dynamic_stitch puts them back") {
  OpTest t;
  Output data = t.feed(iota(Shape{5, 2}));
  Output parts = t.feed(Tensor::from_vector<int32_t>(Shape{5}, {1, 0, 2, 1, 1}));
  std::vector<Output> out = ops::dynamic_partition(t.b, data, parts, 3);
  REQUIRE(out.size() == 3);
  CHECK(t.b.shape(out[0]) == Shape{-1, 2});
  auto got = t.run(out);
  REQUIRE(got.ok());
  CHECK((*got)[0].shape() == Shape{1, 2});
  CHECK(floats((*got)[0]) == std::vector<float>{2, 3});
  CHECK(floats((*got)[1]) == std::vector<float>{0, 1, 6, 7, 8, 9});
  CHECK(floats((*got)[2]) == std::vector<float>{4, 5});
  // The partitioned positions put every row back where it was, and rows no index names are 0.
  std::vector<Output> where = ops::dynamic_partition(t.b, ops::range_like(t.b, parts), parts, 3);
  Tensor back = t.eval(ops::dynamic_stitch(t.b, where, out));
  CHECK(back.shape() == Shape{5, 2});
  CHECK(floats(back) == floats(iota(Shape{5, 2})));
  Output gaps = ops::dynamic_stitch(t.b, {t.feed(Tensor::from_vector<int64_t>(Shape{2}, {3, 0}))},
                                    {t.feed(Tensor::from_vector<float>(Shape{2}, {7, 8}))});
  CHECK(floats(t.eval(gaps)) == std::vector<float>{8, 0, 0, 7});
  // Partitions of more dims than one: the rows are data's entries after them.
  Output grid = t.feed(Tensor::from_vector<int64_t>(Shape{2, 2}, {0, 1, 1, 0}));
  std::vector<Output> cells = ops::dynamic_partition(t.b, t.feed(iota(Shape{2, 2, 3})), grid, 2);
  Tensor first = t.eval(cells[0]);
  CHECK(first.shape() == Shape{2, 3});
  CHECK(floats(first) == std::vector<float>{0, 1, 2, 9, 10, 11});
  CHECK(t.eval(ops::range_like(t.b, grid)).to_vector<int64_t>() ==
        std::vector<int64_t>{0, 1, 2, 3});
}

TEST_CASE("dynamic_partition and dynamic_stitch refuse bad partitions and indices, naming them") {
  OpTest t;
  Output data = t.feed(iota(Shape{3}));
  auto out = t.run(ops::dynamic_partition(
      t.b, data, t.feed(Tensor::from_vector<int32_t>(Shape{3}, {0, 2, 1})), 2));
  CHECK(out.status().message().find("partition 2 at position 1 is not in [0, 2)") !=
        std::string::npos);
  // Shapes known only when run: the kernel checks what the shape function could not.
  Output unknown = ops::placeholder(t.b, DType::kInt32, Shape{-1});
  t.feeds.push_back({unknown, Tensor::from_vector<int32_t>(Shape{2}, {0, 1})});
  auto prefix = t.run(ops::dynamic_partition(t.b, data, unknown, 2));
  CHECK(prefix.status().message().find("partitions [2] are not a prefix of data [3]") !=
        std::string::npos);
  auto negative = t.run({ops::dynamic_stitch(
      t.b, {t.feed(Tensor::from_vector<int32_t>(Shape{2}, {1, -4}))}, {t.feed(iota(Shape{2}))})});
  CHECK(negative.status().message().find("index -4 at position 1") != std::string::npos);
  // A peer's index far past any memory is refused, not allocated.
  auto huge = t.run({ops::dynamic_stitch(
      t.b, {t.feed(Tensor::from_vector<int64_t>(Shape{1}, {int64_t{1} << 60}))},
      {t.feed(iota(Shape{1, 8}))})});
  CHECK_FALSE(huge.ok());
  auto last =
      t.run({ops::dynamic_stitch(t.b, {t.feed(Tensor::from_vector<int64_t>(Shape{1}, {INT64_MAX}))},
                                 {t.feed(iota(Shape{1}))})});
  CHECK(last.status().message().find("out of range") != std::string::npos);
  OpTest rows;
  ops::dynamic_stitch(rows.b,
                      {rows.feed(Tensor::from_vector<int32_t>(Shape{1}, {0})),
                       rows.feed(Tensor::scalar<int32_t>(1))},
                      {rows.feed(iota(Shape{1, 2})), rows.feed(iota(Shape{3}))});
  CHECK(rows.b.status().message().find("data 3 has rows [?,3]") != std::string::npos);
  OpTest static_prefix;
  ops::dynamic_partition(static_prefix.b, static_prefix.feed(iota(Shape{3})),
                         static_prefix.feed(Tensor::from_vector<int32_t>(Shape{2}, {0, 1})), 2);
  CHECK(static_prefix.b.status().message().find("partitions [2] are not a prefix of data [3]") !=
        std::string::npos);
  OpTest floats_as_partitions;
  ops::dynamic_partition(floats_as_partitions.b, floats_as_partitions.feed(iota(Shape{3})),
                         floats_as_partitions.feed(iota(Shape{3})), 2);
  CHECK(floats_as_partitions.b.status().message().find("int32 or int64") != std::string::npos);
  OpTest many;
  ops::dynamic_partition(many.b, many.feed(iota(Shape{3})),
                         many.feed(Tensor::from_vector<int32_t>(Shape{3}, {0, 1, 0})), 1 << 20);
  CHECK(many.b.status().message().find("num_partitions 1048576") != std::string::npos);
}

TEST_CASE("tile, pad, one_hot, fill, range, zeros_like, ones_like, size, add_n") {
  OpTest t;
  Output x = t.feed(Tensor::from_vector<float>(Shape{1, 2}, {1, 2}));
  Tensor tiled = t.eval(ops::tile(t.b, x, {2, 2}));
  CHECK(tiled.shape() == Shape{2, 4});
  CHECK(floats(tiled) == std::vector<float>{1, 2, 1, 2, 1, 2, 1, 2});
  Tensor padded = t.eval(ops::pad(t.b, x, {{1, 0}, {0, 2}}, -1));
  CHECK(padded.shape() == Shape{2, 4});
  CHECK(floats(padded) == std::vector<float>{-1, -1, -1, -1, 1, 2, -1, -1});
  Output labels = t.feed(Tensor::from_vector<int32_t>(Shape{3}, {0, 2, 5}));
  Tensor oh = t.eval(ops::one_hot(t.b, labels, 3));
  CHECK(floats(oh) == std::vector<float>{1, 0, 0, 0, 0, 1, 0, 0, 0});
  Tensor oh0 = t.eval(ops::one_hot(t.b, labels, 3, 5, -1, 0, DType::kFloat32));
  CHECK(oh0.shape() == Shape{3, 3});
  CHECK(floats(oh0) == std::vector<float>{5, -1, -1, -1, -1, -1, -1, 5, -1});
  CHECK(floats(t.eval(ops::fill(t.b, Shape{2}, 7, DType::kFloat32))) == std::vector<float>{7, 7});
  CHECK(t.eval(ops::range(t.b, 2, 11, 3)).to_vector<int32_t>() == std::vector<int32_t>{2, 5, 8});
  CHECK(t.eval(ops::range(t.b, 1, 0, -0.25, DType::kFloat64)).to_vector<double>() ==
        std::vector<double>{1, 0.75, 0.5, 0.25});
  CHECK(floats(t.eval(ops::zeros_like(t.b, x))) == std::vector<float>{0, 0});
  CHECK(floats(t.eval(ops::ones_like(t.b, x))) == std::vector<float>{1, 1});
  CHECK(t.eval(ops::size(t.b, x)).to_vector<int64_t>() == std::vector<int64_t>{2});
  CHECK(floats(t.eval(ops::add_n(t.b, {x, x, x}))) == std::vector<float>{3, 6});
}

TEST_CASE("broadcast_to and sum_to_shape_of are each other's transpose") {
  OpTest t;
  Output x = t.feed(Tensor::from_vector<float>(Shape{2, 1}, {1, 2}));
  Tensor big = t.eval(ops::broadcast_to(t.b, x, Shape{3, 2, 3}));
  CHECK(big.shape() == Shape{3, 2, 3});
  CHECK(big.data<float>()[3] == 2);
  Output y = t.feed(iota(Shape{3, 2, 3}));
  Tensor s = t.eval(ops::sum_to_shape_of(t.b, y, x));
  CHECK(s.shape() == Shape{2, 1});
  // rows i=0: sum over k,j of (k*6 + 0*3 + j) = 3*(0+1+2) + 3*... computed directly
  float s0 = 0, s1 = 0;
  for (int k = 0; k < 3; ++k)
    for (int j = 0; j < 3; ++j) {
      s0 += k * 6 + j;
      s1 += k * 6 + 3 + j;
    }
  CHECK(floats(s) == std::vector<float>{s0, s1});
  OpTest bad;
  ops::broadcast_to(bad.b, bad.feed(iota(Shape{3})), Shape{2, 2});
  CHECK(bad.b.status().message().find("cannot broadcast") != std::string::npos);
}

TEST_CASE("write_row replaces one row, and leaves x as it was when x is read elsewhere too") {
  OpTest t;
  Output x = t.feed(iota(Shape{3, 2}));
  Output y = ops::write_row(t.b, ops::identity(t.b, x), ops::scalar(t.b, 2, DType::kInt32),
                            t.feed(Tensor::from_vector<float>(Shape{2}, {-1, -2})));
  auto got = t.run({y, x});
  REQUIRE_MESSAGE(got.ok(), got.status().to_string());
  CHECK(floats((*got)[0]) == std::vector<float>{0, 1, 2, 3, -1, -2});
  CHECK(floats((*got)[1]) == std::vector<float>{0, 1, 2, 3, 4, 5});
  Output bad = ops::write_row(t.b, x, ops::scalar(t.b, 3, DType::kInt32),
                              t.feed(Tensor::from_vector<float>(Shape{2}, {0, 0})));
  auto refused = t.run({bad});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("row 3") != std::string::npos);
}

TEST_CASE("stack and unstack: a new axis, and slices along a known one") {
  OpTest t;
  Output a = t.feed(Tensor::from_vector<float>(Shape{2}, {1, 2}));
  Output c = t.feed(Tensor::from_vector<float>(Shape{2}, {3, 4}));
  Output rows = ops::stack(t.b, {a, c});
  Output cols = ops::stack(t.b, {a, c}, -1);
  CHECK(t.b.graph().shape(rows) == Shape{2, 2});
  CHECK(t.eval(rows).to_vector<float>() == std::vector<float>{1, 2, 3, 4});
  CHECK(t.eval(cols).to_vector<float>() == std::vector<float>{1, 3, 2, 4});
  std::vector<Output> back = ops::unstack(t.b, cols, 1);
  REQUIRE(back.size() == 2);
  CHECK(t.b.graph().shape(back[1]) == Shape{2});
  CHECK(t.eval(back[1]).to_vector<float>() == std::vector<float>{3, 4});
  Output unknown = ops::placeholder(t.b, DType::kFloat32, Shape{-1, 3}, "unknown");
  CHECK(ops::unstack(t.b, unknown, 0).empty());
  CHECK(t.b.status().message().find("has no known size") != std::string::npos);
}

TEST_CASE("shape and rank at run time; reverse along axes") {
  OpTest t;
  Output x = t.feed(iota(Shape{2, 3}));
  CHECK(t.eval(ops::shape(t.b, x)).to_vector<int64_t>() == std::vector<int64_t>{2, 3});
  CHECK(t.eval(ops::rank(t.b, x)).to_vector<int64_t>() == std::vector<int64_t>{2});
  CHECK(floats(t.eval(ops::reverse(t.b, x, {1}))) == std::vector<float>{2, 1, 0, 5, 4, 3});
  CHECK(floats(t.eval(ops::reverse(t.b, x, {0, -1}))) == std::vector<float>{5, 4, 3, 2, 1, 0});
  CHECK(floats(t.eval(ops::reverse(t.b, x, {}))) == floats(iota(Shape{2, 3})));
  OpTest bad;
  auto out = bad.run({ops::reverse(bad.b, bad.feed(iota(Shape{2})), {1})});
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().message().find("axis 1 out of range") != std::string::npos);
}

TEST_CASE("gather_nd and scatter_nd: index tuples into the first dimensions, as TF's") {
  OpTest t;
  Output params = t.feed(iota(Shape{3, 2}));
  // Depth 2: elements; depth 1: rows.
  Output elements = t.feed(Tensor::from_vector<int64_t>(Shape{2, 2}, {2, 1, 0, 1}));
  Output rows = t.feed(Tensor::from_vector<int32_t>(Shape{2, 1}, {2, 0}));
  Tensor e = t.eval(ops::gather_nd(t.b, params, elements));
  CHECK(e.shape() == Shape{2});
  CHECK(floats(e) == std::vector<float>{5, 1});
  Tensor r = t.eval(ops::gather_nd(t.b, params, rows));
  CHECK(r.shape() == Shape{2, 2});
  CHECK(floats(r) == std::vector<float>{4, 5, 0, 1});
  // Repeated indices sum.
  Output at = t.feed(Tensor::from_vector<int64_t>(Shape{3, 1}, {1, 3, 1}));
  Output updates = t.feed(Tensor::from_vector<float>(Shape{3}, {1, 2, 4}));
  CHECK(floats(t.eval(ops::scatter_nd(t.b, at, updates, Shape{4}))) ==
        std::vector<float>{0, 5, 0, 2});
  // An index out of range is an error naming it, for both.
  OpTest bad;
  auto out = bad.run({ops::gather_nd(bad.b, bad.feed(iota(Shape{3, 2})),
                                     bad.feed(Tensor::from_vector<int64_t>(Shape{1, 2}, {1, 2})))});
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().message().find("index 2 of tuple 0 is out of range for dimension 1") !=
        std::string::npos);
  OpTest bad_scatter;
  auto scattered = bad_scatter.run({ops::scatter_nd(
      bad_scatter.b, bad_scatter.feed(Tensor::from_vector<int64_t>(Shape{1, 1}, {-1})),
      bad_scatter.feed(Tensor::from_vector<float>(Shape{1}, {1})), Shape{4})});
  REQUIRE_FALSE(scattered.ok());
  CHECK(scattered.status().message().find("index -1") != std::string::npos);
}
