#include "estimators/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>

namespace troupe::estimators {

using runtime::Result;
using runtime::Status;
using runtime::Tensor;

std::vector<double> as_doubles(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.num_elements()));
  runtime::visit_numeric(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* p = t.data<T>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(p[i]);
  });
  return out;
}

namespace {

Status same_count(const char* metric, const Tensor& labels, const Tensor& predictions) {
  if (!runtime::is_numeric(labels.dtype()) && labels.dtype() != runtime::DType::kBool) {
    return runtime::invalid_argument(metric, ": labels are ", dtype_name(labels.dtype()));
  }
  if (labels.num_elements() != predictions.num_elements()) {
    return runtime::invalid_argument(metric, ": ", labels.shape().to_string(), " labels for ",
                                     predictions.shape().to_string(), " predictions");
  }
  return runtime::ok_status();
}

// A running mean of per-example values.
class MeanOf : public Metric {
 public:
  enum Kind { kAccuracy, kMean, kSquaredError, kAbsoluteError };
  MeanOf(Kind kind, bool root) : kind_(kind), root_(root) {}
  Status accumulate(const Tensor& labels, const Tensor& predictions,
                    const std::vector<double>& w) override {
    if (kind_ != kMean) TROUPE_RETURN_IF_ERROR(same_count("metric", labels, predictions));
    const std::vector<double> p = as_doubles(predictions);
    const std::vector<double> y = kind_ == kMean ? p : as_doubles(labels);
    const size_t per = w.empty() ? 1 : p.size() / w.size();
    for (size_t i = 0; i < p.size(); ++i) {
      double v = 0;
      switch (kind_) {
        case kAccuracy:
          v = p[i] == y[i];
          break;
        case kMean:
          v = p[i];
          break;
        case kSquaredError:
          v = (p[i] - y[i]) * (p[i] - y[i]);
          break;
        case kAbsoluteError:
          v = std::fabs(p[i] - y[i]);
          break;
      }
      sum_ += weight(w, i, per) * v;
      n_ += weight(w, i, per);
    }
    return runtime::ok_status();
  }
  bool takes_weights() const override { return true; }
  double result() const override {
    const double m = n_ > 0 ? sum_ / n_ : 0;
    return root_ ? std::sqrt(m) : m;
  }
  void reset() override { sum_ = n_ = 0; }

 private:
  Kind kind_;
  bool root_;
  double sum_ = 0, n_ = 0;
};

// Binary counts at the 0.5 threshold.
class BinaryCounts : public Metric {
 public:
  enum Kind { kPrecision, kRecall, kF1 };
  explicit BinaryCounts(Kind kind) : kind_(kind) {}
  Status accumulate(const Tensor& labels, const Tensor& predictions,
                    const std::vector<double>& w) override {
    TROUPE_RETURN_IF_ERROR(same_count("precision/recall", labels, predictions));
    const std::vector<double> y = as_doubles(labels), p = as_doubles(predictions);
    const size_t per = w.empty() ? 1 : p.size() / w.size();
    for (size_t i = 0; i < p.size(); ++i) {
      const bool truth = y[i] > 0.5, guess = p[i] > 0.5;
      const double wi = weight(w, i, per);
      tp_ += (truth && guess) * wi;
      fp_ += (!truth && guess) * wi;
      fn_ += (truth && !guess) * wi;
    }
    return runtime::ok_status();
  }
  bool takes_weights() const override { return true; }
  double result() const override {
    const double precision = tp_ + fp_ > 0 ? tp_ / (tp_ + fp_) : 0;
    const double recall = tp_ + fn_ > 0 ? tp_ / (tp_ + fn_) : 0;
    if (kind_ == kPrecision) return precision;
    if (kind_ == kRecall) return recall;
    return precision + recall > 0 ? 2 * precision * recall / (precision + recall) : 0;
  }
  void reset() override { tp_ = fp_ = fn_ = 0; }

