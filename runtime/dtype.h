// DType: the element types a Tensor can hold, and what each one costs in bytes.
//
//   DType t = dtype_of<float>();            // DType::kFloat32
//   size_t n = dtype_size(t);               // 4
//   std::string s = dtype_name(t);          // "float32"
//
// Plain values; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace troupe::runtime {

enum class DType : uint8_t { kFloat32, kFloat64, kInt32, kInt64, kUInt8, kBool, kString, kInvalid };

size_t dtype_size(DType t);  // 0 for kString (elements are std::string objects)
const char* dtype_name(DType t);
bool dtype_from_name(const std::string& name, DType* out);
inline bool is_floating(DType t) { return t == DType::kFloat32 || t == DType::kFloat64; }
inline bool is_integer(DType t) {
  return t == DType::kInt32 || t == DType::kInt64 || t == DType::kUInt8;
}
inline bool is_numeric(DType t) { return is_floating(t) || is_integer(t); }

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::kFloat32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::kFloat64;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::kInt32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::kInt64;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::kUInt8;
}
template <>
constexpr DType dtype_of<bool>() {
  return DType::kBool;
}
template <>
constexpr DType dtype_of<std::string>() {
  return DType::kString;
}

}  // namespace troupe::runtime
