// troupe train, evaluate and predict: a canned model on Fashion-MNIST or CSV files, alone or as
// a task of a cluster (TF_CONFIG): the chief trains, checkpoints, evaluates and exports, workers
// train their part of the data, an evaluator evaluates each new checkpoint.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "estimators/canned/kmeans.h"
#include "estimators/experiment.h"
#include "estimators/export/predictor.h"
#include "estimators/metrics.h"
#include "runtime/log.h"
#include "runtime/record_io.h"
#include "tools/cli.h"
#include "tools/column_spec.h"
#include "tools/data_spec.h"
#include "tools/model_spec.h"

namespace troupe::cli {

using estimators::TextParams;
namespace input = troupe::estimators::input;

namespace {

const std::vector<std::string> kTrainFlags = {"model",
                                              "data",
                                              "model-dir",
                                              "epochs",
                                              "steps",
                                              "batch-size",
                                              "standardize",
                                              "columns",
                                              "weight-column",
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
                                              "eval-timeout",
                                              "replicas-to-aggregate",
                                              "sync-timeout"};

// How a trained model reads more of its data: libsvm rows as wide as in training, and their
// labels as its class names.
DataOptions data_options(const ModelSpec& spec) {
  return {.class_names = spec.task == estimators::Task::kClassifier && spec.model != "kmeans",
          .num_features = spec.libsvm_features};
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
                                                                   ModelSpec* info) {
  const std::string dir = flags.at("model-dir");
  TROUPE_ASSIGN_OR_RETURN(*info, load_model_spec(dir));
  estimators::RunConfig config;
  config.model_dir = dir;
  TROUPE_ASSIGN_OR_RETURN(estimators::ModelFn model_fn, model_fn_of(*info));
  return std::make_unique<estimators::Estimator>(model_fn, config);
}

// A worker or the evaluator of a cluster, as the training executor plays it (estimators/
// training.h): a worker trains its part of the data until the global step reaches --steps, the
// data ends, or a signal, and prints one JSON line of what it did; the evaluator evaluates each
// new checkpoint of model_dir (its events in model_dir/eval), one JSON line each, until one
// reaches --steps, none comes for --eval-timeout seconds, or a signal.
int run_task(estimators::Estimator& est, const input::Dataset& train, const input::Dataset& eval,
             int64_t steps, int64_t eval_timeout_s, GracefulStop& graceful) {
  estimators::ExperimentOptions o;
  o.train_steps = steps;
  o.evaluator_timeout_secs = static_cast<double>(eval_timeout_s);
  o.on_evaluation = [](int64_t, const estimators::Metrics& m) { print_metrics(m); };
  estimators::Experiment exp(est, train, {{"", eval}}, o);
  graceful.watch([&exp] { exp.request_stop(); });
  auto report = exp.train_and_evaluate();
  graceful.finish();
  if (!report.ok()) return fail(report.status());
  if (est.config().cluster.task_type == estimators::TaskType::kWorker) {
    std::printf("{\"global_step\": %lld, \"steps\": %lld, \"loss\": %.4f, \"restarts\": %d}\n",
                static_cast<long long>(report->global_step), static_cast<long long>(report->steps),
                report->final_metrics.at("loss"), report->restarts);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int train(const std::vector<std::string>& args) {
  std::vector<std::string> valued = kTrainFlags;
  valued.insert(valued.end(), model_param_flags().begin(), model_param_flags().end());
  auto parsed = parse_flags(args, valued, {"sync", "regression"});
  if (!parsed.ok()) return usage_error(parsed.status().message());
  const Flags& flags = *parsed;
  GracefulStop graceful;
  auto flag = [&](const std::string& k, const std::string& d) {
    auto it = flags.find(k);
    return it == flags.end() ? d : it->second;
  };
  auto given = model_spec_of(flags);
  if (!given.ok()) return usage_error(given.status().message());
  ModelSpec spec = *given;
  auto standardize = standardize_of(flags, flag("data", ""));
  if (!standardize.ok()) return usage_error(standardize.status().message());
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
  int64_t epochs = 0, steps = 0, batch = 128, eval_every = 0, rounds = 0, seed = 42;
  // A tree model's batch is the sample each layer grows from (estimators/canned/trees.h): a
  // forest's deep nodes need every row.
  const bool trees = is_tree_model(spec.model);
  const char* default_batch = !trees ? "128" : spec.model == "random_forest" ? "100000" : "10000";
  int64_t deadline_s = 60, eval_timeout_s = 600, aggregate = 0, sync_timeout_s = 30;
  if ((flags.count("epochs") && !to_int("epochs", flag("epochs", ""), 1, &epochs, &error)) ||
      (flags.count("steps") && !to_int("steps", flag("steps", ""), 1, &steps, &error)) ||
      !to_int("batch-size", flag("batch-size", default_batch), 1, &batch, &error) ||
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
  if (in_cluster && !std::getenv("TROUPE_LAUNCHED")) runtime::set_log_task(cluster->task_label());
  if (cluster->task_type == estimators::TaskType::kPs) {
    return usage_error("a ps task runs `troupe server`, not `troupe train`");
  }
  if (in_cluster && cluster->task_type != estimators::TaskType::kEvaluator &&
      cluster->num_ps_replicas == 0) {
    return usage_error("the cluster has no ps task: its variables live on ps tasks");
  }
  auto secret = secret_of(flags);
  if (!secret.ok()) return fail(secret.status());
  if (in_cluster && !*secret && cluster->task_type != estimators::TaskType::kEvaluator) {
    runtime::log_warning(
        "no job secret (--secret or TROUPE_JOB_SECRET): anyone who can reach "
        "the ps tasks can read or change the model");
  }
  const std::string label =
      flag("label", flags.count("data") && flag("data", "").rfind("csv:", 0) == 0 ? "" : "label");
  TextParams flagged = spec.params;
  // Big kernels, embeddings and linear weights spread over a cluster's ps tasks. Checkpoints
  // restore into any number of parts (runtime::fit_partitions): a cluster may resume with more
  // or fewer ps tasks, or one process.
  if (spec.model == "dnn" || spec.model == "linear" || spec.model == "svm" ||
      spec.model == "wide_deep") {
    flagged["partitions"] = std::to_string(std::max(1, cluster->num_ps_replicas));
  }
  // In a cluster every replica reads its part round and round and all stop at one global step:
  // --epochs becomes the steps one process takes for that many passes over all the data.
  // Trees stop by themselves once grown: they read the data round and round until then.
  const bool repeat =
      steps > 0 || trees || (in_cluster && cluster->task_type != estimators::TaskType::kEvaluator);
  input::DatasetOptions train_opts{.batch_size = batch,
                                   .num_epochs = repeat ? 0 : epochs,
                                   .shuffle = true,
                                   .seed = static_cast<uint64_t>(seed)};
  const bool classifier = spec.task == estimators::Task::kClassifier;
  const bool kmeans = spec.model == "kmeans";
  // A libsvm file's numeric labels name a classifier's classes, as a table's text labels do.
  auto train_data = open_data(flag("data", ""), "train", label, train_opts,
                              {.class_names = classifier && !kmeans});
  if (!train_data.ok()) return fail(train_data.status());
  spec.libsvm_features = libsvm_features(*train_data);
  if (kmeans && !classifier) return usage_error("--regression: k-means clusters");
  // A text label column: its names, sorted, are the classes (scikit-learn's LabelEncoder).
  std::vector<std::string> text_labels;
  if (classifier && !kmeans) {
    auto names = label_names(*train_data);
    if (!names.ok()) return fail(names.status());
    text_labels = std::move(*names);
  }
  int64_t n_classes = 10;
  if (!classifier || kmeans) {
    if (flags.count("n-classes")) {
      return usage_error(kmeans ? "--n-classes: k-means takes --n-clusters"
                                : "--n-classes: a regressor has no classes");
    }
  } else if (flags.count("n-classes")) {
    if (!to_int("n-classes", flag("n-classes", ""), 2, &n_classes, &error))
      return usage_error(error);
  } else if (flag("data", "") != "fashion-mnist" && !text_labels.empty()) {
    n_classes = std::max<int64_t>(2, static_cast<int64_t>(text_labels.size()));
  } else if (flag("data", "") != "fashion-mnist") {
    auto counted = count_classes(*train_data);
    if (!counted.ok()) return fail(counted.status());
    n_classes = std::max<int64_t>(2, *counted);
  }
  if (trees && (flags.count("sync") || aggregate > 0)) {
    // A step grows a layer from its own batch: there are no gradients to average.
    return usage_error("--sync: " + spec.model + " grows its trees from each batch in turn");
  }
  if (trees && flags.count("epochs")) {
    return usage_error("--epochs: " + spec.model + " trains until its trees are grown");
  }
  if (epochs == 0 && steps == 0 && !trees) {
    // As many passes as a small table needs (FitParams::epochs_for): 10 over Fashion-MNIST.
    auto rows = count_rows(*train_data);
    if (!rows.ok()) return fail(rows.status());
    epochs = estimators::FitParams{.batch_size = batch}.epochs_for(*rows);
    if (!repeat) train_data->options.num_epochs = epochs;
  }
  // Numeric columns of a table are standardized with the training data's statistics (saved
  // with the model); Fashion-MNIST's pixels already lie in [0, 1].
  // k-means clusters the columns as they are (its starting centers are rows of the data).
  if (!kmeans && *standardize) {
    auto stats = estimators::standardization(*train_data, /*with_label=*/!classifier);
    if (!stats.ok()) return fail(stats.status());
    spec.standardize = std::move(*stats);
  }
  if (kmeans && flags.count("columns")) {
    return usage_error("--columns: k-means clusters the numbers as they are");
  }
  if (!kmeans) {
    // Text features need columns: inferred from the data unless a spec file gives them.
    const bool wide_deep = spec.model == "wide_deep";
    if (flags.count("columns")) {
      auto read = read_columns_file(flag("columns", ""));
      if (!read.ok()) return usage_error(read.status().message());
      if (!wide_deep && !read->wide.empty()) {
        return usage_error("--columns: 'wide' columns are for --model wide_deep");
      }
      spec.columns = std::move(read->columns);
      spec.wide_columns = std::move(read->wide);
    } else {
      auto columns = infer_columns(*train_data, spec.standardize,
                                   spec.model != "linear" && spec.model != "svm");
      if (columns.ok() && trees) *columns = tree_columns_of(std::move(*columns));
      if (!columns.ok()) return usage_error(columns.status().message());
      const bool text = std::any_of(columns->begin(), columns->end(), [](const auto& c) {
        return c.kind != estimators::FeatureColumn::Kind::kNumeric;
      });
      // A table of numbers only: the models read every feature as they are (one weight
      // matrix, Fashion-MNIST's image too); wide & deep's linear part reads them too.
      if (text || wide_deep) spec.columns = std::move(*columns);
      if (wide_deep) {
        auto linear = infer_columns(*train_data, spec.standardize, /*dnn=*/false);
        if (!linear.ok()) return usage_error(linear.status().message());
        spec.wide_columns = text ? wide_columns_of(*linear) : *linear;
      }
    }
    for (auto* part : {&spec.columns, &spec.wide_columns}) {
      for (estimators::FeatureColumn& c : *part) {
        auto st = spec.standardize.find(c.key);
        if (c.kind == estimators::FeatureColumn::Kind::kNumeric && c.normalizer.mean.empty() &&
            st != spec.standardize.end()) {
          c.normalizer = st->second;
        }
      }
    }
  }
  if (classifier && !kmeans) flagged["n_classes"] = std::to_string(n_classes);
  if (!text_labels.empty()) {
    std::string names;
    for (const std::string& n : text_labels) {
      if (n.find(',') != std::string::npos) {
        return usage_error("label '" + n + "' holds a comma: name the classes without one");
      }
      names += (names.empty() ? "" : ",") + n;
    }
    flagged["label_vocabulary"] = names;
  }
  if (flags.count("weight-column")) {
    if (kmeans) return usage_error("--weight-column: k-means weighs every row alike");
    flagged["weight_column"] = flag("weight-column", "");
    // The weights weigh the examples; no column reads them as a feature.
    for (auto* part : {&spec.columns, &spec.wide_columns}) {
      part->erase(std::remove_if(part->begin(), part->end(),
                                 [&](const estimators::FeatureColumn& c) {
                                   return c.key == flag("weight-column", "");
                                 }),
                  part->end());
    }
  }
  spec.params = flagged;
  spec.label = label;
  auto resolved = resolved_params(spec);
  if (!resolved.ok()) return usage_error(resolved.status().message());
  spec.params = *resolved;
  if (kmeans) {
    // k-means++ over the training rows picks the starting centers.
    auto arrays = load_arrays(*train_data);
    if (!arrays.ok()) return fail(arrays.status());
    estimators::KMeansOptions o;
    if (auto s = estimators::assign_params(o, spec.task, spec.params, "--model kmeans"); !s.ok()) {
      return usage_error(s.message());
    }
    auto centers = estimators::kmeans_initial_centers(arrays->x, o, static_cast<uint64_t>(seed));
    if (!centers.ok()) return fail(centers.status());
    spec.initial_centers = std::move(*centers);
  }
  auto built = model_fn_of(spec);
  if (!built.ok()) return usage_error(built.status().message());
  estimators::ModelFn model_fn = *built;

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
  if (in_cluster && steps == 0 && cluster->task_type != estimators::TaskType::kEvaluator) {
    auto rows = count_rows(*train_data);
    if (!rows.ok()) return fail(rows.status());
    // A synchronous step takes a batch from each of the replicas it aggregates.
    const int64_t per_step = batch * std::max(1, config.replicas_to_aggregate);
    steps = (*rows * epochs + per_step - 1) / per_step;
    runtime::log_info("--epochs ", epochs, " over ", *rows, " examples, ", per_step,
                      " a step: the replicas stop at global step ", steps);
  }
  // In a cluster the replicas share one global step: --steps is where it stops (max_steps).
  if (cluster->task_type == estimators::TaskType::kWorker) {
    estimators::Estimator est(model_fn, config);
    return run_task(est, *train_data, *train_data, steps, eval_timeout_s, graceful);
  }

  input::DatasetOptions eval_opts{.batch_size = 1000};
  const std::string eval_spec = flag("eval-data", flag("data", ""));
  if (!flags.count("eval-data") && eval_spec != "fashion-mnist") {
    runtime::log_warning("evaluating on the training data; pass --eval-data for a held-out set");
  }
  auto eval_data = open_data(eval_spec, "test", label, eval_opts, data_options(spec));
  if (!eval_data.ok()) return fail(eval_data.status());
  if (cluster->task_type == estimators::TaskType::kEvaluator) {
    estimators::Estimator est(model_fn, config);
    return run_task(est, *train_data, *eval_data, steps, eval_timeout_s, graceful);
  }

  if (auto earlier = load_model_spec(config.model_dir); earlier.ok()) {
    // The variables must match what model_dir holds; the optimizer and its rate may change.
    if (earlier->model != spec.model || earlier->task != spec.task) {
      return usage_error(
          config.model_dir + " holds another kind of model (" + earlier->model +
          (earlier->task == estimators::Task::kClassifier ? " classifier" : " regressor") +
          "): pass another --model-dir");
    }
    for (const std::string& key : shape_params(spec.model, spec.task)) {
      const std::string was = earlier->params.count(key) ? earlier->params.at(key) : "";
      if (was != spec.params[key]) {
        return usage_error(config.model_dir + " holds a model with " + key + " " + was + ", not " +
                           spec.params[key] + ": pass the same or another --model-dir");
      }
    }
    // Continued training keeps the statistics its variables were trained with, and the
    // columns, whose vocabularies fix what each row of their weights means.
    spec.standardize = earlier->standardize;
    if (!earlier->columns.empty() || !earlier->wide_columns.empty()) {
      spec.columns = earlier->columns;
      spec.wide_columns = earlier->wide_columns;
      auto rebuilt = model_fn_of(spec);
      if (!rebuilt.ok()) return usage_error(rebuilt.status().message());
      model_fn = *rebuilt;
    }
  }
  std::error_code ec;
  std::filesystem::create_directories(config.model_dir, ec);
  if (ec)
    return fail(runtime::internal_error("cannot create ", config.model_dir, ": ", ec.message()));
  estimators::Estimator est(model_fn, config);
  if (auto s = save_model_spec(config.model_dir, spec); !s.ok()) return fail(s);
  estimators::ExperimentOptions xo;
  xo.eval_every_steps = eval_every;
  xo.early_stopping_rounds = static_cast<int>(rounds);
  xo.export_strategy = flag("export", "");
  xo.early_stopping_metric = classifier && !kmeans ? "accuracy" : "loss";
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
  // Now the features are known: `troupe export` builds its serving signature from them.
  spec.inputs = est.serving_inputs();
  if (auto s = save_model_spec(config.model_dir, spec); !s.ok()) {
    return fail(s);
  }
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
  ModelSpec info;
  auto est = open_model(flags, &info);
  if (!est.ok()) return fail(est.status());
  const std::string label = flags.count("label") ? flags.at("label") : info.label;
  auto data = open_data(flags.at("data"), "test", label, {.batch_size = 1000}, data_options(info));
  if (!data.ok()) return fail(data.status());
  auto m = (*est)->evaluate(*data);
  if (!m.ok()) return fail(m.status());
  print_metrics(*m);
  return 0;
}

namespace {

// A text value as a CSV field: quoted when it holds a comma, a quote or a line break.
std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\n\r") == std::string::npos) return v;
  std::string quoted = "\"";
  for (char c : v) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

// CSV of predictions: "class,p0,p1,..." for a classifier's classes and probabilities, else a
// column per output value ("name" or "name_0", "name_1", ...).
class PredictionWriter {
 public:
  explicit PredictionWriter(FILE* out) : out_(out) {}
  void write(const estimators::Prediction& p) {
    const bool classifier = p.count("classes") && p.count("probabilities");
    if (!header_) {
      std::string h;
      if (classifier) {
        h = "class";
        for (int64_t k = 0; k < p.at("probabilities").num_elements(); ++k) {
          h += ",p" + std::to_string(k);
        }
      } else {
        for (const auto& [name, t] : p) {
          for (int64_t k = 0; k < t.num_elements(); ++k) {
            h += (h.empty() ? "" : ",") + name +
                 (t.num_elements() > 1 ? "_" + std::to_string(k) : std::string());
          }
        }
      }
      std::fprintf(out_, "%s\n", h.c_str());
      header_ = true;
    }
    std::string line;
    auto add = [&](const runtime::Tensor& t, int64_t k, const char* format) {
      char buf[64];
      double v = 0;
      runtime::visit_numeric(
          t.dtype(), [&](auto zero) { v = static_cast<double>(t.data<decltype(zero)>()[k]); });
      std::snprintf(buf, sizeof buf, format, v);
      line += (line.empty() ? "" : ",") + std::string(buf);
    };
    if (classifier) {
      // A classifier of text labels names its class, as its data did.
      if (auto names = p.find("class_labels"); names != p.end()) {
        line = csv_field(names->second.data<std::string>()[0]);
      } else {
        add(p.at("classes"), 0, "%.0f");
      }
      const runtime::Tensor& probs = p.at("probabilities");
      for (int64_t k = 0; k < probs.num_elements(); ++k) add(probs, k, "%.5f");
    } else {
      for (const auto& [name, t] : p) {
        for (int64_t k = 0; k < t.num_elements(); ++k) {
          add(t, k, runtime::is_floating(t.dtype()) ? "%.6g" : "%.0f");
        }
      }
    }
    std::fprintf(out_, "%s\n", line.c_str());
    ++rows_;
  }
  int64_t rows() const { return rows_; }

 private:
  FILE* out_;
  bool header_ = false;
  int64_t rows_ = 0;
};

// Predictions of an export (serving::load) over a dataset whose components carry the names of
// the signature's inputs.
runtime::Status predict_export(const std::string& dir, const std::string& signature,
                               const input::Dataset& data, PredictionWriter& writer) {
  TROUPE_ASSIGN_OR_RETURN(auto predictor, serving::load(dir));
  const serving::Signature* sig = predictor->signature(signature);
  if (!sig) return runtime::not_found(dir, " has no signature '", signature, "'");
  std::vector<std::pair<std::string, int>> columns;
  for (const auto& [name, info] : sig->inputs) {
    const int c = data.component(name);
    if (c < 0) {
      return runtime::invalid_argument("the data has no column '", name, "', which signature ",
                                       signature, " takes");
    }
    columns.push_back({name, c});
  }
  for (int64_t u = 0; u < data.source->num_units(); ++u) {
    std::vector<actors::Chunk> chunks;
    int64_t skipped = 0;
    TROUPE_RETURN_IF_ERROR(data.source->read(u, &chunks, &skipped));
    for (const actors::Chunk& chunk : chunks) {
      const int64_t rows = chunk.last() - chunk.first();
      if (rows <= 0) continue;
      serving::NamedTensors inputs;
      for (const auto& [name, c] : columns) {
        inputs[name] = runtime::slice_rows(chunk.components[c], chunk.first(), rows);
      }
      TROUPE_ASSIGN_OR_RETURN(serving::NamedTensors out, predictor->predict(inputs, signature));
      for (int64_t r = 0; r < rows; ++r) {
        estimators::Prediction one;
        for (const auto& [name, t] : out) {
          one[name] = t.rank() > 0 && t.dim(0) == rows ? runtime::slice_rows(t, r, 1) : t;
        }
        writer.write(one);
      }
    }
  }
  return runtime::ok_status();
}

}  // namespace

int predict(const std::vector<std::string>& args) {
  auto parsed = parse_flags(args, {"model-dir", "export", "signature", "data", "label", "output"});
  if (!parsed.ok()) return usage_error(parsed.status().message());
  const Flags& flags = *parsed;
  if (flags.count("model-dir") == flags.count("export")) {
    return usage_error("predict needs --model-dir DIR or --export BASE/VERSION (one of them)");
  }
  if (!flags.count("data")) return usage_error("predict needs --data");
  ModelSpec info;
  std::unique_ptr<estimators::Estimator> est;
  if (flags.count("model-dir")) {
    auto opened = open_model(flags, &info);
    if (!opened.ok()) return fail(opened.status());
    est = std::move(*opened);
  } else {
    info.label = "label";
  }
  const std::string label = flags.count("label") ? flags.at("label") : info.label;
  const std::string spec = flags.at("data");
  input::DatasetOptions o{.batch_size = 1000};
  runtime::Result<input::Dataset> data = runtime::invalid_argument("no data");
  if (spec.rfind("csv:", 0) == 0) {
    // Rows to predict may come without the label column.
    data = input::csv(spec.substr(4), "", {}, o);
    if (data.ok() && data->component(label) >= 0) data = input::csv(spec.substr(4), label, {}, o);
  } else {
    data = open_data(spec, "test", label, o, data_options(info));
  }
  if (!data.ok()) return fail(data.status());
  FILE* out = stdout;
  if (flags.count("output")) {
    out = std::fopen(flags.at("output").c_str(), "w");
    if (!out) return fail(runtime::not_found("cannot write ", flags.at("output")));
  }
  PredictionWriter writer(out);
  runtime::Status s =
      est ? est->predict(*data,
                         [&](const estimators::Prediction& p) {
                           writer.write(p);
                           return true;
                         })
          : predict_export(flags.at("export"),
                           flags.count("signature") ? flags.at("signature")
                                                    : std::string(serving::kDefaultSignature),
                           *data, writer);
  if (out != stdout) std::fclose(out);
  if (!s.ok()) return fail(s);
  runtime::log_info(writer.rows(), " predictions", flags.count("output") ? " written to " : "",
                    flags.count("output") ? flags.at("output") : std::string());
  return 0;
}

// troupe export: the model of a model_dir at its latest or best checkpoint (or a given one), as
// a version folder under --out that serving::load and troupe serve read.
int export_model(const std::vector<std::string>& args) {
  auto parsed = parse_flags(args, {"model-dir", "out", "checkpoint", "class-labels"});
  if (!parsed.ok()) return usage_error(parsed.status().message());
  const Flags& flags = *parsed;
  if (!flags.count("model-dir")) return usage_error("export needs --model-dir");
  if (!flags.count("out")) return usage_error("export needs --out BASE (versions go beneath)");
  ModelSpec info;
  auto est = open_model(flags, &info);
  if (!est.ok()) return fail(est.status());
  if (info.inputs.empty()) {
    return fail(runtime::failed_precondition(
        flags.at("model-dir"),
        " does not record its features (trained by an older troupe, or "
        "training never ended): train it again"));
  }
  estimators::ExportOptions o;
  o.inputs = info.inputs;
  const std::string which = flags.count("checkpoint") ? flags.at("checkpoint") : "latest";
  runtime::CheckpointManager checkpoints(flags.at("model-dir"));
  if (which == "latest") {
    o.checkpoint_path = checkpoints.latest();
  } else if (which == "best") {
    const std::vector<std::string> best = checkpoints.best();
    if (best.empty()) {
      return fail(runtime::not_found(flags.at("model-dir"),
                                     " keeps no best checkpoint (train with --eval-every)"));
    }
    o.checkpoint_path = best.front();
  } else {
    o.checkpoint_path = which;
  }
  if (o.checkpoint_path.empty()) {
    return fail(runtime::not_found(flags.at("model-dir"), " has no checkpoint: train first"));
  }
  if (flags.count("class-labels")) {
    std::stringstream list(flags.at("class-labels"));
    for (std::string l; std::getline(list, l, ',');) o.class_labels.push_back(l);
  }
  auto dir = (*est)->export_saved_model(flags.at("out"), o);
  if (!dir.ok()) return fail(dir.status());
  runtime::log_info("exported ", o.checkpoint_path, " to ", *dir);
  std::printf("%s\n", dir->c_str());
  return 0;
}

}  // namespace troupe::cli
