// libsvm / svmlight files (`label index:value index:value ... # comment`), the sparse format of
// wide linear models. Sparse by default: each example gives "label" (float32), "indices" (int64,
// zero-based) and "values" (float32) of its own length, for a padding queue to batch. Dense, it
// gives "label" and "features" (float32 [num_features]).
//
//   auto src = LibsvmSource::open("train.svm", {.dense = true, .num_features = 123});
//
// A line that does not parse, an index below the base or at/over num_features is an error
// naming the file and line (or skipped and counted, with skip_bad_records).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "actors/queue_runner.h"
#include "estimators/input/mapped_file.h"

namespace troupe::estimators::input {

struct LibsvmOptions {
  bool dense = false;
  int64_t num_features = 0;  // dense: 0 infers it from the largest index in the files
  bool zero_based = false;   // svmlight counts features from 1
  // "label" as text ("1", "-1", "0.5": the number as %g writes it): class names, for a
  // classifier's label vocabulary, whatever numbers a file's classes are.
  bool text_labels = false;
  int64_t rows_per_unit = 4096;
  bool skip_bad_records = false;
};

class LibsvmSource : public actors::Source {
 public:
  static runtime::Result<std::shared_ptr<LibsvmSource>> open(const std::string& pattern,
                                                             LibsvmOptions options = {});
  std::string name() const override { return "libsvm " + pattern_; }
  std::vector<std::string> components() const override;
  int64_t num_units() const override { return static_cast<int64_t>(units_.size()); }
  runtime::Status read(int64_t unit, std::vector<actors::Chunk>* out,
                       int64_t* skipped) const override;
  int64_t num_features() const { return options_.num_features; }

 private:
  runtime::Status read_unit(int64_t unit, std::vector<actors::Chunk>* out, int64_t* skipped) const;
  struct Unit {
    int file = 0;
    size_t begin = 0, end = 0;
    int64_t line = 0;
    int64_t rows = 0;
  };
  LibsvmSource() = default;
  std::string pattern_;
  LibsvmOptions options_;
  std::vector<std::shared_ptr<const MappedFile>> files_;
  std::vector<Unit> units_;
};

}  // namespace troupe::estimators::input
