#include "tools/data_spec.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "estimators/metrics.h"

namespace troupe::cli {

namespace input = troupe::estimators::input;

namespace {

// Calls `visit` with every chunk of `d`'s examples, in order.
runtime::Status for_each_chunk(const input::Dataset& d,
                               const std::function<runtime::Status(const actors::Chunk&)>& visit) {
  for (int64_t u = 0; u < d.source->num_units(); ++u) {
    std::vector<actors::Chunk> chunks;
    int64_t skipped = 0;
    TROUPE_RETURN_IF_ERROR(d.source->read(u, &chunks, &skipped));
    for (const actors::Chunk& c : chunks) {
      if (c.last() > c.first()) TROUPE_RETURN_IF_ERROR(visit(c));
    }
  }
  return runtime::ok_status();
}

int64_t per_example(const runtime::Tensor& t) {
  return t.dim(0) > 0 ? t.num_elements() / t.dim(0) : 0;
}

// The spec of what a model with columns reads of TFRecord files: data.features, the label and
// data.inferred as the first records hold them. A VarLen string feature (TF's default for a
// hash bucket or a cross) takes the records' kind when they hold integers.
runtime::Result<runtime::FeatureSpecs> features_read(const std::string& pattern,
                                                     const DataOptions& data,
                                                     const std::string& label) {
  TROUPE_ASSIGN_OR_RETURN(auto source, input::TfRecordSource::open(pattern, {}));
  const runtime::FeatureSpecs& held = source->features();
  runtime::FeatureSpecs spec = data.features;
  for (auto& [name, f] : spec) {
    auto it = held.find(name);
    if (it == held.end()) continue;  // missing from the first records: read as the column says
    if (f.kind == runtime::FeatureSpec::Kind::kVarLen && f.dtype == runtime::DType::kString &&
        it->second.dtype == runtime::DType::kInt64) {
      f.dtype = runtime::DType::kInt64;
    }
  }
  std::vector<std::string> names = data.inferred;
  names.push_back(label);
  for (const std::string& name : names) {
    if (name.empty() || spec.count(name)) continue;
    auto it = held.find(name);
    if (it == held.end()) {
      return runtime::invalid_argument("tfrecord ", pattern, ": feature '", name,
                                       "' is in none of its first records");
    }
    spec[name] = it->second;
  }
  return spec;
}

}  // namespace

// open_data with one label.
runtime::Result<input::Dataset> open_one(const std::string& spec, const std::string& split,
                                         const std::string& label, const input::DatasetOptions& o,
                                         const DataOptions& data) {
  if (spec == "fashion-mnist" || spec == "fashion_mnist") return input::fashion_mnist(split, o);
  if (spec.rfind("csv:", 0) == 0) {
    if (label.empty()) return runtime::invalid_argument("--data csv:... needs --label COLUMN");
    input::CsvOptions csv;
    csv.sequences = data.sequences;
    return input::csv(spec.substr(4), label, std::move(csv), o);
  }
  if (spec.rfind("libsvm:", 0) == 0) {
    if (label != "label") {
      return runtime::invalid_argument("--label ", label,
                                       ": a libsvm file's label is the first field of a line");
    }
    // Units of 512 rows: a unit is a dense [rows, width] tensor, at most 64 MB.
    TROUPE_ASSIGN_OR_RETURN(input::Dataset d, input::libsvm(spec.substr(7),
                                                            {.dense = true,
                                                             .num_features = data.num_features,
                                                             .text_labels = data.class_names,
                                                             .rows_per_unit = 512},
                                                            o));
    if (libsvm_features(d) > kMaxLibsvmFeatures) {
      return runtime::invalid_argument(spec, ": ", libsvm_features(d),
                                       " features; troupe's commands read up to ",
                                       kMaxLibsvmFeatures,
                                       " as dense columns (wider sparse data trains from C++: "
                                       "input::libsvm and a weighted categorical column)");
    }
    return d;
  }
  if (spec.rfind("tfrecord:", 0) == 0) {
    if (label.empty()) {
      return runtime::invalid_argument("--data tfrecord:... needs --label FEATURE");
    }
    const std::string pattern = spec.substr(9);
    input::TfRecordOptions options{.sequence_length = data.sequence_length};
    if (!data.features.empty()) {
      TROUPE_ASSIGN_OR_RETURN(options.features, features_read(pattern, data, label));
      return input::tfrecord(pattern, label, options, o);
    }
    TROUPE_ASSIGN_OR_RETURN(input::Dataset d, input::tfrecord(pattern, label, options, o));
    if (!d.sparse.empty()) {
      return runtime::invalid_argument(
          spec, ": feature '", d.sparse[0],
          "' has a varying number of values: give --columns that read it (a categorical "
          "column), or train from C++ with input::tfrecord and a sparse column");
    }
    return d;
  }
  return runtime::invalid_argument("--data '", spec,
                                   "' is not fashion-mnist, csv:PATH, libsvm:PATH or "
                                   "tfrecord:PATH");
}

runtime::Result<input::Dataset> open_data(const std::string& spec, const std::string& split,
                                          const std::string& label, const input::DatasetOptions& o,
                                          const DataOptions& data) {
  std::vector<std::string> labels;
  for (size_t from = 0; from <= label.size();) {
    const size_t comma = std::min(label.find(',', from), label.size());
    labels.push_back(label.substr(from, comma - from));
    from = comma + 1;
  }
  if (labels.size() == 1) return open_one(spec, split, label, o, data);
  for (const std::string& l : labels) {
    if (l.empty()) return runtime::invalid_argument("--label '", label, "' names an empty column");
  }
  if (spec.rfind("csv:", 0) != 0 && spec.rfind("tfrecord:", 0) != 0) {
    return runtime::invalid_argument(
        "--label ", label, ": several labels are columns of csv:... or tfrecord:... data");
  }
  DataOptions more = data;
  more.inferred.insert(more.inferred.end(), labels.begin() + 1, labels.end());
  TROUPE_ASSIGN_OR_RETURN(input::Dataset d, open_one(spec, split, labels[0], o, more));
  return input::with_labels(std::move(d), labels);
}

int64_t sequence_length_of(const input::Dataset& d) {
  auto source = std::dynamic_pointer_cast<const input::TfRecordSource>(d.source);
  return source ? source->sequence_length() : 0;
}

int64_t libsvm_features(const input::Dataset& d) {
  auto source = std::dynamic_pointer_cast<const input::LibsvmSource>(d.source);
  return source ? source->num_features() : 0;
}

runtime::Result<int64_t> count_classes(const input::Dataset& d) {
  const int label = d.component(d.label);
  double top = -1;
  TROUPE_RETURN_IF_ERROR(for_each_chunk(d, [&](const actors::Chunk& c) {
    const std::vector<double> v = estimators::as_doubles(
        runtime::slice_rows(c.components[label], c.first(), c.last() - c.first()));
    for (double x : v) {
      if (!(x >= 0 && x < 2147483648.0) || x != std::floor(x)) {
        return runtime::invalid_argument("label ", x,
                                         " is not a class number (0, 1, ... below 2^31)");
      }
      top = std::max(top, x);
    }
    return runtime::ok_status();
  }));
  return static_cast<int64_t>(top) + 1;
}

runtime::Result<std::vector<std::string>> label_names(const input::Dataset& d) {
  const int label = d.component(d.label);
  std::set<std::string> names;
  bool text = true;
  TROUPE_RETURN_IF_ERROR(for_each_chunk(d, [&](const actors::Chunk& c) {
    const runtime::Tensor& t = c.components[label];
    text = t.dtype() == runtime::DType::kString;
    const int64_t per = per_example(t);
    for (int64_t j = c.first() * per; text && j < c.last() * per; ++j) {
      names.insert(t.data<std::string>()[j]);
    }
    return runtime::ok_status();
  }));
  if (!text) return std::vector<std::string>{};
  return std::vector<std::string>(names.begin(), names.end());
}

runtime::Result<Classes> classes_of(const input::Dataset& d, const std::string& data_spec,
                                    int64_t given) {
  Classes c;
  TROUPE_ASSIGN_OR_RETURN(c.names, label_names(d));
  if (given > 0) {
    c.count = given;
  } else if (!c.names.empty()) {
    c.count = std::max<int64_t>(2, static_cast<int64_t>(c.names.size()));
  } else if (data_spec != "fashion-mnist") {
    TROUPE_ASSIGN_OR_RETURN(const int64_t counted, count_classes(d));
    c.count = std::max<int64_t>(2, counted);
  }
  return c;
}

runtime::Result<int64_t> count_rows(const input::Dataset& d) {
  int64_t rows = 0;
  TROUPE_RETURN_IF_ERROR(for_each_chunk(d, [&](const actors::Chunk& c) {
    rows += c.last() - c.first();
    return runtime::ok_status();
  }));
  return rows;
}

runtime::Result<Arrays> load_arrays(const input::Dataset& d, bool one_hot_text) {
  std::vector<std::string> names = d.features;
  std::sort(names.begin(), names.end());
  // A text feature's values, sorted: its indicator columns, in that order.
  std::map<std::string, std::vector<std::string>> vocabulary;
  if (one_hot_text) {
    std::map<std::string, std::set<std::string>> seen;
    TROUPE_RETURN_IF_ERROR(for_each_chunk(d, [&](const actors::Chunk& c) {
      for (const std::string& name : names) {
        const runtime::Tensor& t = c.components[d.component(name)];
        if (t.dtype() != runtime::DType::kString) continue;
        const int64_t per = per_example(t);
        for (int64_t j = c.first() * per; j < c.last() * per; ++j) {
          seen[name].insert(t.data<std::string>()[j]);
        }
      }
      return runtime::ok_status();
    }));
    for (auto& [name, values] : seen) vocabulary[name].assign(values.begin(), values.end());
  }
  Arrays out;
  std::vector<float> xs;
  std::vector<runtime::Tensor> labels;
  int64_t rows = 0, width = -1;
  TROUPE_RETURN_IF_ERROR(for_each_chunk(d, [&](const actors::Chunk& c) {
    const int64_t n = c.last() - c.first();
    std::vector<std::string> columns;
    // Per feature, row r's values appended to xs.
    std::vector<std::function<void(int64_t)>> writers;
    std::vector<std::vector<double>> numbers(names.size());
    for (size_t f = 0; f < names.size(); ++f) {
      const std::string& name = names[f];
      const runtime::Tensor& t = c.components[d.component(name)];
      const int64_t per = per_example(t);
      if (t.dtype() == runtime::DType::kString) {
        if (!one_hot_text) {
          return runtime::invalid_argument("feature '", name, "' is text: only numbers fit here");
        }
        const std::vector<std::string>& vocab = vocabulary[name];
        for (const std::string& v : vocab) columns.push_back(name + "=" + v);
        const std::string* text = t.data<std::string>() + c.first() * per;
        writers.push_back([&vocab, &xs, text, per](int64_t r) {
          const size_t at = xs.size();
          xs.resize(at + vocab.size(), 0.0f);
          for (int64_t k = 0; k < per; ++k) {
            auto it = std::lower_bound(vocab.begin(), vocab.end(), text[r * per + k]);
            xs[at + static_cast<size_t>(it - vocab.begin())] = 1.0f;
          }
        });
        continue;
      }
      for (int64_t k = 0; k < per; ++k) {
        columns.push_back(per == 1 ? name : name + "[" + std::to_string(k) + "]");
      }
      // A chunk's rows are a range of a tensor that may hold the whole file.
      numbers[f] = estimators::as_doubles(runtime::slice_rows(t, c.first(), n));
      writers.push_back([&xs, values = &numbers[f], per](int64_t r) {
        for (int64_t k = 0; k < per; ++k) xs.push_back(static_cast<float>((*values)[r * per + k]));
      });
    }
    const int64_t w = static_cast<int64_t>(columns.size());
    if (width >= 0 && w != width) return runtime::invalid_argument("examples vary in width");
    width = w;
    out.columns = std::move(columns);
    for (int64_t r = 0; r < n; ++r) {
      for (auto& write : writers) write(r);
    }
    labels.push_back(runtime::slice_rows(c.components[d.component(d.label)], c.first(), n));
    rows += n;
    return runtime::ok_status();
  }));
  if (rows == 0) return runtime::invalid_argument("the data has no examples");
  out.x = runtime::Tensor::from_vector(runtime::Shape{rows, width}, xs);
  out.y = runtime::concat_rows(labels);
  return out;
}

runtime::Result<runtime::Tensor> class_indices(const runtime::Tensor& labels,
                                               const std::vector<std::string>& names) {
  std::vector<int64_t> classes(static_cast<size_t>(labels.num_elements()));
  for (size_t i = 0; i < classes.size(); ++i) {
    const std::string& label = labels.data<std::string>()[i];
    auto it = std::lower_bound(names.begin(), names.end(), label);
    if (it == names.end() || *it != label) {
      return runtime::invalid_argument("label '", label, "' of row ", i, " is not a known class");
    }
    classes[i] = it - names.begin();
  }
  return runtime::Tensor::from_vector(labels.shape(), classes);
}

}  // namespace troupe::cli
