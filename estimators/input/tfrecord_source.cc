#include "estimators/input/tfrecord_source.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>

#include "runtime/log.h"
#include "runtime/record_io.h"
#include "schema/example.pb.h"

namespace troupe::estimators::input {

using runtime::DType;
using runtime::Result;
using runtime::Status;
using runtime::Tensor;

std::string to_string(const FeatureSpec& spec) {
  const std::string type = std::string(runtime::dtype_name(spec.dtype)) + " ";
  switch (spec.kind) {
    case FeatureSpec::Kind::kVarLen:
      return type + "varlen";
    case FeatureSpec::Kind::kSequence:
      return type + spec.shape.to_string() + " sequence";
    case FeatureSpec::Kind::kFixedLen:
      break;
  }
  return type + spec.shape.to_string();
}

Result<Compression> parse_compression(const std::string& name) {
  std::string lower = name;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "auto") return Compression::kAuto;
  if (lower.empty() || lower == "none") return Compression::kNone;
  if (lower == "gzip") return Compression::kGzip;
  if (lower == "zlib") return Compression::kZlib;
  return runtime::invalid_argument("compression '", name, "' is not none, gzip, zlib or auto");
}

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Compression resolve(Compression c, const std::string& path) {
  if (c != Compression::kAuto) return c;
  if (ends_with(path, ".gz")) return Compression::kGzip;
  if (ends_with(path, ".zz") || ends_with(path, ".zlib")) return Compression::kZlib;
  return Compression::kNone;
}

// zlib's windowBits for a format: gzip's header and trailer, or zlib's.
int window_bits(Compression c) { return c == Compression::kGzip ? 16 + MAX_WBITS : MAX_WBITS; }

// The whole of a compressed file, inflated; gzip members one after another are one stream, as
// gunzip reads them. A stream that ends before its trailer is DataLoss: its CRC was never
// checked, and records may be missing.
Result<std::string> inflate_all(std::string_view in, Compression c, const std::string& path) {
  z_stream z{};
  if (inflateInit2(&z, window_bits(c)) != Z_OK) {
    return runtime::internal_error(path, ": cannot start zlib");
  }
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(std::min<size_t>(in.size(), UINT32_MAX));
  size_t fed = z.avail_in;
  int rc = Z_OK;
  char buf[1 << 16];
  while (true) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
    if (z.avail_in == 0 && fed < in.size()) {
      const size_t more = std::min<size_t>(in.size() - fed, UINT32_MAX);
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + fed));
      z.avail_in = static_cast<uInt>(more);
      fed += more;
    }
    if (rc == Z_STREAM_END) {
      if (z.avail_in == 0) break;
      if (c != Compression::kGzip || inflateReset(&z) != Z_OK) break;  // another gzip member
      continue;
    }
    if (rc != Z_OK && !(rc == Z_BUF_ERROR && z.avail_in > 0)) break;
  }
  const uInt left = z.avail_in;
  inflateEnd(&z);
  if (rc != Z_STREAM_END) {
    return runtime::data_loss(path, ": the ", c == Compression::kGzip ? "gzip" : "zlib",
                              " stream is cut short or damaged (",
                              rc == Z_OK || rc == Z_BUF_ERROR ? "no end, no checksum" : "bad data",
                              ") after ", out.size(), " bytes");
  }
  if (left != 0) {
    return runtime::data_loss(path, ": ", left, " bytes after the compressed stream's end");
  }
  return out;
}

// The values of a feature, as a kind and a count.
DType kind_of(const tensorflow::Feature& f) {
  switch (f.kind_case()) {
    case tensorflow::Feature::kFloatList:
      return DType::kFloat32;
    case tensorflow::Feature::kInt64List:
      return DType::kInt64;
    case tensorflow::Feature::kBytesList:
      return DType::kString;
    default:
      return DType::kInvalid;  // no values: any kind
  }
}

int64_t count_of(const tensorflow::Feature& f) {
  switch (f.kind_case()) {
    case tensorflow::Feature::kFloatList:
      return f.float_list().value_size();
    case tensorflow::Feature::kInt64List:
      return f.int64_list().value_size();
    case tensorflow::Feature::kBytesList:
      return f.bytes_list().value_size();
    default:
      return 0;
  }
}

