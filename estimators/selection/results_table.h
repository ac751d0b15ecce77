// A table of results (a search's cv_results, cross-validation scores) that a user prints or
// writes as CSV: named columns, a row of text cells each.
//
//   ResultsTable t({"params", "mean_test_score"});
//   t.add_row({"hidden_units=64", "0.8712"});
//   std::puts(t.format().c_str());                        // aligned columns
//   TROUPE_RETURN_IF_ERROR(t.write_csv("results.csv"));   // RFC 4180 quoting
#pragma once

#include <string>
#include <vector>

#include "runtime/status.h"

namespace troupe::estimators {

class ResultsTable {
 public:
  ResultsTable() = default;
  explicit ResultsTable(std::vector<std::string> columns) : columns_(std::move(columns)) {}

  // A row with one cell per column (missing cells are empty, extra ones dropped).
  void add_row(std::vector<std::string> cells);
  const std::vector<std::string>& columns() const { return columns_; }
  const std::vector<std::vector<std::string>>& rows() const { return rows_; }
  // The cell of `column` in row `row`; empty when there is no such column.
  std::string cell(size_t row, const std::string& column) const;
  void rename_column(const std::string& from, const std::string& to);

  std::string format() const;
  std::string to_csv() const;
  runtime::Status write_csv(const std::string& path) const;

 private:
  std::vector<std::string> columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace troupe::estimators
