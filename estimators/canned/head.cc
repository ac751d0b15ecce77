#include "estimators/canned/head.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "estimators/canned/runtime_names.h"
#include "estimators/metrics.h"
#include "ops/array_ops.h"
#include "ops/feature_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/state_ops.h"
#include "ops/strided_slice.h"
#include "ops/training_ops.h"

namespace troupe::estimators {

namespace {

// HeadOptions::heads' escaping: ',', ':', '|' and '%' as %XX.
std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == ',' || c == ':' || c == '|' || c == '%') {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

runtime::Result<std::string> unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      return runtime::invalid_argument("'", s, "' has a bad %-escape");
    }
    out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
    i += 2;
  }
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t from = 0;
  while (true) {
    const size_t at = s.find(sep, from);
    parts.push_back(s.substr(from, at == std::string::npos ? std::string::npos : at - from));
    if (at == std::string::npos) return parts;
    from = at + 1;
  }
}

}  // namespace

runtime::Result<std::vector<HeadPart>> parse_heads(const std::string& text) {
  std::vector<HeadPart> heads;
  if (text.empty()) return heads;
  for (const std::string& item : split(text, ',')) {
    const std::vector<std::string> f = split(item, ':');
    auto bad = [&](const std::string& why) {
      return runtime::invalid_argument("heads: '", item, "' ", why);
    };
    if (f.size() < 3) return bad("is not NAME:classifier:N or NAME:regressor:D");
    HeadPart h;
    TROUPE_ASSIGN_OR_RETURN(h.name, unescape(f[0]));
    if (h.name.empty()) return bad("has no name");
    if (f[1] != "classifier" && f[1] != "regressor") return bad("is no classifier or regressor");
    h.task = f[1] == "classifier" ? Task::kClassifier : Task::kRegressor;
    char* end = nullptr;
    const long long n = std::strtoll(f[2].c_str(), &end, 10);
    if (f[2].empty() || *end != '\0' || n < 1) return bad("has no count of outputs");
    (h.task == Task::kClassifier ? h.n_classes : h.label_dimension) = n;
    for (size_t k = 3; k < f.size(); ++k) {
      if (f[k].rfind("weight=", 0) == 0) {
        h.weight = std::strtod(f[k].c_str() + 7, &end);
        if (*end != '\0' || !(h.weight >= 0)) return bad("has a bad weight");
      } else if (f[k] == "multi_label") {
        h.multi_label = true;
      } else if (f[k].rfind("vocabulary=", 0) == 0) {
        for (const std::string& w : split(f[k].substr(11), '|')) {
          TROUPE_ASSIGN_OR_RETURN(std::string word, unescape(w));
          h.label_vocabulary.push_back(std::move(word));
        }
      } else {
        return bad("has '" + f[k] + "', not weight=, multi_label or vocabulary=");
      }
    }
    for (const HeadPart& other : heads) {
      if (other.name == h.name) return bad("names a head twice");
    }
    heads.push_back(std::move(h));
  }
  return heads;
}

std::string heads_text(const std::vector<HeadPart>& heads) {
  std::string text;
  for (const HeadPart& h : heads) {
    if (!text.empty()) text += ",";
    const bool classifier = h.task == Task::kClassifier;
    text += escape(h.name) + (classifier ? ":classifier:" : ":regressor:") +
            std::to_string(classifier ? h.n_classes : h.label_dimension);
    if (h.weight != 1) text += ":weight=" + estimators::to_text(ParamValue{h.weight});
    if (h.multi_label) text += ":multi_label";
    if (!h.label_vocabulary.empty()) {
      text += ":vocabulary=";
      for (size_t i = 0; i < h.label_vocabulary.size(); ++i) {
        text += (i ? "|" : "") + escape(h.label_vocabulary[i]);
      }
    }
  }
  return text;
}