// Copies the `count` values of `f` (of `dtype`, checked) to `out` from element `at` on.
void copy_values(const tensorflow::Feature& f, Tensor* out, int64_t at) {
  switch (f.kind_case()) {
    case tensorflow::Feature::kFloatList:
      std::memcpy(out->data<float>() + at, f.float_list().value().data(),
                  sizeof(float) * static_cast<size_t>(f.float_list().value_size()));
      break;
    case tensorflow::Feature::kInt64List:
      std::memcpy(out->data<int64_t>() + at, f.int64_list().value().data(),
                  sizeof(int64_t) * static_cast<size_t>(f.int64_list().value_size()));
      break;
    case tensorflow::Feature::kBytesList:
      for (int i = 0; i < f.bytes_list().value_size(); ++i) {
        out->data<std::string>()[at + i] = f.bytes_list().value(i);
      }
      break;
    default:
      break;
  }
}

Status check_spec(const std::string& name, const FeatureSpec& s) {
  if (s.dtype != DType::kFloat32 && s.dtype != DType::kInt64 && s.dtype != DType::kString) {
    return runtime::invalid_argument("feature '", name, "': ", runtime::dtype_name(s.dtype),
                                     " is not float32, int64 or string (tf.Example's kinds)");
  }
  if (s.kind == FeatureSpec::Kind::kVarLen || s.kind == FeatureSpec::Kind::kSequence) {
    if (s.default_value) {
      return runtime::invalid_argument("feature '", name, "': a ",
                                       s.kind == FeatureSpec::Kind::kVarLen ? "VarLen" : "sequence",
                                       " feature has no default");
    }
    if (s.kind == FeatureSpec::Kind::kVarLen) return runtime::ok_status();
  }
  for (int64_t d : s.shape.dims()) {
    if (d < 0) {
      return runtime::invalid_argument("feature '", name, "': FixedLen shape ", s.shape.to_string(),
                                       " is not fully defined");
    }
  }
  if (s.default_value && (s.default_value->dtype() != s.dtype ||
                          s.default_value->num_elements() != s.shape.num_elements())) {
    return runtime::invalid_argument("feature '", name, "': its default is ",
                                     runtime::dtype_name(s.default_value->dtype()), " ",
                                     s.default_value->shape().to_string(), ", not ", to_string(s));
  }
  return runtime::ok_status();
}

// One example's feature list into row `row` of `t` ([n, length, step...]): its first `length`
// steps, then padding (zeros, or empty strings).
Status fill_sequence(const tensorflow::FeatureList* list, const std::string& name,
                     const FeatureSpec& s, int64_t length, int64_t row, Tensor* t) {
  const int64_t per = s.shape.num_elements();
  const int64_t have = list ? list->feature_size() : 0;
  const int64_t keep = std::min(have, length);
  for (int64_t k = 0; k < keep; ++k) {
    const tensorflow::Feature& step = list->feature(static_cast<int>(k));
    const DType kind = kind_of(step);
    if ((kind != DType::kInvalid && kind != s.dtype) || count_of(step) != per) {
      return runtime::invalid_argument("feature list '", name, "': step ", k, " has ",
                                       count_of(step), " values of ", runtime::dtype_name(kind),
                                       ", not a step of ", to_string(s));
    }
    copy_values(step, t, (row * length + k) * per);
  }
  const int64_t from = (row * length + keep) * per, to = (row + 1) * length * per;
  if (s.dtype == DType::kString) {
    for (int64_t e = from; e < to; ++e) t->data<std::string>()[e].clear();
  } else if (to > from) {
    const size_t size = runtime::dtype_size(s.dtype);
    std::memset(static_cast<char*>(t->raw_data()) + size * static_cast<size_t>(from), 0,
                size * static_cast<size_t>(to - from));
  }
  return runtime::ok_status();
}

