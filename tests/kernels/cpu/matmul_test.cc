// MatMul / BatchMatMul kernels against a naive triple loop, for every transpose combination;
// _FusedMatMul against the unfused chain it stands for, bit for bit.
#include <doctest/doctest.h>

#include <cblas.h>

#include "harness/op_harness.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "runtime/kernel_registry.h"

using namespace troupe;
using namespace troupe::runtime;
using testing::OpTest;
using testing::random_tensor;

namespace {
// c[i,j] = sum_k a(i,k) b(k,j) with a(i,k) = ta ? A[k,i] : A[i,k], likewise b.
std::vector<double> naive(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  auto va = testing::values(a), vb = testing::values(b);
  int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1);
  int64_t n = tb ? b.dim(0) : b.dim(1);
  std::vector<double> c(m * n, 0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) {
        double x = ta ? va[p * a.dim(1) + i] : va[i * a.dim(1) + p];
        double y = tb ? vb[j * b.dim(1) + p] : vb[p * b.dim(1) + j];
        c[i * n + j] += x * y;
      }
  return c;
}

template <class T>
void check_matmul(int64_t m, int64_t k, int64_t n, double tol) {
  std::mt19937_64 rng(m * 1000 + k * 10 + n);
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      INFO(m, "x", k, "x", n, " ta=", ta, " tb=", tb);
      Tensor a = random_tensor<T>(ta ? Shape{k, m} : Shape{m, k}, rng, -4, 4);
      Tensor b = random_tensor<T>(tb ? Shape{n, k} : Shape{k, n}, rng, -4, 4);
      OpTest t;
      Tensor c = t.eval(ops::matmul(t.b, t.feed(a), t.feed(b), ta, tb));
      CHECK(c.shape() == Shape{m, n});
      CHECK_CLOSE_TENSOR(c, naive(a, b, ta, tb), tol);
    }
}
}  // namespace

TEST_CASE("matmul matches a naive loop for every transpose, dtype and odd size") {
  for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{
           {1, 1, 1},
           {3, 5, 2},
           {65, 130, 33},
           {4, 0, 3},
           {0, 3, 2},
           // one row: a GEMV on the calling thread, and one over OpenBLAS's (a 2.4 MB matrix)
           {1, 37, 19},
           {1, 1024, 600}}) {
    check_matmul<double>(m, k, n, 1e-12);
    check_matmul<float>(m, k, n, 1e-4);
    check_matmul<int32_t>(m, k, n, 0);
    check_matmul<int64_t>(m, k, n, 0);
  }
}

TEST_CASE("batch_matmul broadcasts batch dims") {
  std::mt19937_64 rng(9);
  Tensor x = random_tensor<double>(Shape{2, 1, 3, 4}, rng);
  Tensor y = random_tensor<double>(Shape{3, 4, 2}, rng);
  OpTest t;
  Tensor z = t.eval(ops::batch_matmul(t.b, t.feed(x), t.feed(y)));
  REQUIRE(z.shape() == Shape{2, 3, 3, 2});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      Tensor xi = Tensor::from_vector<double>(
          Shape{3, 4},
          std::vector<double>(x.data<double>() + i * 12, x.data<double>() + i * 12 + 12));
      Tensor yj = Tensor::from_vector<double>(
          Shape{4, 2}, std::vector<double>(y.data<double>() + j * 8, y.data<double>() + j * 8 + 8));
      auto want = naive(xi, yj, false, false);
      for (int e = 0; e < 6; ++e) {
        CHECK(z.data<double>()[(i * 3 + j) * 6 + e] == doctest::Approx(want[e]));
      }
    }
}

namespace {
template <class T>
void check_fused(int64_t m, int64_t k, int64_t n) {
  std::mt19937_64 rng(m * 1000 + k * 10 + n);
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (const char* activation : {"", "Relu"}) {
        INFO(m, "x", k, "x", n, " ta=", ta, " tb=", tb, " activation=", activation);
        OpTest t;
        Output a = t.feed(random_tensor<T>(ta ? Shape{k, m} : Shape{m, k}, rng, -4, 4));
        Output b = t.feed(random_tensor<T>(tb ? Shape{n, k} : Shape{k, n}, rng, -4, 4));
        Output bias = t.feed(random_tensor<T>(Shape{n}, rng, -4, 4));
        Output chain = ops::bias_add(t.b, ops::matmul(t.b, a, b, ta, tb), bias);
        if (*activation) chain = ops::relu(t.b, chain);
        Output fused = t.b.add("_FusedMatMul", {a, b, bias},
                               {{"transpose_a", bool(ta)},
                                {"transpose_b", bool(tb)},
                                {"activation", std::string(activation)}});
        auto r = t.run({chain, fused});
        REQUIRE_MESSAGE(r.ok(), r.status().to_string());
        REQUIRE((*r)[1].shape() == Shape{m, n});
        const T* want = (*r)[0].data<T>();
        const T* got = (*r)[1].data<T>();
        CHECK(std::equal(got, got + m * n, want));
      }
}
}  // namespace

