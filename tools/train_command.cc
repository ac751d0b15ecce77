// troupe train: a canned model on Fashion-MNIST, CSV or libsvm files, alone or as a task of a
// cluster (TF_CONFIG). Flags become a typed request once (read_train_request); the data then
// describes the rest of the model (its classes, columns and statistics: describe_model); the
// training executor plays the task (estimators/training.h): the chief trains, checkpoints,
// evaluates and exports, workers train their part of the data, an evaluator evaluates each new
// checkpoint.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "estimators/canned/head.h"
#include "estimators/canned/kmeans.h"
#include "estimators/experiment.h"
#include "estimators/metrics.h"
#include "runtime/log.h"
#include "runtime/record_io.h"
#include "tools/cli.h"
#include "tools/column_spec.h"
#include "tools/data_spec.h"
#include "tools/model_spec.h"

namespace troupe::cli {

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
                                              "reduce-lr-on-plateau",
                                              "seed",
                                              "eval-data",
                                              "label",
                                              "n-classes",
                                              "export",
                                              "ps-strategy",
                                              "cluster-deadline",
                                              "eval-timeout",
                                              "replicas-to-aggregate",
                                              "min-replicas",
                                              "max-replicas",
                                              "sync-timeout",
                                              "sequence-length"};

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
  if (est.config().cluster.task_type == estimators::TaskType::kWorker &&
      !est.config().cluster.is_chief) {
    std::printf("{\"global_step\": %lld, \"steps\": %lld, \"loss\": %.4f, \"restarts\": %d}\n",
                static_cast<long long>(report->global_step), static_cast<long long>(report->steps),
                report->final_metrics.at("loss"), report->restarts);
    std::fflush(stdout);
  }
  return 0;
}

// What `troupe train` was asked for, typed once from its flags.
struct TrainRequest {
  ModelSpec spec;  // --model, --regression and the model's flags; the data adds the rest
  std::string data, eval_data, model_dir, label, export_strategy;
  bool standardize = false;
  int64_t epochs = 0, steps = 0, batch = 128, eval_every = 0, rounds = 0, seed = 42;
  int64_t plateau = 0;  // --reduce-lr-on-plateau: evaluations without improvement, 0: off
  // --sequence-length: the steps SequenceExample data is cut or padded to; 0: the longest of
  // its first records.
  int64_t sequence_length = 0;
  int64_t eval_timeout_s = 600;
  // In a cluster every replica reads its part round and round and all stop at one global step
  // (--epochs becomes the steps one process takes for that many passes over all the data);
  // trees stop by themselves once grown, reading the data round and round until then.
  bool repeat = false;
  estimators::RunConfig config;  // the cluster, its secret, placement and synchronous rounds
  bool in_cluster() const { return !config.cluster.cluster.empty(); }
  estimators::TaskType task() const { return config.cluster.task_type; }
};