// One example's values of each feature into row `row` of `out` (FixedLen and sequence
// features: [n, ...] tensors made by the caller) or into a [1, len] tensor of its own (VarLen).
// `context` holds an Example's features or a SequenceExample's context; `lists` its feature
// lists (null for an Example). The example's most steps go to `steps` when given.
Status fill(const tensorflow::Features& context, const tensorflow::FeatureLists* lists,
            const FeatureSpecs& spec, int64_t length, int64_t row, std::vector<Tensor>* out,
            int64_t* steps = nullptr) {
  const auto& features = context.feature();
  size_t i = 0;
  for (const auto& [name, s] : spec) {
    Tensor& t = (*out)[i++];
    if (s.kind == FeatureSpec::Kind::kSequence) {
      const tensorflow::FeatureList* list = nullptr;
      if (lists) {
        auto it = lists->feature_list().find(name);
        if (it != lists->feature_list().end()) list = &it->second;
      }
      if (steps && list) *steps = std::max<int64_t>(*steps, list->feature_size());
      TROUPE_RETURN_IF_ERROR(fill_sequence(list, name, s, length, row, &t));
      continue;
    }
    auto it = features.find(name);
    const bool present = it != features.end();
    const DType kind = present ? kind_of(it->second) : DType::kInvalid;
    const int64_t n = present ? count_of(it->second) : 0;
    if (kind != DType::kInvalid && kind != s.dtype) {
      return runtime::invalid_argument("feature '", name, "' is ", runtime::dtype_name(kind),
                                       ", not ", to_string(s));
    }
    if (s.kind == FeatureSpec::Kind::kVarLen) {
      t = Tensor(s.dtype, runtime::Shape{1, n});
      if (n > 0) copy_values(it->second, &t, 0);
      continue;
    }
    const int64_t per = s.shape.num_elements();
    if (n == 0 && !(present && per == 0)) {
      if (!s.default_value) {
        return runtime::invalid_argument("feature '", name,
                                         "' is missing and its spec has no default");
      }
      if (s.dtype == DType::kString) {
        for (int64_t e = 0; e < per; ++e) {
          t.data<std::string>()[row * per + e] = s.default_value->data<std::string>()[e];
        }
      } else {
        const size_t bytes = runtime::dtype_size(s.dtype) * static_cast<size_t>(per);
        std::memcpy(static_cast<char*>(t.raw_data()) + bytes * static_cast<size_t>(row),
                    s.default_value->raw_data(), bytes);
      }
      continue;
    }
    if (n != per) {
      return runtime::invalid_argument("feature '", name, "' has ", n, " values, not the ", per,
                                       " of ", to_string(s));
    }
    copy_values(it->second, &t, row * per);
  }
  return runtime::ok_status();
}

// [rows, shape...] of each FixedLen feature, [rows, length, step...] of each sequence one, and a
// placeholder for each VarLen one.
std::vector<Tensor> fixed_tensors(const FeatureSpecs& spec, int64_t rows, int64_t length) {
  std::vector<Tensor> out;
  for (const auto& [name, s] : spec) {
    if (s.kind == FeatureSpec::Kind::kVarLen) {
      out.emplace_back();
      continue;
    }
    std::vector<int64_t> dims = {rows};
    if (s.kind == FeatureSpec::Kind::kSequence) dims.push_back(length);
    for (int64_t d : s.shape.dims()) dims.push_back(d);
    out.emplace_back(s.dtype, runtime::Shape(dims));
  }
  return out;
}

