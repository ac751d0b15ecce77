#include "estimators/input/libsvm_source.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "runtime/tensor.h"

namespace troupe::estimators::input {

using runtime::Result;
using runtime::Shape;
using runtime::Status;
using runtime::Tensor;

namespace {

struct Example {
  float label = 0;
  std::vector<int64_t> indices;
  std::vector<float> values;
};

// The content of a line without its comment and surrounding blanks.
std::string_view content(std::string_view line) {
  const size_t hash = line.find('#');
  if (hash != std::string_view::npos) line = line.substr(0, hash);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) {
    line.remove_suffix(1);
  }
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  return line;
}

// Parses one non-empty line; the error says what is wrong (the caller adds file and line).
Status parse_line(std::string_view line, int64_t base, Example* ex) {
  ex->indices.clear();
  ex->values.clear();
  size_t pos = 0;
  auto token = [&]() {
    while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t')) ++pos;
    const size_t start = pos;
    while (pos < line.size() && line[pos] != ' ' && line[pos] != '\t') ++pos;
    return line.substr(start, pos - start);
  };
  std::string_view label = token();
  const char* lb = label.data() + (!label.empty() && label[0] == '+' ? 1 : 0);
  auto r = std::from_chars(lb, label.data() + label.size(), ex->label);
  if (r.ec != std::errc() || r.ptr != label.data() + label.size()) {
    return runtime::invalid_argument("label '", std::string(label), "' is not a number");
  }
  for (std::string_view t = token(); !t.empty(); t = token()) {
    const size_t colon = t.find(':');
    if (colon == std::string_view::npos) {
      return runtime::invalid_argument("'", std::string(t), "' is not index:value");
    }
    if (t.substr(0, colon) == "qid") continue;
    int64_t index = 0;
    float value = 0;
    auto ri = std::from_chars(t.data(), t.data() + colon, index);
    auto rv = std::from_chars(t.data() + colon + 1, t.data() + t.size(), value);
    if (ri.ec != std::errc() || ri.ptr != t.data() + colon || rv.ec != std::errc() ||
        rv.ptr != t.data() + t.size()) {
      return runtime::invalid_argument("'", std::string(t), "' is not index:value");
    }
    if (index < base) {
      return runtime::invalid_argument("feature index ", index, " is below ", base);
    }
    ex->indices.push_back(index - base);
    ex->values.push_back(value);
  }
  return runtime::ok_status();
}

}  // namespace

Result<std::shared_ptr<LibsvmSource>> LibsvmSource::open(const std::string& pattern,
                                                         LibsvmOptions options) {
  std::shared_ptr<LibsvmSource> s(new LibsvmSource());
  s->pattern_ = pattern;
  s->options_ = options;
  s->options_.rows_per_unit = std::max<int64_t>(1, options.rows_per_unit);
  TROUPE_ASSIGN_OR_RETURN(std::vector<std::string> paths, expand_glob(pattern));
  const bool infer = options.dense && options.num_features <= 0;
  const int64_t base = options.zero_based ? 0 : 1;
  int64_t max_index = -1;
  std::string max_at;  // file:line of the largest index, for the error it may cause
  Example ex;
  for (const std::string& path : paths) {
    TROUPE_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
    const std::string_view bytes = file->bytes();
    const int f = static_cast<int>(s->files_.size());
    Unit u{f, 0, 0, 1, 0};
    size_t pos = 0;
    int64_t line = 1;
    while (pos < bytes.size()) {
      size_t nl = bytes.find('\n', pos);
      if (nl == std::string_view::npos) nl = bytes.size();
      std::string_view text = content(bytes.substr(pos, nl - pos));
      if (!text.empty()) {
        ++u.rows;
        // Inferring the width needs every index; a line that does not parse is reported when
        // it is read.
        if (infer && parse_line(text, base, &ex).ok()) {
          for (int64_t i : ex.indices) {
            if (i <= max_index) continue;
            max_index = i;
            max_at = path + ":" + std::to_string(line);
          }
        }
      }
      pos = nl + 1;
      ++line;
      if (u.rows == s->options_.rows_per_unit) {
        u.end = std::min(pos, bytes.size());
        s->units_.push_back(u);
        u = Unit{f, u.end, u.end, line, 0};
      }
    }
    u.end = bytes.size();
    if (u.rows > 0) s->units_.push_back(u);
    s->files_.push_back(std::move(file));
  }
  for (const auto& file : s->files_) TROUPE_RETURN_IF_ERROR(file->status());
  if (infer) {
    if (max_index == INT64_MAX) {
      return runtime::invalid_argument(max_at, ": feature index ", max_index, " is too large");
    }
    s->options_.num_features = max_index + 1;
  }
  if (s->options_.dense) {
    // A dense row is as wide as the largest index: one huge index (a typo, a hashed feature)
    // must be an error here, not an allocation of its width at the first read.
    const runtime::Shape unit{s->options_.rows_per_unit, s->options_.num_features};
    if (Status st = runtime::check_tensor_size(runtime::DType::kFloat32, unit); !st.ok()) {
      return runtime::make_error(st.code(), infer ? max_at : s->name(), ": dense rows of ",
                                 s->options_.num_features, " features (the largest index",
                                 infer ? ", on this line" : "", ") do not fit: ", st.message());
    }
  }
  return s;
}

