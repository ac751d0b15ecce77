// dynamic_rnn on a while_loop against the same cell unrolled step by step: the same outputs,
// final state and gradients, for LSTM and GRU cells; sequence lengths mask what lies past each
// example's end; a bidirectional layer's backward half reads each sequence reversed within its
// length; and an LSTM trained through its loop's gradient learns a sequence task.
#include "ops/rnn.h"

#include <doctest/doctest.h>

#include <random>

#include "harness/op_harness.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/state_ops.h"
#include "ops/training_ops.h"
#include "runtime/executor.h"
#include "runtime/gradients.h"

using namespace troupe;
using namespace troupe::runtime;
using testing::OpTest;

namespace {

using Outputs = std::vector<Output>;

// The cell run over `x` [batch, time, features] with a loop written out, one step a time.
Outputs unrolled(GraphBuilder& b, const ops::RnnCell& cell, Output x, int64_t steps,
                 int64_t features, Outputs* state) {
  Output first = ops::gather(b, x, ops::scalar(b, 0, DType::kInt64), 1);
  Output zero = ops::matmul(b, ops::zeros_like(b, first),
                            ops::zeros(b, Shape{features, cell.units()}, DType::kFloat32));
  state->assign(cell.state_size(), zero);
  Outputs outs;
  for (int64_t t = 0; t < steps; ++t) {
    outs.push_back(
        cell.step(b, ops::gather(b, x, ops::scalar(b, double(t), DType::kInt64), 1), state));
  }
  return outs;
}

double max_difference(const Tensor& a, const Tensor& c) { return testing::max_error(a, c); }

// An executor over `g` whose variables `init` has initialised.
struct Initialised {
  Initialised(const Graph& g, int init) : exec(g, {.variables = &store}) {
    auto done = exec.run({}, {}, {init});
    REQUIRE_MESSAGE(done.ok(), done.status().to_string());
  }
  VariableStore store;
  Executor exec;
};

void check_against_unrolled(bool lstm) {
  Graph g;
  GraphBuilder b(&g);
  g.set_seed(3);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{2, 4, 3}, "x");
  auto cell = lstm ? ops::lstm_cell(b, "cell", 3, 5) : ops::gru_cell(b, "cell", 3, 5);
  ops::RnnOutputs dynamic = ops::dynamic_rnn(b, *cell, x);
  Outputs state;
  Outputs steps = unrolled(b, *cell, x, 4, 3, &state);
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  // Gradients of the outputs' sum with respect to every variable, through the loop and through
  // the written-out steps.
  std::vector<Output> vars;
  for (int id : g.variables()) vars.push_back(Output{id, 0});
  Outputs d_loop = gradients(b, {ops::reduce_sum(b, dynamic.outputs)}, vars);
  Output total = ops::reduce_sum(b, steps[0]);
  for (size_t t = 1; t < steps.size(); ++t)
    total = ops::add(b, total, ops::reduce_sum(b, steps[t]));
  Outputs d_steps = gradients(b, {total}, vars);
  int init = ops::global_variables_initializer(b);
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());

  Initialised run(g, init);
  Executor& exec = run.exec;
  std::mt19937_64 rng(5);
  Tensor xs = testing::random_tensor<float>(Shape{2, 4, 3}, rng);
  Outputs fetch{dynamic.outputs, dynamic.final_state.back()};
  fetch.insert(fetch.end(), steps.begin(), steps.end());
  fetch.push_back(state.back());
  fetch.insert(fetch.end(), d_loop.begin(), d_loop.end());
  fetch.insert(fetch.end(), d_steps.begin(), d_steps.end());
  auto got = exec.run({{x, xs}}, fetch);
  REQUIRE_MESSAGE(got.ok(), got.status().to_string());
  const Tensor& outputs = (*got)[0];
  CHECK(outputs.shape() == Shape{2, 4, 5});
  for (int t = 0; t < 4; ++t) {
    for (int e = 0; e < 2; ++e) {
      for (int u = 0; u < 5; ++u) {
        CHECK(outputs.data<float>()[(e * 4 + t) * 5 + u] ==
              doctest::Approx((*got)[2 + t].data<float>()[e * 5 + u]).epsilon(1e-5));
      }
    }
  }
  CHECK(max_difference((*got)[1], (*got)[6]) < 1e-5);
  for (size_t v = 0; v < vars.size(); ++v) {
    INFO("variable ", g.node(vars[v].node).name);
    CHECK(max_difference((*got)[7 + v], (*got)[7 + vars.size() + v]) < 1e-4);
  }
}

}  // namespace

