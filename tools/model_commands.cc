// troupe train, evaluate and predict: a canned model on Fashion-MNIST or CSV files, alone or as
// a task of a cluster (TF_CONFIG): the chief trains, checkpoints, evaluates and exports, workers
// train their part of the data, an evaluator evaluates each new checkpoint.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "estimators/canned/dnn_classifier.h"
#include "estimators/experiment.h"
#include "estimators/metrics.h"
#include "runtime/log.h"
#include "runtime/record_io.h"
#include "tools/cli.h"

namespace troupe::cli {

using estimators::Params;
namespace input = troupe::estimators::input;

namespace {

const std::vector<std::string> kTrainFlags = {"model",
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
                                              "n-classes",
                                              "export",
                                              "cluster",
                                              "job",
                                              "task",
                                              "secret",
                                              "ps-strategy",
                                              "cluster-deadline",
                                              "eval-timeout"};

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

// Examples in a dataset, read through once.
runtime::Result<int64_t> count_rows(const input::Dataset& d) {
  int64_t rows = 0;
  for (int64_t u = 0; u < d.source->num_units(); ++u) {
    std::vector<actors::Chunk> chunks;
    int64_t skipped = 0;
    TROUPE_RETURN_IF_ERROR(d.source->read(u, &chunks, &skipped));
    for (const actors::Chunk& c : chunks) rows += c.last() - c.first();
  }
  return rows;
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
      add(k, v, k == "restarts");
  }
  std::printf("%s}\n", line.c_str());
  std::fflush(stdout);
}

runtime::Result<std::unique_ptr<estimators::Estimator>> open_model(const Flags& flags,
                                                                   std::string* label) {
  const std::string dir = flags.at("model-dir");
  TROUPE_ASSIGN_OR_RETURN(auto info, load_model_info(dir));
  *label = info.second;
  estimators::RunConfig config;
  config.model_dir = dir;
  return std::make_unique<estimators::Estimator>(estimators::dnn_classifier_model_fn, config,
                                                 info.first);
}

// A worker of a cluster: trains its part of the data against the ps tasks until the data ends,
// the global step reaches --steps, or a signal; one JSON line of what it did.
int run_worker(const estimators::RunConfig& config, const Params& p, const input::Dataset& data,
               int64_t max_steps, GracefulStop& graceful) {
  estimators::Estimator est(estimators::dnn_classifier_model_fn, config, p);
  graceful.watch([&est] { est.request_stop(); });
  estimators::TrainOptions o;
  o.max_steps = max_steps;
  auto done = est.train(data, o);
  graceful.finish();
  if (!done.ok()) return fail(done.status());
  std::printf("{\"global_step\": %lld, \"steps\": %lld, \"loss\": %.4f, \"restarts\": %d}\n",
              static_cast<long long>(done->global_step), static_cast<long long>(done->steps),
              done->loss, done->restarts);
  std::fflush(stdout);
  return 0;
}

// The evaluator of a cluster: evaluates each new checkpoint of model_dir (its own events in
// model_dir/eval), one JSON line each, until one reaches --steps, no new one comes for
// --eval-timeout seconds, or a signal.
int run_evaluator(estimators::RunConfig config, const Params& p, const input::Dataset& data,
                  int64_t last_step, int64_t timeout_s, GracefulStop& graceful) {
  config.cluster = {};  // it reads checkpoints; it joins no training
  config.job_secret = nullptr;
  estimators::Estimator est(estimators::dnn_classifier_model_fn, config, p);
  std::mutex mu;
  std::condition_variable wake;
  bool stop = false;
  graceful.watch([&] {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
    wake.notify_all();
  });
  std::string last;
  auto idle_since = std::chrono::steady_clock::now();
  runtime::log_info("evaluating each new checkpoint of ", config.model_dir);
  for (;;) {
    const std::string latest = est.latest_checkpoint();
    if (!latest.empty() && latest != last) {
      last = latest;
      idle_since = std::chrono::steady_clock::now();
      estimators::EvalOptions o;
      o.checkpoint_path = latest;
      auto m = est.evaluate(data, o);
      if (!m.ok()) {
        // keep_checkpoint_max may remove a checkpoint while it is read: take the next.
        if (m.status().code() != runtime::Code::kNotFound) return fail(m.status());
        runtime::log_warning(m.status().to_string());
        continue;
      }
      print_metrics(*m);
      if (last_step > 0 && m->at("global_step") >= static_cast<double>(last_step)) break;
      continue;
    }
    std::unique_lock<std::mutex> lock(mu);
    if (stop) break;
    if (std::chrono::steady_clock::now() - idle_since > std::chrono::seconds(timeout_s)) {
      runtime::log_info("no new checkpoint for ", timeout_s, " s: done");
      break;
    }
    wake.wait_for(lock, std::chrono::seconds(1));
    if (stop) break;
  }
  graceful.finish();
  return 0;
}

}  // namespace

