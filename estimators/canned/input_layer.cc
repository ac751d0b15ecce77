#include "estimators/canned/input_layer.h"

#include <algorithm>
#include <cmath>

#include "estimators/canned/feature_column.h"
#include "estimators/canned/runtime_names.h"
#include "estimators/metrics.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/state_ops.h"

namespace troupe::estimators {

runtime::Result<Standardization> standardization(const input::Dataset& data,
                                                 const std::vector<std::string>& labels) {
  // A feature of varying length is categorical ids, not numbers to standardize.
  std::vector<std::string> names;
  for (const std::string& f : data.features) {
    if (!data.is_sparse(f)) names.push_back(f);
  }
  const std::vector<std::string> columns = data.labels();
  for (const std::string& label : labels) {
    if (std::find(columns.begin(), columns.end(), label) == columns.end()) {
      return runtime::invalid_argument("standardization: the data has no label column '", label,
                                       "'");
    }
    names.push_back(label);
  }
  struct Sums {
    std::vector<double> sum, squares;
    int64_t rows = 0;
  };
  std::vector<Sums> sums(names.size());
  for (int64_t u = 0; u < data.source->num_units(); ++u) {
    std::vector<actors::Chunk> chunks;
    int64_t skipped = 0;
    TROUPE_RETURN_IF_ERROR(data.source->read(u, &chunks, &skipped));
    for (const actors::Chunk& c : chunks) {
      for (size_t f = 0; f < names.size(); ++f) {
        const runtime::Tensor& t = c.components[data.component(names[f])];
        if (t.dtype() == DType::kString || t.rank() < 1 || t.dim(0) == 0) continue;
        const int64_t per = t.num_elements() / t.dim(0);
        Sums& s = sums[f];
        if (s.sum.empty()) {
          s.sum.assign(per, 0);
          s.squares.assign(per, 0);
        }
        if (static_cast<int64_t>(s.sum.size()) != per) {
          return runtime::invalid_argument("feature '", names[f], "' varies in shape");
        }
        // A chunk's rows are a range of a tensor that may hold the whole file.
        const int64_t n = c.last() - c.first();
        const std::vector<double> v = as_doubles(runtime::slice_rows(t, c.first(), n));
        for (int64_t r = 0; r < n; ++r) {
          for (int64_t k = 0; k < per; ++k) {
            s.sum[k] += v[r * per + k];
            s.squares[k] += v[r * per + k] * v[r * per + k];
          }
        }
        s.rows += c.last() - c.first();
      }
    }
  }
  Standardization out;
  for (size_t f = 0; f < sums.size(); ++f) {
    const Sums& s = sums[f];
    if (s.rows == 0) continue;
    FeatureStats& st = out[names[f]];
    for (size_t k = 0; k < s.sum.size(); ++k) {
      const double mean = s.sum[k] / static_cast<double>(s.rows);
      const double var = std::max(0.0, s.squares[k] / static_cast<double>(s.rows) - mean * mean);
      st.mean.push_back(static_cast<float>(mean));
      st.scale.push_back(var > 1e-12 ? static_cast<float>(std::sqrt(var)) : 1.0f);
    }
  }
  return out;
}

runtime::Result<std::vector<FeatureColumn>> numeric_columns(const ModelInputs& in,
                                                            const std::vector<std::string>& keys,
                                                            const Standardization& standardize,
                                                            const std::string& except) {
  std::vector<std::string> names = keys;
  if (names.empty()) {
    for (const auto& [k, v] : in.features) {
      if (k != except) names.push_back(k);
    }
  }
  if (names.empty()) return runtime::invalid_argument("no features");
  std::vector<FeatureColumn> columns;
  for (const std::string& k : names) {
    auto it = in.features.find(k);
    if (it == in.features.end()) return runtime::invalid_argument("missing feature '", k, "'");
    if (in.b.dtype(it->second) == DType::kString) {
      return runtime::invalid_argument(
          "feature '", k, "' is text: give the model feature columns that read it as categorical");
    }
    const Shape& s = in.b.graph().shape(it->second);
    int64_t per = 1;
    for (int d = 1; d < s.rank(); ++d) per *= s.dim(d);
    auto stats = standardize.find(k);
    columns.push_back(
        numeric_column(k, per, stats == standardize.end() ? FeatureStats{} : stats->second));
  }
  return columns;
}

runtime::Result<Output> dense_input_layer(ModelInputs& in, const std::vector<std::string>& keys,
                                          const Standardization& standardize, int64_t* width,
                                          const std::string& except) {
  TROUPE_ASSIGN_OR_RETURN(std::vector<FeatureColumn> columns,
                          numeric_columns(in, keys, standardize, except));
  return input_layer(in, columns, width);
}

}  // namespace troupe::estimators