// What the first records say of their features (see the header), and the most steps a
// feature list of them has.
Result<FeatureSpecs> infer(const std::vector<std::string_view>& records, const std::string& where,
                           int64_t* most_steps) {
  if (records.empty()) {
    return runtime::invalid_argument(where, ": no records to infer the features from; give them");
  }
  struct Seen {
    DType dtype = DType::kInvalid;
    int64_t records = 0, least = INT64_MAX, most = 0;
  };
  std::map<std::string, Seen> seen, lists;  // a context's (an Example's) features; feature lists
  auto see = [&](Seen& s, const tensorflow::Feature& f, const std::string& name, size_t r) {
    const DType kind = kind_of(f);
    if (kind != DType::kInvalid && s.dtype != DType::kInvalid && kind != s.dtype) {
      return runtime::invalid_argument(where, ": feature '", name, "' is ",
                                       runtime::dtype_name(s.dtype), " in one record and ",
                                       runtime::dtype_name(kind), " in record ", r);
    }
    if (kind != DType::kInvalid) s.dtype = kind;
    s.least = std::min(s.least, count_of(f));
    s.most = std::max(s.most, count_of(f));
    return runtime::ok_status();
  };
  *most_steps = 0;
  tensorflow::SequenceExample ex;  // an Example's bytes read as one: its features the context
  for (size_t r = 0; r < records.size(); ++r) {
    if (!ex.ParseFromArray(records[r].data(), static_cast<int>(records[r].size()))) {
      return runtime::invalid_argument(where, ": record ", r,
                                       " is not a tf.Example or tf.train.SequenceExample");
    }
    for (const auto& [name, f] : ex.context().feature()) {
      TROUPE_RETURN_IF_ERROR(see(seen[name], f, name, r));
      ++seen[name].records;
    }
    for (const auto& [name, list] : ex.feature_lists().feature_list()) {
      if (seen.count(name)) {
        return runtime::invalid_argument(where, ": '", name,
                                         "' is both a context feature and a feature list");
      }
      for (const tensorflow::Feature& step : list.feature()) {
        TROUPE_RETURN_IF_ERROR(see(lists[name], step, name, r));
      }
      *most_steps = std::max<int64_t>(*most_steps, list.feature_size());
    }
  }
  FeatureSpecs spec;
  for (const auto& [name, s] : seen) {
    const DType dtype = s.dtype == DType::kInvalid ? DType::kFloat32 : s.dtype;
    const bool fixed = s.records == static_cast<int64_t>(records.size()) && s.least == s.most;
    if (!fixed) {
      spec[name] = FeatureSpec{.kind = FeatureSpec::Kind::kVarLen, .dtype = dtype};
    } else {
      spec[name] = FeatureSpec{.dtype = dtype,
                               .shape = s.most == 1 ? runtime::Shape{} : runtime::Shape{s.most}};
    }
  }
  for (const auto& [name, s] : lists) {
    if (spec.count(name)) {
      return runtime::invalid_argument(where, ": '", name,
                                       "' is both a context feature and a feature list");
    }
    if (s.least != s.most) {
      return runtime::invalid_argument(where, ": feature list '", name, "' has steps of ", s.least,
                                       " and of ", s.most,
                                       " values; a sequence feature's steps are of one size");
    }
    spec[name] = FeatureSpec{.kind = FeatureSpec::Kind::kSequence,
                             .dtype = s.dtype == DType::kInvalid ? DType::kFloat32 : s.dtype,
                             .shape = s.most == 1 ? runtime::Shape{} : runtime::Shape{s.most}};
  }
  return spec;
}

bool has_sequences(const FeatureSpecs& spec) {
  return std::any_of(spec.begin(), spec.end(),
                     [](const auto& e) { return e.second.kind == FeatureSpec::Kind::kSequence; });
}

}  // namespace

struct TfRecordSource::File {
  std::string path;
  std::shared_ptr<const MappedFile> mapped;  // an uncompressed file
  std::string inflated;                      // a compressed one
  std::string_view bytes() const { return mapped ? mapped->bytes() : std::string_view(inflated); }
};

