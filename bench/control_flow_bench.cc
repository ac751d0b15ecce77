// Control flow on runtime::Executor (the reference) and on the actor runtime (issue 40):
//   lstm_loop_vs_unrolled  an LSTM (128 units, batch 128, 28 steps of 28 features, Fashion-MNIST's
//                          row-by-row shape) trained a step at a time (forward, backward through
//                          the loop, Adam), as dynamic_rnn's while_loop against the same cell
//                          written out as a straight graph of 28 steps: examples/s, ratio >= 0.9
//                          (issue 40's second peer)
//   lstm_fused_vs_composite the loop's LSTM with a fused LSTMBlockCell a step against the cell
//                          written as a node per product and activation: examples/s, ratio
//   lstm_actors_vs_executor the loop's LSTM trained through an actors::Session (its loops run in
//                          a control-flow region, the layers around them as node actors)
//                          against runtime::Executor: examples/s, their ratio
//   loop_fusion            the composite cell's LSTM trained through an actors::Session whose
//                          plan fuses each step's MatMul and BiasAdd inside the loop, against one
//                          that runs them apart (SessionOptions::fuse_ops): examples/s, ratio
//   parallel_iterations    a loop of 100 independent iterations (each a chain of three 64 x 64
//                          matmuls, summed into a total) with parallel_iterations 10 against 1:
//                          loops/s, ratio >= 1.5 on 2 cores (issue 40's bar; the frame executor
//                          runs iterations one after another, so this line shows the gap)
//   while_iteration        one iteration of a loop whose body is a scalar add against one node of
//                          a straight chain of adds: us each, their ratio (what frames cost
//                          per node on the reference executor)
//
//   control_flow_bench [--quick] [--json FILE] [--only parallel_iterations|lstm|while_iteration]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "actors/runtime_system.h"
#include "actors/session.h"
#include "bench/bench_flags.h"
#include "bench/bench_util.h"
#include "ops/array_ops.h"
#include "ops/control_flow_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/rnn.h"
#include "ops/state_ops.h"
#include "ops/training_ops.h"
#include "runtime/executor.h"

using namespace troupe;
using namespace troupe::runtime;

namespace {

bool quick = false;
constexpr int64_t kBatch = 128, kSteps = 28, kFeatures = 28, kUnits = 128;

enum class Run { kLoop, kUnrolled, kLoopOnActors, kLoopComposite, kCompositeOnActors };

// Seconds per training step of the LSTM classifier, through a loop or written out, on the
// reference executor or on actors (with fused chains or not).
double lstm_step_seconds(Run run, bool fuse = true) {
  const bool loop = run != Run::kUnrolled;
  Graph g;
  GraphBuilder b(&g);
  g.set_seed(1);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{kBatch, kSteps, kFeatures}, "x");
  Output y = ops::placeholder(b, DType::kInt32, Shape{kBatch}, "y");
  const bool composite = run == Run::kLoopComposite || run == Run::kCompositeOnActors;
  auto cell = ops::lstm_cell(b, "lstm", kFeatures, kUnits, 1.0, !composite);
  Output h;
  if (loop) {
    h = ops::dynamic_rnn(b, *cell, x).final_state[1];
  } else {
    Output zero = ops::zeros(b, Shape{kBatch, kUnits}, DType::kFloat32);
    std::vector<Output> state{zero, zero};
    for (int64_t t = 0; t < kSteps; ++t) {
      h = cell->step(b, ops::gather(b, x, ops::scalar(b, double(t), DType::kInt64), 1), &state);
    }
  }
  Output w = ops::variable(b, "out/w", Shape{kUnits, 10}, DType::kFloat32,
                           ops::glorot_uniform(b, Shape{kUnits, 10}));
  Output loss = ops::reduce_mean(
      b, ops::sparse_softmax_cross_entropy_with_logits(b, y, ops::matmul(b, h, w)));
  const int train = ops::minimize(b, loss, ops::Optimizer::adam(1e-3));
  const int init = ops::global_variables_initializer(b);
  if (!b.ok()) {
    std::fprintf(stderr, "control_flow_bench: %s\n", b.status().to_string().c_str());
    return 0;
  }
  std::mt19937_64 rng(2);
  Tensor xs(DType::kFloat32, Shape{kBatch, kSteps, kFeatures});
  Tensor ys(DType::kInt32, Shape{kBatch});
  std::uniform_real_distribution<float> u(0, 1);
  for (int64_t i = 0; i < xs.num_elements(); ++i) xs.data<float>()[i] = u(rng);
  for (int64_t i = 0; i < kBatch; ++i) ys.data<int32_t>()[i] = static_cast<int32_t>(i % 10);
  const int reps = quick ? 3 : 5;
  const double seconds = quick ? 0.3 : 1.0;
  if (run == Run::kLoopOnActors || run == Run::kCompositeOnActors) {
    actors::Runtime rt;
    auto session = actors::Session::create(rt, g, {.fuse_ops = fuse});
    if (!session.ok() || !(*session)->run({}, {}, {init}).ok()) return 0;
    return bench::median_seconds(
        [&] {
          if (!(*session)->run({{x, xs}, {y, ys}}, {}, {train}).ok()) std::abort();
        },
        reps, seconds);
  }
  VariableStore store;
  Executor exec(g, {.variables = &store});
  if (!exec.run({}, {}, {init}).ok()) return 0;
  return bench::median_seconds(
      [&] {
        if (!exec.run({{x, xs}, {y, ys}}, {}, {train}).ok()) std::abort();
      },
      reps, seconds);
}

