// CPU kernels of the metric ops that count more than a fixed-size tensor holds: the contingency
// table of (label, prediction) pairs and the adjusted Rand index it gives (ops/metric_ops.h).
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "kernels/cpu/kernel.h"
#include "ops/metric_ops.h"

namespace troupe::kernels::cpu {

namespace {

using Pair = std::pair<double, double>;

// table [m, 3] sorted by (label, prediction), each with its count, plus a batch of pairs: the
// merged table, sorted, each pair once.
Status contingency_counts(KernelContext& ctx) {
  const Tensor& table = ctx.input(0);
  const Tensor& labels = ctx.input(1);
  const Tensor& predictions = ctx.input(2);
  if (table.rank() != 2 || table.dim(1) != 3 || table.dtype() != DType::kFloat64) {
    return runtime::invalid_argument("ContingencyCounts '", ctx.node().name, "': a table of ",
                                     table.shape(), ", not float64 [pairs, 3]");
  }
  if (labels.dtype() != DType::kFloat64 || predictions.dtype() != DType::kFloat64) {
    return runtime::invalid_argument("ContingencyCounts '", ctx.node().name,
                                     "': labels and predictions must be float64");
  }
  if (labels.num_elements() != predictions.num_elements()) {
    return runtime::invalid_argument("ContingencyCounts '", ctx.node().name,
                                     "': ", labels.num_elements(), " labels for ",
                                     predictions.num_elements(), " predictions");
  }
  const double* a = labels.data<double>();
  const double* p = predictions.data<double>();
  std::vector<Pair> batch(static_cast<size_t>(labels.num_elements()));
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(p[i])) {
      return runtime::invalid_argument("ContingencyCounts '", ctx.node().name, "': the pair (",
                                       a[i], ", ", p[i], ") at index ", i,
                                       " is not two finite group ids");
    }
    batch[i] = {a[i], p[i]};
  }
  std::sort(batch.begin(), batch.end());
  std::vector<std::pair<Pair, double>> merged;
  merged.reserve(static_cast<size_t>(table.dim(0)) + batch.size());
  const double* t = table.data<double>();
  size_t j = 0;
  auto add = [&](const Pair& key, double count) {
    if (!merged.empty() && merged.back().first == key) {
      merged.back().second += count;
    } else {
      merged.push_back({key, count});
    }
  };
  for (int64_t i = 0; i < table.dim(0); ++i) {
    const Pair key{t[3 * i], t[3 * i + 1]};
    for (; j < batch.size() && batch[j] < key; ++j) add(batch[j], 1);
    add(key, t[3 * i + 2]);
  }
  for (; j < batch.size(); ++j) add(batch[j], 1);
  Tensor out(DType::kFloat64, Shape{static_cast<int64_t>(merged.size()), 3});
  double* o = out.data<double>();
  for (size_t i = 0; i < merged.size(); ++i) {
    o[3 * i] = merged[i].first.first;
    o[3 * i + 1] = merged[i].first.second;
    o[3 * i + 2] = merged[i].second;
  }
  ctx.set_output(0, std::move(out));
  return runtime::ok_status();
}

Status adjusted_rand_index(KernelContext& ctx) {
  const Tensor& table = ctx.input(0);
  if (table.rank() != 2 || table.dim(1) != 3 || table.dtype() != DType::kFloat64) {
    return runtime::invalid_argument("AdjustedRandIndex '", ctx.node().name, "': a table of ",
                                     table.shape(), ", not float64 [pairs, 3]");
  }
  Tensor out(DType::kFloat64, Shape{});
  out.data<double>()[0] = ops::metrics::adjusted_rand_of(table.data<double>(), table.dim(0));
  ctx.set_output(0, std::move(out));
  return runtime::ok_status();
}

}  // namespace

TROUPE_REGISTER_KERNELS(metric_cpu) {
  registry.add("ContingencyCounts", DeviceType::kCpu, DType::kFloat64, &contingency_counts);
  registry.add("AdjustedRandIndex", DeviceType::kCpu, DType::kFloat64, &adjusted_rand_index);
}

}  // namespace troupe::kernels::cpu