namespace {

// Each head of a multi-head model as a Head of its own.
std::vector<Head> heads_of(const Head& head, const std::vector<HeadPart>& parts) {
  std::vector<Head> out;
  for (const HeadPart& p : parts) {
    Head h;
    h.task = p.task;
    h.n_classes = p.n_classes;
    h.label_dimension = p.label_dimension;
    if (auto stats = head.options.head_labels.find(p.name);
        p.task == Task::kRegressor && stats != head.options.head_labels.end()) {
      h.label = stats->second;
    }
    h.options.label_vocabulary = p.label_vocabulary;
    h.options.multi_label = p.multi_label;
    h.options.weight_column = head.options.weight_column;
    if (p.task == Task::kClassifier && !p.multi_label) h.options.metrics = head.options.metrics;
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace

int64_t logits_dimension(const Head& head) {
  if (!head.options.heads.empty()) {
    auto parts = parse_heads(head.options.heads);
    int64_t d = 0;
    if (parts.ok()) {
      for (const Head& h : heads_of(head, *parts)) d += logits_dimension(h);
    }
    return d;
  }
  return head.task == Task::kClassifier ? head.n_classes : head.label_dimension;
}

runtime::Status check_loss(Task task, const std::string& loss) {
  if (loss.empty()) return runtime::ok_status();
  if (task == Task::kClassifier && loss != "log" && loss != "hinge") {
    return runtime::invalid_argument("loss '", loss, "' is not log or hinge");
  }
  if (task == Task::kRegressor && loss != "squared" && loss != "epsilon_insensitive") {
    return runtime::invalid_argument("loss '", loss, "' is not squared or epsilon_insensitive");
  }
  return runtime::ok_status();
}

namespace {

Output vocabulary(runtime::GraphBuilder& b, const Head& head) {
  return ops::constant(b, runtime::Tensor::from_vector(
                              Shape{static_cast<int64_t>(head.options.label_vocabulary.size())},
                              head.options.label_vocabulary));
}

// The labels as class ids [batch]: int labels as they are, text ones by the label vocabulary
// (a label outside it is an error naming it and its row).
runtime::Result<Output> class_ids(ModelInputs& in, const Head& head) {
  runtime::GraphBuilder& b = in.b;
  const bool text = b.dtype(in.labels) == DType::kString;
  if (head.options.label_vocabulary.empty()) {
    if (text) {
      return runtime::invalid_argument(
          "the labels are text: give the model a label_vocabulary (their class names)");
    }
    return ops::reshape(b, ops::cast(b, in.labels, DType::kInt64), {-1});
  }
  if (!text) {
    return runtime::invalid_argument("a label_vocabulary needs text labels, these are ",
                                     runtime::dtype_name(b.dtype(in.labels)));
  }
  const runtime::Tensor names = runtime::Tensor::from_vector(
      Shape{static_cast<int64_t>(head.options.label_vocabulary.size())},
      head.options.label_vocabulary);
  return ops::vocabulary_lookup(b, ops::reshape(b, in.labels, {-1}), names, 0, "label");
}

// The weight column's values [batch], float32; invalid when the head has none.
runtime::Result<Output> example_weights(ModelInputs& in, const Head& head) {
  runtime::GraphBuilder& b = in.b;
  if (head.options.weight_column.empty()) return Output{};
  auto it = in.features.find(head.options.weight_column);
  if (it == in.features.end()) {
    return runtime::invalid_argument("missing weight column '", head.options.weight_column, "'");
  }
  if (!runtime::is_numeric(b.dtype(it->second))) {
    return runtime::invalid_argument("weight column '", head.options.weight_column,
                                     "' is not numeric");
  }
  return ops::reshape(b, ops::cast(b, it->second, DType::kFloat32), {-1});
}

// The mean over the batch of per-example `losses`, each weighted by its weight_column's value
// and by `weights` when given (TF's SUM_OVER_BATCH_SIZE reduction).
runtime::Result<Output> weighted_mean(ModelInputs& in, const Head& head, Output losses,
                                      Output weights) {
  runtime::GraphBuilder& b = in.b;
  TROUPE_ASSIGN_OR_RETURN(Output w, example_weights(in, head));
  if (w.valid()) weights = weights.valid() ? ops::mul(b, weights, w) : w;
  return ops::reduce_mean(b, weights.valid() ? ops::mul(b, losses, weights) : losses);
}

}  // namespace

runtime::Status Head::validate() const {
  const auto& [label_vocabulary, class_weights, multi_label, weight_column, metrics, heads,
               head_labels] = options;
  if (heads.empty() && !head_labels.empty()) {
    return runtime::invalid_argument(
        "head_labels: per-head label statistics are a multi-head model's (a single regressor's "
        "are its label statistics)");
  }
  if (!heads.empty()) {
    TROUPE_ASSIGN_OR_RETURN(std::vector<HeadPart> parts, parse_heads(heads));
    if (!label_vocabulary.empty() || !class_weights.empty() || multi_label || !loss.empty() ||
        !label.mean.empty()) {
      return runtime::invalid_argument(
          "heads: a multi-head model's vocabularies are its heads'; class weights, multi-label "
          "heads, other losses and label statistics are single-head options");
    }
    for (const Head& h : heads_of(*this, parts)) {
      TROUPE_RETURN_IF_ERROR(h.validate().with_context("heads"));
    }
    return runtime::ok_status();
  }
  if (task == Task::kClassifier) {
    if (!label_vocabulary.empty() && static_cast<int64_t>(label_vocabulary.size()) != n_classes) {
      return runtime::invalid_argument("label_vocabulary has ", label_vocabulary.size(),
                                       " names for ", n_classes, " classes");
    }
    if (!class_weights.empty() && static_cast<int64_t>(class_weights.size()) != n_classes) {
      return runtime::invalid_argument("class_weights has ", class_weights.size(), " weights for ",
                                       n_classes, " classes");
    }
    for (double w : class_weights) {
      if (!(w >= 0)) return runtime::invalid_argument("class_weights must not be negative");
    }
    if (multi_label && (!label_vocabulary.empty() || loss == "hinge")) {
      return runtime::invalid_argument(
          "a multi-label head takes 0/1 labels per class and the log loss");
    }
    for (const std::string& name : metrics) {
      if (multi_label) return runtime::invalid_argument("metrics: a multi-label head has none");
      const std::string kind = class_metric_kind(name, n_classes);
      if (kind.empty() || !make_metric(kind).ok()) {
        return runtime::invalid_argument(
            "metrics: '", name,
            "' is not precision_, recall_ or f1_ with micro, macro or weighted, "
            "mean_per_class_accuracy, mean_iou, precision_at_K, recall_at_K or top_K_accuracy");
      }
    }
  } else if (!label_vocabulary.empty() || !class_weights.empty() || multi_label ||
             !metrics.empty()) {
    return runtime::invalid_argument("a regressor has no classes to name or weigh");
  }
  return check_loss(task, loss);
}

EstimatorSpec with_updates(runtime::GraphBuilder& b, EstimatorSpec spec,
                           const std::vector<int>& updates) {
  if (spec.train_op < 0 || updates.empty()) return spec;
  std::vector<int> all = updates;
  all.push_back(spec.train_op);
  spec.train_op = ops::no_op(b, all, "train_with_updates");
  return spec;
}

runtime::Result<EstimatorSpec> head_spec(ModelInputs& in, const Head& head, Output logits,
                                         const ops::Optimizer& optimizer, Output regularization) {
  return head_spec(in, head, logits, std::vector<ops::OptimizerPart>{{optimizer, {}}},
                   regularization);
}

namespace {

// TF's multi_head: each head on its slice of the logits and its own label column; the loss
// the weighted sum of theirs.
runtime::Result<EstimatorSpec> multi_head_spec(ModelInputs& in, const Head& head, Output logits) {
  TROUPE_ASSIGN_OR_RETURN(std::vector<HeadPart> parts, parse_heads(head.options.heads));
  const std::vector<Head> heads = heads_of(head, parts);
  runtime::GraphBuilder& b = in.b;
  const runtime::Shape& shape = b.shape(logits);
  if (shape.rank_known() && shape.rank() == 2 && shape.dim(1) >= 0 &&
      shape.dim(1) != logits_dimension(head)) {
    return runtime::invalid_argument("heads: the logits are ", shape.to_string(),
                                     ", the heads take ", logits_dimension(head));
  }
  EstimatorSpec spec;
  int64_t at = 0;
  for (size_t k = 0; k < heads.size(); ++k) {
    const std::string& name = parts[k].name;
    const int64_t d = logits_dimension(heads[k]);
    ModelInputs own = in;
    if (in.mode != Mode::kPredict) {
      auto label = in.labels_by_name.find(name);
      if (label == in.labels_by_name.end()) {
        return runtime::invalid_argument("head '", name, "': the data has no label column '", name,
                                         "' (input::with_labels names a model's labels)");
      }
      own.labels = label->second;
    }
    auto scope = b.name_scope(name);
    Output part = ops::slice(b, logits, {0, at}, {-1, d});
    at += d;
    TROUPE_ASSIGN_OR_RETURN(EstimatorSpec one, head_spec(own, heads[k], part));
    for (const auto& [key, value] : one.predictions) spec.predictions[name + "/" + key] = value;
    if (one.export_scores.valid()) {
      spec.head_scores[name] = one.export_scores;
      if (!parts[k].label_vocabulary.empty()) {
        // TF's ClassificationOutput classes: every class's name, a row an example.
        const int64_t n = heads[k].n_classes;
        std::vector<int64_t> range(static_cast<size_t>(n));
        for (int64_t c = 0; c < n; ++c) range[static_cast<size_t>(c)] = c;
        Output ids = ops::add(b, ops::cast(b, ops::zeros_like(b, one.export_scores), DType::kInt64),
                              ops::constant(b, runtime::Tensor::from_vector(Shape{n}, range)));
        spec.head_classes[name] = ops::gather(b, vocabulary(b, heads[k]), ids);
      }
    }
    if (one.export_regression.valid()) spec.head_regression[name] = one.export_regression;
    if (in.mode == Mode::kPredict) continue;
    for (const auto& [key, metric] : one.eval_metric_ops) {
      spec.eval_metric_ops[key + "/" + name] = metric;
    }
    // The batch's loss once per example, so that the mean over an evaluation weighs batches by
    // their examples, as the total loss does.
    Output per_example = ops::add(b, ops::zeros_like(b, ops::reduce_sum(b, part, {1})), one.loss);
    spec.eval_metric_ops["loss/" + name] = {"mean", per_example, per_example};
    Output weighted = parts[k].weight == 1 ? one.loss : ops::mul(b, one.loss, parts[k].weight);
    spec.loss = spec.loss.valid() ? ops::add(b, spec.loss, weighted) : weighted;
  }
  return spec;
}

}  // namespace

runtime::Result<EstimatorSpec> head_spec(ModelInputs& in, const Head& head, Output logits) {
  TROUPE_RETURN_IF_ERROR(head.validate());
  if (!head.options.heads.empty()) return multi_head_spec(in, head, logits);
  runtime::GraphBuilder& b = in.b;
  EstimatorSpec spec;
  if (head.task == Task::kClassifier && head.options.multi_label) {
    // Each class is a yes or no of its own: a sigmoid per logit.
    Output probabilities = ops::sigmoid(b, logits);
    Output classes = ops::cast(
        b, ops::greater(b, probabilities, ops::scalar(b, 0.5, DType::kFloat32)), DType::kInt64);
    spec.predictions = {{"classes", classes}, {"logits", logits}, {"probabilities", probabilities}};
    spec.export_scores = probabilities;
    if (in.mode == Mode::kPredict) return spec;
    Output labels = ops::reshape(b, ops::cast(b, in.labels, DType::kFloat32), {-1, head.n_classes});
    Output losses = ops::sigmoid_cross_entropy_with_logits(b, labels, logits);
    if (!head.options.class_weights.empty()) {
      losses = ops::mul(
          b, losses,
          ops::constant(
              b, runtime::Tensor::from_vector(
                     Shape{head.n_classes}, std::vector<float>(head.options.class_weights.begin(),
                                                               head.options.class_weights.end()))));
    }
    TROUPE_ASSIGN_OR_RETURN(spec.loss,
                            weighted_mean(in, head, ops::reduce_mean(b, losses, {1}), Output{}));
    // Over every (example, class) pair.
    spec.eval_metric_ops["accuracy"] = {"accuracy", ops::cast(b, labels, DType::kInt64), classes};
    spec.eval_metric_ops["auc"] = {"auc", labels, probabilities};
  } else if (head.task == Task::kClassifier) {
    const bool hinge = head.loss == "hinge";
    Output classes = ops::argmax(b, logits, 1, DType::kInt64);
    spec.predictions = {{"classes", classes}, {"logits", logits}};
    if (!head.options.label_vocabulary.empty()) {
      // The class names, for people and for serving; "classes" stays the ids metrics count.
      spec.predictions["class_labels"] = ops::gather(b, vocabulary(b, head), classes);
    }
    Output probabilities;
    if (!hinge) {
      probabilities = ops::softmax(b, logits);
      spec.predictions["probabilities"] = probabilities;
    }
    spec.export_scores = hinge ? logits : probabilities;
    if (in.mode == Mode::kPredict) return spec;
    TROUPE_ASSIGN_OR_RETURN(Output labels, class_ids(in, head));
    Output losses;  // per example
    if (hinge) {
      // Crammer and Singer's multi-class hinge: the true class's score should beat every other
      // by 1, max_j (f_j + 1[j != y]) - f_y (the binary hinge for two classes). One-vs-rest
      // cannot separate a class that lies between two others.
      Output onehot = ops::one_hot(b, labels, head.n_classes);
      Output truth = ops::reduce_sum(b, ops::mul(b, logits, onehot), {1}, /*keep_dims=*/true);
      Output margins = ops::sub(b, ops::add(b, ops::neg(b, onehot), 1.0), truth);
      losses = ops::reduce_max(b, ops::add(b, logits, margins), {1});
    } else {
      losses = ops::sparse_softmax_cross_entropy_with_logits(b, labels, logits);
    }
    Output weights;
    if (!head.options.class_weights.empty()) {
      weights = ops::gather(
          b,
          ops::constant(b, runtime::Tensor::from_vector(
                               Shape{static_cast<int64_t>(head.options.class_weights.size())},
                               std::vector<float>(head.options.class_weights.begin(),
                                                  head.options.class_weights.end()))),
          labels);
    }
    TROUPE_ASSIGN_OR_RETURN(spec.loss, weighted_mean(in, head, losses, weights));
    spec.eval_metric_ops["accuracy"] = {"accuracy", labels, classes};
    for (const std::string& name : head.options.metrics) {
      const std::string kind = class_metric_kind(name, head.n_classes);
      spec.eval_metric_ops[name] = {kind, labels,
                                    ranks_scores(kind) ? spec.export_scores : classes};
    }
    if (head.n_classes == 2) {
      if (!hinge) {
        Output positive = ops::reshape(b, ops::slice(b, probabilities, {0, 1}, {-1, 1}), {-1});
        spec.eval_metric_ops["auc"] = {"auc", labels, positive};
      }
      spec.eval_metric_ops["precision"] = {"precision", labels, classes};
      spec.eval_metric_ops["recall"] = {"recall", labels, classes};
    }
  } else {
    Output predictions = logits;
    if (!head.label.mean.empty()) {
      const int64_t d = head.label_dimension;
      if (static_cast<int64_t>(head.label.mean.size()) != d ||
          static_cast<int64_t>(head.label.scale.size()) != d) {
        return runtime::invalid_argument("the label's statistics have ", head.label.mean.size(),
                                         " values for label_dimension ", d);
      }
      auto scope = b.name_scope("head");
      auto held = [&](const char* name, const std::vector<float>& v) {
        return ops::variable(b, name, Shape{d}, DType::kFloat32,
                             ops::constant(b, runtime::Tensor::from_vector(Shape{d}, v)),
                             /*trainable=*/false);
      };
      predictions = ops::add(b, ops::mul(b, logits, held("label_scale", head.label.scale)),
                             held("label_mean", head.label.mean));
    }
    spec.predictions = {{"predictions", predictions}};
    spec.export_regression = predictions;
    if (in.mode == Mode::kPredict) return spec;
    Output labels =
        ops::reshape(b, ops::cast(b, in.labels, DType::kFloat32), {-1, head.label_dimension});
    Output losses;  // per example: the mean over the label's dimensions
    if (head.loss == "epsilon_insensitive") {
      Output excess = ops::sub(b, ops::abs(b, ops::sub(b, labels, predictions)), head.epsilon);
      losses = ops::reduce_mean(b, ops::maximum(b, excess, ops::zeros_like(b, excess)), {1});
    } else {
      losses = ops::reduce_mean(b, ops::square(b, ops::sub(b, labels, predictions)), {1});
    }
    TROUPE_ASSIGN_OR_RETURN(spec.loss, weighted_mean(in, head, losses, Output{}));
    spec.eval_metric_ops["rmse"] = {"rmse", labels, predictions};
    spec.eval_metric_ops["mae"] = {"mae", labels, predictions};
  }
  if (in.mode != Mode::kPredict) {
    // Metrics weigh examples as the loss does.
    TROUPE_ASSIGN_OR_RETURN(Output w, example_weights(in, head));
    for (auto& [name, metric] : spec.eval_metric_ops) metric.weights = w;
  }
  return spec;
}

runtime::Result<EstimatorSpec> head_spec(ModelInputs& in, const Head& head, Output logits,
                                         const std::vector<ops::OptimizerPart>& parts,
                                         Output regularization) {
  if (parts.empty()) return runtime::invalid_argument("head_spec: no optimizer");
  TROUPE_ASSIGN_OR_RETURN(EstimatorSpec spec, head_spec(in, head, logits));
  runtime::GraphBuilder& b = in.b;
  if (in.mode == Mode::kTrain) {
    // One variable the Experiment lowers on a plateau: the first part's rate; the others keep
    // their ratio to it.
    const double first = parts[0].optimizer.learning_rate;
    Output lr = ops::variable(b, "learning_rate", Shape{}, DType::kFloat32,
                              ops::fill(b, Shape{}, first, DType::kFloat32),
                              /*trainable=*/false);
    // Each part's schedule applies to its share of that variable, built here once so that the
    // first part's rate is also what TensorBoard shows.
    std::vector<ops::OptimizerPart> scheduled = parts;
    Output step = ops::global_step(b);
    for (ops::OptimizerPart& p : scheduled) {
      const double ratio = first > 0 ? p.optimizer.learning_rate / first : 1.0;
      Output rate = ratio == 1.0 ? lr : ops::mul(b, lr, ratio);
      p.optimizer.learning_rate_tensor = ops::scheduled_rate(b, rate, p.optimizer.schedule, step);
      p.optimizer.schedule = {};
    }
    spec.learning_rate = scheduled[0].optimizer.learning_rate_tensor;
    Output objective = regularization.valid() ? ops::add(b, spec.loss, regularization) : spec.loss;
    spec.train_op = ops::minimize(b, objective, scheduled);
  }
  return spec;
}

runtime::Result<HeadTargets> head_targets(ModelInputs& in, const Head& head) {
  TROUPE_RETURN_IF_ERROR(head.validate());
  if (!head.options.heads.empty()) {
    return runtime::invalid_argument("heads: the tree models train one head");
  }
  runtime::GraphBuilder& b = in.b;
  HeadTargets out;
  TROUPE_ASSIGN_OR_RETURN(Output w, example_weights(in, head));
  if (w.valid()) out.weights = ops::reshape(b, w, {-1, 1});
  if (head.task == Task::kRegressor) {
    const int64_t d = head.label_dimension;
    out.targets = ops::reshape(b, ops::cast(b, in.labels, DType::kFloat32), {-1, d});
    if (head.loss == "epsilon_insensitive") {
      return runtime::invalid_argument("trees fit the squared loss, not epsilon_insensitive");
    }
    if (!head.label.mean.empty()) {
      auto constant = [&](const std::vector<float>& v) {
        return ops::constant(b, runtime::Tensor::from_vector(Shape{d}, v));
      };
      out.targets = ops::div(b, ops::sub(b, out.targets, constant(head.label.mean)),
                             constant(head.label.scale));
    }
    return out;
  }
  if (head.loss == "hinge") return runtime::invalid_argument("trees fit the log loss, not hinge");
  Output class_w;
  if (!head.options.class_weights.empty()) {
    class_w = ops::constant(
        b, runtime::Tensor::from_vector(Shape{head.n_classes},
                                        std::vector<float>(head.options.class_weights.begin(),
                                                           head.options.class_weights.end())));
  }
  if (head.options.multi_label) {
    out.targets = ops::reshape(b, ops::cast(b, in.labels, DType::kFloat32), {-1, head.n_classes});
    if (class_w.valid()) {
      Output per_class = ops::reshape(b, class_w, {1, -1});
      out.weights = out.weights.valid() ? ops::mul(b, out.weights, per_class) : per_class;
    }
    return out;
  }
  TROUPE_ASSIGN_OR_RETURN(Output labels, class_ids(in, head));
  out.targets = ops::one_hot(b, labels, head.n_classes);
  if (class_w.valid()) {
    Output per_example = ops::reshape(b, ops::gather(b, class_w, labels), {-1, 1});
    out.weights = out.weights.valid() ? ops::mul(b, out.weights, per_example) : per_example;
  }
  return out;
}

}  // namespace troupe::estimators