 private:
  Kind kind_;
  double tp_ = 0, fp_ = 0, fn_ = 0;
};

// tf.metrics.auc: counts at num_thresholds thresholds spread over [0, 1] (with an epsilon at
// each end), then a trapezoidal sum under the ROC or precision-recall curve.
class Auc : public Metric {
 public:
  Auc(bool pr, int thresholds = 200)
      : pr_(pr), tp_(thresholds), fp_(thresholds), tn_(thresholds), fn_(thresholds) {
    const double eps = 1e-7;
    for (int i = 0; i < thresholds; ++i) {
      thresholds_.push_back(i == 0                ? -eps
                            : i == thresholds - 1 ? 1 + eps
                                                  : static_cast<double>(i) / (thresholds - 1));
    }
  }
  Status accumulate(const Tensor& labels, const Tensor& predictions,
                    const std::vector<double>& w) override {
    TROUPE_RETURN_IF_ERROR(same_count("auc", labels, predictions));
    const std::vector<double> y = as_doubles(labels), p = as_doubles(predictions);
    const size_t per = w.empty() ? 1 : p.size() / w.size();
    for (size_t i = 0; i < p.size(); ++i) {
      if (p[i] < 0 || p[i] > 1 || std::isnan(p[i])) {
        return runtime::invalid_argument("auc: prediction ", p[i], " is not a probability");
      }
      const bool truth = y[i] > 0.5;
      for (size_t t = 0; t < thresholds_.size(); ++t) {
        const bool guess = p[i] > thresholds_[t];
        (truth ? (guess ? tp_ : fn_) : (guess ? fp_ : tn_))[t] += weight(w, i, per);
      }
    }
    return runtime::ok_status();
  }
  bool takes_weights() const override { return true; }
  double result() const override {
    double area = 0;
    const double eps = 1e-7;
    for (size_t t = 0; t + 1 < thresholds_.size(); ++t) {
      auto point = [&](size_t k, double* x, double* yv) {
        const double recall = tp_[k] / (tp_[k] + fn_[k] + eps);
        if (pr_) {
          *x = recall;
          // No positive predictions: precision is taken as 1, so the curve ends at (0, 1).
          *yv = tp_[k] + fp_[k] > 0 ? tp_[k] / (tp_[k] + fp_[k]) : 1.0;
        } else {
          *x = fp_[k] / (fp_[k] + tn_[k] + eps);
          *yv = recall;
        }
      };
      double x0, y0, x1, y1;
      point(t, &x0, &y0);
      point(t + 1, &x1, &y1);
      area += (x0 - x1) * (y0 + y1) / 2;
    }
    return area;
  }
  void reset() override {
    for (auto* v : {&tp_, &fp_, &tn_, &fn_}) std::fill(v->begin(), v->end(), 0);
  }

 private:
  bool pr_;
  std::vector<double> thresholds_, tp_, fp_, tn_, fn_;
};

class LogLoss : public Metric {
 public:
  Status accumulate(const Tensor& labels, const Tensor& predictions,
                    const std::vector<double>& w) override {
    const std::vector<double> y = as_doubles(labels), p = as_doubles(predictions);
    const double eps = 1e-7;
    if (predictions.rank() == 2 && predictions.dim(0) == labels.num_elements()) {
      const int64_t c = predictions.dim(1);
      for (size_t i = 0; i < y.size(); ++i) {
        const auto k = static_cast<int64_t>(y[i]);
        if (k < 0 || k >= c)
          return runtime::invalid_argument("log_loss: label ", k, " of ", c, " classes");
        sum_ -= weight(w, i, 1) * std::log(std::clamp(p[i * c + k], eps, 1 - eps));
        n_ += weight(w, i, 1);
      }
      return runtime::ok_status();
    }
    TROUPE_RETURN_IF_ERROR(same_count("log_loss", labels, predictions));
    const size_t per = w.empty() ? 1 : p.size() / w.size();
    for (size_t i = 0; i < p.size(); ++i) {
      const double q = std::clamp(p[i], eps, 1 - eps);
      sum_ -= weight(w, i, per) * (y[i] * std::log(q) + (1 - y[i]) * std::log(1 - q));
      n_ += weight(w, i, per);
    }
    return runtime::ok_status();
  }
  bool takes_weights() const override { return true; }
  double result() const override { return n_ > 0 ? sum_ / n_ : 0; }
  void reset() override { sum_ = n_ = 0; }

