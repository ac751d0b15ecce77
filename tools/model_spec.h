// What troupe's commands know of a canned model: a registry of the canned models (one row each:
// its name, the flags that set its params and their defaults, the params that fix its
// variables, how it reads its data, and the factory that builds it from typed options), and a
// model's spec: its kind, task, typed options, the statistics its numeric features are
// standardized with, its label and its features, and the description model_dir keeps of it
// (troupe_model.txt), from which evaluate, predict, export and search rebuild it. Flags are
// read into the options once; text lives only in that file.
//
//   auto options = model_options(ModelKind::kLinear, Task::kRegressor, flags);  // defaults, flags
//   ModelSpec spec{.model = ModelKind::kLinear, .task = Task::kRegressor, .options = *options};
//   TROUPE_RETURN_IF_ERROR(set_params(&spec, {{"label_dimension", int64_t{2}}}));
//   TROUPE_ASSIGN_OR_RETURN(estimators::ModelFn fn, model_fn_of(spec));   // checks every param
//   TROUPE_RETURN_IF_ERROR(save_model_spec(model_dir, spec));
#pragma once

#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "estimators/canned/dnn.h"
#include "estimators/canned/feature_column.h"
#include "estimators/canned/input_layer.h"
#include "estimators/canned/kmeans.h"
#include "estimators/canned/linear.h"
#include "estimators/canned/model.h"
#include "estimators/canned/params.h"
#include "estimators/canned/rnn.h"
#include "estimators/canned/trees.h"
#include "estimators/canned/wide_deep.h"
#include "tools/cli.h"
#include "tools/data_spec.h"

namespace troupe::cli {

// The canned models `troupe train --model` takes.
enum class ModelKind {
  kDnn,
  kLinear,
  kSvm,
  kWideDeep,
  kKMeans,
  kBoostedTrees,
  kRandomForest,
  kRnn
};

// One row of the registry.
struct CannedModelInfo {
  ModelKind kind;
  const char* name;  // on the command line and in troupe_model.txt
  // Grows trees until done, each layer from a batch that is its sample (no epochs, no
  // gradients to average): boosted_trees and random_forest.
  bool trees = false;
  // Its weights spread over a cluster's ps tasks in parts (runtime::fit_partitions restores
  // them into any number of parts).
  bool partitioned = false;
  // Reads a table's text columns one-hot or embedded (dnn, wide_deep, trees); the linear
  // models weigh each value.
  bool dense_columns = true;
  const char* default_batch = "128";
};

const CannedModelInfo& model_info(ModelKind kind);
// The error names the word and the models there are.
runtime::Result<ModelKind> parse_model_kind(const std::string& name);
std::string model_kinds_text();  // "dnn, linear, ... or random_forest", for messages

// A canned model's hyperparameters, typed: one alternative per options type (linear and svm
// share LinearOptions; svm's loss is hinge or epsilon_insensitive).
using ModelOptions =
    std::variant<estimators::DNNOptions, estimators::LinearOptions, estimators::KMeansOptions,
                 estimators::DNNLinearCombinedOptions, estimators::BoostedTreesOptions,
                 estimators::RandomForestOptions, estimators::RNNOptions>;

struct ModelSpec {
  ModelKind model = ModelKind::kDnn;
  estimators::Task task = estimators::Task::kClassifier;  // not kmeans's, which clusters
  // The alternative of `model`'s options type. Its columns, standardization and starting
  // centers are the fields below, which join the options when the model is built.
  ModelOptions options;
  estimators::Standardization standardize;  // the label's too, for a regressor's target
  // How the model reads its features (tools/column_spec.h); empty: every feature as numbers.
  // Wide & deep: `columns` are the deep part's, `wide_columns` the linear part's.
  std::vector<estimators::FeatureColumn> columns;
  std::vector<estimators::FeatureColumn> wide_columns;
  std::string label;
  std::vector<estimators::ServingInput> inputs;  // once trained
  std::vector<float> initial_centers;            // kmeans's, drawn from the training data
  int64_t libsvm_features = 0;  // libsvm data: the width of the rows it was trained on
  // SequenceExample data: the steps its sequences were cut or padded to, which the model's
  // inputs are shaped by; evaluation and prediction read theirs at this length.
  int64_t sequence_length = 0;
  // TFRecord data is parsed as the columns read it (--columns given): data_options says so.
  bool parse_by_columns = false;
};

const std::vector<std::string>& model_param_flags();  // every model's, for parse_flags
// The model's default options, then those its flags set (--hidden 64,32, --learning-rate ...);
// a flag of another model, or a value that does not read as its param's type, is an error
// naming it. The whole is validated later (model_fn_of), once the data has said how many
// classes there are.
runtime::Result<ModelOptions> model_options(ModelKind model, estimators::Task task,
                                            const Flags& flags);
// --model, --regression and the model's flags: its kind, task and options.
runtime::Result<ModelSpec> model_spec_of(const Flags& flags);
// Sets params of spec.options by name (the number of classes, a label vocabulary, the number
// of partitions), without validating the whole; the error names the param.
runtime::Status set_params(ModelSpec* spec, const estimators::ParamMap& params);
// Every param of spec.options, by name.
estimators::ParamMap params_of(const ModelSpec& spec);
// --standardize auto|on|off: whether the numeric columns of `data` are standardized (auto: for
// csv tables and libsvm files; Fashion-MNIST's pixels lie in [0, 1] already).
runtime::Result<bool> standardize_of(const Flags& flags, const std::string& data);

// The params that fix a model's variables: another value needs another model_dir.
std::vector<std::string> shape_params(ModelKind model, estimators::Task task);

// The options joined with the columns and standardization, validated: the error names a param
// that is wrong.
runtime::Status check_model(const ModelSpec& spec);
runtime::Result<estimators::ModelFn> model_fn_of(const ModelSpec& spec);
// The canned model for scikit-learn's protocol (troupe search); without standardization.
runtime::Result<std::unique_ptr<estimators::Model>> make_model(const ModelSpec& spec,
                                                               estimators::RunConfig config);

// How a trained model reads more of its data: libsvm rows as wide as in training, and their
// labels as its class names; sequences at its length; TFRecord features as its columns read
// them when it was trained so (an error names a column that cannot say); a CSV's sequence
// columns as sequences.
runtime::Result<DataOptions> data_options(const ModelSpec& spec);
// The features sequence columns read (sequence_numeric, sequence_identity, ...).
std::vector<std::string> sequence_keys(const std::vector<estimators::FeatureColumn>& columns);

runtime::Status save_model_spec(const std::string& dir, const ModelSpec& spec);
runtime::Result<ModelSpec> load_model_spec(const std::string& dir);

}  // namespace troupe::cli
