#include "estimators/input/csv_source.h"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "runtime/tensor.h"

namespace troupe::estimators::input {

using runtime::DType;
using runtime::Result;
using runtime::Status;
using runtime::Tensor;

const char* split_csv_record(const char* p, const char* end, char delimiter,
                             std::vector<std::string>* fields, int64_t* lines, bool* open_quote) {
  fields->clear();
  fields->emplace_back();
  bool quoted = false;
  while (p < end) {
    const char ch = *p;
    if (quoted) {
      if (ch == '"') {
        if (p + 1 < end && p[1] == '"') {
          fields->back().push_back('"');
          p += 2;
          continue;
        }
        quoted = false;
      } else {
        if (ch == '\n') ++*lines;
        fields->back().push_back(ch);
      }
      ++p;
      continue;
    }
    if (ch == '\n') {
      ++*lines;
      ++p;
      break;
    }
    if (ch == '"' && fields->back().empty()) {
      quoted = true;
    } else if (ch == delimiter) {
      fields->emplace_back();
    } else if (ch != '\r' || (p + 1 < end && p[1] != '\n')) {
      fields->back().push_back(ch);
    }
    ++p;
  }
  if (open_quote) *open_quote = quoted;
  return p;
}

namespace {

bool parse_int(const std::string& s, int64_t* v) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), *v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

template <class T>
bool parse_float(const std::string& s, T* v) {
  const char* b = s.data();
  if (!s.empty() && s[0] == '+') ++b;
  auto r = std::from_chars(b, s.data() + s.size(), *v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

bool blank(const char* p, const char* end) {
  for (; p < end; ++p) {
    if (*p != '\n' && *p != '\r' && *p != ' ' && *p != '\t') return false;
  }
  return true;
}

}  // namespace

Result<std::shared_ptr<CsvSource>> CsvSource::open(const std::string& pattern, CsvOptions options) {
  std::shared_ptr<CsvSource> s(new CsvSource());
  s->pattern_ = pattern;
  s->options_ = std::move(options);
  TROUPE_ASSIGN_OR_RETURN(std::vector<std::string> paths, expand_glob(pattern));
  for (const std::string& path : paths) {
    TROUPE_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
    s->files_.push_back(std::move(file));
  }
  const CsvOptions& o = s->options_;
  for (size_t f = 0; f < s->files_.size(); ++f) {
    const MappedFile& file = *s->files_[f];
    const char* p = file.bytes().data();
    const char* end = p + file.bytes().size();
    std::vector<std::string> header;
    int64_t lines = 0;
    size_t body = 0;
    if (o.header) {
      p = split_csv_record(p, end, o.delimiter, &header, &lines);
      body = static_cast<size_t>(p - file.bytes().data());
      if (file.bytes().empty()) return runtime::invalid_argument(file.path(), ": empty, no header");
    }
    std::vector<std::string> names = o.column_names.empty() ? header : o.column_names;
    if (names.empty()) {
      return runtime::invalid_argument(file.path(), ": no column names (no header, none given)");
    }
    if (f == 0) {
      s->columns_ = names;
    } else if (names != s->columns_) {
      return runtime::invalid_argument(file.path(), ": its header differs from ",
                                       s->files_[0]->path(), "'s");
    }
    TROUPE_RETURN_IF_ERROR(s->scan(static_cast<int>(f), body));
  }
  s->sequence_.assign(s->columns_.size(), false);
  for (const std::string& name : o.sequences) {
    auto it = std::find(s->columns_.begin(), s->columns_.end(), name);
    if (it == s->columns_.end()) {
      return runtime::invalid_argument(s->name(), ": no column '", name, "' to read as a sequence");
    }
    s->sequence_[it - s->columns_.begin()] = true;
  }
  TROUPE_RETURN_IF_ERROR(s->infer_types());
  for (const auto& file : s->files_) TROUPE_RETURN_IF_ERROR(file->status());
  if (o.select.empty()) {
    for (size_t c = 0; c < s->columns_.size(); ++c) s->selected_.push_back(static_cast<int>(c));
  } else {
    for (const std::string& name : o.select) {
      auto it = std::find(s->columns_.begin(), s->columns_.end(), name);
      if (it == s->columns_.end()) {
        return runtime::invalid_argument(s->name(), ": no column '", name, "'");
      }
      s->selected_.push_back(static_cast<int>(it - s->columns_.begin()));
    }
  }
  for (const auto& [name, t] : o.types) {
    if (std::find(s->columns_.begin(), s->columns_.end(), name) == s->columns_.end()) {
      return runtime::invalid_argument(s->name(), ": a type is declared for '", name,
                                       "', which is not a column");
    }
  }
  return s;
}

// Finds where every rows_per_unit-th record starts, with the parser the readers use, so that
// a unit's bounds and row count agree with what reading it finds (quotes, doubled quotes and
// line breaks inside them included).
Status CsvSource::scan(int file, size_t body) {
  const MappedFile& f = *files_[file];
  const char* data = f.bytes().data();
  const char* p = data + body;
  const char* end = data + f.bytes().size();
  int64_t line = options_.header ? 2 : 1;
  Unit u{file, body, body, line, 0};
  std::vector<std::string> fields;
  while (p < end) {
    const char* start = p;
    const int64_t record_line = line;
    bool open_quote = false;
    p = split_csv_record(p, end, options_.delimiter, &fields, &line, &open_quote);
    if (open_quote) {
      return runtime::data_loss(f.path(), ": a quoted field opened on line ", record_line,
                                " is never closed");
    }
    if (blank(start, p)) continue;
    ++u.rows;
    if (u.rows == options_.rows_per_unit) {
      u.end = static_cast<size_t>(p - data);
      units_.push_back(u);
      u = Unit{file, u.end, u.end, line, 0};
    }
  }
  u.end = f.bytes().size();
  if (u.rows > 0) units_.push_back(u);
  return runtime::ok_status();
}

namespace {

// A sequence field's values: separated by `delimiter`, runs of it counting once.
std::vector<std::string> split_values(const std::string& field, char delimiter) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < field.size()) {
    const size_t next = std::min(field.find(delimiter, at), field.size());
    if (next > at) out.push_back(field.substr(at, next - at));
    at = next + 1;
  }
  return out;
}

// `v` as element i of `t`, in t's dtype; false when it is not one.
bool parse_into(const std::string& v, Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kInt64:
      return parse_int(v, &t.data<int64_t>()[i]);
    case DType::kInt32: {
      int64_t x = 0;
      const bool good = parse_int(v, &x) && x == static_cast<int32_t>(x);
      t.data<int32_t>()[i] = static_cast<int32_t>(x);
      return good;
    }
    case DType::kFloat32:
      return parse_float(v, &t.data<float>()[i]);
    case DType::kFloat64:
      return parse_float(v, &t.data<double>()[i]);
    default:
      t.data<std::string>()[i] = v;
      return true;
  }
}

}  // namespace