 private:
  double sum_ = 0, n_ = 0;
};

// Where each example's labels rank among its scores ([n, c]): top_k_accuracy (the label in the
// k best), and tf.metrics' precision_at_k and recall_at_k, micro-averaged: of the k best
// classes of every example, the share that are its labels; of its labels, the share among its
// k best. Labels are class ids [n], or 0/1 [n, c] (several labels an example).
class TopK : public Metric {
 public:
  using Summary = ops::metrics::TopKSummary;  // as the graph ops name them
  TopK(Summary summary, int k) : summary_(summary), k_(k) {}
  bool takes_weights() const override { return true; }
  Status accumulate(const Tensor& labels, const Tensor& predictions,
                    const std::vector<double>& weights) override {
    const bool multi = labels.rank() == 2 && labels.shape() == predictions.shape();
    if (predictions.rank() != 2 || (!multi && predictions.dim(0) != labels.num_elements()) ||
        (multi && summary_ == Summary::kAccuracy)) {
      return runtime::invalid_argument(name(), ": scores ", predictions.shape().to_string(),
                                       " for labels ", labels.shape().to_string());
    }
    const std::vector<double> y = as_doubles(labels), s = as_doubles(predictions);
    const int64_t n = predictions.dim(0), c = predictions.dim(1);
    for (int64_t i = 0; i < n; ++i) {
      const double* row = s.data() + i * c;
      const double w = weight(weights, static_cast<size_t>(i), 1);
      // Class j is among the k best when fewer than k score above it (ties: all of them).
      auto in_top = [&](int64_t j) {
        int64_t above = 0;
        for (int64_t m = 0; m < c; ++m) above += row[m] > row[j];
        return above < k_;
      };
      if (!multi) {
        const auto label = static_cast<int64_t>(y[i]);
        if (label < 0 || label >= c) {
          return runtime::invalid_argument(name(), ": label ", label, " of ", c, " classes");
        }
        hits_ += w * in_top(label);
        relevant_ += w;
      } else {
        for (int64_t j = 0; j < c; ++j) {
          if (y[i * c + j] > 0.5) {
            hits_ += w * in_top(j);
            relevant_ += w;
          }
        }
      }
      retrieved_ += w * static_cast<double>(std::min<int64_t>(k_, c));
      n_ += w;
    }
    return runtime::ok_status();
  }
  double result() const override {
    switch (summary_) {
      case Summary::kAccuracy:
        return n_ > 0 ? hits_ / n_ : 0;
      case Summary::kPrecision:
        return retrieved_ > 0 ? hits_ / retrieved_ : 0;
      case Summary::kRecall:
        break;
    }
    return relevant_ > 0 ? hits_ / relevant_ : 0;
  }
  void reset() override { hits_ = n_ = relevant_ = retrieved_ = 0; }

 private:
  const char* name() const {
    return summary_ == Summary::kAccuracy    ? "top_k_accuracy"
           : summary_ == Summary::kPrecision ? "precision_at_k"
                                             : "recall_at_k";
  }
  Summary summary_;
  int k_;
  double hits_ = 0, n_ = 0, relevant_ = 0, retrieved_ = 0;
};

// Counts of (label, predicted class) pairs, and what they give: accuracy (confusion_matrix:C),
// precision, recall and F1 averaged over classes as scikit-learn's (micro, macro over the
// classes that occur in labels or predictions, weighted by support), and tf.metrics'
// mean_per_class_accuracy (every class, absent ones as 0) and mean_iou (classes that occur).
class Confusion : public Metric {
 public:
  using Summary = ops::metrics::ClassSummary;  // as the graph ops name them
  using Average = ops::metrics::Average;
  Confusion(int classes, Summary summary = Summary::kAccuracy, Average average = Average::kMacro)
      : counts_(classes, std::vector<double>(classes, 0)), summary_(summary), average_(average) {}
  bool takes_weights() const override { return summary_ != Summary::kAccuracy; }
  Status accumulate(const Tensor& labels, const Tensor& predictions,
                    const std::vector<double>& w) override {
    TROUPE_RETURN_IF_ERROR(same_count("confusion_matrix", labels, predictions));
    const std::vector<double> y = as_doubles(labels), p = as_doubles(predictions);
    const auto c = static_cast<int64_t>(counts_.size());
    for (size_t i = 0; i < y.size(); ++i) {
      const auto a = static_cast<int64_t>(y[i]), b = static_cast<int64_t>(p[i]);
      if (a < 0 || a >= c || b < 0 || b >= c) {
        return runtime::invalid_argument("confusion_matrix: class ", a < 0 || a >= c ? a : b,
                                         " outside [0, ", c, ")");
      }
    }
    for (size_t i = 0; i < y.size(); ++i) {
      counts_[static_cast<size_t>(y[i])][static_cast<size_t>(p[i])] += weight(w, i, 1);
    }
    return runtime::ok_status();
  }
  double result() const override;
  void reset() override {
    for (auto& row : counts_) std::fill(row.begin(), row.end(), 0);
  }
  std::vector<std::vector<double>> counts_;

