// scikit-learn's model selection over Models (estimators/canned/model.h): splits,
// cross-validation and searches over params, each trial run as an actor (trials.h).
//
//   auto parts = train_test_split(x, y, {.test_size = 0.25, .seed = 1, .stratify = true});
//   auto scores = cross_val_score(clf, x, y, {.n_splits = 5});     // Result<vector<double>>
//   GridSearchCV search(clf, {{{"hidden_units", {int64_t{64}, int64_t{128}}},
//                              {"learning_rate", {0.001, 0.003}}}}, {.cv = {.n_splits = 3}});
//   TROUPE_RETURN_IF_ERROR(search.fit(x, y));
//   std::puts(search.cv_results().format().c_str());     // or .write_csv("results.csv")
//   ParamMap best = search.best_params();  double s = search.best_score();
//   auto classes = search.predict(x_test);                // the best params, refit on all of x
//
// Classifiers are split stratified by class (StratifiedKFold), regressors by KFold, as
// scikit-learn does with cv=int. Scores are the model's own score (accuracy, R^2), or those
// CvOptions::scoring names.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "estimators/canned/model.h"
#include "estimators/selection/results_table.h"

namespace troupe::estimators {

// Row indices of one fold.
struct Split {
  std::vector<int64_t> train;
  std::vector<int64_t> test;
};

struct TrainTestSplitOptions {
  double test_size = 0.25;  // a share in (0, 1), or a count of rows when >= 1
  uint64_t seed = 0;
  bool shuffle = true;
  bool stratify = false;  // the same share of each class (y's values) in both parts
};

struct TrainTestSplit {
  runtime::Tensor x_train, x_test, y_train, y_test;
};

runtime::Result<TrainTestSplit> train_test_split(const runtime::Tensor& x, const runtime::Tensor& y,
                                                 TrainTestSplitOptions options = {});

// K consecutive folds of [0, n), the first n % k one row larger (shuffled first if asked).
class KFold {
 public:
  explicit KFold(int n_splits = 5, bool shuffle = false, uint64_t seed = 0);
  runtime::Result<std::vector<Split>> split(int64_t n) const;

 private:
  int n_splits_;
  bool shuffle_;
  uint64_t seed_;
};

// Folds that keep each class's share: every class's rows are dealt round the folds in turn.
// An error when a class has fewer rows than folds.
class StratifiedKFold {
 public:
  explicit StratifiedKFold(int n_splits = 5, bool shuffle = false, uint64_t seed = 0);
  runtime::Result<std::vector<Split>> split(const runtime::Tensor& y) const;

 private:
  int n_splits_;
  bool shuffle_;
  uint64_t seed_;
};

struct CvOptions {
  int n_splits = 5;
  bool shuffle = false;
  uint64_t seed = 0;
  int n_jobs = 0;  // trials at once; 0: one per core
  // scikit-learn's scoring: "" the model's own score (accuracy, R^2); else one of score_by's.
  std::string scoring;
};

// A fitted model's score on (x, y) by scikit-learn's scoring names, greater always better:
// accuracy, r2, neg_mean_squared_error, neg_root_mean_squared_error, neg_mean_absolute_error,
// and for classifiers f1, precision and recall with _micro, _macro or _weighted,
// mean_per_class_accuracy and mean_iou (of the predicted classes). "" is the model's score();
// another name is an error listing these.
runtime::Result<double> score_by(Model& model, const runtime::Tensor& x, const runtime::Tensor& y,
                                 const std::string& scoring);
// An error naming `scoring` and listing the names when it is not one of them.
runtime::Status check_scoring(const std::string& scoring);

// The model's folds for (x, y): stratified for classifiers.
runtime::Result<std::vector<Split>> cv_splits(const Model& model, const runtime::Tensor& y,
                                              const CvOptions& options);

// The rows of t at `rows`, in that order.
runtime::Tensor take_rows(const runtime::Tensor& t, const std::vector<int64_t>& rows);

// One score per fold: a clone of `model` fitted on the fold's train rows, scored on its test
// rows. The first failing fold's error, naming the fold.
runtime::Result<std::vector<double>> cross_val_score(const Model& model, const runtime::Tensor& x,
                                                     const runtime::Tensor& y,
                                                     CvOptions options = {});

// Values to try for each param (GridSearchCV), and how to draw one (RandomizedSearchCV).
using ParamGrid = std::map<std::string, std::vector<ParamValue>>;

struct ParamDistribution {
  enum class Kind { kChoice, kUniform, kLogUniform, kRandInt };
  Kind kind = Kind::kChoice;
  std::vector<ParamValue> choices;  // kChoice: one of them, each as likely
  double low = 0, high = 1;         // kUniform, kLogUniform: [low, high); kRandInt: [low, high)
  static ParamDistribution choice(std::vector<ParamValue> values);
  static ParamDistribution uniform(double low, double high);
  static ParamDistribution log_uniform(double low, double high);
  static ParamDistribution rand_int(int64_t low, int64_t high);
};
using ParamDistributions = std::map<std::string, ParamDistribution>;

struct SearchOptions {
  CvOptions cv;
  bool refit = true;  // fit the best params on all the data (best_estimator, predict, score)
};

// What GridSearchCV and RandomizedSearchCV share: the candidates' trials (every candidate on
// every fold, in parallel), the results table and the refit best model.
class SearchCV {
 public:
  // Every candidate's params are checked on a clone before any trial runs.
  runtime::Status fit(const runtime::Tensor& x, const runtime::Tensor& y);
  const std::vector<ParamMap>& candidates() const { return candidates_; }
  // scikit-learn's cv_results_: a row per candidate with its params, split<i>_test_score,
  // mean_test_score, std_test_score, rank_test_score and mean_fit_time (seconds).
  const ResultsTable& cv_results() const { return results_; }
  const std::vector<double>& mean_test_scores() const { return mean_scores_; }
  const ParamMap& best_params() const { return candidates_.at(best_); }
  double best_score() const { return mean_scores_.at(best_); }
  size_t best_index() const { return best_; }
  // Null before fit, or without refit.
  Model* best_estimator() const { return best_model_.get(); }
  runtime::Result<runtime::Tensor> predict(const runtime::Tensor& x) const;
  runtime::Result<double> score(const runtime::Tensor& x, const runtime::Tensor& y) const;

 protected:
  SearchCV(const Model& model, std::vector<ParamMap> candidates, SearchOptions options);

 private:
  std::unique_ptr<Model> model_;
  std::vector<ParamMap> candidates_;
  SearchOptions options_;
  ResultsTable results_;
  std::vector<double> mean_scores_;
  size_t best_ = 0;
  std::unique_ptr<Model> best_model_;
};

// Every combination of each grid's values (a list of grids: their union), in scikit-learn's
// order (names sorted, the last name's values varying fastest).
class GridSearchCV : public SearchCV {
 public:
  GridSearchCV(const Model& model, const std::vector<ParamGrid>& grids, SearchOptions options = {});
  static std::vector<ParamMap> expand(const std::vector<ParamGrid>& grids);
};

// n_iter candidates drawn from the distributions with `seed`; when every one is a list of
// choices, without replacement (at most the grid's size), as scikit-learn's.
class RandomizedSearchCV : public SearchCV {
 public:
  RandomizedSearchCV(const Model& model, const ParamDistributions& distributions, int n_iter,
                     uint64_t seed = 0, SearchOptions options = {});
  static std::vector<ParamMap> sample(const ParamDistributions& distributions, int n_iter,
                                      uint64_t seed);
};

}  // namespace troupe::estimators
