#include "tools/data_spec.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "estimators/metrics.h"

namespace troupe::cli {

namespace input = troupe::estimators::input;

runtime::Result<input::Dataset> open_data(const std::string& spec, const std::string& split,
                                          const std::string& label,
                                          const input::DatasetOptions& o) {
  if (spec == "fashion-mnist" || spec == "fashion_mnist") return input::fashion_mnist(split, o);
  if (spec.rfind("csv:", 0) == 0) {
    if (label.empty()) return runtime::invalid_argument("--data csv:... needs --label COLUMN");
    return input::csv(spec.substr(4), label, {}, o);
  }
  return runtime::invalid_argument("--data '", spec, "' is not fashion-mnist or csv:PATH");
}

runtime::Result<int64_t> count_classes(const input::Dataset& d) {
  const int label = d.component(d.label);
  double top = -1;
  for (int64_t u = 0; u < d.source->num_units(); ++u) {
    std::vector<actors::Chunk> chunks;
    int64_t skipped = 0;
    TROUPE_RETURN_IF_ERROR(d.source->read(u, &chunks, &skipped));
    for (const actors::Chunk& c : chunks) {
      const std::vector<double> v = estimators::as_doubles(
          runtime::slice_rows(c.components[label], c.first(), c.last() - c.first()));
      for (size_t r = 0; r < v.size(); ++r) {
        if (!(v[r] >= 0 && v[r] < 2147483648.0) || v[r] != std::floor(v[r])) {
          return runtime::invalid_argument("label ", v[r],
                                           " is not a class number (0, 1, ... below 2^31)");
        }
        top = std::max(top, v[r]);
      }
    }
  }
  return static_cast<int64_t>(top) + 1;
}

runtime::Result<std::vector<std::string>> label_names(const input::Dataset& d) {
  const int label = d.component(d.label);
  std::set<std::string> names;
  for (int64_t u = 0; u < d.source->num_units(); ++u) {
    std::vector<actors::Chunk> chunks;
    int64_t skipped = 0;
    TROUPE_RETURN_IF_ERROR(d.source->read(u, &chunks, &skipped));
    for (const actors::Chunk& c : chunks) {
      const runtime::Tensor& t = c.components[label];
      if (t.dtype() != runtime::DType::kString) return std::vector<std::string>{};
      const int64_t per = t.dim(0) == 0 ? 1 : t.num_elements() / t.dim(0);
      for (int64_t j = c.first() * per; j < c.last() * per; ++j) {
        names.insert(t.data<std::string>()[j]);
      }
    }
  }
  return std::vector<std::string>(names.begin(), names.end());
}

runtime::Result<int64_t> count_rows(const input::Dataset& d) {
  int64_t rows = 0;
  for (int64_t u = 0; u < d.source->num_units(); ++u) {
    std::vector<actors::Chunk> chunks;
    int64_t skipped = 0;
    TROUPE_RETURN_IF_ERROR(d.source->read(u, &chunks, &skipped));
    for (const actors::Chunk& c : chunks) rows += c.last() - c.first();
  }
  return rows;
}

runtime::Result<Arrays> load_arrays(const input::Dataset& d) {
  std::vector<std::string> names = d.features;
  std::sort(names.begin(), names.end());
  std::vector<float> xs;
  std::vector<runtime::Tensor> labels;
  int64_t rows = 0, width = -1;
  for (int64_t u = 0; u < d.source->num_units(); ++u) {
    std::vector<actors::Chunk> chunks;
    int64_t skipped = 0;
    TROUPE_RETURN_IF_ERROR(d.source->read(u, &chunks, &skipped));
    for (const actors::Chunk& c : chunks) {
      const int64_t n = c.last() - c.first();
      if (n <= 0) continue;
      std::vector<std::vector<double>> columns;
      std::vector<int64_t> per;
      int64_t w = 0;
      for (const std::string& name : names) {
        const runtime::Tensor& t = c.components[d.component(name)];
        if (t.dtype() == runtime::DType::kString) {
          return runtime::invalid_argument("feature '", name, "' is text: only numbers fit here");
        }
        // A chunk's rows are a range of a tensor that may hold the whole file.
        columns.push_back(estimators::as_doubles(runtime::slice_rows(t, c.first(), n)));
        per.push_back(t.dim(0) > 0 ? t.num_elements() / t.dim(0) : 0);
        w += per.back();
      }
      if (width >= 0 && w != width) return runtime::invalid_argument("examples vary in width");
      width = w;
      for (int64_t r = 0; r < n; ++r) {
        for (size_t f = 0; f < columns.size(); ++f) {
          for (int64_t k = 0; k < per[f]; ++k) {
            xs.push_back(static_cast<float>(columns[f][r * per[f] + k]));
          }
        }
      }
      labels.push_back(runtime::slice_rows(c.components[d.component(d.label)], c.first(), n));
      rows += n;
    }
  }
  if (rows == 0) return runtime::invalid_argument("the data has no examples");
  return Arrays{runtime::Tensor::from_vector(runtime::Shape{rows, width}, xs),
                runtime::concat_rows(labels)};
}

}  // namespace troupe::cli