TEST_CASE("_FusedMatMul gives the bits of MatMul, BiasAdd and Relu run one after another") {
  for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{
           {1, 1, 1}, {3, 5, 2}, {65, 130, 33}, {8, 10, 16}, {4, 0, 3}, {0, 3, 2}}) {
    check_fused<float>(m, k, n);
    check_fused<double>(m, k, n);
    check_fused<int32_t>(m, k, n);
    check_fused<int64_t>(m, k, n);
  }
}

TEST_CASE("_FusedMatMul refuses a bias that does not fit and an activation it does not know") {
  std::mt19937_64 rng(4);
  OpTest t;
  Output a = t.feed(random_tensor<float>(Shape{2, 3}, rng));
  Output b = t.feed(random_tensor<float>(Shape{3, 4}, rng));
  t.b.add("_FusedMatMul", {a, b, t.feed(random_tensor<float>(Shape{5}, rng))});
  REQUIRE(!t.b.ok());
  CHECK(t.b.status().message().find("bias of shape [5] for a product with 4 columns") !=
        std::string::npos);

  OpTest u;
  Output bias = u.feed(random_tensor<float>(Shape{4}, rng));
  u.b.add("_FusedMatMul",
          {u.feed(random_tensor<float>(Shape{2, 3}, rng)),
           u.feed(random_tensor<float>(Shape{3, 4}, rng)), bias},
          {{"activation", std::string("Tanh")}});
  REQUIRE(!u.b.ok());
  CHECK(u.b.status().message().find("activation must be") != std::string::npos);

  // Shapes unknown when the graph was built: the kernel checks them.
  OpTest v;
  Output x = ops::placeholder(v.b, DType::kFloat32, Shape{-1, -1}, "x");
  Output w = ops::placeholder(v.b, DType::kFloat32, Shape{-1, -1}, "w");
  Output c = ops::placeholder(v.b, DType::kFloat32, Shape{-1}, "c");
  Output y = v.b.add("_FusedMatMul", {x, w, c});
  REQUIRE(v.b.ok());
  v.feeds = {{x, random_tensor<float>(Shape{2, 3}, rng)},
             {w, random_tensor<float>(Shape{3, 4}, rng)},
             {c, random_tensor<float>(Shape{3}, rng)}};
  auto r = v.run({y});
  REQUIRE(!r.ok());
  CHECK(r.status().message().find("bias of shape [3] for a product with 4 columns") !=
        std::string::npos);
}

TEST_CASE("compute threads: the registry reaches OpenBLAS") {
  const int before = openblas_get_num_threads();
  CHECK(troupe::runtime::kernel_registry().set_compute_threads(1));
  CHECK(openblas_get_num_threads() == 1);
  CHECK(!troupe::runtime::kernel_registry().set_compute_threads(0));
  troupe::runtime::kernel_registry().set_compute_threads(before);
  CHECK(openblas_get_num_threads() == before);
}

TEST_CASE("a batch_invariant product gives each row the bits it gets alone, anywhere in a batch") {
  std::mt19937_64 rng(17);
  const int64_t k = 128, n = 10;
  Tensor w = random_tensor<float>(Shape{k, n}, rng);
  Tensor x = random_tensor<float>(Shape{1, k}, rng);
  auto product = [&](const Tensor& a, bool invariant) {
    OpTest t;
    Output c = ops::matmul(t.b, t.feed(a), t.feed(w));
    if (invariant) t.g.set_attr(c.node, "batch_invariant", true);
    return t.eval(c);
  };
  const Tensor alone = product(x, true);
  int moved = 0;  // rows whose plain product differs from the row alone
  for (int64_t m : {16, 32, 64}) {
    for (int64_t at = 0; at < m; at += 5) {
      Tensor batch = random_tensor<float>(Shape{m, k}, rng);
      std::copy(x.data<float>(), x.data<float>() + k, batch.data<float>() + at * k);
      const Tensor invariant = product(batch, true), plain = product(batch, false);
      CHECK(std::memcmp(invariant.data<float>() + at * n, alone.data<float>(), n * 4) == 0);
      moved += std::memcmp(plain.data<float>() + at * n, alone.data<float>(), n * 4) != 0;
    }
  }
  // OpenBLAS's plain products do move bits with the batch (else this test would prove nothing).
  MESSAGE("plain products that differed from the row alone: ", moved);
}
