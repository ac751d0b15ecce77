#include "tools/model_spec.h"

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "estimators/canned/dnn.h"
#include "estimators/canned/kmeans.h"
#include "estimators/canned/linear.h"
#include "estimators/canned/trees.h"
#include "estimators/canned/wide_deep.h"
#include "runtime/record_io.h"
#include "tools/column_spec.h"

namespace troupe::cli {

using estimators::Task;
using estimators::TextParams;

namespace {

struct FlagParam {
  const char* flag;
  const char* param;
};

// Each model's flags and defaults (troupe's, tuned for the command line: Adam for the DNN,
// FTRL for the linear models as TF).
const std::vector<FlagParam> kDnnFlags = {
    {"hidden", "hidden_units"},  {"optimizer", "optimizer"},   {"learning-rate", "learning_rate"},
    {"dropout", "dropout"},      {"activation", "activation"}, {"clip-norm", "clip_norm"},
    {"batch-norm", "batch_norm"}};
const std::vector<FlagParam> kLinearFlags = {{"optimizer", "optimizer"},
                                             {"learning-rate", "learning_rate"},
                                             {"l1", "l1"},
                                             {"l2", "l2"},
                                             {"clip-norm", "clip_norm"}};

const std::vector<FlagParam> kKMeansFlags = {{"n-clusters", "n_clusters"}, {"init", "init"}};
// Wide & deep: the DNN's flags set the deep part, --linear-* the wide part.
const std::vector<FlagParam> kWideDeepFlags = {
    {"hidden", "dnn_hidden_units"},           {"optimizer", "dnn_optimizer"},
    {"learning-rate", "dnn_learning_rate"},   {"dropout", "dnn_dropout"},
    {"activation", "dnn_activation"},         {"clip-norm", "clip_norm"},
    {"linear-optimizer", "linear_optimizer"}, {"linear-learning-rate", "linear_learning_rate"}};

const std::vector<FlagParam> kBoostedTreesFlags = {{"n-trees", "n_trees"},
                                                   {"max-depth", "max_depth"},
                                                   {"learning-rate", "learning_rate"},
                                                   {"l1", "l1"},
                                                   {"l2", "l2"},
                                                   {"max-bins", "max_bins"}};
const std::vector<FlagParam> kRandomForestFlags = {{"n-trees", "n_trees"},
                                                   {"max-depth", "max_depth"},
                                                   {"max-nodes", "max_nodes"},
                                                   {"max-features", "max_features"},
                                                   {"max-bins", "max_bins"}};

const std::vector<FlagParam>& flags_of(const std::string& model) {
  if (model == "kmeans") return kKMeansFlags;
  if (model == "wide_deep") return kWideDeepFlags;
  if (model == "boosted_trees") return kBoostedTreesFlags;
  if (model == "random_forest") return kRandomForestFlags;
  return model == "dnn" ? kDnnFlags : kLinearFlags;
}

}  // namespace

const std::vector<std::string>& model_kinds() {
  static const std::vector<std::string> kinds = {
      "dnn", "linear", "svm", "kmeans", "wide_deep", "boosted_trees", "random_forest"};
  return kinds;
}

bool is_tree_model(const std::string& model) {
  return model == "boosted_trees" || model == "random_forest";
}

std::string model_kinds_text() {
  std::string text;
  for (size_t i = 0; i < model_kinds().size(); ++i) {
    text += (i == 0 ? "" : i + 1 == model_kinds().size() ? " or " : ", ") + model_kinds()[i];
  }
  return text;
}

const std::vector<std::string>& model_param_flags() {
  static const std::vector<std::string> all = [] {
    std::vector<std::string> names;
    for (const auto* list : {&kDnnFlags, &kLinearFlags, &kKMeansFlags, &kWideDeepFlags,
                             &kBoostedTreesFlags, &kRandomForestFlags}) {
      for (const FlagParam& f : *list) {
        if (std::find(names.begin(), names.end(), f.flag) == names.end()) names.push_back(f.flag);
      }
    }
    return names;
  }();
  return all;
}

runtime::Result<TextParams> model_params(const std::string& model, Task task, const Flags& flags) {
  if (std::find(model_kinds().begin(), model_kinds().end(), model) == model_kinds().end()) {
    return runtime::invalid_argument("--model '", model, "' is not ", model_kinds_text());
  }
  TextParams p;
  if (model == "dnn") {
    p = {{"hidden_units", "256,128"}, {"optimizer", "adam"}, {"learning_rate", "0.001"}};
  } else if (model == "wide_deep") {
    p = {{"dnn_hidden_units", "128,64"}, {"dnn_optimizer", "adam"}, {"dnn_learning_rate", "0.001"}};
  } else if (model == "kmeans") {
    p = {{"n_clusters", "8"}};
  } else if (model == "svm") {
    p = {{"loss", task == Task::kClassifier ? "hinge" : "epsilon_insensitive"}};
  }
  for (const std::string& flag : model_param_flags()) {
    auto given = flags.find(flag);
    if (given == flags.end()) continue;
    bool found = false;
    for (const FlagParam& f : flags_of(model)) {
      if (flag == f.flag) {
        p[f.param] = given->second;
        found = true;
      }
    }
    if (!found) return runtime::invalid_argument("--", flag, " is not a flag of --model ", model);
  }
  return p;
}

runtime::Result<ModelSpec> model_spec_of(const Flags& flags) {
  ModelSpec spec;
  if (auto m = flags.find("model"); m != flags.end()) spec.model = m->second;
  spec.task = flags.count("regression") ? Task::kRegressor : Task::kClassifier;
  TROUPE_ASSIGN_OR_RETURN(spec.params, model_params(spec.model, spec.task, flags));
  return spec;
}

runtime::Result<bool> standardize_of(const Flags& flags, const std::string& data) {
  auto s = flags.find("standardize");
  const std::string how = s == flags.end() ? "auto" : s->second;
  if (how != "auto" && how != "on" && how != "off") {
    return runtime::invalid_argument("--standardize: '", how, "' is not auto, on or off");
  }
  return how == "on" ||
         (how == "auto" && (data.rfind("csv:", 0) == 0 || data.rfind("libsvm:", 0) == 0));
}

std::vector<std::string> shape_params(const std::string& model, Task task) {
  if (model == "kmeans") return {"n_clusters"};
  std::vector<std::string> names = {task == Task::kClassifier ? "n_classes" : "label_dimension"};
  if (model == "dnn") {
    names.insert(names.end(), {"hidden_units", "activation"});
  } else if (model == "wide_deep") {
    names.insert(names.end(), {"dnn_hidden_units", "dnn_activation"});
  } else if (model == "boosted_trees") {
    names.insert(names.end(), {"n_trees", "max_depth", "max_bins"});
  } else if (model == "random_forest") {
    names.insert(names.end(), {"n_trees", "max_nodes", "max_bins"});
  } else {
    names.push_back("loss");
  }
  return names;
}

namespace {

template <class Options>
runtime::Result<Options> options_of(const ModelSpec& spec, const std::string& who) {
  Options o;
  TROUPE_RETURN_IF_ERROR(estimators::assign_params(o, spec.task, spec.params, who));
  o.standardize = spec.standardize;
  o.feature_columns = spec.columns;
  if (spec.task == Task::kRegressor) {
    if (auto it = spec.standardize.find(spec.label); it != spec.standardize.end()) {
      o.standardize_label = it->second;
    }
  }
  return o;
}

// Trees read the features as they are: no standardize statistics, only the label's.
template <class Options>
runtime::Result<Options> tree_options(const ModelSpec& spec, const std::string& who) {
  Options o;
  TROUPE_RETURN_IF_ERROR(estimators::assign_params(o, spec.task, spec.params, who));
  o.feature_columns = spec.columns;
  if (spec.task == Task::kRegressor) {
    if (auto it = spec.standardize.find(spec.label); it != spec.standardize.end()) {
      o.standardize_label = it->second;
    }
  }
  return o;
}

// `make` with the options of one of the tree models.
template <class Make>
auto with_tree_options(const ModelSpec& spec, const std::string& who, Make make)
    -> decltype(make(estimators::BoostedTreesOptions{})) {
  if (spec.model == "boosted_trees") {
    TROUPE_ASSIGN_OR_RETURN(auto o, tree_options<estimators::BoostedTreesOptions>(spec, who));
    return make(o);
  }
  TROUPE_ASSIGN_OR_RETURN(auto o, tree_options<estimators::RandomForestOptions>(spec, who));
  return make(o);
}

runtime::Result<estimators::DNNLinearCombinedOptions> wide_deep_options(const ModelSpec& spec,
                                                                        const std::string& who) {
  estimators::DNNLinearCombinedOptions o;
  o.linear_feature_columns = spec.wide_columns;  // first: assign_params validates them too
  o.dnn_feature_columns = spec.columns;
  TROUPE_RETURN_IF_ERROR(estimators::assign_params(o, spec.task, spec.params, who));
  if (spec.task == Task::kRegressor) {
    if (auto it = spec.standardize.find(spec.label); it != spec.standardize.end()) {
      o.standardize_label = it->second;
    }
  }
  return o;
}

}  // namespace

runtime::Result<TextParams> resolved_params(const ModelSpec& spec) {
  const std::string who = "--model " + spec.model;
  if (spec.model == "kmeans") {
    estimators::KMeansOptions o;
    TROUPE_RETURN_IF_ERROR(estimators::assign_params(o, spec.task, spec.params, who));
    return estimators::to_text(estimators::params_of(o, spec.task));
  }
  if (spec.model == "dnn") {
    TROUPE_ASSIGN_OR_RETURN(auto o, options_of<estimators::DNNOptions>(spec, who));
    return estimators::to_text(estimators::params_of(o, spec.task));
  }
  if (spec.model == "wide_deep") {
    TROUPE_ASSIGN_OR_RETURN(auto o, wide_deep_options(spec, who));
    return estimators::to_text(estimators::params_of(o, spec.task));
  }
  if (is_tree_model(spec.model)) {
    return with_tree_options(spec, who, [&](const auto& o) -> runtime::Result<TextParams> {
      return estimators::to_text(estimators::params_of(o, spec.task));
    });
  }
  TROUPE_ASSIGN_OR_RETURN(auto o, options_of<estimators::LinearOptions>(spec, who));
  return estimators::to_text(estimators::params_of(o, spec.task));
}

runtime::Result<estimators::ModelFn> model_fn_of(const ModelSpec& spec) {
  const std::string who = "--model " + spec.model;
  if (spec.model == "kmeans") {
    estimators::KMeansOptions o;
    TROUPE_RETURN_IF_ERROR(estimators::assign_params(o, spec.task, spec.params, who));
    o.initial_centers = spec.initial_centers;
    return o.model_fn();
  }
  if (spec.model == "dnn") {
    TROUPE_ASSIGN_OR_RETURN(auto o, options_of<estimators::DNNOptions>(spec, who));
    return o.model_fn(spec.task);
  }
  if (spec.model == "wide_deep") {
    TROUPE_ASSIGN_OR_RETURN(auto o, wide_deep_options(spec, who));
    if (auto s = o.validate(spec.task); !s.ok()) return s;
    return o.model_fn(spec.task);
  }
  if (is_tree_model(spec.model)) {
    return with_tree_options(spec, who, [&](const auto& o) -> runtime::Result<estimators::ModelFn> {
      TROUPE_RETURN_IF_ERROR(o.validate(spec.task));
      return o.model_fn(spec.task);
    });
  }
  TROUPE_ASSIGN_OR_RETURN(auto o, options_of<estimators::LinearOptions>(spec, who));
  return o.model_fn(spec.task);
}

runtime::Result<std::unique_ptr<estimators::Model>> make_model(const ModelSpec& spec,
                                                               estimators::RunConfig config) {
  const std::string who = "--model " + spec.model;
  ModelSpec plain = spec;
  plain.standardize.clear();
  const bool classifier = spec.task == Task::kClassifier;
  if (spec.model == "kmeans") {
    estimators::KMeansOptions o;
    TROUPE_RETURN_IF_ERROR(estimators::assign_params(o, spec.task, spec.params, who));
    return std::unique_ptr<estimators::Model>(new estimators::KMeans(o, config));
  }
  if (spec.model == "wide_deep") {
    return runtime::invalid_argument(
        "--model wide_deep reads feature columns of a table; search takes dnn, linear, svm or "
        "kmeans");
  }
  if (is_tree_model(spec.model)) {
    using Made = runtime::Result<std::unique_ptr<estimators::Model>>;
    return with_tree_options(plain, who, [&](const auto& o) -> Made {
      using Options = std::decay_t<decltype(o)>;
      if (classifier) {
        return std::unique_ptr<estimators::Model>(
            new estimators::CannedModel<Options, Task::kClassifier>(o, config));
      }
      return std::unique_ptr<estimators::Model>(
          new estimators::CannedModel<Options, Task::kRegressor>(o, config));
    });
  }
  if (spec.model == "dnn") {
    TROUPE_ASSIGN_OR_RETURN(auto o, options_of<estimators::DNNOptions>(plain, who));
    if (classifier)
      return std::unique_ptr<estimators::Model>(new estimators::DNNClassifier(o, config));
    return std::unique_ptr<estimators::Model>(new estimators::DNNRegressor(o, config));
  }
  TROUPE_ASSIGN_OR_RETURN(auto o, options_of<estimators::LinearOptions>(plain, who));
  if (classifier)
    return std::unique_ptr<estimators::Model>(new estimators::LinearClassifier(o, config));
  return std::unique_ptr<estimators::Model>(new estimators::LinearRegressor(o, config));
}

runtime::Status save_model_spec(const std::string& dir, const ModelSpec& spec) {
  const std::string task = spec.model == "kmeans"           ? "clustering"
                           : spec.task == Task::kClassifier ? "classifier"
                                                            : "regressor";
  std::string text = "model " + spec.model + "\ntask " + task + "\nlabel " + spec.label + "\n";
  for (const auto& [k, v] : spec.params) text += "param " + k + " " + v + "\n";
  if (spec.libsvm_features > 0) {
    text += "libsvm_features " + std::to_string(spec.libsvm_features) + "\n";
  }
  for (const auto& [name, st] : spec.standardize) {
    text +=
        "standardize " + name + " " + format_floats(st.mean) + " " + format_floats(st.scale) + "\n";
  }
  for (const estimators::FeatureColumn& c : spec.columns) text += "column " + column_text(c) + "\n";
  for (const estimators::FeatureColumn& c : spec.wide_columns) {
    text += "wide_column " + column_text(c) + "\n";
  }
  for (const estimators::ServingInput& in : spec.inputs) {
    std::string dims;
    for (int64_t d : in.dims) dims += (dims.empty() ? "" : ",") + std::to_string(d);
    text += "input " + in.name + " " + runtime::dtype_name(in.dtype) + " " +
            (dims.empty() ? "-" : dims) + "\n";
  }
  return runtime::write_file_atomic(dir + "/troupe_model.txt", text);
}

runtime::Result<ModelSpec> load_model_spec(const std::string& dir) {
  const std::string path = dir + "/troupe_model.txt";
  std::ifstream in(path);
  if (!in) {
    return runtime::not_found(dir, " holds no troupe model (no troupe_model.txt): train one first");
  }
  ModelSpec spec;
  std::string word;
  auto rest_of_line = [&in] {
    std::string v;
    std::getline(in, v);
    if (!v.empty() && v[0] == ' ') v.erase(0, 1);
    return v;
  };
  while (in >> word) {
    if (word == "model") {
      spec.model = rest_of_line();
      if (std::find(model_kinds().begin(), model_kinds().end(), spec.model) ==
          model_kinds().end()) {
        return runtime::data_loss(path, ": model '", spec.model, "' is not ", model_kinds_text());
      }
    } else if (word == "task") {
      const std::string task = rest_of_line();
      if (task != "classifier" && task != "regressor" && task != "clustering") {
        return runtime::data_loss(path, ": task '", task, "' is not classifier or regressor");
      }
      spec.task = task == "classifier" ? Task::kClassifier : Task::kRegressor;
    } else if (word == "param") {
      std::string k;
      in >> k;
      spec.params[k] = rest_of_line();
    } else if (word == "label") {
      spec.label = rest_of_line();
    } else if (word == "libsvm_features") {
      const std::string n = rest_of_line();
      char* end = nullptr;
      spec.libsvm_features = std::strtoll(n.c_str(), &end, 10);
      if (n.empty() || *end != '\0' || spec.libsvm_features <= 0) {
        return runtime::data_loss(path, ": libsvm_features '", n, "' is not a width");
      }
    } else if (word == "standardize") {
      std::string name, mean, scale;
      in >> name >> mean >> scale;
      estimators::FeatureStats st;
      if (!in || !parse_floats(mean, &st.mean) || !parse_floats(scale, &st.scale) ||
          st.mean.size() != st.scale.size()) {
        return runtime::data_loss(path, ": a damaged standardize line for '", name, "'");
      }
      spec.standardize[name] = std::move(st);
      rest_of_line();
    } else if (word == "column" || word == "wide_column") {
      auto c = parse_column(rest_of_line());
      if (!c.ok()) return runtime::data_loss(path, ": ", c.status().message());
      (word == "column" ? spec.columns : spec.wide_columns).push_back(std::move(*c));
    } else if (word == "input") {
      estimators::ServingInput s;
      std::string dtype, dims;
      in >> s.name >> dtype >> dims;
      if (!in || !runtime::dtype_from_name(dtype, &s.dtype)) {
        return runtime::data_loss(path, ": a damaged input line");
      }
      std::stringstream list(dims == "-" ? "" : dims);
      for (std::string d; std::getline(list, d, ',');) {
        char* end = nullptr;
        const long long v = std::strtoll(d.c_str(), &end, 10);
        if (d.empty() || *end != '\0' || v < -1) {
          return runtime::data_loss(path, ": input ", s.name, " has dimension '", d, "'");
        }
        s.dims.push_back(v);
      }
      spec.inputs.push_back(std::move(s));
      rest_of_line();
    } else {
      rest_of_line();
    }
  }
  return spec;
}

}  // namespace troupe::cli
