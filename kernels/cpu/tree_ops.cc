// Tree ensemble kernels (ops/tree_ops.h): quantile boundaries, prediction, and growing a layer
// from histograms of the batch's gradients. The ensemble's layout is ops/tree_ensemble.h's.
// Work spreads over the cores by trees (growing) and by rows (bucketing, predicting).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "kernels/cpu/kernel.h"
#include "ops/tree_ensemble.h"
#include "runtime/fingerprint.h"

namespace troupe::kernels::cpu {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Runs fn(begin, end) over [0, items) split across the cores when the work is worth threads.
// No runtime::ParallelSection: its threads meet only at the end, so a background thread that
// preempts one delays the whole by that much only, where a section would make the input
// pipeline spin in yields for the kernel's whole span.
template <class Fn>
void parallel_range(int64_t items, double cost_per_item, Fn&& fn) {
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  const int64_t workers = std::min<int64_t>(cores, items);
  if (workers <= 1 || items * cost_per_item < 2e5) {
    fn(int64_t{0}, items);
    return;
  }
  std::vector<std::thread> threads;
  for (int64_t w = 1; w < workers; ++w) {
    threads.emplace_back([&, w] { fn(items * w / workers, items * (w + 1) / workers); });
  }
  fn(int64_t{0}, items / workers);
  for (std::thread& t : threads) t.join();
}

Status expect_matrix(const Tensor& t, const char* what, int64_t rows) {
  if (t.dtype() != DType::kFloat32 || t.rank() != 2 || (rows >= 0 && t.dim(0) != rows)) {
    return runtime::invalid_argument(what, " must be float32 [", rows, ", n], got ",
                                     runtime::dtype_name(t.dtype()), t.shape());
  }
  return runtime::ok_status();
}

// Quantile boundaries of each column of x [n, features], as BucketBoundaries documents.
Tensor quantile_boundaries(const Tensor& x, int64_t slots) {
  const int64_t n = x.dim(0), features = x.dim(1);
  Tensor out =
      Tensor::from_vector(Shape{features, slots}, std::vector<float>(features * slots, kInf));
  parallel_range(features, 20.0 * n, [&](int64_t begin, int64_t end) {
    std::vector<float> column;
    for (int64_t f = begin; f < end; ++f) {
      column.clear();
      for (int64_t i = 0; i < n; ++i) {
        const float v = x.data<float>()[i * features + f];
        if (!std::isnan(v)) column.push_back(v);
      }
      std::sort(column.begin(), column.end());
      column.erase(std::unique(column.begin(), column.end()), column.end());
      float* row = out.data<float>() + f * slots;
      const auto distinct = static_cast<int64_t>(column.size());
      // Never the largest value: nothing would go right of it.
      if (distinct <= slots + 1) {
        for (int64_t j = 0; j + 1 < distinct; ++j) row[j] = column[j];
        continue;
      }
      int64_t filled = 0;
      for (int64_t q = 1; q <= slots; ++q) {
        const float v = column[q * (distinct - 1) / (slots + 1)];
        if (filled == 0 || v > row[filled - 1]) row[filled++] = v;
      }
    }
  });
  return out;
}

template <class T>
struct BucketBoundariesKernel {
  static Status compute(KernelContext& ctx) {
    runtime::VariableStore* store = ctx.variables();
    if (!store) return runtime::failed_precondition("this executor has no variable store");
    const auto& name = ctx.attr<std::string>("var");
    const Shape& shape = ctx.attr<Shape>("shape");
    TROUPE_ASSIGN_OR_RETURN(Tensor current, store->read(name));
    if (current.dtype() != DType::kFloat32 || current.shape() != shape) {
      return runtime::failed_precondition("variable '", name, "' holds ",
                                          runtime::dtype_name(current.dtype()), current.shape(),
                                          ", the graph declares float32", shape);
    }
    if (!std::isnan(current.data<float>()[0])) {
      ctx.set_output(0, current);
      return runtime::ok_status();
    }
    const Tensor& x = ctx.input(0);
    TROUPE_RETURN_IF_ERROR(expect_matrix(x, "x", -1));
    if (x.dim(1) != shape.dim(0) || x.dim(0) == 0) {
      return runtime::invalid_argument("bucket boundaries of ", shape.dim(0), " features from ",
                                       x.shape());
    }
    Tensor bounds = quantile_boundaries(x, shape.dim(1));
    store->assign(name, bounds);
    ctx.set_output(0, bounds);
    return runtime::ok_status();
  }
};

// Every split must name a feature of x: an ensemble restored from elsewhere is checked.
Status check_features(const ops::TreeEnsembleView& e, int64_t features) {
  for (int64_t t = 0; t < e.trees(); ++t) {
    const int64_t nodes = e.nodes(t);
    const float begin = e.header(t)[ops::kTreeLayerBegin];
    if (nodes < 0 || nodes > e.max_nodes() || !(begin >= 0 && begin <= nodes)) {
      return runtime::invalid_argument("tree ", t, " claims ", nodes, " nodes from ", begin);
    }
    for (int64_t i = 0; i < nodes; ++i) {
      const float* n = e.node(t, i);
      if (n[ops::kNodeLeft] < 0) continue;
      if (!(n[ops::kNodeFeature] >= 0 && n[ops::kNodeFeature] < features) ||
          !(n[ops::kNodeLeft] > i && n[ops::kNodeLeft] + 1 < nodes)) {
        return runtime::invalid_argument("node ", i, " of tree ", t,
                                         " splits on a feature or child that does not exist");
      }
    }
  }
  return runtime::ok_status();
}

template <class T>
struct PredictKernel {
  static Status compute(KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& ensemble = ctx.input(1);
    TROUPE_RETURN_IF_ERROR(expect_matrix(x, "x", -1));
    const int64_t n = x.dim(0), features = x.dim(1), k = ctx.attr<int64_t>("outputs");
    ops::TreeEnsembleView e(ensemble);
    TROUPE_RETURN_IF_ERROR(check_features(e, features));
    Tensor* out;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, Shape{n, k}, &out));
    std::fill_n(out->data<float>(), n * k, 0.0f);
    int64_t started = 0;
    for (int64_t t = 0; t < e.trees(); ++t) started += e.nodes(t) > 0;
    const float scale = ctx.attr<bool>("average") && started > 0 ? 1.0f / started : 1.0f;
    const int64_t dim = e.dim();
    // Tree by tree over blocks of rows, so that a tree's nodes stay in cache for the block.
    constexpr int64_t kBlock = 256;
    const int64_t blocks = (n + kBlock - 1) / kBlock;
    parallel_range(
        blocks, 8.0 * kBlock * std::max<int64_t>(started, 1), [&](int64_t begin, int64_t end) {
          for (int64_t block = begin; block < end; ++block) {
            const int64_t first = block * kBlock, last = std::min(n, first + kBlock);
            float* y = out->data<float>();
            int32_t at[kBlock];
            for (int64_t t = 0; t < e.trees(); ++t) {
              if (e.nodes(t) == 0) continue;
              e.leaves(t, x.data<float>() + first * features, features, last - first, at);
              for (int64_t i = first; i < last; ++i) {
                const float* leaf = e.node(t, at[i - first]) + ops::kNodeValue;
                if (dim == 1) {
                  y[i * k + t % k] += leaf[0];
                } else {
                  for (int64_t j = 0; j < k; ++j) y[i * k + j] += leaf[j];
                }
              }
            }
            if (scale != 1.0f) {
              for (int64_t j = first * k; j < last * k; ++j) y[j] *= scale;
            }
          }
        });
    return runtime::ok_status();
  }
};

