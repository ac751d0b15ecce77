// Tensor: a shape, a dtype and a reference-counted, 64-byte-aligned buffer tagged with its device.
//
//   Tensor x = Tensor::from_vector<float>({2, 2}, {1, 2, 3, 4});
//   Tensor y = x;                        // shares the buffer: tensors are handles, never copied
//   Tensor z = x.reshaped(Shape{4});     // shares too
//   Tensor w = x.clone();                // a deep copy
//   float* p = x.data<float>();
//   Result<Tensor> t = Tensor::empty(DType::kFloat32, Shape{128, 784}, allocator);  //
//   uninitialized
//
// Copies of a Tensor share its buffer; writes through one are seen by all. Kernels write only
// into outputs they allocated, or into a buffer whose use_count() shows they hold it alone.
// A Tensor is not synchronised: share it across threads only as const.
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/device.h"
#include "runtime/dtype.h"
#include "runtime/shape.h"
#include "runtime/status.h"

namespace troupe::runtime {

// The bytes behind a tensor: owned (from an allocator), or borrowed from a keep-alive owner, such
// as the receive buffer a Cap'n Proto message was read from.
class Buffer {
 public:
  static std::shared_ptr<Buffer> allocate(Allocator* a,
                                          size_t bytes);  // nullptr when out of memory
  static std::shared_ptr<Buffer> strings(size_t n);
  static std::shared_ptr<Buffer> borrow(const void* data, size_t bytes,
                                        std::shared_ptr<const void> owner);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // Borrowed bytes belong to someone else (a receive buffer): never write into them.
  bool borrowed() const { return owner_ != nullptr; }

 private:
  // Only the factories above make buffers; the key lets them use make_shared (one allocation
  // for the buffer and its count, not two).
  struct Key {};

 public:
  explicit Buffer(Key) {}

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  size_t num_strings_ = 0;
  Allocator* allocator_ = nullptr;
  std::shared_ptr<Allocator> allocator_owner_;  // null for the process-wide allocator
  std::shared_ptr<const void> owner_;
};

// OK when a tensor of `dtype` and `shape` may exist: no dimension below -1, and the known
// dimensions' element count and bytes fit in int64 and within max_tensor_bytes(). The error
// names the dtype and shape; callers add what they came from.
Status check_tensor_size(DType dtype, const Shape& shape);

class Tensor {
 public:
  Tensor() = default;  // a null tensor: valid() is false
  // A zero-filled tensor from the CPU allocator. `shape` must be fully defined and checked:
  // a shape from outside goes through empty() or zeros(), which answer an error instead.
  Tensor(DType dtype, const Shape& shape);
  // Uninitialized, from `allocator`; an error for a shape check_tensor_size() refuses or when
  // the allocator's limit is reached.
  static Result<Tensor> empty(DType dtype, const Shape& shape, Allocator* allocator);
  // Zero-filled, from the CPU allocator, or the error of empty().
  static Result<Tensor> zeros(DType dtype, const Shape& shape);
  static Tensor borrowed(DType dtype, const Shape& shape, std::shared_ptr<Buffer> buffer);

  template <class T>
  static Tensor scalar(T value) {
    Tensor t(dtype_of<T>(), Shape{});
    t.data<T>()[0] = value;
    return t;
  }
  // `values.size()` must equal the shape's element count.
  template <class T>
  static Tensor from_vector(const Shape& shape, const std::vector<T>& values) {
    Tensor t(dtype_of<T>(), shape);
    assert(static_cast<int64_t>(values.size()) == t.num_elements());
    std::copy(values.begin(), values.end(), t.data<T>());
    return t;
  }

  bool valid() const { return buffer_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_.dim(i); }
  int64_t num_elements() const { return num_elements_; }
  size_t byte_size() const { return static_cast<size_t>(num_elements_) * dtype_size(dtype_); }
  DeviceId device() const { return device_; }
  void set_device(DeviceId d) { device_ = d; }

  template <class T>
  T* data() const {
    assert(dtype_of<T>() == dtype_);
    return static_cast<T*>(buffer_->data());
  }
  void* raw_data() const { return buffer_ ? buffer_->data() : nullptr; }
  template <class T>
  std::vector<T> to_vector() const {
    const T* p = data<T>();
    return std::vector<T>(p, p + num_elements_);
  }
  // The first element converted to double; for scalars of any numeric dtype.
  double scalar_as_double() const;
  // Sets every element to `value` converted to the dtype (nonzero is true); false for strings.
  bool fill(double value);

  // Shares the buffer; `shape` must have the same number of elements.
  Tensor reshaped(const Shape& shape) const;
  Tensor clone(Allocator* allocator = nullptr) const;
  bool shares_buffer_with(const Tensor& o) const { return buffer_ && buffer_ == o.buffer_; }
  long buffer_use_count() const { return buffer_.use_count(); }
  // True when this handle is the only one on a buffer it may write into.
  bool exclusively_owned() const { return buffer_.use_count() == 1 && !buffer_->borrowed(); }
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }

  // Up to `max_elements` values, e.g. "float32[2,2] {1, 2, 3, 4}".
  std::string debug_string(int max_elements = 16) const;

 private:
  DType dtype_ = DType::kInvalid;
  Shape shape_;
  int64_t num_elements_ = 0;
  std::shared_ptr<Buffer> buffer_;
  DeviceId device_;
};

// Rows [first, first + rows) of t along dimension 0, copied (rank >= 1, in range).
Tensor slice_rows(const Tensor& t, int64_t first, int64_t rows);
// The parts stacked along dimension 0 into a new tensor; they share the dtype and every
// dimension after the first.
Tensor concat_rows(const std::vector<Tensor>& parts);

}  // namespace troupe::runtime
