// The layout of a tree ensemble held in one float32 variable [trees, 1 + max_nodes, 4 + dim]
// (ops/tree_ops.h grows and reads it), and what readers outside the kernels take from it.
//
//   TreeEnsembleView e(ensemble_tensor);
//   for (int64_t t = 0; t < e.trees(); ++t) if (e.nodes(t) > 0) ... e.node(t, 0)[kNodeValue] ...
//   std::vector<double> importance = feature_importances(ensemble_tensor, 784);
//
// One variable, as TF's boosted trees keep the whole ensemble in one resource, so that the op
// that grows it writes one variable and runs where it lives (a parameter server). Row 0 of a
// tree is its header; row 1 + i is node i, node 0 the root. Nodes are appended a layer at a
// time, so the nodes of the layer being grown are [layer_begin, nodes). Counts and indices are
// stored as floats, exact below 2^24.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/tensor.h"

namespace troupe::ops {

// Header fields.
constexpr int kTreeNodes = 0;       // nodes so far (0: not started)
constexpr int kTreeLayerBegin = 1;  // first node of the layer the next step grows
constexpr int kTreeDepth = 2;       // depth of that layer (the root's is 0)
constexpr int kTreeDone = 3;        // 1 when the tree grows no more
// Node fields; the node's value (dim floats) follows them.
constexpr int kNodeLeft = 0;  // index of the left child (the right one is next), -1: a leaf
constexpr int kNodeFeature = 1;
constexpr int kNodeThreshold = 2;  // x[feature] <= threshold goes left (NaN goes right)
constexpr int kNodeGain = 3;       // the split's loss reduction (feature importance)
constexpr int kNodeValue = 4;
constexpr int kTreeFields = 4;

// Shape of an ensemble of `trees` trees of at most `max_nodes` nodes with `dim` values each.
runtime::Shape tree_ensemble_shape(int64_t trees, int64_t max_nodes, int64_t dim);

// Read access to a float32 tensor of that layout; the tensor must outlive it.
class TreeEnsembleView {
 public:
  explicit TreeEnsembleView(const runtime::Tensor& ensemble)
      : data_(ensemble.data<float>()),
        trees_(ensemble.dim(0)),
        max_nodes_(ensemble.dim(1) - 1),
        width_(ensemble.dim(2)) {}

  int64_t trees() const { return trees_; }
  int64_t max_nodes() const { return max_nodes_; }
  int64_t dim() const { return width_ - kTreeFields; }
  int64_t width() const { return width_; }
  const float* header(int64_t t) const { return data_ + t * (max_nodes_ + 1) * width_; }
  const float* node(int64_t t, int64_t i) const { return header(t) + (i + 1) * width_; }
  int64_t nodes(int64_t t) const { return static_cast<int64_t>(header(t)[kTreeNodes]); }
  bool done(int64_t t) const { return header(t)[kTreeDone] != 0; }
  // The nodes (leaves) that `rows` rows of x (`features` values each, row-major) reach in tree
  // t, into `at`: the rows descend a level at a time together, so that their loads overlap
  // instead of waiting on one another.
  void leaves(int64_t t, const float* x, int64_t features, int64_t rows, int32_t* at) const {
    const float* root = node(t, 0);
    for (int64_t r = 0; r < rows; ++r) at[r] = 0;
    for (bool moved = true; moved;) {
      moved = false;
      for (int64_t r = 0; r < rows; ++r) {
        const float* n = root + at[r] * width_;
        if (n[kNodeLeft] < 0) continue;
        const bool right =
            !(x[r * features + static_cast<int64_t>(n[kNodeFeature])] <= n[kNodeThreshold]);
        at[r] = static_cast<int32_t>(n[kNodeLeft]) + right;
        moved = true;
      }
    }
  }

 private:
  const float* data_;
  int64_t trees_, max_nodes_, width_;
};

// Each feature's share of the gain of every split on it (sums to 1 unless nothing split), as
// TF's boosted trees' feature importances and scikit-learn's feature_importances_.
std::vector<double> feature_importances(const runtime::Tensor& ensemble, int64_t features);

}  // namespace troupe::ops