TEST_CASE("an LSTM's dynamic_rnn gives the written-out steps' outputs, state and gradients") {
  check_against_unrolled(true);
}

TEST_CASE("a GRU's dynamic_rnn gives the written-out steps' outputs, state and gradients") {
  check_against_unrolled(false);
}

TEST_CASE("sequence lengths: past its end an example outputs zeros and keeps its state") {
  Graph g;
  GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{2, 4, 3}, "x");
  Output lengths = ops::placeholder(b, DType::kInt32, Shape{2}, "lengths");
  auto cell = ops::lstm_cell(b, "cell", 3, 5);
  ops::RnnOutputs r = ops::dynamic_rnn(b, *cell, x, lengths);
  // Example 1 alone, for its 2 steps.
  Output short_x = ops::gather(b, ops::gather(b, x, ops::range(b, 0, 2, 1, DType::kInt64), 1),
                               ops::range(b, 1, 2, 1, DType::kInt64), 0);
  ops::RnnOutputs alone = ops::dynamic_rnn(b, *cell, short_x, {}, "alone");
  int init = ops::global_variables_initializer(b);
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  Initialised run(g, init);
  Executor& exec = run.exec;
  std::mt19937_64 rng(7);
  auto got = exec.run({{x, testing::random_tensor<float>(Shape{2, 4, 3}, rng)},
                       {lengths, Tensor::from_vector<int32_t>(Shape{2}, {4, 2})}},
                      {r.outputs, r.final_state[1], alone.final_state[1]});
  REQUIRE_MESSAGE(got.ok(), got.status().to_string());
  const float* out = (*got)[0].data<float>();
  double past_end = 0, within = 0;
  for (int u = 0; u < 5; ++u) {
    within += std::abs(out[(1 * 4 + 1) * 5 + u]);
    past_end += std::abs(out[(1 * 4 + 2) * 5 + u]) + std::abs(out[(1 * 4 + 3) * 5 + u]);
  }
  CHECK(within > 0);
  CHECK(past_end == 0);
  for (int u = 0; u < 5; ++u) {
    CHECK((*got)[1].data<float>()[5 + u] ==
          doctest::Approx((*got)[2].data<float>()[u]).epsilon(1e-5));
  }
}

