// Tree ensemble kernels (ops/tree_ops.h): quantile boundaries, prediction, and growing a layer
// from histograms of the batch's gradients. The ensemble's layout is ops/tree_ensemble.h's.
// Work spreads over the cores by trees (growing) and by rows (bucketing, predicting).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "kernels/cpu/kernel.h"
#include "ops/tree_ensemble.h"
#include "runtime/fingerprint.h"
#include "runtime/parallel_section.h"

namespace troupe::kernels::cpu {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Runs fn(begin, end) over [0, items) split across the cores (at most `most`, 0: all) when the
// work is worth threads. No runtime::ParallelSection: its threads meet only at the end, so a
// background thread that preempts one delays the whole by that much only, where a section would
// make the input pipeline spin in yields for the kernel's whole span.
template <class Fn>
void parallel_range(int64_t items, double cost_per_item, Fn&& fn, int64_t most = 0) {
  const int64_t cores = most > 0 ? most : runtime::available_cores();
  const int64_t workers = std::min<int64_t>(cores, items);
  if (workers <= 1 || items * cost_per_item < 2e5) {
    fn(int64_t{0}, items);
    return;
  }
  std::vector<std::thread> threads;
  for (int64_t w = 1; w < workers; ++w) {
    threads.emplace_back([&, w] {
      runtime::run_on_available_cores();  // not only the graph worker's core, which it inherits
      fn(items * w / workers, items * (w + 1) / workers);
    });
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
  int64_t per_round, max_depth, features_per_node, seed, layers;
  double lr, l1, l2, complexity, min_weight;

  explicit Growth(const KernelContext& c)
      : forest(c.attr<bool>("forest")),
        center_bias(c.attr<bool>("center_bias")),
        bagging(c.attr<bool>("bagging")),
        per_round(c.attr<int64_t>("trees_per_round")),
        max_depth(c.attr<int64_t>("max_depth")),
        features_per_node(c.attr<int64_t>("features_per_node")),
        seed(c.attr<int64_t>("seed")),
        layers(c.attr<int64_t>("layers")),
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
  std::vector<int32_t> hot;       // per row, its one nonzero target column, or -1 (forests)
};

// The number of the `n` ascending boundaries below v: a branchless binary search, since the
// buckets of pixel-like data defeat branch prediction.
inline int64_t bucket_of(const float* bound, int64_t n, float v) {
  const float* base = bound;
  int64_t len = n;
  while (len > 1) {
    const int64_t half = len / 2;
    base = base[half] < v ? base + half : base;
    len -= half;
  }
  return (base - bound) + (*base < v);
}

// The same for a feature's boundaries padded with +inf to 64 (max_bins 65 or fewer, 64 the
// default): counted, in compares of a fixed count that vectorize with no load waiting on
// another, 2-3 times faster than the search.
inline int64_t bucket_of_64(const float* bound, float v) {
  int32_t below = 0;
  for (int s = 0; s < 64; ++s) below += bound[s] < v;
  return below;
}

void bucketize(Batch& b) {
  b.bins.resize(b.n * b.features);
  b.buckets.assign(b.features, 1);
  for (int64_t f = 0; f < b.features; ++f) {
    const float* bound = b.bounds + f * b.slots;
    while (b.buckets[f] <= b.slots && bound[b.buckets[f] - 1] < kInf) ++b.buckets[f];
  }
  std::vector<float> padded;
  if (b.slots <= 64) {
    padded.assign(b.features * 64, kInf);
    for (int64_t f = 0; f < b.features; ++f) {
      std::copy_n(b.bounds + f * b.slots, b.slots, padded.begin() + f * 64);
    }
  }
  parallel_range(b.n, 10.0 * b.features, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float* row = b.x + i * b.features;
      uint8_t* out = b.bins.data() + i * b.features;
      for (int64_t f = 0; f < b.features; ++f) {
        const float v = row[f];
        // NaN goes to the last bucket, as it goes right.
        const int64_t bucket = std::isnan(v)    ? b.buckets[f] - 1
                               : padded.empty() ? bucket_of(b.bounds + f * b.slots, b.slots, v)
                                                : bucket_of_64(padded.data() + f * 64, v);
        out[f] = static_cast<uint8_t>(bucket);
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

// Each row's one nonzero gradient column (0 for none), or -1 where it has several: a class's
// target in a forest is one-hot, and its histograms add that column alone.
void find_hot_columns(Batch& b) {
  b.hot.resize(b.n);
  for (int64_t i = 0; i < b.n; ++i) {
    const float* gi = b.g + i * b.g_cols;
    int32_t hot = 0, nonzero = 0;
    for (int64_t k = 0; k < b.g_cols; ++k) {
      if (gi[k] != 0) {
        hot = static_cast<int32_t>(k);
        ++nonzero;
      }
    }
    b.hot[i] = nonzero <= 1 ? hot : -1;
  }
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

// A node of the layer being grown: its rows are rows_[first, last).
struct Active {
  int64_t node, first, last;
  // Its ancestor in the layer the step began with: the rows' leaf when the gradients were taken.
  int64_t origin;
  // Siblings share their parent's histogram (every feature): the smaller one subtracts its own
  // from it, which leaves the larger one's.
  int kept = -1;           // the larger: the histogram that becomes its own
  int subtract_from = -1;  // the smaller: the histogram to subtract its own from
};

struct Candidate {
  int64_t node, feature, bucket;
  double gain;
  std::vector<double> left, right;  // stats
  int64_t active;                   // the node's place in the layer
  int kept;                         // its histogram, kept for its children, or -1
};

// Grows trees a layer at a time as XGBoost's and LightGBM's histogram methods do: each layer's
// rows are partitioned by the splits just made, so that a further layer starts from its
// parent's rows instead of walking every row down the tree, and where every node may split on
// every feature, the larger child's histogram is its parent's minus its sibling's.
class TreeGrower {
 public:
  // `view` reads the tensor whose buffer `ensemble` writes; a node's split search may use
  // `threads` threads.
  TreeGrower(const Growth& g, const Batch& b, const ops::TreeEnsembleView& view, float* ensemble,
             int64_t threads = 1)
      : g_(g),
        b_(b),
        view_(view),
        data_(ensemble),
        max_nodes_(view.max_nodes()),
        width_(view.width()),
        dim_(view.dim()),
        buckets_(b.slots + 1),
        stride_(view.dim() + 1),
        every_feature_(g.features_per_node == 0 || g.features_per_node >= b.features),
        threads_(threads) {}

  // The first round's roots at the full Newton step of the batch (center_bias).
  void center(int64_t t) {
    float* hdr = header(t);
    std::vector<double> total(stride_, 0.0);
    for (int64_t i = 0; i < b_.n; ++i) add(t, i, 1.0, total.data());
    init_node(node(t, 0), [&](int64_t k) { return g_.step(total.data(), k, dim_); });
    hdr[ops::kTreeNodes] = 1;
    hdr[ops::kTreeLayerBegin] = 0;
    hdr[ops::kTreeDepth] = 0;
  }

  // Grows `layers` layers of tree t (0: until it is done) from the batch.
  void grow(int64_t t, int64_t layers) {
    float* hdr = header(t);
    const bool fresh = hdr[ops::kTreeNodes] == 0;
    if (fresh) {
      hdr[ops::kTreeNodes] = 1;
      hdr[ops::kTreeLayerBegin] = 0;
      hdr[ops::kTreeDepth] = 0;
      node(t, 0)[ops::kNodeLeft] = -1;
    }
    group_rows(t, static_cast<int64_t>(hdr[ops::kTreeLayerBegin]),
               static_cast<int64_t>(hdr[ops::kTreeNodes]));
    for (int64_t layer = 0; layers == 0 || layer < layers; ++layer) {
      const auto end = static_cast<int64_t>(hdr[ops::kTreeNodes]);
      const auto depth = static_cast<int64_t>(hdr[ops::kTreeDepth]);
      const bool may_split = g_.max_depth == 0 || depth < g_.max_depth;
      // Histograms are kept for the children only where another layer grows in this step.
      keep_ = every_feature_ && (layers == 0 || layer + 1 < layers) &&
              (g_.max_depth == 0 || depth + 1 < g_.max_depth);
      std::vector<Candidate> candidates;
      std::vector<std::vector<double>> totals(active_.size(), std::vector<double>(stride_, 0.0));
      for (size_t a = 0; a < active_.size(); ++a) {
        for (int64_t r = active_[a].first; r < active_[a].last; ++r) {
          add(t, rows_[r], weights_[r], totals[a].data());
        }
      }
      if (fresh && layer == 0) {
        // A new root's value, should it stay a leaf: boosting's shrunk step from zero.
        const double shrink = g_.forest ? 1.0 : g_.lr;
        init_node(node(t, 0),
                  [&](int64_t k) { return shrink * g_.step(totals[0].data(), k, dim_); });
      }
      for (size_t a = 0; a < active_.size(); ++a) {
        // Siblings sharing their parent's histogram: the one of fewer rows first.
        if (a + 1 < active_.size() && active_[a].kept >= 0 &&
            active_[a + 1].subtract_from == active_[a].kept) {
          split_node(t, a + 1, totals[a + 1], may_split, &candidates);
          split_node(t, a, totals[a], may_split, &candidates);
          ++a;
          continue;
        }
        split_node(t, a, totals[a], may_split, &candidates);
      }
      std::sort(candidates.begin(), candidates.end(),
                [](const Candidate& p, const Candidate& q) { return p.node < q.node; });
      // Too little room left: the best splits first.
      const int64_t room = (max_nodes_ - end) / 2;
      if (static_cast<int64_t>(candidates.size()) > room) {
        std::stable_sort(candidates.begin(), candidates.end(),
                         [](const Candidate& p, const Candidate& q) { return p.gain > q.gain; });
        for (size_t c = std::max<int64_t>(room, 0); c < candidates.size(); ++c) {
          release(candidates[c].kept);
        }
        candidates.resize(std::max<int64_t>(room, 0));
        std::sort(candidates.begin(), candidates.end(),
                  [](const Candidate& p, const Candidate& q) { return p.node < q.node; });
      }
      const int64_t next = apply(t, candidates, fresh);
      hdr[ops::kTreeNodes] = static_cast<float>(next);
      hdr[ops::kTreeLayerBegin] = static_cast<float>(end);
      hdr[ops::kTreeDepth] = static_cast<float>(depth + 1);
      const bool deep = g_.max_depth > 0 && depth + 1 >= g_.max_depth;
      if (candidates.empty() || deep || next + 2 > max_nodes_) hdr[ops::kTreeDone] = 1;
      if (hdr[ops::kTreeDone] != 0 || (layers != 0 && layer + 1 == layers)) {
        for (const Candidate& c : candidates) release(c.kept);
        break;
      }
      partition(candidates, end);
    }
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
  void init_node(float* n, Value value) const {
    n[ops::kNodeLeft] = -1;
    n[ops::kNodeFeature] = 0;
    n[ops::kNodeThreshold] = 0;
    n[ops::kNodeGain] = 0;
    for (int64_t k = 0; k < dim_; ++k) n[ops::kNodeValue + k] = static_cast<float>(value(k));
  }

  // The rows of the layer's nodes [begin, end), each with its bootstrap weight; rows of weight
  // 0 (not in this tree's bootstrap) are left out, as they add nothing.
  void group_rows(int64_t t, int64_t begin, int64_t end) {
    const int64_t count = end - begin;
    std::vector<int32_t> slot(b_.n, -1);
    std::vector<int64_t> offsets(count + 1, 0);
    constexpr int64_t kBlock = 256;
    int32_t reached[kBlock];
    for (int64_t first = 0; first < b_.n; first += kBlock) {
      const int64_t rows = std::min(kBlock, b_.n - first);
      view_.leaves(t, b_.x + first * b_.features, b_.features, rows, reached);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t at = reached[r];
        if (at < begin || at >= end) continue;
        slot[first + r] = static_cast<int32_t>(at - begin);
        ++offsets[at - begin + 1];
      }
    }
    for (int64_t a = 0; a < count; ++a) offsets[a + 1] += offsets[a];
    std::vector<int64_t> fill(offsets.begin(), offsets.end() - 1);
    rows_.assign(offsets[count], 0);
    weights_.assign(offsets[count], 1.0f);
    const uint64_t tree_key = runtime::fingerprint_cat64(static_cast<uint64_t>(g_.seed), t);
    for (int64_t i = 0; i < b_.n; ++i) {
      if (slot[i] < 0) continue;
      const int64_t r = fill[slot[i]]++;
      rows_[r] = static_cast<int32_t>(i);
      if (g_.bagging) {
        weights_[r] =
            static_cast<float>(poisson1(runtime::fingerprint_cat64(b_.row_key[i], tree_key)));
      }
    }
    // Each node's rows in order, those of weight 0 dropped.
    active_.clear();
    int64_t kept = 0;
    for (int64_t a = 0; a < count; ++a) {
      const int64_t first = kept;
      for (int64_t r = offsets[a]; r < offsets[a + 1]; ++r) {
        if (weights_[r] == 0) continue;
        rows_[kept] = rows_[r];
        weights_[kept++] = weights_[r];
      }
      active_.push_back({begin + a, first, kept, begin + a});
    }
    rows_.resize(kept);
    weights_.resize(kept);
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

  // Sums node a's rows into hist (zero before), per feature feats[j] (j in [first, last)) and
  // bucket. A sparse histogram notes the buckets it fills in touched_.
  void accumulate(int64_t t, const Active& a, const std::vector<int64_t>& feats, double* hist,
                  bool sparse, int64_t first, int64_t last) {
    const int64_t m = static_cast<int64_t>(feats.size()), c = column(t);
    const bool identity = m == b_.features;
    const bool hot = !b_.hot.empty();
    for (int64_t r = a.first; r < a.last; ++r) {
      const float w = weights_[r];
      const int64_t i = rows_[r];
      const float hi = w * b_.h[i * b_.h_cols + (b_.h_cols == 1 ? 0 : c)];
      if (!(hi > 0)) continue;
      const uint8_t* bins = b_.bins.data() + i * b_.features;
      const float* gi = b_.g + i * b_.g_cols + c;
      if (dim_ == 1 && !sparse) {
        const float gw = w * gi[0];
        if (identity) {
          for (int64_t j = first; j < last; ++j) {
            double* s = hist + (j * buckets_ + bins[j]) * 2;
            s[0] += gw;
            s[1] += hi;
          }
        } else {
          for (int64_t j = first; j < last; ++j) {
            double* s = hist + (j * buckets_ + bins[feats[j]]) * 2;
            s[0] += gw;
            s[1] += hi;
          }
        }
        continue;
      }
      // A row whose gradient has one nonzero value (a class's one-hot target) adds that alone.
      const int32_t only = hot ? b_.hot[i] : -1;
      const float gk = only >= 0 ? w * gi[only] : 0.0f;
      for (int64_t j = first; j < last; ++j) {
        const uint8_t bin = bins[feats[j]];
        double* s = hist + (j * buckets_ + bin) * stride_;
        if (sparse && s[dim_] == 0) touched_[j].push_back(bin);
        if (only >= 0) {
          s[only] += gk;
        } else {
          for (int64_t k = 0; k < dim_; ++k) s[k] += w * gi[k];
        }
        s[dim_] += hi;
      }
    }
  }

  // The best split of node `node` on features feats[j] (j in [first, last)) from its histogram,
  // or none (feature -1); `total` is its stats.
  void scan(int64_t node, const std::vector<int64_t>& feats, const double* hist, bool sparse,
            const std::vector<double>& total, int64_t first, int64_t last, Candidate* best_split) {
    const double parent = g_.score(total.data(), dim_);
    // Sums of floats: a "gain" this small is rounding, not a split.
    const double least = std::max(g_.complexity, 1e-6 * std::abs(parent) + 1e-12);
    double best = least;
    int64_t best_j = -1, best_bucket = -1;
    std::vector<double> left(stride_), right(stride_), best_left(stride_);
    auto consider = [&](int64_t j, int64_t bucket, const double* s) {
      for (int64_t k = 0; k < stride_; ++k) left[k] += s[k];
      for (int64_t k = 0; k < stride_; ++k) right[k] = total[k] - left[k];
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
    for (int64_t j = first; j < last; ++j) {
      std::fill(left.begin(), left.end(), 0.0);
      const double* s = hist + j * buckets_ * stride_;
      if (sparse) {
        // Between two touched buckets lie only empty ones: the same partition.
        std::sort(touched_[j].begin(), touched_[j].end());
        for (uint8_t bucket : touched_[j]) consider(j, bucket, s + bucket * stride_);
      } else {
        for (int64_t bucket = 0; bucket + 1 < b_.buckets[feats[j]]; ++bucket) {
          consider(j, bucket, s + bucket * stride_);
        }
      }
    }
    best_split->feature = -1;
    if (best_j < 0) return;
    std::vector<double> best_right(stride_);
    for (int64_t k = 0; k < stride_; ++k) best_right[k] = total[k] - best_left[k];
    *best_split = {node, feats[best_j], best_bucket, best, best_left, best_right, 0, -1};
  }

  // Finds node a's best split (when `splits`) in `found` from its histogram `hist`, built first
  // from its rows when `build`, and subtracted from `parent` (its sibling's to be) when given.
  // Ranges of its features go to threads_ threads where that is worth threads, as XGBoost and
  // LightGBM search: a round of one tree (a regressor, a binary classifier) uses every core
  // too. Each thread touches its features' parts of the histograms and of touched_ alone; the
  // ranges' bests are taken in feature order, so the split is the one a single thread finds.
  void search(int64_t t, const Active& a, const std::vector<int64_t>& feats, double* hist,
              bool sparse, bool build, double* parent, bool splits,
              const std::vector<double>& total, Candidate* found) {
    const auto m = static_cast<int64_t>(feats.size());
    std::mutex mu;
    std::vector<std::pair<int64_t, Candidate>> bests;
    auto run = [&](int64_t first, int64_t last) {
      if (build) accumulate(t, a, feats, hist, sparse, first, last);
      if (parent) subtract(hist, parent, sparse, first, last);
      if (!splits) return;
      Candidate best;
      scan(a.node, feats, hist, sparse, total, first, last, &best);
      std::lock_guard<std::mutex> lock(mu);
      bests.emplace_back(first, std::move(best));
    };
    const double per_feature = static_cast<double>(stride_) * (build ? a.last - a.first : buckets_);
    parallel_range(m, per_feature, run, threads_);
    std::sort(bests.begin(), bests.end(),
              [](const auto& p, const auto& q) { return p.first < q.first; });
    found->feature = -1;
    for (auto& [first, best] : bests) {
      if (best.feature >= 0 && (found->feature < 0 || best.gain > found->gain)) {
        *found = std::move(best);
      }
    }
  }

  // Finds node a's best split, if it may split, into candidates. Its histogram is its own
  // (built from its rows) or, for the larger of two siblings, its parent's less the smaller
  // one's, which the smaller sibling, done first, subtracts from the parent's as it is built.
  void split_node(int64_t t, size_t a, const std::vector<double>& total, bool may_split,
                  std::vector<Candidate>* candidates) {
    const Active& node = active_[a];
    const int64_t rows = node.last - node.first;
    const bool splits = may_split && total[dim_] >= 2 * g_.min_weight && rows >= 2;
    Candidate found;
    found.feature = -1;
    if (node.kept >= 0) {
      // Its histogram is ready.
      double* hist = kept_[node.kept].data();
      if (splits) {
        search(t, node, features_of(t, node.node), hist, false, false, nullptr, true, total,
               &found);
      }
      if (found.feature >= 0 && keep_) {
        found.kept = node.kept;
      } else {
        release(node.kept);
      }
    } else {
      const int sibling_hist = node.subtract_from;
      if (!splits && sibling_hist < 0) return;
      const std::vector<int64_t>& feats = features_of(t, node.node);
      const int64_t m = static_cast<int64_t>(feats.size());
      const bool sparse = rows < buckets_;
      if (scratch_.size() != static_cast<size_t>(m * buckets_ * stride_)) {
        scratch_.assign(m * buckets_ * stride_, 0.0);
      }
      touched_.resize(m);
      for (auto& list : touched_) list.clear();
      double* parent = sibling_hist >= 0 ? kept_[sibling_hist].data() : nullptr;
      search(t, node, feats, scratch_.data(), sparse, true, parent, splits, total, &found);
      if (found.feature >= 0 && keep_ && !sparse && may_keep()) {
        found.kept = take();
        std::copy(scratch_.begin(), scratch_.end(), kept_[found.kept].begin());
      }
      clear_scratch(sparse);
    }
    if (found.feature < 0) return;
    found.active = static_cast<int64_t>(a);
    candidates->push_back(std::move(found));
  }

  // from -= hist over features [first, last): what the parent's histogram leaves for the
  // sibling.
  void subtract(const double* hist, double* from, bool sparse, int64_t first, int64_t last) const {
    const int64_t per_feature = buckets_ * stride_;
    if (!sparse) {
      for (int64_t i = first * per_feature; i < last * per_feature; ++i) from[i] -= hist[i];
      return;
    }
    for (int64_t j = first; j < last; ++j) {
      for (uint8_t bucket : touched_[j]) {
        const int64_t at = j * per_feature + bucket * stride_;
        for (int64_t k = 0; k < stride_; ++k) from[at + k] -= hist[at + k];
      }
    }
  }

  // scratch_ is all zeros between nodes.
  void clear_scratch(bool sparse) {
    if (!sparse) {
      std::fill(scratch_.begin(), scratch_.end(), 0.0);
      return;
    }
    for (size_t j = 0; j < touched_.size(); ++j) {
      for (uint8_t bucket : touched_[j]) {
        std::fill_n(scratch_.data() + (static_cast<int64_t>(j) * buckets_ + bucket) * stride_,
                    stride_, 0.0);
      }
    }
  }

  int take() {
    ++in_use_;
    if (!free_.empty()) {
      const int k = free_.back();
      free_.pop_back();
      return k;
    }
    kept_.emplace_back(scratch_.size());
    return static_cast<int>(kept_.size()) - 1;
  }
  void release(int k) {
    if (k < 0) return;
    --in_use_;
    free_.push_back(k);
  }
  bool may_keep() const {
    return static_cast<int64_t>((in_use_ + 1) * scratch_.size() * sizeof(double)) <= kKeptBudget;
  }

  // Writes the candidates' splits and their children, numbered from the tree's end; returns
  // the new end.
  int64_t apply(int64_t t, const std::vector<Candidate>& candidates, bool fresh) {
    int64_t next = static_cast<int64_t>(header(t)[ops::kTreeNodes]);
    const double shrink = g_.forest ? 1.0 : g_.lr;
    for (const Candidate& c : candidates) {
      float* parent = node(t, c.node);
      // Boosting's gradients were taken at the value of the rows' leaf when the step began
      // (zero for a tree the step began).
      std::vector<double> base(dim_, 0.0);
      if (!g_.forest && !fresh) {
        const float* origin = node(t, active_[c.active].origin);
        for (int64_t k = 0; k < dim_; ++k) base[k] = origin[ops::kNodeValue + k];
      }
      parent[ops::kNodeLeft] = static_cast<float>(next);
      parent[ops::kNodeFeature] = static_cast<float>(c.feature);
      parent[ops::kNodeThreshold] = b_.bounds[c.feature * b_.slots + c.bucket];
      parent[ops::kNodeGain] = static_cast<float>(c.gain);
      init_node(node(t, next),
                [&](int64_t k) { return base[k] + shrink * g_.step(c.left.data(), k, dim_); });
      init_node(node(t, next + 1),
                [&](int64_t k) { return base[k] + shrink * g_.step(c.right.data(), k, dim_); });
      next += 2;
    }
    return next;
  }

  // The next layer's rows: each split node's rows go to its children by the split's bucket,
  // which is the threshold's test (x <= threshold exactly when x's bucket <= the split's).
  void partition(const std::vector<Candidate>& candidates, int64_t child) {
    std::vector<int32_t> rows;
    std::vector<float> weights;
    std::vector<Active> next;
    rows.reserve(rows_.size());
    weights.reserve(rows_.size());
    auto take_rows = [&](const Active& a, const Candidate& c, bool right) {
      for (int64_t r = a.first; r < a.last; ++r) {
        if ((b_.bins[rows_[r] * b_.features + c.feature] > c.bucket) != right) continue;
        rows.push_back(rows_[r]);
        weights.push_back(weights_[r]);
      }
      return static_cast<int64_t>(rows.size());
    };
    for (const Candidate& c : candidates) {
      const Active& a = active_[c.active];
      const auto first = static_cast<int64_t>(rows.size());
      const int64_t middle = take_rows(a, c, false), last = take_rows(a, c, true);
      Active left{child, first, middle, a.origin}, right{child + 1, middle, last, a.origin};
      if (c.kept >= 0) {
        const bool left_larger = middle - first >= last - middle;
        (left_larger ? left : right).kept = c.kept;
        (left_larger ? right : left).subtract_from = c.kept;
      }
      next.push_back(left);
      next.push_back(right);
      child += 2;
    }
    rows_.swap(rows);
    weights_.swap(weights);
    active_.swap(next);
  }

  // Bytes of kept histograms a grower may hold: a deep tree's many nodes of few rows build
  // their own.
  static constexpr int64_t kKeptBudget = int64_t{64} << 20;

  const Growth& g_;
  const Batch& b_;
  const ops::TreeEnsembleView& view_;
  float* data_;
  const int64_t max_nodes_, width_, dim_, buckets_, stride_;
  const bool every_feature_;
  const int64_t threads_;
  bool keep_ = false;  // whether this layer keeps its nodes' histograms for their children
  std::vector<Active> active_;
  std::vector<int32_t> rows_;
  std::vector<float> weights_;
  std::vector<int64_t> features_;
  std::vector<double> scratch_;  // sums in double: a parent's less a child's stays exact
  std::vector<std::vector<uint8_t>> touched_;  // per feature, the buckets a sparse node fills
  std::vector<std::vector<double>> kept_;
  std::vector<int> free_;
  int64_t in_use_ = 0;
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
        if (growth.forest && dim > 1) find_hot_columns(batch);
        // The round's trees side by side; the cores they leave search each node's features.
        const int64_t threads = std::max<int64_t>(1, runtime::available_cores() / per_round);
        parallel_range(per_round, 1e9, [&](int64_t begin, int64_t end) {
          TreeGrower grower(growth, batch, view, ensemble.data<float>(), threads);
          for (int64_t t = round + begin; t < round + end; ++t) {
            if (!view.done(t)) grower.grow(t, growth.layers);
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
