// Runs independent trials (a fold's fit and score, a search candidate) in parallel as actors: a
// supervising actor keeps up to `parallel` detached trial actors busy, each running one trial
// at a time (a trial blocks on its own Estimator's runtime, so it gets a thread of its own),
// and answers when every trial has ended.
//
//   std::vector<Result<double>> scores(folds.size(), runtime::internal_error("not run"));
//   Status s = run_trials(folds.size(), parallel_trials(n_jobs),
//                         [&](size_t i) { scores[i] = fit_and_score(folds[i]); });
#pragma once

#include <cstddef>
#include <functional>

#include "runtime/status.h"

namespace troupe::estimators {

// n_jobs as scikit-learn reads it: 0 or less is every core, otherwise that many.
size_t parallel_trials(int n_jobs);

// Calls trial(i) once for every i in [0, n), at most `parallel` at a time, and returns when all
// have returned. Trials report their own results through what they capture; one that throws is
// an internal error naming its index (the others still run).
runtime::Status run_trials(size_t n, size_t parallel, const std::function<void(size_t)>& trial);

}  // namespace troupe::estimators
