// What troupe's commands know of a canned model: its kind (dnn, linear, svm), its task, its
// params as text, the statistics its numeric features are standardized with, its label and its
// features; the flags that set its params; and the description model_dir keeps of it
// (troupe_model.txt), from which evaluate, predict, export and search rebuild it.
//
//   auto params = model_params("linear", flags);          // defaults, then --l1, --l2, ...
//   ModelSpec spec{.model = "linear", .task = Task::kRegressor, .params = *params, ...};
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

namespace troupe::cli {

struct ModelSpec {
  std::string model = "dnn";                              // one of model_kinds()
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

// The models `troupe train --model` takes, and the flags that set params of each.
const std::vector<std::string>& model_kinds();
std::string model_kinds_text();  // "dnn, linear, ... or random_forest", for messages
// boosted_trees and random_forest: they grow until done, on batches that are a layer's sample.
bool is_tree_model(const std::string& model);
const std::vector<std::string>& model_param_flags();  // every model's, for parse_flags
// The model's default params, then those its flags give (--hidden 64,32, --learning-rate ...);
// a flag of another model is an error naming it.
runtime::Result<estimators::TextParams> model_params(const std::string& model,
                                                     estimators::Task task, const Flags& flags);
// --model, --regression and the model's flags: its kind, task and params (defaults filled in
// by resolved_params later, once the data has said how many classes there are).
runtime::Result<ModelSpec> model_spec_of(const Flags& flags);
// --standardize auto|on|off: whether the numeric columns of `data` are standardized (auto: for
// csv tables and libsvm files; Fashion-MNIST's pixels lie in [0, 1] already).
runtime::Result<bool> standardize_of(const Flags& flags, const std::string& data);

// The params that fix a model's variables: another value needs another model_dir.
std::vector<std::string> shape_params(const std::string& model, estimators::Task task);

// Every param of the model, its defaults filled in, as the info file keeps them; an error names
// a param that is wrong.
runtime::Result<estimators::TextParams> resolved_params(const ModelSpec& spec);
runtime::Result<estimators::ModelFn> model_fn_of(const ModelSpec& spec);
// The canned model for scikit-learn's protocol (troupe search); without standardization.
runtime::Result<std::unique_ptr<estimators::Model>> make_model(const ModelSpec& spec,
                                                               estimators::RunConfig config);

runtime::Status save_model_spec(const std::string& dir, const ModelSpec& spec);
runtime::Result<ModelSpec> load_model_spec(const std::string& dir);

}  // namespace troupe::cli
