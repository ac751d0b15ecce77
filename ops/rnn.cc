#include "ops/rnn.h"

#include "ops/array_ops.h"
#include "ops/control_flow_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/op_def_names.h"
#include "ops/state_ops.h"

namespace troupe::ops {

namespace {

// LSTMBlockCell's outputs, in TF's order: i (the input gate), cs (the new cell), f and o (the
// forget and output gates), ci (tanh of the candidate), co (tanh of cs), h (the output). Its
// gradient needs them all.
enum Block { kI, kCs, kF, kO, kCi, kCo, kH };

Status block_shape(InferenceContext& c) {
  TROUPE_RETURN_IF_ERROR(c.expect_floating(0));
  const Shape& x = c.input_shape(0);
  const Shape& w = c.input_shape(3);
  if (w.rank_known() && w.rank() != 2) return c.error("w must be [input + units, 4 units]");
  const int64_t units = w.rank_known() && w.dim(1) >= 0 ? w.dim(1) / 4 : -1;
  const int64_t batch = x.rank_known() && x.rank() == 2 ? x.dim(0) : -1;
  for (int i = 0; i < 7; ++i) c.set_output(i, c.input_dtype(0), Shape{batch, units});
  return runtime::ok_status();
}

}  // namespace

TROUPE_REGISTER_OP(LSTMBlockCell)
    .input("x")
    .input("cs_prev")
    .input("h_prev")
    .input("w")
    .input("b")
    .output("i")
    .output("cs")
    .output("f")
    .output("o")
    .output("ci")
    .output("co")
    .output("h")
    .attr("forget_bias", 1.0)
    .shape_fn(block_shape)
    // TF's _LSTMBlockCellGrad: the gates' pre-activation gradients from the kernel, then the
    // products that carry them to x, h_prev, w and b. Only cs and h pass gradients on.
    .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) {
      const Output x = n.inputs[0], cs_prev = n.inputs[1], h_prev = n.inputs[2], w = n.inputs[3];
      auto out = [&](int k) { return Output{n.id, k}; };
      const std::vector<Output> grads =
          b.add_node("LSTMBlockCellGrad",
                     {x, cs_prev, h_prev, w, out(kI), out(kCs), out(kF), out(kO), out(kCi),
                      out(kCo), dy[kCs], dy[kH]},
                     {});
      if (grads.size() != 2) return Grads(5);
      const Output dgates = grads[1];  // [batch, 4 units]
      const Output dxh = matmul(b, dgates, w, false, true);
      std::vector<Output> parts = split_like(b, dxh, {x, h_prev}, 1);
      if (parts.size() != 2) return Grads(5);
      const Output dw = matmul(b, concat(b, {x, h_prev}, 1), dgates, true, false);
      return Grads{parts[0], grads[0], parts[1], dw, reduce_sum(b, dgates, {0})};
    })
    .doc(
        "one LSTM step fused (TF's LSTMBlockCell, no peepholes): gates [x, h_prev] w + b in the "
        "order i, ci, f, o; cs = sigmoid(f + forget_bias) cs_prev + sigmoid(i) tanh(ci)");

TROUPE_REGISTER_OP(LSTMBlockCellGrad)
    .input("x")
    .input("cs_prev")
    .input("h_prev")
    .input("w")
    .input("i")
    .input("cs")
    .input("f")
    .input("o")
    .input("ci")
    .input("co")
    .input("cs_grad")
    .input("h_grad")
    .output("cs_prev_grad")
    .output("dgates")
    .shape_fn([](InferenceContext& c) -> Status {
      c.set_output(0, c.input_dtype(1), c.input_shape(1));
      const Shape& cs = c.input_shape(1);
      const int64_t batch = cs.rank_known() && cs.rank() == 2 ? cs.dim(0) : -1;
      const int64_t units = cs.rank_known() && cs.rank() == 2 && cs.dim(1) >= 0 ? cs.dim(1) : -1;
      c.set_output(1, c.input_dtype(1), Shape{batch, units < 0 ? -1 : 4 * units});
      return runtime::ok_status();
    })
    .no_gradient()
    .doc(
        "LSTMBlockCell's gradient for cs_prev, and for the gates' pre-activations (second "
        "derivatives are not supported)");

