// DNNClassifier: a feed-forward network over every numeric feature, as tf.estimator's canned
// DNNClassifier, with scikit-learn's fit / predict / predict_proba / score / get_params /
// set_params on in-memory arrays.
//
//   DNNClassifier clf({.hidden_units = {256, 128}, .n_classes = 10, .optimizer = "adam",
//                      .learning_rate = 1e-3}, config);
//   clf.fit(x_train, y_train, {.batch_size = 128, .epochs = 5});     // or fit(dataset)
//   auto classes = clf.predict(x_test);                              // Result<Tensor> int64 [n]
//   auto accuracy = clf.score(x_test, y_test);                       // Result<double>
//
// Features are cast to float32, flattened per example and concatenated in name order. Logits
// have one column per class; the loss is the mean softmax cross-entropy. Evaluation reports
// accuracy (and auc, precision and recall with two classes). The learning rate lives in the
// variable "learning_rate", so an Experiment can lower it on a plateau.
#pragma once

#include <string>
#include <vector>

#include "estimators/estimator.h"

namespace troupe::estimators {

struct DNNOptions {
  std::vector<int64_t> hidden_units{256, 128};
  int64_t n_classes = 2;
  std::string activation = "relu";    // relu, tanh, sigmoid, elu
  double dropout = 0;                 // the rate of units dropped while training
  std::string optimizer = "adagrad";  // adam, sgd, momentum, adagrad, rmsprop, ftrl
  double learning_rate = 0.05;
  std::vector<std::string> feature_keys;  // empty: every feature
  // Kernels of kPartitionBytes or more split along dimension 0 into up to this many parts (a
  // cluster's ps tasks), each at least that big, as TF's min_max_variable_partitioner.
  int partitions = 1;
  static constexpr int64_t kPartitionBytes = 256 << 10;
};

// The options as Params and back; a bad value is an error naming the parameter.
Params to_params(const DNNOptions& o);
runtime::Result<DNNOptions> dnn_options(const Params& p);
// The model_fn; it reads its options from the Estimator's params.
runtime::Result<EstimatorSpec> dnn_classifier_model_fn(ModelInputs& in);

struct FitOptions {
  int64_t batch_size = 128;
  int64_t epochs = 1;
  bool shuffle = true;
  uint64_t seed = 0;
};

class DNNClassifier {
 public:
  explicit DNNClassifier(DNNOptions options, RunConfig config = {});

  runtime::Result<TrainResult> fit(const input::Dataset& data, TrainOptions options = {});
  runtime::Result<TrainResult> fit(const runtime::Tensor& x, const runtime::Tensor& y,
                                   FitOptions options = {});
  runtime::Result<Metrics> evaluate(const input::Dataset& data, EvalOptions options = {});
  runtime::Result<runtime::Tensor> predict(const runtime::Tensor& x);
  runtime::Result<runtime::Tensor> predict_proba(const runtime::Tensor& x);
  // Mean accuracy on (x, y), as scikit-learn's ClassifierMixin.score.
  runtime::Result<double> score(const runtime::Tensor& x, const runtime::Tensor& y);
  Params get_params() const { return estimator_.params(); }
  runtime::Status set_params(const Params& params);
  Estimator& estimator() { return estimator_; }

 private:
  runtime::Result<runtime::Tensor> predict_key(const runtime::Tensor& x, const std::string& key);
  Estimator estimator_;
};

}  // namespace troupe::estimators
