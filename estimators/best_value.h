// The best value of an evaluation metric over time, with the weights it was reached with: what
// early stopping (the hook and the Experiment) and the plateau rule share.
//
//   BestValue best({.maximize = true, .min_delta = 0.001});
//   if (best.offer(accuracy, step, variables)) export_it();   // a new best, weights kept
//   else if (best.waited() >= patience) { best.restore(variables); stop(); }
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "runtime/tensor.h"
#include "runtime/variable_store.h"

namespace troupe::estimators {

class BestValue {
 public:
  struct Options {
    bool maximize = false;
    double min_delta = 0;  // an improvement must be larger than this
  };
  explicit BestValue(Options options) : options_(options) {}

  // True when `value` is the first or beats the best by more than min_delta: it becomes the
  // best, waited() restarts at 0 and the variables' values (but global_step) are kept, copy on
  // write, so holding them costs nothing until training changes them. Otherwise waited() grows.
  bool offer(double value, int64_t step, const runtime::VariableStore& variables);
  // Puts the kept values back; false when there are none.
  bool restore(runtime::VariableStore& variables) const;

  bool has_best() const { return has_best_; }
  double best() const { return best_; }
  int64_t best_step() const { return best_step_; }
  int waited() const { return waited_; }  // offers since the best

 private:
  Options options_;
  bool has_best_ = false;
  double best_ = 0;
  int64_t best_step_ = 0;
  int waited_ = 0;
  std::map<std::string, runtime::Tensor> weights_;
};

}  // namespace troupe::estimators
