// troupe search: scikit-learn's GridSearchCV (or RandomizedSearchCV with --random N) over a
// canned model's params, by cross-validation on a dataset, printing the results table and the
// best params.
//
//   troupe search --model dnn --data csv:wine.csv --label class --cv 3
//                 --grid "hidden=64,128;256,128 learning_rate=0.001,0.003"
//
// --grid holds NAME=VALUES items separated by spaces; a name is a param (learning_rate) or its
// train flag (hidden, learning-rate); values are separated by ';', or by ',' for a param that is
// not a list. A table's columns are standardized on each fold's training rows (a Pipeline of a
// StandardScaler and the model) unless --standardize off. A text column becomes one indicator
// column per value (pandas' get_dummies), a text label the index of its name among the sorted
// names.
#include <cstdio>
#include <sstream>

#include "estimators/selection/model_selection.h"
#include "estimators/selection/pipeline.h"
#include "runtime/log.h"
#include "tools/cli.h"
#include "tools/data_spec.h"
#include "tools/model_spec.h"

namespace troupe::cli {

namespace input = troupe::estimators::input;
using estimators::ParamGrid;
using estimators::ParamValue;

namespace {

// A grid's name: a train flag's param, or the param itself.
std::string param_name(const std::string& name) {
  if (name == "hidden") return "hidden_units";
  std::string n = name;
  for (char& c : n) c = c == '-' ? '_' : c;
  return n;
}

runtime::Result<ParamGrid> parse_grid(const std::string& text, const estimators::ParamMap& like) {
  ParamGrid grid;
  std::stringstream items(text);
  for (std::string item; items >> item;) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      return runtime::invalid_argument("--grid: '", item, "' is not NAME=VALUES");
    }
    const std::string name = param_name(item.substr(0, eq));
    const std::string values = item.substr(eq + 1);
    auto kind = like.find(name);
    if (kind == like.end()) {
      return runtime::invalid_argument("--grid: the model has no parameter '", name, "'");
    }
    const bool list = std::holds_alternative<std::vector<int64_t>>(kind->second) ||
                      std::holds_alternative<std::vector<std::string>>(kind->second);
    const char sep = values.find(';') != std::string::npos || list ? ';' : ',';
    std::stringstream parts(values);
    for (std::string part; std::getline(parts, part, sep);) {
      ParamValue v;
      if (!estimators::parse_like(kind->second, part, &v)) {
        return runtime::invalid_argument("--grid: '", part, "' is not a value of ", name);
      }
      grid[name].push_back(v);
    }
  }
  if (grid.empty()) return runtime::invalid_argument("--grid names no parameter");
  return grid;
}

}  // namespace

