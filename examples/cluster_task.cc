// One task of a training cluster, as a C++ program plays it: the process reads its part from
// TF_CONFIG (the chief, a worker, a ps or the evaluator) and Experiment::train_and_evaluate()
// plays it, as `troupe train` and `troupe server` do. A softmax regression on Fashion-MNIST whose
// variables live on the ps task; the chief checkpoints to --model-dir, the evaluator evaluates
// each checkpoint there, and every member proves the job secret (TROUPE_JOB_SECRET).
//
//   troupe secret /tmp/job.pem && export TROUPE_JOB_SECRET=/tmp/job.pem
//   C='"cluster": {"chief": ["127.0.0.1:2220"], "worker": ["127.0.0.1:2221"],
//                  "ps": ["127.0.0.1:2222"], "evaluator": ["127.0.0.1:2223"]}'
//   for t in ps:0 worker:0 evaluator:0 chief:0; do
//     export TF_CONFIG="{$C, \"task\": {\"type\": \"${t%:*}\", \"index\": ${t#*:}}}"
//     build/examples/cluster_task --model-dir /tmp/troupe-cluster-task &
//   done; wait      # the chief's end ends the evaluator; Ctrl-C (SIGINT) stops the ps
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "troupe/troupe.h"

using namespace troupe;
using namespace troupe::estimators;
using runtime::DType;
using runtime::Output;
using runtime::Shape;

namespace {

runtime::Result<EstimatorSpec> model_fn(ModelInputs& in) {
  runtime::GraphBuilder& b = in.b;
  Output w = ops::variable(b, "weights", Shape{784, 10}, DType::kFloat32,
                           ops::zeros(b, Shape{784, 10}, DType::kFloat32));
  Output bias = ops::variable(b, "bias", Shape{10}, DType::kFloat32,
                              ops::zeros(b, Shape{10}, DType::kFloat32));
  Output logits = ops::bias_add(b, ops::matmul(b, in.features.at("image"), w), bias);
  EstimatorSpec spec;
  spec.predictions["classes"] = ops::argmax(b, logits, 1);
  if (in.mode == Mode::kPredict) return spec;
  spec.loss =
      ops::reduce_mean(b, ops::sparse_softmax_cross_entropy_with_logits(b, in.labels, logits));
  spec.eval_metric_ops["accuracy"] = {"accuracy", in.labels, spec.predictions["classes"]};
  if (in.mode == Mode::kTrain)
    spec.train_op = ops::minimize(b, spec.loss, ops::Optimizer::adam(0.01));
  return spec;
}

// Ctrl-C or SIGTERM: the handler only wakes a thread, which asks the Experiment to stop.
volatile std::sig_atomic_t signalled = 0;
void on_signal(int) { signalled = 1; }

}  // namespace

int main(int argc, char** argv) {
  std::string model_dir = "/tmp/troupe-cluster-task";
  if (argc == 3 && !std::strcmp(argv[1], "--model-dir")) {
    model_dir = argv[2];
  } else if (argc != 1) {
    std::fprintf(stderr, "usage: cluster_task [--model-dir DIR]   (TF_CONFIG names the task)\n");
    return 2;
  }
  auto cluster = parse_tf_config(std::getenv("TF_CONFIG"));
  auto secret = actors::job_secret_from_env();
  if (!cluster.ok() || !secret.ok()) {
    std::fprintf(stderr, "error: %s\n",
                 (!cluster.ok() ? cluster.status() : secret.status()).to_string().c_str());
    return 2;
  }
  RunConfig config;
  config.model_dir = model_dir;
  config.save_checkpoints_steps = 200;
  config.cluster = *cluster;
  config.job_secret = *secret;
  Estimator est(model_fn, config);
  // Each replica reads its part round and round, until the shared global step reaches 1000.
  auto train = input::fashion_mnist(
      "train", {.batch_size = 128, .num_epochs = 0, .shuffle = true, .seed = 7});
  auto test = input::fashion_mnist("test", {.batch_size = 1000});
  if (!train.ok() || !test.ok()) {
    std::fprintf(stderr, "error: %s\n", (!train.ok() ? train : test).status().to_string().c_str());
    return 1;
  }
  ExperimentOptions o;
  o.train_steps = 1000;  // the global step the chief and the workers stop at
  o.evaluator_timeout_secs = 60;
  Experiment exp(est, *train, {{"test", *test}}, o);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done && !signalled) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (signalled) exp.request_stop();
  });
  auto report = exp.train_and_evaluate();
  done = true;
  watcher.join();
  if (!report.ok()) {
    std::fprintf(stderr, "%s: %s\n", cluster->task_label().c_str(),
                 report.status().to_string().c_str());
    return 1;
  }
  std::string line = "{\"task\": \"" + cluster->task_label() +
                     "\", \"global_step\": " + std::to_string(report->global_step);
  if (report->final_metrics.count("accuracy")) {
    line += ", \"accuracy\": " + std::to_string(report->final_metrics.at("accuracy"));
  }
  std::printf("%s}\n", line.c_str());
  return 0;
}
