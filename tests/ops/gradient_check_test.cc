// Finite-difference check of every op's gradient, in float64, including broadcasting. The last
// test asserts that every op with a gradient function appears in this table.
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "harness/grad_check.h"
#include "ops/array_ops.h"
#include "ops/control_flow_ops.h"
#include "ops/conv_ops.h"
#include "ops/image_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/parsing_ops.h"
#include "ops/sparse_ops.h"
#include "ops/strided_slice.h"
#include "runtime/op_registry.h"

using namespace troupe;
using namespace troupe::runtime;
using testing::gradient_error;
using In = std::vector<Output>;

namespace {

std::mt19937_64& rng() {
  static std::mt19937_64 r(2024);
  return r;
}
Tensor rnd(const Shape& s, double lo = -1, double hi = 1) {
  return testing::random_tensor<double>(s, rng(), lo, hi);
}
// Random values kept at least `gap` away from each kink point, where derivatives jump.
Tensor away(const Shape& s, std::vector<double> kinks, double lo = -2, double hi = 2,
            double gap = 0.05) {
  Tensor t = rnd(s, lo, hi);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    double& v = t.data<double>()[i];
    for (double k : kinks) {
      if (std::abs(v - k) < gap) v = k + (v < k ? -gap : gap);
    }
  }
  return t;
}

Tensor vec(std::vector<double> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::from_vector<double>(Shape{n}, std::move(v));
}

// `start`, then `times` times v = step(v), in a while loop counting its iterations.
Output repeat(GraphBuilder& b, int times, Output start,
              const std::function<Output(GraphBuilder&, Output)>& step) {
  return ops::while_loop(
      b,
      [times](GraphBuilder& b, const In& v) {
        return ops::less(b, v[0], ops::scalar(b, times, DType::kInt32));
      },
      [&](GraphBuilder& b, const In& v) {
        return In{ops::add(b, v[0], 1.0), step(b, v[1])};
      },
      {ops::scalar(b, 0, DType::kInt32), start})[1];
}

// A cond on whether sum(v) > 0.
Output if_positive_sum(GraphBuilder& b, Output v,
                       const std::function<Output(GraphBuilder&)>& then_fn,
                       const std::function<Output(GraphBuilder&)>& else_fn) {
  Output pred = ops::greater(b, ops::reduce_sum(b, v), ops::scalar(b, 0, DType::kFloat64));
  return ops::cond(
      b, pred, [&](GraphBuilder& b) { return In{then_fn(b)}; },
      [&](GraphBuilder& b) { return In{else_fn(b)}; })[0];
}

struct GradCase {
  const char* op;  // the op whose gradient this case checks
  testing::GraphFn f;
  std::vector<Tensor> inputs;
  double eps = 1e-6;
  double tol = 1e-6;
};

