// The troupe command line: train, evaluate and predict with a canned model.
//
//   troupe train --model dnn --data fashion-mnist --model-dir DIR [--hidden 256,128]
//                [--epochs N | --steps N] [--batch-size B] [--optimizer adam|sgd|momentum|
//                adagrad|rmsprop|ftrl] [--learning-rate R] [--dropout D] [--activation A]
//                [--eval-every N] [--early-stopping-rounds K] [--seed S] [--eval-data DATA]
//                [--export latest|best]
//   troupe evaluate --model-dir DIR --data DATA
//   troupe predict --model-dir DIR --data DATA [--output FILE]
//
// DATA is fashion-mnist (Debian's dataset-fashion-mnist; train split for training, test split
// otherwise) or csv:PATH (a glob too) with --label COLUMN. train and evaluate end with one JSON
// line of the evaluation metrics; predict writes a CSV of classes and probabilities. A bad flag
// or bad data is one line on stderr and exit status 2 (usage) or 1 (data, model). Ctrl-C (or
// SIGTERM) during training stops it gracefully: the running steps finish, the checkpoint is
// saved, the model is evaluated and the JSON line printed; a second one exits at once.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "estimators/canned/dnn_classifier.h"
#include "estimators/experiment.h"
#include "estimators/metrics.h"
#include "runtime/record_io.h"

using namespace troupe;
using estimators::Params;
namespace input = troupe::estimators::input;

namespace {

// Turns SIGINT and SIGTERM into a call of `stop` on a thread of its own: the handler (any thread
// may receive the signal, OpenBLAS's too) only writes a byte to a pipe, the watcher reads it.
// A second signal exits at once.
class GracefulStop {
 public:
  GracefulStop() = default;
  ~GracefulStop() { finish(); }
  GracefulStop(const GracefulStop&) = delete;
  GracefulStop& operator=(const GracefulStop&) = delete;

  void watch(std::function<void()> stop) {
    if (::pipe(pipe_) != 0) return;  // no graceful stop then; Ctrl-C still ends the process
    write_end_ = pipe_[1];
    struct sigaction action = {};
    action.sa_handler = &GracefulStop::on_signal;
    sigemptyset(&action.sa_mask);
    for (int sig : {SIGINT, SIGTERM}) sigaction(sig, &action, nullptr);
    watcher_ = std::thread([this, stop = std::move(stop)] {
      char sig = 0;
      if (::read(pipe_[0], &sig, 1) != 1 || sig == 0) return;
      std::fprintf(stderr, "INFO: %s (again to quit now)\n",
                   sig == SIGINT ? "interrupted" : "terminated");
      stop();
    });
  }
  // Before what `stop` touches is destroyed.
  void finish() {
    if (!watcher_.joinable()) return;
    for (int sig : {SIGINT, SIGTERM}) std::signal(sig, SIG_DFL);
    const char none = 0;
    if (::write(pipe_[1], &none, 1) != 1) {
      // The watcher may have read a signal's byte already; it ends by itself then.
    }
    watcher_.join();
    ::close(pipe_[0]);
    ::close(pipe_[1]);
  }

