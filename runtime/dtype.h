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

// Calls f(T()) with the element type T of a numeric or bool dtype and returns true; false (and
// no call) for string and invalid. One switch for code that is the same for every such dtype.
template <class F>
bool visit_numeric(DType t, F&& f) {
  switch (t) {
    case DType::kFloat32:
      f(float());
      return true;
    case DType::kFloat64:
      f(double());
      return true;
    case DType::kInt32:
      f(int32_t());
      return true;
    case DType::kInt64:
      f(int64_t());
      return true;
    case DType::kUInt8:
      f(uint8_t());
      return true;
    case DType::kBool:
      f(bool());
      return true;
    default:
      return false;
  }
}

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