std::vector<GradCase> cases() {
  auto unary = [](Output (*op)(GraphBuilder&, Output)) {
    return [op](GraphBuilder& b, const In& x) { return op(b, x[0]); };
  };
  auto cond_case = [](GraphBuilder& b, const In& x) {
    Output pred = ops::greater(b, ops::reduce_sum(b, x[0]), ops::scalar(b, 0, DType::kFloat64));
    return ops::cond(
        b, pred, [&](GraphBuilder& b) { return In{ops::mul(b, ops::square(b, x[0]), x[0])}; },
        [&](GraphBuilder& b) { return In{ops::mul(b, x[0], 3.0)}; })[0];
  };
  // v = x0; 3 times: v = v * x1 + tanh(v): x1 read inside the body, v going round.
  auto loop_case = [](GraphBuilder& b, const In& x) {
    return repeat(b, 3, x[0], [&](GraphBuilder& b, Output v) {
      return ops::add(b, ops::mul(b, v, x[1]), ops::tanh(b, v));
    });
  };
  // v = x0; 4 times: v = sum(v) > 0 ? v * x1 + sin(v) : v * v * x1; the branch each iteration
  // takes depends on the values.
  auto cond_in_loop_case = [](GraphBuilder& b, const In& x) {
    return repeat(b, 4, x[0], [&](GraphBuilder& b, Output v) {
      return if_positive_sum(
          b, v, [&](GraphBuilder& b) { return ops::add(b, ops::mul(b, v, x[1]), ops::sin(b, v)); },
          [&](GraphBuilder& b) { return ops::mul(b, ops::square(b, v), x[1]); });
    });
  };
  // A loop inside a cond: x0 * x1^3 when sum(x0) > 0, else x0 * 2.
  auto loop_in_cond_case = [](GraphBuilder& b, const In& x) {
    return if_positive_sum(
        b, x[0],
        [&](GraphBuilder& b) {
          return repeat(b, 3, x[0],
                        [&](GraphBuilder& b, Output v) { return ops::mul(b, v, x[1]); });
        },
        [&](GraphBuilder& b) { return ops::mul(b, x[0], 2.0); });
  };
  // The cond in a loop with a loop of 2 inside the true branch.
  auto loop_cond_loop_case = [](GraphBuilder& b, const In& x) {
    return repeat(b, 3, x[0], [&](GraphBuilder& b, Output v) {
      return if_positive_sum(
          b, v,
          [&](GraphBuilder& b) {
            return repeat(b, 2, v, [&](GraphBuilder& b, Output u) {
              return ops::add(b, ops::mul(b, u, x[1]), ops::sin(b, u));
            });
          },
          [&](GraphBuilder& b) { return ops::mul(b, ops::square(b, v), x[1]); });
    });
  };
  auto binary = [](Output (*op)(GraphBuilder&, Output, Output)) {
    return [op](GraphBuilder& b, const In& x) { return op(b, x[0], x[1]); };
  };
  Output (*add)(GraphBuilder&, Output, Output) = ops::add;
  Output (*sub)(GraphBuilder&, Output, Output) = ops::sub;
  Output (*mul)(GraphBuilder&, Output, Output) = ops::mul;
  Output (*div)(GraphBuilder&, Output, Output) = ops::div;
  Tensor with_zero = rnd(Shape{2, 3}, 0.5, 2);
  with_zero.data<double>()[1] = 0;  // Prod's gradient must stay exact at a zero

  std::vector<GradCase> c = {
      {"Identity", [](GraphBuilder& b, const In& x) { return ops::identity(b, x[0]); }, {rnd({3})}},
      {"Cast",
       [](GraphBuilder& b, const In& x) {
         return ops::cast(b, ops::cast(b, x[0], DType::kFloat32), DType::kFloat64);
       },
       {rnd({3})},
       1e-2,
       1e-4},
      {"Reshape",
       [](GraphBuilder& b, const In& x) {
         return ops::reshape(b, x[0], {3, -1});
       },
       {rnd({2, 3})}},
      {"ReshapeLike",
       [](GraphBuilder& b, const In& x) { return ops::reshape_like(b, x[0], x[1]); },
       {rnd({6}), rnd({3, 2})}},
      {"ExpandDims",
       [](GraphBuilder& b, const In& x) { return ops::expand_dims(b, x[0], 1); },
       {rnd({2, 2})}},
      {"Squeeze",
       [](GraphBuilder& b, const In& x) { return ops::squeeze(b, x[0]); },
       {rnd({2, 1, 2})}},
      {"Transpose",
       [](GraphBuilder& b, const In& x) {
         return ops::transpose(b, x[0], {1, 2, 0});
       },
       {rnd({2, 3, 2})}},
      {"Concat",
       [](GraphBuilder& b, const In& x) {
         return ops::concat(b, {x[0], x[1]}, 1);
       },
       {rnd({2, 1}), rnd({2, 3})}},
      {"Split",
       [](GraphBuilder& b, const In& x) {
         auto p = ops::split(b, x[0], 2, 1);
         return ops::mul(b, p[0], p[1]);
       },
       {rnd({2, 4})}},
      {"SplitLike",
       [](GraphBuilder& b, const In& x) {
         auto p = ops::split_like(b, x[0], {x[1], x[2]}, 0);
         return ops::reduce_sum(b, ops::square(b, p[1]));
       },
       {rnd({5, 2}), rnd({2, 2}), rnd({3, 2})}},
      {"Gather",
       [](GraphBuilder& b, const In& x) { return ops::gather(b, x[0], x[1], 1); },
       {rnd({2, 3}), Tensor::from_vector<int64_t>(Shape{4}, {2, 0, 2, 1})}},
      {"DynamicPartition",
       [](GraphBuilder& b, const In& x) {
         auto p = ops::dynamic_partition(b, x[0], x[1], 3);
         return ops::add_n(b, {ops::reduce_sum(b, ops::square(b, p[0])),
                               ops::reduce_sum(b, ops::mul(b, p[2], 3.0))});
       },
       {rnd({4, 2}), Tensor::from_vector<int32_t>(Shape{4}, {2, 0, 1, 2})}},
      {"DynamicStitch",
       [](GraphBuilder& b, const In& x) {
         return ops::square(b, ops::dynamic_stitch(b, {x[0], x[1]}, {x[2], x[3]}));
       },
       {Tensor::from_vector<int64_t>(Shape{2}, {3, 0}),
        Tensor::from_vector<int64_t>(Shape{2}, {1, 2}), rnd({2, 2}), rnd({2, 2})}},
      {"UnsortedSegmentSum",
       [](GraphBuilder& b, const In& x) { return ops::unsorted_segment_sum(b, x[0], x[1], x[2]); },
       {rnd({4, 3}), Tensor::from_vector<int64_t>(Shape{4}, {2, 0, 2, 1}),
        Tensor::scalar<int64_t>(3)}},
      {"Tile",
       [](GraphBuilder& b, const In& x) {
         return ops::tile(b, x[0], {2, 3});
       },
       {rnd({2, 1})}},
      {"Pad",
       [](GraphBuilder& b, const In& x) {
         return ops::pad(b, x[0], {{1, 0}, {2, 1}});
       },
       {rnd({2, 2})}},
      {"BroadcastTo",
       [](GraphBuilder& b, const In& x) {
         return ops::broadcast_to(b, x[0], Shape{2, 3, 2});
       },
       {rnd({3, 1})}},
      {"BroadcastToShapeOf",
       [](GraphBuilder& b, const In& x) { return ops::broadcast_to_shape_of(b, x[0], x[1]); },
       {rnd({1, 2}), rnd({3, 2})}},
      {"SumToShapeOf",
       [](GraphBuilder& b, const In& x) { return ops::sum_to_shape_of(b, x[0], x[1]); },
       {rnd({3, 2}), rnd({2})}},
      {"Select",
       [](GraphBuilder& b, const In& x) {
         return ops::select(b, ops::greater(b, x[0], x[1]), x[0], x[2]);
       },
       {away({2, 3}, {}), rnd({3}), rnd({2, 1})}},
      {"AddN",
       [](GraphBuilder& b, const In& x) {
         return ops::add_n(b, {x[0], x[1], x[0]});
       },
       {rnd({2, 2}), rnd({2, 2})}},
      {"StridedSlice",
       [](GraphBuilder& b, const In& x) {
         ops::StridedSliceSpec s;
         s.begin = {-1, 1};
         s.end = {0, 4};
         s.strides = {-1, 2};
         s.end_mask = 1;
         return ops::strided_slice(b, x[0], s);
       },
       {rnd({3, 4})}},
      {"Neg", unary(ops::neg), {rnd({3})}},
      {"Abs", unary(ops::abs), {away({4}, {0})}},
      // A cond on the sign of the input's sum: each branch's gradient, through the Switches
      // that take x into the branch and the Merge that brings its result out.
      {"Switch", cond_case, {rnd({3}, 0.2, 1)}},
      {"Merge", cond_case, {rnd({3}, -1, -0.2)}},
      {"WriteRow",
       [](GraphBuilder& b, const In& x) {
         Output r = ops::write_row(b, x[0], ops::scalar(b, 1, DType::kInt64), x[1]);
         return ops::mul(b, r, r);
       },
       {rnd({3, 2}), rnd({2})}},
      // A while loop: its ops are differentiated together, by a loop that runs the body's
      // gradient backwards; a fed trip count, a loop variable and an outer value read inside.
      {"Enter", loop_case, {rnd({3}, 0.5, 1.5), rnd({3})}},
      {"Exit", loop_case, {rnd({3}, -1.5, -0.5), rnd({3})}},
      {"NextIteration", loop_case, {rnd({2, 3}, 0.5, 1.5), rnd({3})}},
      // Both branches taken over the iterations: true, then false three times; false, then
      // true three times.
      {"Switch", cond_in_loop_case, {vec({0.3, 0.2, 0.1}), vec({-2, -1.5, -2.5})}},
      {"Merge", cond_in_loop_case, {vec({-0.3, -0.2, -0.1}), vec({0.5, 0.7, 0.6})}},
      {"Exit", loop_in_cond_case, {rnd({3}, 0.2, 1), rnd({3})}},
      {"Exit", loop_in_cond_case, {rnd({3}, -1, -0.2), rnd({3})}},
      {"Exit", loop_cond_loop_case, {vec({0.3, 0.2, 0.1}), vec({-2, -1.5, -2.5})}},
      {"Exit", loop_cond_loop_case, {vec({-0.3, -0.2, -0.1}), vec({0.5, 0.7, 0.6})}},
      {"Square", unary(ops::square), {rnd({3})}},
      {"Sqrt", unary(ops::sqrt), {rnd({3}, 0.5, 2)}},
      {"Rsqrt", unary(ops::rsqrt), {rnd({3}, 0.5, 2)}},
      {"Exp", unary(ops::exp), {rnd({3})}},
      {"Log", unary(ops::log), {rnd({3}, 0.5, 2)}},
      {"Cos", unary(ops::cos), {rnd({3}, -3, 3)}},
      {"Cumsum",
       [](GraphBuilder& b, const In& x) {
         return ops::mul(b, ops::cumsum(b, x[0], 1, true, true), x[1]);  // weights each sum
       },
       {rnd({2, 4}), rnd({2, 4})}},
      {"Sin", unary(ops::sin), {rnd({3}, -3, 3)}},
      {"Cumprod",
       [](GraphBuilder& b, const In& x) {
         return ops::mul(b, ops::cumprod(b, x[0], 1, false, true), x[1]);
       },
       {rnd({2, 4}, 0.5, 1.5), rnd({2, 4})}},
      {"Cumprod",
       [](GraphBuilder& b, const In& x) { return ops::cumprod(b, x[0], 0, true); },
       {rnd({3, 2}, -1.5, -0.5)}},
      {"ReverseV2",
       [](GraphBuilder& b, const In& x) {
         return ops::mul(b, ops::reverse(b, x[0], {0, -1}), x[1]);
       },
       {rnd({2, 3}), rnd({2, 3})}},
      // Index tuples of depth 1 (rows) and 2 (elements), one repeated: its gradient sums.
      {"GatherNd",
       [](GraphBuilder& b, const In& x) {
         return ops::mul(b, ops::gather_nd(b, x[0], x[1]), x[2]);
       },
       {rnd({3, 2}), Tensor::from_vector<int64_t>(Shape{3, 2}, {2, 1, 0, 0, 2, 1}), rnd({3})}},
      {"GatherNd",
       [](GraphBuilder& b, const In& x) { return ops::square(b, ops::gather_nd(b, x[0], x[1])); },
       {rnd({3, 2}), Tensor::from_vector<int32_t>(Shape{2, 1}, {2, 0})}},
      {"ScatterNd",
       [](GraphBuilder& b, const In& x) {
         return ops::mul(b, ops::scatter_nd(b, x[0], x[1], Shape{4, 2}), x[2]);
       },
       {Tensor::from_vector<int64_t>(Shape{3, 1}, {3, 0, 3}), rnd({3, 2}), rnd({4, 2})}},
      {"TopKV2",
       [](GraphBuilder& b, const In& x) {
         return ops::mul(b, ops::top_k(b, x[0], 2).values, x[1]);
       },
       {Tensor::from_vector<double>(Shape{2, 4}, {0.1, 0.9, -0.3, 0.5, 2.0, -1.0, 0.7, 1.2}),
        rnd({2, 2})}},
      {"Log1p", unary(ops::log1p), {rnd({3}, -0.5, 2)}},
      {"Tan", unary(ops::tan), {rnd({3}, -1.2, 1.2)}},
      {"Asin", unary(ops::asin), {rnd({3}, -0.9, 0.9)}},
      {"Acos", unary(ops::acos), {rnd({3}, -0.9, 0.9)}},
      {"Atan", unary(ops::atan), {rnd({3}, -3, 3)}},
      {"Sinh", unary(ops::sinh), {rnd({3}, -2, 2)}},
      {"Cosh", unary(ops::cosh), {rnd({3}, -2, 2)}},
      {"Asinh", unary(ops::asinh), {rnd({3}, -3, 3)}},
      {"Acosh", unary(ops::acosh), {rnd({3}, 1.2, 3)}},
      {"Atanh", unary(ops::atanh), {rnd({3}, -0.9, 0.9)}},
      {"Erf", unary(ops::erf), {rnd({3}, -2, 2)}},
      {"Erfc", unary(ops::erfc), {rnd({3}, -2, 2)}},
      {"Lgamma", unary(ops::lgamma), {rnd({3}, 0.3, 4)}},
      {"Digamma", unary(ops::digamma), {rnd({3}, 0.5, 4)}},
      {"Polygamma",
       [](GraphBuilder& b, const In& x) {
         return ops::polygamma(b, ops::scalar_like(b, x[0], 1.0), x[0]);  // trigamma
       },
       {rnd({3}, 0.5, 4)}},
      {"Expm1", unary(ops::expm1), {rnd({3}, -2, 2)}},
      {"Reciprocal", unary(ops::reciprocal), {rnd({3}, 0.5, 2)}},
      {"Atan2", binary(ops::atan2), {rnd({2, 3}), rnd({3}, 0.3, 1)}},
      {"SquaredDifference", binary(ops::squared_difference), {rnd({2, 3}), rnd({3})}},
      // Away from the jumps of floor(x / y): x / y stays inside (2, 3).
      {"FloorMod", binary(ops::floor_mod), {rnd({2, 3}, 2.3, 2.7), rnd({3}, 1.0, 1.1)}},
      {"Add", binary(add), {rnd({2, 3}), rnd({3})}},
      {"Sub", binary(sub), {rnd({2, 1}), rnd({1, 3})}},
      {"Mul", binary(mul), {rnd({}), rnd({2, 2})}},
      {"Div", binary(div), {rnd({2, 2}), rnd({2}, 0.5, 2)}},
      {"Pow", binary(ops::pow), {rnd({2, 2}, 0.5, 2), rnd({2}, -1, 2)}},
      {"Maximum", binary(ops::maximum), {away({2, 3}, {}), rnd({3})}},
      {"Minimum", binary(ops::minimum), {away({2, 3}, {}), rnd({3})}},
      {"MatMul",
       [](GraphBuilder& b, const In& x) { return ops::matmul(b, x[0], x[1]); },
       {rnd({2, 3}), rnd({3, 2})}},
      {"MatMul",
       [](GraphBuilder& b, const In& x) { return ops::matmul(b, x[0], x[1], true, false); },
       {rnd({3, 2}), rnd({3, 2})}},
      {"MatMul",
       [](GraphBuilder& b, const In& x) { return ops::matmul(b, x[0], x[1], false, true); },
       {rnd({2, 3}), rnd({2, 3})}},
      {"MatMul",
       [](GraphBuilder& b, const In& x) { return ops::matmul(b, x[0], x[1], true, true); },
       {rnd({3, 2}), rnd({2, 3})}},
      {"BatchMatMul",
       [](GraphBuilder& b, const In& x) { return ops::batch_matmul(b, x[0], x[1], false, true); },
       {rnd({2, 2, 3}), rnd({2, 3})}},
      {"BatchMatMul",
       [](GraphBuilder& b, const In& x) { return ops::batch_matmul(b, x[0], x[1], true, false); },
       {rnd({1, 3, 2}), rnd({2, 3, 2})}},
      {"Sum",
       [](GraphBuilder& b, const In& x) { return ops::reduce_sum(b, x[0], {1}); },
       {rnd({2, 3, 2})}},
      {"Mean",
       [](GraphBuilder& b, const In& x) { return ops::reduce_mean(b, x[0], {0, 2}, true); },
       {rnd({2, 3, 2})}},
      {"Max",
       [](GraphBuilder& b, const In& x) { return ops::reduce_max(b, x[0], {1}); },
       {rnd({2, 3})}},
      {"Min", [](GraphBuilder& b, const In& x) { return ops::reduce_min(b, x[0]); }, {rnd({2, 3})}},
      {"Prod",
       [](GraphBuilder& b, const In& x) { return ops::reduce_prod(b, x[0], {1}); },
       {with_zero}},
      {"Prod",
       [](GraphBuilder& b, const In& x) { return ops::reduce_prod(b, x[0], {}, true); },
       {rnd({2, 2}, 0.5, 1.5)}},
      {"Relu", unary(ops::relu), {away({5}, {0})}},
      {"Relu6", unary(ops::relu6), {away({6}, {0, 6}, -2, 8)}},
      {"Elu", unary(ops::elu), {away({5}, {0})}},
      {"Selu", unary(ops::selu), {away({5}, {0})}},
      {"LeakyRelu",
       [](GraphBuilder& b, const In& x) { return ops::leaky_relu(b, x[0], 0.3); },
       {away({5}, {0})}},
      {"Sigmoid", unary(ops::sigmoid), {rnd({4}, -4, 4)}},
      {"Tanh", unary(ops::tanh), {rnd({4}, -2, 2)}},
      {"Softplus", unary(ops::softplus), {rnd({4}, -4, 4)}},
      {"Softsign", unary(ops::softsign), {away({4}, {0})}},
      {"BiasAdd",
       [](GraphBuilder& b, const In& x) { return ops::bias_add(b, x[0], x[1]); },
       {rnd({2, 2, 3}), rnd({3})}},
      {"Softmax", unary(ops::softmax), {rnd({2, 4}, -3, 3)}},
      {"LogSoftmax", unary(ops::log_softmax), {rnd({2, 4}, -3, 3)}},
      {"SoftmaxCrossEntropyWithLogits",
       [](GraphBuilder& b,
          const In&
              x) { return ops::softmax_cross_entropy_with_logits(b, ops::softmax(b, x[1]), x[0]); },
       {rnd({2, 3}, -2, 2), rnd({2, 3})}},
      {"SparseSoftmaxCrossEntropyWithLogits",
       [](GraphBuilder& b,
          const In& x) { return ops::sparse_softmax_cross_entropy_with_logits(b, x[1], x[0]); },
       {rnd({3, 4}, -2, 2), Tensor::from_vector<int32_t>(Shape{3}, {3, 0, 1})}},
      {"Conv2D",
       [](GraphBuilder& b, const In& x) { return ops::conv2d(b, x[0], x[1], {1, 1}, "SAME"); },
       {rnd({1, 4, 4, 2}), rnd({3, 3, 2, 2})}},
      {"Conv2D",
       [](GraphBuilder& b,
          const In& x) { return ops::conv2d(b, x[0], x[1], {2, 1}, "VALID", {1, 2}); },
       {rnd({2, 5, 5, 1}), rnd({2, 2, 1, 3})}},
      {"Conv2DBackpropInput",
       [](GraphBuilder& b, const In& x) {
         return ops::conv2d_transpose(b, x[0], x[1], Shape{1, 4, 4, 2}, {2, 2}, "SAME");
       },
       {rnd({1, 2, 2, 3}), rnd({3, 3, 2, 3})}},
      {"LSTMBlockCell",
       [](GraphBuilder& b, const In& x) {
         std::vector<Output> out =
             b.add_node("LSTMBlockCell", {x[0], x[1], x[2], x[3], x[4]}, {{"forget_bias", 1.0}});
         // cs and h, the outputs that carry gradients (outputs 1 and 6).
         return ops::add(b, ops::mul(b, out[1], x[5]), out[6]);
       },
       {rnd({2, 3}), rnd({2, 2}), rnd({2, 2}), rnd({5, 8}), rnd({8}), rnd({2, 2})}},
      {"ReverseSequence",
       [](GraphBuilder& b, const In& x) {
         return ops::mul(
             b,
             ops::reverse_sequence(
                 b, x[0], ops::constant(b, Tensor::from_vector<int64_t>(Shape{2}, {2, 3}))),
             x[1]);
       },
       {rnd({2, 3, 2}), rnd({2, 3, 2})}},
      {"PlaceholderWithDefault",
       [](GraphBuilder& b, const In& x) {
         return ops::mul(b, ops::placeholder_with_default(b, x[0], Shape{-1, 3}), x[0]);
       },
       {rnd({2, 3})}},
      {"DepthwiseConv2dNative",
       [](GraphBuilder& b,
          const In& x) { return ops::depthwise_conv2d(b, x[0], x[1], {1, 1}, "SAME"); },
       {rnd({2, 4, 3, 2}), rnd({3, 2, 2, 2})}},
      {"DepthwiseConv2dNative",
       [](GraphBuilder& b,
          const In& x) { return ops::depthwise_conv2d(b, x[0], x[1], {2, 1}, "VALID", {1, 2}); },
       {rnd({1, 5, 5, 3}), rnd({2, 2, 3, 1})}},
      {"DepthwiseConv2dNativeBackpropInput",
       [](GraphBuilder& b, const In& x) {
         // The input's gradient for dy = x[0], a function of dy and the filter x[1].
         return b.add("DepthwiseConv2dNativeBackpropInput",
                      {ops::zeros(b, Shape{1, 4, 4, 2}, DType::kFloat64), x[1], x[0]},
                      {{"strides", std::vector<int64_t>{1, 2, 2, 1}}, {"padding", std::string("SAME")}});
       },
       {rnd({1, 2, 2, 4}), rnd({3, 3, 2, 2})}},
      {"ResizeBilinear",
       [](GraphBuilder& b, const In& x) {
         return ops::mul(b, ops::resize_bilinear(b, x[0], 5, 3), x[1]);
       },
       {rnd({2, 3, 4, 2}), rnd({2, 5, 3, 2})}},
      {"ResizeBilinear",
       [](GraphBuilder& b, const In& x) { return ops::resize_bilinear(b, x[0], 2, 7, false); },
       {rnd({3, 4, 1})}},
      {"ResizeNearestNeighbor",
       [](GraphBuilder& b, const In& x) {
         return ops::mul(b, ops::resize_nearest_neighbor(b, x[0], 3, 5), x[1]);
       },
       {rnd({1, 4, 3, 2}), rnd({1, 3, 5, 2})}},
      {"MaxPool",
       [](GraphBuilder& b, const In& x) { return ops::max_pool(b, x[0], {2, 2}, {2, 2}, "SAME"); },
       {rnd({1, 3, 3, 2})}},
      {"AvgPool",
       [](GraphBuilder& b, const In& x) { return ops::avg_pool(b, x[0], {2, 2}, {1, 1}, "SAME"); },
       {rnd({1, 3, 3, 2})}},
  };
  // Composites: their gradients come from the primitives above, checked end to end here.
  c.push_back({"",
               [](GraphBuilder& b, const In& x) { return ops::reduce_logsumexp(b, x[0], {1}); },
               {rnd({2, 3}, -3, 3)}});
  c.push_back({"",
               [](GraphBuilder& b, const In& x) {
                 return ops::sigmoid_cross_entropy_with_logits(b, x[1], x[0]);
               },
               {away({4}, {0}), rnd({4}, 0, 1)}});
  c.push_back({"", [](GraphBuilder& b, const In& x) { return ops::l2_loss(b, x[0]); }, {rnd({3})}});
  return c;
}

}  // namespace

TEST_CASE("symbolic gradients match central differences for every op") {
  for (const GradCase& c : cases()) {
    INFO("op ", c.op);
    CHECK(gradient_error(c.f, c.inputs, c.eps) < c.tol);
  }
}

TEST_CASE("every op with a gradient function is in the table above") {
  std::set<std::string> covered;
  for (const GradCase& c : cases()) covered.insert(c.op);
  for (const runtime::OpDef* op : runtime::registered_ops()) {
    if (!op->grad_fn) continue;
    INFO("op ", op->name, " has a gradient but no finite-difference check");
    CHECK(covered.count(op->name) == 1);
  }
}
