// tf.summary for a model_fn: each op marks a tensor for TensorBoard under a tag, and the
// SummarySaverHook writes every marked tensor each save_summary_steps steps (an evaluation
// writes its last batch's to model_dir/eval): scalars, histograms, images (PNG-encoded, in the
// Images tab) and text.
//
//   ops::summary::scalar(b, "train/accuracy", accuracy);
//   ops::summary::histogram(b, "dense/activations", hidden);
//   ops::summary::image(b, "inputs", ops::reshape(b, x, {-1, 28, 28, 1}), /*max_outputs=*/3);
//   ops::summary::text(b, "notes", ops::constant(b, Tensor::scalar<std::string>("run 7")));
//
// The op's output is the tensor itself, for the hook to fetch; compute on the tensor, not on it
// (no gradient flows through a summary). Not thread-safe (builders).
#pragma once

#include <string>
#include <vector>

#include "ops/builder_names.h"
#include "runtime/graph.h"

namespace troupe::ops::summary {

Output scalar(GraphBuilder& b, const std::string& tag, Output x);     // one number
Output histogram(GraphBuilder& b, const std::string& tag, Output x);  // any numeric tensor
// [batch, height, width, 1 | 3 | 4]: uint8 as it is; floats in [0, 1] scaled to 255, others
// stretched from their least to their most. The first max_outputs images are written, tagged
// "tag/image/0", ... ("tag/image" for one), as TF 1's tf.summary.image.
Output image(GraphBuilder& b, const std::string& tag, Output images, int64_t max_outputs = 3);
Output text(GraphBuilder& b, const std::string& tag, Output strings);  // any string tensor

enum class Kind { kScalar, kHistogram, kImage, kText };
struct Marked {
  Kind kind;
  std::string tag;
  int64_t max_outputs = 0;  // images
  Output output;
};
// The summaries built into `graph`, in node order.
std::vector<Marked> summaries(const runtime::Graph& graph);

}  // namespace troupe::ops::summary
