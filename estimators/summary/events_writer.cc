#include "estimators/summary/events_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/image.h"

namespace troupe::estimators {

using runtime::Status;

namespace {

// The few protobuf wire-format pieces events need.
void put_varint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}
void put_tag(int field, int wire_type, std::string* out) {
  put_varint(static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire_type), out);
}
void put_double(int field, double v, std::string* out) {
  put_tag(field, 1, out);
  char b[8];
  std::memcpy(b, &v, 8);
  out->append(b, 8);
}
void put_float(int field, float v, std::string* out) {
  put_tag(field, 5, out);
  char b[4];
  std::memcpy(b, &v, 4);
  out->append(b, 4);
}
void put_int(int field, int64_t v, std::string* out) {
  put_tag(field, 0, out);
  put_varint(static_cast<uint64_t>(v), out);
}
void put_bytes(int field, const std::string& v, std::string* out) {
  put_tag(field, 2, out);
  put_varint(v.size(), out);
  out->append(v);
}
void put_packed_doubles(int field, const std::vector<double>& v, std::string* out) {
  std::string body;
  for (double d : v) {
    char b[8];
    std::memcpy(b, &d, 8);
    body.append(b, 8);
  }
  put_bytes(field, body, out);
}

// Event { wall_time = 1; step = 2; file_version = 3; graph_def = 4; summary = 5; }
std::string event(double wall_time, int64_t step, int field, const std::string& what) {
  std::string e;
  put_double(1, wall_time, &e);
  if (step != 0) put_int(2, step, &e);
  put_bytes(field, what, &e);
  return e;
}

// TF's default histogram buckets: +-1e-12 growing by 10% to 1e20, DBL_MAX at both ends, and 0.
const std::vector<double>& default_buckets() {
  static const std::vector<double> limits = [] {
    std::vector<double> pos;
    for (double v = 1e-12; v < 1e20; v *= 1.1) pos.push_back(v);
    pos.push_back(DBL_MAX);
    std::vector<double> all;
    for (auto it = pos.rbegin(); it != pos.rend(); ++it) all.push_back(-*it);
    all.push_back(0.0);
    all.insert(all.end(), pos.begin(), pos.end());
    return all;
  }();
  return limits;
}

}  // namespace

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string version_event(double wall_time) { return event(wall_time, 0, 3, "brain.Event:2"); }

std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value) {
  std::string v;  // Summary.Value { tag = 1; simple_value = 2; }
  put_bytes(1, tag, &v);
  put_float(2, value, &v);
  std::string summary;  // Summary { repeated Value value = 1; }
  put_bytes(1, v, &summary);
  return event(wall_time, step, 5, summary);
}

std::string histogram_event(double wall_time, int64_t step, const std::string& tag,
                            const runtime::Tensor& values) {
  const std::vector<double>& limits = default_buckets();
  std::vector<double> counts(limits.size(), 0);
  double mn = DBL_MAX, mx = -DBL_MAX, sum = 0, sum_sq = 0, num = 0;
  runtime::visit_numeric(values.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* p = values.data<T>();
    for (int64_t i = 0; i < values.num_elements(); ++i) {
      const double x = static_cast<double>(p[i]);
      if (std::isnan(x)) continue;
      // Bucket i holds (limits[i-1], limits[i]].
      const size_t b = std::lower_bound(limits.begin(), limits.end(), x) - limits.begin();
      counts[std::min(b, limits.size() - 1)] += 1;
      mn = std::min(mn, x);
      mx = std::max(mx, x);
      sum += x;
      sum_sq += x * x;
      num += 1;
    }
  });
  if (num == 0) mn = mx = 0;
  // Only non-empty buckets, each preceded by the empty one before it so its left edge is known.
  std::vector<double> out_limits, out_counts;
  for (size_t i = 0; i < limits.size(); ++i) {
    if (counts[i] == 0) continue;
    if (i > 0 && (out_limits.empty() || out_limits.back() != limits[i - 1])) {
      out_limits.push_back(limits[i - 1]);
      out_counts.push_back(0);
    }
    out_limits.push_back(limits[i]);
    out_counts.push_back(counts[i]);
  }
  std::string
      h;  // HistogramProto { min=1 max=2 num=3 sum=4 sum_squares=5 bucket_limit=6 bucket=7 }
  put_double(1, mn, &h);
  put_double(2, mx, &h);
  put_double(3, num, &h);
  put_double(4, sum, &h);
  put_double(5, sum_sq, &h);
  put_packed_doubles(6, out_limits, &h);
  put_packed_doubles(7, out_counts, &h);
  std::string v;  // Summary.Value { tag = 1; histo = 5; }
  put_bytes(1, tag, &v);
  put_bytes(5, h, &v);
  std::string summary;
  put_bytes(1, v, &summary);
  return event(wall_time, step, 5, summary);
}