// Flags, and the cluster they place this process in, -> request: 0, or the exit status after
// the error's line.
int read_train_request(const Flags& flags, const estimators::ClusterConfig& cluster,
                       TrainRequest* r) {
  auto flag = [&](const std::string& k, const std::string& d) {
    auto it = flags.find(k);
    return it == flags.end() ? d : it->second;
  };
  auto given = model_spec_of(flags);
  if (!given.ok()) return usage_error(given.status().message());
  r->spec = *given;
  auto standardize = standardize_of(flags, flag("data", ""));
  if (!standardize.ok()) return usage_error(standardize.status().message());
  r->standardize = *standardize;
  r->export_strategy = flag("export", "");
  if (!r->export_strategy.empty() && r->export_strategy != "latest" &&
      r->export_strategy != "best") {
    return usage_error("--export: '" + r->export_strategy + "' is not latest or best");
  }
  if (!flags.count("data")) return usage_error("train needs --data");
  if (!flags.count("model-dir")) return usage_error("train needs --model-dir");
  if (flags.count("epochs") && flags.count("steps")) {
    return usage_error("--epochs and --steps exclude each other");
  }
  r->data = flag("data", "");
  r->eval_data = flag("eval-data", r->data);
  r->model_dir = flag("model-dir", "");
  r->label = flag("label", r->data.rfind("csv:", 0) == 0 ? "" : "label");
  std::string error;
  int64_t deadline_s = 60, aggregate = 0, sync_timeout_s = 30, min_replicas = 1,
          max_replicas = cluster.num_worker_replicas;
  // A tree model's batch is the sample each layer grows from (estimators/canned/trees.h).
  const char* default_batch = model_info(r->spec.model).default_batch;
  if ((flags.count("epochs") && !to_int("epochs", flag("epochs", ""), 1, &r->epochs, &error)) ||
      (flags.count("steps") && !to_int("steps", flag("steps", ""), 1, &r->steps, &error)) ||
      !to_int("batch-size", flag("batch-size", default_batch), 1, &r->batch, &error) ||
      !to_int("eval-every", flag("eval-every", "0"), 0, &r->eval_every, &error) ||
      !to_int("early-stopping-rounds", flag("early-stopping-rounds", "0"), 0, &r->rounds, &error) ||
      !to_int("reduce-lr-on-plateau", flag("reduce-lr-on-plateau", "0"), 0, &r->plateau, &error) ||
      !to_int("seed", flag("seed", "42"), 0, &r->seed, &error) ||
      !to_int("cluster-deadline", flag("cluster-deadline", "60"), 1, &deadline_s, &error) ||
      !to_int("eval-timeout", flag("eval-timeout", "600"), 1, &r->eval_timeout_s, &error) ||
      !to_int("replicas-to-aggregate", flag("replicas-to-aggregate", "0"), 0, &aggregate, &error) ||
      !to_int("sync-timeout", flag("sync-timeout", "30"), 1, &sync_timeout_s, &error) ||
      (flags.count("min-replicas") &&
       !to_int("min-replicas", flag("min-replicas", ""), 1, &min_replicas, &error)) ||
      (flags.count("max-replicas") &&
       !to_int("max-replicas", flag("max-replicas", ""), 1, &max_replicas, &error)) ||
      !to_int("sequence-length", flag("sequence-length", "0"), 0, &r->sequence_length, &error)) {
    return usage_error(error);
  }
  auto strategy = runtime::parse_ps_strategy(flag("ps-strategy", "round_robin"));
  if (!strategy.ok()) return usage_error("--ps-strategy: " + strategy.status().message());
  const bool elastic = flags.count("min-replicas") || flags.count("max-replicas");
  if (elastic && flags.count("replicas-to-aggregate")) {
    return usage_error(
        "--replicas-to-aggregate is a fixed round; --min-replicas and --max-replicas follow the "
        "live workers: give one or the other");
  }
  if (elastic && flags.count("max-replicas") && max_replicas < min_replicas) {
    return usage_error("--max-replicas " + std::to_string(max_replicas) +
                       " is fewer than --min-replicas " + std::to_string(min_replicas));
  }
  if (elastic && std::max(min_replicas, max_replicas) > int64_t{cluster.num_worker_replicas}) {
    return usage_error(
        "--min-replicas/--max-replicas: more than the cluster's training replicas (" +
        std::to_string(cluster.num_worker_replicas) + ")");
  }
  const bool in_cluster = !cluster.cluster.empty();
  if (in_cluster && !std::getenv("TROUPE_LAUNCHED")) runtime::set_log_task(cluster.task_label());
  const bool trains = in_cluster && cluster.task_type != estimators::TaskType::kEvaluator;
  if (trains && cluster.num_ps_replicas == 0) {
    return usage_error("the cluster has no ps task: its variables live on ps tasks");
  }
  auto secret = secret_of(flags);
  if (!secret.ok()) return fail(secret.status());
  if (trains && !*secret) {
    runtime::log_warning(
        "no job secret (--secret or TROUPE_JOB_SECRET): anyone who can reach "
        "the ps tasks can read or change the model");
  }
  const CannedModelInfo& model = model_info(r->spec.model);
  if (model.trees && (flags.count("sync") || aggregate > 0 || elastic)) {
    // A step grows a layer from its own batch: there are no gradients to average.
    return usage_error(std::string("--sync: ") + model.name +
                       " grows its trees from each batch in turn");
  }
  if (model.trees && flags.count("epochs")) {
    return usage_error(std::string("--epochs: ") + model.name +
                       " trains until its trees are grown");
  }
  if (r->plateau > 0 && (model.trees || r->spec.model == ModelKind::kKMeans)) {
    return usage_error(std::string("--reduce-lr-on-plateau: ") + model.name +
                       " has no learning rate to lower");
  }
  if (r->plateau > 0 && r->eval_every == 0) {
    return usage_error("--reduce-lr-on-plateau counts evaluations: give --eval-every N");
  }
  // Big kernels, embeddings and linear weights spread over a cluster's ps tasks. Checkpoints
  // restore into any number of parts (runtime::fit_partitions): a cluster may resume with more
  // or fewer ps tasks, or one process.
  if (model.partitioned) {
    const int64_t parts = std::max(1, cluster.num_ps_replicas);
    if (auto s = set_params(&r->spec, {{"partitions", parts}}); !s.ok()) return fail(s);
  }
  estimators::RunConfig& config = r->config;
  config.model_dir = r->model_dir;
  config.tf_random_seed = r->seed;
  config.save_checkpoints_steps = r->eval_every > 0 ? r->eval_every : 1000;
  config.log_step_count_steps = 100;
  config.cluster = cluster;
  config.job_secret = *secret;
  config.ps_strategy = *strategy;
  config.cluster_deadline_ms = deadline_s * 1000;
  // --sync: every replica's gradients make one update; --replicas-to-aggregate R: the first R
  // (the rest are backups, their late gradients dropped).
  config.replicas_to_aggregate =
      static_cast<int>(aggregate > 0         ? aggregate
                       : flags.count("sync") ? cluster.num_worker_replicas
                                             : 0);
  // --min-replicas M / --max-replicas X (either alone: 1 / the cluster's replicas): synchronous
  // rounds of the live replicas, at least M and at most X, as Horovod Elastic's min-np / max-np.
  if (elastic) {
    config.min_replicas = static_cast<int>(min_replicas);
    config.replicas_to_aggregate = static_cast<int>(max_replicas);
  }
  config.sync_timeout_ms = sync_timeout_s * 1000;
  if (auto valid = config.validate(); !valid.ok()) return usage_error(valid.message());
  r->repeat = r->steps > 0 || model.trees ||
              (in_cluster && cluster.task_type != estimators::TaskType::kEvaluator);
  return 0;
}

