// Candidate sampling: the samplers' draws follow their distributions and the expected counts
// TF's RangeSampler gives, unique draws are distinct, a seeded graph repeats; sampled softmax
// over every class (each counted once) is the full softmax; nce_loss against its formula; and
// both losses' gradients against central differences.
#include "ops/candidate_sampling.h"

#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "harness/grad_check.h"
#include "harness/op_harness.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"

using namespace troupe;
using namespace troupe::runtime;
using testing::OpTest;

namespace {

double log_uniform(int64_t k, int64_t range) {
  return std::log((k + 2.0) / (k + 1.0)) / std::log(range + 1.0);
}

// Candidates given outright: `ids` with every expected count 1, so no correction applies.
ops::SampledCandidates given(GraphBuilder& b, const std::vector<int64_t>& ids, int64_t batch,
                             int64_t num_true) {
  const auto n = static_cast<int64_t>(ids.size());
  return {ops::constant(b, Tensor::from_vector(Shape{n}, ids)),
          ops::constant(b, Tensor::from_vector(Shape{batch, num_true},
                                               std::vector<float>(batch * num_true, 1.0f))),
          ops::constant(b, Tensor::from_vector(Shape{n}, std::vector<float>(n, 1.0f)))};
}

// A softmax layer's weights [classes, dim] and biases, and inputs [batch, dim], at random.
struct Layer {
  Tensor w, bias, x;
};
Layer random_layer(uint64_t seed, int64_t batch, int64_t classes, int64_t dim) {
  std::mt19937_64 rng(seed);
  Layer l;
  l.w = testing::random_tensor<float>(Shape{classes, dim}, rng);
  l.bias = testing::random_tensor<float>(Shape{classes}, rng);
  l.x = testing::random_tensor<float>(Shape{batch, dim}, rng);
  return l;
}

}  // namespace

TEST_CASE("the samplers draw by their distributions, with TF's expected counts") {
  for (const bool log : {true, false}) {
    CAPTURE(log);
    OpTest t;
    t.g.set_seed(5);
    const int64_t range = 10, draws = 40000;
    Output labels = t.feed(Tensor::from_vector<int64_t>(Shape{2, 1}, {0, 9}));
    auto sampler = log ? ops::log_uniform_candidate_sampler : ops::uniform_candidate_sampler;
    ops::SampledCandidates s = sampler(t.b, labels, 1, draws, /*unique=*/false, range, 0);
    auto out = t.run({s.sampled, s.true_expected_count, s.sampled_expected_count});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    std::vector<int64_t> counts(range, 0);
    for (int64_t k : out->at(0).to_vector<int64_t>()) {
      REQUIRE((k >= 0 && k < range));
      ++counts[k];
    }
    for (int64_t k = 0; k < range; ++k) {
      const double p = log ? log_uniform(k, range) : 1.0 / range;
      CHECK(std::abs(counts[k] / double(draws) - p) < 0.01);
    }
    const std::vector<float> want{float(draws * (log ? log_uniform(0, range) : 0.1)),
                                  float(draws * (log ? log_uniform(9, range) : 0.1))};
    CHECK(testing::max_error(out->at(1), testing::values(Tensor::from_vector(Shape{2, 1}, want))) <
          1e-5);
  }

  // Unique draws: distinct, each expected count 1 - (1 - p)^tries for one number of tries, and the
  // same draws again in a graph of the same seed.
  auto draw = [](int64_t seed) {
    OpTest t;
    t.g.set_seed(seed);
    Output labels = t.feed(Tensor::from_vector<int64_t>(Shape{1, 1}, {3}));
    ops::SampledCandidates s = ops::log_uniform_candidate_sampler(t.b, labels, 1, 6, true, 8);
    auto out = t.run({s.sampled, s.sampled_expected_count});
    REQUIRE(out.ok());
    return *out;
  };
  const std::vector<Tensor> a = draw(1), again = draw(1);
  const std::vector<int64_t> ids = a[0].to_vector<int64_t>();
  CHECK(std::set<int64_t>(ids.begin(), ids.end()).size() == 6);
  CHECK(ids == again[0].to_vector<int64_t>());
  // Every count comes from one number of tries, at least the 6 draws kept.
  std::set<int64_t> tries;
  for (size_t i = 0; i < ids.size(); ++i) {
    const double count = a[1].data<float>()[i];
    tries.insert(std::lround(std::log1p(-count) / std::log1p(-log_uniform(ids[i], 8))));
  }
  CHECK(tries.size() == 1);
  CHECK(*tries.begin() >= 6);

  OpTest bad;
  ops::log_uniform_candidate_sampler(
      bad.b, bad.feed(Tensor::from_vector<int64_t>(Shape{1, 1}, {0})), 1, 9, true, 8);
  CHECK(bad.b.status().message().find("9 unique samples from 8 classes") != std::string::npos);
}

