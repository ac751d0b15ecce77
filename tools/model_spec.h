// What troupe's commands know of a canned model: a registry of the canned models (one row each:
// its name, the flags that set its params and their defaults, the params that fix its
// variables, how it reads its data, and the factory that builds it from typed options), and a
// model's spec: its kind, task, params, the statistics its numeric features are standardized
// with, its label and its features, and the description model_dir keeps of it
// (troupe_model.txt), from which evaluate, predict, export and search rebuild it. Params are
// text only here and in that file: the factory turns them into the model's options type.
//
//   auto params = model_params(ModelKind::kLinear, Task::kRegressor, flags);   // defaults, flags
//   ModelSpec spec{.model = ModelKind::kLinear, .task = Task::kRegressor, .params = *params};
//   TROUPE_ASSIGN_OR_RETURN(estimators::ModelFn fn, model_fn_of(spec));   // checks every param
//   TROUPE_RETURN_IF_ERROR(save_model_spec(model_dir, spec));
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "estimators/canned/feature_column.h"
#include "estimators/canned/input_layer.h"
#include "estimators/canned/model.h"
#include "estimators/canned/params.h"
#include "tools/cli.h"
#include "tools/data_spec.h"

namespace troupe::cli {

// The canned models `troupe train --model` takes.
enum class ModelKind { kDnn, kLinear, kSvm, kWideDeep, kKMeans, kBoostedTrees, kRandomForest };

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

struct ModelSpec {
  ModelKind model = ModelKind::kDnn;
  estimators::Task task = estimators::Task::kClassifier;  // not kmeans's, which clusters
  estimators::TextParams params;
  estimators::Standardization standardize;  // the label's too, for a regressor's target
  // How the model reads its features (tools/column_spec.h); empty: every feature as numbers.
  // Wide & deep: `columns` are the deep part's, `wide_columns` the linear part's.
  std::vector<estimators::FeatureColumn> columns;
  std::vector<estimators::FeatureColumn> wide_columns;
  std::string label;
  std::vector<estimators::ServingInput> inputs;  // once trained
  std::vector<float> initial_centers;            // kmeans's, drawn from the training data
  int64_t libsvm_features = 0;  // libsvm data: the width of the rows it was trained on
};

const std::vector<std::string>& model_param_flags();  // every model's, for parse_flags
// The model's default params, then those its flags give (--hidden 64,32, --learning-rate ...);
// a flag of another model is an error naming it.
runtime::Result<estimators::TextParams> model_params(ModelKind model, estimators::Task task,
                                                     const Flags& flags);
// --model, --regression and the model's flags: its kind, task and params (defaults filled in
// by resolved_params later, once the data has said how many classes there are).
runtime::Result<ModelSpec> model_spec_of(const Flags& flags);
// --standardize auto|on|off: whether the numeric columns of `data` are standardized (auto: for
// csv tables and libsvm files; Fashion-MNIST's pixels lie in [0, 1] already).
runtime::Result<bool> standardize_of(const Flags& flags, const std::string& data);

// The params that fix a model's variables: another value needs another model_dir.
std::vector<std::string> shape_params(ModelKind model, estimators::Task task);

// Every param of the model, its defaults filled in, as the info file keeps them; an error names
// a param that is wrong.
runtime::Result<estimators::TextParams> resolved_params(const ModelSpec& spec);
runtime::Result<estimators::ModelFn> model_fn_of(const ModelSpec& spec);
// The canned model for scikit-learn's protocol (troupe search); without standardization.
runtime::Result<std::unique_ptr<estimators::Model>> make_model(const ModelSpec& spec,
                                                               estimators::RunConfig config);

// How a trained model reads more of its data: libsvm rows as wide as in training, and their
// labels as its class names.
DataOptions data_options(const ModelSpec& spec);

runtime::Status save_model_spec(const std::string& dir, const ModelSpec& spec);
runtime::Result<ModelSpec> load_model_spec(const std::string& dir);

}  // namespace troupe::cli
