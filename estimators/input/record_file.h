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
// skipped. A bad length ends the readable part of a file (nothing after it can be located):
// with skip_bad_records that unreadable tail is one more unit, which reads as one skipped
// record each epoch, so the runner's `skipped` count shows it, and a warning names it at open.
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
  // Records that could not be located (after a bad length); counted once, at open.
  int64_t unreadable_tail_records() const { return bad_tail_; }

 private:
  runtime::Status read_unit(int64_t unit, std::vector<actors::Chunk>* out, int64_t* skipped) const;
  struct Record {
    int file = 0;
    uint64_t offset = 0;  // of the frame
    uint64_t size = 0;    // of the frame
    bool tail = false;    // the unreadable rest of the file, from `offset` on
  };
  RecordSource() = default;
  runtime::Status decode(const Record& r, std::vector<std::string>* names,
                         actors::Chunk* chunk) const;
  std::string pattern_;
  bool skip_bad_records_ = false;
  std::vector<std::shared_ptr<const MappedFile>> files_;
  std::vector<Record> records_;
  std::vector<std::string> names_;
  int64_t bad_tail_ = 0;
};

}  // namespace troupe::estimators::input
