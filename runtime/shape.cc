#include "runtime/shape.h"

#include <algorithm>
#include <ostream>

namespace troupe::runtime {

Shape Shape::unknown() {
  Shape s;
  s.rank_known_ = false;
  return s;
}

bool Shape::fully_defined() const {
  if (!rank_known_) return false;
  return std::all_of(dims_.begin(), dims_.end(), [](int64_t d) { return d >= 0; });
}

int64_t Shape::num_elements() const {
  if (!fully_defined()) return -1;
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

bool Shape::checked_num_elements(int64_t* out) const {
  int64_t n = 1;
  for (int64_t d : dims_) {
    if (d < kUnknownDim) return false;
    if (d == kUnknownDim) continue;
    if (__builtin_mul_overflow(n, d, &n)) return false;
  }
  *out = n;
  return true;
}

bool Shape::compatible_with(const Shape& other) const {
  if (!rank_known_ || !other.rank_known_) return true;
  if (rank() != other.rank()) return false;
  for (int i = 0; i < rank(); ++i) {
    if (dims_[i] >= 0 && other.dims_[i] >= 0 && dims_[i] != other.dims_[i]) return false;
  }
  return true;
}

bool Shape::canonical_axis(int64_t axis, int* out) const {
  int64_t r = rank();
  if (axis < -r || axis >= r) return false;
  *out = static_cast<int>(axis < 0 ? axis + r : axis);
  return true;
}

std::string Shape::to_string() const {
  if (!rank_known_) return "<unknown>";
  std::string s = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ",";
    s += dims_[i] < 0 ? std::string("?") : std::to_string(dims_[i]);
  }
  return s + "]";
}

bool broadcast_shapes(const Shape& a, const Shape& b, Shape* out) {
  if (!a.rank_known() || !b.rank_known()) {
    *out = Shape::unknown();
    return true;
  }
  int r = std::max(a.rank(), b.rank());
  std::vector<int64_t> dims(r);
  for (int i = 0; i < r; ++i) {
    int ia = a.rank() - r + i, ib = b.rank() - r + i;
    int64_t da = ia >= 0 ? a.dim(ia) : 1;
    int64_t db = ib >= 0 ? b.dim(ib) : 1;
    if (da == 1) {
      dims[i] = db;
    } else if (db == 1) {
      dims[i] = da;
    } else if (da < 0 || db < 0) {
      dims[i] = da < 0 ? db : da;  // an unknown dim must match the known one, or be 1
      if (da < 0 && db < 0) dims[i] = -1;
    } else if (da == db) {
      dims[i] = da;
    } else {
      return false;
    }
  }
  *out = Shape(std::move(dims));
  return true;
}

std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << s.to_string(); }

}  // namespace troupe::runtime
