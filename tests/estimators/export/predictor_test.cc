// Exports that load: a trained model's export answers, through serving::load, what its
// Estimator's session answers, bit for bit; every damaged file is refused, named.
#include "estimators/export/predictor.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "estimators/canned/dnn.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "runtime/example.h"
#include "runtime/record_io.h"

using namespace troupe;
using namespace troupe::estimators;
using runtime::Shape;
using runtime::Tensor;
namespace fs = std::filesystem;

namespace {

void blobs(int64_t n, uint64_t seed, Tensor* x, Tensor* y) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> xs(n * 4);
  std::vector<int64_t> ys(n);
  for (int64_t i = 0; i < n; ++i) {
    ys[i] = i % 3;
    for (int k = 0; k < 4; ++k) xs[i * 4 + k] = g(rng) + static_cast<float>(ys[i] * 2 - 2);
  }
  *x = Tensor::from_vector(Shape{n, 4}, xs);
  *y = Tensor::from_vector(Shape{n}, ys);
}

struct TempDir {
  std::string path =
      (fs::temp_directory_path() / ("troupe_export_" + std::to_string(::getpid()) + "_" +
                                    std::to_string(reinterpret_cast<uintptr_t>(this))))
          .string();
  TempDir() { fs::remove_all(path); }
  ~TempDir() { fs::remove_all(path); }
};

// A small trained classifier exported into base; returns the export's folder.
std::string trained_export(const std::string& base, Tensor* x, Tensor* probabilities,
                           Tensor* classes) {
  Tensor y;
  blobs(300, 1, x, &y);
  RunConfig config;
  config.tf_random_seed = 1;
  config.log_step_count_steps = 1000000;
  Estimator est(
      DNNOptions{.hidden_units = {8}, .n_classes = 3, .optimizer = ops::Optimizer::adagrad(0.05)}
          .model_fn(Task::kClassifier),
      config);
  auto data = input::arrays({{"x", *x}, {"label", y}}, "label",
                            {.batch_size = 30, .num_epochs = 3, .shuffle = true, .seed = 2});
  REQUIRE(est.train(*data).ok());
  // Labelled data to predict on: the export must still serve the features alone.
  auto batches =
      est.predict_batches(*input::arrays({{"x", *x}, {"label", y}}, "label", {.batch_size = 300}));
  REQUIRE(batches.ok());
  REQUIRE(batches->size() == 1);
  *probabilities = batches->at(0).at("probabilities");
  *classes = batches->at(0).at("classes");
  auto dir = est.export_saved_model(base);
  REQUIRE_MESSAGE(dir.ok(), dir.status().to_string());
  return *dir;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()) == 0;
}

}  // namespace

TEST_CASE("an export loads and predicts what the training session predicted, bit for bit") {
  TempDir base;
  Tensor x, probabilities, classes;
  const std::string dir = trained_export(base.path, &x, &probabilities, &classes);
  auto p = serving::load(dir, {.sessions = 2});
  REQUIRE_MESSAGE(p.ok(), p.status().to_string());
  CHECK((*p)->version() == std::stoll(fs::path(dir).filename().string()));
  for (const char* name : {"serving_default", "predict", "classification"}) {
    CHECK((*p)->signature(name) != nullptr);
  }
  CHECK((*p)->signature("regression") == nullptr);
  const serving::Signature& sig = *(*p)->signature("serving_default");
  REQUIRE(sig.inputs.count("x"));
  CHECK(sig.inputs.size() == 1);
  CHECK(sig.inputs.at("x").shape == Shape{-1, 4});
  CHECK(sig.outputs.size() == 3);

  auto out = (*p)->predict({{"x", x}});
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  CHECK(same_bits(out->at("probabilities"), probabilities));
  CHECK(same_bits(out->at("classes"), classes));
  // classification takes serialized tf.Example protos, as TF's does, parsed in the graph.
  const serving::Signature& classification = *(*p)->signature("classification");
  REQUIRE(classification.inputs.count("inputs"));
  CHECK(classification.inputs.at("inputs").dtype == runtime::DType::kString);
  Tensor examples(runtime::DType::kString, Shape{x.dim(0)});
  for (int64_t r = 0; r < x.dim(0); ++r) {
    REQUIRE(runtime::encode_example({"x"}, {x}, r, &examples.data<std::string>()[r]).ok());
  }
  auto scores = (*p)->predict({{"inputs", examples}}, "classification");
  REQUIRE_MESSAGE(scores.ok(), scores.status().to_string());
  CHECK(same_bits(scores->at("scores"), probabilities));

  // Concurrent callers share the sessions; each gets its own answer.
  std::vector<std::thread> callers;
  std::atomic<int> right{0};
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        auto o = (*p)->predict({{"x", x}}, "serving_default", {"classes"});
        if (o.ok() && o->size() == 1 && same_bits(o->at("classes"), classes)) ++right;
      }
    });
  }
  for (auto& c : callers) c.join();
  CHECK(right == 40);
}

