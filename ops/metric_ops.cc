#include "ops/metric_ops.h"

#include <algorithm>
#include <limits>
#include <map>

#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/op_def_names.h"
#include "ops/state_ops.h"
#include "ops/strided_slice.h"
#include "runtime/op_registry.h"

namespace troupe::ops {

namespace {

Status expect_contingency(InferenceContext& c, int i) {
  const Shape& s = c.input_shape(i);
  if (c.input_dtype(i) != DType::kFloat64 || (s.rank_known() && s.rank() != 2) ||
      (s.rank_known() && s.dim(1) >= 0 && s.dim(1) != 3)) {
    return c.error("a contingency table must be float64 [pairs, 3], got ",
                   runtime::dtype_name(c.input_dtype(i)), s);
  }
  return runtime::ok_status();
}

}  // namespace

TROUPE_REGISTER_OP(ContingencyCounts)
    .input("table")
    .input("labels")
    .input("predictions")
    .output("counts")
    .shape_fn([](InferenceContext& c) {
      TROUPE_RETURN_IF_ERROR(expect_contingency(c, 0));
      for (int i : {1, 2}) {
        if (c.input_dtype(i) != DType::kFloat64) {
          return c.error("labels and predictions must be float64, got ",
                         runtime::dtype_name(c.input_dtype(i)));
        }
      }
      c.set_output(0, DType::kFloat64, Shape{-1, 3});
      return runtime::ok_status();
    })
    .no_gradient()
    .doc(
        "the table's rows (label, prediction, count), sorted, with each (labels[i], "
        "predictions[i]) pair counted once more");

TROUPE_REGISTER_OP(AdjustedRandIndex)
    .input("table")
    .output("index")
    .shape_fn([](InferenceContext& c) {
      TROUPE_RETURN_IF_ERROR(expect_contingency(c, 0));
      c.set_output(0, DType::kFloat64, Shape{});
      return runtime::ok_status();
    })
    .no_gradient()
    .doc("the adjusted Rand index of the partitions a contingency table counts");

namespace metrics {

namespace {

using runtime::DType;
constexpr DType kF64 = DType::kFloat64;

Output f64(GraphBuilder& b, Output x) { return b.dtype(x) == kF64 ? x : cast(b, x, kF64); }

// a / d where d > 0, else 0 (tf.math.divide_no_nan): a count of nothing is 0, as the host
// metrics say.
Output safe_div(GraphBuilder& b, Output a, Output d) {
  Output positive = greater(b, d, zeros_like(b, d));
  Output tiny = scalar(b, std::numeric_limits<double>::min(), kF64);
  return select(b, positive, div(b, a, maximum(b, d, tiny)), zeros_like(b, a));
}

// A count kept in a local variable of `shape` (zeros until the first update), its value and
// the op that adds `delta` to it.
struct Count {
  Output value;
  Output updated;
};
Count count(GraphBuilder& b, const std::string& name, const Shape& shape, Output delta) {
  Output var = local_variable(b, name, shape, kF64, zeros(b, shape, kF64));
  return {var, assign_add(b, var, delta)};
}

Output checked_weights(GraphBuilder& b, Output weights, const std::string& metric) {
  return assert_in_range(b, f64(b, weights), 0, std::numeric_limits<double>::infinity(),
                         metric + ": a weight is negative or NaN");
}

// What every elementwise metric reads: labels and predictions flattened to float64 [N], and a
// weight for each of their elements (1 without weights; one per example spread over the
// example's elements).
struct Flat {
  Output labels, predictions, weights;
};
Flat flatten(GraphBuilder& b, Output labels, Output predictions, Output weights,
             const std::string& metric) {
  Flat f;
  if (labels.valid()) f.labels = reshape(b, f64(b, labels), {-1});
  f.predictions = reshape(b, f64(b, predictions), {-1});
  if (!weights.valid()) {
    f.weights = ones_like(b, f.predictions);
    return f;
  }
  const Shape& s = b.shape(predictions);
  int64_t per = 1;
  for (int d = 1; s.rank_known() && d < s.rank(); ++d) {
    if (s.dim(d) < 0) {
      b.record_error(runtime::invalid_argument(metric, ": weights need predictions of a known ",
                                               "shape past the batch, not ", s));
      return f;
    }
    per *= s.dim(d);
  }
  Output w = checked_weights(b, weights, metric);
  Output spread =
      mul(b, reshape(b, ones_like(b, f.predictions), {-1, per}), reshape(b, w, {-1, 1}));
  f.weights = reshape(b, spread, {-1});
  return f;
}

// The weighted mean of per-element values: total and count, divided.
StreamingMetric mean_of(GraphBuilder& b, Output values, Output weights, bool root = false) {
  Count total = count(b, "total", Shape{}, reduce_sum(b, mul(b, values, weights)));
  Count n = count(b, "count", Shape{}, reduce_sum(b, weights));
  StreamingMetric m{safe_div(b, total.value, n.value), safe_div(b, total.updated, n.updated)};
  if (root) m = {sqrt(b, m.value), sqrt(b, m.update)};
  return m;
}

Output is_positive(GraphBuilder& b, Output x) {
  return cast(b, greater(b, x, scalar(b, 0.5, kF64)), kF64);
}

enum class Binary { kPrecision, kRecall, kF1 };
Output binary_value(GraphBuilder& b, Binary kind, Output tp, Output fp, Output fn) {
  Output precision = safe_div(b, tp, add(b, tp, fp));
  Output recall = safe_div(b, tp, add(b, tp, fn));
  if (kind == Binary::kPrecision) return precision;
  if (kind == Binary::kRecall) return recall;
  return safe_div(b, mul(b, mul(b, precision, recall), 2.0), add(b, precision, recall));
}

StreamingMetric binary(GraphBuilder& b, Binary kind, Output labels, Output predictions,
                       Output weights, const std::string& name) {
  auto scope = b.name_scope("metrics/" + name);
  Flat f = flatten(b, labels, predictions, weights, name);
  Output truth = is_positive(b, f.labels), guess = is_positive(b, f.predictions);
  Output wt = mul(b, truth, f.weights), miss = sub(b, ones_like(b, guess), guess);
  Count tp = count(b, "true_positives", Shape{}, reduce_sum(b, mul(b, wt, guess)));
  Count fp =
      count(b, "false_positives", Shape{}, reduce_sum(b, mul(b, sub(b, f.weights, wt), guess)));
  Count fn = count(b, "false_negatives", Shape{}, reduce_sum(b, mul(b, wt, miss)));
  return {binary_value(b, kind, tp.value, fp.value, fn.value),
          binary_value(b, kind, tp.updated, fp.updated, fn.updated)};
}

// The area under the ROC (or precision-recall) curve through the thresholds' points,
// trapezoid by trapezoid, as tf.metrics.auc.
Output auc_value(GraphBuilder& b, bool pr, Output tp, Output fp, Output tn, Output fn,
                 int64_t thresholds) {
  Output eps = scalar(b, 1e-7, kF64);
  Output recall = div(b, tp, add(b, add(b, tp, fn), eps));
  Output x, y;
  if (pr) {
    Output called = add(b, tp, fp);
    x = recall;
    // No positive predictions: precision is taken as 1, so the curve ends at (0, 1).
    y = select(b, greater(b, called, zeros_like(b, called)), safe_div(b, tp, called),
               ones_like(b, called));
  } else {
    x = div(b, fp, add(b, add(b, fp, tn), eps));
    y = recall;
  }
  auto head = [&](Output v) { return slice(b, v, {0}, {thresholds - 1}); };
  auto tail = [&](Output v) { return slice(b, v, {1}, {thresholds - 1}); };
  return reduce_sum(b, mul(b, mul(b, sub(b, head(x), tail(x)), add(b, head(y), tail(y))), 0.5));
}

// `eye`: the identity [C, C], whose product with the matrix keeps its diagonal.
Output class_value(GraphBuilder& b, Output cm, Output eye, ClassSummary summary, Average average) {
  Output actual = reduce_sum(b, cm, {1}), predicted = reduce_sum(b, cm, {0});
  Output tp = reduce_sum(b, mul(b, cm, eye), {1});
  Output hits = reduce_sum(b, tp), all = reduce_sum(b, cm);
  if (summary == ClassSummary::kAccuracy) return safe_div(b, hits, all);
  Output precision = safe_div(b, tp, predicted), recall = safe_div(b, tp, actual);
  if (summary == ClassSummary::kMeanPerClassAccuracy) return reduce_mean(b, recall);
  // Single-label classes: micro precision, recall and F1 are all the accuracy.
  if (summary != ClassSummary::kMeanIou && average == Average::kMicro) {
    return safe_div(b, hits, all);
  }
  Output of_class;
  switch (summary) {
    case ClassSummary::kPrecision:
      of_class = precision;
      break;
    case ClassSummary::kRecall:
      of_class = recall;
      break;
    case ClassSummary::kF1:
      of_class = safe_div(b, mul(b, mul(b, precision, recall), 2.0), add(b, precision, recall));
      break;
    default:  // kMeanIou
      of_class = safe_div(b, tp, sub(b, add(b, actual, predicted), tp));
      break;
  }
  Output occurs = add(b, actual, predicted);
  Output weight = cast(b, greater(b, occurs, zeros_like(b, occurs)), kF64);
  if (summary != ClassSummary::kMeanIou && average == Average::kWeighted) {
    weight = mul(b, weight, actual);
  }
  return safe_div(b, reduce_sum(b, mul(b, weight, of_class)), reduce_sum(b, weight));
}

}  // namespace

StreamingMetric mean(GraphBuilder& b, Output values, Output weights, const std::string& name) {
  auto scope = b.name_scope("metrics/" + name);
  Flat f = flatten(b, Output{}, values, weights, name);
  return mean_of(b, f.predictions, f.weights);
}

StreamingMetric sum(GraphBuilder& b, Output values, const std::string& name) {
  auto scope = b.name_scope("metrics/" + name);
  Count total = count(b, "total", Shape{}, reduce_sum(b, reshape(b, f64(b, values), {-1})));
  return {identity(b, total.value), total.updated};
}

StreamingMetric accuracy(GraphBuilder& b, Output labels, Output predictions, Output weights,
                         const std::string& name) {
  auto scope = b.name_scope("metrics/" + name);
  Flat f = flatten(b, labels, predictions, weights, name);
  return mean_of(b, cast(b, equal(b, f.labels, f.predictions), kF64), f.weights);
}

StreamingMetric mean_squared_error(GraphBuilder& b, Output labels, Output predictions,
                                   Output weights, const std::string& name) {
  auto scope = b.name_scope("metrics/" + name);
  Flat f = flatten(b, labels, predictions, weights, name);
  return mean_of(b, squared_difference(b, f.predictions, f.labels), f.weights);
}

StreamingMetric root_mean_squared_error(GraphBuilder& b, Output labels, Output predictions,
                                        Output weights, const std::string& name) {
  auto scope = b.name_scope("metrics/" + name);
  Flat f = flatten(b, labels, predictions, weights, name);
  return mean_of(b, squared_difference(b, f.predictions, f.labels), f.weights, /*root=*/true);
}

StreamingMetric mean_absolute_error(GraphBuilder& b, Output labels, Output predictions,
                                    Output weights, const std::string& name) {
  auto scope = b.name_scope("metrics/" + name);
  Flat f = flatten(b, labels, predictions, weights, name);
  return mean_of(b, abs(b, sub(b, f.predictions, f.labels)), f.weights);
}

StreamingMetric precision(GraphBuilder& b, Output labels, Output predictions, Output weights,
                          const std::string& name) {
  return binary(b, Binary::kPrecision, labels, predictions, weights, name);
}

StreamingMetric recall(GraphBuilder& b, Output labels, Output predictions, Output weights,
                       const std::string& name) {
  return binary(b, Binary::kRecall, labels, predictions, weights, name);
}

StreamingMetric f1(GraphBuilder& b, Output labels, Output predictions, Output weights,
                   const std::string& name) {
  return binary(b, Binary::kF1, labels, predictions, weights, name);
}

StreamingMetric auc(GraphBuilder& b, Output labels, Output probabilities, Output weights,
                    int thresholds, bool pr, const std::string& name) {
  auto scope = b.name_scope("metrics/" + name);
  if (thresholds < 2) {
    b.record_error(runtime::invalid_argument(name, ": ", thresholds, " thresholds (at least 2)"));
    return {};
  }
  const int64_t t = thresholds;
  Tensor at(kF64, Shape{1, t});
  const double eps = 1e-7;
  for (int64_t i = 0; i < t; ++i) {
    at.data<double>()[i] = i == 0 ? -eps : i == t - 1 ? 1 + eps : static_cast<double>(i) / (t - 1);
  }
  Flat f = flatten(b, labels, probabilities, weights, name);
  Output p = assert_in_range(b, f.predictions, 0, 1, name + ": a prediction is not a probability");
  Output guess = cast(b, greater(b, reshape(b, p, {-1, 1}), constant(b, at)), kF64);  // [N, T]
  Output truth = reshape(b, is_positive(b, f.labels), {-1, 1});
  Output w = reshape(b, f.weights, {-1, 1});
  Output wt = mul(b, truth, w), wf = sub(b, w, wt);
  Output miss = sub(b, ones_like(b, guess), guess);
  Count tp = count(b, "true_positives", Shape{t}, reduce_sum(b, mul(b, wt, guess), {0}));
  Count fp = count(b, "false_positives", Shape{t}, reduce_sum(b, mul(b, wf, guess), {0}));
  Count tn = count(b, "true_negatives", Shape{t}, reduce_sum(b, mul(b, wf, miss), {0}));
  Count fn = count(b, "false_negatives", Shape{t}, reduce_sum(b, mul(b, wt, miss), {0}));
  return {auc_value(b, pr, tp.value, fp.value, tn.value, fn.value, t),
          auc_value(b, pr, tp.updated, fp.updated, tn.updated, fn.updated, t)};
}

StreamingMetric log_loss(GraphBuilder& b, Output labels, Output probabilities, Output weights,
                         const std::string& name) {
  auto scope = b.name_scope("metrics/" + name);
  const Shape& s = b.shape(probabilities);
  const double eps = 1e-7;
  Output losses, w;
  if (s.rank_known() && s.rank() == 2 && s.dim(1) > 1) {
    const int64_t c = s.dim(1);
    Output y = assert_in_range(b, reshape(b, f64(b, labels), {-1}), 0, double(c - 1),
                               name + ": a label is not a class");
    Output picked = reduce_sum(
        b, mul(b, f64(b, probabilities), one_hot(b, cast(b, y, DType::kInt64), c, 1, 0, -1, kF64)),
        {1});
    losses = neg(b, log(b, clip_by_value(b, picked, eps, 1 - eps)));
    w = weights.valid() ? reshape(b, checked_weights(b, weights, name), {-1})
                        : ones_like(b, losses);
  } else {
    Flat f = flatten(b, labels, probabilities, weights, name);
    Output q = clip_by_value(b, f.predictions, eps, 1 - eps);
    Output one = ones_like(b, q);
    losses = neg(b, add(b, mul(b, f.labels, log(b, q)),
                        mul(b, sub(b, one, f.labels), log(b, sub(b, one, q)))));
    w = f.weights;
  }
  return mean_of(b, losses, w);
}

StreamingMetric per_class(GraphBuilder& b, Output labels, Output predictions, int64_t classes,
                          ClassSummary summary, Average average, Output weights,
                          const std::string& name) {
  auto scope = b.name_scope("metrics/" + name);
  if (classes < 1) {
    b.record_error(runtime::invalid_argument(name, ": ", classes, " classes"));
    return {};
  }
  Flat f = flatten(b, labels, predictions, weights, name);
  const double top = static_cast<double>(classes - 1);
  auto ids = [&](Output x, const char* what) {
    Output checked = assert_in_range(
        b, x, 0, top,
        name + ": a " + what + " is not one of " + std::to_string(classes) + " classes");
    return one_hot(b, cast(b, checked, DType::kInt64), classes, 1, 0, -1, kF64);  // [N, C]
  };
  Output truth = mul(b, ids(f.labels, "label"), reshape(b, f.weights, {-1, 1}));
  Output guess = ids(f.predictions, "prediction");
  Count cm = count(b, "confusion_matrix", Shape{classes, classes},
                   matmul(b, truth, guess, /*transpose_a=*/true));
  Tensor diagonal(kF64, Shape{classes, classes});
  for (int64_t k = 0; k < classes; ++k) diagonal.data<double>()[k * classes + k] = 1;
  Output eye = constant(b, diagonal);
  return {class_value(b, cm.value, eye, summary, average),
          class_value(b, cm.updated, eye, summary, average)};
}

StreamingMetric mean_iou(GraphBuilder& b, Output labels, Output predictions, int64_t classes,
                         Output weights, const std::string& name) {
  return per_class(b, labels, predictions, classes, ClassSummary::kMeanIou, Average::kMacro,
                   weights, name);
}

StreamingMetric mean_per_class_accuracy(GraphBuilder& b, Output labels, Output predictions,
                                        int64_t classes, Output weights, const std::string& name) {
  return per_class(b, labels, predictions, classes, ClassSummary::kMeanPerClassAccuracy,
                   Average::kMacro, weights, name);
}

StreamingMetric top_k(GraphBuilder& b, Output labels, Output scores, int64_t k, TopKSummary summary,
                      Output weights, const std::string& name) {
  auto scope = b.name_scope("metrics/" + name);
  const Shape& s = b.shape(scores);
  if (k < 1 || !s.rank_known() || s.rank() != 2 || s.dim(1) < 1) {
    b.record_error(runtime::invalid_argument(
        name, ": needs scores [n, classes] with the classes known and k >= 1, not ", s, " and k ",
        k));
    return {};
  }
  const int64_t c = s.dim(1);
  Output x = f64(b, scores);
  // The k-th best score of each row: the classes scoring at least it are the k best (with ties).
  Output kth = reduce_min(b, ops::top_k(b, x, std::min(k, c)).values, {1}, /*keep_dims=*/true);
  Output best = cast(b, greater_equal(b, x, kth), kF64);  // [n, c]
  const Shape& ls = b.shape(labels);
  const bool several = ls.rank_known() && ls.rank() == 2 && ls.dim(1) == c;
  Output truth;
  if (several) {
    if (summary == TopKSummary::kAccuracy) {
      b.record_error(
          runtime::invalid_argument(name, ": takes one class id an example, not ", "labels ", ls));
      return {};
    }
    truth = is_positive(b, f64(b, labels));
  } else {
    Output ids =
        assert_in_range(b, reshape(b, f64(b, labels), {-1}), 0, static_cast<double>(c - 1),
                        name + ": a label is not one of " + std::to_string(c) + " classes");
    truth = one_hot(b, cast(b, ids, DType::kInt64), c, 1, 0, -1, kF64);
  }
  Output w = weights.valid() ? reshape(b, checked_weights(b, weights, name), {-1})
                             : ones_like(b, reduce_sum(b, x, {1}));  // [n]
  Output hits = reduce_sum(b, mul(b, reduce_sum(b, mul(b, truth, best), {1}), w));
  Count found = count(b, "hits", Shape{}, hits);
  Output total;
  switch (summary) {
    case TopKSummary::kAccuracy:
      total = reduce_sum(b, w);
      break;
    case TopKSummary::kPrecision:
      total = mul(b, reduce_sum(b, w), static_cast<double>(std::min(k, c)));
      break;
    case TopKSummary::kRecall:
      total = reduce_sum(b, mul(b, reduce_sum(b, truth, {1}), w));
      break;
  }
  Count of = count(b, "total", Shape{}, total);
  return {safe_div(b, found.value, of.value), safe_div(b, found.updated, of.updated)};
}

double adjusted_rand_of(const double* table, int64_t pairs) {
  auto comb2 = [](double n) { return n * (n - 1) / 2; };
  // Hubert and Arabie's index from the cells and the totals of the rows (labels) and columns
  // (predictions), as scikit-learn's adjusted_rand_score.
  std::map<double, double> rows, cols;
  double index = 0, n = 0;
  for (int64_t i = 0; i < pairs; ++i) {
    const double count = table[3 * i + 2];
    rows[table[3 * i]] += count;
    cols[table[3 * i + 1]] += count;
    index += comb2(count);
    n += count;
  }
  double sum_rows = 0, sum_cols = 0;
  for (const auto& [group, count] : rows) sum_rows += comb2(count);
  for (const auto& [group, count] : cols) sum_cols += comb2(count);
  const double expected = sum_rows * sum_cols / std::max(1.0, comb2(n));
  const double most = (sum_rows + sum_cols) / 2;
  // One group on both sides (or none): scikit-learn's convention, a perfect match.
  if (most == expected) return 1.0;
  return (index - expected) / (most - expected);
}

StreamingMetric adjusted_rand_index(GraphBuilder& b, Output labels, Output predictions,
                                    const std::string& name) {
  auto scope = b.name_scope("metrics/" + name);
  Output table = local_variable(b, "contingency", Shape{-1, 3}, kF64, zeros(b, Shape{0, 3}, kF64));
  Output merged = b.add("ContingencyCounts", {table, reshape(b, f64(b, labels), {-1}),
                                              reshape(b, f64(b, predictions), {-1})});
  Output updated = assign(b, table, merged);
  return {b.add("AdjustedRandIndex", {table}), b.add("AdjustedRandIndex", {updated})};
}

}  // namespace metrics
}  // namespace troupe::ops
