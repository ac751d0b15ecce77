// troupe convert: a dataset written in another format, so that TensorFlow reads what troupe
// reads and the other way round: CSV, libsvm, Fashion-MNIST or TFRecord of tf.Example in; out,
// by the output's suffix, TFRecord of tf.Example (.tfrecord, .tfrecord.gz or .tfrecord.zz/.zlib),
// CSV (.csv: a column per value, "x_0", "x_1", ... for a feature of several) or troupe's own
// record files (.trec, the fastest to train from).
//
//   troupe convert --data csv:adult.csv --out adult.tfrecord.gz
//   troupe convert --data tfrecord:train-*.tfrecord --out train.csv
#include <cstdio>
#include <fstream>

#include "estimators/input/dataset.h"
#include "estimators/input/record_file.h"
#include "runtime/log.h"
#include "tools/cli.h"
#include "tools/data_spec.h"

namespace troupe::cli {

namespace input = troupe::estimators::input;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// RFC 4180: a field with a delimiter, a quote or a line break is quoted, its quotes doubled.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string text_of(const runtime::Tensor& t, int64_t e) {
  char buf[32];
  switch (t.dtype()) {
    case runtime::DType::kFloat32:
      std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(t.data<float>()[e]));
      return buf;
    case runtime::DType::kFloat64:
      std::snprintf(buf, sizeof buf, "%.17g", t.data<double>()[e]);
      return buf;
    case runtime::DType::kString:
      return csv_field(t.data<std::string>()[e]);
    case runtime::DType::kInt32:
      return std::to_string(t.data<int32_t>()[e]);
    case runtime::DType::kInt64:
      return std::to_string(t.data<int64_t>()[e]);
    case runtime::DType::kUInt8:
      return std::to_string(t.data<uint8_t>()[e]);
    case runtime::DType::kBool:
      return t.data<bool>()[e] ? "1" : "0";
    default:
      return "";
  }
}

// Every example of `source` as a CSV row of `out`, a header first.
runtime::Status csv_rows(const actors::Source& source, std::ofstream& out) {
  const std::vector<std::string> names = source.components();
  std::vector<int64_t> header;  // each component's values an example, as the header says
  for (int64_t u = 0; u < source.num_units(); ++u) {
    std::vector<actors::Chunk> chunks;
    int64_t skipped = 0;
    TROUPE_RETURN_IF_ERROR(source.read(u, &chunks, &skipped));
    for (const actors::Chunk& c : chunks) {
      std::vector<int64_t> widths;
      for (const runtime::Tensor& t : c.components) {
        widths.push_back(t.dim(0) > 0 ? t.num_elements() / t.dim(0) : 0);
      }
      if (header.empty()) {
        std::string line;
        for (size_t i = 0; i < names.size(); ++i) {
          for (int64_t j = 0; j < widths[i]; ++j) {
            if (!line.empty()) line += ",";
            line += csv_field(widths[i] == 1 ? names[i] : names[i] + "_" + std::to_string(j));
          }
        }
        out << line << "\n";
        header = widths;
      }
      for (size_t i = 0; i < names.size(); ++i) {
        if (widths[i] != header[i]) {
          return runtime::invalid_argument(source.name(), ": '", names[i], "' has ", header[i],
                                           " values in one example and ", widths[i],
                                           " in another; a CSV's rows have one width");
        }
      }
      for (int64_t row = c.first(); row < c.last(); ++row) {
        std::string line;
        for (size_t i = 0; i < names.size(); ++i) {
          for (int64_t j = 0; j < widths[i]; ++j) {
            if (i > 0 || j > 0) line += ",";
            line += text_of(c.components[i], row * widths[i] + j);
          }
        }
        out << line << "\n";
      }
    }
  }
  return runtime::ok_status();
}

// The same, atomically: a partial file beside `path`, renamed once whole.
runtime::Status write_csv(const actors::Source& source, const std::string& path) {
  const std::string tmp = path + ".partial";
  std::ofstream out(tmp);
  if (!out) return runtime::failed_precondition("cannot write ", tmp);
  runtime::Status s = csv_rows(source, out);
  out.close();
  if (s.ok() && (!out || std::rename(tmp.c_str(), path.c_str()) != 0)) {
    s = runtime::internal_error("cannot write ", path);
  }
  if (!s.ok()) std::remove(tmp.c_str());
  return s;
}

}  // namespace

int convert(const std::vector<std::string>& args) {
  auto parsed = parse_flags(args, {"data", "out", "label", "split"});
  if (!parsed.ok()) return usage_error(parsed.status().message());
  const Flags& flags = *parsed;
  if (!flags.count("data") || !flags.count("out")) {
    return usage_error("troupe convert needs --data DATA and --out PATH");
  }
  const std::string data = flags.at("data"), out = flags.at("out");
  const std::string split = flags.count("split") ? flags.at("split") : "train";
  // What is read is written whole: no label is told apart, but a CSV's needs one named.
  const std::string label = flags.count("label") ? flags.at("label") : "";
  const input::DatasetOptions o;
  runtime::Result<input::Dataset> d = runtime::invalid_argument("");
  if (data.rfind("csv:", 0) == 0) {
    d = input::csv(data.substr(4), label, {}, o);
  } else if (data.rfind("tfrecord:", 0) == 0) {
    d = input::tfrecord(data.substr(9), label, {}, o);
  } else {
    d = open_data(data, split, label.empty() ? "label" : label, o, {});
  }
  if (!d.ok()) return fail(d.status());
  runtime::Status written;
  if (ends_with(out, ".tfrecord") || ends_with(out, ".tfrecord.gz") ||
      ends_with(out, ".tfrecord.zz") || ends_with(out, ".tfrecord.zlib")) {
    written = input::write_tfrecord(*d->source, out);
  } else if (ends_with(out, ".csv")) {
    written = write_csv(*d->source, out);
  } else if (ends_with(out, ".trec")) {
    written = input::write_record_file(*d->source, out);
  } else {
    return usage_error("--out " + out +
                       ": the suffix says the format: .tfrecord (.gz, .zz, .zlib), .csv or .trec");
  }
  if (!written.ok()) return fail(written);
  runtime::log_info("wrote ", d->source->name(), " to ", out);
  return 0;
}

}  // namespace troupe::cli
