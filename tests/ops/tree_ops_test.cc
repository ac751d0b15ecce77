// Tree ensemble ops against hand-computed results: quantile boundaries set once, predictions of
// a hand-built ensemble, one grown layer's split, threshold, values and gain, a forest's class
// frequencies, and a corrupt ensemble refused rather than followed out of bounds.
#include "ops/tree_ops.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "harness/op_harness.h"
#include "ops/array_ops.h"
#include "ops/state_ops.h"

using namespace troupe;
using namespace troupe::runtime;
using testing::OpTest;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

Tensor matrix(int64_t rows, int64_t cols, std::vector<float> v) {
  return Tensor::from_vector(Shape{rows, cols}, v);
}

// A variable of `value`, initialized.
Output held(OpTest& t, const char* name, const Tensor& value) {
  Output v = ops::variable(t.b, name, value.shape(), DType::kFloat32, ops::constant(t.b, value),
                           /*trainable=*/false);
  t.vars.assign(ops::variable_name(t.g.node(v.node)), value);
  return v;
}

// One tree of `width` floats a node, `nodes` rows given, padded to `max_nodes`.
std::vector<float> tree(int64_t max_nodes, int64_t width, std::vector<float> header,
                        std::vector<std::vector<float>> nodes) {
  std::vector<float> out((max_nodes + 1) * width, 0.0f);
  std::copy(header.begin(), header.end(), out.begin());
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::copy(nodes[i].begin(), nodes[i].end(), out.begin() + (i + 1) * width);
  }
  return out;
}

}  // namespace

TEST_CASE("bucket_boundaries: distinct values below the largest, quantiles past max_buckets") {
  OpTest t;
  Output var = held(t, "bounds", matrix(2, 3, {kNaN, kNaN, kNaN, kNaN, kNaN, kNaN}));
  // Feature 0: 1, 2, 3 (and a NaN), few enough to keep all but 3. Feature 1: 0..9, ten values
  // for three boundaries: the values at ranks 9 q / 4, q = 1..3: 2, 4 and 6.
  std::vector<float> x;
  for (int i = 0; i < 10; ++i) {
    x.push_back(i < 4 ? float(std::min(i, 2) + 1) : (i == 4 ? kNaN : 3.0f));
    x.push_back(float(i));
  }
  Output xs = t.feed(matrix(10, 2, x));
  Tensor bounds = t.eval(ops::bucket_boundaries(t.b, var, xs));
  CHECK(bounds.to_vector<float>() == std::vector<float>{1, 2, kInf, 2, 4, 6});
  // Set once: other data later changes nothing.
  Output other = t.feed(matrix(1, 2, {100, 100}));
  CHECK(t.eval(ops::bucket_boundaries(t.b, var, other)).to_vector<float>() ==
        std::vector<float>{1, 2, kInf, 2, 4, 6});
}

TEST_CASE("tree_ensemble_predict: sums (or averages) the leaves each row reaches") {
  OpTest t;
  // Tree 0 (output 0): x0 <= 0.5 ? 1 : 2. Tree 1 (output 1): a root leaf of 0.5.
  std::vector<float> e =
      tree(3, 5, {3, 1, 1, 1}, {{1, 0, 0.5f, 4, 0}, {-1, 0, 0, 0, 1}, {-1, 0, 0, 0, 2}});
  std::vector<float> second = tree(3, 5, {1, 1, 1, 1}, {{-1, 0, 0, 0, 0.5f}});
  e.insert(e.end(), second.begin(), second.end());
  Output ensemble = t.feed(Tensor::from_vector(ops::tree_ensemble_shape(2, 3, 1), e));
  Output x = t.feed(matrix(3, 1, {0.2f, 0.7f, kNaN}));
  CHECK(t.eval(ops::tree_ensemble_predict(t.b, x, ensemble, 2, false)).to_vector<float>() ==
        std::vector<float>{1, 0.5f, 2, 0.5f, 2, 0.5f});  // NaN goes right
  CHECK(t.eval(ops::tree_ensemble_predict(t.b, x, ensemble, 2, true)).to_vector<float>() ==
        std::vector<float>{0.5f, 0.25f, 1, 0.25f, 1, 0.25f});
  CHECK(ops::feature_importances(Tensor::from_vector(ops::tree_ensemble_shape(2, 3, 1), e), 2) ==
        std::vector<double>{1, 0});
}