TEST_CASE("a predictor names the input that does not fit its signature") {
  TempDir base;
  Tensor x, probabilities, classes;
  const std::string dir = trained_export(base.path, &x, &probabilities, &classes);
  auto p = serving::load(dir);
  REQUIRE(p.ok());
  auto wrong_width = (*p)->predict({{"x", Tensor(runtime::DType::kFloat32, Shape{2, 5})}});
  CHECK(wrong_width.status().code() == runtime::Code::kInvalidArgument);
  CHECK(wrong_width.status().message().find("'x'") != std::string::npos);
  CHECK(wrong_width.status().message().find("[?,4]") != std::string::npos);
  auto wrong_type = (*p)->predict({{"x", Tensor(runtime::DType::kInt64, Shape{2, 4})}});
  CHECK(wrong_type.status().message().find("float32") != std::string::npos);
  CHECK(!(*p)->predict({}).ok());
  auto extra = (*p)->predict({{"x", x}, {"y", x}});
  CHECK(extra.status().message().find("'y'") != std::string::npos);
  CHECK((*p)->predict({{"x", x}}, "nope").status().code() == runtime::Code::kNotFound);
  CHECK((*p)->predict({{"x", x}}, "predict", {"nope"}).status().code() ==
        runtime::Code::kInvalidArgument);
  // Still serving after the refusals.
  CHECK((*p)->predict({{"x", x}}).ok());
}

TEST_CASE("loading refuses each damaged file, naming it") {
  TempDir base;
  Tensor x, probabilities, classes;
  const std::string dir = trained_export(base.path, &x, &probabilities, &classes);
  auto damaged = [&](const std::string& file, const std::function<void(std::string*)>& change) {
    const std::string copy = base.path + "/copy";
    fs::remove_all(copy);
    fs::copy(dir, copy, fs::copy_options::recursive);
    std::string bytes;
    REQUIRE(runtime::read_file(copy + "/" + file, &bytes).ok());
    change(&bytes);
    std::ofstream(copy + "/" + file, std::ios::binary | std::ios::trunc) << bytes;
    auto p = serving::load(copy);
    REQUIRE(!p.ok());
    CHECK_MESSAGE(p.status().message().find(file) != std::string::npos, p.status().to_string());
    return p.status().message();
  };
  damaged("saved_model.json", [](std::string* b) { b->resize(b->size() / 2); });
  damaged("saved_model.json",
          [](std::string* b) { b->replace(b->find("\"float32\""), 9, "\"float33\""); });
  CHECK(damaged("saved_model.json", [](std::string* b) {
          const size_t at = b->find("\"tensor\": \"x");
          b->replace(at, 12, "\"tensor\": \"q");
        }).find("no tensor") != std::string::npos);
  damaged("graph.capnp", [](std::string* b) { b->resize(b->size() / 3); });
  damaged("variables/variables.ckpt", [](std::string* b) { (*b)[b->size() / 2] ^= 0x5a; });
  fs::remove(dir + "/graph.capnp");
  auto missing = serving::load(dir);
  CHECK(missing.status().message().find("graph.capnp") != std::string::npos);
}

TEST_CASE("versions are the integer folders of a base, ascending; exports keep them ordered") {
  TempDir base;
  serving::SavedModel m;
  runtime::GraphBuilder b(&m.graph);
  auto in = ops::placeholder(b, runtime::DType::kFloat32, Shape{-1}, "in");
  auto out = ops::neg(b, in);
  m.signatures["serving_default"] =
      serving::make_signature(m.graph, "regress", {{"in", in}}, {{"outputs", out}});
  m.assets["vocabulary.txt"] = "cat\ndog\n";
  m.class_labels = {"neg", "pos"};
  auto first = serving::write_saved_model(base.path, m);
  auto second = serving::write_saved_model(base.path, m);
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  fs::create_directories(base.path + "/not_a_version");
  fs::create_directories(base.path + "/007");
  auto versions = serving::list_versions(base.path);
  REQUIRE(versions.ok());
  REQUIRE(versions->size() == 2);
  CHECK(versions->at(0) < versions->at(1));
  CHECK(fs::path(*second).filename().string() == std::to_string(versions->at(1)));
  auto p = serving::load(*second);
  REQUIRE_MESSAGE(p.ok(), p.status().to_string());
  CHECK((*p)->model().assets.at("vocabulary.txt") == "cat\ndog\n");
  CHECK((*p)->model().class_labels == std::vector<std::string>{"neg", "pos"});
  auto y = (*p)->predict({{"in", Tensor::from_vector<float>(Shape{3}, {1, -2, 3})}});
  REQUIRE(y.ok());
  CHECK(y->at("outputs").to_vector<float>() == std::vector<float>{-1, 2, -3});
  CHECK(serving::list_versions(base.path + "/none").status().code() == runtime::Code::kNotFound);
  m.assets["../escape"] = "x";
  CHECK(serving::write_saved_model(base.path, m).status().message().find("plain file name") !=
        std::string::npos);
  m.assets.erase("../escape");
  serving::SavedModel bad = m;
  bad.signatures["serving_default"].method = "classify";
  CHECK(!serving::write_saved_model(base.path, bad).ok());
}
