#include "estimators/canned/model.h"

#include <algorithm>
#include <cmath>

#include "estimators/canned/runtime_names.h"
#include "estimators/metrics.h"

namespace troupe::estimators {

namespace {

runtime::Status same_length(const Tensor& y_true, const Tensor& y_pred) {
  if (y_true.num_elements() != y_pred.num_elements()) {
    return runtime::invalid_argument("score: ", y_true.num_elements(), " labels for ",
                                     y_pred.num_elements(), " predictions");
  }
  if (y_true.num_elements() == 0) return runtime::invalid_argument("score: no examples");
  return runtime::ok_status();
}

}  // namespace

Result<double> accuracy_score(const Tensor& y_true, const Tensor& y_pred) {
  TROUPE_RETURN_IF_ERROR(same_length(y_true, y_pred));
  const std::vector<double> want = as_doubles(y_true);
  const std::vector<double> got = as_doubles(y_pred);
  double right = 0;
  for (size_t i = 0; i < want.size(); ++i) right += want[i] == got[i];
  return right / static_cast<double>(want.size());
}

Result<double> r2_score(const Tensor& y_true, const Tensor& y_pred) {
  TROUPE_RETURN_IF_ERROR(same_length(y_true, y_pred));
  const std::vector<double> want = as_doubles(y_true);
  const std::vector<double> got = as_doubles(y_pred);
  double mean = 0;
  for (double v : want) mean += v;
  mean /= static_cast<double>(want.size());
  double residual = 0, total = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    residual += (want[i] - got[i]) * (want[i] - got[i]);
    total += (want[i] - mean) * (want[i] - mean);
  }
  // scikit-learn's convention for constant targets: 1 when predicted exactly, else 0.
  if (total == 0) return residual == 0 ? 1.0 : 0.0;
  return 1 - residual / total;
}

runtime::Status FitParams::validate(const std::string& model) const {
  if (batch_size < 1) {
    return param_error(model, "batch_size", std::to_string(batch_size) + " is not at least 1");
  }
  if (epochs < 0) {
    return param_error(model, "epochs", std::to_string(epochs) + " is negative");
  }
  return runtime::ok_status();
}

Result<input::Dataset> FitParams::dataset(const Tensor& x, const Tensor& y, int64_t seed) const {
  const int64_t n = x.rank() ? x.dim(0) : 0;
  return input::arrays({{"x", x}, {"y", y}}, "y",
                       {.batch_size = std::max<int64_t>(1, std::min(batch_size, n)),
                        .num_epochs = epochs_for(n),
                        .shuffle = shuffle,
                        .seed = static_cast<uint64_t>(std::max<int64_t>(0, seed))});
}

Result<Tensor> predict_rows(Estimator& estimator, const Tensor& x, const std::string& key) {
  TROUPE_ASSIGN_OR_RETURN(input::Dataset d, input::arrays({{"x", x}}, "", {.batch_size = 1024}));
  TROUPE_ASSIGN_OR_RETURN(auto batches, estimator.predict_batches(d, {.keys = {key}}));
  std::vector<Tensor> parts;
  for (const Prediction& p : batches) parts.push_back(p.at(key));
  if (parts.empty()) return runtime::invalid_argument("predict: no examples");
  return runtime::concat_rows(parts);
}

int64_t FitParams::epochs_for(int64_t examples) const {
  if (epochs > 0) return epochs;
  const int64_t batch = std::max<int64_t>(1, std::min(batch_size, examples));
  const int64_t steps_per_epoch = (examples + batch - 1) / batch;
  const int64_t for_steps = (2000 + steps_per_epoch - 1) / std::max<int64_t>(1, steps_per_epoch);
  return std::clamp<int64_t>(for_steps, 10, 500);
}

}  // namespace troupe::estimators