 private:
  Summary summary_;
  Average average_;
};

double ratio(double a, double b) { return b > 0 ? a / b : 0; }

double Confusion::result() const {
  const size_t c = counts_.size();
  std::vector<double> tp(c, 0), predicted(c, 0), actual(c, 0);
  double all = 0;
  for (size_t i = 0; i < c; ++i) {
    for (size_t j = 0; j < c; ++j) {
      actual[i] += counts_[i][j];
      predicted[j] += counts_[i][j];
      all += counts_[i][j];
    }
    tp[i] = counts_[i][i];
  }
  const double hits = std::accumulate(tp.begin(), tp.end(), 0.0);
  if (summary_ == Summary::kAccuracy) return ratio(hits, all);
  auto of_class = [&](size_t k) {
    const double p = ratio(tp[k], predicted[k]), r = ratio(tp[k], actual[k]);
    switch (summary_) {
      case Summary::kPrecision:
        return p;
      case Summary::kRecall:
      case Summary::kMeanPerClassAccuracy:
        return r;
      case Summary::kF1:
        return ratio(2 * p * r, p + r);
      default:  // kMeanIou
        return ratio(tp[k], actual[k] + predicted[k] - tp[k]);
    }
  };
  if (summary_ == Summary::kMeanPerClassAccuracy) {
    double sum = 0;
    for (size_t k = 0; k < c; ++k) sum += of_class(k);
    return c > 0 ? sum / static_cast<double>(c) : 0;
  }
  // Single-label classes: micro precision, recall and F1 are all the accuracy.
  if (summary_ != Summary::kMeanIou && average_ == Average::kMicro) return ratio(hits, all);
  double sum = 0, weights = 0;
  for (size_t k = 0; k < c; ++k) {
    if (actual[k] == 0 && predicted[k] == 0) continue;
    const double w =
        summary_ != Summary::kMeanIou && average_ == Average::kWeighted ? actual[k] : 1;
    sum += w * of_class(k);
    weights += w;
  }
  return ratio(sum, weights);
}

// Pairs (true group, predicted group) counted; the index from the contingency table.
class AdjustedRand : public Metric {
 public:
  Status accumulate(const Tensor& labels, const Tensor& predictions,
                    const std::vector<double>&) override {
    TROUPE_RETURN_IF_ERROR(same_count("adjusted_rand_index", labels, predictions));
    const std::vector<double> a = as_doubles(labels), b = as_doubles(predictions);
    for (size_t i = 0; i < a.size(); ++i) ++cells_[{a[i], b[i]}];
    return runtime::ok_status();
  }
  double result() const override {
    std::vector<double> table;
    table.reserve(3 * cells_.size());
    for (const auto& [pair, count] : cells_)
      table.insert(table.end(), {pair.first, pair.second, count});
    return ops::metrics::adjusted_rand_of(table.data(), static_cast<int64_t>(cells_.size()));
  }
  void reset() override { cells_.clear(); }

 private:
  std::map<std::pair<double, double>, double> cells_;
};

class Sum : public Metric {
 public:
  Status accumulate(const Tensor& labels, const Tensor& predictions,
                    const std::vector<double>&) override {
    for (double v : as_doubles(predictions)) sum_ += v;
    return runtime::ok_status();
  }
  double result() const override { return sum_; }
  void reset() override { sum_ = 0; }

