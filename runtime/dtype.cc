#include "runtime/dtype.h"

namespace troupe::runtime {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFloat32:
      return 4;
    case DType::kFloat64:
      return 8;
    case DType::kInt32:
      return 4;
    case DType::kInt64:
      return 8;
    case DType::kUInt8:
      return 1;
    case DType::kBool:
      return 1;
    case DType::kString:
      return 0;
    case DType::kInvalid:
      return 0;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kUInt8:
      return "uint8";
    case DType::kBool:
      return "bool";
    case DType::kString:
      return "string";
    case DType::kInvalid:
      return "invalid";
  }
  return "invalid";
}

bool dtype_from_name(const std::string& name, DType* out) {
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64, DType::kUInt8,
                  DType::kBool, DType::kString}) {
    if (name == dtype_name(t)) {
      *out = t;
      return true;
    }
  }
  return false;
}

}  // namespace troupe::runtime