Status CsvSource::infer_types() {
  const size_t n = columns_.size();
  types_.assign(n, DType::kInvalid);
  std::vector<bool> is_int(n, true), is_float(n, true), seen(n, false);
  int64_t rows = 0;
  std::vector<std::string> fields;
  for (const Unit& u : units_) {
    const char* p = files_[u.file]->bytes().data() + u.begin;
    const char* end = files_[u.file]->bytes().data() + u.end;
    while (p < end && rows < options_.infer_rows) {
      int64_t lines = 0;
      const char* start = p;
      p = split_csv_record(p, end, options_.delimiter, &fields, &lines);
      if (blank(start, p) || fields.size() != n) continue;  // reported when read
      ++rows;
      for (size_t c = 0; c < n; ++c) {
        const std::vector<std::string> values =
            sequence_[c] ? split_values(fields[c], options_.value_delimiter)
                         : std::vector<std::string>{fields[c]};
        for (const std::string& v : values) {
          if (v.empty()) continue;
          seen[c] = true;
          int64_t i;
          float x;
          if (is_int[c] && !parse_int(v, &i)) is_int[c] = false;
          if (is_float[c] && !parse_float(v, &x)) is_float[c] = false;
        }
      }
    }
    if (rows >= options_.infer_rows) break;
  }
  for (size_t c = 0; c < n; ++c) {
    auto declared = options_.types.find(columns_[c]);
    if (declared != options_.types.end()) {
      const DType t = declared->second;
      if (t != DType::kInt64 && t != DType::kInt32 && t != DType::kFloat32 &&
          t != DType::kFloat64 && t != DType::kString) {
        return runtime::invalid_argument(name(), ": column '", columns_[c], "' cannot be ",
                                         dtype_name(t));
      }
      types_[c] = t;
    } else if (!seen[c] || (is_float[c] && !is_int[c])) {
      types_[c] = DType::kFloat32;
    } else {
      types_[c] = is_int[c] ? DType::kInt64 : DType::kString;
    }
  }
  return runtime::ok_status();
}

std::vector<std::string> CsvSource::components() const {
  std::vector<std::string> out;
  for (int c : selected_) out.push_back(columns_[c]);
  return out;
}

