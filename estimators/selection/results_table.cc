#include "estimators/selection/results_table.h"

#include <algorithm>

#include "runtime/record_io.h"

namespace troupe::estimators {

namespace {

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string quoted = "\"";
  for (char c : s) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace

void ResultsTable::add_row(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

std::string ResultsTable::cell(size_t row, const std::string& column) const {
  auto it = std::find(columns_.begin(), columns_.end(), column);
  if (it == columns_.end() || row >= rows_.size()) return {};
  return rows_[row][static_cast<size_t>(it - columns_.begin())];
}

void ResultsTable::rename_column(const std::string& from, const std::string& to) {
  std::replace(columns_.begin(), columns_.end(), from, to);
}

std::string ResultsTable::format() const {
  std::vector<size_t> width(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) {
    width[c] = columns_[c].size();
    for (const auto& row : rows_) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t c = 0; c < cells.size(); ++c) {
      text += cells[c];
      if (c + 1 < cells.size()) text += std::string(width[c] - cells[c].size() + 2, ' ');
    }
    return text + "\n";
  };
  std::string text = line(columns_);
  for (const auto& row : rows_) text += line(row);
  return text;
}

std::string ResultsTable::to_csv() const {
  auto line = [](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t c = 0; c < cells.size(); ++c) text += (c ? "," : "") + csv_cell(cells[c]);
    return text + "\n";
  };
  std::string text = line(columns_);
  for (const auto& row : rows_) text += line(row);
  return text;
}

runtime::Status ResultsTable::write_csv(const std::string& path) const {
  return runtime::write_file_atomic(path, to_csv());
}

}  // namespace troupe::estimators
