#include "estimators/canned/input_layer.h"

#include "ops/array_ops.h"

namespace troupe::estimators {

using runtime::DType;
using runtime::Output;
using runtime::Shape;

runtime::Result<Output> dense_input_layer(ModelInputs& in, const std::vector<std::string>& keys,
                                          int64_t* width) {
  runtime::GraphBuilder& b = in.b;
  std::vector<std::string> names = keys;
  if (names.empty()) {
    for (const auto& [k, v] : in.features) names.push_back(k);
  }
  std::vector<Output> columns;
  *width = 0;
  auto scope = b.name_scope("input_layer");
  for (const std::string& k : names) {
    auto it = in.features.find(k);
    if (it == in.features.end()) return runtime::invalid_argument("missing feature '", k, "'");
    const runtime::Graph& g = b.graph();
    if (g.dtype(it->second) == DType::kString) {
      return runtime::invalid_argument("feature '", k,
                                       "' is text: this model takes numeric features only");
    }
    const Shape& s = g.shape(it->second);
    int64_t per = 1;
    for (int d = 1; d < s.rank(); ++d) {
      if (s.dim(d) < 0) return runtime::invalid_argument("feature '", k, "' varies in shape");
      per *= s.dim(d);
    }
    columns.push_back(ops::reshape(b, ops::cast(b, it->second, DType::kFloat32), {-1, per}));
    *width += per;
  }
  if (columns.empty()) return runtime::invalid_argument("no features");
  return columns.size() == 1 ? columns[0] : ops::concat(b, columns, 1);
}

}  // namespace troupe::estimators