// The attributes of one GrowTreeLayer node.
struct Growth {
  bool forest, center_bias, bagging;
  int64_t per_round, max_depth, features_per_node, seed;
  double lr, l1, l2, complexity, min_weight;

  explicit Growth(const KernelContext& c)
      : forest(c.attr<bool>("forest")),
        center_bias(c.attr<bool>("center_bias")),
        bagging(c.attr<bool>("bagging")),
        per_round(c.attr<int64_t>("trees_per_round")),
        max_depth(c.attr<int64_t>("max_depth")),
        features_per_node(c.attr<int64_t>("features_per_node")),
        seed(c.attr<int64_t>("seed")),
        lr(c.attr<double>("learning_rate")),
        l1(c.attr<double>("l1")),
        l2(c.attr<double>("l2")),
        complexity(c.attr<double>("tree_complexity")),
        min_weight(c.attr<double>("min_node_weight")) {}

  double shrunk(double g) const {
    const double a = std::abs(g) - l1;
    return a <= 0 ? 0.0 : (g > 0 ? a : -a);
  }
  // Stats: dim gradient sums, then the hessian sum.
  double score(const double* s, int64_t dim) const {
    const double h = s[dim] + l2;
    if (h <= 0) return 0;
    double total = 0;
    for (int64_t k = 0; k < dim; ++k) total += shrunk(s[k]) * shrunk(s[k]);
    return total / h;
  }
  double step(const double* s, int64_t k, int64_t dim) const {
    const double h = s[dim] + l2;
    return h <= 0 ? 0.0 : -shrunk(s[k]) / h;
  }
};

