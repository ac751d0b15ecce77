// Numpy broadcasting for CPU kernels: walks the output in contiguous runs, giving each operand's
// offset and whether it advances (stride 1) or repeats (stride 0) along the run. Dims are merged
// where every operand agrees, so [N, M] + [M] becomes N runs of M and same-shape operands one run.
//
//   BroadcastPlan plan;
//   if (!plan_broadcast({&a.shape(), &b.shape()}, &plan)) return error(...);
//   plan.for_each_run([&](int64_t out, const int64_t* in, const int64_t* step, int64_t n) {...});
//
// Stateless apart from the plan; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/shape.h"

namespace troupe::kernels::cpu {

struct BroadcastPlan {
  runtime::Shape out_shape;
  std::vector<int64_t> dims;                  // merged output dims
  std::vector<std::vector<int64_t>> strides;  // per operand, per merged dim (0: broadcast)
  int64_t num_elements = 0;

  // f(out_offset, operand_offsets, operand_inner_strides, run_length) for each run.
  template <class F>
  void for_each_run(F&& f) const {
    const size_t k = strides.size();
    std::vector<int64_t> offsets(k, 0), inner(k, 0);
    if (num_elements == 0) return;
    const int r = static_cast<int>(dims.size());
    if (r == 0) {
      f(int64_t{0}, offsets.data(), inner.data(), int64_t{1});
      return;
    }
    const int64_t len = dims[r - 1];
    for (size_t j = 0; j < k; ++j) inner[j] = strides[j][r - 1];
    std::vector<int64_t> index(r, 0);
    for (int64_t out = 0; out < num_elements; out += len) {
      f(out, offsets.data(), inner.data(), len);
      for (int d = r - 2; d >= 0; --d) {  // odometer over the outer dims
        ++index[d];
        for (size_t j = 0; j < k; ++j) offsets[j] += strides[j][d];
        if (index[d] < dims[d]) break;
        for (size_t j = 0; j < k; ++j) offsets[j] -= strides[j][d] * dims[d];
        index[d] = 0;
      }
    }
  }
};

// False when the shapes do not broadcast. All shapes must be fully defined.
bool plan_broadcast(const std::vector<const runtime::Shape*>& shapes, BroadcastPlan* plan);
// Broadcasting `in` to `out` (out must be a broadcast of in).
bool plan_broadcast_to(const runtime::Shape& in, const runtime::Shape& out, BroadcastPlan* plan);

}  // namespace troupe::kernels::cpu
