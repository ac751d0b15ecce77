// Tree ensembles grown in the graph a layer (or a tree) per step, as TF's boosted trees ops grow
// theirs: the ensemble is a variable (ops/tree_ensemble.h), each training step reads it to
// predict, and GrowTreeLayer splits the leaves of the layer being grown from that step's batch,
// and, with TreeGrowth::layers, the layers below them.
//
//   Output bounds_var = variable(b, "trees/boundaries", Shape{F, 63}, kFloat32, nan_fill, false);
//   Output ensemble = variable(b, "trees/ensemble", tree_ensemble_shape(T, M, 1), kFloat32,
//                              zeros(b, tree_ensemble_shape(T, M, 1), kFloat32), false);
//   Output bounds = bucket_boundaries(b, bounds_var, x);   // quantiles of the first batch
//   Output logits = tree_ensemble_predict(b, x, ensemble, /*outputs=*/K, /*average=*/false);
//   Output g = ..., h = ...;                               // the loss's derivatives at logits
//   Output done = grow_tree_layer(b, ensemble, x, g, h, bounds, {.trees_per_round = K});
//
// x is float32 [batch, features]. Splits are found on histograms: each feature's values fall
// into the buckets its boundaries make (at most 256), and a node splits where the gain
//   sum_k T(G_k)^2 / (H + l2) over both children, minus that of the node, minus tree_complexity
// is largest and positive (G: the node's summed gradients per value, H its summed hessians,
// T the soft threshold by l1), each child keeping H >= min_node_weight, as XGBoost and TF's
// boosted trees do. Boosting: tree values are the value the step's gradients were taken at (the
// rows' leaf when the step began) plus learning_rate times the Newton step -T(G)/(H + l2), a
// tree per output and round (trees_per_round), rounds one after another. A forest: every tree grows
// at once from the targets (gradients = -targets, one hessian column of example weights), each from
// a Poisson(1) bootstrap of the rows and a random subset of features at each node; its values are
// -T(G)/(H + l2): class frequencies or means, which makes the gain Gini's (classes) or the
// variance's (values).
#pragma once

#include <cstdint>

#include "ops/builder_names.h"
#include "ops/tree_ensemble.h"

namespace troupe::ops {

struct TreeGrowth {
  bool forest = false;
  int64_t trees_per_round = 1;  // boosting: the trees grown together (one per output)
  int64_t max_depth = 6;        // 0: as deep as max_nodes allows
  double learning_rate = 0.1;   // boosting's shrinkage
  double l1 = 0, l2 = 0;
  double tree_complexity = 0;  // the least gain a split must bring
  double min_node_weight = 0;  // the least hessian sum of a child
  // Boosting: the first step sets the first round's roots to the full Newton step from zero
  // (the prior's log-odds or the mean), as TF's center_bias, before any tree splits.
  bool center_bias = false;
  int64_t features_per_node = 0;  // 0: every feature
  bool bagging = false;           // Poisson(1) weights per row and tree, drawn from the row
  int64_t seed = 0;
  // Layers a step grows in each tree of the round from its batch: 1 as TF's boosted trees (a
  // layer's sample is its step's batch), 0 every layer (a tree's sample is its step's batch,
  // as XGBoost's and scikit-learn's trees take theirs).
  int64_t layers = 1;
};

// Sets the variable read by `var` ([features, max_buckets - 1], NaN until set) to quantile
// boundaries of x's columns, the first time it runs; returns the boundaries (+inf pads a
// feature with fewer distinct values).
Output bucket_boundaries(GraphBuilder& b, Output var, Output x);
// Sum (or mean, for a forest) of the leaf values x's rows reach in every started tree:
// float32 [batch, outputs]. A tree of one value adds to output t % outputs, one of `outputs`
// values to all.
Output tree_ensemble_predict(GraphBuilder& b, Output x, Output ensemble, int64_t outputs,
                             bool average);
// Grows growth.layers layers of the trees of the round in progress in the variable read by
// `ensemble`; returns the number of finished trees (int64 scalar), all of them once training is
// over.
Output grow_tree_layer(GraphBuilder& b, Output ensemble, Output x, Output gradients,
                       Output hessians, Output boundaries, const TreeGrowth& growth);

}  // namespace troupe::ops