// A classifier's classes, from the data: its text labels' names and how many there are.
int read_classes(const Flags& flags, const TrainRequest& r, const input::Dataset& data,
                 ModelSpec* spec, std::vector<std::string>* text_labels) {
  const bool kmeans = spec->model == ModelKind::kKMeans;
  const bool classifier = spec->task == estimators::Task::kClassifier;
  if (!classifier || kmeans) {
    if (flags.count("n-classes")) {
      return usage_error(kmeans ? "--n-classes: k-means takes --n-clusters"
                                : "--n-classes: a regressor has no classes");
    }
    return 0;
  }
  int64_t given = 0;
  std::string error;
  if (flags.count("n-classes") && !to_int("n-classes", flags.at("n-classes"), 2, &given, &error)) {
    return usage_error(error);
  }
  auto classes = classes_of(data, r.data, given);
  if (!classes.ok()) return fail(classes.status());
  *text_labels = std::move(classes->names);
  if (auto s = set_params(spec, {{"n_classes", static_cast<int64_t>(classes->count)}}); !s.ok()) {
    return usage_error(s.message());
  }
  return 0;
}

// A head per label column (--label a,b): a classifier where the column holds text or whole
// numbers (its classes from the data, as a single head's), a regressor where it holds other
// numbers, or with --regression. `regressors` gets the regressors' columns, whose targets are
// standardized as a single regressor's is.
int read_heads(const Flags& flags, const input::Dataset& data, ModelSpec* spec,
               std::vector<std::string>* regressors) {
  if (spec->model != ModelKind::kDnn && spec->model != ModelKind::kLinear &&
      spec->model != ModelKind::kWideDeep) {
    return usage_error("--label " + data.label + "," + data.more_labels[0] +
                       ": a head per label trains with --model dnn, linear or wide_deep");
  }
  if (flags.count("n-classes")) {
    return usage_error("--n-classes: each head's classes come from its label column");
  }
  std::vector<estimators::HeadPart> heads;
  for (const std::string& label : data.labels()) {
    input::Dataset one = data;
    one.label = label;
    estimators::HeadPart h{.name = label};
    auto classes = spec->task == estimators::Task::kRegressor
                       ? runtime::Result<Classes>(runtime::invalid_argument("regression"))
                       : classes_of(one, "csv", 0);
    if (classes.ok()) {
      h.n_classes = classes->count;
      h.label_vocabulary = std::move(classes->names);
    } else {
      h.task = estimators::Task::kRegressor;
      regressors->push_back(label);
    }
    runtime::log_info("head '", label, "': ",
                      h.task == estimators::Task::kClassifier
                          ? "a classifier of " + std::to_string(h.n_classes) + " classes"
                          : std::string("a regressor"));
    heads.push_back(std::move(h));
  }
  if (auto s = set_params(spec, {{"heads", estimators::heads_text(heads)}}); !s.ok()) {
    return usage_error(s.message());
  }
  return 0;
}