namespace {

class LstmCell : public RnnCell {
 public:
  LstmCell(GraphBuilder& b, const std::string& name, int64_t input_size, int64_t units,
           double forget_bias, bool fused)
      : units_(units), forget_bias_(forget_bias), fused_(fused) {
    const Shape shape{input_size + units, 4 * units};
    kernel_ = variable(b, name + "/kernel", shape, DType::kFloat32, glorot_uniform(b, shape));
    bias_ = variable(b, name + "/bias", Shape{4 * units}, DType::kFloat32,
                     zeros(b, Shape{4 * units}, DType::kFloat32));
  }
  int64_t units() const override { return units_; }
  int state_size() const override { return 2; }
  // Fused: one LSTMBlockCell node a step, a node of the loop's body instead of a dozen, and no
  // intermediate tensors but the ones its gradient reads.
  Output step(GraphBuilder& b, Output input, std::vector<Output>* state) const override {
    if (fused_) {
      const std::vector<Output> out =
          b.add_node("LSTMBlockCell", {input, (*state)[0], (*state)[1], kernel_, bias_},
                     {{"forget_bias", forget_bias_}});
      if (out.size() != 7) return {};
      *state = {out[kCs], out[kH]};
      return out[kH];
    }
    Output c = (*state)[0], h = (*state)[1];
    Output gates = bias_add(b, matmul(b, concat(b, {input, h}, 1), kernel_), bias_);
    std::vector<Output> ijfo = split(b, gates, 4, 1);
    if (ijfo.size() != 4) return {};
    Output forget = sigmoid(b, add(b, ijfo[2], forget_bias_));
    c = add(b, mul(b, c, forget), mul(b, sigmoid(b, ijfo[0]), tanh(b, ijfo[1])));
    h = mul(b, tanh(b, c), sigmoid(b, ijfo[3]));
    *state = {c, h};
    return h;
  }

 private:
  const int64_t units_;
  const double forget_bias_;
  const bool fused_;
  Output kernel_, bias_;
};

class GruCell : public RnnCell {
 public:
  GruCell(GraphBuilder& b, const std::string& name, int64_t input_size, int64_t units)
      : units_(units) {
    const Shape gates{input_size + units, 2 * units}, candidate{input_size + units, units};
    gate_kernel_ =
        variable(b, name + "/gates/kernel", gates, DType::kFloat32, glorot_uniform(b, gates));
    // TF's: gates start open (bias 1), so that the state flows through at first.
    gate_bias_ = variable(b, name + "/gates/bias", Shape{2 * units}, DType::kFloat32,
                          ones(b, Shape{2 * units}, DType::kFloat32));
    candidate_kernel_ = variable(b, name + "/candidate/kernel", candidate, DType::kFloat32,
                                 glorot_uniform(b, candidate));
    candidate_bias_ = variable(b, name + "/candidate/bias", Shape{units}, DType::kFloat32,
                               zeros(b, Shape{units}, DType::kFloat32));
  }
  int64_t units() const override { return units_; }
  int state_size() const override { return 1; }
  Output step(GraphBuilder& b, Output input, std::vector<Output>* state) const override {
    Output h = (*state)[0];
    Output gates =
        sigmoid(b, bias_add(b, matmul(b, concat(b, {input, h}, 1), gate_kernel_), gate_bias_));
    std::vector<Output> ru = split(b, gates, 2, 1);
    if (ru.size() != 2) return {};
    Output candidate =
        tanh(b, bias_add(b, matmul(b, concat(b, {input, mul(b, ru[0], h)}, 1), candidate_kernel_),
                         candidate_bias_));
    // u h + (1 - u) candidate
    h = add(b, mul(b, ru[1], h), mul(b, add(b, neg(b, ru[1]), 1.0), candidate));
    *state = {h};
    return h;
  }

 private:
  const int64_t units_;
  Output gate_kernel_, gate_bias_, candidate_kernel_, candidate_bias_;
};

}  // namespace

std::unique_ptr<RnnCell> lstm_cell(GraphBuilder& b, const std::string& name, int64_t input_size,
                                   int64_t units, double forget_bias, bool fused) {
  return std::make_unique<LstmCell>(b, name, input_size, units, forget_bias, fused);
}

std::unique_ptr<RnnCell> gru_cell(GraphBuilder& b, const std::string& name, int64_t input_size,
                                  int64_t units) {
  return std::make_unique<GruCell>(b, name, input_size, units);
}

