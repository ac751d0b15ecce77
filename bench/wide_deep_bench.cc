// Wide & deep against its parts on a table in the UCI Adult layout (generated: the real one is
// not a Debian package), as the wide & deep paper and TF's census tutorial set it up: the wide
// part reads the categorical columns and crosses of them, the deep part embeddings of the
// categories and the numbers. The income depends on an education x occupation interaction (a
// random effect per pair, which the cross memorizes) and on smooth functions of age and hours
// (a bump and a slope, which only the deep part sees). Bar: wide & deep's test accuracy above
// both parts' alone.
//   adult_wide_accuracy, adult_deep_accuracy     each part alone
//   adult_wide_deep_accuracy                     peer: the better part; ratio: ours / it
//
//   wide_deep_bench [--quick] [--json FILE]
#include <unistd.h>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "bench/bench_flags.h"
#include "bench/bench_util.h"
#include "troupe/troupe.h"

using namespace troupe;
using namespace troupe::estimators;

namespace {

const std::vector<std::string> kEducation = {
    "Preschool", "1st-4th", "5th-6th",     "7th-8th",      "9th",       "10th",
    "11th",      "12th",    "HS-grad",     "Some-college", "Assoc-voc", "Assoc-acdm",
    "Bachelors", "Masters", "Prof-school", "Doctorate"};
const std::vector<std::string> kOccupation = {
    "Tech-support",     "Craft-repair",      "Other-service",     "Sales",        "Exec-managerial",
    "Prof-specialty",   "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical", "Farming-fishing",
    "Transport-moving", "Priv-house-serv",   "Protective-serv",   "Armed-Forces"};
const std::vector<std::string> kWorkclass = {"Private",     "Self-emp-not-inc", "Self-emp-inc",
                                             "Federal-gov", "Local-gov",        "State-gov"};
const std::vector<std::string> kMarital = {"Married-civ-spouse", "Divorced", "Never-married",
                                           "Separated", "Widowed"};

// Writes train and test tables; the label's logit is the same function for both.
void write_adult(const std::string& train, const std::string& test, int64_t rows) {
  std::mt19937 rng(7);
  std::normal_distribution<double> g(0, 1);
  std::vector<double> pair(kEducation.size() * kOccupation.size());
  for (double& p : pair) p = 1.6 * g(rng);
  std::vector<double> work(kWorkclass.size()), marital(kMarital.size());
  for (double& w : work) w = 0.4 * g(rng);
  for (double& m : marital) m = 0.6 * g(rng);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  for (const auto& [path, n] : {std::pair<std::string, int64_t>{train, rows}, {test, rows / 4}}) {
    std::ofstream f(path);
    f << "age,workclass,education,marital_status,occupation,hours_per_week,income_bracket\n";
    for (int64_t i = 0; i < n; ++i) {
      const int age = 17 + static_cast<int>(pick(64));
      const int hours = 10 + static_cast<int>(pick(71));
      const size_t e = pick(kEducation.size()), o = pick(kOccupation.size());
      const size_t w = pick(kWorkclass.size()), m = pick(kMarital.size());
      const double smooth =
          2.5 * std::exp(-std::pow((age - 48) / 11.0, 2)) - 1.2 + 0.04 * (hours - 40);
      const double logit = pair[e * kOccupation.size() + o] + smooth + work[w] + marital[m];
      const int label =
          std::uniform_real_distribution<double>(0, 1)(rng) < 1 / (1 + std::exp(-logit));
      f << age << "," << kWorkclass[w] << "," << kEducation[e] << "," << kMarital[m] << ","
        << kOccupation[o] << "," << hours << "," << label << "\n";
    }
  }
}

RunConfig quiet() {
  RunConfig c;
  c.tf_random_seed = 42;
  c.log_step_count_steps = 1 << 30;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  bench::Flags flags("wide_deep_bench", "wide_deep.json");
  flags.parse(argc, argv);
  const bool quick = flags.quick;
  const std::string json = flags.json;
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("troupe_adult_" + std::to_string(::getpid())))
          .string();
  std::filesystem::create_directories(dir);
  write_adult(dir + "/train.csv", dir + "/test.csv", quick ? 8000 : 32000);
  const int64_t epochs = quick ? 5 : 15;
  auto train = input::csv(dir + "/train.csv", "income_bracket", {},
                          {.batch_size = 128, .num_epochs = epochs, .shuffle = true, .seed = 1});
  auto test = input::csv(dir + "/test.csv", "income_bracket", {}, {.batch_size = 1000});
  if (!train.ok() || !test.ok()) {
    std::fprintf(stderr, "wide_deep_bench: %s\n",
                 (train.ok() ? test.status() : train.status()).to_string().c_str());
    return 1;
  }
  auto stats = standardization(*train);
  if (!stats.ok()) return 1;
  const auto education = categorical_column_with_vocabulary_list("education", kEducation, 1);
  const auto occupation = categorical_column_with_vocabulary_list("occupation", kOccupation, 1);
  const auto workclass = categorical_column_with_vocabulary_list("workclass", kWorkclass, 1);
  const auto marital = categorical_column_with_vocabulary_list("marital_status", kMarital, 1);
  const std::vector<FeatureColumn> wide = {education, occupation, workclass, marital,
                                           crossed_column({"education", "occupation"}, {}, 1000)};
  const std::vector<FeatureColumn> deep = {
      numeric_column("age", 1, stats->at("age")),
      numeric_column("hours_per_week", 1, stats->at("hours_per_week")),
      embedding_column(education, 8),
      embedding_column(occupation, 8),
      indicator_column(workclass),
      indicator_column(marital)};
  const std::vector<int64_t> hidden = {64, 32};
  LinearClassifier wide_only({.feature_columns = wide}, quiet());
  DNNClassifier deep_only(
      {.hidden_units = hidden, .optimizer = ops::Optimizer::adam(1e-3), .feature_columns = deep},
      quiet());
  DNNLinearCombinedClassifier both({.linear_feature_columns = wide,
                                    .dnn_feature_columns = deep,
                                    .dnn_hidden_units = hidden,
                                    .dnn_optimizer = ops::Optimizer::adam(1e-3)},
                                   quiet());
  std::map<std::string, double> accuracy;
  auto run = [&](const std::string& name, auto& model) {
    const auto start = std::chrono::steady_clock::now();
    auto fitted = model.fit(*train);
    auto m = fitted.ok() ? model.evaluate(*test) : fitted.status();
    if (!m.ok()) {
      std::fprintf(stderr, "wide_deep_bench %s: %s\n", name.c_str(),
                   m.status().to_string().c_str());
      std::exit(1);
    }
    accuracy[name] = m->at("accuracy");
    std::printf("%s: accuracy %.4f in %.1f s\n", name.c_str(), accuracy[name],
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  };
  run("wide", wide_only);
  run("deep", deep_only);
  run("wide_deep", both);
  std::filesystem::remove_all(dir);
  bench::Bars bars("wide_deep");
  bars.add("adult_wide_accuracy", accuracy["wide"], "accuracy", "-", 0, 0);
  bars.add("adult_deep_accuracy", accuracy["deep"], "accuracy", "-", 0, 0);
  const double best_part = std::max(accuracy["wide"], accuracy["deep"]);
  bars.add("adult_wide_deep_accuracy", accuracy["wide_deep"], "accuracy", "best_part", best_part,
           accuracy["wide_deep"] / best_part);
  return bars.write_json(json) ? 0 : 1;
}