TEST_CASE("tree_ensemble_predict refuses a split to a node or feature that is not there") {
  OpTest t;
  // The root's children would be nodes 5 and 6 of a 3-node tree.
  std::vector<float> e = tree(3, 5, {3, 1, 1, 1}, {{5, 0, 0.5f, 1, 0}});
  Output ensemble = t.feed(Tensor::from_vector(ops::tree_ensemble_shape(1, 3, 1), e));
  Output x = t.feed(matrix(1, 1, {0.2f}));
  auto out = t.run({ops::tree_ensemble_predict(t.b, x, ensemble, 1, false)});
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().message().find("node 0 of tree 0") != std::string::npos);
}

TEST_CASE("grow_tree_layer: the split of largest gain, Newton values, then done at max_depth") {
  OpTest t;
  // x 0..3 with gradients -1 -1 1 1 and hessians 1: the split x <= 1 gains
  // (-2)^2 / 2 + 2^2 / 2 - 0 = 4; its children's steps are 1 and -1 (learning rate 1).
  Output x = t.feed(matrix(4, 1, {0, 1, 2, 3}));
  Output g = t.feed(matrix(4, 1, {-1, -1, 1, 1}));
  Output h = t.feed(matrix(4, 1, {1, 1, 1, 1}));
  Output bounds = t.feed(matrix(1, 3, {0, 1, 2}));
  const Shape shape = ops::tree_ensemble_shape(1, 3, 1);
  Output ensemble = held(t, "trees", Tensor::from_vector(shape, std::vector<float>(4 * 5, 0)));
  Output done =
      ops::grow_tree_layer(t.b, ensemble, x, g, h, bounds, {.max_depth = 1, .learning_rate = 1.0});
  CHECK(t.eval(done).to_vector<int64_t>() == std::vector<int64_t>{1});
  auto grown = t.vars.read("trees");
  REQUIRE(grown.ok());
  CHECK(grown->to_vector<float>() ==
        tree(3, 5, {3, 1, 1, 1}, {{1, 0, 1, 4, 0}, {-1, 0, 0, 0, 1}, {-1, 0, 0, 0, -1}}));
  // More boundaries than a byte's buckets (a peer's call) are refused, nothing grown.
  Output wide = t.feed(Tensor::from_vector(Shape{1, 300}, std::vector<float>(300, 1.0f)));
  auto refused = t.run({ops::grow_tree_layer(t.b, ensemble, x, g, h, wide, {.max_depth = 1})});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("1 to 255") != std::string::npos);
  // Finished: another step changes nothing.
  CHECK(t.eval(done).to_vector<int64_t>() == std::vector<int64_t>{1});
  CHECK(t.vars.read("trees")->to_vector<float>() == grown->to_vector<float>());
}

TEST_CASE("grow_tree_layer for a forest: class frequencies and Gini's split") {
  OpTest t;
  // Two classes, x 0..3, classes 0 0 1 1: targets as negative one-hot gradients, one hessian
  // column of ones; the split x <= 1 leaves pure children of frequencies (1, 0) and (0, 1).
  Output x = t.feed(matrix(4, 1, {0, 1, 2, 3}));
  Output g = t.feed(matrix(4, 2, {-1, 0, -1, 0, 0, -1, 0, -1}));
  Output h = t.feed(matrix(4, 1, {1, 1, 1, 1}));
  Output bounds = t.feed(matrix(1, 3, {0, 1, 2}));
  const Shape shape = ops::tree_ensemble_shape(1, 7, 2);
  Output ensemble = held(t, "forest", Tensor::from_vector(shape, std::vector<float>(8 * 6, 0)));
  Output done =
      ops::grow_tree_layer(t.b, ensemble, x, g, h, bounds, {.forest = true, .max_depth = 0});
  CHECK(t.eval(done).to_vector<int64_t>() == std::vector<int64_t>{0});
  // Gini: (2^2 / 2) * 2 - (2^2 + 2^2) / 4 = 2.
  CHECK(t.vars.read("forest")->to_vector<float>() ==
        tree(7, 6, {3, 1, 1, 0},
             {{1, 0, 1, 2, 0.5f, 0.5f}, {-1, 0, 0, 0, 1, 0}, {-1, 0, 0, 0, 0, 1}}));
  // The pure children do not split: the tree is done.
  CHECK(t.eval(done).to_vector<int64_t>() == std::vector<int64_t>{1});
  Output p = ops::tree_ensemble_predict(t.b, x, ensemble, 2, true);
  CHECK(t.eval(p).to_vector<float>() == std::vector<float>{1, 0, 1, 0, 0, 1, 0, 1});
}