RnnOutputs dynamic_rnn(GraphBuilder& b, const RnnCell& cell, Output inputs, Output sequence_length,
                       const std::string& name) {
  if (!b.ok() || !inputs.valid()) return {};
  const Shape& in_shape = b.shape(inputs);
  if (in_shape.rank_known() && in_shape.rank() != 3) {
    b.record_error(runtime::invalid_argument(
        "dynamic_rnn '", name, "': inputs must be [batch, time, features], got ", in_shape));
    return {};
  }
  auto scope = b.name_scope(name);
  const int64_t units = cell.units();
  Output steps_first = transpose(b, inputs, {1, 0, 2});  // [time, batch, features]
  Output lengths = sequence_length.valid() ? cast(b, sequence_length, DType::kInt64) : Output{};
  // Where an example's sequence has ended: its state stays, its output is zero.
  auto masked = [&](GraphBuilder& b, Output t, Output out, std::vector<Output>* state,
                    const std::vector<Output>& before) {
    if (!lengths.valid()) return out;
    Output going = expand_dims(b, less(b, t, lengths), 1);  // [batch, 1]
    for (size_t k = 0; k < state->size(); ++k) {
      (*state)[k] = select(b, going, (*state)[k], before[k]);
    }
    return select(b, going, out, zeros_like(b, out));
  };

  // The first step outside the loop: it gives the zero state its batch size and starts the
  // outputs, which each iteration extends.
  Output first = gather(b, steps_first, scalar(b, 0, DType::kInt64));
  const int64_t features = in_shape.rank_known() ? in_shape.dim(2) : Shape::kUnknownDim;
  if (features == Shape::kUnknownDim) {
    b.record_error(runtime::invalid_argument("dynamic_rnn '", name,
                                             "': the inputs' feature dimension must be known"));
    return {};
  }
  Output zero = matmul(b, zeros_like(b, first), zeros(b, Shape{features, units}, DType::kFloat32));
  std::vector<Output> state(cell.state_size(), zero);
  const std::vector<Output> zero_state = state;
  Output out = cell.step(b, first, &state);
  Output t0 = scalar(b, 0, DType::kInt64);
  out = masked(b, t0, out, &state, zero_state);
  // The outputs, [time, batch, units], filled a row each step (in place: no copy of the rows
  // before, as a concatenation would make).
  Output rows = add(b, expand_dims(b, zeros_like(b, gather(b, steps_first, t0, 2)), 2),
                    zeros(b, Shape{units}, DType::kFloat32));  // [time, batch, units]
  Output outputs = write_row(b, rows, t0, out);
  if (!b.ok()) return {};

  const int64_t batch = in_shape.dim(0);
  Output time = div(b, size(b, steps_first), size(b, first));
  std::vector<Output> vars{scalar(b, 1, DType::kInt64), outputs};
  std::vector<Shape> invariants{Shape{}, b.shape(outputs)};
  for (const Output& s : state) {
    vars.push_back(s);
    invariants.push_back(Shape{batch, units});
  }
  std::vector<Output> r = while_loop(
      b, [&](GraphBuilder& b, const std::vector<Output>& v) { return less(b, v[0], time); },
      [&](GraphBuilder& b, const std::vector<Output>& v) {
        const std::vector<Output> before(v.begin() + 2, v.end());
        std::vector<Output> s = before;
        Output step_out = cell.step(b, gather(b, steps_first, v[0]), &s);
        step_out = masked(b, v[0], step_out, &s, before);
        std::vector<Output> next{add(b, v[0], 1.0), write_row(b, v[1], v[0], step_out)};
        next.insert(next.end(), s.begin(), s.end());
        return next;
      },
      vars, {.shape_invariants = invariants});
  if (r.size() != vars.size()) return {};
  return {transpose(b, r[1], {1, 0, 2}), std::vector<Output>(r.begin() + 2, r.end())};
}

BidirectionalOutputs bidirectional_dynamic_rnn(GraphBuilder& b, const RnnCell& fw,
                                               const RnnCell& bw, Output inputs,
                                               Output sequence_length, const std::string& name) {
  auto scope = b.name_scope(name);
  auto backwards = [&](Output x) {
    return sequence_length.valid() ? reverse_sequence(b, x, sequence_length, 1, 0)
                                   : reverse(b, x, {1});
  };
  BidirectionalOutputs out;
  out.fw = dynamic_rnn(b, fw, inputs, sequence_length, "fw");
  out.bw = dynamic_rnn(b, bw, backwards(inputs), sequence_length, "bw");
  if (!b.ok()) return out;
  out.bw.outputs = backwards(out.bw.outputs);
  out.outputs = concat(b, {out.fw.outputs, out.bw.outputs}, 2);
  return out;
}

}  // namespace troupe::ops