// What one step's batch looks like to the trees.
struct Batch {
  int64_t n, features, slots;  // slots: boundaries per feature
  const float* x;
  const float* g;
  const float* h;
  int64_t g_cols, h_cols;
  const float* bounds;            // [features, slots]
  std::vector<uint8_t> bins;      // [n, features]
  std::vector<int32_t> buckets;   // per feature
  std::vector<uint64_t> row_key;  // fingerprints of the rows (bagging)
};

// The number of the `slots` ascending boundaries below v (+inf pads them): a branchless binary
// search, since the buckets of pixel-like data defeat branch prediction.
inline int64_t bucket_of(const float* bound, int64_t slots, float v) {
  const float* base = bound;
  int64_t len = slots;
  while (len > 1) {
    const int64_t half = len / 2;
    base = base[half] < v ? base + half : base;
    len -= half;
  }
  return (base - bound) + (*base < v);
}

void bucketize(Batch& b) {
  b.bins.resize(b.n * b.features);
  b.buckets.assign(b.features, 1);
  for (int64_t f = 0; f < b.features; ++f) {
    const float* bound = b.bounds + f * b.slots;
    while (b.buckets[f] <= b.slots && bound[b.buckets[f] - 1] < kInf) ++b.buckets[f];
  }
  parallel_range(b.n, 10.0 * b.features, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float* row = b.x + i * b.features;
      uint8_t* out = b.bins.data() + i * b.features;
      for (int64_t f = 0; f < b.features; ++f) {
        const float v = row[f];
        // NaN goes to the last bucket, as it goes right.
        out[f] = static_cast<uint8_t>(
            std::isnan(v) ? b.buckets[f] - 1 : bucket_of(b.bounds + f * b.slots, b.slots, v));
      }
    }
  });
}

// A key per row for its bootstrap weights: the same row gets the same weights in every step.
void key_rows(Batch& b) {
  b.row_key.resize(b.n);
  parallel_range(b.n, 2.0 * b.features, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float* row = b.x + i * b.features;
      uint64_t key = 0x9e3779b97f4a7c15ULL;
      for (int64_t f = 0; f < b.features; ++f) {
        uint32_t bits;
        std::memcpy(&bits, row + f, sizeof bits);
        key = (key ^ bits) * 0xff51afd7ed558ccdULL;
        key ^= key >> 29;
      }
      b.row_key[i] = runtime::fingerprint_cat64(key, static_cast<uint64_t>(b.features));
    }
  });
}

// A Poisson(1) draw from a uniform hash: how often a bootstrap sample holds the row.
int poisson1(uint64_t hash) {
  double u = static_cast<double>(hash >> 11) * 0x1.0p-53;
  double p = std::exp(-1.0);
  int k = 0;
  while (u > p && k < 16) {
    u -= p;
    ++k;
    p /= k;
  }
  return k;
}

struct Candidate {
  int64_t node, feature, bucket;
  double gain;
  std::vector<double> left, right;  // stats
};

