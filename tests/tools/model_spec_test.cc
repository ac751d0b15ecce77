// The canned models' registry and a model's spec: flags read once into typed options, params
// set by name, and troupe_model.txt written and read back.
#include "tools/model_spec.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace troupe::cli {
namespace {

using estimators::Task;

std::string temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("troupe_model_spec_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace

TEST_CASE("model_spec_of: the registry's defaults, then the flags, typed once") {
  auto spec = model_spec_of({{"model", "dnn"}, {"hidden", "64,32"}, {"learning-rate", "0.01"}});
  REQUIRE(spec.ok());
  const auto& dnn = std::get<estimators::DNNOptions>(spec->options);
  CHECK(dnn.hidden_units == std::vector<int64_t>{64, 32});
  CHECK(estimators::optimizer_key(dnn.optimizer) == "adam");  // the command line's default
  CHECK(dnn.optimizer.learning_rate == 0.01);

  // Defaults alone, per model and task: svm's loss follows the task.
  auto svr = model_spec_of({{"model", "svm"}, {"regression", "1"}});
  REQUIRE(svr.ok());
  CHECK(svr->task == Task::kRegressor);
  CHECK(std::get<estimators::LinearOptions>(svr->options).loss == "epsilon_insensitive");
  auto wide = model_spec_of({{"model", "wide_deep"}, {"linear-learning-rate", "0.5"}});
  REQUIRE(wide.ok());
  const auto& wd = std::get<estimators::DNNLinearCombinedOptions>(wide->options);
  CHECK(wd.dnn_hidden_units == std::vector<int64_t>{128, 64});
  CHECK(wd.linear_optimizer.learning_rate == 0.5);
}

TEST_CASE("model_spec_of: another model's flag, a value of the wrong type, an unknown model") {
  auto other = model_spec_of({{"model", "linear"}, {"hidden", "8"}});
  REQUIRE(!other.ok());
  CHECK(other.status().message() == "--hidden is not a flag of --model linear");
  auto bad = model_spec_of({{"model", "dnn"}, {"hidden", "64,x"}});
  REQUIRE(!bad.ok());
  CHECK(bad.status().message().find("hidden_units") != std::string::npos);
  CHECK(bad.status().message().find("64,x") != std::string::npos);
  auto unknown = model_spec_of({{"model", "lstm"}});
  REQUIRE(!unknown.ok());
  CHECK(unknown.status().message().find("'lstm'") != std::string::npos);
}

TEST_CASE("set_params sets by name without validating; check_model validates the whole") {
  ModelSpec spec = *model_spec_of({{"model", "dnn"}});
  // Three names and two classes is wrong until the number of classes is set as well.
  REQUIRE(set_params(&spec, {{"label_vocabulary", std::vector<std::string>{"a", "b", "c"}}}).ok());
  CHECK(!check_model(spec).ok());
  REQUIRE(set_params(&spec, {{"n_classes", int64_t{3}}}).ok());
  CHECK(check_model(spec).ok());
  CHECK(std::get<estimators::DNNOptions>(spec.options).n_classes == 3);

  const auto unknown = set_params(&spec, {{"n_clusters", int64_t{3}}});
  CHECK(unknown.message().find("n_clusters") != std::string::npos);
  const auto wrong = set_params(&spec, {{"n_classes", std::string("three")}});
  CHECK(wrong.message().find("three") != std::string::npos);
  CHECK(std::get<estimators::DNNOptions>(spec.options).n_classes == 3);  // kept as it was

  // Options of another model than spec.model are refused by name, not misread.
  spec.options = estimators::KMeansOptions{};
  CHECK(check_model(spec).message().find("another model's options") != std::string::npos);
  CHECK(!model_fn_of(spec).ok());
}

TEST_CASE("troupe_model.txt keeps every param and reads back the same options") {
  const std::string dir = temp_dir("roundtrip");
  ModelSpec spec = *model_spec_of({{"model", "dnn"}, {"hidden", "16"}, {"dropout", "0.25"}});
  spec.label = "label";
  // Class names with commas and backslashes survive the text.
  const std::vector<std::string> names = {"a,b", "c\\d", "plain"};
  REQUIRE(set_params(&spec, {{"label_vocabulary", names}, {"n_classes", int64_t{3}}}).ok());
  spec.columns = {estimators::numeric_column("x", 4)};
  REQUIRE(save_model_spec(dir, spec).ok());

  auto back = load_model_spec(dir);
  REQUIRE(back.ok());
  CHECK(back->model == ModelKind::kDnn);
  CHECK(back->label == "label");
  CHECK(back->columns.size() == 1);
  const auto& dnn = std::get<estimators::DNNOptions>(back->options);
  CHECK(dnn.hidden_units == std::vector<int64_t>{16});
  CHECK(dnn.dropout == 0.25);
  CHECK(dnn.head.label_vocabulary == names);
  estimators::ParamMap a = params_of(spec), b = params_of(*back);
  CHECK(estimators::to_text(a) == estimators::to_text(b));
  CHECK(model_fn_of(*back).ok());
  std::filesystem::remove_all(dir);
}

TEST_CASE("load_model_spec: a damaged param names the file and the param") {
  const std::string dir = temp_dir("damaged");
  std::ofstream(dir + "/troupe_model.txt") << "model linear\ntask regressor\nparam l1 much\n";
  auto spec = load_model_spec(dir);
  REQUIRE(!spec.ok());
  CHECK(spec.status().message().find("troupe_model.txt") != std::string::npos);
  CHECK(spec.status().message().find("l1") != std::string::npos);
  std::ofstream(dir + "/troupe_model.txt") << "model linear\ntask regressor\nparam units 3\n";
  CHECK(load_model_spec(dir).status().message().find("units") != std::string::npos);
  std::filesystem::remove_all(dir);
  CHECK(load_model_spec(dir).status().message().find("train one first") != std::string::npos);
}

TEST_CASE("shape_params: the params that fix a model's variables") {
  CHECK(shape_params(ModelKind::kDnn, Task::kClassifier) ==
        std::vector<std::string>{"n_classes", "hidden_units", "activation"});
  CHECK(shape_params(ModelKind::kLinear, Task::kRegressor) ==
        std::vector<std::string>{"label_dimension", "loss"});
  CHECK(shape_params(ModelKind::kKMeans, Task::kClassifier) ==
        std::vector<std::string>{"n_clusters"});
}

}  // namespace troupe::cli
