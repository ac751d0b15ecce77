// A custom model_fn under an Estimator and an Experiment: a small convolution-free network on
// Fashion-MNIST with dropout, evaluated every 500 steps on the test set, stopping early when the
// accuracy stops improving, the best weights kept and exported.
//
//   custom_estimator [--model-dir DIR]      (default: /tmp/troupe-custom)
#include <cstdio>
#include <cstring>
#include <string>

#include "troupe/troupe.h"

using namespace troupe;
using namespace troupe::estimators;
using runtime::DType;
using runtime::Output;
using runtime::Shape;

namespace {

Output dense(runtime::GraphBuilder& b, const std::string& name, Output x, int64_t in, int64_t out) {
  auto scope = b.name_scope(name);
  Output w = ops::variable(b, "kernel", Shape{in, out}, DType::kFloat32,
                           ops::he_normal(b, Shape{in, out}));
  Output bias = ops::variable(b, "bias", Shape{out}, DType::kFloat32,
                              ops::zeros(b, Shape{out}, DType::kFloat32));
  return ops::bias_add(b, ops::matmul(b, x, w), bias);
}

runtime::Result<EstimatorSpec> model_fn(ModelInputs& in) {
  runtime::GraphBuilder& b = in.b;
  const bool training = in.mode == Mode::kTrain;
  Output h = ops::relu(b, dense(b, "hidden1", in.features.at("image"), 784, 300));
  if (training) h = ops::dropout(b, h, param(in.params, "dropout", 0.2), true);
  h = ops::relu(b, dense(b, "hidden2", h, 300, 100));
  Output logits = dense(b, "logits", h, 100, 10);
  EstimatorSpec spec;
  spec.predictions["classes"] = ops::argmax(b, logits, 1);
  spec.predictions["probabilities"] = ops::softmax(b, logits);
  if (in.mode == Mode::kPredict) return spec;
  spec.loss =
      ops::reduce_mean(b, ops::sparse_softmax_cross_entropy_with_logits(b, in.labels, logits));
  spec.eval_metric_ops["accuracy"] = {"accuracy", in.labels, spec.predictions["classes"]};
  spec.eval_metric_ops["top_2"] = {"top_k_accuracy:2", in.labels, logits};
  if (training) {
    spec.train_op = ops::minimize(b, spec.loss, ops::Optimizer::adam(param(in.params, "lr", 1e-3)));
  }
  return spec;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_dir = "/tmp/troupe-custom";
  if (argc == 3 && !std::strcmp(argv[1], "--model-dir"))
    model_dir = argv[2];
  else if (argc != 1) {
    std::fprintf(stderr, "usage: custom_estimator [--model-dir DIR]\n");
    return 2;
  }
  RunConfig config;
  config.model_dir = model_dir;
  config.tf_random_seed = 7;
  config.save_checkpoints_steps = 500;
  Estimator est(model_fn, config, {{"dropout", "0.2"}, {"lr", "0.001"}});
  auto train = input::fashion_mnist(
      "train", {.batch_size = 128, .num_epochs = 8, .shuffle = true, .seed = 7});
  auto test = input::fashion_mnist("test", {.batch_size = 1000});
  if (!train.ok() || !test.ok()) {
    std::fprintf(stderr, "error: %s\n", (!train.ok() ? train : test).status().to_string().c_str());
    return 1;
  }
  ExperimentOptions o;
  o.eval_every_steps = 500;
  o.early_stopping_rounds = 3;
  o.early_stopping_metric = "accuracy";
  o.export_strategy = "best";
  Experiment exp(est, *train, {{"test", *test}}, o);
  auto report = exp.train_and_evaluate();
  if (!report.ok()) {
    std::fprintf(stderr, "error: %s\n", report.status().to_string().c_str());
    return 1;
  }
  std::printf("{\"accuracy\": %.4f, \"top_2\": %.4f, \"global_step\": %lld, \"best_step\": %lld}\n",
              report->final_metrics.at("accuracy"), report->final_metrics.at("top_2"),
              static_cast<long long>(report->global_step),
              static_cast<long long>(report->best_step));
  return 0;
}
