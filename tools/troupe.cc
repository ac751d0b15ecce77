// The troupe command: train, evaluate, predict and export a canned model, alone or as a task of
// a cluster; serve exports over TensorFlow Serving's REST API; serve a ps task, and launch a
// whole cluster on this machine.
//
//   troupe train --model dnn|linear|svm|wide_deep|kmeans|boosted_trees|random_forest|rnn
//                [--regression] --data fashion-mnist --model-dir DIR
//                [--hidden 256,128] [--epochs N | --steps N] [--batch-size B]
//                [--optimizer adam|sgd|momentum|adagrad|rmsprop|ftrl] [--learning-rate R]
//                [--dropout D] [--activation A] [--l1 L] [--l2 L] [--clip-norm C]
//                [--lr-schedule cosine|... --decay-steps N --warmup-steps W]
//                [--standardize auto|on|off] [--eval-every N] [--early-stopping-rounds K]
//                [--reduce-lr-on-plateau K]
//                [--seed S] [--eval-data DATA] [--export latest|best]
//   troupe evaluate --model-dir DIR --data DATA
//   troupe predict --model-dir DIR | --export BASE/VERSION --data DATA [--output FILE]
//   troupe export --model-dir DIR --out BASE [--checkpoint latest|best|PATH]
//   troupe search --model dnn|linear|svm|kmeans|boosted_trees|random_forest --data DATA
//                 --grid "NAME=VALUES ..." [--cv 5] [--random N] [--regression]
//                 [--output results.csv]
//   troupe serve --model_base_path BASE --model_name NAME [--port 8500] [--rest_api_port 8501]
//                [--enable_batching]
//   troupe serve --model_config_file FILE [--model_config_file_poll_wait_seconds N] [...]
//   troupe server  (TF_CONFIG, --cluster FILE --job ps --task N, or --cluster-resolver
//                  slurm|mpi --ps N) [--secret FILE]
//   troupe cluster --ps N --workers M [--evaluator] [--pin] -- train ...
//   troupe secret FILE | troupe secret --reader JOB FILE
//   troupe convert --data DATA --out PATH.tfrecord[.gz]|PATH.csv|PATH.trec
//
// DATA is fashion-mnist (Debian's dataset-fashion-mnist; train split for training, test split
// otherwise), csv:PATH (a glob too) with --label COLUMN, libsvm:PATH (svmlight files), or
// tfrecord:PATH (TFRecord files of tf.Example, gzip or zlib by suffix) with --label. train and
// evaluate end with one JSON line of the evaluation metrics; predict writes a CSV of classes and
// probabilities. A bad flag or bad data is one line on stderr and exit status 2 (usage) or 1 (data,
// model); what a restart may cure (a peer lost, a deadline) 128. Ctrl-C (or SIGTERM) during
// training stops it gracefully: the running steps finish, the checkpoint is saved, the model is
// evaluated and the JSON line printed; a second one exits at once. After SIGTERM (a cluster's
// launcher asking a task to go) the status is 143, so that the launcher restarts it. In a
// cluster, `troupe train` plays any task: a ps task serves as `troupe server` does.
// `troupe COMMAND --help` prints that command's usage and options.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tools/cli.h"

