#include "estimators/selection/model_selection.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>

#include "estimators/metrics.h"
#include "estimators/selection/trials.h"

namespace troupe::estimators {

using runtime::Result;
using runtime::Status;
using runtime::Tensor;

namespace {

Status check_rows(const Tensor& x, const Tensor& y) {
  if (x.rank() < 1 || y.rank() < 1 || x.dim(0) != y.dim(0)) {
    return runtime::invalid_argument(x.rank() ? x.dim(0) : 0, " examples but ",
                                     y.rank() ? y.dim(0) : 0, " labels");
  }
  return runtime::ok_status();
}

Status check_splits(int n_splits, int64_t n) {
  if (n_splits < 2) return runtime::invalid_argument("n_splits ", n_splits, " is below 2");
  if (n < n_splits) {
    return runtime::invalid_argument(n, " examples cannot make ", n_splits, " folds");
  }
  return runtime::ok_status();
}

// Rows by class value, each class's rows in order (or shuffled with rng).
std::map<double, std::vector<int64_t>> rows_by_class(const Tensor& y) {
  std::map<double, std::vector<int64_t>> classes;
  const std::vector<double> v = as_doubles(y);
  for (size_t i = 0; i < v.size(); ++i) classes[v[i]].push_back(static_cast<int64_t>(i));
  return classes;
}

std::string format_score(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

std::string params_text(const ParamMap& p) {
  std::string text;
  for (const auto& [k, v] : p) text += (text.empty() ? "" : " ") + k + "=" + to_text(v);
  return text;
}

struct FoldResult {
  Result<double> score = runtime::internal_error("not run");
  double fit_seconds = 0;
};

// Fits a clone with `params` on each fold's train rows and scores it on its test rows: one
// trial per (candidate, fold), in parallel.
Result<std::vector<std::vector<FoldResult>>> run_folds(const Model& model,
                                                       const std::vector<ParamMap>& candidates,
                                                       const std::vector<Split>& splits,
                                                       const Tensor& x, const Tensor& y, int n_jobs,
                                                       const std::string& scoring) {
  // Every candidate's params are tried on a clone first, so that a bad one fails before any
  // trial runs; each trial makes its own clone (an Estimator with its actor runtime) and ends it.
  for (const ParamMap& c : candidates) TROUPE_RETURN_IF_ERROR(model.clone()->set_params(c));
  std::vector<std::vector<FoldResult>> results(candidates.size(),
                                               std::vector<FoldResult>(splits.size()));
  const size_t folds = splits.size();
  TROUPE_RETURN_IF_ERROR(
      run_trials(candidates.size() * folds, parallel_trials(n_jobs), [&](size_t t) {
        const size_t c = t / folds, f = t % folds;
        FoldResult& r = results[c][f];
        std::unique_ptr<Model> m = model.clone();
        if (Status s = m->set_params(candidates[c]); !s.ok()) {
          r.score = s;
          return;
        }
        const auto start = std::chrono::steady_clock::now();
        const Status fitted = m->fit(take_rows(x, splits[f].train), take_rows(y, splits[f].train));
        r.fit_seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (!fitted.ok()) {
          r.score = fitted;
          return;
        }
        r.score = score_by(*m, take_rows(x, splits[f].test), take_rows(y, splits[f].test), scoring);
      }));
  for (size_t c = 0; c < candidates.size(); ++c) {
    for (size_t f = 0; f < folds; ++f) {
      if (!results[c][f].score.ok()) {
        const Status& s = results[c][f].score.status();
        return Status(s.code(),
                      "fold " + std::to_string(f) +
                          (candidates[c].empty() ? "" : " of " + params_text(candidates[c])) +
                          ": " + s.message());
      }
    }
  }
  return results;
}

}  // namespace

Tensor take_rows(const Tensor& t, const std::vector<int64_t>& rows) {
  std::vector<int64_t> dims = t.shape().dims();
  const int64_t per_row = t.dim(0) > 0 ? t.num_elements() / t.dim(0) : 0;
  dims[0] = static_cast<int64_t>(rows.size());
  Tensor out(t.dtype(), runtime::Shape(dims));
  if (t.dtype() == runtime::DType::kString) {
    for (size_t i = 0; i < rows.size(); ++i) {
      const std::string* src = t.data<std::string>() + rows[i] * per_row;
      std::copy(src, src + per_row, out.data<std::string>() + i * per_row);
    }
    return out;
  }
  const size_t row_bytes = static_cast<size_t>(per_row) * runtime::dtype_size(t.dtype());
  for (size_t i = 0; i < rows.size(); ++i) {
    std::memcpy(static_cast<char*>(out.raw_data()) + i * row_bytes,
                static_cast<const char*>(t.raw_data()) + rows[i] * row_bytes, row_bytes);
  }
  return out;
}

Result<TrainTestSplit> train_test_split(const Tensor& x, const Tensor& y, TrainTestSplitOptions o) {
  TROUPE_RETURN_IF_ERROR(check_rows(x, y));
  const int64_t n = x.dim(0);
  if (!(o.test_size > 0) || (o.test_size >= 1 && o.test_size != std::floor(o.test_size))) {
    return runtime::invalid_argument("test_size ", o.test_size,
                                     " is neither a share in (0, 1) nor a count of rows");
  }
  const int64_t n_test = o.test_size < 1 ? static_cast<int64_t>(std::ceil(o.test_size * n))
                                         : static_cast<int64_t>(o.test_size);
  if (n_test < 1 || n_test >= n) {
    return runtime::invalid_argument("test_size ", o.test_size, " leaves no rows for training or",
                                     " testing among ", n);
  }
  std::mt19937_64 rng(o.seed);
  std::vector<int64_t> train, test;
  if (o.stratify) {
    // Each class gives its share of test rows (rounded), the rest go to training.
    for (auto& [value, rows] : rows_by_class(y)) {
      if (o.shuffle) std::shuffle(rows.begin(), rows.end(), rng);
      const auto k = static_cast<size_t>(
          std::llround(static_cast<double>(rows.size()) * n_test / static_cast<double>(n)));
      test.insert(test.end(), rows.begin(), rows.begin() + std::min(k, rows.size()));
      train.insert(train.end(), rows.begin() + std::min(k, rows.size()), rows.end());
    }
    if (o.shuffle) {
      std::shuffle(train.begin(), train.end(), rng);
      std::shuffle(test.begin(), test.end(), rng);
    }
  } else {
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    if (o.shuffle) std::shuffle(order.begin(), order.end(), rng);
    // scikit-learn takes the test rows first from the permutation.
    test.assign(order.begin(), order.begin() + n_test);
    train.assign(order.begin() + n_test, order.end());
  }
  return TrainTestSplit{take_rows(x, train), take_rows(x, test), take_rows(y, train),
                        take_rows(y, test)};
}

KFold::KFold(int n_splits, bool shuffle, uint64_t seed)
    : n_splits_(n_splits), shuffle_(shuffle), seed_(seed) {}

Result<std::vector<Split>> KFold::split(int64_t n) const {
  TROUPE_RETURN_IF_ERROR(check_splits(n_splits_, n));
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (shuffle_) {
    std::mt19937_64 rng(seed_);
    std::shuffle(order.begin(), order.end(), rng);
  }
  std::vector<Split> splits(static_cast<size_t>(n_splits_));
  int64_t start = 0;
  for (int k = 0; k < n_splits_; ++k) {
    const int64_t size = n / n_splits_ + (k < n % n_splits_ ? 1 : 0);
    for (int64_t i = 0; i < n; ++i) {
      (i >= start && i < start + size ? splits[k].test : splits[k].train).push_back(order[i]);
    }
    start += size;
  }
  return splits;
}

StratifiedKFold::StratifiedKFold(int n_splits, bool shuffle, uint64_t seed)
    : n_splits_(n_splits), shuffle_(shuffle), seed_(seed) {}

Result<std::vector<Split>> StratifiedKFold::split(const Tensor& y) const {
  const int64_t n = y.rank() ? y.dim(0) : 0;
  TROUPE_RETURN_IF_ERROR(check_splits(n_splits_, n));
  std::mt19937_64 rng(seed_);
  std::vector<int> fold_of(static_cast<size_t>(n));
  int next = 0;
  for (auto& [value, rows] : rows_by_class(y)) {
    if (static_cast<int64_t>(rows.size()) < n_splits_) {
      return runtime::invalid_argument("class ", value, " has ", rows.size(),
                                       " examples, fewer than n_splits ", n_splits_);
    }
    if (shuffle_) std::shuffle(rows.begin(), rows.end(), rng);
    // Dealt in turn, continuing where the last class stopped, so fold sizes differ by one.
    for (int64_t r : rows) {
      fold_of[r] = next;
      next = (next + 1) % n_splits_;
    }
  }
  std::vector<Split> splits(static_cast<size_t>(n_splits_));
  for (int64_t i = 0; i < n; ++i) {
    for (int k = 0; k < n_splits_; ++k)
      (fold_of[i] == k ? splits[k].test : splits[k].train).push_back(i);
  }
  return splits;
}

Result<std::vector<Split>> cv_splits(const Model& model, const Tensor& y, const CvOptions& o) {
  if (model.is_classifier()) return StratifiedKFold(o.n_splits, o.shuffle, o.seed).split(y);
  return KFold(o.n_splits, o.shuffle, o.seed).split(y.rank() ? y.dim(0) : 0);
}

runtime::Status check_scoring(const std::string& scoring) {
  static const char* const kNames[] = {"",
                                       "accuracy",
                                       "r2",
                                       "neg_mean_squared_error",
                                       "neg_root_mean_squared_error",
                                       "neg_mean_absolute_error",
                                       "mean_per_class_accuracy",
                                       "mean_iou"};
  for (const char* name : kNames) {
    if (scoring == name) return runtime::ok_status();
  }
  for (const char* metric : {"f1", "precision", "recall"}) {
    for (const char* average : {"_micro", "_macro", "_weighted"}) {
      if (scoring == std::string(metric) + average) return runtime::ok_status();
    }
  }
  return runtime::invalid_argument(
      "scoring '", scoring,
      "' is not accuracy, r2, neg_mean_squared_error, neg_root_mean_squared_error, "
      "neg_mean_absolute_error, or (classifiers) f1, precision or recall with _micro, _macro "
      "or _weighted, mean_per_class_accuracy or mean_iou");
}

Result<double> score_by(Model& model, const Tensor& x, const Tensor& y,
                        const std::string& scoring) {
  TROUPE_RETURN_IF_ERROR(check_scoring(scoring));
  if (scoring.empty()) return model.score(x, y);
  TROUPE_ASSIGN_OR_RETURN(Tensor predicted, model.predict(x));
  if (scoring == "accuracy") return accuracy_score(y, predicted);
  if (scoring == "r2") return r2_score(y, predicted);
  static const std::map<std::string, const char*> kErrors = {
      {"neg_mean_squared_error", "mse"},
      {"neg_root_mean_squared_error", "rmse"},
      {"neg_mean_absolute_error", "mae"}};
  std::string kind;
  double sign = 1;
  if (auto it = kErrors.find(scoring); it != kErrors.end()) {
    kind = it->second;
    sign = -1;
    predicted = predicted.reshaped(y.shape());
  } else if (model.is_classifier()) {
    // The classes seen in either labeling.
    int64_t classes = 1;
    for (double v : as_doubles(y)) classes = std::max(classes, static_cast<int64_t>(v) + 1);
    for (double v : as_doubles(predicted)) classes = std::max(classes, static_cast<int64_t>(v) + 1);
    kind = class_metric_kind(scoring, classes);
  }
  auto metric =
      kind.empty() ? Result<std::unique_ptr<Metric>>(check_scoring("?")) : make_metric(kind);
  if (!metric.ok()) {
    TROUPE_RETURN_IF_ERROR(check_scoring(scoring));
    return metric.status();
  }
  TROUPE_RETURN_IF_ERROR((*metric)->update(y, predicted));
  return sign * (*metric)->result();
}

Result<std::vector<double>> cross_val_score(const Model& model, const Tensor& x, const Tensor& y,
                                            CvOptions options) {
  TROUPE_RETURN_IF_ERROR(check_scoring(options.scoring));
  TROUPE_RETURN_IF_ERROR(check_rows(x, y));
  TROUPE_ASSIGN_OR_RETURN(auto splits, cv_splits(model, y, options));
  TROUPE_ASSIGN_OR_RETURN(
      auto results, run_folds(model, {ParamMap{}}, splits, x, y, options.n_jobs, options.scoring));
  std::vector<double> scores;
  for (const FoldResult& r : results[0]) scores.push_back(*r.score);
  return scores;
}

ParamDistribution ParamDistribution::choice(std::vector<ParamValue> values) {
  ParamDistribution d;
  d.choices = std::move(values);
  return d;
}

ParamDistribution ParamDistribution::uniform(double low, double high) {
  ParamDistribution d;
  d.kind = Kind::kUniform;
  d.low = low;
  d.high = high;
  return d;
}

ParamDistribution ParamDistribution::log_uniform(double low, double high) {
  ParamDistribution d = uniform(low, high);
  d.kind = Kind::kLogUniform;
  return d;
}

ParamDistribution ParamDistribution::rand_int(int64_t low, int64_t high) {
  ParamDistribution d = uniform(static_cast<double>(low), static_cast<double>(high));
  d.kind = Kind::kRandInt;
  return d;
}

SearchCV::SearchCV(const Model& model, std::vector<ParamMap> candidates, SearchOptions options)
    : model_(model.clone()), candidates_(std::move(candidates)), options_(options) {}

Status SearchCV::fit(const Tensor& x, const Tensor& y) {
  TROUPE_RETURN_IF_ERROR(check_scoring(options_.cv.scoring));
  TROUPE_RETURN_IF_ERROR(check_rows(x, y));
  if (candidates_.empty()) return runtime::invalid_argument("the search has no candidates");
  TROUPE_ASSIGN_OR_RETURN(auto splits, cv_splits(*model_, y, options_.cv));
  TROUPE_ASSIGN_OR_RETURN(auto results, run_folds(*model_, candidates_, splits, x, y,
                                                  options_.cv.n_jobs, options_.cv.scoring));
  const size_t folds = splits.size();
  std::vector<std::string> columns;
  std::vector<std::string> names;
  for (const auto& [name, value] : candidates_[0]) names.push_back(name);
  for (const ParamMap& c : candidates_) {
    for (const auto& [name, value] : c) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  for (const std::string& name : names) columns.push_back("param_" + name);
  for (size_t f = 0; f < folds; ++f) columns.push_back("split" + std::to_string(f) + "_test_score");
  for (const char* c : {"mean_test_score", "std_test_score", "rank_test_score", "mean_fit_time"}) {
    columns.push_back(c);
  }
  mean_scores_.assign(candidates_.size(), 0);
  std::vector<double> stds(candidates_.size()), fit_times(candidates_.size());
  for (size_t c = 0; c < candidates_.size(); ++c) {
    for (const FoldResult& r : results[c]) {
      mean_scores_[c] += *r.score / static_cast<double>(folds);
      fit_times[c] += r.fit_seconds / static_cast<double>(folds);
    }
    for (const FoldResult& r : results[c]) {
      stds[c] += (*r.score - mean_scores_[c]) * (*r.score - mean_scores_[c]) / folds;
    }
    stds[c] = std::sqrt(stds[c]);
  }
  // Rank 1 is the best mean; ties share the smaller rank (scikit-learn's "min"), and the first
  // candidate among equals is the best, as there.
  best_ = static_cast<size_t>(std::max_element(mean_scores_.begin(), mean_scores_.end()) -
                              mean_scores_.begin());
  results_ = ResultsTable(columns);
  for (size_t c = 0; c < candidates_.size(); ++c) {
    std::vector<std::string> row;
    for (const std::string& name : names) {
      auto it = candidates_[c].find(name);
      row.push_back(it == candidates_[c].end() ? "" : to_text(it->second));
    }
    for (const FoldResult& r : results[c]) row.push_back(format_score(*r.score));
    int rank = 1;
    for (double other : mean_scores_) rank += other > mean_scores_[c];
    row.push_back(format_score(mean_scores_[c]));
    row.push_back(format_score(stds[c]));
    row.push_back(std::to_string(rank));
    row.push_back(format_score(fit_times[c]));
    results_.add_row(std::move(row));
  }
  best_model_.reset();
  if (options_.refit) {
    std::unique_ptr<Model> best = model_->clone();
    TROUPE_RETURN_IF_ERROR(best->set_params(candidates_[best_]));
    TROUPE_RETURN_IF_ERROR(best->fit(x, y));
    best_model_ = std::move(best);
  }
  return runtime::ok_status();
}

Result<Tensor> SearchCV::predict(const Tensor& x) const {
  if (!best_model_) return runtime::failed_precondition("the search has no refit model: fit first");
  return best_model_->predict(x);
}

Result<double> SearchCV::score(const Tensor& x, const Tensor& y) const {
  if (!best_model_) return runtime::failed_precondition("the search has no refit model: fit first");
  return score_by(*best_model_, x, y, options_.cv.scoring);
}

GridSearchCV::GridSearchCV(const Model& model, const std::vector<ParamGrid>& grids,
                           SearchOptions options)
    : SearchCV(model, expand(grids), options) {}

std::vector<ParamMap> GridSearchCV::expand(const std::vector<ParamGrid>& grids) {
  std::vector<ParamMap> all;
  for (const ParamGrid& grid : grids) {
    std::vector<ParamMap> partial{ParamMap{}};
    for (const auto& [name, values] : grid) {
      std::vector<ParamMap> next;
      for (const ParamMap& p : partial) {
        for (const ParamValue& v : values) {
          ParamMap q = p;
          q[name] = v;
          next.push_back(std::move(q));
        }
      }
      partial = std::move(next);
    }
    all.insert(all.end(), partial.begin(), partial.end());
  }
  return all;
}

RandomizedSearchCV::RandomizedSearchCV(const Model& model, const ParamDistributions& distributions,
                                       int n_iter, uint64_t seed, SearchOptions options)
    : SearchCV(model, sample(distributions, n_iter, seed), options) {}

std::vector<ParamMap> RandomizedSearchCV::sample(const ParamDistributions& distributions,
                                                 int n_iter, uint64_t seed) {
  std::mt19937_64 rng(seed);
  // Lists only: drawn without replacement from their grid, as scikit-learn's ParameterSampler.
  const bool lists_only = std::all_of(
      distributions.begin(), distributions.end(),
      [](const auto& named) { return named.second.kind == ParamDistribution::Kind::kChoice; });
  if (lists_only) {
    ParamGrid grid;
    for (const auto& [name, d] : distributions) grid[name] = d.choices;
    std::vector<ParamMap> all = GridSearchCV::expand({grid});
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(std::min(all.size(), static_cast<size_t>(std::max(0, n_iter))));
    return all;
  }
  std::vector<ParamMap> all;
  for (int i = 0; i < n_iter; ++i) {
    ParamMap p;
    for (const auto& [name, d] : distributions) {
      std::uniform_real_distribution<double> u(0, 1);
      switch (d.kind) {
        case ParamDistribution::Kind::kChoice:
          if (!d.choices.empty()) p[name] = d.choices[rng() % d.choices.size()];
          break;
        case ParamDistribution::Kind::kUniform:
          p[name] = d.low + (d.high - d.low) * u(rng);
          break;
        case ParamDistribution::Kind::kLogUniform:
          p[name] = std::exp(std::log(d.low) + (std::log(d.high) - std::log(d.low)) * u(rng));
          break;
        case ParamDistribution::Kind::kRandInt: {
          const auto low = static_cast<int64_t>(d.low), high = static_cast<int64_t>(d.high);
          p[name] = high > low
                        ? low + static_cast<int64_t>(rng() % static_cast<uint64_t>(high - low))
                        : low;
          break;
        }
      }
    }
    all.push_back(std::move(p));
  }
  return all;
}

}  // namespace troupe::estimators
