// Trains a small classifier, exports it, loads the export and checks that it predicts what the
// trained model predicts: troupe used from a program of its own, through <troupe/troupe.h>.
//
//   consumer [EXPORT_BASE]      (default: a folder under /tmp, removed at the end)
#include <troupe/troupe.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

using namespace troupe;

int main(int argc, char** argv) {
  const bool keep = argc > 1;
  const std::string base = keep ? argv[1]
                                : (std::filesystem::temp_directory_path() /
                                   ("troupe_consumer_" + std::to_string(::getpid())))
                                      .string();
  // Three blobs in 4 dimensions.
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0, 1);
  const int64_t n = 600;
  std::vector<float> xs(n * 4);
  std::vector<int64_t> ys(n);
  for (int64_t i = 0; i < n; ++i) {
    ys[i] = i % 3;
    for (int k = 0; k < 4; ++k) xs[i * 4 + k] = noise(rng) + 3.0f * static_cast<float>(ys[i]);
  }
  const runtime::Tensor x = runtime::Tensor::from_vector(runtime::Shape{n, 4}, xs);
  const runtime::Tensor y = runtime::Tensor::from_vector(runtime::Shape{n}, ys);

  estimators::RunConfig config;
  config.tf_random_seed = 1;
  config.log_step_count_steps = 1000000;
  estimators::DNNClassifier clf({.hidden_units = {16},
                                 .n_classes = 3,
                                 .optimizer = troupe::ops::Optimizer::adam(0.01),
                                 .fit = {.batch_size = 32, .epochs = 10}},
                                config);
  if (auto fit = clf.fit(x, y); !fit.ok()) {
    std::fprintf(stderr, "fit: %s\n", fit.to_string().c_str());
    return 1;
  }
  auto accuracy = clf.score(x, y);
  auto proba = clf.predict_proba(x);
  auto dir = clf.estimator().export_saved_model(base);
  if (!accuracy.ok() || !proba.ok() || !dir.ok()) {
    std::fprintf(stderr, "score, predict or export failed\n");
    return 1;
  }
  auto predictor = serving::load(*dir);
  if (!predictor.ok()) {
    std::fprintf(stderr, "load: %s\n", predictor.status().to_string().c_str());
    return 1;
  }
  auto served = (*predictor)->predict({{"x", x}});
  if (!served.ok()) {
    std::fprintf(stderr, "predict: %s\n", served.status().to_string().c_str());
    return 1;
  }
  const runtime::Tensor& p = served->at("probabilities");
  const bool same = p.shape() == proba->shape() &&
                    std::memcmp(p.raw_data(), proba->raw_data(), p.byte_size()) == 0;
  std::printf("{\"accuracy\": %.4f, \"export\": \"%s\", \"export_predicts_the_same\": %s}\n",
              *accuracy, dir->c_str(), same ? "true" : "false");
  if (!keep) std::filesystem::remove_all(base);
  return *accuracy > 0.9 && same ? 0 : 1;
}
