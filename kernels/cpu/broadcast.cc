#include "kernels/cpu/broadcast.h"

#include <algorithm>

namespace troupe::kernels::cpu {

namespace {

bool plan_for(const std::vector<const runtime::Shape*>& shapes, const runtime::Shape& out,
              BroadcastPlan* plan) {
  const int r = out.rank();
  const size_t k = shapes.size();
  // Each operand's dims aligned to the output's rank.
  std::vector<std::vector<int64_t>> dims(k, std::vector<int64_t>(r, 1));
  for (size_t j = 0; j < k; ++j) {
    const runtime::Shape& s = *shapes[j];
    for (int i = 0; i < s.rank(); ++i) dims[j][r - s.rank() + i] = s.dim(i);
  }
  // Merge adjacent output dims where every operand either spans both or repeats over both.
  std::vector<int64_t> merged;
  std::vector<std::vector<int64_t>> op_dims(k);
  for (int i = 0; i < r; ++i) {
    if (out.dim(i) == 1) continue;  // contributes nothing to the walk
    bool can_merge = !merged.empty();
    for (size_t j = 0; j < k && can_merge; ++j) {
      bool cur_full = dims[j][i] != 1;
      bool prev_full = op_dims[j].back() != 1;
      can_merge = cur_full == prev_full;
    }
    if (can_merge) {
      merged.back() *= out.dim(i);
      for (size_t j = 0; j < k; ++j) op_dims[j].back() *= dims[j][i];
    } else {
      merged.push_back(out.dim(i));
      for (size_t j = 0; j < k; ++j) op_dims[j].push_back(dims[j][i]);
    }
  }
  plan->out_shape = out;
  plan->dims = merged;
  plan->num_elements = out.num_elements();
  plan->strides.assign(k, std::vector<int64_t>(merged.size(), 0));
  for (size_t j = 0; j < k; ++j) {
    int64_t stride = 1;
    for (int d = static_cast<int>(merged.size()) - 1; d >= 0; --d) {
      if (op_dims[j][d] != 1) {
        plan->strides[j][d] = stride;
        stride *= op_dims[j][d];
      }
    }
  }
  return true;
}

}  // namespace

bool plan_broadcast(const std::vector<const runtime::Shape*>& shapes, BroadcastPlan* plan) {
  runtime::Shape out = *shapes[0];
  for (size_t j = 1; j < shapes.size(); ++j) {
    runtime::Shape next;
    if (!runtime::broadcast_shapes(out, *shapes[j], &next)) return false;
    out = next;
  }
  return plan_for(shapes, out, plan);
}

bool plan_broadcast_to(const runtime::Shape& in, const runtime::Shape& out, BroadcastPlan* plan) {
  runtime::Shape check;
  if (!runtime::broadcast_shapes(in, out, &check) || check != out) return false;
  return plan_for({&in}, out, plan);
}

}  // namespace troupe::kernels::cpu