TEST_CASE("sampled softmax over every class, each counted once, is the full softmax") {
  const int64_t batch = 4, classes = 6;
  OpTest t;
  const Layer layer = random_layer(3, batch, classes, 3);
  Tensor labels = Tensor::from_vector<int64_t>(Shape{batch, 1}, {0, 5, 2, 2});
  Output W = t.feed(layer.w), B = t.feed(layer.bias), X = t.feed(layer.x), L = t.feed(labels);
  ops::SampledCandidates all = given(t.b, {0, 1, 2, 3, 4, 5}, batch, 1);
  Output sampled = ops::sampled_softmax_loss(t.b, W, B, L, X, classes, classes, {.sampled = &all});
  Output full = ops::sparse_softmax_cross_entropy_with_logits(
      t.b, ops::reshape(t.b, L, {-1}), ops::add(t.b, ops::matmul(t.b, X, W, false, true), B));
  CHECK(t.g.shape(sampled) == Shape{batch});
  CHECK(testing::max_error(t.eval(sampled), t.eval(full)) < 1e-5);
  // Without removing accidental hits, each label also competes with itself: another loss.
  Output with_hits = ops::sampled_softmax_loss(t.b, W, B, L, X, classes, classes,
                                               {.remove_accidental_hits = false, .sampled = &all});
  CHECK(testing::max_error(t.eval(with_hits), t.eval(full)) > 1e-3);
  // Drawn by the sampler itself, the loss is finite and positive.
  Output drawn = ops::sampled_softmax_loss(t.b, W, B, L, X, 3, classes);
  for (double v : testing::values(t.eval(drawn))) CHECK((std::isfinite(v) && v > 0));
}

TEST_CASE("nce_loss is the logistic loss of the labels against the sampled classes") {
  const int64_t batch = 3, classes = 5, dim = 2;
  OpTest t;
  const Layer layer = random_layer(4, batch, classes, dim);
  const Tensor &w = layer.w, &bias = layer.bias, &x = layer.x;
  const std::vector<int64_t> label{1, 4, 0}, noise{2, 3};
  ops::SampledCandidates cand = given(t.b, noise, batch, 1);
  Output loss = ops::nce_loss(t.b, t.feed(w), t.feed(bias),
                              t.feed(Tensor::from_vector(Shape{batch, 1}, label)), t.feed(x), 2,
                              classes, {.remove_accidental_hits = false, .sampled = &cand});
  auto logit = [&](int64_t i, int64_t k) {
    double z = bias.data<float>()[k];
    for (int64_t d = 0; d < dim; ++d)
      z += x.data<float>()[i * dim + d] * w.data<float>()[k * dim + d];
    return z;
  };
  auto softplus = [](double z) { return std::log1p(std::exp(z)); };
  std::vector<double> want;
  for (int64_t i = 0; i < batch; ++i) {
    double l = softplus(-logit(i, label[i]));            // -log sigmoid(z) for the label
    for (int64_t k : noise) l += softplus(logit(i, k));  // -log(1 - sigmoid(z)) for the noise
    want.push_back(l);
  }
  CHECK(testing::max_error(t.eval(loss), want) < 1e-5);
}

TEST_CASE("both losses' gradients match central differences for weights, biases and inputs") {
  std::mt19937_64 rng(6);
  for (const bool nce : {false, true}) {
    CAPTURE(nce);
    auto f = [nce](GraphBuilder& b, const std::vector<Output>& in) {
      ops::SampledCandidates c = given(b, {0, 2, 3}, 2, 2);
      const ops::SampledLossOptions o{.num_true = 2, .sampled = &c};
      return nce ? ops::nce_loss(b, in[0], in[1], in[2], in[3], 3, 5, o)
                 : ops::sampled_softmax_loss(b, in[0], in[1], in[2], in[3], 3, 5, o);
    };
    const double err =
        testing::gradient_error(f, {testing::random_tensor<double>(Shape{5, 3}, rng),
                                    testing::random_tensor<double>(Shape{5}, rng),
                                    Tensor::from_vector<int64_t>(Shape{2, 2}, {1, 3, 4, 0}),
                                    testing::random_tensor<double>(Shape{2, 3}, rng)});
    CHECK(err < 1e-6);
  }
}