namespace {

using Run = int (*)(const std::vector<std::string>& args, const std::string& self);

// A subcommand: its synopsis (its lines of `troupe --help`) and the options `troupe NAME --help`
// adds below it, with what DATA is and how a task joins a cluster where the command takes them.
struct Command {
  const char* name;
  Run run;
  const char* synopsis;
  const char* options;
  bool reads_data = false;
  bool joins_cluster = false;
};

const char* kData =
    "DATA: fashion-mnist | csv:PATH (with --label COLUMN) | libsvm:PATH (svmlight files)\n"
    "      | tfrecord:PATH (TFRecord of tf.Example, .gz/.zz compressed; --label FEATURE)\n";

const char* kClusterTask =
    "a task of a cluster: TF_CONFIG, or --cluster FILE --job chief|worker|ps|evaluator --task N\n"
    "  FILE: {\"chief\": [\"host:port\"], \"worker\": [...], \"ps\": [...]}\n"
    "  --cluster-resolver slurm --ps N [--port-base 8888]: from Slurm's step (srun), the first N\n"
    "    ranks ps tasks, the rest workers; --cluster-resolver mpi --hostfile FILE: from mpirun\n"
    "  --secret FILE (or TROUPE_JOB_SECRET): the job secret every member holds\n"
    "  exit status: 0 done, 1 bad data, 2 a bad flag, 128 a peer lost or a deadline, 143 after\n"
    "    SIGTERM (a graceful stop: checkpointed, to be restarted)\n";

const Command kCommands[] = {
    {"train", [](const auto& a, const auto&) { return troupe::cli::train(a); },
     "troupe train --model dnn|linear|svm|wide_deep|kmeans|boosted_trees|random_forest|rnn\n"
     "             --data DATA --model-dir DIR [options]\n",
     "options: --regression --epochs N | --steps N --batch-size B --optimizer NAME\n"
     "  --learning-rate R --clip-norm C --eval-every N --early-stopping-rounds K --seed S\n"
     "  --lr-schedule constant|exponential|piecewise_constant|polynomial|cosine|\n"
     "    cosine_restarts --decay-steps N --warmup-steps W --decay-rate R (exponential)\n"
     "    --lr-boundaries 1000,2000 --lr-factors 1,0.1,0.01 (piecewise_constant)\n"
     "    --lr-alpha A (the final rate's fraction) --decay-power P (polynomial)\n"
     "  --reduce-lr-on-plateau K (halve the rate after K evaluations without improvement)\n"
     "  --metrics f1_macro,precision_weighted,recall_micro,mean_iou,mean_per_class_accuracy,\n"
     "    precision_at_3,recall_at_3,top_3_accuracy\n"
     "    (a classifier's further evaluation metrics)\n"
     "  --eval-data DATA --n-classes C --standardize auto|on|off (auto: csv tables)\n"
     "  --columns FILE (feature columns; default: text columns categorical from the data;\n"
     "    tfrecord data is parsed as they read it: a categorical feature may vary in length)\n"
     "  --weight-column COLUMN (weighs each example's loss)\n"
     "  --label A,B (csv, tfrecord): a head per label column (dnn, linear, wide_deep): text or\n"
     "    whole numbers a classifier, other numbers a regressor; metrics accuracy/A, rmse/B,\n"
     "    loss/A, ...; the export serves a classify or regress signature per head\n"
     "  dnn: --hidden 256,128 --dropout D --activation relu|tanh|sigmoid|elu --batch-norm true\n"
     "  wide_deep: the dnn flags for the deep part, --linear-optimizer NAME\n"
     "    --linear-learning-rate R for the wide part\n"
     "  linear, svm: --l1 L --l2 L (svm: hinge loss; with --regression epsilon-insensitive)\n"
     "  boosted_trees: --n-trees 100 --max-depth 6 --learning-rate 0.1 --l1 L --l2 1\n"
     "    --max-bins 64; random_forest: --n-trees 100 --max-nodes 10000 --max-depth D\n"
     "    --max-features F --max-bins 64. Trees train until grown (no --epochs); each tree\n"
     "    grows from a batch (--batch-size, default 10000 for boosting, 100000 for forests),\n"
     "    or a layer a batch with --layers-per-batch 1 (TF's boosted trees)\n"
     "  rnn: --rnn-units 64[,32] (stacked layers) --cell lstm|gru --time-steps T (each\n"
     "    example's numbers as T steps; Fashion-MNIST: 28, a row a step) --bidirectional true\n"
     "  --sequence-length T: tfrecord:... of SequenceExample, every sequence cut or padded to T\n"
     "    steps (default: the longest of the first records; evaluate and predict use the\n"
     "    model's)\n"
     "  kmeans: --n-clusters K --init k-means++|random (inertia; with labels the adjusted\n"
     "  Rand index)\n"
     "  --export latest|best   (the model for serving, in DIR/export/<which>/<seconds>)\n"
     "in a cluster:\n"
     "  --ps-strategy round_robin|greedy --cluster-deadline SECONDS (waiting for the others)\n"
     "  --sync (one update a step from every replica's gradients) --replicas-to-aggregate R\n"
     "  --sync-timeout SECONDS (a round short of replicas closes with those it has)\n"
     "  --min-replicas M --max-replicas X: elastic --sync, a round of the workers live when it\n"
     "    opens (at least M: fewer wait for workers to join; at most X), as Horovod Elastic\n"
     "  --steps N: the global step to stop at; --eval-timeout SECONDS (the evaluator)\n",
     true, true},
    {"evaluate", [](const auto& a, const auto&) { return troupe::cli::evaluate(a); },
     "troupe evaluate --model-dir DIR --data DATA [--label COLUMN]\n",
     "prints one JSON line of the evaluation metrics\n", true},
    {"predict", [](const auto& a, const auto&) { return troupe::cli::predict(a); },
     "troupe predict --model-dir DIR | --export BASE/VERSION --data DATA [--output FILE]\n",
     "options: --label COLUMN (left out of the features) --signature NAME (of an export)\n"
     "writes a CSV of classes and probabilities (values for a regressor)\n",
     true},
    {"export", [](const auto& a, const auto&) { return troupe::cli::export_model(a); },
     "troupe export --model-dir DIR --out BASE [--checkpoint latest|best|PATH]\n",
     "options: --class-labels FILE (one class name a line)\n"
     "  --warmup FILE (TF Serving's warm-up requests, a TFRecord of PredictionLog protos, as\n"
     "    assets.extra/tf_serving_warmup_requests: troupe serve runs them before it serves)\n"
     "writes BASE/<version>: the graph, the variables and the signatures troupe serve loads\n"},
    {"search", [](const auto& a, const auto&) { return troupe::cli::search(a); },
     "troupe search --model dnn|linear|svm|kmeans|boosted_trees|random_forest --data DATA\n"
     "              --grid \"NAME=VALUES ...\" [--cv 5] [--random N] [--n-jobs N]\n"
     "              [--output results.csv]\n",
     "options: --label COLUMN --regression --seed S --standardize auto|on|off --n-classes C\n"
     "  --scoring NAME (scikit-learn's: accuracy, f1_macro, precision_weighted, r2,\n"
     "    neg_mean_squared_error, ...; default the model's score: accuracy or R^2)\n"
     "  --epochs N --batch-size B, and each model's flags as train takes them\n"
     "  --grid \"hidden=64,128;256,128 learning_rate=0.001,0.003\": each name's values\n",
     true},
    {"serve", [](const auto& a, const auto&) { return troupe::cli::serve(a); },
     "troupe serve --model_base_path BASE --model_name NAME [options]\n"
     "       troupe serve --model_config_file FILE [--model_config_file_poll_wait_seconds N]\n"
     "         [options]\n",
     "--model_config_file: TF Serving's ModelServerConfig text (model_config_list { config {\n"
     "  name base_path model_version_policy version_labels } }), re-read every N seconds when\n"
     "  N > 0; routes /v1/models/NAME[/versions/V | /labels/L]\n"
     "--port 8500: gRPC (TF Serving's PredictionService, ModelService); --rest_api_port 8501:\n"
     "  REST; 0 for either: a free port, logged\n"
     "options (TensorFlow Serving's flags): --host 127.0.0.1 --enable_batching\n"
     "  --max_batch_size 32 --batch_timeout_micros 1000 --num_batch_threads 2\n"
     "  --max_enqueued_batches 64 --file_system_poll_wait_seconds 1 --rest_api_num_threads 2\n"
     "  --max_body_bytes 16777216 --max_connections 1024 --idle_timeout_seconds 30\n"
     "  --drain_seconds 30 (Ctrl-C answers the requests in flight first)\n"
     "  --ssl_cert_file PEM --ssl_key_file PEM (HTTPS and gRPC over TLS) --auth_token_file F\n"
     "  (a bearer token on both ports)\n"
     "GET /monitoring/prometheus/metrics: requests, latencies, batch sizes and queue waits\n"
     "  for Prometheus, under TF Serving's metric names\n"},
    {"server", [](const auto& a, const auto&) { return troupe::cli::server(a); },
     "troupe server [--cluster FILE --job ps --task N] [--secret FILE] [--bind HOST]\n"
     "              [--data-port P] [--advertise-data-port Q] [--pin] [--handshake-timeout MS]\n",
     "a ps task: tensors travel on a port of their own (--data-port, default any free one);\n"
     "  --advertise-data-port: the one peers dial when a forward (NAT, proxy) is in front\n"
     "  --pin: a peer's calls run on the core its packets arrive on (on one machine, the\n"
     "  caller's own, idle while it waits); cluster --pin passes it on\n"
     "  --handshake-timeout MS (2000): a peer's whole handshake on either port, which no\n"
     "  byte it sends extends: about a round trip, little for strangers to hold a port with\n"
     "  --insecure: no job secret (only on a trusted network)\n",
     false, true},
    {"cluster", [](const auto& a, const auto& self) { return troupe::cli::cluster(a, self); },
     "troupe cluster --ps N --workers M [--evaluator] [--host H] [--pin] -- train ...\n",
     "every task of a cluster as a process of this machine, logs prefixed, stopped together\n"
     "  --workers counts the chief; each task is a process on --host (127.0.0.1);\n"
     "  --secret FILE (default: a new one) --grace SECONDS (30: the wait after Ctrl-C)\n"
     "  --pin: each training replica on a core of its own, ps tasks on the cores left;\n"
     "  replicas that fill the cores run at nice 10, so that the ps tasks answer at once\n"},
    {"secret", [](const auto& a, const auto&) { return troupe::cli::secret(a); },
     "troupe secret FILE | troupe secret --reader JOB FILE\n",
     "writes a new job secret to FILE (mode 600); with --reader, the reader's secret of job\n"
     "secret JOB: what an evaluator holds, which reads a ps's variables and changes nothing\n"},
    {"convert", [](const auto& a, const auto&) { return troupe::cli::convert(a); },
     "troupe convert --data DATA --out PATH [--label COLUMN] [--split train|test]\n",
     "DATA written whole in the format PATH's suffix names: .tfrecord (.gz, .zz, .zlib:\n"
     "  compressed) TFRecord of tf.Example, .csv (a column per value), .trec (troupe's\n"
     "  record files, the fastest to train from)\n",
     true},
};

const Command* find_command(const std::string& name) {
  for (const Command& c : kCommands) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

std::string full_usage() {
  std::string text = "usage: ";
  for (const Command& c : kCommands)
    text += std::string(&c == kCommands ? "" : "       ") + c.synopsis;
  text += kData;
  text += "troupe COMMAND --help shows a command's options.\n";
  return text;
}

std::string command_usage(const Command& c) {
  std::string text = std::string("usage: ") + c.synopsis + c.options;
  if (c.reads_data) text += kData;
  if (c.joins_cluster) text += kClusterTask;
  return text;
}

// --help or -h among a command's own arguments (cluster's task command after -- is not its own).
bool asks_for_help(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--") return false;
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

// The path of this executable, so that the launcher starts the same troupe for every task.
std::string self_path(const char* argv0) {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string(argv0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(full_usage().c_str(), argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const Command* command = find_command(argv[1]);
  if (!command) return troupe::cli::usage_error(std::string("unknown command '") + argv[1] + "'");
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (asks_for_help(args)) {
    std::fputs(command_usage(*command).c_str(), stdout);
    return 0;
  }
  const int status = command->run(args, self_path(argv[0]));
  if (troupe::cli::GracefulStop::received() == SIGTERM && status != troupe::cli::kExitUsage) {
    return 128 + SIGTERM;
  }
  return status;
}
