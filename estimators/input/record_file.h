// troupe record files: a dataset converted once into Cap'n Proto chunks of examples, framed as
// TFRecords (length, masked CRC-32C of the length, data, masked CRC-32C of the data), the
// fastest thing for a runner to read: no parsing, one copy per chunk.
//
//   auto csv = CsvSource::open("big.csv");
//   TROUPE_RETURN_IF_ERROR(write_record_file(**csv, "big.trec"));    // one record per unit
//   auto src = RecordSource::open("big.trec");                       // Result<shared_ptr>
//
// A truncated file or a record whose checksum fails is an error naming the file and the byte
// offset of the record; with skip_bad_records a record with a bad checksum is counted and
// skipped. After a bad length (or a frame running past the end) the reader resynchronises on
// the next byte where a frame's length and its checksum hold (runtime::RecordReader::resync),
// so the records after it are read; the damaged stretch is one more unit, which reads as one
// skipped record each epoch (the record whose length was damaged), so the runner's `skipped`
// count shows it, and a warning names its bytes at open.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "actors/queue_runner.h"
#include "estimators/input/mapped_file.h"

namespace troupe::estimators::input {

// Reads every unit of `source` in order and writes its chunks as records, atomically.
runtime::Status write_record_file(const actors::Source& source, const std::string& path);

class RecordSource : public actors::Source {
 public:
  // `pattern`: a path or a glob; components are named by the first record.
  static runtime::Result<std::shared_ptr<RecordSource>> open(const std::string& pattern,
                                                             bool skip_bad_records = false);
  std::string name() const override { return "records " + pattern_; }
  std::vector<std::string> components() const override { return names_; }
  int64_t num_units() const override { return static_cast<int64_t>(records_.size()); }
  runtime::Status read(int64_t unit, std::vector<actors::Chunk>* out,
                       int64_t* skipped) const override;
  // Stretches of bytes in which no record could be located (after a bad length).
  int64_t damaged_stretches() const { return damaged_; }

 private:
  runtime::Status read_unit(int64_t unit, std::vector<actors::Chunk>* out, int64_t* skipped) const;
  struct Record {
    int file = 0;
    uint64_t offset = 0;   // of the frame
    uint64_t size = 0;     // of the frame
    bool damaged = false;  // `size` bytes from `offset` in which no record could be located
  };
  RecordSource() = default;
  runtime::Status decode(const Record& r, std::vector<std::string>* names,
                         actors::Chunk* chunk) const;
  std::string pattern_;
  bool skip_bad_records_ = false;
  std::vector<std::shared_ptr<const MappedFile>> files_;
  std::vector<Record> records_;
  std::vector<std::string> names_;
  int64_t damaged_ = 0;
};

}  // namespace troupe::estimators::input
