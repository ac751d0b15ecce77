// Small problems with known answers for the canned model tests.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "estimators/run_config.h"
#include "runtime/tensor.h"

namespace troupe::estimators::test {

// n examples of `classes` Gaussian blobs in `dims` dimensions, centres 4 apart on a diagonal
// (class c at 4c - 2 in every dimension); labels int64 [n], cycling through the classes.
inline void blobs(int64_t n, int64_t classes, int64_t dims, uint64_t seed, runtime::Tensor* x,
                  runtime::Tensor* y) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> xs(n * dims);
  std::vector<int64_t> ys(n);
  for (int64_t i = 0; i < n; ++i) {
    ys[i] = i % classes;
    for (int64_t k = 0; k < dims; ++k) xs[i * dims + k] = g(rng) + 4.0f * ys[i] - 2.0f;
  }
  *x = runtime::Tensor::from_vector(runtime::Shape{n, dims}, xs);
  *y = runtime::Tensor::from_vector(runtime::Shape{n}, ys);
}

// y = x . coef + intercept (+ Gaussian noise of `noise`), x uniform in [-1, 1]; float32.
inline void line(int64_t n, const std::vector<float>& coef, float intercept, float noise,
                 uint64_t seed, runtime::Tensor* x, runtime::Tensor* y) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::normal_distribution<float> g(0, 1);
  const int64_t d = static_cast<int64_t>(coef.size());
  std::vector<float> xs(n * d), ys(n);
  for (int64_t i = 0; i < n; ++i) {
    ys[i] = intercept + noise * g(rng);
    for (int64_t k = 0; k < d; ++k) {
      xs[i * d + k] = u(rng);
      ys[i] += coef[k] * xs[i * d + k];
    }
  }
  *x = runtime::Tensor::from_vector(runtime::Shape{n, d}, xs);
  *y = runtime::Tensor::from_vector(runtime::Shape{n}, ys);
}

inline RunConfig quiet(const std::string& dir = "") {
  RunConfig c;
  c.model_dir = dir;
  c.tf_random_seed = 1;
  c.log_step_count_steps = 1000000;
  return c;
}

}  // namespace troupe::estimators::test