Result<std::shared_ptr<TfRecordSource>> TfRecordSource::open(const std::string& pattern,
                                                             TfRecordOptions options) {
  if (options.records_per_unit < 1) {
    return runtime::invalid_argument("tfrecord: records_per_unit ", options.records_per_unit,
                                     " is not positive");
  }
  std::shared_ptr<TfRecordSource> s(new TfRecordSource());
  s->pattern_ = pattern;
  s->options_ = options;
  TROUPE_ASSIGN_OR_RETURN(std::vector<std::string> paths, expand_glob(pattern));
  std::vector<std::string_view> first;  // records to infer the spec from
  for (const std::string& path : paths) {
    auto file = std::make_shared<File>();
    file->path = path;
    TROUPE_ASSIGN_OR_RETURN(auto mapped, MappedFile::open(path));
    const Compression c = resolve(options.compression, path);
    if (c == Compression::kNone) {
      file->mapped = std::move(mapped);
    } else {
      TROUPE_ASSIGN_OR_RETURN(file->inflated, inflate_all(mapped->bytes(), c, path));
      TROUPE_RETURN_IF_ERROR(mapped->status());
    }
    const std::string_view bytes = file->bytes();
    TROUPE_ASSIGN_OR_RETURN(auto frames,
                            runtime::index_frames(bytes, path, options.skip_bad_records));
    // Runs of records_per_unit frames; a damaged span is a unit of its own, of no records.
    const int index = static_cast<int>(s->files_.size());
    Unit unit{index, 0, 0, 0};
    auto close_unit = [&] {
      if (unit.records > 0) s->units_.push_back(unit);
      unit = Unit{index, 0, 0, 0};
    };
    for (const runtime::FrameSpan& f : frames) {
      if (f.damaged) {
        close_unit();
        ++s->damaged_;
        s->units_.push_back(Unit{index, f.offset, f.offset + f.size, 0});
        continue;
      }
      if (unit.records == 0) unit.begin = f.offset;
      unit.end = f.offset + f.size;
      if (++unit.records == options.records_per_unit) close_unit();
      std::string_view body;
      runtime::RecordReader one(bytes.data() + f.offset, f.size, path);
      if (static_cast<int64_t>(first.size()) < options.infer_records && one.next(&body).ok()) {
        first.push_back(body);
      }
    }
    close_unit();
    s->files_.push_back(std::move(file));
  }
  int64_t most_steps = 0;
  if (options.features.empty()) {
    TROUPE_ASSIGN_OR_RETURN(s->spec_, infer(first, "tfrecord " + pattern, &most_steps));
    std::string said;
    for (const auto& [name, f] : s->spec_) {
      said += (said.empty() ? "" : ", ") + name + ": " + to_string(f);
    }
    runtime::log_info("tfrecord ", pattern, ": features inferred from ", first.size(),
                      " records: ", said);
  } else {
    s->spec_ = options.features;
    if (has_sequences(s->spec_) && options.sequence_length == 0 && !first.empty()) {
      TROUPE_RETURN_IF_ERROR(infer(first, "tfrecord " + pattern, &most_steps).status());
    }
  }
  for (const auto& [name, f] : s->spec_) TROUPE_RETURN_IF_ERROR(check_spec(name, f));
  if (options.sequence_length < 0) {
    return runtime::invalid_argument("tfrecord: sequence_length ", options.sequence_length,
                                     " is negative");
  }
  if (has_sequences(s->spec_)) {
    s->sequence_length_ = options.sequence_length > 0 ? options.sequence_length : most_steps;
    if (s->sequence_length_ == 0) {
      return runtime::invalid_argument("tfrecord ", pattern,
                                       ": its feature lists are empty in the first records; give "
                                       "the sequence length");
    }
    if (options.sequence_length == 0) {
      runtime::log_info("tfrecord ", pattern, ": sequences of ", s->sequence_length_,
                        " steps (the most of the first ", first.size(),
                        " records; longer ones are cut, shorter ones padded)");
    }
  }
  for (const auto& f : s->files_) {
    if (f->mapped) TROUPE_RETURN_IF_ERROR(f->mapped->status());
  }
  return s;
}

std::vector<std::string> TfRecordSource::components() const {
  std::vector<std::string> names;
  for (const auto& [name, f] : spec_) names.push_back(name);
  return names;
}

std::vector<std::string> TfRecordSource::var_len() const {
  std::vector<std::string> names;
  for (const auto& [name, f] : spec_) {
    if (f.kind == FeatureSpec::Kind::kVarLen) names.push_back(name);
  }
  return names;
}

Status TfRecordSource::read(int64_t unit, std::vector<actors::Chunk>* out, int64_t* skipped) const {
  const Unit& u = units_[static_cast<size_t>(unit)];
  Status s = read_unit(u, out, skipped);
  // The mapping may have been cut under the parse: that is the error, not what it made of it.
  if (const auto& mapped = files_[u.file]->mapped) TROUPE_RETURN_IF_ERROR(mapped->status());
  return s;
}

Status TfRecordSource::read_unit(const Unit& u, std::vector<actors::Chunk>* out,
                                 int64_t* skipped) const {
  if (u.records == 0) {  // a damaged stretch
    ++*skipped;
    return runtime::ok_status();
  }
  const File& f = *files_[u.file];
  const std::string_view bytes = f.bytes().substr(u.begin, u.end - u.begin);
  runtime::RecordReader reader(bytes.data(), bytes.size(), f.path);
  const bool per_record = std::any_of(spec_.begin(), spec_.end(), [](const auto& e) {
    return e.second.kind == FeatureSpec::Kind::kVarLen;
  });
  std::vector<Tensor> rows = fixed_tensors(spec_, per_record ? 1 : u.records, sequence_length_);
  int64_t good = 0;
  tensorflow::SequenceExample ex;  // an Example's bytes read as one: its features the context
  std::string_view body;
  for (int64_t r = 0; r < u.records; ++r) {
    const uint64_t at = u.begin + reader.offset();
    Result<bool> more = reader.next(&body);
    Status bad;
    if (!more.ok()) {
      bad = more.status();
      if (reader.offset() == at - u.begin) return bad;  // the index found this frame whole
    } else if (!*more) {
      return runtime::data_loss(f.path, ": record at byte ", at, " is gone");
    } else if (!ex.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
      bad = runtime::data_loss(f.path, ": record at byte ", at,
                               " is not a tf.Example or tf.train.SequenceExample");
    } else {
      bad = fill(ex.context(), &ex.feature_lists(), spec_, sequence_length_, per_record ? 0 : good,
                 &rows)
                .with_context(f.path + ": record at byte " + std::to_string(at));
    }
    if (!bad.ok()) {
      if (!options_.skip_bad_records) return bad;
      ++*skipped;
      continue;
    }
    if (per_record) {
      actors::Chunk chunk;
      chunk.components = std::move(rows);
      out->push_back(std::move(chunk));
      rows = fixed_tensors(spec_, 1, sequence_length_);
    }
    ++good;
  }
  if (per_record || good == 0) return runtime::ok_status();
  actors::Chunk chunk;
  for (Tensor& t : rows) {
    chunk.components.push_back(good == u.records ? std::move(t) : runtime::slice_rows(t, 0, good));
  }
  out->push_back(std::move(chunk));
  return runtime::ok_status();
}