// Microseconds per iteration of a scalar-add loop, or per node of a chain of adds.
double per_add_us(bool loop) {
  const int n = 1000;
  Graph g;
  GraphBuilder b(&g);
  Output start = ops::placeholder(b, DType::kFloat32, Shape{}, "start");
  Output out = start;
  if (loop) {
    out = ops::while_loop(
        b,
        [&](GraphBuilder& b, const std::vector<Output>& v) {
          return ops::less(b, v[0], ops::scalar(b, n, DType::kInt32));
        },
        [](GraphBuilder& b, const std::vector<Output>& v) {
          return std::vector<Output>{ops::add(b, v[0], 1.0), ops::add(b, v[1], 1.0)};
        },
        {ops::scalar(b, 0, DType::kInt32), start})[1];
  } else {
    for (int i = 0; i < n; ++i) out = ops::add(b, out, 1.0);
  }
  Executor exec(g);
  Tensor zero = Tensor::from_vector<float>(Shape{}, {0});
  return bench::median_seconds(
             [&] {
               if (!exec.run({{start, zero}}, {out}).ok()) std::abort();
             },
             quick ? 3 : 7, quick ? 0.1 : 0.3) /
         n * 1e6;
}

// Seconds per run of a loop of 100 iterations that do not depend on each other but for a sum:
// each multiplies x by w three times. With parallel_iterations 1 they run one after another.
double independent_loop_seconds(int64_t parallel_iterations) {
  Graph g;
  GraphBuilder b(&g);
  std::mt19937 rng(3);
  Tensor xv(DType::kFloat32, Shape{64, 64}), wv(DType::kFloat32, Shape{64, 64});
  std::normal_distribution<float> normal(0, 0.1f);
  for (int64_t i = 0; i < xv.num_elements(); ++i) {
    xv.data<float>()[i] = normal(rng);
    wv.data<float>()[i] = normal(rng);
  }
  Output x = ops::constant(b, xv, "x"), w = ops::constant(b, wv, "w");
  Output total = ops::while_loop(
      b,
      [](GraphBuilder& b, const std::vector<Output>& v) {
        return ops::less(b, v[0], ops::scalar(b, 100, DType::kInt32));
      },
      [&](GraphBuilder& b, const std::vector<Output>& v) {
        Output y = ops::matmul(b, ops::matmul(b, ops::matmul(b, x, w), w), w);
        return std::vector<Output>{ops::add(b, v[0], 1.0),
                                   ops::add(b, v[1], ops::reduce_sum(b, y))};
      },
      {ops::scalar(b, 0, DType::kInt32), ops::scalar(b, 0, DType::kFloat32)},
      {.parallel_iterations = parallel_iterations})[1];
  if (!b.ok()) {
    std::fprintf(stderr, "control_flow_bench: %s\n", b.status().to_string().c_str());
    std::exit(1);
  }
  Executor exec(g);
  return bench::median_seconds(
      [&] {
        if (!exec.run({}, {total}).ok()) std::abort();
      },
      quick ? 3 : 9, quick ? 0.1 : 0.5);
}

}  // namespace

