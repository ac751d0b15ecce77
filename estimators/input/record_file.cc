#include "estimators/input/record_file.h"

#include <capnp/message.h>

#include <cstdio>
#include <cstring>

#include "runtime/record_io.h"
#include "runtime/tensor_wire.h"
#include "schema/record.capnp.h"

namespace troupe::estimators::input {

using runtime::Result;
using runtime::Status;
using runtime::Tensor;

namespace {

Status decode_record(std::string_view body, std::vector<std::string>* names, actors::Chunk* chunk) {
  auto bytes = std::make_shared<std::vector<char>>(body.begin(), body.end());
  return runtime::read_blob(
      bytes, [&](capnp::MessageReader& m, std::shared_ptr<const void> keep) -> Status {
        auto rec = m.getRoot<schema::Record>();
        if (rec.getNames().size() != rec.getTensors().size()) {
          return runtime::data_loss(rec.getNames().size(), " names for ", rec.getTensors().size(),
                                    " tensors");
        }
        names->clear();
        for (auto n : rec.getNames()) names->push_back(n.cStr());
        for (auto t : rec.getTensors()) {
          TROUPE_ASSIGN_OR_RETURN(Tensor tensor, runtime::read_tensor(t, keep));
          chunk->components.push_back(std::move(tensor));
        }
        return actors::check_chunk(*chunk);
      });
}

}  // namespace

Status write_record_file(const actors::Source& source, const std::string& path) {
  const std::string tmp = path + ".partial";
  TROUPE_ASSIGN_OR_RETURN(runtime::RecordWriter w, runtime::RecordWriter::open(tmp));
  const std::vector<std::string> names = source.components();
  for (int64_t u = 0; u < source.num_units(); ++u) {
    std::vector<actors::Chunk> chunks;
    int64_t skipped = 0;
    TROUPE_RETURN_IF_ERROR(source.read(u, &chunks, &skipped));
    for (actors::Chunk& c : chunks) {
      // Write only the chunk's rows, compactly.
      TROUPE_ASSIGN_OR_RETURN(
          std::vector<Tensor> rows,
          actors::stack_rows(actors::rows_of(std::make_shared<const actors::Chunk>(c)), false));
      capnp::MallocMessageBuilder m;
      auto rec = m.initRoot<schema::Record>();
      auto n = rec.initNames(static_cast<unsigned>(names.size()));
      for (size_t i = 0; i < names.size(); ++i) n.set(static_cast<unsigned>(i), names[i]);
      auto ts = rec.initTensors(static_cast<unsigned>(rows.size()));
      for (size_t i = 0; i < rows.size(); ++i) {
        TROUPE_RETURN_IF_ERROR(
            runtime::write_tensor(rows[i], ts[static_cast<unsigned>(i)], m.getOrphanage()));
      }
      std::vector<char> blob;
      TROUPE_RETURN_IF_ERROR(runtime::write_message(m, &blob));
      TROUPE_RETURN_IF_ERROR(w.write(blob.data(), blob.size()));
    }
  }
  TROUPE_RETURN_IF_ERROR(w.sync());
  TROUPE_RETURN_IF_ERROR(w.close());
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return runtime::internal_error("cannot rename ", tmp, " to ", path);
  }
  return runtime::ok_status();
}

Result<std::shared_ptr<RecordSource>> RecordSource::open(const std::string& pattern,
                                                         bool skip_bad_records) {
  std::shared_ptr<RecordSource> s(new RecordSource());
  s->pattern_ = pattern;
  s->skip_bad_records_ = skip_bad_records;
  TROUPE_ASSIGN_OR_RETURN(std::vector<std::string> paths, expand_glob(pattern));
  for (const std::string& path : paths) {
    TROUPE_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
    // Data checksums are checked when a record is read, so that a bad record fails (or is
    // skipped) at the point of reading, like any other bad record.
    TROUPE_ASSIGN_OR_RETURN(auto frames,
                            runtime::index_frames(file->bytes(), path, skip_bad_records));
    for (const runtime::FrameSpan& f : frames) {
      s->damaged_ += f.damaged ? 1 : 0;
      s->records_.push_back(
          Record{static_cast<int>(s->files_.size()), f.offset, f.size, f.damaged});
    }
    s->files_.push_back(std::move(file));
  }
  for (const Record& r : s->records_) {
    if (r.damaged) continue;
    actors::Chunk chunk;
    Status st = s->decode(r, &s->names_, &chunk);
    if (st.ok()) break;
    if (!skip_bad_records) return st;
  }
  for (const auto& file : s->files_) TROUPE_RETURN_IF_ERROR(file->status());
  return s;
}

Status RecordSource::decode(const Record& r, std::vector<std::string>* names,
                            actors::Chunk* chunk) const {
  const MappedFile& f = *files_[r.file];
  runtime::RecordReader reader(f.bytes().data() + r.offset, r.size, f.path());
  std::string_view body;
  Result<bool> more = reader.next(&body);
  if (!more.ok()) {
    return runtime::data_loss(f.path(), ": record at byte ", r.offset,
                              " is corrupt (checksum mismatch)");
  }
  return decode_record(body, names, chunk)
      .with_context(f.path() + ": record at byte " + std::to_string(r.offset));
}

// The mapping may have been cut under the parse: that, not what the parse made of the zeros
// it then read, is the error.
Status RecordSource::read(int64_t unit, std::vector<actors::Chunk>* out, int64_t* skipped) const {
  Status s = read_unit(unit, out, skipped);
  TROUPE_RETURN_IF_ERROR(files_[records_[static_cast<size_t>(unit)].file]->status());
  return s;
}

Status RecordSource::read_unit(int64_t unit, std::vector<actors::Chunk>* out,
                               int64_t* skipped) const {
  const Record& r = records_[static_cast<size_t>(unit)];
  if (r.damaged) {
    ++*skipped;
    return runtime::ok_status();
  }
  actors::Chunk chunk;
  std::vector<std::string> names;
  Status bad = decode(r, &names, &chunk);
  if (bad.ok() && names != names_) {
    bad = runtime::data_loss(files_[r.file]->path(), ": record at byte ", r.offset,
                             " has other components than the first record");
  }
  if (bad.ok()) {
    out->push_back(std::move(chunk));
    return runtime::ok_status();
  }
  if (!skip_bad_records_) return bad;
  ++*skipped;
  return runtime::ok_status();
}

}  // namespace troupe::estimators::input
