#include "harness/op_harness.h"

#include <cmath>
#include <limits>

#include "ops/array_ops.h"

namespace troupe::testing {

Output OpTest::feed(const Tensor& t) {
  Output p = ops::placeholder(b, t.dtype(), t.shape());
  feeds.push_back({p, t});
  return p;
}

runtime::Result<std::vector<Tensor>> OpTest::run(const std::vector<Output>& fetches,
                                                 const std::vector<int>& targets) {
  if (!b.ok()) return b.status();
  runtime::Executor exec(g, {.variables = &vars});
  return exec.run(feeds, fetches, targets);
}

Tensor OpTest::eval(Output o) {
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  auto r = run({o});
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  return (*r)[0];
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> v(t.num_elements(), std::numeric_limits<double>::quiet_NaN());
  runtime::visit_numeric(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    for (int64_t i = 0; i < t.num_elements(); ++i) v[i] = static_cast<double>(t.data<T>()[i]);
  });
  return v;
}

double max_error(const Tensor& a, const std::vector<double>& b) {
  std::vector<double> va = values(a);
  if (va.size() != b.size()) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    if (std::isnan(va[i]) || std::isnan(b[i])) {
      if (std::isnan(va[i]) != std::isnan(b[i])) return std::numeric_limits<double>::infinity();
      continue;
    }
    if (va[i] == b[i]) continue;  // equal infinities too
    worst = std::max(worst, std::abs(va[i] - b[i]) / std::max(1.0, std::abs(b[i])));
  }
  return worst;
}

double max_error(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return std::numeric_limits<double>::infinity();
  return max_error(a, values(b));
}

}  // namespace troupe::testing