int main(int argc, char** argv) {
  bench::Flags flags("control_flow_bench", "bench_control_flow.json");
  std::string only;
  flags.value("only", &only, "NAME", "parallel_iterations, lstm or while_iteration alone");
  flags.parse(argc, argv);
  quick = flags.quick;
  bench::Bars bars("control_flow");
  auto runs = [&](const char* part) { return only.empty() || only == part; };
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  // First, before the LSTM's big GEMMs leave OpenBLAS's threads spinning on the cores.
  std::vector<double> wide_s, narrow_s, wide_ratios;
  for (int round = 0; runs("parallel_iterations") && round < (quick ? 1 : 3); ++round) {
    wide_s.push_back(independent_loop_seconds(10));
    narrow_s.push_back(independent_loop_seconds(1));
    wide_ratios.push_back(narrow_s.back() / wide_s.back());
  }
  if (runs("parallel_iterations")) {
    bars.add("parallel_iterations", 1 / median(wide_s), "loops/s", "parallel_iterations_1",
             1 / median(narrow_s), median(wide_ratios));
  }
  // Alternated rounds, the ratio taken within each and its median reported.
  std::vector<double> loop_s, unrolled_s, actors_s, composite_s, ratios, actor_ratios, fused_ratios;
  std::vector<double> in_loop_s, apart_s, in_loop_ratios;
  for (int round = 0; runs("lstm") && round < (quick ? 1 : 3); ++round) {
    loop_s.push_back(lstm_step_seconds(Run::kLoop));
    unrolled_s.push_back(lstm_step_seconds(Run::kUnrolled));
    actors_s.push_back(lstm_step_seconds(Run::kLoopOnActors));
    composite_s.push_back(lstm_step_seconds(Run::kLoopComposite));
    ratios.push_back(unrolled_s.back() / loop_s.back());
    fused_ratios.push_back(composite_s.back() / loop_s.back());
    actor_ratios.push_back(loop_s.back() / actors_s.back());
    in_loop_s.push_back(lstm_step_seconds(Run::kCompositeOnActors, true));
    apart_s.push_back(lstm_step_seconds(Run::kCompositeOnActors, false));
    in_loop_ratios.push_back(apart_s.back() / in_loop_s.back());
  }
  if (runs("lstm")) {
    bars.add("lstm_loop_vs_unrolled", kBatch / median(loop_s), "examples/s", "unrolled",
             kBatch / median(unrolled_s), median(ratios));
    bars.add("lstm_fused_vs_composite", kBatch / median(loop_s), "examples/s", "composite_cell",
             kBatch / median(composite_s), median(fused_ratios));
    bars.add("lstm_actors_vs_executor", kBatch / median(actors_s), "examples/s", "executor",
             kBatch / median(loop_s), median(actor_ratios));
    bars.add("loop_fusion", kBatch / median(in_loop_s), "examples/s", "unfused",
             kBatch / median(apart_s), median(in_loop_ratios));
  }
  if (runs("while_iteration")) {
    const double iteration = per_add_us(true), node = per_add_us(false);
    bars.add("while_iteration", iteration, "us", "straight_node", node, node / iteration);
  }
  bars.write_json(flags.json);
  return 0;
}
