// Test harness for ops: a graph with a builder, a variable store and an executor, random input
// tensors, and closeness checks against references computed another way.
//
//   OpTest t;
//   Output x = t.feed(random_tensor<double>(Shape{3, 4}, rng));
//   Tensor y = t.eval(ops::exp(t.b, x));          // fails the test on any error
//   CHECK_CLOSE_TENSOR(y, expected, 1e-12);
//
// Not thread-safe; one per test case.
#pragma once

#include <doctest/doctest.h>

#include <functional>
#include <random>
#include <vector>

#include "runtime/executor.h"
#include "runtime/graph_builder.h"

namespace troupe::testing {

using runtime::DType;
using runtime::Output;
using runtime::Shape;
using runtime::Tensor;

struct OpTest {
  runtime::Graph g;
  runtime::GraphBuilder b{&g};
  runtime::VariableStore vars;
  runtime::FeedList feeds;

  // A placeholder with t's dtype and shape, fed t at every run.
  Output feed(const Tensor& t);
  runtime::Result<std::vector<Tensor>> run(const std::vector<Output>& fetches,
                                           const std::vector<int>& targets = {});
  // Runs and returns the one fetch; fails the test (with the error) if anything went wrong.
  Tensor eval(Output o);
};

template <class T>
Tensor random_tensor(const Shape& shape, std::mt19937_64& rng, double lo = -1, double hi = 1) {
  Tensor t(runtime::dtype_of<T>(), shape);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<T>()[i] = static_cast<T>(u(rng));
  return t;
}

// Every element as a double (numeric and bool dtypes).
std::vector<double> values(const Tensor& t);
// Largest |a - b| / max(1, |b|) over the elements; +inf if the shapes differ.
double max_error(const Tensor& a, const Tensor& b);
double max_error(const Tensor& a, const std::vector<double>& b);

}  // namespace troupe::testing

#define CHECK_CLOSE_TENSOR(a, b, tol) CHECK(::troupe::testing::max_error((a), (b)) <= (tol))
