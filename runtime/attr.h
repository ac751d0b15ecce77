// Attributes of a graph node: typed values fixed when the node is built (transpose flags, axes,
// a constant's value). An op declares each attribute with its default; the builder fills the
// defaults in and refuses unknown names or wrong types, so kernels read attributes unchecked.
//
//   AttrMap attrs{{"transpose_a", true}, {"axes", std::vector<int64_t>{0, 1}}};
//   bool t = attr_get<bool>(attrs, "transpose_a");
//
// Plain values; thread-safe to share as const.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/shape.h"
#include "runtime/tensor.h"

namespace troupe::runtime {

using AttrValue = std::variant<bool, int64_t, double, std::string, DType, Shape,
                               std::vector<int64_t>, std::vector<double>, Tensor>;
using AttrMap = std::map<std::string, AttrValue>;

// The value of a declared attribute; the node builder guarantees presence and type.
template <class T>
const T& attr_get(const AttrMap& attrs, const std::string& name) {
  return std::get<T>(attrs.at(name));
}

const char* attr_type_name(const AttrValue& v);
// Same type and value; tensors by dtype, shape and contents.
bool attr_equal(const AttrValue& a, const AttrValue& b);
bool attrs_equal(const AttrMap& a, const AttrMap& b);
std::string attr_debug_string(const AttrValue& v);

}  // namespace troupe::runtime