 private:
  static void on_signal(int sig) {
    if (signalled_.exchange(true)) ::_exit(128 + sig);
    const char byte = static_cast<char>(sig);
    if (::write(write_end_, &byte, 1) != 1) ::_exit(128 + sig);
  }
  int pipe_[2] = {-1, -1};
  std::thread watcher_;
  static std::atomic<bool> signalled_;
  static int write_end_;
};
std::atomic<bool> GracefulStop::signalled_{false};
int GracefulStop::write_end_ = -1;

const char* kUsage =
    "usage: troupe train --model dnn --data DATA --model-dir DIR [options]\n"
    "       troupe evaluate --model-dir DIR --data DATA\n"
    "       troupe predict --model-dir DIR --data DATA [--output FILE]\n"
    "DATA: fashion-mnist | csv:PATH (with --label COLUMN)\n"
    "train options: --hidden 256,128 --epochs N | --steps N --batch-size B --optimizer NAME\n"
    "  --learning-rate R --dropout D --activation relu|tanh|sigmoid|elu --eval-every N\n"
    "  --early-stopping-rounds K --seed S --eval-data DATA --n-classes C\n"
    "  --export latest|best   (the model for serving, in DIR/export/<which>/<seconds>)\n";

struct Args {
  std::string command;
  std::map<std::string, std::string> flags;
};

const std::set<std::string> kFlags = {"model",
                                      "data",
                                      "model-dir",
                                      "hidden",
                                      "epochs",
                                      "steps",
                                      "batch-size",
                                      "optimizer",
                                      "learning-rate",
                                      "dropout",
                                      "activation",
                                      "eval-every",
                                      "early-stopping-rounds",
                                      "seed",
                                      "eval-data",
                                      "label",
                                      "output",
                                      "n-classes",
                                      "export"};

int usage_error(const std::string& what) {
  std::fprintf(stderr, "troupe: %s (troupe --help shows the usage)\n", what.c_str());
  return 2;
}

int fail(const runtime::Status& s) {
  std::fprintf(stderr, "troupe: %s\n", s.to_string().c_str());
  return 1;
}

bool to_int(const std::string& flag, const std::string& v, int64_t min, int64_t* out,
            std::string* error) {
  try {
    size_t used = 0;
    *out = std::stoll(v, &used);
    if (used == v.size() && *out >= min) return true;
  } catch (...) {
  }
  *error = "--" + flag + ": '" + v + "' is not an integer >= " + std::to_string(min);
  return false;
}

// The model's description in model_dir, so that evaluate and predict can rebuild it.
runtime::Status save_model_info(const std::string& dir, const Params& p, const std::string& label) {
  std::string text = "model dnn\nlabel " + label + "\n";
  for (const auto& [k, v] : p) text += "param " + k + " " + v + "\n";
  return runtime::write_file_atomic(dir + "/troupe_model.txt", text);
}

runtime::Result<std::pair<Params, std::string>> load_model_info(const std::string& dir) {
  std::ifstream in(dir + "/troupe_model.txt");
  if (!in) {
    return runtime::not_found(dir, " holds no troupe model (no troupe_model.txt): train one first");
  }
  Params p;
  std::string label, word;
  while (in >> word) {
    if (word == "param") {
      std::string k, v;
      in >> k;
      std::getline(in, v);
      if (!v.empty() && v[0] == ' ') v.erase(0, 1);
      p[k] = v;
    } else if (word == "label") {
      std::getline(in, label);
      if (!label.empty() && label[0] == ' ') label.erase(0, 1);
    } else {
      std::string rest;
      std::getline(in, rest);
    }
  }
  return std::make_pair(p, label);
}

runtime::Result<input::Dataset> open_data(const std::string& spec, const std::string& split,
                                          const std::string& label,
                                          const input::DatasetOptions& o) {
  if (spec == "fashion-mnist" || spec == "fashion_mnist") return input::fashion_mnist(split, o);
  if (spec.rfind("csv:", 0) == 0) {
    if (label.empty()) return runtime::invalid_argument("--data csv:... needs --label COLUMN");
    return input::csv(spec.substr(4), label, {}, o);
  }
  return runtime::invalid_argument("--data '", spec, "' is not fashion-mnist or csv:PATH");
}

// The number of classes: one more than the largest label in the data.
runtime::Result<int64_t> count_classes(const input::Dataset& d) {
  const int label = d.component(d.label);
  double top = -1;
  for (int64_t u = 0; u < d.source->num_units(); ++u) {
    std::vector<actors::Chunk> chunks;
    int64_t skipped = 0;
    TROUPE_RETURN_IF_ERROR(d.source->read(u, &chunks, &skipped));
    for (const actors::Chunk& c : chunks) {
      const std::vector<double> v = estimators::as_doubles(c.components[label]);
      for (int64_t r = c.first(); r < c.last(); ++r) {
        if (!(v[r] >= 0 && v[r] < 2147483648.0) || v[r] != std::floor(v[r])) {
          return runtime::invalid_argument("label ", v[r],
                                           " is not a class number (0, 1, ... below 2^31)");
        }
        top = std::max(top, v[r]);
      }
    }
  }
  return static_cast<int64_t>(top) + 1;
}

void print_metrics(const estimators::Metrics& m) {
  std::string line = "{";
  auto add = [&](const std::string& k, double v, bool integer) {
    char buf[128];
    if (integer) {
      std::snprintf(buf, sizeof buf, "%s\"%s\": %lld", line.size() > 1 ? ", " : "", k.c_str(),
                    static_cast<long long>(v));
    } else {
      std::snprintf(buf, sizeof buf, "%s\"%s\": %.4f", line.size() > 1 ? ", " : "", k.c_str(), v);
    }
    line += buf;
  };
  for (const char* k : {"accuracy", "loss"}) {
    if (m.count(k)) add(k, m.at(k), false);
  }
  add("global_step", m.count("global_step") ? m.at("global_step") : 0, true);
  for (const auto& [k, v] : m) {
    if (k != "accuracy" && k != "loss" && k != "global_step" && k != "average_loss")
      add(k, v, false);
  }
  std::printf("%s}\n", line.c_str());
  std::fflush(stdout);
}

int train(const Args& a) {
  GracefulStop graceful;
  auto flag = [&](const std::string& k, const std::string& d) {
    auto it = a.flags.find(k);
    return it == a.flags.end() ? d : it->second;
  };
  if (flag("model", "dnn") != "dnn") return usage_error("--model: only 'dnn' is available");
  const std::string exported = flag("export", "");
  if (!exported.empty() && exported != "latest" && exported != "best") {
    return usage_error("--export: '" + exported + "' is not latest or best");
  }
  if (!a.flags.count("data")) return usage_error("train needs --data");
  if (!a.flags.count("model-dir")) return usage_error("train needs --model-dir");
  if (a.flags.count("epochs") && a.flags.count("steps")) {
    return usage_error("--epochs and --steps exclude each other");
  }
  std::string error;
  int64_t epochs = 10, steps = 0, batch = 128, eval_every = 0, rounds = 0, seed = 42;
  if ((a.flags.count("epochs") && !to_int("epochs", flag("epochs", ""), 1, &epochs, &error)) ||
      (a.flags.count("steps") && !to_int("steps", flag("steps", ""), 1, &steps, &error)) ||
      !to_int("batch-size", flag("batch-size", "128"), 1, &batch, &error) ||
      !to_int("eval-every", flag("eval-every", "0"), 0, &eval_every, &error) ||
      !to_int("early-stopping-rounds", flag("early-stopping-rounds", "0"), 0, &rounds, &error) ||
      !to_int("seed", flag("seed", "42"), 0, &seed, &error)) {
    return usage_error(error);
  }
  const std::string label =
      flag("label", a.flags.count("data") && flag("data", "").rfind("csv:", 0) == 0 ? "" : "label");
  Params p = estimators::to_params({});
  p["hidden_units"] = flag("hidden", "256,128");
  p["optimizer"] = flag("optimizer", "adam");
  p["learning_rate"] = flag("learning-rate", "0.001");
  p["dropout"] = flag("dropout", "0");
  p["activation"] = flag("activation", "relu");
  input::DatasetOptions train_opts{.batch_size = batch,
                                   .num_epochs = steps > 0 ? 0 : epochs,
                                   .shuffle = true,
                                   .seed = static_cast<uint64_t>(seed)};
  auto train_data = open_data(flag("data", ""), "train", label, train_opts);
  if (!train_data.ok()) return fail(train_data.status());
  int64_t n_classes = 10;
  if (a.flags.count("n-classes")) {
    if (!to_int("n-classes", flag("n-classes", ""), 2, &n_classes, &error))
      return usage_error(error);
  } else if (flag("data", "") != "fashion-mnist") {
    auto counted = count_classes(*train_data);
    if (!counted.ok()) return fail(counted.status());
    n_classes = std::max<int64_t>(2, *counted);
  }
  p["n_classes"] = std::to_string(n_classes);
  if (auto checked = estimators::dnn_options(p); !checked.ok()) return fail(checked.status());
  input::DatasetOptions eval_opts{.batch_size = 1000};
  const std::string eval_spec = flag("eval-data", flag("data", ""));
  if (!a.flags.count("eval-data") && eval_spec.rfind("csv:", 0) == 0) {
    std::fprintf(stderr,
                 "WARNING: evaluating on the training data; pass --eval-data for a held-out set\n");
  }
  auto eval_data = open_data(eval_spec, "test", label, eval_opts);
  if (!eval_data.ok()) return fail(eval_data.status());

  estimators::RunConfig config;
  config.model_dir = flag("model-dir", "");
  config.tf_random_seed = seed;
  config.save_checkpoints_steps = eval_every > 0 ? eval_every : 1000;
  config.log_step_count_steps = 100;
  if (auto earlier = load_model_info(config.model_dir); earlier.ok()) {
    // The layers must match what model_dir holds; the optimizer and its rate may change.
    for (const char* key : {"hidden_units", "n_classes", "activation"}) {
      const std::string was = earlier->first.count(key) ? earlier->first.at(key) : "";
      if (was != p[key]) {
        return usage_error(config.model_dir + " holds a model with " + key + " " + was + ", not " +
                           p[key] + ": pass the same or another --model-dir");
      }
    }
  }
  std::error_code ec;
  std::filesystem::create_directories(config.model_dir, ec);
  if (ec)
    return fail(runtime::internal_error("cannot create ", config.model_dir, ": ", ec.message()));
  estimators::Estimator est(estimators::dnn_classifier_model_fn, config, p);
  if (auto s = save_model_info(config.model_dir, p, label); !s.ok()) return fail(s);
  estimators::ExperimentOptions xo;
  xo.eval_every_steps = eval_every;
  xo.early_stopping_rounds = static_cast<int>(rounds);
  xo.export_strategy = flag("export", "");
  xo.early_stopping_metric = "accuracy";
  if (steps > 0) {
    // --steps counts from where an earlier run in this model_dir stopped.
    auto latest = runtime::read_checkpoint(est.latest_checkpoint());
    xo.train_steps = (latest.ok() ? latest->global_step : 0) + steps;
  }
  estimators::Experiment exp(est, *train_data, {{"", *eval_data}}, xo);
  graceful.watch([&exp] { exp.request_stop(); });
  auto report = exp.train_and_evaluate();
  graceful.finish();
  if (!report.ok()) return fail(report.status());
  std::fprintf(stderr, "INFO: trained to step %lld in %.1f s; model in %s\n",
               static_cast<long long>(report->global_step), report->seconds,
               config.model_dir.c_str());
  for (const std::string& dir : report->exports) {
    std::fprintf(stderr, "INFO: exported the model to %s\n", dir.c_str());
  }
  print_metrics(report->final_metrics);
  return 0;
}

// Rebuilds the model that `train` saved in --model-dir.
runtime::Result<std::unique_ptr<estimators::Estimator>> open_model(const Args& a,
                                                                   std::string* label) {
  const std::string dir = a.flags.at("model-dir");
  TROUPE_ASSIGN_OR_RETURN(auto info, load_model_info(dir));
  *label = info.second;
  estimators::RunConfig config;
  config.model_dir = dir;
  return std::make_unique<estimators::Estimator>(estimators::dnn_classifier_model_fn, config,
                                                 info.first);
}

int evaluate(const Args& a) {
  if (!a.flags.count("model-dir")) return usage_error("evaluate needs --model-dir");
  if (!a.flags.count("data")) return usage_error("evaluate needs --data");
  std::string label;
  auto est = open_model(a, &label);
  if (!est.ok()) return fail(est.status());
  if (a.flags.count("label")) label = a.flags.at("label");
  auto data = open_data(a.flags.at("data"), "test", label, {.batch_size = 1000});
  if (!data.ok()) return fail(data.status());
  auto m = (*est)->evaluate(*data);
  if (!m.ok()) return fail(m.status());
  print_metrics(*m);
  return 0;
}

int predict(const Args& a) {
  if (!a.flags.count("model-dir")) return usage_error("predict needs --model-dir");
  if (!a.flags.count("data")) return usage_error("predict needs --data");
  std::string label;
  auto est = open_model(a, &label);
  if (!est.ok()) return fail(est.status());
  if (a.flags.count("label")) label = a.flags.at("label");
  const std::string spec = a.flags.at("data");
  input::DatasetOptions o{.batch_size = 1000};
  runtime::Result<input::Dataset> data = runtime::invalid_argument("no data");
  if (spec.rfind("csv:", 0) == 0) {
    // Rows to predict may come without the label column.
    data = input::csv(spec.substr(4), "", {}, o);
    if (data.ok() && data->component(label) >= 0) data = input::csv(spec.substr(4), label, {}, o);
  } else {
    data = open_data(spec, "test", label, o);
  }
  if (!data.ok()) return fail(data.status());
  FILE* out = stdout;
  if (a.flags.count("output")) {
    out = std::fopen(a.flags.at("output").c_str(), "w");
    if (!out) return fail(runtime::not_found("cannot write ", a.flags.at("output")));
  }
  bool header = false;
  int64_t rows = 0;
  runtime::Status s = (*est)->predict(*data, [&](const estimators::Prediction& p) {
    const runtime::Tensor& probs = p.at("probabilities");
    if (!header) {
      std::fprintf(out, "class");
      for (int64_t k = 0; k < probs.num_elements(); ++k)
        std::fprintf(out, ",p%lld", static_cast<long long>(k));
      std::fprintf(out, "\n");
      header = true;
    }
    std::fprintf(out, "%lld", static_cast<long long>(p.at("classes").data<int64_t>()[0]));
    for (int64_t k = 0; k < probs.num_elements(); ++k)
      std::fprintf(out, ",%.5f", probs.data<float>()[k]);
    std::fprintf(out, "\n");
    ++rows;
    return true;
  });
  if (out != stdout) std::fclose(out);
  if (!s.ok()) return fail(s);
  std::fprintf(stderr, "INFO: %lld predictions%s%s\n", static_cast<long long>(rows),
               a.flags.count("output") ? " written to " : "",
               a.flags.count("output") ? a.flags.at("output").c_str() : "");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  Args a;
  a.command = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string f = argv[i];
    if (f.rfind("--", 0) != 0) return usage_error("unexpected argument '" + f + "'");
    f = f.substr(2);
    std::string value;
    const size_t eq = f.find('=');
    if (eq != std::string::npos) {
      value = f.substr(eq + 1);
      f = f.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return usage_error("--" + f + " needs a value");
    }
    if (!kFlags.count(f)) return usage_error("unknown flag --" + f);
    a.flags[f] = value;
  }
  if (a.command == "train") return train(a);
  if (a.command == "evaluate") return evaluate(a);
  if (a.command == "predict") return predict(a);
  return usage_error("unknown command '" + a.command + "'");
}