// How the model reads its features: columns from --columns, or inferred from the data, with
// the training data's statistics for the numbers.
int read_columns(const Flags& flags, const input::Dataset& data, ModelSpec* spec) {
  const CannedModelInfo& model = model_info(spec->model);
  if (spec->model == ModelKind::kKMeans) {
    if (flags.count("columns")) {
      return usage_error("--columns: k-means clusters the numbers as they are");
    }
    return 0;
  }
  // Text features need columns: inferred from the data unless a spec file gives them.
  const bool wide_deep = spec->model == ModelKind::kWideDeep;
  if (flags.count("columns")) {
    auto read = read_columns_file(flags.at("columns"));
    if (!read.ok()) return usage_error(read.status().message());
    if (!wide_deep && !read->wide.empty()) {
      return usage_error("--columns: 'wide' columns are for --model wide_deep");
    }
    spec->columns = std::move(read->columns);
    spec->wide_columns = std::move(read->wide);
  } else {
    auto columns = infer_columns(data, spec->standardize, model.dense_columns);
    if (columns.ok() && model.trees) *columns = tree_columns_of(std::move(*columns));
    if (!columns.ok()) return usage_error(columns.status().message());
    const bool text = std::any_of(columns->begin(), columns->end(), [](const auto& c) {
      return c.kind != estimators::FeatureColumn::Kind::kNumeric;
    });
    // A table of numbers only: the models read every feature as they are (one weight
    // matrix, Fashion-MNIST's image too); wide & deep's linear part reads them too.
    if (text || wide_deep) spec->columns = std::move(*columns);
    if (wide_deep) {
      auto linear = infer_columns(data, spec->standardize, /*dnn=*/false);
      if (!linear.ok()) return usage_error(linear.status().message());
      spec->wide_columns = text ? wide_columns_of(*linear) : *linear;
    }
  }
  for (auto* part : {&spec->columns, &spec->wide_columns}) {
    for (estimators::FeatureColumn& c : *part) {
      auto st = spec->standardize.find(c.key);
      if (c.kind == estimators::FeatureColumn::Kind::kNumeric && c.normalizer.mean.empty() &&
          st != spec->standardize.end()) {
        c.normalizer = st->second;
      }
    }
  }
  return 0;
}