Result<std::vector<Tensor>> parse_examples(const std::vector<std::string_view>& serialized,
                                           const FeatureSpecs& spec) {
  for (const auto& [name, s] : spec) {
    TROUPE_RETURN_IF_ERROR(check_spec(name, s));
    if (s.kind == FeatureSpec::Kind::kVarLen) {
      return runtime::invalid_argument("parse_examples: feature '", name,
                                       "' is VarLen; a Dataset batches those");
    }
    if (s.kind == FeatureSpec::Kind::kSequence) {
      return runtime::invalid_argument("parse_examples: feature '", name,
                                       "' is a feature list: parse_sequence_examples reads those");
    }
  }
  std::vector<Tensor> out = fixed_tensors(spec, static_cast<int64_t>(serialized.size()), 0);
  tensorflow::Example ex;
  for (size_t r = 0; r < serialized.size(); ++r) {
    if (!ex.ParseFromArray(serialized[r].data(), static_cast<int>(serialized[r].size()))) {
      return runtime::invalid_argument("parse_examples: example ", r, " is not a tf.Example");
    }
    TROUPE_RETURN_IF_ERROR(fill(ex.features(), nullptr, spec, 0, static_cast<int64_t>(r), &out)
                               .with_context("parse_examples: example " + std::to_string(r)));
  }
  return out;
}

Result<std::vector<Tensor>> parse_sequence_examples(const std::vector<std::string_view>& serialized,
                                                    const FeatureSpecs& spec,
                                                    int64_t sequence_length,
                                                    std::vector<int64_t>* lengths) {
  if (sequence_length < 1) {
    return runtime::invalid_argument("parse_sequence_examples: sequence_length ", sequence_length,
                                     " is not positive");
  }
  for (const auto& [name, s] : spec) {
    TROUPE_RETURN_IF_ERROR(check_spec(name, s));
    if (s.kind == FeatureSpec::Kind::kVarLen) {
      return runtime::invalid_argument("parse_sequence_examples: feature '", name,
                                       "' is VarLen; a Dataset batches those");
    }
  }
  std::vector<Tensor> out =
      fixed_tensors(spec, static_cast<int64_t>(serialized.size()), sequence_length);
  if (lengths) lengths->assign(serialized.size(), 0);
  tensorflow::SequenceExample ex;
  for (size_t r = 0; r < serialized.size(); ++r) {
    if (!ex.ParseFromArray(serialized[r].data(), static_cast<int>(serialized[r].size()))) {
      return runtime::invalid_argument("parse_sequence_examples: example ", r,
                                       " is not a tf.train.SequenceExample");
    }
    TROUPE_RETURN_IF_ERROR(
        fill(ex.context(), &ex.feature_lists(), spec, sequence_length, static_cast<int64_t>(r),
             &out, lengths ? &(*lengths)[r] : nullptr)
            .with_context("parse_sequence_examples: example " + std::to_string(r)));
  }
  return out;
}

namespace {

// Bytes to a file, through zlib when compressed.
class Sink {
 public:
  Sink(std::FILE* f, Compression c) : f_(f), c_(c) {
    if (c_ != Compression::kNone) {
      ok_ = deflateInit2(&z_, Z_DEFAULT_COMPRESSION, Z_DEFLATED, window_bits(c_), 8,
                         Z_DEFAULT_STRATEGY) == Z_OK;
      started_ = ok_;
    }
  }
  ~Sink() {
    if (started_) deflateEnd(&z_);
  }
  void write(std::string_view bytes) { pump(bytes, Z_NO_FLUSH); }
  bool finish() {
    pump({}, Z_FINISH);
    return ok_;
  }

