// Random ops, reproducible when seeded: the same (graph seed, op seed) gives the same stream of
// values, step after step, on every run (tf.set_random_seed's rules; see
// GraphBuilder::random_seeds). Unseeded ops draw from std::random_device.
//
//   b.graph().set_seed(42);
//   Output w = truncated_normal(b, Shape{784, 256}, 0.0, 0.05);
//   Output noise = random_uniform_like(b, x);   // shaped like x at run time
//
// Not thread-safe (builders).
#pragma once

#include <cstdint>

#include "ops/builder_names.h"

namespace troupe::ops {

Output random_uniform(GraphBuilder& b, const Shape& shape, double minval = 0, double maxval = 1,
                      DType dtype = DType::kFloat32, int64_t seed = 0);
Output random_normal(GraphBuilder& b, const Shape& shape, double mean = 0, double stddev = 1,
                     DType dtype = DType::kFloat32, int64_t seed = 0);
// Normal values, redrawn until within two standard deviations of the mean.
Output truncated_normal(GraphBuilder& b, const Shape& shape, double mean = 0, double stddev = 1,
                        DType dtype = DType::kFloat32, int64_t seed = 0);
// Uniform in [0, 1) with x's run-time shape and dtype.
Output random_uniform_like(GraphBuilder& b, Output x, int64_t seed = 0);

}  // namespace troupe::ops