std::string graph_event(double wall_time, const runtime::Graph& graph) {
  std::string g;  // GraphDef { repeated NodeDef node = 1; }
  for (int id = 0; id < graph.num_nodes(); ++id) {
    const runtime::Node& n = graph.node(id);
    std::string nd;  // NodeDef { name = 1; op = 2; repeated input = 3; device = 4; }
    put_bytes(1, n.name, &nd);
    put_bytes(2, n.op, &nd);
    for (const runtime::Output& in : n.inputs) {
      const std::string& src = graph.node(in.node).name;
      put_bytes(3, in.index == 0 ? src : src + ":" + std::to_string(in.index), &nd);
    }
    for (int c : n.control_inputs) put_bytes(3, "^" + graph.node(c).name, &nd);
    if (!n.device.empty()) put_bytes(4, n.device, &nd);
    put_bytes(1, nd, &g);
  }
  return event(wall_time, 0, 4, g);
}

std::string image_event(double wall_time, int64_t step, const std::string& tag,
                        const std::string& png, int64_t height, int64_t width, int64_t channels) {
  std::string image;  // Summary.Image { height = 1; width = 2; colorspace = 3; encoded = 4; }
  put_int(1, height, &image);
  put_int(2, width, &image);
  put_int(3, channels, &image);
  put_bytes(4, png, &image);
  std::string v;  // Summary.Value { tag = 1; image = 4; }
  put_bytes(1, tag, &v);
  put_bytes(4, image, &v);
  std::string summary;
  put_bytes(1, v, &summary);
  return event(wall_time, step, 5, summary);
}

std::string text_event(double wall_time, int64_t step, const std::string& tag,
                       const runtime::Tensor& strings) {
  std::string shape;  // TensorShapeProto { repeated Dim dim = 2; }, Dim { size = 1; }
  for (int64_t d : strings.shape().dims()) {
    std::string dim;
    put_int(1, d, &dim);
    put_bytes(2, dim, &shape);
  }
  std::string tensor;      // TensorProto { dtype = 1; tensor_shape = 2; string_val = 8; }
  put_int(1, 7, &tensor);  // DT_STRING
  put_bytes(2, shape, &tensor);
  for (int64_t i = 0; i < strings.num_elements(); ++i) {
    put_bytes(8, strings.data<std::string>()[i], &tensor);
  }
  std::string plugin;  // SummaryMetadata.PluginData { plugin_name = 1; }
  put_bytes(1, "text", &plugin);
  std::string metadata;  // SummaryMetadata { plugin_data = 1; }
  put_bytes(1, plugin, &metadata);
  std::string v;  // Summary.Value { tag = 1; tensor = 8; metadata = 9; }
  put_bytes(1, tag, &v);
  put_bytes(8, tensor, &v);
  put_bytes(9, metadata, &v);
  std::string summary;
  put_bytes(1, v, &summary);
  return event(wall_time, step, 5, summary);
}

runtime::Result<std::unique_ptr<EventsWriter>> EventsWriter::open(const std::string& logdir) {
  std::string partial = logdir.empty() || logdir[0] != '/' ? "" : "/";
  for (size_t start = 0; start <= logdir.size();) {
    size_t slash = logdir.find('/', start);
    if (slash == std::string::npos) slash = logdir.size();
    if (slash > start) {
      partial += logdir.substr(start, slash - start) + "/";
      ::mkdir(partial.c_str(), 0755);
    }
    start = slash + 1;
  }
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  const double now = wall_time_now();
  char base[512];
  std::snprintf(base, sizeof base, "%s/events.out.tfevents.%010lld.%s", logdir.c_str(),
                static_cast<long long>(now), host);
  // Another writer of this second (a second Estimator on the same model_dir) must not truncate
  // that one's file: TF's Python writers add the pid and a counter for the same reason.
  std::string name = base;
  for (int k = 1; ::access(name.c_str(), F_OK) == 0; ++k) {
    name = std::string(base) + "." + std::to_string(::getpid()) + "." + std::to_string(k);
  }
  TROUPE_ASSIGN_OR_RETURN(runtime::RecordWriter w, runtime::RecordWriter::open(name));
  std::unique_ptr<EventsWriter> out(new EventsWriter(std::move(w)));
  const std::string v = version_event(now);
  TROUPE_RETURN_IF_ERROR(out->writer_.write(v.data(), v.size()));
  TROUPE_RETURN_IF_ERROR(out->writer_.flush());
  return out;
}

