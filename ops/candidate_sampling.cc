#include "ops/candidate_sampling.h"

#include <limits>

#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/op_def_names.h"

namespace troupe::ops {

namespace {

const runtime::AttrMap kSamplerDefaults{{"num_true", int64_t{1}}, {"num_sampled", int64_t{1}},
                                        {"unique", true},         {"range_max", int64_t{1}},
                                        {"seed", int64_t{0}},     {"seed2", int64_t{0}}};

Status sampler_shape(InferenceContext& c) {
  const int64_t num_true = c.attr<int64_t>("num_true"),
                num_sampled = c.attr<int64_t>("num_sampled"),
                range_max = c.attr<int64_t>("range_max");
  if (c.input_dtype(0) != DType::kInt64) {
    return c.error("true_classes must be int64, got ", runtime::dtype_name(c.input_dtype(0)));
  }
  const Shape& t = c.input_shape(0);
  if (t.rank_known() && (t.rank() != 2 || (t.dim(1) >= 0 && t.dim(1) != num_true))) {
    return c.error("true_classes must be [batch, num_true = ", num_true, "], got ", t);
  }
  if (num_true < 1 || num_sampled < 1 || range_max < 1) {
    return c.error("num_true, num_sampled and range_max must be positive");
  }
  if (c.attr<bool>("unique") && num_sampled > range_max) {
    return c.error(num_sampled, " unique samples from ", range_max, " classes");
  }
  c.set_output(0, DType::kInt64, Shape{num_sampled});
  c.set_output(1, DType::kFloat32, Shape{t.rank_known() ? t.dim(0) : -1, num_true});
  c.set_output(2, DType::kFloat32, Shape{num_sampled});
  return runtime::ok_status();
}

SampledCandidates sample(GraphBuilder& b, const char* op, Output true_classes, int64_t num_true,
                         int64_t num_sampled, bool unique, int64_t range_max, int64_t seed) {
  auto [s1, s2] = b.random_seeds(seed);
  const std::vector<Output> out = b.add_node(op, {true_classes},
                                             {{"num_true", num_true},
                                              {"num_sampled", num_sampled},
                                              {"unique", unique},
                                              {"range_max", range_max},
                                              {"seed", s1},
                                              {"seed2", s2}});
  if (out.size() != 3) return {};
  return {out[0], out[1], out[2]};
}

// The logits of each example's labels ([batch, num_true]) and of the sampled classes ([batch,
// num_sampled]), corrected by -log(expected count), as TF's _compute_sampled_logits.
std::pair<Output, Output> sampled_logits(GraphBuilder& b, Output weights, Output biases,
                                         Output labels, Output inputs, int64_t num_sampled,
                                         int64_t num_classes, const SampledLossOptions& o) {
  if (b.dtype(labels) != DType::kInt64) labels = cast(b, labels, DType::kInt64);
  SampledCandidates drawn;
  if (o.sampled) {
    drawn = *o.sampled;
  } else {
    drawn = log_uniform_candidate_sampler(b, stop_gradient(b, labels), o.num_true, num_sampled,
                                          /*unique=*/true, num_classes, o.seed);
  }
  const int64_t dim =
      b.shape(weights).rank_known() && b.shape(weights).rank() == 2 ? b.shape(weights).dim(1) : -1;
  const DType dtype = b.dtype(inputs);
  // The labels' rows: [batch * num_true, dim] back to [batch, num_true, dim].
  Output flat = reshape(b, labels, {-1});
  Output true_w = reshape(b, gather(b, weights, flat), {-1, o.num_true, dim});
  Output true_b = reshape(b, gather(b, biases, flat), {-1, o.num_true});
  Output true_logits =
      add(b, reduce_sum(b, mul(b, expand_dims(b, inputs, 1), true_w), {2}), true_b);
  Output sampled_w = gather(b, weights, drawn.sampled);  // [num_sampled, dim]
  Output sampled_b = gather(b, biases, drawn.sampled);
  Output sampled = add(b, matmul(b, inputs, sampled_w, false, true), sampled_b);
  if (o.remove_accidental_hits) {
    // hits[i, s]: whether sampled class s is one of example i's labels; such a logit gets
    // -FLT_MAX, as TF's sparse_to_dense of compute_accidental_hits gives it.
    Output same = equal(b, expand_dims(b, labels, 2),
                        reshape(b, drawn.sampled, {1, 1, -1}));  // [batch, num_true, sampled]
    Output hits = reduce_max(b, cast(b, same, dtype), {1});
    sampled = add(b, sampled, mul(b, hits, -std::numeric_limits<float>::max()));
  }
  auto log_of = [&](Output count) {
    return log(b, dtype == DType::kFloat32 ? count : cast(b, count, dtype));
  };
  true_logits = sub(b, true_logits, stop_gradient(b, log_of(drawn.true_expected_count)));
  sampled = sub(b, sampled, stop_gradient(b, log_of(drawn.sampled_expected_count)));
  return {true_logits, sampled};
}

}  // namespace

TROUPE_REGISTER_OP(LogUniformCandidateSampler)
    .input("true_classes")
    .output("sampled_candidates")
    .output("true_expected_count")
    .output("sampled_expected_count")
    .attrs(kSamplerDefaults)
    .shape_fn(sampler_shape)
    .no_gradient()
    .kernel_dtype_from_input(0)
    .doc("classes drawn by P(k) = log((k+2)/(k+1)) / log(range_max+1), and expected counts");

TROUPE_REGISTER_OP(UniformCandidateSampler)
    .input("true_classes")
    .output("sampled_candidates")
    .output("true_expected_count")
    .output("sampled_expected_count")
    .attrs(kSamplerDefaults)
    .shape_fn(sampler_shape)
    .no_gradient()
    .kernel_dtype_from_input(0)
    .doc("classes drawn uniformly from [0, range_max), and expected counts");

SampledCandidates log_uniform_candidate_sampler(GraphBuilder& b, Output true_classes,
                                                int64_t num_true, int64_t num_sampled, bool unique,
                                                int64_t range_max, int64_t seed) {
  return sample(b, "LogUniformCandidateSampler", true_classes, num_true, num_sampled, unique,
                range_max, seed);
}

SampledCandidates uniform_candidate_sampler(GraphBuilder& b, Output true_classes, int64_t num_true,
                                            int64_t num_sampled, bool unique, int64_t range_max,
                                            int64_t seed) {
  return sample(b, "UniformCandidateSampler", true_classes, num_true, num_sampled, unique,
                range_max, seed);
}

Output sampled_softmax_loss(GraphBuilder& b, Output weights, Output biases, Output labels,
                            Output inputs, int64_t num_sampled, int64_t num_classes,
                            SampledLossOptions options) {
  auto scope = b.name_scope("sampled_softmax_loss");
  auto [true_logits, sampled] =
      sampled_logits(b, weights, biases, labels, inputs, num_sampled, num_classes, options);
  Output logits = concat(b, {true_logits, sampled}, 1);
  Output targets = concat(b,
                          {div(b, ones_like(b, true_logits), static_cast<double>(options.num_true)),
                           zeros_like(b, sampled)},
                          1);
  return softmax_cross_entropy_with_logits(b, stop_gradient(b, targets), logits);
}

Output nce_loss(GraphBuilder& b, Output weights, Output biases, Output labels, Output inputs,
                int64_t num_sampled, int64_t num_classes, SampledLossOptions options) {
  auto scope = b.name_scope("nce_loss");
  auto [true_logits, sampled] =
      sampled_logits(b, weights, biases, labels, inputs, num_sampled, num_classes, options);
  Output logits = concat(b, {true_logits, sampled}, 1);
  Output targets = concat(b, {ones_like(b, true_logits), zeros_like(b, sampled)}, 1);
  return reduce_sum(b, sigmoid_cross_entropy_with_logits(b, stop_gradient(b, targets), logits),
                    {1});
}

}  // namespace troupe::ops