namespace {

// 300 rows of four features valued 0..9 and three classes that depend on them, noisily: the
// forest's targets (negative one-hot) and weights are integers, so every sum is exact and trees
// grown different ways must be the same tree, bit for bit.
struct Classes {
  Tensor x, g, h, bounds;
};

Classes three_classes() {
  const int64_t n = 300;
  std::vector<float> x, g, h(n, 1.0f), bounds;
  uint64_t state = 12345;
  auto next = [&] {
    return (state = state * 6364136223846793005ULL + 1442695040888963407ULL) >> 33;
  };
  for (int64_t i = 0; i < n; ++i) {
    float f[4];
    for (float& v : f) v = static_cast<float>(next() % 10);
    x.insert(x.end(), f, f + 4);
    int64_t c = f[0] < 4 ? 0 : (f[1] + f[2] < 9 ? 1 : 2);
    if (next() % 10 == 0) c = (c + 1) % 3;
    for (int64_t k = 0; k < 3; ++k) g.push_back(k == c ? -1.0f : 0.0f);
  }
  for (int64_t f = 0; f < 4; ++f) {
    for (int64_t j = 0; j < 9; ++j) bounds.push_back(static_cast<float>(j));
  }
  return {matrix(n, 4, x), matrix(n, 3, g), matrix(n, 1, h), matrix(4, 9, bounds)};
}

// The ensemble of `trees` trees grown from the data, `layers` a step, until done.
std::vector<float> grown(const Classes& d, ops::TreeGrowth growth, int64_t trees, int64_t* steps) {
  OpTest t;
  const Shape shape = ops::tree_ensemble_shape(trees, 255, 3);
  Output ensemble =
      held(t, "forest", Tensor::from_vector(shape, std::vector<float>(shape.num_elements(), 0)));
  growth.forest = true;
  growth.trees_per_round = trees;
  Output done = ops::grow_tree_layer(t.b, ensemble, t.feed(d.x), t.feed(d.g), t.feed(d.h),
                                     t.feed(d.bounds), growth);
  for (*steps = 1; t.eval(done).to_vector<int64_t>()[0] < trees; ++*steps) {
    REQUIRE(*steps < 100);
  }
  return t.vars.read("forest")->to_vector<float>();
}

}  // namespace

TEST_CASE("grow_tree_layer with layers 0 grows whole trees in one step, as a layer a step does") {
  const Classes d = three_classes();
  // Every feature at every node: the larger child's histogram is its parent's less its
  // sibling's. Then a few random features a node and a bootstrap, which build each node's own.
  for (const ops::TreeGrowth growth :
       {ops::TreeGrowth{.max_depth = 0, .min_node_weight = 1},
        ops::TreeGrowth{
            .max_depth = 0, .min_node_weight = 1, .features_per_node = 2, .bagging = true}}) {
    int64_t layered_steps = 0, whole_steps = 0;
    ops::TreeGrowth layered = growth, whole = growth;
    whole.layers = 0;
    const std::vector<float> by_layer = grown(d, layered, 4, &layered_steps);
    const std::vector<float> at_once = grown(d, whole, 4, &whole_steps);
    CHECK(whole_steps == 1);
    CHECK(layered_steps > 3);  // deep trees: the comparison covers many layers
    CHECK(at_once == by_layer);
  }
}

TEST_CASE("grow_tree_layer with layers 0: boosting's leaves are Newton steps at the step's start") {
  OpTest t;
  // x0 = 0..7 with gradients -2 -2 -1 -1 1 1 2 2 (x1 splits worse): x0 <= 3 first, then
  // x0 <= 1 and x0 <= 5. The gradients were taken before the tree: each leaf is the Newton
  // step of its own rows, -G / H, not its parent's value plus that (a layer a step).
  std::vector<float> x;
  for (int i = 0; i < 8; ++i) x.insert(x.end(), {float(i), float(i % 2)});
  Output xs = t.feed(matrix(8, 2, x));
  Output g = t.feed(matrix(8, 1, {-2, -2, -1, -1, 1, 1, 2, 2}));
  Output h = t.feed(matrix(8, 1, std::vector<float>(8, 1.0f)));
  Output bounds =
      t.feed(matrix(2, 7, {0, 1, 2, 3, 4, 5, 6, 0, kInf, kInf, kInf, kInf, kInf, kInf}));
  const Shape shape = ops::tree_ensemble_shape(1, 7, 1);
  Output ensemble =
      held(t, "trees", Tensor::from_vector(shape, std::vector<float>(shape.num_elements(), 0)));
  Output done = ops::grow_tree_layer(t.b, ensemble, xs, g, h, bounds,
                                     {.max_depth = 2, .learning_rate = 1.0, .layers = 0});
  CHECK(t.eval(done).to_vector<int64_t>() == std::vector<int64_t>{1});
  CHECK(t.eval(ops::tree_ensemble_predict(t.b, xs, ensemble, 1, false)).to_vector<float>() ==
        std::vector<float>{2, 2, 1, 1, -1, -1, -2, -2});
  const std::vector<float> e = t.vars.read("trees")->to_vector<float>();
  CHECK(e[ops::kTreeNodes] == 7);
  CHECK(e[5 + ops::kNodeFeature] == 0);
  CHECK(e[5 + ops::kNodeThreshold] == 3);
  CHECK(e[5 + ops::kNodeGain] == 18);  // 6^2 / 4 twice
}