class TreeGrower {
 public:
  // `view` reads the tensor whose buffer `ensemble` writes.
  TreeGrower(const Growth& g, const Batch& b, const ops::TreeEnsembleView& view, float* ensemble)
      : g_(g),
        b_(b),
        view_(view),
        data_(ensemble),
        max_nodes_(view.max_nodes()),
        width_(view.width()),
        dim_(view.dim()) {}

  // The first round's roots at the full Newton step of the batch (center_bias).
  void center(int64_t t) {
    float* hdr = header(t);
    std::vector<double> total(dim_ + 1, 0.0);
    for (int64_t i = 0; i < b_.n; ++i) add(t, i, 1.0, total.data());
    init_node(node(t, 0), total, [&](int64_t k) { return g_.step(total.data(), k, dim_); });
    hdr[ops::kTreeNodes] = 1;
    hdr[ops::kTreeLayerBegin] = 0;
    hdr[ops::kTreeDepth] = 0;
  }

  void grow(int64_t t) {
    float* hdr = header(t);
    const bool fresh = hdr[ops::kTreeNodes] == 0;
    if (fresh) {
      hdr[ops::kTreeNodes] = 1;
      hdr[ops::kTreeLayerBegin] = 0;
      hdr[ops::kTreeDepth] = 0;
      node(t, 0)[ops::kNodeLeft] = -1;
    }
    const auto begin = static_cast<int64_t>(hdr[ops::kTreeLayerBegin]);
    const auto end = static_cast<int64_t>(hdr[ops::kTreeNodes]);
    const auto depth = static_cast<int64_t>(hdr[ops::kTreeDepth]);
    const int64_t active = end - begin;
    group_rows(t, begin, end);
    std::vector<Candidate> candidates;
    const bool may_split = g_.max_depth == 0 || depth < g_.max_depth;
    for (int64_t a = 0; a < active; ++a) {
      std::vector<double> total(dim_ + 1, 0.0);
      for (int64_t r = offsets_[a]; r < offsets_[a + 1]; ++r)
        add(t, rows_[r], weights_[r], total.data());
      if (fresh) {
        // A new root's value, should it stay a leaf: boosting's shrunk step from zero.
        const double shrink = g_.forest ? 1.0 : g_.lr;
        init_node(node(t, 0), total,
                  [&](int64_t k) { return shrink * g_.step(total.data(), k, dim_); });
      }
      if (may_split) best_split(t, begin + a, a, total, &candidates);
    }
    // Too little room left: the best splits first.
    const int64_t room = (max_nodes_ - end) / 2;
    if (static_cast<int64_t>(candidates.size()) > room) {
      std::stable_sort(candidates.begin(), candidates.end(),
                       [](const Candidate& p, const Candidate& q) { return p.gain > q.gain; });
      candidates.resize(std::max<int64_t>(room, 0));
      std::sort(candidates.begin(), candidates.end(),
                [](const Candidate& p, const Candidate& q) { return p.node < q.node; });
    }
    int64_t next = end;
    for (const Candidate& c : candidates) {
      float* parent = node(t, c.node);
      // Boosting's gradients were taken at the parent's value (zero for a new root).
      std::vector<double> base(dim_, 0.0);
      if (!g_.forest && !fresh) {
        for (int64_t k = 0; k < dim_; ++k) base[k] = parent[ops::kNodeValue + k];
      }
      const double shrink = g_.forest ? 1.0 : g_.lr;
      parent[ops::kNodeLeft] = static_cast<float>(next);
      parent[ops::kNodeFeature] = static_cast<float>(c.feature);
      parent[ops::kNodeThreshold] = b_.bounds[c.feature * b_.slots + c.bucket];
      parent[ops::kNodeGain] = static_cast<float>(c.gain);
      init_node(node(t, next), c.left,
                [&](int64_t k) { return base[k] + shrink * g_.step(c.left.data(), k, dim_); });
      init_node(node(t, next + 1), c.right,
                [&](int64_t k) { return base[k] + shrink * g_.step(c.right.data(), k, dim_); });
      next += 2;
    }
    hdr[ops::kTreeNodes] = static_cast<float>(next);
    hdr[ops::kTreeLayerBegin] = static_cast<float>(end);
    hdr[ops::kTreeDepth] = static_cast<float>(depth + 1);
    const bool deep = g_.max_depth > 0 && depth + 1 >= g_.max_depth;
    if (candidates.empty() || deep || next + 2 > max_nodes_) hdr[ops::kTreeDone] = 1;
  }