TEST_CASE("LSTMBlockCell gives what the LSTM's formulas give, step by step") {
  OpTest t;
  std::mt19937_64 rng(9);
  const int64_t batch = 3, in = 4, units = 5;
  Output x = t.feed(testing::random_tensor<float>(Shape{batch, in}, rng));
  Output c = t.feed(testing::random_tensor<float>(Shape{batch, units}, rng));
  Output h = t.feed(testing::random_tensor<float>(Shape{batch, units}, rng));
  Output w = t.feed(testing::random_tensor<float>(Shape{in + units, 4 * units}, rng));
  Output bias = t.feed(testing::random_tensor<float>(Shape{4 * units}, rng));
  std::vector<Output> fused =
      t.b.add_node("LSTMBlockCell", {x, c, h, w, bias}, {{"forget_bias", 1.0}});
  REQUIRE(fused.size() == 7);
  // c' = sigmoid(f + 1) c + sigmoid(i) tanh(j), h' = sigmoid(o) tanh(c'), gates i, j, f, o.
  Output gates = ops::bias_add(t.b, ops::matmul(t.b, ops::concat(t.b, {x, h}, 1), w), bias);
  std::vector<Output> ijfo = ops::split(t.b, gates, 4, 1);
  Output c2 = ops::add(t.b, ops::mul(t.b, c, ops::sigmoid(t.b, ops::add(t.b, ijfo[2], 1.0))),
                       ops::mul(t.b, ops::sigmoid(t.b, ijfo[0]), ops::tanh(t.b, ijfo[1])));
  Output h2 = ops::mul(t.b, ops::tanh(t.b, c2), ops::sigmoid(t.b, ijfo[3]));
  CHECK(testing::max_error(t.eval(fused[1]), t.eval(c2)) < 1e-5);
  CHECK(testing::max_error(t.eval(fused[6]), t.eval(h2)) < 1e-5);
  OpTest bad;
  bad.b.add_node("LSTMBlockCell",
                 {bad.feed(Tensor(DType::kFloat32, Shape{3, 4})),
                  bad.feed(Tensor(DType::kFloat32, Shape{3, 5})),
                  bad.feed(Tensor(DType::kFloat32, Shape{3, 5})),
                  bad.feed(Tensor(DType::kFloat32, Shape{8, 20})),
                  bad.feed(Tensor(DType::kFloat32, Shape{20}))},
                 {{"forget_bias", 1.0}});
  auto run = bad.run({Output{bad.g.num_nodes() - 1, 6}});
  REQUIRE_FALSE(run.ok());
  CHECK(run.status().message().find("do not fit together") != std::string::npos);
}

TEST_CASE("reverse_sequence reverses each row within its length; the backward layer reads so") {
  OpTest t;
  // Two rows of 4 steps of 2 values: row 0 reversed in its first 3 steps, row 1 in its 4.
  Tensor x = Tensor::from_vector<float>(Shape{2, 4, 2}, {0, 1, 2, 3, 4, 5, 6, 7,  //
                                                         8, 9, 10, 11, 12, 13, 14, 15});
  Output rev =
      ops::reverse_sequence(t.b, t.feed(x), t.feed(Tensor::from_vector<int64_t>(Shape{2}, {3, 4})));
  CHECK(t.eval(rev).to_vector<float>() ==
        std::vector<float>{4, 5, 2, 3, 0, 1, 6, 7, 14, 15, 12, 13, 10, 11, 8, 9});
  OpTest bad;
  auto long_row = bad.run({ops::reverse_sequence(
      bad.b, bad.feed(x), bad.feed(Tensor::from_vector<int64_t>(Shape{2}, {3, 5})))});
  REQUIRE_FALSE(long_row.ok());
  CHECK(long_row.status().message().find("length 5 of row 1 is outside [0, 4]") !=
        std::string::npos);

  // The backward layer of a bidirectional RNN is the same cell run over each example reversed
  // within its length, its outputs put back in order.
  Graph g;
  GraphBuilder b(&g);
  Output in = ops::placeholder(b, DType::kFloat32, Shape{2, 4, 3}, "x");
  Output lengths = ops::placeholder(b, DType::kInt32, Shape{2}, "lengths");
  auto fw = ops::lstm_cell(b, "fw_cell", 3, 4);
  auto bw = ops::gru_cell(b, "bw_cell", 3, 5);
  ops::BidirectionalOutputs both = ops::bidirectional_dynamic_rnn(b, *fw, *bw, in, lengths);
  Output reversed = ops::placeholder(b, DType::kFloat32, Shape{2, 4, 3}, "reversed");
  ops::RnnOutputs alone = ops::dynamic_rnn(b, *bw, reversed, lengths, "alone");
  int init = ops::global_variables_initializer(b);
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  CHECK(g.shape(both.outputs) == Shape{2, 4, 9});
  Initialised run(g, init);
  std::mt19937_64 rng(3);
  const Tensor value = testing::random_tensor<float>(Shape{2, 4, 3}, rng);
  const std::vector<int32_t> n{2, 4};
  Tensor flipped = value.clone();
  for (int r = 0; r < 2; ++r) {
    for (int step = 0; step < n[r]; ++step) {
      for (int k = 0; k < 3; ++k) {
        flipped.data<float>()[(r * 4 + step) * 3 + k] =
            value.data<float>()[(r * 4 + n[r] - 1 - step) * 3 + k];
      }
    }
  }
  auto got =
      run.exec.run({{in, value}, {lengths, Tensor::from_vector(Shape{2}, n)}, {reversed, flipped}},
                   {both.outputs, alone.outputs, both.bw.final_state[0], alone.final_state[0]});
  REQUIRE_MESSAGE(got.ok(), got.status().to_string());
  const float* out = (*got)[0].data<float>();
  const float* ref = (*got)[1].data<float>();
  for (int r = 0; r < 2; ++r) {
    for (int step = 0; step < 4; ++step) {
      for (int u = 0; u < 5; ++u) {
        // Step `step` of the backward layer is the reference's step n - 1 - step.
        const float want = step < n[r] ? ref[(r * 4 + n[r] - 1 - step) * 5 + u] : 0.f;
        CHECK(out[(r * 4 + step) * 9 + 4 + u] == doctest::Approx(want).epsilon(1e-5));
      }
    }
  }
  CHECK(testing::max_error((*got)[2], (*got)[3]) < 1e-5);
}

