// Shape: dimensions of a tensor, where -1 marks a dimension not known until run time (the batch).
//
//   Shape s{-1, 784};             // a batch of 784-vectors
//   s.rank();                     // 2
//   s.fully_defined();            // false
//   s.to_string();                // "[?,784]"
//   Shape::unknown();             // rank not known either
//
// A value type; thread-safe to share as const.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace troupe::runtime {

class Shape {
 public:
  static constexpr int64_t kUnknownDim = -1;

  Shape() = default;  // a scalar
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}
  static Shape unknown();

  bool rank_known() const { return rank_known_; }
  int rank() const { return static_cast<int>(dims_.size()); }  // -1 meaningless if !rank_known
  int64_t dim(int i) const { return dims_[i]; }
  int64_t& dim(int i) { return dims_[i]; }
  const std::vector<int64_t>& dims() const { return dims_; }
  bool fully_defined() const;
  // Product of the dimensions; -1 when any is unknown. Callers with a shape from outside check
  // it first with checked_num_elements() or check_tensor_size() (tensor.h): this one may wrap.
  int64_t num_elements() const;
  // The product of the known dimensions (1 for none) in *out; false when a dimension is below
  // -1 or the product does not fit in int64.
  bool checked_num_elements(int64_t* out) const;
  bool compatible_with(const Shape& other) const;
  // Resolves a possibly negative axis against this rank; false when out of range.
  bool canonical_axis(int64_t axis, int* out) const;

  std::string to_string() const;
  bool operator==(const Shape& o) const { return rank_known_ == o.rank_known_ && dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return !(*this == o); }

 private:
  std::vector<int64_t> dims_;
  bool rank_known_ = true;
};

// Numpy broadcasting of two shapes; unknown dims broadcast to unknown. False when incompatible.
bool broadcast_shapes(const Shape& a, const Shape& b, Shape* out);

std::ostream& operator<<(std::ostream& os, const Shape& s);

}  // namespace troupe::runtime