TEST_CASE("grow_tree_layer: a lone tree's split search over ranges of features finds a thread's") {
  // One tree a round (a regressor, a binary classifier) searches a node's features on every
  // core, in ranges. 4000 rows of 64 features are enough work for threads; the informative
  // feature sits in the last range, and then also, as a tie, in the first: a single thread
  // keeps the first of equal gains, and so must the ranges.
  const int64_t n = 4000, features = 64;
  uint64_t state = 99;
  auto next = [&] {
    return (state = state * 6364136223846793005ULL + 1442695040888963407ULL) >> 33;
  };
  std::vector<float> x(n * features), g(n), bounds;
  for (float& v : x) v = static_cast<float>(next() % 10);
  for (int64_t f = 0; f < features; ++f) {
    for (int64_t j = 0; j < 9; ++j) bounds.push_back(static_cast<float>(j));
  }
  auto root_feature = [&](std::vector<float> data) {
    for (int64_t i = 0; i < n; ++i) g[i] = data[i * features + 60] <= 4 ? -1.0f : 1.0f;
    OpTest t;
    const Shape shape = ops::tree_ensemble_shape(1, 3, 1);
    Output ensemble =
        held(t, "trees", Tensor::from_vector(shape, std::vector<float>(shape.num_elements(), 0)));
    Output done = ops::grow_tree_layer(
        t.b, ensemble, t.feed(matrix(n, features, data)), t.feed(matrix(n, 1, g)),
        t.feed(matrix(n, 1, std::vector<float>(n, 1.0f))), t.feed(matrix(features, 9, bounds)),
        {.max_depth = 1, .learning_rate = 1.0, .layers = 0});
    REQUIRE(t.eval(done).to_vector<int64_t>() == std::vector<int64_t>{1});
    const std::vector<float> e = t.vars.read("trees")->to_vector<float>();
    CHECK(e[5 + ops::kNodeThreshold] == 4);
    return e[5 + ops::kNodeFeature];
  };
  CHECK(root_feature(x) == 60);
  for (int64_t i = 0; i < n; ++i) x[i * features + 3] = x[i * features + 60];
  CHECK(root_feature(x) == 3);
}

TEST_CASE("grow_tree_layer buckets values by few boundaries and by many alike") {
  // Up to 64 boundaries a feature are counted, more are searched: both find the split at 120.
  for (const int64_t slots : {int64_t{60}, int64_t{199}}) {
    CAPTURE(slots);
    OpTest t;
    const int64_t n = 200;
    std::vector<float> x(n), g(n), bounds(slots);
    for (int64_t i = 0; i < n; ++i) {
      x[i] = static_cast<float>(i);
      g[i] = i <= 120 ? -1.0f : 1.0f;
    }
    // Boundaries every 199 / slots apart, one of them exactly 120.
    for (int64_t j = 0; j < slots; ++j) bounds[j] = static_cast<float>(j * 199 / slots);
    bounds[slots * 120 / 199] = 120;
    std::sort(bounds.begin(), bounds.end());
    const Shape shape = ops::tree_ensemble_shape(1, 3, 1);
    Output ensemble =
        held(t, "trees", Tensor::from_vector(shape, std::vector<float>(shape.num_elements(), 0)));
    Output done = ops::grow_tree_layer(
        t.b, ensemble, t.feed(matrix(n, 1, x)), t.feed(matrix(n, 1, g)),
        t.feed(matrix(n, 1, std::vector<float>(n, 1.0f))), t.feed(matrix(1, slots, bounds)),
        {.max_depth = 1, .learning_rate = 1.0, .layers = 0});
    REQUIRE(t.eval(done).to_vector<int64_t>() == std::vector<int64_t>{1});
    const std::vector<float> e = t.vars.read("trees")->to_vector<float>();
    CHECK(e[5 + ops::kNodeThreshold] == 120);
    // 121^2 / 121 + 79^2 / 79 for the children, less 42^2 / 200 for the node.
    CHECK(e[5 + ops::kNodeGain] == doctest::Approx(121.0 + 79.0 - 42.0 * 42.0 / 200));
  }
}