 private:
  double sum_ = 0;
};

}  // namespace

Result<double> adjusted_rand_score(const Tensor& labels_true, const Tensor& labels_pred) {
  if (labels_true.num_elements() != labels_pred.num_elements()) {
    return runtime::invalid_argument("adjusted_rand_score: ", labels_true.num_elements(),
                                     " true labels for ", labels_pred.num_elements(), " predicted");
  }
  AdjustedRand m;
  TROUPE_RETURN_IF_ERROR(m.update(labels_true, labels_pred));
  return m.result();
}

void EvalTally::add_metric(std::string name, std::unique_ptr<Metric> metric, size_t at,
                           bool weighted) {
  metrics_.push_back({std::move(name), std::move(metric), at, weighted});
}

Status EvalTally::add(const std::vector<Tensor>& values) {
  if (values.size() < 2) return runtime::internal_error("an evaluation step without its loss");
  for (const Entry& e : metrics_) {
    if (e.at + 1 + (e.weighted ? 1 : 0) >= values.size()) {
      return runtime::internal_error("metric '", e.name, "' has no values at ", e.at);
    }
    Status s =
        e.metric->update(values[e.at], values[e.at + 1], e.weighted ? values[e.at + 2] : Tensor());
    if (!s.ok()) return s.with_context("metric '" + e.name + "'");
  }
  const double n = values[1].rank() > 0 ? static_cast<double>(values[1].dim(0)) : 1.0;
  loss_sum_ += values[0].scalar_as_double() * n;
  examples_ += n;
  return runtime::ok_status();
}

Metrics EvalTally::result() const {
  Metrics out;
  out["loss"] = examples_ > 0 ? loss_sum_ / examples_ : 0;
  out["average_loss"] = out["loss"];
  for (const Entry& e : metrics_) out[e.name] = e.metric->result();
  return out;
}

Status Metric::update(const Tensor& labels, const Tensor& predictions, const Tensor& weights) {
  if (!weights.valid()) return accumulate(labels, predictions, {});
  if (!takes_weights()) return runtime::invalid_argument("this metric takes no weights");
  const std::vector<double> w = as_doubles(weights);
  const int64_t examples = labels.rank() > 0 ? labels.dim(0) : 1;
  if (static_cast<int64_t>(w.size()) != examples || examples == 0 ||
      predictions.num_elements() % examples != 0) {
    return runtime::invalid_argument("weights ", weights.shape().to_string(), " for ", examples,
                                     " examples of predictions ", predictions.shape().to_string());
  }
  for (double v : w) {
    if (!(v >= 0)) return runtime::invalid_argument("weight ", v, " is negative or NaN");
  }
  return accumulate(labels, predictions, w);
}

std::string class_metric_kind(const std::string& name, int64_t classes) {
  const std::string c = std::to_string(classes);
  if (name == "mean_iou" || name == "mean_per_class_accuracy") return name + ":" + c;
  // precision_at_5, recall_at_3, top_5_accuracy: over the scores.
  for (const char* at : {"precision_at_", "recall_at_"}) {
    const size_t len = std::strlen(at);
    if (name.compare(0, len, at) == 0 && name.size() > len &&
        name.find_first_not_of("0123456789", len) == std::string::npos) {
      return name.substr(0, len - 1) + "_k:" + name.substr(len);
    }
  }
  const std::string top = "top_", accuracy = "_accuracy";
  if (name.size() > top.size() + accuracy.size() && name.compare(0, top.size(), top) == 0 &&
      name.compare(name.size() - accuracy.size(), std::string::npos, accuracy) == 0) {
    const std::string k = name.substr(top.size(), name.size() - top.size() - accuracy.size());
    if (k.find_first_not_of("0123456789") == std::string::npos) return "top_k_accuracy:" + k;
  }
  for (const char* average : {"_micro", "_macro", "_weighted"}) {
    const size_t at = name.size() - std::min(name.size(), std::strlen(average));
    if (name.compare(at, std::string::npos, average) == 0) {
      return name.substr(0, at) + ":" + c + ":" + (average + 1);
    }
  }
  return "";
}

