// Heads: what a canned model's logits become (predictions, loss, evaluation metrics, the train
// op and the export outputs), as tf.estimator's heads, so that every canned model of a task
// predicts, evaluates and serves alike. A multi-head model (HeadOptions::heads, TF's
// multi_head) has a head per label column: its logits split among them, its loss their
// weighted sum, each head's predictions "<head>/classes", metrics "accuracy/<head>" and
// "loss/<head>", and an export signature "<head>".
//
//   Output logits = ...;                               // [batch, logits_dimension(head)]
//   return head_spec(in, {.task = Task::kClassifier, .n_classes = 3}, logits, optimizer);
//
// Classifiers: n_classes logits; predictions classes (int64 [batch]) and logits; loss "log"
// (the default: softmax cross-entropy, with probabilities among the predictions, served by
// classify) or "hinge" (Crammer and Singer's multi-class hinge loss, a linear SVM's; classify
// serves the logits); metrics accuracy (and precision, recall, and auc with probabilities, for two
// classes). Regressors: predictions [batch, label_dimension]; loss "squared" (the default: mean
// squared error) or "epsilon_insensitive" (max(0, |y - f| - epsilon), a linear SVR's); metrics rmse
// and mae; regress serves the predictions. The losses are scikit-learn's SGD loss names. Training
// adds the learning-rate variable "learning_rate" (which an Experiment lowers on a plateau) and
// minimizes loss plus `regularization` with `optimizer`. Losses are the batch's mean of each
// example's, weighted by a weight column and by class weights when given; metrics are weighted
// by the weight column too.
#pragma once

#include "estimators/canned/input_layer.h"
#include "estimators/canned/params.h"
#include "estimators/model_fn.h"

namespace troupe::estimators {

// What a user chooses of a canned model's head beyond its task and classes; every canned
// options struct holds one (`.head = {.label_vocabulary = {"no", "yes"}}`).
struct HeadOptions {
  // Classifiers: the class names of text labels, in class id order (class_labels among the
  // predictions); each class's weight in the loss (scikit-learn's class_weight; data, not a
  // param); labels [batch, n_classes] of 0 and 1, any number of classes an example (TF's
  // multi-label head: a sigmoid per class, classes [batch, n_classes] where p > 0.5).
  std::vector<std::string> label_vocabulary;
  std::vector<double> class_weights;
  bool multi_label = false;
  // A feature whose value weighs each example's loss (TF's weight_column), never read as a
  // feature; empty: none.
  std::string weight_column;
  // A classifier's evaluation metrics beyond accuracy (and a binary one's auc, precision and
  // recall), by name: precision_, recall_ and f1_ with micro, macro or weighted (scikit-learn's
  // averages), mean_per_class_accuracy, mean_iou, precision_at_K and recall_at_K (tf.metrics');
  // single-label heads only.
  std::vector<std::string> metrics;
  // Several heads, one per label column (tf.contrib.estimator.multi_head): "NAME:classifier:N"
  // (N classes) or "NAME:regressor:D" (D values), each optionally followed by ":weight=W" (its
  // loss's weight in the sum; 1), ":multi_label" (a classifier of 0/1 labels per class) and,
  // for a classifier of text labels, ":vocabulary=a|b|c",
  // separated by commas; names, words and vocabularies percent-escape ',', ':', '|' and '%'.
  // The model's logits are the heads' side by side; its task, n_classes and label_dimension,
  // and the options above but weight_column, are each head's instead. Empty: one head.
  std::string heads;
  // Each regressor head's target statistics, by head (its label column), as Head::label is a
  // single regressor's; data, not a param.
  Standardization head_labels;

  template <class Self, class F>
  static void fields(Self& o, Task task, F&& f) {
    if (task == Task::kClassifier) {
      f("label_vocabulary", o.label_vocabulary);
      f("multi_label", o.multi_label);
      f("metrics", o.metrics);
    }
    f("weight_column", o.weight_column);
    f("heads", o.heads);
  }
};

// One head of a multi-head model, as HeadOptions::heads spells it.
struct HeadPart {
  std::string name;  // the label column it reads; names its metrics, predictions and signature
  Task task = Task::kClassifier;
  int64_t n_classes = 2;        // classifiers
  int64_t label_dimension = 1;  // regressors
  double weight = 1;
  std::vector<std::string> label_vocabulary;
  bool multi_label = false;  // a classifier's labels [batch, n_classes] of 0 and 1 (":multi_label")
};
// HeadOptions::heads read, or the error naming the part that does not read; and written.
runtime::Result<std::vector<HeadPart>> parse_heads(const std::string& text);
std::string heads_text(const std::vector<HeadPart>& heads);

struct Head {
  Task task = Task::kClassifier;
  int64_t n_classes = 2;        // classifiers
  int64_t label_dimension = 1;  // regressors
  std::string loss;             // empty: log for classifiers, squared for regressors
  double epsilon = 0.1;         // of epsilon_insensitive
  // A regressor's target statistics: its outputs are scaled by them (held in the non-trainable
  // variables head/label_mean and head/label_scale), so that a target far from 0 or of a large
  // scale starts where the data is. Empty: none.
  FeatureStats label;
  HeadOptions options;

  runtime::Status validate() const;
};

// The head options every canned model shares, from its options struct.
template <class Options>
Head head_of(const Options& o, Task task) {
  Head h;
  h.task = task;
  h.n_classes = o.n_classes;
  h.label_dimension = o.label_dimension;
  h.label = o.standardize_label;
  h.options = o.head;
  return h;
}

// What the head's loss compares the logits with, for models that fit it without gradient
// descent (the tree ensembles): targets [batch, logits_dimension] (one-hot classes, a
// multi-label head's 0/1 labels, a regressor's label standardized by the head's statistics) and
// each example's weight in the loss (weight column times class weight, broadcastable to the
// targets; invalid when all are 1). Hinge and epsilon_insensitive losses are refused.
struct HeadTargets {
  runtime::Output targets;
  runtime::Output weights;
};
runtime::Result<HeadTargets> head_targets(ModelInputs& in, const Head& head);

// An error naming the loss when it is not one of the task's.
runtime::Status check_loss(Task task, const std::string& loss);

int64_t logits_dimension(const Head& head);

runtime::Result<EstimatorSpec> head_spec(ModelInputs& in, const Head& head, runtime::Output logits,
                                         const ops::Optimizer& optimizer,
                                         runtime::Output regularization = {});
// Predictions, loss and metrics without a train op: for models that train by other means than
// gradient descent on their variables (the tree ensembles).
runtime::Result<EstimatorSpec> head_spec(ModelInputs& in, const Head& head, runtime::Output logits);
// `spec` whose train op also runs `updates` (TF's UPDATE_OPS: batch normalization's moving
// averages); unchanged when there are none or it does not train.
EstimatorSpec with_updates(runtime::GraphBuilder& b, EstimatorSpec spec,
                           const std::vector<int>& updates);
// Several optimizers, each training its part's variables (wide & deep); the learning_rate
// variable holds the first part's rate and the others keep their ratio to it.
runtime::Result<EstimatorSpec> head_spec(ModelInputs& in, const Head& head, runtime::Output logits,
                                         const std::vector<ops::OptimizerPart>& parts,
                                         runtime::Output regularization = {});

}  // namespace troupe::estimators
