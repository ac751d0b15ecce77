// Reduction kernels against naive loops over every subset of axes of a rank-3 input.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "harness/op_harness.h"
#include "ops/math_ops.h"

using namespace troupe;
using namespace troupe::runtime;
using testing::OpTest;

namespace {
using ReduceFn = Output (*)(GraphBuilder&, Output, const std::vector<int64_t>&, bool);

std::vector<double> naive(const Tensor& x, const std::vector<bool>& reduce, int which) {
  auto v = testing::values(x);
  const Shape& s = x.shape();
  std::vector<int64_t> out_dims;
  for (int d = 0; d < 3; ++d) out_dims.push_back(reduce[d] ? 1 : s.dim(d));
  int64_t n_out = out_dims[0] * out_dims[1] * out_dims[2];
  double init = which == 2 ? -INFINITY : which == 3 ? INFINITY : which == 4 ? 1 : 0;
  std::vector<double> acc(n_out, init);
  std::vector<int64_t> count(n_out, 0);
  for (int64_t i = 0; i < s.dim(0); ++i)
    for (int64_t j = 0; j < s.dim(1); ++j)
      for (int64_t k = 0; k < s.dim(2); ++k) {
        double e = v[(i * s.dim(1) + j) * s.dim(2) + k];
        int64_t o = ((reduce[0] ? 0 : i) * out_dims[1] + (reduce[1] ? 0 : j)) * out_dims[2] +
                    (reduce[2] ? 0 : k);
        double& a = acc[o];
        a = which <= 1 ? a + e : which == 2 ? std::max(a, e) : which == 3 ? std::min(a, e) : a * e;
        ++count[o];
      }
  if (which == 1)
    for (int64_t o = 0; o < n_out; ++o) acc[o] = count[o] ? acc[o] / count[o] : NAN;
  return acc;
}
}  // namespace

TEST_CASE("sum, mean, max, min, prod over every subset of axes, keep_dims or not") {
  std::mt19937_64 rng(4);
  ReduceFn fns[] = {ops::reduce_sum, ops::reduce_mean, ops::reduce_max, ops::reduce_min,
                    ops::reduce_prod};
  for (Shape s : {Shape{2, 3, 4}, Shape{1, 5, 1}, Shape{3, 0, 2}}) {
    Tensor x = testing::random_tensor<double>(s, rng, 0.5, 1.5);
    for (int mask = 0; mask < 8; ++mask) {
      std::vector<int64_t> axes;
      std::vector<bool> reduce(3);
      for (int d = 0; d < 3; ++d) {
        reduce[d] = mask & (1 << d);
        if (reduce[d]) axes.push_back(d - 3 * (d % 2));  // mix negative and positive axes
      }
      if (axes.empty()) reduce.assign(3, true);
      for (int which = 0; which < 5; ++which) {
        for (bool keep : {false, true}) {
          INFO("shape ", s, " mask ", mask, " reduction ", which, " keep ", keep);
          OpTest t;
          Tensor y = t.eval(fns[which](t.b, t.feed(x), axes, keep));
          CHECK(y.num_elements() == int64_t(naive(x, reduce, which).size()));
          CHECK_CLOSE_TENSOR(y.reshaped(Shape{y.num_elements()}), naive(x, reduce, which), 1e-12);
          if (keep) CHECK(y.rank() == 3);
        }
      }
    }
  }
}

TEST_CASE("integer reductions and arg reductions (first index on ties)") {
  OpTest t;
  Output x = t.feed(Tensor::from_vector<int32_t>(Shape{2, 3}, {3, 1, 3, -2, 5, 5}));
  CHECK(t.eval(ops::reduce_sum(t.b, x, {1})).to_vector<int32_t>() == std::vector<int32_t>{7, 8});
  CHECK(t.eval(ops::reduce_max(t.b, x, {0})).to_vector<int32_t>() == std::vector<int32_t>{3, 5, 5});
  CHECK(t.eval(ops::argmax(t.b, x, 1)).to_vector<int64_t>() == std::vector<int64_t>{0, 1});
  CHECK(t.eval(ops::argmin(t.b, x, 0, DType::kInt32)).to_vector<int32_t>() ==
        std::vector<int32_t>{1, 0, 0});
  OpTest bad;
  ops::reduce_sum(bad.b, bad.feed(Tensor(DType::kFloat32, Shape{2})), {1});
  CHECK(bad.b.status().message().find("out of range") != std::string::npos);
}

TEST_CASE("logsumexp is stable and handles -inf rows") {
  OpTest t;
  Output x = t.feed(Tensor::from_vector<double>(
      Shape{2, 2}, {1000, 1000, -std::numeric_limits<double>::infinity(),
                    -std::numeric_limits<double>::infinity()}));
  auto y = t.eval(ops::reduce_logsumexp(t.b, x, {1})).to_vector<double>();
  CHECK(y[0] == doctest::Approx(1000 + std::log(2.0)));
  CHECK(std::isinf(y[1]));
  CHECK(y[1] < 0);
}