 private:
  float* header(int64_t t) const { return data_ + t * (max_nodes_ + 1) * width_; }
  float* node(int64_t t, int64_t i) const { return header(t) + (i + 1) * width_; }

  int64_t column(int64_t t) const { return dim_ == 1 ? t % b_.g_cols : 0; }

  // Row i's gradients (times w) into stats s.
  void add(int64_t t, int64_t i, double w, double* s) const {
    const int64_t c = column(t);
    const float* gi = b_.g + i * b_.g_cols + c;
    for (int64_t k = 0; k < dim_; ++k) s[k] += w * gi[k];
    s[dim_] += w * b_.h[i * b_.h_cols + (b_.h_cols == 1 ? 0 : c)];
  }

  template <class Value>
  void init_node(float* n, const std::vector<double>&, Value value) const {
    n[ops::kNodeLeft] = -1;
    n[ops::kNodeFeature] = 0;
    n[ops::kNodeThreshold] = 0;
    n[ops::kNodeGain] = 0;
    for (int64_t k = 0; k < dim_; ++k) n[ops::kNodeValue + k] = static_cast<float>(value(k));
  }

  // rows_ by the layer's node they reach (offsets_ per node), with their bootstrap weights.
  void group_rows(int64_t t, int64_t begin, int64_t end) {
    const int64_t active = end - begin;
    std::vector<int32_t> slot(b_.n, -1);
    offsets_.assign(active + 1, 0);
    constexpr int64_t kBlock = 256;
    int32_t reached[kBlock];
    for (int64_t first = 0; first < b_.n; first += kBlock) {
      const int64_t rows = std::min(kBlock, b_.n - first);
      view_.leaves(t, b_.x + first * b_.features, b_.features, rows, reached);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t at = reached[r];
        if (at < begin || at >= end) continue;
        slot[first + r] = static_cast<int32_t>(at - begin);
        ++offsets_[at - begin + 1];
      }
    }
    for (int64_t a = 0; a < active; ++a) offsets_[a + 1] += offsets_[a];
    std::vector<int64_t> fill(offsets_.begin(), offsets_.end() - 1);
    rows_.assign(offsets_[active], 0);
    weights_.assign(offsets_[active], 1.0f);
    for (int64_t i = 0; i < b_.n; ++i) {
      if (slot[i] < 0) continue;
      const int64_t r = fill[slot[i]]++;
      rows_[r] = static_cast<int32_t>(i);
      if (g_.bagging) {
        const uint64_t tree_key = runtime::fingerprint_cat64(static_cast<uint64_t>(g_.seed), t);
        weights_[r] =
            static_cast<float>(poisson1(runtime::fingerprint_cat64(b_.row_key[i], tree_key)));
      }
    }
  }

  // The features a node may split on: all, or a random subset drawn per (seed, tree, node).
  const std::vector<int64_t>& features_of(int64_t t, int64_t n) {
    const int64_t all = b_.features;
    const int64_t m = g_.features_per_node > 0 ? std::min(g_.features_per_node, all) : all;
    features_.resize(all);
    for (int64_t f = 0; f < all; ++f) features_[f] = f;
    if (m < all) {
      std::mt19937_64 rng(runtime::fingerprint_cat64(
          runtime::fingerprint_cat64(static_cast<uint64_t>(g_.seed), t), n));
      for (int64_t j = 0; j < m; ++j) {
        std::swap(features_[j], features_[j + static_cast<int64_t>(rng() % (all - j))]);
      }
      features_.resize(m);
      std::sort(features_.begin(), features_.end());
    }
    return features_;
  }

  void best_split(int64_t t, int64_t n, int64_t a, const std::vector<double>& total,
                  std::vector<Candidate>* out) {
    const int64_t rows = offsets_[a + 1] - offsets_[a];
    if (total[dim_] < 2 * g_.min_weight || rows < 2) return;
    const std::vector<int64_t>& feats = features_of(t, n);
    const int64_t m = static_cast<int64_t>(feats.size()), buckets = b_.slots + 1;
    const int64_t stride = dim_ + 1;
    // hist_ is all zeros between nodes. A node of fewer rows than buckets (most nodes deep in
    // a forest) touches few of them: only those are scanned and zeroed again.
    const bool sparse = rows < buckets;
    if (hist_.size() != static_cast<size_t>(m * buckets * stride)) {
      hist_.assign(m * buckets * stride, 0.0f);
    }
    touched_.resize(m);
    for (auto& list : touched_) list.clear();
    const int64_t c = column(t);
    for (int64_t r = offsets_[a]; r < offsets_[a + 1]; ++r) {
      const float w = weights_[r];
      const int64_t i = rows_[r];
      const float hi = w * b_.h[i * b_.h_cols + (b_.h_cols == 1 ? 0 : c)];
      if (w == 0 || !(hi > 0)) continue;
      const uint8_t* bins = b_.bins.data() + i * b_.features;
      const float* gi = b_.g + i * b_.g_cols + c;
      if (dim_ == 1 && !sparse) {
        const float gw = w * gi[0];
        for (int64_t j = 0; j < m; ++j) {
          float* s = hist_.data() + (j * buckets + bins[feats[j]]) * 2;
          s[0] += gw;
          s[1] += hi;
        }
        continue;
      }
      for (int64_t j = 0; j < m; ++j) {
        const uint8_t bin = bins[feats[j]];
        float* s = hist_.data() + (j * buckets + bin) * stride;
        if (sparse && s[dim_] == 0) touched_[j].push_back(bin);
        for (int64_t k = 0; k < dim_; ++k) s[k] += w * gi[k];
        s[dim_] += hi;
      }
    }
    const double parent = g_.score(total.data(), dim_);
    // Sums of floats: a "gain" this small is rounding, not a split.
    const double least = std::max(g_.complexity, 1e-6 * std::abs(parent) + 1e-12);
    double best = least;
    int64_t best_j = -1, best_bucket = -1;
    std::vector<double> left(stride), right(stride), best_left(stride);
    auto consider = [&](int64_t j, int64_t bucket, const float* s) {
      for (int64_t k = 0; k < stride; ++k) left[k] += s[k];
      for (int64_t k = 0; k < stride; ++k) right[k] = total[k] - left[k];
      if (left[dim_] < g_.min_weight || right[dim_] < g_.min_weight || left[dim_] <= 0 ||
          right[dim_] <= 0) {
        return;
      }
      const double gain = g_.score(left.data(), dim_) + g_.score(right.data(), dim_) - parent;
      if (gain > best) {
        best = gain;
        best_j = j;
        best_bucket = bucket;
        best_left = left;
      }
    };
    for (int64_t j = 0; j < m; ++j) {
      std::fill(left.begin(), left.end(), 0.0);
      float* s = hist_.data() + j * buckets * stride;
      if (sparse) {
        // Between two touched buckets lie only empty ones: the same partition.
        std::sort(touched_[j].begin(), touched_[j].end());
        for (uint8_t bucket : touched_[j]) consider(j, bucket, s + bucket * stride);
        for (uint8_t bucket : touched_[j]) std::fill_n(s + bucket * stride, stride, 0.0f);
      } else {
        for (int64_t bucket = 0; bucket + 1 < b_.buckets[feats[j]]; ++bucket) {
          consider(j, bucket, s + bucket * stride);
        }
        std::fill_n(s, buckets * stride, 0.0f);
      }
    }
    if (best_j < 0) return;
    std::vector<double> best_right(stride);
    for (int64_t k = 0; k < stride; ++k) best_right[k] = total[k] - best_left[k];
    out->push_back({n, feats[best_j], best_bucket, best, best_left, best_right});
  }

  const Growth& g_;
  const Batch& b_;
  const ops::TreeEnsembleView& view_;
  float* data_;
  int64_t max_nodes_, width_, dim_;
  std::vector<int64_t> offsets_;
  std::vector<int32_t> rows_;
  std::vector<float> weights_;
  std::vector<int64_t> features_;
  std::vector<float> hist_;
  std::vector<std::vector<uint8_t>> touched_;  // per feature, the buckets a sparse node fills
};

