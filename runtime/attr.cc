#include "runtime/attr.h"

#include <algorithm>
#include <cstring>
#include <sstream>

namespace troupe::runtime {

const char* attr_type_name(const AttrValue& v) {
  static const char* kNames[] = {"bool",  "int",      "float",      "string", "dtype",
                                 "shape", "int list", "float list", "tensor"};
  return kNames[v.index()];
}

namespace {
bool tensor_equal(const Tensor& x, const Tensor& y) {
  if (x.valid() != y.valid()) return false;
  if (!x.valid()) return true;
  if (x.dtype() != y.dtype() || x.shape() != y.shape()) return false;
  if (x.dtype() == DType::kString) {
    return std::equal(x.data<std::string>(), x.data<std::string>() + x.num_elements(),
                      y.data<std::string>());
  }
  return x.byte_size() == 0 || std::memcmp(x.raw_data(), y.raw_data(), x.byte_size()) == 0;
}
}  // namespace

bool attr_equal(const AttrValue& a, const AttrValue& b) {
  if (a.index() != b.index()) return false;
  return std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, Tensor>) {
          return tensor_equal(x, std::get<Tensor>(b));
        } else {
          return x == std::get<T>(b);
        }
      },
      a);
}

bool attrs_equal(const AttrMap& a, const AttrMap& b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](const auto& x, const auto& y) {
           return x.first == y.first && attr_equal(x.second, y.second);
         });
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