// The data says the rest of the model: its classes, the statistics its numbers are
// standardized with, its columns, its label's vocabulary and weights, k-means's starting
// centers; then every param is resolved. 0, or the exit status after the error's line.
int describe_model(const Flags& flags, TrainRequest* r, input::Dataset* train_data) {
  ModelSpec& spec = r->spec;
  const bool kmeans = spec.model == ModelKind::kKMeans;
  const bool classifier = spec.task == estimators::Task::kClassifier;
  spec.libsvm_features = libsvm_features(*train_data);
  spec.sequence_length = sequence_length_of(*train_data);
  if (kmeans && !classifier) return usage_error("--regression: k-means clusters");
  std::vector<std::string> text_labels;
  const bool heads = !train_data->more_labels.empty();
  std::vector<std::string> regressors;  // the label columns whose targets are standardized
  if (int e = heads ? read_heads(flags, *train_data, &spec, &regressors)
                    : read_classes(flags, *r, *train_data, &spec, &text_labels)) {
    return e;
  }
  if (r->epochs == 0 && r->steps == 0 && !model_info(spec.model).trees) {
    // As many passes as a small table needs (FitParams::epochs_for): 10 over Fashion-MNIST.
    auto rows = count_rows(*train_data);
    if (!rows.ok()) return fail(rows.status());
    r->epochs = estimators::FitParams{.batch_size = r->batch}.epochs_for(*rows);
    if (!r->repeat) train_data->options.num_epochs = r->epochs;
  }
  // Numeric columns of a table are standardized with the training data's statistics (saved
  // with the model); Fashion-MNIST's pixels already lie in [0, 1].
  // k-means clusters the columns as they are (its starting centers are rows of the data).
  if (!kmeans && r->standardize) {
    if (!classifier && !heads) regressors = {train_data->label};
    auto stats = estimators::standardization(*train_data, regressors);
    if (!stats.ok()) return fail(stats.status());
    spec.standardize = std::move(*stats);
  }
  if (int e = read_columns(flags, *train_data, &spec)) return e;
  if (!text_labels.empty()) {
    if (auto s = set_params(&spec, {{"label_vocabulary", text_labels}}); !s.ok()) {
      return usage_error(s.message());
    }
  }
  if (flags.count("weight-column")) {
    if (kmeans) return usage_error("--weight-column: k-means weighs every row alike");
    const std::string weights = flags.at("weight-column");
    if (auto s = set_params(&spec, {{"weight_column", weights}}); !s.ok()) {
      return usage_error(s.message());
    }
    // The weights weigh the examples; no column reads them as a feature.
    for (auto* part : {&spec.columns, &spec.wide_columns}) {
      part->erase(
          std::remove_if(part->begin(), part->end(),
                         [&](const estimators::FeatureColumn& c) { return c.key == weights; }),
          part->end());
    }
  }
  spec.label = r->label;
  if (auto s = check_model(spec); !s.ok()) return usage_error(s.message());
  if (kmeans) {
    // k-means++ over the training rows picks the starting centers.
    auto arrays = load_arrays(*train_data);
    if (!arrays.ok()) return fail(arrays.status());
    const auto& o = std::get<estimators::KMeansOptions>(spec.options);
    auto centers = estimators::kmeans_initial_centers(arrays->x, o, static_cast<uint64_t>(r->seed));
    if (!centers.ok()) return fail(centers.status());
    spec.initial_centers = std::move(*centers);
  }
  return 0;
}

// A model_dir that holds a model already: the variables must match (the optimizer and its rate
// may change), and continued training keeps the statistics its variables were trained with
// and the columns, whose vocabularies fix what each row of their weights means.
int continue_in(const TrainRequest& r, ModelSpec* spec) {
  auto earlier = load_model_spec(r.model_dir);
  if (!earlier.ok()) return 0;
  if (earlier->model != spec->model || earlier->task != spec->task) {
    return usage_error(
        r.model_dir + " holds another kind of model (" + model_info(earlier->model).name +
        (earlier->task == estimators::Task::kClassifier ? " classifier" : " regressor") +
        "): pass another --model-dir");
  }
  const estimators::ParamMap was = params_of(*earlier), now = params_of(*spec);
  for (const std::string& key : shape_params(spec->model, spec->task)) {
    const std::string a = estimators::to_text(was.at(key)), b = estimators::to_text(now.at(key));
    if (a != b) {
      return usage_error(r.model_dir + " holds a model with " + key + " " + a + ", not " + b +
                         ": pass the same or another --model-dir");
    }
  }
  spec->standardize = earlier->standardize;
  if (!earlier->columns.empty() || !earlier->wide_columns.empty()) {
    spec->columns = earlier->columns;
    spec->wide_columns = earlier->wide_columns;
  }
  return 0;
}

