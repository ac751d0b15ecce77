// CSV files as a dataset: a header naming the columns, types inferred from the first rows or
// declared, defaults for missing values, RFC 4180 quoting (delimiters, doubled quotes and line
// breaks inside quotes), and a glob of shards read in parallel. Each selected column becomes a
// component of rank 1: int64, float32 or string.
//
//   CsvOptions o;  o.types = {{"label", DType::kInt64}};  o.defaults = {{"age", "0"}};
//   auto src = CsvSource::open("/data/train-*.csv", o);   // Result<shared_ptr<CsvSource>>
//   src->components();                                    // {"age", "income", "label"}
//
// A column may hold a sequence an example (CsvOptions::sequences: "3 1 4 1 5").
// A row with the wrong number of fields, a value that is not of its column's type or a missing
// value with no default is an error naming the file and line, or, with skip_bad_records, is
// counted and skipped. Files are memory-mapped; opening scans them once for row boundaries.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/queue_runner.h"
#include "estimators/input/mapped_file.h"
#include "runtime/dtype.h"

namespace troupe::estimators::input {

struct CsvOptions {
  char delimiter = ',';
  bool header = true;                           // the first line names the columns
  std::vector<std::string> column_names;        // instead of a header (or to rename it)
  std::map<std::string, runtime::DType> types;  // declared; others inferred
  std::map<std::string, std::string> defaults;  // for empty fields; without one, empty is bad
  std::vector<std::string> select;              // components, in this order (empty: all)
  int64_t infer_rows = 1000;
  int64_t rows_per_unit = 4096;
  bool skip_bad_records = false;
  // Columns whose field holds a sequence: values separated by `value_delimiter` (runs of it
  // count once), of the type the values have; an empty field is an empty sequence. Each is a
  // component of varying length (var_len()), which a dataset batches as a sparse tensor.
  std::vector<std::string> sequences;
  char value_delimiter = ' ';
};

class CsvSource : public actors::Source {
 public:
  // `pattern`: a path or a glob (several separated by commas). No file, an unreadable file or
  // headers that differ between files is an error naming the file.
  static runtime::Result<std::shared_ptr<CsvSource>> open(const std::string& pattern,
                                                          CsvOptions options = {});

  std::string name() const override { return "csv " + pattern_; }
  std::vector<std::string> components() const override;
  int64_t num_units() const override { return static_cast<int64_t>(units_.size()); }
  runtime::Status read(int64_t unit, std::vector<actors::Chunk>* out,
                       int64_t* skipped) const override;
  runtime::DType type_of(const std::string& column) const;
  // The selected sequence columns (CsvOptions::sequences).
  std::vector<std::string> var_len() const;
  const std::vector<std::string>& columns() const { return columns_; }

 private:
  runtime::Status read_unit(int64_t unit, std::vector<actors::Chunk>* out, int64_t* skipped) const;
  struct Unit {
    int file = 0;
    size_t begin = 0, end = 0;  // bytes
    int64_t line = 0;           // of the first row, from 1
    int64_t rows = 0;
  };
  CsvSource() = default;
  runtime::Status scan(int file, size_t body);
  runtime::Status infer_types();

  std::string pattern_;
  CsvOptions options_;
  std::vector<std::shared_ptr<const MappedFile>> files_;
  std::vector<Unit> units_;
  std::vector<std::string> columns_;   // all, in file order
  std::vector<runtime::DType> types_;  // per column
  std::vector<int> selected_;          // column index per component
  std::vector<bool> sequence_;         // per column
};

// Splits one CSV record starting at `p` (before `end`) into `fields`, unquoting; returns where
// the next record starts and counts the line breaks consumed in `lines`. A quote opens a quoted
// field only at the start of a field (`5"` is the text 5"); `open_quote` says whether the data
// ended inside one. The one parser both scanning and reading use.
const char* split_csv_record(const char* p, const char* end, char delimiter,
                             std::vector<std::string>* fields, int64_t* lines,
                             bool* open_quote = nullptr);

}  // namespace troupe::estimators::input