TEST_CASE("an LSTM trained through its loop's gradient learns whether a sequence sums above 0") {
  Graph g;
  GraphBuilder b(&g);
  g.set_seed(11);
  const int64_t batch = 32, steps = 6;
  Output x = ops::placeholder(b, DType::kFloat32, Shape{-1, steps, 1}, "x");
  Output y = ops::placeholder(b, DType::kInt32, Shape{-1}, "y");
  auto cell = ops::lstm_cell(b, "lstm", 1, 8);
  ops::RnnOutputs r = ops::dynamic_rnn(b, *cell, x);
  Output w =
      ops::variable(b, "out/w", Shape{8, 2}, DType::kFloat32, ops::glorot_uniform(b, Shape{8, 2}));
  Output logits = ops::matmul(b, r.final_state[1], w);
  Output loss = ops::reduce_mean(b, ops::sparse_softmax_cross_entropy_with_logits(b, y, logits));
  Output right = ops::reduce_mean(
      b, ops::cast(b, ops::equal(b, ops::argmax(b, logits, 1, DType::kInt32), y), DType::kFloat32));
  int train = ops::minimize(b, loss, ops::Optimizer::adam(0.05));
  int init = ops::global_variables_initializer(b);
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());

  std::mt19937_64 rng(13);
  auto batch_of = [&](FeedList* f) {
    Tensor xs(DType::kFloat32, Shape{batch, steps, 1});
    Tensor ys(DType::kInt32, Shape{batch});
    std::uniform_real_distribution<float> u(-1, 1);
    for (int64_t e = 0; e < batch; ++e) {
      float sum = 0;
      for (int64_t t = 0; t < steps; ++t) sum += xs.data<float>()[e * steps + t] = u(rng);
      ys.data<int32_t>()[e] = sum > 0;
    }
    *f = {{x, xs}, {y, ys}};
  };
  Initialised run(g, init);
  Executor& exec = run.exec;
  FeedList f;
  batch_of(&f);
  auto before = exec.run(f, {loss});
  REQUIRE(before.ok());
  for (int step = 0; step < 150; ++step) {
    batch_of(&f);
    auto trained = exec.run(f, {loss}, {train});
    REQUIRE_MESSAGE(trained.ok(), trained.status().to_string());
  }
  double accuracy = 0, last_loss = 0;
  for (int k = 0; k < 4; ++k) {
    batch_of(&f);
    auto got = exec.run(f, {right, loss});
    REQUIRE(got.ok());
    accuracy += (*got)[0].data<float>()[0] / 4;
    last_loss += (*got)[1].data<float>()[0] / 4;
  }
  CHECK(last_loss < 0.5 * (*before)[0].data<float>()[0]);
  CHECK(accuracy > 0.85);
}