namespace {

// A kind's parts: "precision:10:macro" is {precision, 10, kPrecision, kMacro}; "accuracy"
// {accuracy, 0}.
struct KindParts {
  std::string name;
  int arg = 0;
  bool of_classes = false;  // a confusion matrix's summary over `arg` classes, as follows
  ops::metrics::ClassSummary summary = ops::metrics::ClassSummary::kAccuracy;
  ops::metrics::Average average = ops::metrics::Average::kMacro;
  // A top-k kind, which ranks scores: its summary; `arg` is its k (top_k_accuracy's 5 unless
  // given; precision_at_k and recall_at_k need theirs).
  std::optional<ops::metrics::TopKSummary> ranks;
};

Result<KindParts> parse_kind(const std::string& kind) {
  KindParts k;
  const size_t colon = kind.find(':');
  k.name = kind.substr(0, colon);
  using T = ops::metrics::TopKSummary;
  static const std::map<std::string, T> top_k = {{"top_k_accuracy", T::kAccuracy},
                                                 {"precision_at_k", T::kPrecision},
                                                 {"recall_at_k", T::kRecall}};
  if (auto it = top_k.find(k.name); it != top_k.end()) k.ranks = it->second;
  if (colon == std::string::npos) {
    if (k.ranks == T::kAccuracy) k.arg = 5;
    return k;
  }
  const size_t second = kind.find(':', colon + 1);
  std::string average = second == std::string::npos ? "" : kind.substr(second + 1);
  if (average.empty()) average = "macro";
  try {
    k.arg = std::stoi(kind.substr(colon + 1, second - colon - 1));
  } catch (...) {
    k.arg = 0;
  }
  if (k.arg < 1) {
    return runtime::invalid_argument("metric '", kind, "': the number after ':' must be >= 1");
  }
  k.of_classes = k.name != "confusion_matrix" && !k.ranks && k.name != "auc" && k.name != "auc_pr";
  if (!k.of_classes) return k;
  using S = ops::metrics::ClassSummary;
  using A = ops::metrics::Average;
  static const std::map<std::string, S> summaries = {
      {"precision", S::kPrecision},
      {"recall", S::kRecall},
      {"f1", S::kF1},
      {"mean_per_class_accuracy", S::kMeanPerClassAccuracy},
      {"mean_iou", S::kMeanIou}};
  static const std::map<std::string, A> averages = {
      {"micro", A::kMicro}, {"macro", A::kMacro}, {"weighted", A::kWeighted}};
  const auto summary = summaries.find(k.name);
  const auto how = averages.find(average);
  if (summary == summaries.end() || how == averages.end()) {
    return runtime::invalid_argument("metric '", kind, "': ",
                                     summary == summaries.end()
                                         ? "'" + k.name + "' has no classes"
                                         : "'" + average + "' is not micro, macro or weighted");
  }
  k.summary = summary->second;
  k.average = how->second;
  return k;
}

}  // namespace

Result<std::unique_ptr<Metric>> make_metric(const std::string& kind) {
  TROUPE_ASSIGN_OR_RETURN(KindParts parts, parse_kind(kind));
  const std::string& name = parts.name;
  const int arg = parts.arg;
  const bool colon = arg > 0;
  if (parts.of_classes) {
    return std::unique_ptr<Metric>(new Confusion(arg, parts.summary, parts.average));
  }
  if (name == "accuracy") return std::unique_ptr<Metric>(new MeanOf(MeanOf::kAccuracy, false));
  if (name == "mean") return std::unique_ptr<Metric>(new MeanOf(MeanOf::kMean, false));
  if (name == "mse") return std::unique_ptr<Metric>(new MeanOf(MeanOf::kSquaredError, false));
  if (name == "rmse") return std::unique_ptr<Metric>(new MeanOf(MeanOf::kSquaredError, true));
  if (name == "mae") return std::unique_ptr<Metric>(new MeanOf(MeanOf::kAbsoluteError, false));
  if (name == "precision")
    return std::unique_ptr<Metric>(new BinaryCounts(BinaryCounts::kPrecision));
  if (name == "recall") return std::unique_ptr<Metric>(new BinaryCounts(BinaryCounts::kRecall));
  if (name == "f1") return std::unique_ptr<Metric>(new BinaryCounts(BinaryCounts::kF1));
  if (name == "auc" || name == "auc_pr") {
    if (colon && arg < 2) {
      return runtime::invalid_argument("metric '", kind, "': an AUC needs 2 thresholds or more");
    }
    return std::unique_ptr<Metric>(new Auc(name == "auc_pr", arg > 0 ? arg : 200));
  }
  if (name == "log_loss") return std::unique_ptr<Metric>(new LogLoss());
  if (name == "sum") return std::unique_ptr<Metric>(new Sum());
  if (name == "adjusted_rand_index") return std::unique_ptr<Metric>(new AdjustedRand());
  if (parts.ranks) {
    if (arg < 1) return runtime::invalid_argument("metric '", kind, "' needs its k: ", name, ":5");
    return std::unique_ptr<Metric>(new TopK(*parts.ranks, arg));
  }
  if (name == "confusion_matrix") {
    if (arg < 1)
      return runtime::invalid_argument("confusion_matrix needs its classes: confusion_matrix:10");
    return std::unique_ptr<Metric>(new Confusion(arg));
  }
  return runtime::invalid_argument("unknown metric '", kind, "'");
}

