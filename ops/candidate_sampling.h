// Candidate sampling, for models with many classes (a language model's vocabulary): a few
// classes drawn per step stand for the rest, as TF's log_uniform_candidate_sampler,
// sampled_softmax_loss and nce_loss do.
//
//   Output loss = reduce_mean(b, sampled_softmax_loss(b, weights, biases, labels, h,
//                                                     /*num_sampled=*/64, /*num_classes=*/50000));
//   // evaluation: the full softmax over matmul(h, weights, false, true) + biases
//
// weights [num_classes, dim] and biases [num_classes] are what a full softmax layer would hold
// (its kernel transposed); labels int64 (or int32) [batch, num_true]; inputs [batch, dim]. Only
// the rows of the true and sampled classes are gathered, so their gradients update those rows
// alone. Not thread-safe (builders).
#pragma once

#include <cstdint>

#include "ops/builder_names.h"

namespace troupe::ops {

struct SampledCandidates {
  Output sampled;                 // int64 [num_sampled], the classes drawn
  Output true_expected_count;     // float32 [batch, num_true]: how often each label is drawn
  Output sampled_expected_count;  // float32 [num_sampled]
};

// Classes in [0, range_max) drawn num_sampled times per step, by the log-uniform (Zipfian)
// distribution P(k) = log((k + 2) / (k + 1)) / log(range_max + 1), which fits class ids sorted
// by falling frequency, or uniformly. With `unique`, draws repeat until num_sampled distinct
// classes are found, and the expected counts say so. `seed` 0 draws from the graph seed.
SampledCandidates log_uniform_candidate_sampler(GraphBuilder& b, Output true_classes,
                                                int64_t num_true, int64_t num_sampled, bool unique,
                                                int64_t range_max, int64_t seed = 0);
SampledCandidates uniform_candidate_sampler(GraphBuilder& b, Output true_classes, int64_t num_true,
                                            int64_t num_sampled, bool unique, int64_t range_max,
                                            int64_t seed = 0);

struct SampledLossOptions {
  int64_t num_true = 1;
  // A sampled class that is one of the example's labels gets no weight in its row (TF's
  // default for sampled softmax; nce_loss defaults to false).
  bool remove_accidental_hits = true;
  // The candidates; null: log_uniform_candidate_sampler(labels, num_true, num_sampled,
  // unique = true, num_classes, seed).
  const SampledCandidates* sampled = nullptr;
  int64_t seed = 0;
};

// tf.nn.sampled_softmax_loss: the softmax cross-entropy of each example over its labels (each
// weighted 1 / num_true) and the sampled classes, logits corrected by -log(expected count).
// [batch].
Output sampled_softmax_loss(GraphBuilder& b, Output weights, Output biases, Output labels,
                            Output inputs, int64_t num_sampled, int64_t num_classes,
                            SampledLossOptions options = {});
// tf.nn.nce_loss: noise-contrastive estimation, the logistic loss of telling each label (1)
// from the sampled classes (0), logits corrected as above, summed per example. [batch].
Output nce_loss(GraphBuilder& b, Output weights, Output biases, Output labels, Output inputs,
                int64_t num_sampled, int64_t num_classes,
                SampledLossOptions options = {.remove_accidental_hits = false});

}  // namespace troupe::ops
