// TFRecord framing: the length-prefixed, CRC-32C-checked records of TensorBoard event files and
// of troupe's record files. Each frame is
//   uint64 length | uint32 masked_crc32c(length) | data[length] | uint32 masked_crc32c(data)
// little-endian, as TF's core/lib/io/record_writer.cc writes it.
//
//   auto w = RecordWriter::open(dir + "/events.out.tfevents.1.host");   // Result<RecordWriter>
//   TROUPE_RETURN_IF_ERROR(w->write(bytes.data(), bytes.size()));
//   TROUPE_RETURN_IF_ERROR(w->flush());
//
//   RecordReader r(file_bytes.data(), file_bytes.size(), path);
//   std::string_view rec;
//   while (true) { auto more = r.next(&rec); if (!more.ok()) ...; if (!*more) break; use(rec); }
//
// Errors name the file and the byte offset of the bad frame. Not thread-safe per object.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/status.h"

namespace troupe::runtime {

// Appends one frame holding `data` to `out`.
void append_record_frame(const void* data, size_t size, std::string* out);

class RecordWriter {
 public:
  // Creates (or truncates) `path`; with `append`, adds to what is there.
  static Result<RecordWriter> open(const std::string& path, bool append = false);
  RecordWriter(RecordWriter&& o) noexcept;
  RecordWriter& operator=(RecordWriter&& o) noexcept;
  ~RecordWriter();

  Status write(const void* data, size_t size);
  // Hands buffered frames to the OS; sync() also waits until they are on disk (fsync).
  Status flush();
  Status sync();
  Status close();
  const std::string& path() const { return path_; }

 private:
  RecordWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
  std::string buffer_;
};

class RecordReader {
 public:
  // Reads frames from memory the caller keeps alive; `name` appears in errors.
  RecordReader(const void* data, size_t size, std::string name)
      : data_(static_cast<const char*>(data)), size_(size), name_(std::move(name)) {}
  // True with the next record in `record` (pointing into the data); false at a clean end;
  // DataLoss for a truncated frame or a CRC mismatch, naming the offset.
  Result<bool> next(std::string_view* record);
  // Where the next frame starts.
  uint64_t offset() const { return offset_; }
  // After next() failed on a frame whose length cannot be trusted (its checksum fails, or it
  // runs past the end): moves to the next byte at which a frame's length and its checksum hold
  // and the frame fits in the data, or to the end, and returns that offset. A frame found so
  // could be a false match only with a 2^-32 chance per byte, and its data checksum still
  // decides whether its record is good.
  uint64_t resync();

 private:
  const char* data_;
  size_t size_;
  std::string name_;
  uint64_t offset_ = 0;
};

// A frame as an index of a file holds it, or a stretch of bytes in which none could be found.
struct FrameSpan {
  uint64_t offset = 0, size = 0;
  bool damaged = false;
};
// Where the frames of `data` lie, in order, for a reader that reads them later (which checks
// their data checksums then: a frame whose data fails is still a frame here). A frame whose
// length cannot be trusted (its checksum fails, or it runs past the end) is DataLoss naming
// `name` and the offset, or, with `skip_damaged`, a damaged span up to the next frame found by
// its own checksum (RecordReader::resync), logged with the bytes skipped.
Result<std::vector<FrameSpan>> index_frames(std::string_view data, const std::string& name,
                                            bool skip_damaged);

// Reads a whole file into `out`; NotFound naming the path if it cannot be opened.
Status read_file(const std::string& path, std::string* out);
// Writes `data` to `path` atomically: a temporary file beside it, fsync, rename, fsync of the
// directory. A crash at any moment leaves either the old file or the new one, never a mix.
Status write_file_atomic(const std::string& path, std::string_view data);

}  // namespace troupe::runtime