int train(const std::vector<std::string>& args) {
  auto parsed = parse_flags(args, kTrainFlags, {"sync"});
  if (!parsed.ok()) return usage_error(parsed.status().message());
  const Flags& flags = *parsed;
  GracefulStop graceful;
  auto flag = [&](const std::string& k, const std::string& d) {
    auto it = flags.find(k);
    return it == flags.end() ? d : it->second;
  };
  if (flag("model", "dnn") != "dnn") return usage_error("--model: only 'dnn' is available");
  const std::string exported = flag("export", "");
  if (!exported.empty() && exported != "latest" && exported != "best") {
    return usage_error("--export: '" + exported + "' is not latest or best");
  }
  if (!flags.count("data")) return usage_error("train needs --data");
  if (!flags.count("model-dir")) return usage_error("train needs --model-dir");
  if (flags.count("epochs") && flags.count("steps")) {
    return usage_error("--epochs and --steps exclude each other");
  }
  std::string error;
  int64_t epochs = 10, steps = 0, batch = 128, eval_every = 0, rounds = 0, seed = 42;
  int64_t deadline_s = 60, eval_timeout_s = 600, aggregate = 0, sync_timeout_s = 30;
  if ((flags.count("epochs") && !to_int("epochs", flag("epochs", ""), 1, &epochs, &error)) ||
      (flags.count("steps") && !to_int("steps", flag("steps", ""), 1, &steps, &error)) ||
      !to_int("batch-size", flag("batch-size", "128"), 1, &batch, &error) ||
      !to_int("eval-every", flag("eval-every", "0"), 0, &eval_every, &error) ||
      !to_int("early-stopping-rounds", flag("early-stopping-rounds", "0"), 0, &rounds, &error) ||
      !to_int("seed", flag("seed", "42"), 0, &seed, &error) ||
      !to_int("cluster-deadline", flag("cluster-deadline", "60"), 1, &deadline_s, &error) ||
      !to_int("eval-timeout", flag("eval-timeout", "600"), 1, &eval_timeout_s, &error) ||
      !to_int("replicas-to-aggregate", flag("replicas-to-aggregate", "0"), 0, &aggregate, &error) ||
      !to_int("sync-timeout", flag("sync-timeout", "30"), 1, &sync_timeout_s, &error)) {
    return usage_error(error);
  }
  auto strategy = runtime::parse_ps_strategy(flag("ps-strategy", "round_robin"));
  if (!strategy.ok()) return usage_error("--ps-strategy: " + strategy.status().message());
  auto cluster = cluster_of(flags);
  if (!cluster.ok()) return usage_error(cluster.status().message());
  const bool in_cluster = !cluster->cluster.empty();
  if (in_cluster && !std::getenv("TROUPE_LAUNCHED")) runtime::set_log_task(task_name(*cluster));
  if (cluster->task_type == "ps") {
    return usage_error("a ps task runs `troupe server`, not `troupe train`");
  }
  if (in_cluster && cluster->task_type != "evaluator" && cluster->num_ps_replicas == 0) {
    return usage_error("the cluster has no ps task: its variables live on ps tasks");
  }
  auto secret = secret_of(flags);
  if (!secret.ok()) return fail(secret.status());
  if (in_cluster && !*secret && cluster->task_type != "evaluator") {
    runtime::log_warning(
        "no job secret (--secret or TROUPE_JOB_SECRET): anyone who can reach "
        "the ps tasks can read or change the model");
  }
  const std::string label =
      flag("label", flags.count("data") && flag("data", "").rfind("csv:", 0) == 0 ? "" : "label");
  Params p = estimators::to_params({});
  p["hidden_units"] = flag("hidden", "256,128");
  p["optimizer"] = flag("optimizer", "adam");
  p["learning_rate"] = flag("learning-rate", "0.001");
  p["dropout"] = flag("dropout", "0");
  p["activation"] = flag("activation", "relu");
  // Big kernels spread over a cluster's ps tasks; evaluate and predict read the same parts.
  p["partitions"] = std::to_string(std::max(1, cluster->num_ps_replicas));
  // In a cluster every replica reads its part round and round and all stop at one global step:
  // --epochs becomes the steps one process takes for that many passes over all the data.
  const bool repeat = steps > 0 || (in_cluster && cluster->task_type != "evaluator");
  input::DatasetOptions train_opts{.batch_size = batch,
                                   .num_epochs = repeat ? 0 : epochs,
                                   .shuffle = true,
                                   .seed = static_cast<uint64_t>(seed)};
  auto train_data = open_data(flag("data", ""), "train", label, train_opts);
  if (!train_data.ok()) return fail(train_data.status());
  int64_t n_classes = 10;
  if (flags.count("n-classes")) {
    if (!to_int("n-classes", flag("n-classes", ""), 2, &n_classes, &error))
      return usage_error(error);
  } else if (flag("data", "") != "fashion-mnist") {
    auto counted = count_classes(*train_data);
    if (!counted.ok()) return fail(counted.status());
    n_classes = std::max<int64_t>(2, *counted);
  }
  p["n_classes"] = std::to_string(n_classes);
  if (auto checked = estimators::dnn_options(p); !checked.ok()) return fail(checked.status());

  estimators::RunConfig config;
  config.model_dir = flag("model-dir", "");
  config.tf_random_seed = seed;
  config.save_checkpoints_steps = eval_every > 0 ? eval_every : 1000;
  config.log_step_count_steps = 100;
  config.cluster = *cluster;
  config.job_secret = *secret;
  config.ps_strategy = *strategy;
  config.cluster_deadline_ms = deadline_s * 1000;
  // --sync: every replica's gradients make one update; --replicas-to-aggregate R: the first R
  // (the rest are backups, their late gradients dropped).
  config.replicas_to_aggregate =
      static_cast<int>(aggregate > 0         ? aggregate
                       : flags.count("sync") ? cluster->num_worker_replicas
                                             : 0);
  config.sync_timeout_ms = sync_timeout_s * 1000;
  if (auto valid = config.validate(); !valid.ok()) return usage_error(valid.message());
  if (in_cluster && steps == 0 && cluster->task_type != "evaluator") {
    auto rows = count_rows(*train_data);
    if (!rows.ok()) return fail(rows.status());
    // A synchronous step takes a batch from each of the replicas it aggregates.
    const int64_t per_step = batch * std::max(1, config.replicas_to_aggregate);
    steps = (*rows * epochs + per_step - 1) / per_step;
    runtime::log_info("--epochs ", epochs, " over ", *rows, " examples, ", per_step,
                      " a step: the replicas stop at global step ", steps);
  }
  // In a cluster the replicas share one global step: --steps is where it stops (max_steps).
  if (in_cluster && !cluster->is_chief && cluster->task_type != "evaluator") {
    return run_worker(config, p, *train_data, steps, graceful);
  }

  input::DatasetOptions eval_opts{.batch_size = 1000};
  const std::string eval_spec = flag("eval-data", flag("data", ""));
  if (!flags.count("eval-data") && eval_spec.rfind("csv:", 0) == 0) {
    runtime::log_warning("evaluating on the training data; pass --eval-data for a held-out set");
  }
  auto eval_data = open_data(eval_spec, "test", label, eval_opts);
  if (!eval_data.ok()) return fail(eval_data.status());
  if (cluster->task_type == "evaluator") {
    return run_evaluator(config, p, *eval_data, steps, eval_timeout_s, graceful);
  }

  if (auto earlier = load_model_info(config.model_dir); earlier.ok()) {
    // The layers must match what model_dir holds; the optimizer and its rate may change.
    for (const char* key : {"hidden_units", "n_classes", "activation", "partitions"}) {
      // A model saved before partitions were recorded has one.
      const std::string missing = std::string(key) == "partitions" ? "1" : "";
      const std::string was = earlier->first.count(key) ? earlier->first.at(key) : missing;
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
  if (steps > 0 && in_cluster) {
    xo.train_steps = steps;
  } else if (steps > 0) {
    // --steps counts from where an earlier run in this model_dir stopped.
    auto latest = runtime::read_checkpoint(est.latest_checkpoint());
    xo.train_steps = (latest.ok() ? latest->global_step : 0) + steps;
  }
  estimators::Experiment exp(est, *train_data, {{"", *eval_data}}, xo);
  graceful.watch([&exp] { exp.request_stop(); });
  auto report = exp.train_and_evaluate();
  graceful.finish();
  if (!report.ok()) return fail(report.status());
  runtime::log_info("trained to step ", report->global_step, " in ", report->seconds,
                    " s; model in ", config.model_dir);
  for (const std::string& dir : report->exports) {
    runtime::log_info("exported the model to ", dir);
  }
  estimators::Metrics final_line = report->final_metrics;
  if (in_cluster) final_line["restarts"] = report->restarts;
  print_metrics(final_line);
  return 0;
}

int evaluate(const std::vector<std::string>& args) {
  auto parsed = parse_flags(args, {"model-dir", "data", "label"});
  if (!parsed.ok()) return usage_error(parsed.status().message());
  const Flags& flags = *parsed;
  if (!flags.count("model-dir")) return usage_error("evaluate needs --model-dir");
  if (!flags.count("data")) return usage_error("evaluate needs --data");
  std::string label;
  auto est = open_model(flags, &label);
  if (!est.ok()) return fail(est.status());
  if (flags.count("label")) label = flags.at("label");
  auto data = open_data(flags.at("data"), "test", label, {.batch_size = 1000});
  if (!data.ok()) return fail(data.status());
  auto m = (*est)->evaluate(*data);
  if (!m.ok()) return fail(m.status());
  print_metrics(*m);
  return 0;
}

int predict(const std::vector<std::string>& args) {
  auto parsed = parse_flags(args, {"model-dir", "data", "label", "output"});
  if (!parsed.ok()) return usage_error(parsed.status().message());
  const Flags& flags = *parsed;
  if (!flags.count("model-dir")) return usage_error("predict needs --model-dir");
  if (!flags.count("data")) return usage_error("predict needs --data");
  std::string label;
  auto est = open_model(flags, &label);
  if (!est.ok()) return fail(est.status());
  if (flags.count("label")) label = flags.at("label");
  const std::string spec = flags.at("data");
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
  if (flags.count("output")) {
    out = std::fopen(flags.at("output").c_str(), "w");
    if (!out) return fail(runtime::not_found("cannot write ", flags.at("output")));
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
  runtime::log_info(rows, " predictions", flags.count("output") ? " written to " : "",
                    flags.count("output") ? flags.at("output") : std::string());
  return 0;
}

}  // namespace troupe::cli