std::vector<std::string> LibsvmSource::components() const {
  if (options_.dense) return {"label", "features"};
  return {"label", "indices", "values"};
}

// The mapping may have been cut under the parse: that, not what the parse made of the zeros
// it then read, is the error.
Status LibsvmSource::read(int64_t unit, std::vector<actors::Chunk>* out, int64_t* skipped) const {
  Status s = read_unit(unit, out, skipped);
  TROUPE_RETURN_IF_ERROR(files_[units_[static_cast<size_t>(unit)].file]->status());
  return s;
}

Status LibsvmSource::read_unit(int64_t unit, std::vector<actors::Chunk>* out,
                               int64_t* skipped) const {
  const Unit& u = units_[static_cast<size_t>(unit)];
  const MappedFile& f = *files_[u.file];
  const std::string_view bytes = f.bytes().substr(u.begin, u.end - u.begin);
  const int64_t base = options_.zero_based ? 0 : 1;
  const int64_t width = options_.num_features;
  Tensor labels, features;
  std::vector<std::string> names;  // text_labels
  auto label_text = [](float label) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", label);
    return std::string(text);
  };
  if (options_.dense) {
    TROUPE_ASSIGN_OR_RETURN(labels, Tensor::zeros(runtime::DType::kFloat32, Shape{u.rows}));
    TROUPE_ASSIGN_OR_RETURN(features,
                            Tensor::zeros(runtime::DType::kFloat32, Shape{u.rows, width}));
  }
  int64_t row = 0;
  int64_t line = u.line;
  size_t pos = 0;
  Example ex;
  for (; pos < bytes.size(); ++line) {
    size_t nl = bytes.find('\n', pos);
    if (nl == std::string_view::npos) nl = bytes.size();
    std::string_view text = content(bytes.substr(pos, nl - pos));
    pos = nl + 1;
    if (text.empty()) continue;
    Status s = parse_line(text, base, &ex);
    if (s.ok() && width > 0) {
      for (int64_t i : ex.indices) {
        if (i >= width) {
          s = runtime::invalid_argument("feature index ", i + base, " is beyond the ", width,
                                        " features");
        }
      }
    }
    if (!s.ok()) {
      if (!options_.skip_bad_records) return s.with_context(f.path() + ":" + std::to_string(line));
      ++*skipped;
      continue;
    }
    if (options_.dense && options_.text_labels) {
      names.push_back(label_text(ex.label));
    } else if (options_.dense) {
      labels.data<float>()[row] = ex.label;
    }
    if (options_.dense) {
      float* dst = features.data<float>() + row * width;
      for (size_t k = 0; k < ex.indices.size(); ++k) dst[ex.indices[k]] = ex.values[k];
    } else {
      const int64_t nnz = static_cast<int64_t>(ex.indices.size());
      actors::Chunk c;
      c.components = {
          options_.text_labels
              ? Tensor::from_vector(Shape{1}, std::vector<std::string>{label_text(ex.label)})
              : Tensor::from_vector(Shape{1}, std::vector<float>{ex.label}),
          Tensor::from_vector(Shape{1, nnz}, ex.indices),
          Tensor::from_vector(Shape{1, nnz}, ex.values)};
      out->push_back(std::move(c));
    }
    ++row;
  }
  if (options_.dense && row > 0) {
    actors::Chunk c;
    if (options_.text_labels) {
      names.resize(static_cast<size_t>(u.rows));  // rows skipped leave the tail unread
      labels = Tensor::from_vector(Shape{u.rows}, names);
    }
    c.components = {labels, features};
    c.end = row;
    out->push_back(std::move(c));
  }
  return runtime::ok_status();
}

}  // namespace troupe::estimators::input
