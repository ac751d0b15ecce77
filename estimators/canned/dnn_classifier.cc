#include "estimators/canned/dnn_classifier.h"

#include <sstream>

#include "estimators/metrics.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/state_ops.h"
#include "ops/strided_slice.h"
#include "ops/training_ops.h"

namespace troupe::estimators {

using runtime::DType;
using runtime::Output;
using runtime::Result;
using runtime::Shape;
using runtime::Status;
using runtime::Tensor;

namespace {

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

Result<ops::Optimizer> optimizer(const std::string& name, double lr) {
  if (name == "adam") return ops::Optimizer::adam(lr);
  if (name == "sgd") return ops::Optimizer::sgd(lr);
  if (name == "momentum") return ops::Optimizer::momentum_sgd(lr, 0.9);
  if (name == "adagrad") return ops::Optimizer::adagrad(lr);
  if (name == "rmsprop") return ops::Optimizer::rmsprop(lr);
  if (name == "ftrl") return ops::Optimizer::ftrl(lr);
  return runtime::invalid_argument("optimizer '", name,
                                   "' is not adam, sgd, momentum, adagrad, rmsprop or ftrl");
}

Output activate(runtime::GraphBuilder& b, const std::string& name, Output x) {
  if (name == "tanh") return ops::tanh(b, x);
  if (name == "sigmoid") return ops::sigmoid(b, x);
  if (name == "elu") return ops::elu(b, x);
  return ops::relu(b, x);
}

Output dense(runtime::GraphBuilder& b, const std::string& scope, Output x, int64_t in, int64_t out,
             int partitions) {
  auto guard = b.name_scope(scope);
  const int64_t bytes = in * out * 4;
  const int64_t parts =
      std::min<int64_t>(partitions, std::max<int64_t>(1, bytes / DNNOptions::kPartitionBytes));
  Output w =
      ops::partitioned_variable(b, "kernel", Shape{in, out}, DType::kFloat32,
                                ops::glorot_uniform(b, Shape{in, out}), static_cast<int>(parts));
  Output bias = ops::variable(b, "bias", Shape{out}, DType::kFloat32,
                              ops::zeros(b, Shape{out}, DType::kFloat32));
  return ops::bias_add(b, ops::matmul(b, x, w), bias);
}

}  // namespace

Params to_params(const DNNOptions& o) {
  std::ostringstream lr;
  lr.precision(17);
  lr << o.learning_rate;
  std::ostringstream dropout;
  dropout.precision(17);
  dropout << o.dropout;
  std::string keys;
  for (size_t i = 0; i < o.feature_keys.size(); ++i) keys += (i ? "," : "") + o.feature_keys[i];
  return {{"hidden_units", join(o.hidden_units)},
          {"n_classes", std::to_string(o.n_classes)},
          {"activation", o.activation},
          {"dropout", dropout.str()},
          {"optimizer", o.optimizer},
          {"learning_rate", lr.str()},
          {"feature_keys", keys},
          {"partitions", std::to_string(o.partitions)}};
}

Result<DNNOptions> dnn_options(const Params& p) {
  DNNOptions o;
  for (const auto& [key, value] : p) {
    try {
      if (key == "hidden_units") {
        o.hidden_units.clear();
        std::stringstream ss(value);
        std::string unit;
        while (std::getline(ss, unit, ',')) {
          size_t used = 0;
          const int64_t u = std::stoll(unit, &used);
          if (used != unit.size() || u < 1) throw std::invalid_argument(unit);
          o.hidden_units.push_back(u);
        }
      } else if (key == "n_classes") {
        o.n_classes = std::stoll(value);
        if (o.n_classes < 2) throw std::invalid_argument(value);
      } else if (key == "activation") {
        if (value != "relu" && value != "tanh" && value != "sigmoid" && value != "elu") {
          throw std::invalid_argument(value);
        }
        o.activation = value;
      } else if (key == "dropout") {
        o.dropout = std::stod(value);
        if (o.dropout < 0 || o.dropout >= 1) throw std::invalid_argument(value);
      } else if (key == "optimizer") {
        TROUPE_RETURN_IF_ERROR(optimizer(value, 0.1).status());
        o.optimizer = value;
      } else if (key == "learning_rate") {
        o.learning_rate = std::stod(value);
        if (!(o.learning_rate > 0)) throw std::invalid_argument(value);
      } else if (key == "partitions") {
        o.partitions = std::stoi(value);
        if (o.partitions < 1) throw std::invalid_argument(value);
      } else if (key == "feature_keys") {
        o.feature_keys.clear();
        std::stringstream ss(value);
        std::string k;
        while (std::getline(ss, k, ',')) {
          if (!k.empty()) o.feature_keys.push_back(k);
        }
      } else {
        return runtime::invalid_argument("DNNClassifier has no parameter '", key, "'");
      }
    } catch (const std::exception&) {
      return runtime::invalid_argument("DNNClassifier parameter ", key, ": '", value,
                                       "' is not valid");
    }
  }
  return o;
}

Result<EstimatorSpec> dnn_classifier_model_fn(ModelInputs& in) {
  TROUPE_ASSIGN_OR_RETURN(DNNOptions o, dnn_options(in.params));
  runtime::GraphBuilder& b = in.b;
  std::vector<std::string> keys = o.feature_keys;
  if (keys.empty()) {
    for (const auto& [k, v] : in.features) keys.push_back(k);
  }
  std::vector<Output> columns;
  int64_t width = 0;
  {
    auto scope = b.name_scope("input_layer");
    for (const std::string& k : keys) {
      auto it = in.features.find(k);
      if (it == in.features.end()) return runtime::invalid_argument("missing feature '", k, "'");
      const runtime::Graph& g = b.graph();
      if (g.dtype(it->second) == DType::kString) {
        return runtime::invalid_argument("feature '", k,
                                         "' is text: a DNN takes numeric features only");
      }
      const Shape& s = g.shape(it->second);
      int64_t per = 1;
      for (int d = 1; d < s.rank(); ++d) {
        if (s.dim(d) < 0) return runtime::invalid_argument("feature '", k, "' varies in shape");
        per *= s.dim(d);
      }
      columns.push_back(ops::reshape(b, ops::cast(b, it->second, DType::kFloat32), {-1, per}));
      width += per;
    }
  }
  if (columns.empty()) return runtime::invalid_argument("no features");
  Output h = columns.size() == 1 ? columns[0] : ops::concat(b, columns, 1);
  int64_t in_width = width;
  for (size_t i = 0; i < o.hidden_units.size(); ++i) {
    h = activate(b, o.activation,
                 dense(b, "dnn/hiddenlayer_" + std::to_string(i), h, in_width, o.hidden_units[i],
                       o.partitions));
    if (o.dropout > 0 && in.mode == Mode::kTrain) h = ops::dropout(b, h, o.dropout, true);
    in_width = o.hidden_units[i];
  }
  Output logits = dense(b, "dnn/logits", h, in_width, o.n_classes, o.partitions);
  EstimatorSpec spec;
  Output classes = ops::argmax(b, logits, 1, DType::kInt64);
  Output probabilities = ops::softmax(b, logits);
  spec.predictions = {{"classes", classes}, {"probabilities", probabilities}, {"logits", logits}};
  spec.export_scores = probabilities;
  if (in.mode == Mode::kPredict) return spec;
  Output labels = ops::reshape(b, ops::cast(b, in.labels, DType::kInt64), {-1});
  spec.loss = ops::reduce_mean(b, ops::sparse_softmax_cross_entropy_with_logits(b, labels, logits));
  spec.eval_metric_ops["accuracy"] = {"accuracy", labels, classes};
  if (o.n_classes == 2) {
    Output positive = ops::reshape(b, ops::slice(b, probabilities, {0, 1}, {-1, 1}), {-1});
    spec.eval_metric_ops["auc"] = {"auc", labels, positive};
    spec.eval_metric_ops["precision"] = {"precision", labels, classes};
    spec.eval_metric_ops["recall"] = {"recall", labels, classes};
  }
  if (in.mode == Mode::kTrain) {
    Output lr = ops::variable(b, "learning_rate", Shape{}, DType::kFloat32,
                              ops::fill(b, Shape{}, o.learning_rate, DType::kFloat32),
                              /*trainable=*/false);
    TROUPE_ASSIGN_OR_RETURN(ops::Optimizer opt, optimizer(o.optimizer, o.learning_rate));
    opt.learning_rate_tensor = lr;
    spec.train_op = ops::minimize(b, spec.loss, opt);
  }
  return spec;
}

DNNClassifier::DNNClassifier(DNNOptions options, RunConfig config)
    : estimator_(dnn_classifier_model_fn, std::move(config), to_params(options)) {}

Status DNNClassifier::set_params(const Params& params) {
  Params merged = estimator_.params();
  for (const auto& [k, v] : params) merged[k] = v;
  TROUPE_RETURN_IF_ERROR(dnn_options(merged).status());
  estimator_.set_params(merged);
  return runtime::ok_status();
}

Result<TrainResult> DNNClassifier::fit(const input::Dataset& data, TrainOptions options) {
  return estimator_.train(data, std::move(options));
}

Result<TrainResult> DNNClassifier::fit(const Tensor& x, const Tensor& y, FitOptions options) {
  TROUPE_ASSIGN_OR_RETURN(input::Dataset d, input::arrays({{"x", x}, {"y", y}}, "y",
                                                          {.batch_size = options.batch_size,
                                                           .num_epochs = options.epochs,
                                                           .shuffle = options.shuffle,
                                                           .seed = options.seed}));
  return estimator_.train(d);
}

Result<Metrics> DNNClassifier::evaluate(const input::Dataset& data, EvalOptions options) {
  return estimator_.evaluate(data, std::move(options));
}

Result<Tensor> DNNClassifier::predict_key(const Tensor& x, const std::string& key) {
  TROUPE_ASSIGN_OR_RETURN(input::Dataset d, input::arrays({{"x", x}}, "", {.batch_size = 1024}));
  TROUPE_ASSIGN_OR_RETURN(auto batches, estimator_.predict_batches(d, {.keys = {key}}));
  std::vector<actors::RowRef> rows;
  for (const Prediction& p : batches) {
    auto chunk = std::make_shared<const actors::Chunk>(actors::Chunk{{p.at(key)}});
    for (auto& r : actors::rows_of(chunk)) rows.push_back(r);
  }
  if (rows.empty()) return runtime::invalid_argument("predict: no examples");
  TROUPE_ASSIGN_OR_RETURN(auto stacked, actors::stack_rows(rows, false));
  return stacked[0];
}

Result<Tensor> DNNClassifier::predict(const Tensor& x) { return predict_key(x, "classes"); }
Result<Tensor> DNNClassifier::predict_proba(const Tensor& x) {
  return predict_key(x, "probabilities");
}

Result<double> DNNClassifier::score(const Tensor& x, const Tensor& y) {
  TROUPE_ASSIGN_OR_RETURN(Tensor classes, predict(x));
  if (y.num_elements() != classes.num_elements()) {
    return runtime::invalid_argument("score: ", y.num_elements(), " labels for ",
                                     classes.num_elements(), " examples");
  }
  const std::vector<double> want = as_doubles(y);
  double right = 0;
  for (int64_t i = 0; i < classes.num_elements(); ++i)
    right += classes.data<int64_t>()[i] == want[i];
  return right / static_cast<double>(want.size());
}

}  // namespace troupe::estimators