 private:
  void pump(std::string_view bytes, int flush) {
    if (!ok_) return;
    if (c_ == Compression::kNone) {
      // Nothing to write (finish()) is no call: fwrite's buffer must not be null.
      ok_ = bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), f_) == bytes.size();
      return;
    }
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    z_.avail_in = static_cast<uInt>(bytes.size());
    char buf[1 << 16];
    int rc = Z_OK;
    do {
      z_.next_out = reinterpret_cast<Bytef*>(buf);
      z_.avail_out = sizeof buf;
      rc = deflate(&z_, flush);
      const size_t n = sizeof buf - z_.avail_out;
      if (rc == Z_STREAM_ERROR || std::fwrite(buf, 1, n, f_) != n) {
        ok_ = false;
        return;
      }
    } while (z_.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
  }
  std::FILE* f_;
  Compression c_;
  z_stream z_{};
  bool ok_ = true, started_ = false;
};

// Element `e` of `t` as a feature's value.
void add_value(const Tensor& t, int64_t e, tensorflow::Feature* f) {
  switch (t.dtype()) {
    case DType::kFloat32:
      f->mutable_float_list()->add_value(t.data<float>()[e]);
      break;
    case DType::kFloat64:
      f->mutable_float_list()->add_value(static_cast<float>(t.data<double>()[e]));
      break;
    case DType::kInt32:
      f->mutable_int64_list()->add_value(t.data<int32_t>()[e]);
      break;
    case DType::kInt64:
      f->mutable_int64_list()->add_value(t.data<int64_t>()[e]);
      break;
    case DType::kUInt8:
      f->mutable_int64_list()->add_value(t.data<uint8_t>()[e]);
      break;
    case DType::kBool:
      f->mutable_int64_list()->add_value(t.data<bool>()[e] ? 1 : 0);
      break;
    case DType::kString:
      f->mutable_bytes_list()->add_value(t.data<std::string>()[e]);
      break;
    default:
      break;
  }
}

}  // namespace

Status write_tfrecord(const actors::Source& source, const std::string& path,
                      Compression compression) {
  const Compression c = resolve(compression, path);
  const std::string tmp = path + ".partial";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return runtime::failed_precondition("cannot write ", tmp);
  const std::vector<std::string> names = source.components();
  Status status;
  {
    Sink sink(f, c);
    tensorflow::Example ex;
    std::string serialized, frames;
    for (int64_t u = 0; u < source.num_units() && status.ok(); ++u) {
      std::vector<actors::Chunk> chunks;
      int64_t skipped = 0;
      status = source.read(u, &chunks, &skipped);
      for (const actors::Chunk& chunk : chunks) {
        for (int64_t row = chunk.first(); row < chunk.last() && status.ok(); ++row) {
          ex.Clear();
          auto* features = ex.mutable_features()->mutable_feature();
          for (size_t i = 0; i < names.size(); ++i) {
            const Tensor& t = chunk.components[i];
            const int64_t per = t.dim(0) > 0 ? t.num_elements() / t.dim(0) : 0;
            tensorflow::Feature& feature = (*features)[names[i]];
            if (t.dtype() == DType::kString) feature.mutable_bytes_list();
            for (int64_t e = row * per; e < (row + 1) * per; ++e) add_value(t, e, &feature);
          }
          serialized.clear();
          if (!ex.SerializeToString(&serialized)) {
            status = runtime::internal_error("cannot serialize a tf.Example for ", path);
            break;
          }
          runtime::append_record_frame(serialized.data(), serialized.size(), &frames);
        }
        sink.write(frames);
        frames.clear();
      }
    }
    if (status.ok() && !sink.finish()) status = runtime::internal_error("cannot write ", tmp);
  }
  const bool closed = std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  std::fclose(f);
  if (status.ok() && (!closed || std::rename(tmp.c_str(), path.c_str()) != 0)) {
    status = runtime::internal_error("cannot write ", path);
  }
  if (!status.ok()) std::remove(tmp.c_str());
  return status;
}

}  // namespace troupe::estimators::input