// The chief (or a process alone): the Experiment's schedule, the model described in model_dir,
// and the JSON line of the final metrics.
int run_chief(TrainRequest& r, const input::Dataset& train_data, const input::Dataset& eval_data,
              GracefulStop& graceful) {
  ModelSpec& spec = r.spec;
  if (int e = continue_in(r, &spec)) return e;
  auto model_fn = model_fn_of(spec);
  if (!model_fn.ok()) return usage_error(model_fn.status().message());
  std::error_code ec;
  std::filesystem::create_directories(r.model_dir, ec);
  if (ec) return fail(runtime::internal_error("cannot create ", r.model_dir, ": ", ec.message()));
  estimators::Estimator est(*model_fn, r.config);
  if (auto s = save_model_spec(r.model_dir, spec); !s.ok()) return fail(s);
  const bool classifier =
      spec.task == estimators::Task::kClassifier && spec.model != ModelKind::kKMeans;
  estimators::ExperimentOptions xo;
  xo.eval_every_steps = r.eval_every;
  xo.early_stopping_rounds = static_cast<int>(r.rounds);
  xo.reduce_lr_patience = static_cast<int>(r.plateau);
  xo.export_strategy = r.export_strategy;
  // A multi-head model has an accuracy per classifier head: the loss weighs them all.
  const estimators::ParamMap params = params_of(spec);
  auto named = params.find("heads");
  const bool heads = named != params.end() && !std::get<std::string>(named->second).empty();
  xo.early_stopping_metric = classifier && !heads ? "accuracy" : "loss";
  if (r.steps > 0 && r.in_cluster()) {
    xo.train_steps = r.steps;
  } else if (r.steps > 0) {
    // --steps counts from where an earlier run in this model_dir stopped.
    auto latest = runtime::read_checkpoint(est.latest_checkpoint());
    xo.train_steps = (latest.ok() ? latest->global_step : 0) + r.steps;
  }
  estimators::Experiment exp(est, train_data, {{"", eval_data}}, xo);
  graceful.watch([&exp] { exp.request_stop(); });
  auto report = exp.train_and_evaluate();
  graceful.finish();
  if (!report.ok()) return fail(report.status());
  // Now the features are known: `troupe export` builds its serving signature from them.
  spec.inputs = est.serving_inputs();
  if (auto s = save_model_spec(r.model_dir, spec); !s.ok()) return fail(s);
  runtime::log_info("trained to step ", report->global_step, " in ", report->seconds,
                    " s; model in ", r.model_dir);
  for (const std::string& dir : report->exports) {
    runtime::log_info("exported the model to ", dir);
  }
  estimators::Metrics final_line = report->final_metrics;
  if (r.in_cluster()) final_line["restarts"] = report->restarts;
  print_metrics(final_line);
  return 0;
}

}  // namespace