std::string session_log_event(double wall_time, int64_t step, SessionStatus status,
                              const std::string& checkpoint_path) {
  std::string log;
  put_int(1, static_cast<int64_t>(status), &log);
  if (!checkpoint_path.empty()) put_bytes(2, checkpoint_path, &log);
  return event(wall_time, step, 7, log);
}

Status EventsWriter::add_session_log(SessionStatus status, int64_t step,
                                     const std::string& checkpoint_path) {
  const std::string e = session_log_event(wall_time_now(), step, status, checkpoint_path);
  return writer_.write(e.data(), e.size());
}

Status EventsWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  const std::string e = scalar_event(wall_time_now(), step, tag, static_cast<float>(value));
  return writer_.write(e.data(), e.size());
}

Status EventsWriter::add_histogram(const std::string& tag, const runtime::Tensor& values,
                                   int64_t step) {
  if (!runtime::is_numeric(values.dtype())) {
    return runtime::invalid_argument("histogram '", tag, "' of a ", dtype_name(values.dtype()),
                                     " tensor");
  }
  const std::string e = histogram_event(wall_time_now(), step, tag, values);
  return writer_.write(e.data(), e.size());
}

Status EventsWriter::add_graph(const runtime::Graph& graph) {
  const std::string e = graph_event(wall_time_now(), graph);
  return writer_.write(e.data(), e.size());
}

Status EventsWriter::add_images(const std::string& tag, const runtime::Tensor& images,
                                int64_t max_outputs, int64_t step) {
  if (images.rank() != 4 || !runtime::is_numeric(images.dtype())) {
    return runtime::invalid_argument("image summary '", tag, "': ", images.shape(),
                                     " is not [batch, height, width, channels] of numbers");
  }
  const int64_t n = std::min(images.dim(0), max_outputs);
  const int64_t h = images.dim(1), w = images.dim(2), c = images.dim(3);
  const int64_t per = h * w * c;
  for (int64_t i = 0; i < n; ++i) {
    runtime::Tensor pixels(runtime::DType::kUInt8, runtime::Shape{h, w, c});
    if (images.dtype() == runtime::DType::kUInt8) {
      std::memcpy(pixels.raw_data(), images.data<uint8_t>() + i * per, static_cast<size_t>(per));
    } else {
      // Floats in [0, 1] are scaled to 255; anything else is stretched from its least to its
      // most, as tf.summary.image does.
      std::vector<double> v(static_cast<size_t>(per));
      runtime::visit_numeric(images.dtype(), [&](auto zero) {
        using T = decltype(zero);
        for (int64_t k = 0; k < per; ++k) v[k] = static_cast<double>(images.data<T>()[i * per + k]);
      });
      const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
      const bool unit = per == 0 || (*lo >= 0 && *hi <= 1);
      const double from = unit ? 0 : *lo, span = unit ? 1 : std::max(*hi - *lo, 1e-12);
      for (int64_t k = 0; k < per; ++k) {
        const double s = std::clamp((v[k] - from) / span, 0.0, 1.0);
        pixels.data<uint8_t>()[k] = static_cast<uint8_t>(std::lround(s * 255));
      }
    }
    TROUPE_ASSIGN_OR_RETURN(std::string png, runtime::image::encode_png(pixels));
    const std::string name = n == 1 ? tag + "/image" : tag + "/image/" + std::to_string(i);
    const std::string e = image_event(wall_time_now(), step, name, png, h, w, c);
    TROUPE_RETURN_IF_ERROR(writer_.write(e.data(), e.size()));
  }
  return runtime::ok_status();
}

Status EventsWriter::add_text(const std::string& tag, const runtime::Tensor& strings,
                              int64_t step) {
  if (strings.dtype() != runtime::DType::kString) {
    return runtime::invalid_argument("text summary '", tag, "' of a ", dtype_name(strings.dtype()),
                                     " tensor");
  }
  const std::string e = text_event(wall_time_now(), step, tag, strings);
  return writer_.write(e.data(), e.size());
}

Status EventsWriter::flush() { return writer_.flush(); }

}  // namespace troupe::estimators
