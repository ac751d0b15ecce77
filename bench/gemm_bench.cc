// fp32 GEMM n^3 (default 1024) through troupe's kernel registry (a MatMul node run by the
// executor), next to raw OpenBLAS and raw Eigen in the same process. Bar: troupe >= 0.95 x the
// better peer.
//
//   gemm_bench [--n 1024] [--quick] [--json bench_gemm.json]
#include <cblas.h>

#include <random>
#include <string>
#include <thread>

#include "bench/bench_flags.h"
#include "bench/bench_util.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "runtime/executor.h"

namespace troupe::bench {
void eigen_sgemm(int n, const float* a, const float* b, float* c, int threads);
}

using namespace troupe;

int main(int argc, char** argv) {
  bench::Flags flags("gemm_bench", "bench_gemm.json");
  int64_t size = 1024;
  flags.value("n", &size, "N", "the matrices' size, N x N (--quick: at most 512)");
  flags.parse(argc, argv);
  if (size <= 0 || size > 16384) {
    std::fprintf(stderr, "gemm_bench: --n must be in [1, 16384], not %lld\n",
                 static_cast<long long>(size));
    return 2;
  }
  const int n = static_cast<int>(flags.quick ? std::min<int64_t>(size, 512) : size);
  const std::string json = flags.json;
  const runtime::Shape shape{n, n};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  runtime::Tensor a(runtime::DType::kFloat32, shape), b(runtime::DType::kFloat32, shape);
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    a.data<float>()[i] = u(rng);
    b.data<float>()[i] = u(rng);
  }
  runtime::Tensor c(runtime::DType::kFloat32, shape);

  runtime::Graph g;
  runtime::GraphBuilder gb(&g);
  runtime::Output pa = ops::placeholder(gb, runtime::DType::kFloat32, shape, "a");
  runtime::Output pb = ops::placeholder(gb, runtime::DType::kFloat32, shape, "b");
  runtime::Output prod = ops::matmul(gb, pa, pb);
  runtime::Executor exec(g);
  const double flops = 2.0 * n * n * n;
  const int threads = std::max(1u, std::thread::hardware_concurrency());

  auto troupe_gemm = [&] { (void)exec.run({{pa, a}, {pb, b}}, {prod}); };
  auto openblas = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data<float>(), n,
                b.data<float>(), n, 0.0f, c.data<float>(), n);
  };
  auto eigen = [&] {
    bench::eigen_sgemm(n, a.data<float>(), b.data<float>(), c.data<float>(), threads);
  };

  // Interleaved rounds, so that a noisy window hurts every contender alike.
  std::vector<double> t_troupe, t_blas, t_eigen;
  for (int round = 0; round < 3; ++round) {
    t_troupe.push_back(bench::median_seconds(troupe_gemm, 5, 0.2));
    t_blas.push_back(bench::median_seconds(openblas, 5, 0.2));
    t_eigen.push_back(bench::median_seconds(eigen, 5, 0.2));
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double gf_troupe = flops / median(t_troupe) / 1e9;
  const double gf_blas = flops / median(t_blas) / 1e9;
  const double gf_eigen = flops / median(t_eigen) / 1e9;
  std::printf("gemm %d^3: troupe %.1f, openblas %.1f, eigen(%d threads) %.1f GFLOP/s\n", n,
              gf_troupe, gf_blas, threads, gf_eigen);
  const bool blas_best = gf_blas >= gf_eigen;
  const double best = std::max(gf_blas, gf_eigen);
  bench::Bars bars("gemm");
  bars.add("gemm_" + std::to_string(n), gf_troupe, "GFLOP/s", blas_best ? "openblas" : "eigen",
           best, gf_troupe / best);
  if (!bars.write_json(json)) std::fprintf(stderr, "cannot write %s\n", json.c_str());
  return 0;
}