bool ranks_scores(const std::string& kind) {
  auto parts = parse_kind(kind);
  return parts.ok() && parts->ranks.has_value();
}

Result<std::optional<ops::StreamingMetric>> graph_metric(
    runtime::GraphBuilder& b, const std::string& kind, runtime::Output labels,
    runtime::Output predictions, runtime::Output weights, const std::string& name) {
  TROUPE_RETURN_IF_ERROR(make_metric(kind).status());
  TROUPE_ASSIGN_OR_RETURN(KindParts k, parse_kind(kind));
  namespace m = ops::metrics;
  using S = m::ClassSummary;
  std::optional<ops::StreamingMetric> out;
  if (k.of_classes) {
    out = m::per_class(b, labels, predictions, k.arg, k.summary, k.average, weights, name);
  } else if (k.name == "accuracy") {
    out = m::accuracy(b, labels, predictions, weights, name);
  } else if (k.name == "mean") {
    out = m::mean(b, predictions, weights, name);
  } else if (k.name == "mse") {
    out = m::mean_squared_error(b, labels, predictions, weights, name);
  } else if (k.name == "rmse") {
    out = m::root_mean_squared_error(b, labels, predictions, weights, name);
  } else if (k.name == "mae") {
    out = m::mean_absolute_error(b, labels, predictions, weights, name);
  } else if (k.name == "precision") {
    out = m::precision(b, labels, predictions, weights, name);
  } else if (k.name == "recall") {
    out = m::recall(b, labels, predictions, weights, name);
  } else if (k.name == "f1") {
    out = m::f1(b, labels, predictions, weights, name);
  } else if (k.name == "auc" || k.name == "auc_pr") {
    out =
        m::auc(b, labels, predictions, weights, k.arg > 0 ? k.arg : 200, k.name == "auc_pr", name);
  } else if (k.name == "log_loss") {
    out = m::log_loss(b, labels, predictions, weights, name);
  } else if (k.name == "sum" && !weights.valid()) {
    out = m::sum(b, predictions, name);
  } else if (k.name == "confusion_matrix" && !weights.valid()) {
    out = m::per_class(b, labels, predictions, k.arg, S::kAccuracy, m::Average::kMicro, {}, name);
  } else if (k.ranks) {
    out = m::top_k(b, labels, predictions, k.arg, *k.ranks, weights, name);
  } else if (k.name == "adjusted_rand_index" && !weights.valid()) {
    out = m::adjusted_rand_index(b, labels, predictions, name);
  }
  TROUPE_RETURN_IF_ERROR(b.status().with_context("metric '" + name + "'"));
  return out;
}

std::vector<std::vector<int64_t>> confusion_counts(const Metric& m) {
  const auto* c = dynamic_cast<const Confusion*>(&m);
  std::vector<std::vector<int64_t>> counts;
  if (c == nullptr) return counts;
  for (const auto& row : c->counts_) counts.emplace_back(row.begin(), row.end());
  return counts;
}

}  // namespace troupe::estimators
