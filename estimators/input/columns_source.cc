#include "estimators/input/columns_source.h"

#include <algorithm>

namespace troupe::estimators::input {

runtime::Result<std::shared_ptr<ColumnsSource>> ColumnsSource::create(
    std::string name, std::vector<std::pair<std::string, runtime::Tensor>> columns,
    int64_t rows_per_unit) {
  if (columns.empty()) return runtime::invalid_argument(name, ": no columns");
  std::shared_ptr<ColumnsSource> s(new ColumnsSource());
  s->name_ = std::move(name);
  s->rows_per_unit_ = std::max<int64_t>(1, rows_per_unit);
  for (auto& [column, t] : columns) {
    if (!t.valid() || t.rank() < 1) {
      return runtime::invalid_argument(s->name_, ": column '", column,
                                       "' needs the examples along dimension 0");
    }
    if (!s->columns_.empty() && t.dim(0) != s->rows_) {
      return runtime::invalid_argument(s->name_, ": column '", column, "' has ", t.dim(0),
                                       " examples where '", s->names_[0], "' has ", s->rows_);
    }
    s->rows_ = t.dim(0);
    s->names_.push_back(column);
    s->columns_.push_back(std::move(t));
  }
  return s;
}

int64_t ColumnsSource::num_units() const { return (rows_ + rows_per_unit_ - 1) / rows_per_unit_; }

runtime::Status ColumnsSource::read(int64_t unit, std::vector<actors::Chunk>* out, int64_t*) const {
  actors::Chunk c;
  c.components = columns_;
  c.begin = unit * rows_per_unit_;
  c.end = std::min(rows_, c.begin + rows_per_unit_);
  out->push_back(std::move(c));
  return runtime::ok_status();
}

}  // namespace troupe::estimators::input
