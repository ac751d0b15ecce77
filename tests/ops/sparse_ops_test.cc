// Sparse tensors against hand-computed values: the value type's checks, padded dense features
// to entries and back, segment sums and their gradient, embedding_lookup_sparse's three
// combiners with weights and empty rows, and training through it updating the rows looked up
// only.
#include "ops/sparse_ops.h"

#include <doctest/doctest.h>

#include "harness/op_harness.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/state_ops.h"
#include "ops/training_ops.h"
#include "runtime/gradients.h"

using namespace troupe;
using namespace troupe::runtime;
using testing::OpTest;

namespace {

std::vector<int64_t> ints(const Tensor& t) { return t.to_vector<int64_t>(); }
std::vector<float> floats(const Tensor& t) { return t.to_vector<float>(); }

}  // namespace

TEST_CASE("SparseTensor: rows of different lengths, and what check_sparse refuses") {
  SparseTensor st = SparseTensor::from_rows<std::string>({{"a", "b"}, {}, {"c"}});
  CHECK(ints(st.indices) == std::vector<int64_t>{0, 0, 0, 1, 2, 0});
  CHECK(st.values.to_vector<std::string>() == std::vector<std::string>{"a", "b", "c"});
  CHECK(ints(st.dense_shape) == std::vector<int64_t>{3, 2});
  CHECK(st.nnz() == 3);
  CHECK(runtime::check_sparse(st, "tags").ok());

  auto refused = [](SparseTensor s) {
    runtime::Status status = runtime::check_sparse(s, "tags");
    CHECK(status.message().find("tags") != std::string::npos);
    return status.message();
  };
  SparseTensor outside = st;
  outside.indices = Tensor::from_vector<int64_t>(Shape{3, 2}, {0, 0, 0, 2, 2, 0});
  CHECK(refused(outside).find("index 1 has 2 in dimension 1 of size 2") != std::string::npos);
  SparseTensor unordered = st;
  unordered.indices = Tensor::from_vector<int64_t>(Shape{3, 2}, {0, 1, 0, 0, 2, 0});
  CHECK(refused(unordered).find("out of order") != std::string::npos);
  SparseTensor repeated = st;
  repeated.indices = Tensor::from_vector<int64_t>(Shape{3, 2}, {0, 0, 0, 0, 2, 0});
  CHECK(refused(repeated).find("repeats") != std::string::npos);
  SparseTensor short_values = st;
  short_values.values = Tensor::from_vector<std::string>(Shape{2}, {"a", "b"});
  CHECK(refused(short_values).find("do not fit 2 values") != std::string::npos);
  SparseTensor int32_indices = st;
  int32_indices.indices = Tensor::from_vector<int32_t>(Shape{3, 2}, {0, 0, 0, 1, 2, 0});
  CHECK(refused(int32_indices).find("must be int64") != std::string::npos);
}

TEST_CASE("dense_to_sparse drops the missing values of a padded feature; sparse_to_dense pads") {
  OpTest t;
  Output words = t.feed(Tensor::from_vector<std::string>(Shape{3, 2}, {"a", "", "", "", "b", "c"}));
  Output positions;
  ops::SparseOutput sp = ops::dense_to_sparse(t.b, words, &positions);
  auto got = t.run({sp.indices, sp.values, sp.dense_shape, positions});
  REQUIRE(got.ok());
  CHECK(ints((*got)[0]) == std::vector<int64_t>{0, 0, 2, 0, 2, 1});
  CHECK((*got)[1].to_vector<std::string>() == std::vector<std::string>{"a", "b", "c"});
  CHECK(ints((*got)[2]) == std::vector<int64_t>{3, 2});
  CHECK(ints((*got)[3]) == std::vector<int64_t>{0, 4, 5});
  Output back = ops::sparse_to_dense(t.b, sp, ops::constant(t.b, Tensor::scalar<std::string>("?")));
  CHECK(t.eval(back).to_vector<std::string>() ==
        std::vector<std::string>{"a", "?", "?", "?", "b", "c"});

  // Integers: -1 is missing; a [batch] feature is [batch, 1].
  Output ids = t.feed(Tensor::from_vector<int64_t>(Shape{3}, {4, -1, 0}));
  ops::SparseOutput isp = ops::dense_to_sparse(t.b, ids);
  auto igot = t.run({isp.indices, isp.values, isp.dense_shape});
  REQUIRE(igot.ok());
  CHECK(ints((*igot)[0]) == std::vector<int64_t>{0, 0, 2, 0});
  CHECK(ints((*igot)[1]) == std::vector<int64_t>{4, 0});
  CHECK(ints((*igot)[2]) == std::vector<int64_t>{3, 1});

  ops::dense_to_sparse(t.b, t.feed(Tensor::from_vector<float>(Shape{1}, {1})));
  CHECK(t.b.status().message().find("needs strings or integers") != std::string::npos);
}

