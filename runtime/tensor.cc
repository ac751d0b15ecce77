#include "runtime/tensor.h"

#include <algorithm>
#include <sstream>

namespace troupe::runtime {

std::shared_ptr<Buffer> Buffer::allocate(Allocator* a, size_t bytes) {
  void* p = a->allocate(bytes);
  if (!p) return nullptr;
  auto b = std::make_shared<Buffer>(Key{});
  b->data_ = p;
  b->bytes_ = bytes;
  b->allocator_ = a;
  b->allocator_owner_ = a->weak_from_this().lock();
  return b;
}

std::shared_ptr<Buffer> Buffer::strings(size_t n) {
  auto b = std::make_shared<Buffer>(Key{});
  auto* s = new std::string[n == 0 ? 1 : n];
  b->data_ = s;
  b->num_strings_ = n == 0 ? 1 : n;
  b->bytes_ = n * sizeof(std::string);
  return b;
}

std::shared_ptr<Buffer> Buffer::borrow(const void* data, size_t bytes,
                                       std::shared_ptr<const void> owner) {
  auto b = std::make_shared<Buffer>(Key{});
  b->data_ = const_cast<void*>(data);
  b->bytes_ = bytes;
  b->owner_ = std::move(owner);
  return b;
}

Buffer::~Buffer() {
  if (num_strings_ > 0) {
    delete[] static_cast<std::string*>(data_);
  } else if (allocator_) {
    allocator_->deallocate(data_, bytes_);
  }
}

Status check_tensor_size(DType dtype, const Shape& shape) {
  int64_t n = 0, bytes = 0;
  if (!shape.checked_num_elements(&n)) {
    return invalid_argument("shape ", shape, " has a negative dimension or too many elements");
  }
  const int64_t element = dtype == DType::kString ? int64_t(sizeof(std::string))
                                                  : static_cast<int64_t>(dtype_size(dtype));
  const bool wraps = __builtin_mul_overflow(n, element, &bytes);
  if (wraps || bytes > max_tensor_bytes()) {
    return resource_exhausted("a ", dtype_name(dtype), shape, " tensor needs ",
                              wraps ? std::string("over 2^63") : std::to_string(bytes),
                              " bytes, more than the limit of ", max_tensor_bytes(),
                              " (set_max_tensor_bytes, TROUPE_MAX_TENSOR_BYTES)");
  }
  return ok_status();
}

Tensor::Tensor(DType dtype, const Shape& shape) {
  Result<Tensor> t = zeros(dtype, shape);
  assert(t.ok());
  *this = std::move(t).value();
}

Result<Tensor> Tensor::zeros(DType dtype, const Shape& shape) {
  TROUPE_ASSIGN_OR_RETURN(Tensor t, empty(dtype, shape, cpu_allocator()));
  if (dtype != DType::kString && t.byte_size() > 0) std::memset(t.raw_data(), 0, t.byte_size());
  return t;
}

Result<Tensor> Tensor::empty(DType dtype, const Shape& shape, Allocator* allocator) {
  if (!shape.fully_defined()) {
    return invalid_argument("cannot allocate a tensor of partially known shape ", shape);
  }
  TROUPE_RETURN_IF_ERROR(check_tensor_size(dtype, shape));
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.num_elements_ = shape.num_elements();
  if (dtype == DType::kString) {
    t.buffer_ = Buffer::strings(static_cast<size_t>(t.num_elements_));
  } else {
    t.buffer_ = Buffer::allocate(allocator, t.byte_size());
    if (!t.buffer_) {
      return resource_exhausted("allocator '", allocator->name(), "' cannot give ", t.byte_size(),
                                " bytes for a ", dtype_name(dtype), shape, " tensor");
    }
  }
  return t;
}

Tensor Tensor::borrowed(DType dtype, const Shape& shape, std::shared_ptr<Buffer> buffer) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.num_elements_ = shape.num_elements();
  t.buffer_ = std::move(buffer);
  return t;
}

