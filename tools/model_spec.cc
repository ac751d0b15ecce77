#include "tools/model_spec.h"

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <type_traits>

#include "runtime/record_io.h"
#include "tools/column_spec.h"

namespace troupe::cli {

using estimators::ParamMap;
using estimators::Task;
using estimators::TextParams;

namespace {

struct FlagParam {
  const char* flag;
  const char* param;
};

// Standardization applies to a model's numeric features; trees read them as they are and
// k-means clusters them as they are (only a regressor's label is standardized for trees).
template <class Options>
constexpr bool kStandardizesFeatures = std::is_same_v<Options, estimators::DNNOptions> ||
                                       std::is_same_v<Options, estimators::LinearOptions> ||
                                       std::is_same_v<Options, estimators::RNNOptions>;

// The models that take several heads (HeadOptions::heads).
template <class Options>
constexpr bool kHasHeads = std::is_same_v<Options, estimators::DNNOptions> ||
                           std::is_same_v<Options, estimators::LinearOptions> ||
                           std::is_same_v<Options, estimators::DNNLinearCombinedOptions>;

// The spec's options joined with its columns and standardization; an error when spec.options
// holds another model's options.
template <class Options>
runtime::Result<Options> options_of(const ModelSpec& spec, const std::string& who) {
  const Options* given = std::get_if<Options>(&spec.options);
  if (given == nullptr)
    return runtime::invalid_argument(who, ": the spec holds another model's options");
  Options o = *given;
  if constexpr (std::is_same_v<Options, estimators::DNNLinearCombinedOptions>) {
    o.linear_feature_columns = spec.wide_columns;
    o.dnn_feature_columns = spec.columns;
  } else if constexpr (std::is_same_v<Options, estimators::KMeansOptions>) {
    o.initial_centers = spec.initial_centers;
  } else {
    if constexpr (kStandardizesFeatures<Options>) o.standardize = spec.standardize;
    o.feature_columns = spec.columns;
  }
  if constexpr (!std::is_same_v<Options, estimators::KMeansOptions>) {
    if (spec.task == Task::kRegressor) {
      if (auto it = spec.standardize.find(spec.label); it != spec.standardize.end()) {
        o.standardize_label = it->second;
      }
    }
  }
  if constexpr (kHasHeads<Options>) {
    // A multi-head model's regressors, each with its label column's statistics.
    if (!o.head.heads.empty()) {
      TROUPE_ASSIGN_OR_RETURN(auto heads, estimators::parse_heads(o.head.heads));
      for (const estimators::HeadPart& h : heads) {
        auto it = spec.standardize.find(h.name);
        if (h.task == Task::kRegressor && it != spec.standardize.end()) {
          o.head.head_labels[h.name] = it->second;
        }
      }
    }
  }
  TROUPE_RETURN_IF_ERROR(o.validate(spec.task));
  return o;
}

// A canned model's factory over its options type: its options from text (troupe_model.txt),
// its model_fn, and the scikit-learn model troupe search fits.
template <class Options>
struct Factory {
  static runtime::Result<ModelOptions> from_text(Task task, const TextParams& text,
                                                 const std::string& who) {
    Options o;
    TROUPE_RETURN_IF_ERROR(estimators::set_fields(o, task, text, who));
    return ModelOptions{std::move(o)};
  }
  static runtime::Status check(const ModelSpec& spec, const std::string& who) {
    return options_of<Options>(spec, who).status();
  }
  static runtime::Result<estimators::ModelFn> model_fn(const ModelSpec& spec,
                                                       const std::string& who) {
    TROUPE_ASSIGN_OR_RETURN(Options o, options_of<Options>(spec, who));
    if constexpr (std::is_same_v<Options, estimators::KMeansOptions>) {
      return o.model_fn();
    } else {
      return o.model_fn(spec.task);
    }
  }
  static runtime::Result<std::unique_ptr<estimators::Model>> make(const ModelSpec& spec,
                                                                  const std::string& who,
                                                                  estimators::RunConfig config) {
    ModelSpec plain = spec;  // search standardizes in its pipeline, not in the model
    plain.standardize.clear();
    TROUPE_ASSIGN_OR_RETURN(Options o, options_of<Options>(plain, who));
    if constexpr (std::is_same_v<Options, estimators::KMeansOptions>) {
      return std::unique_ptr<estimators::Model>(new estimators::KMeans(o, config));
    } else if constexpr (std::is_same_v<Options, estimators::DNNLinearCombinedOptions>) {
      return runtime::invalid_argument(
          who, " reads feature columns of a table; search takes dnn, linear, svm, kmeans, ",
          "boosted_trees or random_forest");
    } else if (spec.task == Task::kClassifier) {
      return std::unique_ptr<estimators::Model>(
          new estimators::CannedModel<Options, Task::kClassifier>(o, config));
    } else {
      return std::unique_ptr<estimators::Model>(
          new estimators::CannedModel<Options, Task::kRegressor>(o, config));
    }
  }
};

// The registry: each canned model's row, its flags (troupe's defaults, tuned for the command
// line: Adam for the DNN, FTRL for the linear models as TF), the params that fix its
// variables besides n_classes or label_dimension, and its factory.
struct Entry {
  CannedModelInfo info;
  std::vector<FlagParam> flags;
  ModelOptions (*defaults)(Task);
  std::vector<std::string> shape;
  runtime::Result<ModelOptions> (*from_text)(Task, const TextParams&, const std::string&);
  runtime::Status (*check)(const ModelSpec&, const std::string&);
  runtime::Result<estimators::ModelFn> (*model_fn)(const ModelSpec&, const std::string&);
  runtime::Result<std::unique_ptr<estimators::Model>> (*make)(const ModelSpec&, const std::string&,
                                                              estimators::RunConfig);
};

template <class Options>
Entry entry(CannedModelInfo info, std::vector<FlagParam> flags, ModelOptions (*defaults)(Task),
            std::vector<std::string> shape) {
  // A classifier's further evaluation metrics (head.h): every model with a head.
  if (!std::is_same_v<Options, estimators::KMeansOptions>) flags.push_back({"metrics", "metrics"});
  return {info,
          std::move(flags),
          defaults,
          std::move(shape),
          &Factory<Options>::from_text,
          &Factory<Options>::check,
          &Factory<Options>::model_fn,
          &Factory<Options>::make};
}

// The learning-rate schedule of the models trained by gradients (ops/learning_rate_schedule.h).
const std::vector<FlagParam> kScheduleFlags = {
    {"lr-schedule", "lr_schedule"},     {"decay-steps", "decay_steps"},
    {"decay-rate", "decay_rate"},       {"warmup-steps", "warmup_steps"},
    {"lr-boundaries", "lr_boundaries"}, {"lr-factors", "lr_factors"},
    {"lr-alpha", "lr_alpha"},           {"decay-power", "decay_power"}};

std::vector<FlagParam> with_schedule(std::vector<FlagParam> flags) {
  flags.insert(flags.end(), kScheduleFlags.begin(), kScheduleFlags.end());
  return flags;
}

// The flags of a model with one optimizer (estimators::optimizer_fields).
std::vector<FlagParam> with_optimizer(std::vector<FlagParam> flags) {
  flags.insert(
      flags.end(),
      {{"optimizer", "optimizer"}, {"learning-rate", "learning_rate"}, {"clip-norm", "clip_norm"}});
  return with_schedule(std::move(flags));
}

const std::vector<FlagParam> kLinearFlags = with_optimizer({{"l1", "l1"}, {"l2", "l2"}});

const std::vector<Entry>& registry() {
  using estimators::BoostedTreesOptions;
  using estimators::RandomForestOptions;
  static const std::vector<Entry> entries = {
      entry<estimators::DNNOptions>({ModelKind::kDnn, "dnn", false, true},
                                    with_optimizer({{"hidden", "hidden_units"},
                                                    {"dropout", "dropout"},
                                                    {"activation", "activation"},
                                                    {"batch-norm", "batch_norm"}}),
                                    [](Task) -> ModelOptions {
                                      return estimators::DNNOptions{
                                          .hidden_units = {256, 128},
                                          .optimizer = ops::Optimizer::adam(0.001)};
                                    },
                                    {"hidden_units", "activation"}),
      entry<estimators::LinearOptions>(
          {ModelKind::kLinear, "linear", false, true, false}, kLinearFlags,
          [](Task) -> ModelOptions { return estimators::LinearOptions{}; }, {"loss"}),
      entry<estimators::LinearOptions>(
          {ModelKind::kSvm, "svm", false, true, false}, kLinearFlags,
          [](Task task) -> ModelOptions {
            return estimators::LinearOptions{
                .loss = task == Task::kClassifier ? "hinge" : "epsilon_insensitive"};
          },
          {"loss"}),
      entry<estimators::KMeansOptions>(
          {ModelKind::kKMeans, "kmeans"}, {{"n-clusters", "n_clusters"}, {"init", "init"}},
          [](Task) -> ModelOptions { return estimators::KMeansOptions{.n_clusters = 8}; },
          {"n_clusters"}),
      // The DNN's flags set the deep part, --linear-* the wide part.
      entry<estimators::DNNLinearCombinedOptions>(
          {ModelKind::kWideDeep, "wide_deep", false, true},
          with_schedule({{"hidden", "dnn_hidden_units"},
                         {"optimizer", "dnn_optimizer"},
                         {"learning-rate", "dnn_learning_rate"},
                         {"dropout", "dnn_dropout"},
                         {"activation", "dnn_activation"},
                         {"clip-norm", "clip_norm"},
                         {"linear-optimizer", "linear_optimizer"},
                         {"linear-learning-rate", "linear_learning_rate"}}),
          [](Task) -> ModelOptions {
            return estimators::DNNLinearCombinedOptions{
                .dnn_hidden_units = {128, 64}, .dnn_optimizer = ops::Optimizer::adam(0.001)};
          },
          {"dnn_hidden_units", "dnn_activation"}),
      entry<BoostedTreesOptions>(
          {ModelKind::kBoostedTrees, "boosted_trees", true, false, true, "10000"},
          {{"n-trees", "n_trees"},
           {"max-depth", "max_depth"},
           {"learning-rate", "learning_rate"},
           {"l1", "l1"},
           {"l2", "l2"},
           {"max-bins", "max_bins"},
           {"layers-per-batch", "layers_per_batch"}},
          [](Task) -> ModelOptions { return BoostedTreesOptions{}; },
          {"n_trees", "max_depth", "max_bins"}),
      // A forest's deep nodes need every row: its trees grow from batches of 100000.
      entry<RandomForestOptions>(
          {ModelKind::kRandomForest, "random_forest", true, false, true, "100000"},
          {{"n-trees", "n_trees"},
           {"max-depth", "max_depth"},
           {"max-nodes", "max_nodes"},
           {"max-features", "max_features"},
           {"max-bins", "max_bins"},
           {"layers-per-batch", "layers_per_batch"}},
          [](Task) -> ModelOptions { return RandomForestOptions{}; },
          {"n_trees", "max_nodes", "max_bins"}),
      // Each example's numbers as time_steps steps (Fashion-MNIST: --time-steps 28, a row a
      // step).
      entry<estimators::RNNOptions>({ModelKind::kRnn, "rnn", false, false},
                                    with_optimizer({{"rnn-units", "num_units"},
                                                    {"cell", "cell_type"},
                                                    {"time-steps", "time_steps"},
                                                    {"bidirectional", "bidirectional"}}),
                                    [](Task) -> ModelOptions {
                                      return estimators::RNNOptions{
                                          .num_units = {64},
                                          .optimizer = ops::Optimizer::adam(0.001)};
                                    },
                                    {"num_units", "cell_type", "time_steps", "bidirectional"}),
  };
  return entries;
}

const Entry& entry_of(ModelKind kind) {
  for (const Entry& e : registry()) {
    if (e.info.kind == kind) return e;
  }
  return registry().front();  // every kind has a row
}

std::string who(const ModelSpec& spec) {
  return std::string("--model ") + model_info(spec.model).name;
}

}  // namespace

const CannedModelInfo& model_info(ModelKind kind) { return entry_of(kind).info; }

runtime::Result<ModelKind> parse_model_kind(const std::string& name) {
  for (const Entry& e : registry()) {
    if (name == e.info.name) return e.info.kind;
  }
  return runtime::invalid_argument("--model '", name, "' is not ", model_kinds_text());
}

std::string model_kinds_text() {
  std::string text;
  const std::vector<Entry>& all = registry();
  for (size_t i = 0; i < all.size(); ++i) {
    text += std::string(i == 0 ? "" : i + 1 == all.size() ? " or " : ", ") + all[i].info.name;
  }
  return text;
}

const std::vector<std::string>& model_param_flags() {
  static const std::vector<std::string> all = [] {
    std::vector<std::string> names;
    for (const Entry& e : registry()) {
      for (const FlagParam& f : e.flags) {
        if (std::find(names.begin(), names.end(), f.flag) == names.end()) names.push_back(f.flag);
      }
    }
    return names;
  }();
  return all;
}

runtime::Result<ModelOptions> model_options(ModelKind model, Task task, const Flags& flags) {
  const Entry& e = entry_of(model);
  TextParams given;
  for (const std::string& flag : model_param_flags()) {
    auto value = flags.find(flag);
    if (value == flags.end()) continue;
    bool found = false;
    for (const FlagParam& f : e.flags) {
      if (flag == f.flag) {
        given[f.param] = value->second;
        found = true;
      }
    }
    if (!found)
      return runtime::invalid_argument("--", flag, " is not a flag of --model ", e.info.name);
  }
  ModelOptions options = e.defaults(task);
  const std::string who = std::string("--model ") + e.info.name;
  TROUPE_RETURN_IF_ERROR(
      std::visit([&](auto& o) { return estimators::set_fields(o, task, given, who); }, options));
  return options;
}

runtime::Result<ModelSpec> model_spec_of(const Flags& flags) {
  ModelSpec spec;
  if (auto m = flags.find("model"); m != flags.end()) {
    TROUPE_ASSIGN_OR_RETURN(spec.model, parse_model_kind(m->second));
  }
  spec.task = flags.count("regression") ? Task::kRegressor : Task::kClassifier;
  TROUPE_ASSIGN_OR_RETURN(spec.options, model_options(spec.model, spec.task, flags));
  return spec;
}

runtime::Status set_params(ModelSpec* spec, const ParamMap& params) {
  return std::visit(
      [&](auto& o) { return estimators::set_fields(o, spec->task, params, who(*spec)); },
      spec->options);
}

ParamMap params_of(const ModelSpec& spec) {
  return std::visit([&](const auto& o) { return estimators::params_of(o, spec.task); },
                    spec.options);
}

runtime::Result<bool> standardize_of(const Flags& flags, const std::string& data) {
  auto s = flags.find("standardize");
  const std::string how = s == flags.end() ? "auto" : s->second;
  if (how != "auto" && how != "on" && how != "off") {
    return runtime::invalid_argument("--standardize: '", how, "' is not auto, on or off");
  }
  return how == "on" ||
         (how == "auto" && (data.rfind("csv:", 0) == 0 || data.rfind("libsvm:", 0) == 0 ||
                            data.rfind("tfrecord:", 0) == 0));
}

std::vector<std::string> shape_params(ModelKind model, Task task) {
  const Entry& e = entry_of(model);
  if (model == ModelKind::kKMeans) return e.shape;
  std::vector<std::string> names = {task == Task::kClassifier ? "n_classes" : "label_dimension"};
  names.insert(names.end(), e.shape.begin(), e.shape.end());
  return names;
}

runtime::Status check_model(const ModelSpec& spec) {
  return entry_of(spec.model).check(spec, who(spec));
}

runtime::Result<estimators::ModelFn> model_fn_of(const ModelSpec& spec) {
  return entry_of(spec.model).model_fn(spec, who(spec));
}

runtime::Result<std::unique_ptr<estimators::Model>> make_model(const ModelSpec& spec,
                                                               estimators::RunConfig config) {
  return entry_of(spec.model).make(spec, who(spec), std::move(config));
}

std::vector<std::string> sequence_keys(const std::vector<estimators::FeatureColumn>& columns) {
  std::vector<std::string> keys;
  for (const estimators::FeatureColumn& c : columns) {
    if (c.is_sequence())
      keys.push_back(c.kind == estimators::FeatureColumn::Kind::kNumeric ? c.key
                                                                         : c.sources[0].key);
  }
  return keys;
}

runtime::Result<DataOptions> data_options(const ModelSpec& spec) {
  DataOptions o{.class_names = spec.task == Task::kClassifier && spec.model != ModelKind::kKMeans,
                .num_features = spec.libsvm_features,
                .sequence_length = spec.sequence_length};
  o.sequences = sequence_keys(spec.columns);
  if (spec.parse_by_columns) {
    std::vector<estimators::FeatureColumn> all = spec.columns;
    all.insert(all.end(), spec.wide_columns.begin(), spec.wide_columns.end());
    TROUPE_ASSIGN_OR_RETURN(o.features, estimators::make_parse_example_spec(all));
    const auto params = params_of(spec);
    auto weight = params.find("weight_column");
    if (weight != params.end() && std::holds_alternative<std::string>(weight->second)) {
      o.inferred.push_back(std::get<std::string>(weight->second));
    }
  }
  return o;
}

runtime::Status save_model_spec(const std::string& dir, const ModelSpec& spec) {
  const std::string task = spec.model == ModelKind::kKMeans ? "clustering"
                           : spec.task == Task::kClassifier ? "classifier"
                                                            : "regressor";
  std::string text = std::string("model ") + model_info(spec.model).name + "\ntask " + task +
                     "\nlabel " + spec.label + "\n";
  for (const auto& [k, v] : params_of(spec)) {
    text += "param " + k + " " + estimators::to_text(v) + "\n";
  }
  if (spec.sequence_length > 0) {
    text += "sequence_length " + std::to_string(spec.sequence_length) + "\n";
  }
  if (spec.parse_by_columns) text += "parse_by_columns\n";
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
  TextParams params;
  std::string word;
  auto rest_of_line = [&in] {
    std::string v;
    std::getline(in, v);
    if (!v.empty() && v[0] == ' ') v.erase(0, 1);
    return v;
  };
  while (in >> word) {
    if (word == "model") {
      const std::string name = rest_of_line();
      auto kind = parse_model_kind(name);
      if (!kind.ok()) {
        return runtime::data_loss(path, ": model '", name, "' is not ", model_kinds_text());
      }
      spec.model = *kind;
    } else if (word == "task") {
      const std::string task = rest_of_line();
      if (task != "classifier" && task != "regressor" && task != "clustering") {
        return runtime::data_loss(path, ": task '", task, "' is not classifier or regressor");
      }
      spec.task = task == "classifier" ? Task::kClassifier : Task::kRegressor;
    } else if (word == "param") {
      std::string k;
      in >> k;
      params[k] = rest_of_line();
    } else if (word == "label") {
      spec.label = rest_of_line();
    } else if (word == "parse_by_columns") {
      spec.parse_by_columns = true;
    } else if (word == "sequence_length") {
      const std::string n = rest_of_line();
      char* end = nullptr;
      spec.sequence_length = std::strtoll(n.c_str(), &end, 10);
      if (n.empty() || *end != '\0' || spec.sequence_length <= 0) {
        return runtime::data_loss(path, ": sequence_length '", n, "' is not a number of steps");
      }
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
  auto options = entry_of(spec.model).from_text(spec.task, params, who(spec));
  if (!options.ok()) return runtime::data_loss(path, ": ", options.status().message());
  spec.options = std::move(*options);
  return spec;
}

}  // namespace troupe::cli
