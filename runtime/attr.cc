#include "runtime/attr.h"

#include <sstream>

namespace troupe::runtime {

const char* attr_type_name(const AttrValue& v) {
  static const char* kNames[] = {"bool",  "int",      "float",      "string", "dtype",
                                 "shape", "int list", "float list", "tensor"};
  return kNames[v.index()];
}

std::string attr_debug_string(const AttrValue& v) {
  std::ostringstream os;
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, DType>) {
          os << dtype_name(x);
        } else if constexpr (std::is_same_v<T, Tensor>) {
          os << x.debug_string(4);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>> ||
                             std::is_same_v<T, std::vector<double>>) {
          os << "[";
          for (size_t i = 0; i < x.size(); ++i) os << (i ? "," : "") << x[i];
          os << "]";
        } else {
          os << x;
        }
      },
      v);
  return os.str();
}

}  // namespace troupe::runtime