template <class T>
struct GrowKernel {
  static Status compute(KernelContext& ctx) {
    runtime::VariableStore* store = ctx.variables();
    if (!store) return runtime::failed_precondition("this executor has no variable store");
    const Growth growth(ctx);
    const Shape& shape = ctx.attr<Shape>("shape");
    const Tensor &x = ctx.input(0), &g = ctx.input(1), &h = ctx.input(2), &bounds = ctx.input(3);
    TROUPE_RETURN_IF_ERROR(expect_matrix(x, "x", -1));
    const int64_t n = x.dim(0);
    TROUPE_RETURN_IF_ERROR(expect_matrix(g, "gradients", n));
    TROUPE_RETURN_IF_ERROR(expect_matrix(h, "hessians", n));
    TROUPE_RETURN_IF_ERROR(expect_matrix(bounds, "boundaries", x.dim(1)));
    const int64_t trees = shape.dim(0), width = shape.dim(2);
    const int64_t dim = width - ops::kTreeFields;
    if ((dim != 1 && dim != g.dim(1)) || (h.dim(1) != 1 && h.dim(1) != g.dim(1))) {
      return runtime::invalid_argument("trees of ", dim, " values with ", g.dim(1),
                                       " gradient and ", h.dim(1), " hessian columns");
    }
    if (bounds.dim(1) < 1 || bounds.dim(1) > 255) {
      // Buckets are bytes: a peer's call with more boundaries is refused, not wrapped around.
      return runtime::invalid_argument("boundaries of ", bounds.dim(1),
                                       " values a feature: 1 to 255 make the buckets");
    }
    if (std::isnan(bounds.data<float>()[0])) {
      return runtime::failed_precondition("the bucket boundaries are not set");
    }
    TROUPE_ASSIGN_OR_RETURN(
        Tensor ensemble, store->for_update(ctx.attr<std::string>("var"), DType::kFloat32, shape));
    ops::TreeEnsembleView view(ensemble);
    TROUPE_RETURN_IF_ERROR(check_features(view, x.dim(1)));
    int64_t round = -1;
    for (int64_t t = 0; t < trees && round < 0; ++t) {
      if (!view.done(t)) round = t / growth.per_round * growth.per_round;
    }
    if (round >= 0 && n > 0) {
      Batch batch{n,
                  x.dim(1),
                  bounds.dim(1),
                  x.data<float>(),
                  g.data<float>(),
                  h.data<float>(),
                  g.dim(1),
                  h.dim(1),
                  bounds.data<float>(),
                  {},
                  {},
                  {}};
      TreeGrower probe(growth, batch, view, ensemble.data<float>());
      const int64_t per_round = growth.per_round;
      bool unstarted = true;
      for (int64_t t = round; t < round + per_round; ++t) unstarted &= view.nodes(t) == 0;
      if (!growth.forest && growth.center_bias && round == 0 && unstarted) {
        for (int64_t t = 0; t < per_round; ++t) probe.center(t);
      } else {
        bucketize(batch);
        if (growth.bagging) key_rows(batch);
        parallel_range(per_round, 1e9, [&](int64_t begin, int64_t end) {
          TreeGrower grower(growth, batch, view, ensemble.data<float>());
          for (int64_t t = round + begin; t < round + end; ++t) {
            if (!view.done(t)) grower.grow(t);
          }
        });
      }
    }
    int64_t done = 0;
    for (int64_t t = 0; t < trees; ++t) done += view.done(t);
    Tensor* out;
    TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, Shape{}, &out));
    out->data<int64_t>()[0] = done;
    return runtime::ok_status();
  }
};

}  // namespace

TROUPE_REGISTER_KERNELS(tree_cpu) {
  constexpr DeviceType kCpu = DeviceType::kCpu;
  registry.add_typed<BucketBoundariesKernel, float>("BucketBoundaries", kCpu);
  registry.add_typed<PredictKernel, float>("TreeEnsemblePredict", kCpu);
  registry.add_typed<GrowKernel, float>("GrowTreeLayer", kCpu);
}

}  // namespace troupe::kernels::cpu
