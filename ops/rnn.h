// Recurrent layers as TF 1.x's tf.nn has them: LSTM and GRU cells, and dynamic_rnn, which runs
// a cell over a batch of sequences in a while_loop (ops/control_flow_ops.h), one iteration per
// time step, so that the graph does not grow with the sequences' length and a loop's gradient
// trains it.
//
//   auto cell = lstm_cell(b, "rnn/lstm", /*input_size=*/28, /*units=*/128);
//   RnnOutputs r = dynamic_rnn(b, *cell, images /* [batch, 28, 28] */, lengths /* optional */);
//   Output logits = matmul(b, r.final_state[1] /* h */, w_out);
//   BidirectionalOutputs both = bidirectional_dynamic_rnn(b, *fw, *bw, images, lengths);
//
// A cell's variables are made when the cell is (kernel and bias, named as TF names them: an LSTM
// cell's "kernel" [input + units, 4 units] holds its input, new-value, forget and output gates'
// weights in that order). Not thread-safe (builders).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ops/builder_names.h"

namespace troupe::ops {

// One step of a recurrent layer: (output, new state) from an input [batch, input_size] and the
// state before.
class RnnCell {
 public:
  virtual ~RnnCell() = default;
  virtual int64_t units() const = 0;
  // The state's parts (an LSTM's c and h; a GRU's h), each [batch, units].
  virtual int state_size() const = 0;
  virtual Output step(GraphBuilder& b, Output input, std::vector<Output>* state) const = 0;
};

// tf.nn.rnn_cell.LSTMCell without peepholes or projection: c = f * c + i * tanh(j),
// h = o * tanh(c), the gates sigmoids of [input, h] times the kernel plus the bias, with
// forget_bias added to the forget gate's. State: {c, h}. `fused`: each step one LSTMBlockCell
// node (TF's LSTMBlockCell: one kernel for the gates, activations and state); else a node per
// product and activation. The same variables and values either way.
std::unique_ptr<RnnCell> lstm_cell(GraphBuilder& b, const std::string& name, int64_t input_size,
                                   int64_t units, double forget_bias = 1.0, bool fused = true);
// tf.nn.rnn_cell.GRUCell: r, u = sigmoid([input, h] gates), candidate = tanh([input, r * h]
// candidate), h = u * h + (1 - u) * candidate. State: {h}.
std::unique_ptr<RnnCell> gru_cell(GraphBuilder& b, const std::string& name, int64_t input_size,
                                  int64_t units);

struct RnnOutputs {
  Output outputs;                   // [batch, time, units]: each step's output
  std::vector<Output> final_state;  // each [batch, units]: at each sequence's last step
};

// tf.nn.dynamic_rnn: `cell` over `inputs` [batch, time, input_size] (time at least 1), from a
// zero state. With `sequence_length` (int32 or int64 [batch]), an example's steps from its
// length on leave its state as it was and output zeros, as TF does.
RnnOutputs dynamic_rnn(GraphBuilder& b, const RnnCell& cell, Output inputs,
                       Output sequence_length = {}, const std::string& name = "rnn");

struct BidirectionalOutputs {
  RnnOutputs fw;   // `fw` over the sequences
  RnnOutputs bw;   // `bw` over each sequence reversed within its length, outputs put back in
                   // the sequence's order
  Output outputs;  // [batch, time, fw units + bw units]: both, step by step
};
// tf.nn.bidirectional_dynamic_rnn: a forward and a backward layer, so that each step's output
// sees the whole sequence; the backward layer reads every example from its last step
// (reverse_sequence by `sequence_length`, or the whole time axis without it) to its first.
BidirectionalOutputs bidirectional_dynamic_rnn(GraphBuilder& b, const RnnCell& fw,
                                               const RnnCell& bw, Output inputs,
                                               Output sequence_length = {},
                                               const std::string& name = "bidirectional_rnn");

}  // namespace troupe::ops
