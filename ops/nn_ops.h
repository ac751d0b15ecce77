// Neural-network ops: activations, bias_add, softmax, the cross-entropy and regression losses,
// l2_loss and dropout. Convolutions and pooling are in conv_ops.h.
//
//   Output h = relu(b, bias_add(b, matmul(b, x, w), bias));
//   Output loss = reduce_mean(b, sparse_softmax_cross_entropy_with_logits(b, labels, logits));
//   Output d = dropout(b, h, 0.5, /*training=*/true, /*seed=*/7);
//
// Losses return one value per example unless they say otherwise. Not thread-safe.
#pragma once

#include <cstdint>

#include "ops/builder_names.h"

namespace troupe::ops {

Output relu(GraphBuilder& b, Output x);
Output relu6(GraphBuilder& b, Output x);
Output elu(GraphBuilder& b, Output x);
Output selu(GraphBuilder& b, Output x);
Output leaky_relu(GraphBuilder& b, Output x, double alpha = 0.2);
Output sigmoid(GraphBuilder& b, Output x);
Output tanh(GraphBuilder& b, Output x);
Output softplus(GraphBuilder& b, Output x);
Output softsign(GraphBuilder& b, Output x);

// value + bias, bias added along the last dim.
Output bias_add(GraphBuilder& b, Output value, Output bias);
// Along the last dim.
Output softmax(GraphBuilder& b, Output logits);
Output log_softmax(GraphBuilder& b, Output logits);

// -sum(labels * log_softmax(logits)) per row; labels are probabilities of logits' shape.
Output softmax_cross_entropy_with_logits(GraphBuilder& b, Output labels, Output logits);
// The same with integer class ids (int32 or int64) as labels; an id outside [0, classes) is an
// error that names it.
Output sparse_softmax_cross_entropy_with_logits(GraphBuilder& b, Output labels, Output logits);
// max(x, 0) - x z + log(1 + e^-|x|), elementwise: the stable form of the logistic loss.
Output sigmoid_cross_entropy_with_logits(GraphBuilder& b, Output labels, Output logits);
// mean((predictions - labels)^2) over everything: a scalar.
Output mean_squared_error(GraphBuilder& b, Output labels, Output predictions);
// sum(x^2) / 2: a scalar.
Output l2_loss(GraphBuilder& b, Output x);
// In training, zeroes each element with probability `rate` and scales the rest by 1/(1-rate);
// otherwise x unchanged. `seed` 0 draws from the graph seed (see GraphBuilder::random_seeds).
Output dropout(GraphBuilder& b, Output x, double rate, bool training, int64_t seed = 0);

// tf.nn.l2_normalize: x / sqrt(max(sum(x^2 over axes), epsilon)).
Output l2_normalize(GraphBuilder& b, Output x, const std::vector<int64_t>& axes,
                    double epsilon = 1e-12);
// tf.math.top_k: the k largest entries of each row of x's last dimension, largest first (ties:
// the lower index first), and their positions (int32).
struct TopK {
  Output values, indices;
};
TopK top_k(GraphBuilder& b, Output x, int64_t k);
// tf.math.in_top_k: whether each row's target (int32 or int64) is among its k largest
// predictions ([batch, classes]); ties count as in, as TF's.
Output in_top_k(GraphBuilder& b, Output predictions, Output targets, int64_t k);
// tf.nn.moments: the mean and the (biased) variance of x over `axes`.
struct Moments {
  Output mean, variance;
};
Moments moments(GraphBuilder& b, Output x, const std::vector<int64_t>& axes,
                bool keep_dims = false);
// tf.nn.batch_normalization: (x - mean) / sqrt(variance + epsilon) * scale + offset, each
// broadcast against x; `offset` and `scale` may be invalid (none).
Output batch_normalization(GraphBuilder& b, Output x, Output mean, Output variance, Output offset,
                           Output scale, double epsilon);

}  // namespace troupe::ops