int train(const std::vector<std::string>& args) {
  std::vector<std::string> valued = kTrainFlags;
  valued.insert(valued.end(), kClusterFlags.begin(), kClusterFlags.end());
  valued.insert(valued.end(), model_param_flags().begin(), model_param_flags().end());
  auto parsed = parse_flags(args, valued, {"sync", "regression"});
  if (!parsed.ok()) return usage_error(parsed.status().message());
  // Kubeflow's TFJob and srun start every replica with one command, as TF's train_and_evaluate
  // has every task run one program: a ps task serves.
  auto cluster = cluster_of(*parsed);
  if (!cluster.ok()) return usage_error(cluster.status().message());
  if (cluster->task_type == estimators::TaskType::kPs) {
    return serve_ps(*cluster, *parsed, /*secret_required=*/false);
  }
  TrainRequest r;
  if (int e = read_train_request(*parsed, *cluster, &r)) return e;
  const bool classifier = r.spec.task == estimators::Task::kClassifier;
  // A libsvm file's numeric labels name a classifier's classes, as a table's text labels do.
  DataOptions train_options{.class_names = classifier && r.spec.model != ModelKind::kKMeans,
                            .sequence_length = r.sequence_length};
  // TFRecord files are parsed as the given columns read them, as TF's input functions parse
  // with make_parse_example_spec: a categorical feature of varying length is a sparse tensor.
  // A CSV's sequence columns are split into their values as the rows are read.
  const bool csv = r.data.rfind("csv:", 0) == 0, tfrecord = r.data.rfind("tfrecord:", 0) == 0;
  if (parsed->count("columns") && (csv || tfrecord)) {
    auto read = read_columns_file(parsed->at("columns"));
    if (!read.ok()) return usage_error(read.status().message());
    train_options.sequences = sequence_keys(read->columns);
    if (tfrecord) {
      r.spec.columns = read->columns;
      r.spec.wide_columns = read->wide;
      r.spec.parse_by_columns = true;
      auto options = data_options(r.spec);
      if (!options.ok()) return usage_error("--columns: " + options.status().message());
      train_options.features = options->features;
      if (parsed->count("weight-column")) train_options.inferred = {parsed->at("weight-column")};
    }
  }
  auto train_data = open_data(r.data, "train", r.label,
                              {.batch_size = r.batch,
                               .num_epochs = r.repeat ? 0 : r.epochs,
                               .shuffle = true,
                               .seed = static_cast<uint64_t>(r.seed)},
                              train_options);
  if (!train_data.ok()) return fail(train_data.status());
  if (int e = describe_model(*parsed, &r, &*train_data)) return e;
  // The evaluator too: it stops once it has evaluated the checkpoint of the last step.
  if (r.in_cluster() && r.steps == 0) {
    auto rows = count_rows(*train_data);
    if (!rows.ok()) return fail(rows.status());
    // A synchronous step takes a batch from each of the replicas it aggregates.
    const int64_t per_step = r.batch * std::max(1, r.config.replicas_to_aggregate);
    r.steps = (*rows * r.epochs + per_step - 1) / per_step;
    runtime::log_info("--epochs ", r.epochs, " over ", *rows, " examples, ", per_step,
                      " a step: the replicas stop at global step ", r.steps);
  }
  GracefulStop graceful;
  if (r.task() == estimators::TaskType::kWorker && !r.config.cluster.is_chief) {
    auto model_fn = model_fn_of(r.spec);
    if (!model_fn.ok()) return usage_error(model_fn.status().message());
    estimators::Estimator est(*model_fn, r.config);
    return run_task(est, *train_data, *train_data, r.steps, r.eval_timeout_s, graceful);
  }
  if (!parsed->count("eval-data") && r.eval_data != "fashion-mnist") {
    runtime::log_warning("evaluating on the training data; pass --eval-data for a held-out set");
  }
  // Sequences as long as the training data's, which the model's inputs are shaped by; features
  // as its columns read them.
  auto eval_options = data_options(r.spec);
  if (!eval_options.ok()) return usage_error(eval_options.status().message());
  auto eval_data = open_data(r.eval_data, "test", r.label, {.batch_size = 1000}, *eval_options);
  if (!eval_data.ok()) return fail(eval_data.status());
  if (r.task() == estimators::TaskType::kEvaluator) {
    auto model_fn = model_fn_of(r.spec);
    if (!model_fn.ok()) return usage_error(model_fn.status().message());
    estimators::Estimator est(*model_fn, r.config);
    return run_task(est, *train_data, *eval_data, r.steps, r.eval_timeout_s, graceful);
  }
  return run_chief(r, *train_data, *eval_data, graceful);
}

}  // namespace troupe::cli
