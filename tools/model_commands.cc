// troupe evaluate, predict and export: a canned model that `troupe train` left in a model_dir
// (troupe_model.txt describes it), or an export (predict --export).
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "estimators/export/predictor.h"
#include "estimators/metrics.h"
#include "runtime/log.h"
#include "tools/cli.h"
#include "tools/data_spec.h"
#include "tools/model_spec.h"

namespace troupe::cli {

namespace input = troupe::estimators::input;

namespace {

runtime::Result<std::unique_ptr<estimators::Estimator>> open_model(const Flags& flags,
                                                                   ModelSpec* info) {
  const std::string dir = flags.at("model-dir");
  TROUPE_ASSIGN_OR_RETURN(*info, load_model_spec(dir));
  estimators::RunConfig config;
  config.model_dir = dir;
  TROUPE_ASSIGN_OR_RETURN(estimators::ModelFn model_fn, model_fn_of(*info));
  return std::make_unique<estimators::Estimator>(model_fn, config);
}

}  // namespace

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
  auto options = data_options(info);
  if (!options.ok()) return fail(options.status());
  auto data = open_data(flags.at("data"), "test", label, {.batch_size = 1000}, *options);
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
      if (t.dtype() == runtime::DType::kString) {  // a multi-head model's class names
        line += (line.empty() ? "" : ",") + csv_field(t.data<std::string>()[k]);
        return;
      }
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
  auto options = data_options(info);
  if (!options.ok()) return fail(options.status());
  if (spec.rfind("csv:", 0) == 0) {
    // Rows to predict may come without the label column.
    input::CsvOptions csv;
    csv.sequences = options->sequences;
    data = input::csv(spec.substr(4), "", csv, o);
    if (data.ok() && data->component(label) >= 0) data = input::csv(spec.substr(4), label, csv, o);
  } else {
    data = open_data(spec, "test", label, o, *options);
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
  auto parsed = parse_flags(args, {"model-dir", "out", "checkpoint", "class-labels", "warmup"});
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
  if (flags.count("warmup")) o.assets_extra["tf_serving_warmup_requests"] = flags.at("warmup");
  auto dir = (*est)->export_saved_model(flags.at("out"), o);
  if (!dir.ok()) return fail(dir.status());
  runtime::log_info("exported ", o.checkpoint_path, " to ", *dir);
  std::printf("%s\n", dir->c_str());
  return 0;
}

}  // namespace troupe::cli
