#include "estimators/input/tfrecord_source.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>

#include "runtime/log.h"
#include "runtime/record_io.h"

namespace troupe::estimators::input {

using runtime::DType;
using runtime::Result;
using runtime::Status;
using runtime::Tensor;

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
    TROUPE_ASSIGN_OR_RETURN(
        s->spec_, runtime::infer_feature_specs(first, "tfrecord " + pattern, &most_steps));
    std::string said;
    for (const auto& [name, f] : s->spec_) {
      said += (said.empty() ? "" : ", ") + name + ": " + to_string(f);
    }
    runtime::log_info("tfrecord ", pattern, ": features inferred from ", first.size(),
                      " records: ", said);
  } else {
    // A SparseFeature is batched as its two VarLen features (runtime/example.h).
    TROUPE_ASSIGN_OR_RETURN(s->spec_, runtime::split_sparse_features(options.features));
    if (has_sequences(s->spec_) && options.sequence_length == 0 && !first.empty()) {
      TROUPE_RETURN_IF_ERROR(
          runtime::infer_feature_specs(first, "tfrecord " + pattern, &most_steps).status());
    }
  }
  for (const auto& [name, f] : s->spec_)
    TROUPE_RETURN_IF_ERROR(runtime::check_feature_spec(name, f));
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
  std::vector<Tensor> rows =
      runtime::example_batch(spec_, per_record ? 1 : u.records, sequence_length_);
  int64_t good = 0;
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
    } else {
      bad = runtime::parse_example_into(body, spec_, sequence_length_, per_record ? 0 : good, &rows)
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
      rows = runtime::example_batch(spec_, 1, sequence_length_);
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
    std::string serialized, frames;
    for (int64_t u = 0; u < source.num_units() && status.ok(); ++u) {
      std::vector<actors::Chunk> chunks;
      int64_t skipped = 0;
      status = source.read(u, &chunks, &skipped);
      for (const actors::Chunk& chunk : chunks) {
        for (int64_t row = chunk.first(); row < chunk.last() && status.ok(); ++row) {
          status =
              runtime::encode_example(names, chunk.components, row, &serialized).with_context(path);
          if (!status.ok()) break;
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
