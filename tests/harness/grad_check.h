// Finite-difference gradient check: compares the symbolic gradient of sum(w * f(inputs)) (w a
// fixed random weight) with central differences, in float64, for every float64 input.
//
//   double err = gradient_error([](GraphBuilder& b, const std::vector<Output>& in) {
//     return ops::mul(b, in[0], in[1]);
//   }, {random_tensor<double>(Shape{2, 3}, rng), random_tensor<double>(Shape{3}, rng)});
//   CHECK(err < 1e-6);
//
// Inputs of other dtypes (indices, labels) are fed but not perturbed. Keep inputs small: each
// element costs two forward runs.
#pragma once

#include <functional>
#include <vector>

#include "harness/op_harness.h"

namespace troupe::testing {

using GraphFn = std::function<Output(runtime::GraphBuilder&, const std::vector<Output>&)>;

// The largest relative difference between symbolic and numeric gradients; fails the test if the
// graph cannot be built or run.
double gradient_error(const GraphFn& f, const std::vector<Tensor>& inputs, double eps = 1e-6);

}  // namespace troupe::testing