int search(const std::vector<std::string>& args) {
  std::vector<std::string> valued = {"model",  "data",        "label",     "grid",
                                     "cv",     "random",      "seed",      "n-jobs",
                                     "output", "standardize", "n-classes", "scoring"};
  valued.insert(valued.end(), model_param_flags().begin(), model_param_flags().end());
  for (const char* fit : {"epochs", "batch-size"}) valued.push_back(fit);
  auto parsed = parse_flags(args, valued, {"regression"});
  if (!parsed.ok()) return usage_error(parsed.status().message());
  const Flags& flags = *parsed;
  auto flag = [&](const std::string& k, const std::string& d) {
    auto it = flags.find(k);
    return it == flags.end() ? d : it->second;
  };
  if (!flags.count("data")) return usage_error("search needs --data");
  if (!flags.count("grid")) return usage_error("search needs --grid \"NAME=VALUES ...\"");
  std::string error;
  int64_t folds = 5, random = 0, seed = 42, n_jobs = 0;
  if (!to_int("cv", flag("cv", "5"), 2, &folds, &error) ||
      !to_int("random", flag("random", "0"), 0, &random, &error) ||
      !to_int("seed", flag("seed", "42"), 0, &seed, &error) ||
      !to_int("n-jobs", flag("n-jobs", "0"), 0, &n_jobs, &error)) {
    return usage_error(error);
  }
  auto standardize = standardize_of(flags, flag("data", ""));
  if (!standardize.ok()) return usage_error(standardize.status().message());
  auto given = model_spec_of(flags);
  if (!given.ok()) return usage_error(given.status().message());
  ModelSpec spec = *given;
  // --epochs 0: as many as the data needs (FitParams::epochs_for).
  struct FitFlag {
    const char* flag;
    const char* param;
    int64_t min;
  };
  for (const FitFlag& f :
       {FitFlag{"epochs", "epochs", 0}, FitFlag{"batch-size", "batch_size", 1}}) {
    int64_t n = 0;
    if (!flags.count(f.flag)) continue;
    if (!to_int(f.flag, flag(f.flag, ""), f.min, &n, &error)) return usage_error(error);
    if (auto s = set_params(&spec, {{f.param, n}}); !s.ok()) return usage_error(s.message());
  }
  const std::string data_spec = flag("data", "");
  const std::string label = flag("label", data_spec.rfind("csv:", 0) == 0 ? "" : "label");
  const bool classifier = spec.task == estimators::Task::kClassifier;
  auto data =
      open_data(data_spec, "train", label, {.batch_size = 1024}, {.class_names = classifier});
  if (!data.ok()) return fail(data.status());
  if (!data->more_labels.empty()) {
    // Its folds are scored as scikit-learn scores one estimator: by one label column.
    return usage_error("--label " + label +
                       ": troupe search scores one label column; search each head's column "
                       "alone, then train the heads together with troupe train");
  }
  std::vector<std::string> text_labels;
  if (classifier) {
    int64_t given = 0;
    if (flags.count("n-classes") &&
        !to_int("n-classes", flag("n-classes", ""), 2, &given, &error)) {
      return usage_error(error);
    }
    auto classes = classes_of(*data, data_spec, given);
    if (!classes.ok()) return fail(classes.status());
    text_labels = std::move(classes->names);
    if (auto s = set_params(&spec, {{"n_classes", static_cast<int64_t>(classes->count)}});
        !s.ok()) {
      return usage_error(s.message());
    }
  }
  estimators::RunConfig config;
  config.tf_random_seed = seed;
  config.log_step_count_steps = 1 << 30;
  auto model = make_model(spec, config);
  if (!model.ok()) return usage_error(model.status().message());
  auto grid = parse_grid(flag("grid", ""), (*model)->get_params());
  if (!grid.ok()) return usage_error(grid.status().message());
  // Text columns as indicator columns, one per value: the models here take numbers.
  auto arrays = load_arrays(*data, /*one_hot_text=*/true);
  if (!arrays.ok()) return fail(arrays.status());
  if (!text_labels.empty()) {
    auto classes = class_indices(arrays->y, text_labels);
    if (!classes.ok()) return fail(classes.status());
    arrays->y = std::move(*classes);
  }

  // Standardized inside the search, on each fold's training rows only.
  const bool scale = *standardize;
  std::unique_ptr<estimators::Model> searched = std::move(*model);
  ParamGrid named = *grid;
  if (scale) {
    auto pipe = std::make_unique<estimators::Pipeline>();
    pipe->add("scaler", std::make_unique<estimators::StandardScaler>())
        .set_model("model", std::move(searched));
    searched = std::move(pipe);
    named.clear();
    for (const auto& [k, v] : *grid) named["model__" + k] = v;
  }
  const estimators::SearchOptions so{.cv = {.n_splits = static_cast<int>(folds),
                                            .shuffle = true,
                                            .seed = static_cast<uint64_t>(seed),
                                            .n_jobs = static_cast<int>(n_jobs),
                                            .scoring = flag("scoring", "")},
                                     .refit = false};
  std::unique_ptr<estimators::SearchCV> search;
  if (random > 0) {
    estimators::ParamDistributions d;
    for (const auto& [k, v] : named) d[k] = estimators::ParamDistribution::choice(v);
    search = std::make_unique<estimators::RandomizedSearchCV>(
        *searched, d, static_cast<int>(random), static_cast<uint64_t>(seed), so);
  } else {
    search =
        std::make_unique<estimators::GridSearchCV>(*searched, std::vector<ParamGrid>{named}, so);
  }
  runtime::log_info(search->candidates().size(), " candidates x ", folds, " folds on ",
                    arrays->x.dim(0), " examples of ", arrays->x.dim(1), " columns");
  if (auto s = search->fit(arrays->x, arrays->y); !s.ok()) return fail(s);
  estimators::ResultsTable table = search->cv_results();
  if (scale) {
    for (const auto& [k, v] : *grid) table.rename_column("param_model__" + k, "param_" + k);
  }
  std::fputs(table.format().c_str(), stdout);
  if (flags.count("output")) {
    if (auto s = table.write_csv(flag("output", "")); !s.ok()) return fail(s);
  }
  std::string best;
  for (const auto& [k, v] : search->best_params()) {
    best += (best.empty() ? "" : " ") + (scale ? k.substr(7) : k) + "=" + estimators::to_text(v);
  }
  std::printf("best: %s (mean_test_score %.4f)\n", best.c_str(), search->best_score());
  return 0;
}

}  // namespace troupe::cli