TEST_CASE("sparse_to_dense refuses entries outside the shape, naming them") {
  OpTest t;
  ops::SparseOutput sp = ops::sparse_placeholder(t.b, DType::kFloat32, "x");
  SparseTensor bad{Tensor::from_vector<int64_t>(Shape{1, 2}, {0, 5}),
                   Tensor::from_vector<float>(Shape{1}, {1}),
                   Tensor::from_vector<int64_t>(Shape{2}, {2, 3})};
  ops::feed_sparse(&t.feeds, sp, bad);
  auto r = t.run({ops::sparse_to_dense(t.b, sp, ops::scalar(t.b, 0, DType::kFloat32))});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("index 0 has 5 in dimension 1 of size 3") != std::string::npos);
}

TEST_CASE("unsorted_segment_sum adds rows by segment; its gradient gathers") {
  OpTest t;
  Output data = ops::variable(
      t.b, "d", Shape{4, 2}, DType::kFloat32,
      ops::constant(t.b, Tensor::from_vector<float>(Shape{4, 2}, {1, 2, 3, 4, 5, 6, 7, 8})));
  Output ids = t.feed(Tensor::from_vector<int64_t>(Shape{4}, {2, 0, 2, 2}));
  Output num = t.feed(Tensor::scalar<int64_t>(4));
  Output sum = ops::unsorted_segment_sum(t.b, data, ids, num);
  REQUIRE(t.run({}, {ops::global_variables_initializer(t.b)}).ok());
  Tensor y = t.eval(sum);
  CHECK(y.shape() == Shape{4, 2});
  CHECK(floats(y) == std::vector<float>{3, 4, 0, 0, 13, 16, 0, 0});
  // d/d data of sum(y * c) is row ids[i] of c.
  Tensor c = Tensor::from_vector<float>(Shape{4, 2}, {1, 10, 2, 20, 3, 30, 4, 40});
  Output loss = ops::reduce_sum(t.b, ops::mul(t.b, sum, ops::constant(t.b, c)));
  auto grads = runtime::gradients(t.b, {loss}, {data});
  REQUIRE(t.b.ok());
  CHECK(floats(t.eval(grads[0])) == std::vector<float>{3, 30, 1, 10, 3, 30, 3, 30});

  Output bad = t.feed(Tensor::from_vector<int64_t>(Shape{4}, {0, 4, 0, 0}));
  auto r = t.run({ops::unsorted_segment_sum(t.b, data, bad, num)});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("segment id 4 at position 1 is outside [0, 4)") !=
        std::string::npos);
}

TEST_CASE("embedding_lookup_sparse: sum, mean and sqrtn of weighted rows; empty rows are zeros") {
  OpTest t;
  // Row r of the table is (r, 10 r).
  Output table =
      ops::constant(t.b, Tensor::from_vector<float>(Shape{4, 2}, {0, 0, 1, 10, 2, 20, 3, 30}));
  ops::SparseOutput ids = ops::sparse_placeholder(t.b, DType::kInt64, "ids");
  ops::feed_sparse(&t.feeds, ids, SparseTensor::from_rows<int64_t>({{1, 3}, {}, {2}}));
  Output w = t.feed(Tensor::from_vector<float>(Shape{3}, {1, 3, 2}));
  auto lookup = [&](const char* combiner, Output weights) {
    return floats(t.eval(ops::embedding_lookup_sparse(t.b, table, ids, weights, combiner)));
  };
  CHECK(lookup("sum", Output{}) == std::vector<float>{4, 40, 0, 0, 2, 20});
  CHECK(lookup("mean", Output{}) == std::vector<float>{2, 20, 0, 0, 2, 20});
  // Weighted: row 0 is 1 * (1, 10) + 3 * (3, 30) = (10, 100); row 2 is 2 * (2, 20).
  CHECK(lookup("sum", w) == std::vector<float>{10, 100, 0, 0, 4, 40});
  CHECK(lookup("mean", w) == std::vector<float>{2.5f, 25, 0, 0, 2, 20});
  std::vector<float> sqrtn = lookup("sqrtn", w);
  CHECK(sqrtn[0] == doctest::Approx(10 / std::sqrt(10.0)));
  CHECK(sqrtn[1] == doctest::Approx(100 / std::sqrt(10.0)));
  CHECK(sqrtn[2] == 0);
  CHECK(sqrtn[4] == doctest::Approx(2));
  ops::embedding_lookup_sparse(t.b, table, ids, Output{}, "max");
  CHECK(t.b.status().message().find("combiner 'max'") != std::string::npos);
}