std::vector<std::string> CsvSource::var_len() const {
  std::vector<std::string> out;
  for (int c : selected_) {
    if (sequence_[c]) out.push_back(columns_[c]);
  }
  return out;
}

DType CsvSource::type_of(const std::string& column) const {
  auto it = std::find(columns_.begin(), columns_.end(), column);
  return it == columns_.end() ? DType::kInvalid : types_[it - columns_.begin()];
}

// The mapping may have been cut under the parse: that, not what the parse made of the zeros
// it then read, is the error.
Status CsvSource::read(int64_t unit, std::vector<actors::Chunk>* out, int64_t* skipped) const {
  Status s = read_unit(unit, out, skipped);
  TROUPE_RETURN_IF_ERROR(files_[units_[static_cast<size_t>(unit)].file]->status());
  return s;
}

Status CsvSource::read_unit(int64_t unit, std::vector<actors::Chunk>* out, int64_t* skipped) const {
  const Unit& u = units_[static_cast<size_t>(unit)];
  const std::string& path = files_[u.file]->path();
  std::vector<Tensor> cols;
  for (int c : selected_) cols.emplace_back(types_[c], runtime::Shape{u.rows});
  // A sequence column's rows, each [1, length]: an example a chunk when there are any.
  std::vector<std::vector<Tensor>> sequences(selected_.size());
  bool any_sequence = false;
  for (int c : selected_) any_sequence |= sequence_[c];
  const char* p = files_[u.file]->bytes().data() + u.begin;
  const char* end = files_[u.file]->bytes().data() + u.end;
  int64_t line = u.line;
  int64_t row = 0;
  std::vector<std::string> fields;
  while (p < end) {
    const char* start = p;
    const int64_t record_line = line;
    p = split_csv_record(p, end, options_.delimiter, &fields, &line);
    if (blank(start, p)) continue;
    if (row == u.rows) {
      // The file changed since it was scanned (it is mapped, not copied).
      return runtime::data_loss(path, ":", record_line, ": more rows than when it was opened");
    }
    Status bad;
    if (fields.size() != columns_.size()) {
      bad = runtime::invalid_argument(path, ":", record_line, ": expected ", columns_.size(),
                                      " fields, found ", fields.size());
    }
    for (size_t k = 0; k < selected_.size() && bad.ok(); ++k) {
      const int c = selected_[k];
      if (sequence_[c]) {
        const std::vector<std::string> values = split_values(fields[c], options_.value_delimiter);
        Tensor t(types_[c], runtime::Shape{1, static_cast<int64_t>(values.size())});
        for (size_t i = 0; i < values.size() && bad.ok(); ++i) {
          if (!parse_into(values[i], t, static_cast<int64_t>(i))) {
            bad = runtime::invalid_argument(path, ":", record_line, ": column '", columns_[c],
                                            "': '", values[i], "' is not ", dtype_name(t.dtype()));
          }
        }
        sequences[k].resize(static_cast<size_t>(row) + 1);
        sequences[k][static_cast<size_t>(row)] = std::move(t);
        continue;
      }
      const std::string* v = &fields[c];
      if (v->empty()) {
        auto d = options_.defaults.find(columns_[c]);
        if (d != options_.defaults.end()) {
          v = &d->second;
        } else if (types_[c] != DType::kString) {
          bad = runtime::invalid_argument(path, ":", record_line, ": column '", columns_[c],
                                          "' is missing and has no default");
          break;
        }
      }
      Tensor& t = cols[k];
      if (!parse_into(*v, t, row)) {
        bad = runtime::invalid_argument(path, ":", record_line, ": column '", columns_[c], "': '",
                                        *v, "' is not ", dtype_name(t.dtype()));
      }
    }
    if (!bad.ok()) {
      if (!options_.skip_bad_records) return bad;
      ++*skipped;
      continue;
    }
    ++row;
  }
  if (any_sequence) {
    // Sequences differ in length: each example its own chunk, its other columns' values beside.
    for (int64_t r = 0; r < row; ++r) {
      actors::Chunk one;
      for (size_t k = 0; k < selected_.size(); ++k) {
        if (sequence_[selected_[k]]) {
          one.components.push_back(std::move(sequences[k][static_cast<size_t>(r)]));
        } else {
          one.components.push_back(runtime::slice_rows(cols[k], r, 1));
        }
      }
      out->push_back(std::move(one));
    }
    return runtime::ok_status();
  }
  actors::Chunk chunk;
  chunk.components = std::move(cols);
  chunk.end = row;  // skipped rows leave unused space at the end
  if (row > 0) out->push_back(std::move(chunk));
  return runtime::ok_status();
}

}  // namespace troupe::estimators::input