double Tensor::scalar_as_double() const {
  double v = 0;
  visit_numeric(dtype_, [&](auto zero) { v = static_cast<double>(data<decltype(zero)>()[0]); });
  return v;
}

bool Tensor::fill(double value) {
  return visit_numeric(dtype_, [&](auto zero) {
    using T = decltype(zero);
    const T v = std::is_same_v<T, bool> ? T(value != 0) : static_cast<T>(value);
    std::fill_n(data<T>(), num_elements_, v);
  });
}

Tensor Tensor::reshaped(const Shape& shape) const {
  assert(shape.num_elements() == num_elements_);
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::clone(Allocator* allocator) const {
  Result<Tensor> r = empty(dtype_, shape_, allocator ? allocator : cpu_allocator());
  assert(r.ok());
  Tensor t = std::move(r).value();
  t.device_ = device_;
  if (dtype_ == DType::kString) {
    std::copy(data<std::string>(), data<std::string>() + num_elements_, t.data<std::string>());
  } else if (byte_size() > 0) {
    std::memcpy(t.raw_data(), raw_data(), byte_size());
  }
  return t;
}

namespace {
template <class T>
void print_values(std::ostream& os, const T* p, int64_t n, int max) {
  for (int64_t i = 0; i < n && i < max; ++i) {
    if (i) os << ", ";
    if constexpr (std::is_same_v<T, uint8_t>) {
      os << int(p[i]);
    } else if constexpr (std::is_same_v<T, std::string>) {
      os << '"' << p[i] << '"';
    } else {
      os << p[i];
    }
  }
  if (n > max) os << ", ...";
}
}  // namespace

std::string Tensor::debug_string(int max_elements) const {
  if (!valid()) return "<null tensor>";
  std::ostringstream os;
  os << dtype_name(dtype_) << shape_ << " {";
  if (dtype_ == DType::kString) {
    print_values(os, data<std::string>(), num_elements_, max_elements);
  } else {
    visit_numeric(dtype_, [&](auto zero) {
      print_values(os, data<decltype(zero)>(), num_elements_, max_elements);
    });
  }
  os << "}";
  return os.str();
}

Tensor slice_rows(const Tensor& t, int64_t first, int64_t rows) {
  std::vector<int64_t> dims = t.shape().dims();
  const int64_t per_row = t.dim(0) > 0 ? t.num_elements() / t.dim(0) : 0;
  dims[0] = rows;
  Tensor out(t.dtype(), Shape(dims));
  if (t.dtype() == DType::kString) {
    const std::string* src = t.data<std::string>() + first * per_row;
    std::copy(src, src + rows * per_row, out.data<std::string>());
  } else {
    const size_t row_bytes = static_cast<size_t>(per_row) * dtype_size(t.dtype());
    if (rows > 0) {
      std::memcpy(out.raw_data(), static_cast<const char*>(t.raw_data()) + first * row_bytes,
                  rows * row_bytes);
    }
  }
  return out;
}

Tensor concat_rows(const std::vector<Tensor>& parts) {
  std::vector<int64_t> dims = parts[0].shape().dims();
  dims[0] = 0;
  for (const Tensor& p : parts) dims[0] += p.dim(0);
  Tensor out(parts[0].dtype(), Shape(dims));
  if (out.dtype() == DType::kString) {
    std::string* dst = out.data<std::string>();
    for (const Tensor& p : parts) {
      dst = std::copy(p.data<std::string>(), p.data<std::string>() + p.num_elements(), dst);
    }
  } else {
    char* dst = static_cast<char*>(out.raw_data());
    for (const Tensor& p : parts) {
      if (p.byte_size() > 0) std::memcpy(dst, p.raw_data(), p.byte_size());
      dst += p.byte_size();
    }
  }
  return out;
}

}  // namespace troupe::runtime