TEST_CASE("training through embedding_lookup_sparse updates the rows looked up only") {
  OpTest t;
  std::vector<float> start;
  for (int r = 0; r < 6; ++r) start.insert(start.end(), {float(r), float(r) + 0.5f});
  Output table = ops::variable(t.b, "emb", Shape{6, 2}, DType::kFloat32,
                               ops::constant(t.b, Tensor::from_vector<float>(Shape{6, 2}, start)));
  ops::SparseOutput ids = ops::sparse_placeholder(t.b, DType::kInt64, "ids");
  ops::feed_sparse(&t.feeds, ids, SparseTensor::from_rows<int64_t>({{1, 4}, {4}}));
  Output x = ops::embedding_lookup_sparse(t.b, table, ids, Output{}, "mean");
  Output loss = ops::reduce_sum(t.b, x);
  int train = ops::minimize(t.b, loss, ops::Optimizer::sgd(1.0));
  int init = ops::global_variables_initializer(t.b);
  REQUIRE_MESSAGE(t.b.ok(), t.b.status().to_string());
  bool sparse_update = false;
  for (int n = 0; n < t.g.num_nodes(); ++n)
    sparse_update |= t.g.node(n).op == "SparseApplyGradientDescent";
  CHECK(sparse_update);
  REQUIRE(t.run({}, {init}).ok());
  REQUIRE(t.run({}, {train}).ok());
  std::vector<float> after = t.vars.read("emb")->to_vector<float>();
  // d loss / d row 1 = 1/2 (row 0's mean); row 4: 1/2 + 1 (its own row).
  for (int r = 0; r < 6; ++r) {
    for (int c = 0; c < 2; ++c) {
      const float was = start[r * 2 + c];
      const float step = r == 1 ? 0.5f : r == 4 ? 1.5f : 0.0f;
      CHECK(after[r * 2 + c] == doctest::Approx(was - step));
    }
  }
}

TEST_CASE("embedding_lookup over a table in parts gives the whole table's rows, in any shape") {
  std::mt19937_64 rng(7);
  Tensor whole = testing::random_tensor<float>(Shape{10, 3}, rng);
  Tensor ids = Tensor::from_vector<int32_t>(Shape{2, 4}, {9, 0, 3, 3, 4, 7, 1, 9});
  for (int n = 1; n <= 4; ++n) {
    INFO(n, " parts");
    OpTest t;
    std::vector<Output> parts = ops::variable_parts(t.b, "emb", Shape{10, 3}, DType::kFloat32,
                                                    ops::constant(t.b, whole), n);
    REQUIRE(parts.size() == static_cast<size_t>(n));
    Output found = ops::embedding_lookup(t.b, parts, t.feed(ids));
    Output expected = ops::gather(t.b, ops::constant(t.b, whole), t.feed(ids));
    REQUIRE(t.run({}, {ops::global_variables_initializer(t.b)}).ok());
    auto got = t.run({found, expected});
    REQUIRE_MESSAGE(got.ok(), got.status().to_string());
    CHECK((*got)[0].shape() == Shape{2, 4, 3});
    CHECK(floats((*got)[0]) == floats((*got)[1]));
  }
  OpTest t;
  auto parts =
      ops::variable_parts(t.b, "emb", Shape{10, 3}, DType::kFloat32, ops::constant(t.b, whole), 3);
  REQUIRE(t.run({}, {ops::global_variables_initializer(t.b)}).ok());
  auto beyond = t.run(
      {ops::embedding_lookup(t.b, parts, t.feed(Tensor::from_vector<int64_t>(Shape{2}, {2, 10})))});
  CHECK(beyond.status().message().find("index 3 at position 0 is out of range [0, 3)") !=
        std::string::npos);
}

TEST_CASE("training through a lookup in parts updates each part's rows looked up only") {
  // The same model and step as above's, over a table of 6 rows in 4 parts (2, 2, 1, 1 rows).
  OpTest t;
  std::vector<float> start;
  for (int r = 0; r < 6; ++r) start.insert(start.end(), {float(r), float(r) + 0.5f});
  std::vector<Output> parts =
      ops::variable_parts(t.b, "emb", Shape{6, 2}, DType::kFloat32,
                          ops::constant(t.b, Tensor::from_vector<float>(Shape{6, 2}, start)), 4);
  ops::SparseOutput ids = ops::sparse_placeholder(t.b, DType::kInt64, "ids");
  ops::feed_sparse(&t.feeds, ids, SparseTensor::from_rows<int64_t>({{1, 4}, {4}}));
  Output x = ops::embedding_lookup_sparse(t.b, parts, ids, Output{}, "mean");
  int train = ops::minimize(t.b, ops::reduce_sum(t.b, x), ops::Optimizer::sgd(1.0));
  int init = ops::global_variables_initializer(t.b);
  REQUIRE_MESSAGE(t.b.ok(), t.b.status().to_string());
  int sparse_updates = 0;
  for (int n = 0; n < t.g.num_nodes(); ++n)
    sparse_updates += t.g.node(n).op == "SparseApplyGradientDescent";
  CHECK(sparse_updates == 4);
  REQUIRE(t.run({}, {init}).ok());
  REQUIRE(t.run({}, {train}).ok());
  std::vector<float> after;
  for (int p = 0; p < 4; ++p) {
    auto part = t.vars.read("emb/part_" + std::to_string(p)).value().to_vector<float>();
    after.insert(after.end(), part.begin(), part.end());
  }
  REQUIRE(after.size() == 12);
  for (int r = 0; r < 6; ++r) {
    for (int c = 0; c < 2; ++c) {
      const float step = r == 1 ? 0.5f : r == 4 ? 1.5f : 0.0f;
      CHECK(after[r * 2 + c] == doctest::Approx(start[r * 2 + c] - step));
    }
  }
}
