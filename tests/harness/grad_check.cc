#include "harness/grad_check.h"

#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "runtime/gradients.h"

namespace troupe::testing {

double gradient_error(const GraphFn& f, const std::vector<Tensor>& inputs, double eps) {
  OpTest t;
  std::vector<Output> xs;
  for (const Tensor& in : inputs) xs.push_back(t.feed(in));
  Output y = f(t.b, xs);
  Tensor y_value = t.eval(y);
  REQUIRE(y_value.dtype() == DType::kFloat64);
  std::mt19937_64 rng(7);
  Output w = ops::constant(t.b, random_tensor<double>(y_value.shape(), rng, 0.5, 1.5));
  Output loss = ops::reduce_sum(t.b, ops::mul(t.b, y, w));
  std::vector<Output> wrt;
  std::vector<size_t> which;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (inputs[i].dtype() == DType::kFloat64) {
      wrt.push_back(xs[i]);
      which.push_back(i);
    }
  }
  std::vector<Output> grads = runtime::gradients(t.b, {loss}, wrt);
  REQUIRE_MESSAGE(t.b.ok(), t.b.status().to_string());
  std::vector<Output> fetches{loss};
  for (Output& g : grads) {
    // An input the output does not depend on has no gradient: compare against zeros.
    fetches.push_back(g.valid() ? g : ops::zeros_like(t.b, xs[which[&g - grads.data()]]));
  }
  auto symbolic = t.run(fetches);
  REQUIRE_MESSAGE(symbolic.ok(), symbolic.status().to_string());

  runtime::Executor exec(t.g, {.variables = &t.vars});
  double worst = 0;
  for (size_t k = 0; k < which.size(); ++k) {
    const size_t i = which[k];
    const Tensor& g = (*symbolic)[k + 1];
    REQUIRE(g.shape() == inputs[i].shape());
    for (int64_t e = 0; e < inputs[i].num_elements(); ++e) {
      auto loss_at = [&](double delta) {
        runtime::FeedList feeds = t.feeds;
        Tensor moved = inputs[i].clone();
        moved.data<double>()[e] += delta;
        feeds[i].second = moved;
        auto r = exec.run(feeds, {loss});
        REQUIRE_MESSAGE(r.ok(), r.status().to_string());
        return (*r)[0].data<double>()[0];
      };
      double numeric = (loss_at(eps) - loss_at(-eps)) / (2 * eps);
      double analytic = g.data<double>()[e];
      worst = std::max(worst, std::abs(numeric - analytic) / std::max(1.0, std::abs(numeric)));
    }
  }
  return worst;
}

}  // namespace troupe::testing
