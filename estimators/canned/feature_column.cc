#include "estimators/canned/feature_column.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "estimators/canned/runtime_names.h"
#include "ops/array_ops.h"
#include "ops/feature_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/random_ops.h"
#include "ops/sparse_ops.h"
#include "ops/state_ops.h"
#include "ops/strided_slice.h"

namespace troupe::estimators {

using Kind = FeatureColumn::Kind;

std::string FeatureColumn::name() const {
  switch (kind) {
    case Kind::kBucketized:
      return sources[0].name() + "_bucketized";
    case Kind::kCrossed: {
      std::string n;
      for (const std::string& k : cross_keys) n += (n.empty() ? "" : "_X_") + k;
      for (const FeatureColumn& c : sources) n += (n.empty() ? "" : "_X_") + c.name();
      return n;
    }
    case Kind::kWeighted:
      return sources[0].name() + "_weighted_by_" + weight_key;
    case Kind::kEmbedding:
      return sources[0].name() + "_embedding";
    case Kind::kIndicator:
      return sources[0].name() + "_indicator";
    default:
      return key;
  }
}

bool FeatureColumn::categorical() const {
  return kind != Kind::kNumeric && kind != Kind::kEmbedding && kind != Kind::kIndicator;
}

int64_t FeatureColumn::id_count() const {
  switch (kind) {
    case Kind::kBucketized:
      return sources[0].width * static_cast<int64_t>(boundaries.size() + 1);
    case Kind::kVocabulary:
      return vocabulary.num_elements() + num_oov_buckets;
    case Kind::kWeighted:
      return sources[0].id_count();
    case Kind::kIdentity:
    case Kind::kHashBucket:
    case Kind::kCrossed:
      return num_buckets;
    default:
      return 0;
  }
}

bool FeatureColumn::is_sequence() const {
  return (kind == Kind::kEmbedding || kind == Kind::kIndicator) && !sources.empty()
             ? sources[0].sequence
             : sequence;
}

FeatureColumn numeric_column(const std::string& key, int64_t width, FeatureStats normalizer) {
  FeatureColumn c;
  c.key = key;
  c.width = width;
  c.normalizer = std::move(normalizer);
  return c;
}

FeatureColumn bucketized_column(const FeatureColumn& numeric, std::vector<double> boundaries) {
  FeatureColumn c;
  c.kind = Kind::kBucketized;
  c.key = numeric.key;
  c.sources = {numeric};
  c.boundaries = std::move(boundaries);
  return c;
}

namespace {

FeatureColumn vocabulary_column(const std::string& key, Tensor vocabulary, int64_t oov,
                                int64_t default_value) {
  FeatureColumn c;
  c.kind = Kind::kVocabulary;
  c.key = key;
  c.vocabulary = std::move(vocabulary);
  c.num_oov_buckets = oov;
  c.default_value = default_value;
  return c;
}

}  // namespace

FeatureColumn categorical_column_with_vocabulary_list(const std::string& key,
                                                      const std::vector<std::string>& vocabulary,
                                                      int64_t num_oov_buckets,
                                                      int64_t default_value) {
  return vocabulary_column(
      key, Tensor::from_vector(Shape{static_cast<int64_t>(vocabulary.size())}, vocabulary),
      num_oov_buckets, default_value);
}

FeatureColumn categorical_column_with_int_vocabulary_list(const std::string& key,
                                                          const std::vector<int64_t>& vocabulary,
                                                          int64_t num_oov_buckets,
                                                          int64_t default_value) {
  return vocabulary_column(
      key, Tensor::from_vector(Shape{static_cast<int64_t>(vocabulary.size())}, vocabulary),
      num_oov_buckets, default_value);
}

Result<FeatureColumn> categorical_column_with_vocabulary_file(const std::string& key,
                                                              const std::string& path,
                                                              int64_t num_oov_buckets,
                                                              int64_t default_value) {
  std::ifstream file(path);
  if (!file) return runtime::not_found("vocabulary file '", path, "' of column '", key, "'");
  std::vector<std::string> words;
  for (std::string line; std::getline(file, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    words.push_back(line);
  }
  if (file.bad()) return runtime::data_loss("reading vocabulary file '", path, "'");
  return categorical_column_with_vocabulary_list(key, words, num_oov_buckets, default_value);
}

FeatureColumn categorical_column_with_identity(const std::string& key, int64_t num_buckets,
                                               int64_t default_value) {
  FeatureColumn c;
  c.kind = Kind::kIdentity;
  c.key = key;
  c.num_buckets = num_buckets;
  c.default_value = default_value;
  return c;
}

FeatureColumn categorical_column_with_hash_bucket(const std::string& key,
                                                  int64_t hash_bucket_size) {
  FeatureColumn c;
  c.kind = Kind::kHashBucket;
  c.key = key;
  c.num_buckets = hash_bucket_size;
  return c;
}

namespace {

FeatureColumn as_sequence(FeatureColumn c) {
  c.sequence = true;
  return c;
}

}  // namespace

FeatureColumn sequence_numeric_column(const std::string& key, int64_t width) {
  return as_sequence(numeric_column(key, width));
}

FeatureColumn sequence_categorical_column_with_identity(const std::string& key, int64_t num_buckets,
                                                        int64_t default_value) {
  return as_sequence(categorical_column_with_identity(key, num_buckets, default_value));
}

FeatureColumn sequence_categorical_column_with_vocabulary_list(
    const std::string& key, const std::vector<std::string>& vocabulary, int64_t num_oov_buckets,
    int64_t default_value) {
  return as_sequence(
      categorical_column_with_vocabulary_list(key, vocabulary, num_oov_buckets, default_value));
}

FeatureColumn sequence_categorical_column_with_hash_bucket(const std::string& key,
                                                           int64_t hash_bucket_size) {
  return as_sequence(categorical_column_with_hash_bucket(key, hash_bucket_size));
}

FeatureColumn crossed_column(const std::vector<std::string>& keys,
                             const std::vector<FeatureColumn>& columns, int64_t hash_bucket_size) {
  FeatureColumn c;
  c.kind = Kind::kCrossed;
  c.cross_keys = keys;
  c.sources = columns;
  c.num_buckets = hash_bucket_size;
  return c;
}

FeatureColumn weighted_categorical_column(const FeatureColumn& categorical,
                                          const std::string& weight_key) {
  FeatureColumn c;
  c.kind = Kind::kWeighted;
  c.key = categorical.key;
  c.sources = {categorical};
  c.weight_key = weight_key;
  return c;
}

FeatureColumn embedding_column(const FeatureColumn& categorical, int64_t dimension,
                               const std::string& combiner) {
  FeatureColumn c;
  c.kind = Kind::kEmbedding;
  c.key = categorical.key;
  c.sources = {categorical};
  c.dimension = dimension;
  c.combiner = combiner;
  return c;
}

FeatureColumn indicator_column(const FeatureColumn& categorical) {
  FeatureColumn c;
  c.kind = Kind::kIndicator;
  c.key = categorical.key;
  c.sources = {categorical};
  return c;
}

namespace {

Status column_error(const FeatureColumn& c, const std::string& why) {
  return runtime::invalid_argument("feature column '", c.name(), "': ", why);
}

Status validate_column(const FeatureColumn& c) {
  switch (c.kind) {
    case Kind::kNumeric:
      if (c.width < 1) return column_error(c, "width below 1");
      if (!c.normalizer.mean.empty() &&
          (static_cast<int64_t>(c.normalizer.mean.size()) != c.width ||
           c.normalizer.scale.size() != c.normalizer.mean.size())) {
        return column_error(c, "normalizer of another width than the column's");
      }
      return runtime::ok_status();
    case Kind::kBucketized:
      if (c.sources.size() != 1 || c.sources[0].kind != Kind::kNumeric) {
        return column_error(c, "bucketizes a numeric column only");
      }
      for (size_t i = 1; i < c.boundaries.size(); ++i) {
        if (!(c.boundaries[i - 1] < c.boundaries[i])) {
          return column_error(c, "boundaries must be ascending");
        }
      }
      return validate_column(c.sources[0]);
    case Kind::kVocabulary:
      if (!c.vocabulary.valid() || c.vocabulary.num_elements() + c.num_oov_buckets < 1) {
        return column_error(c, "an empty vocabulary and no out-of-vocabulary buckets");
      }
      if (c.num_oov_buckets < 0) return column_error(c, "negative num_oov_buckets");
      if (c.default_value >= c.id_count()) return column_error(c, "default_value out of range");
      return runtime::ok_status();
    case Kind::kIdentity:
    case Kind::kHashBucket:
      if (c.num_buckets < 1) return column_error(c, "no buckets");
      if (c.default_value >= c.num_buckets) return column_error(c, "default_value out of range");
      return runtime::ok_status();
    case Kind::kCrossed:
      if (c.num_buckets < 1) return column_error(c, "no buckets");
      if (c.cross_keys.size() + c.sources.size() < 2) {
        return column_error(c, "crosses at least two features");
      }
      for (const FeatureColumn& s : c.sources) {
        if (s.kind != Kind::kBucketized && s.kind != Kind::kVocabulary &&
            s.kind != Kind::kIdentity && s.kind != Kind::kCrossed) {
          return column_error(c,
                              "crosses keys, bucketized, vocabulary, identity and crossed "
                              "columns; hash them by their key instead of '" +
                                  s.name() + "'");
        }
        TROUPE_RETURN_IF_ERROR(validate_column(s));
      }
      return runtime::ok_status();
    case Kind::kWeighted:
    case Kind::kEmbedding:
    case Kind::kIndicator:
      if (c.sources.size() != 1 || !c.sources[0].categorical()) {
        return column_error(c, "needs a categorical column");
      }
      if (c.kind == Kind::kWeighted && c.weight_key.empty()) {
        return column_error(c, "no weight feature");
      }
      if (c.kind == Kind::kEmbedding && c.dimension < 1)
        return column_error(c, "dimension below 1");
      if (c.kind == Kind::kEmbedding && c.combiner != "sum" && c.combiner != "mean" &&
          c.combiner != "sqrtn") {
        return column_error(c, "combiner '" + c.combiner + "' is not sum, mean or sqrtn");
      }
      return validate_column(c.sources[0]);
  }
  return runtime::ok_status();
}

}  // namespace

namespace {

Status add_spec(const std::string& key, const runtime::FeatureSpec& spec,
                runtime::FeatureSpecs* out) {
  auto [it, added] = out->emplace(key, spec);
  const runtime::FeatureSpec& had = it->second;
  if (!added && (had.kind != spec.kind || had.dtype != spec.dtype || had.shape != spec.shape)) {
    return runtime::invalid_argument("feature '", key, "' is read as ", runtime::to_string(had),
                                     " by one column and as ", runtime::to_string(spec),
                                     " by another");
  }
  return runtime::ok_status();
}

Status spec_of(const FeatureColumn& c, runtime::FeatureSpecs* out) {
  auto var_len = [](DType dtype) {
    return runtime::FeatureSpec{.kind = runtime::FeatureSpec::Kind::kVarLen, .dtype = dtype};
  };
  switch (c.kind) {
    case Kind::kNumeric:
      if (c.sequence) return add_spec(c.key, var_len(DType::kFloat32), out);  // steps * width
      return add_spec(
          c.key, {.dtype = DType::kFloat32, .shape = c.width == 1 ? Shape{} : Shape{c.width}}, out);
    case Kind::kVocabulary:
      return add_spec(c.key, var_len(c.vocabulary.dtype()), out);
    case Kind::kIdentity:
      return add_spec(c.key, var_len(DType::kInt64), out);
    case Kind::kHashBucket:
      return add_spec(c.key, var_len(DType::kString), out);
    case Kind::kWeighted:
      TROUPE_RETURN_IF_ERROR(add_spec(c.weight_key, var_len(DType::kFloat32), out));
      break;
    case Kind::kCrossed:
      for (const std::string& key : c.cross_keys) {
        TROUPE_RETURN_IF_ERROR(add_spec(key, var_len(DType::kString), out));
      }
      break;
    case Kind::kBucketized:
    case Kind::kEmbedding:
    case Kind::kIndicator:
      break;
  }
  for (const FeatureColumn& source : c.sources) TROUPE_RETURN_IF_ERROR(spec_of(source, out));
  return runtime::ok_status();
}

}  // namespace

Result<runtime::FeatureSpecs> make_parse_example_spec(const std::vector<FeatureColumn>& columns) {
  runtime::FeatureSpecs spec;
  for (const FeatureColumn& c : columns) TROUPE_RETURN_IF_ERROR(spec_of(c, &spec));
  return spec;
}

Status validate_columns(const std::vector<FeatureColumn>& columns, bool for_linear) {
  if (columns.empty()) return runtime::invalid_argument("no feature columns");
  for (const FeatureColumn& c : columns) {
    TROUPE_RETURN_IF_ERROR(validate_column(c));
    if (c.is_sequence()) {
      return column_error(c,
                          "is a sequence column: a recurrent model reads it, a step at a time "
                          "(sequence_input_layer)");
    }
    const bool dense = c.kind == Kind::kNumeric || c.kind == Kind::kBucketized ||
                       c.kind == Kind::kEmbedding || c.kind == Kind::kIndicator;
    if (for_linear && (c.kind == Kind::kEmbedding || c.kind == Kind::kIndicator)) {
      return column_error(c, "a linear model takes numeric and categorical columns; give it '" +
                                 c.sources[0].name() + "' itself");
    }
    if (!for_linear && !dense) {
      return column_error(c,
                          "is categorical: a DNN reads it through embedding_column or "
                          "indicator_column");
    }
  }
  return runtime::ok_status();
}

namespace {

// The feature `key` as [batch, k], with k its values an example.
Result<Output> feature_rows(ModelInputs& in, const std::string& key, int64_t* k) {
  auto it = in.features.find(key);
  if (it == in.features.end()) return runtime::invalid_argument("missing feature '", key, "'");
  const Shape& s = in.b.graph().shape(it->second);
  if (!s.rank_known() || s.rank() < 1) {
    return runtime::invalid_argument("feature '", key, "' has no batch dimension");
  }
  *k = 1;
  for (int d = 1; d < s.rank(); ++d) {
    if (s.dim(d) < 0) return runtime::invalid_argument("feature '", key, "' varies in shape");
    *k *= s.dim(d);
  }
  return ops::reshape(in.b, it->second, {-1, *k});
}

Result<Output> numeric_values(ModelInputs& in, const FeatureColumn& c) {
  runtime::GraphBuilder& b = in.b;
  int64_t k = 0;
  TROUPE_ASSIGN_OR_RETURN(Output x, feature_rows(in, c.key, &k));
  if (b.dtype(x) == DType::kString) {
    return runtime::invalid_argument("feature '", c.key,
                                     "' is text: read it through a categorical column");
  }
  if (k != c.width) {
    return runtime::invalid_argument("feature '", c.key, "' has ", k,
                                     " values an example; its numeric column ", c.width);
  }
  x = ops::cast(b, x, DType::kFloat32);
  if (c.normalizer.mean.empty()) return x;
  // The statistics are variables so that checkpoints and exports carry them.
  auto scope = b.name_scope("input_layer/" + c.key);
  auto held = [&](const char* name, const std::vector<float>& v) {
    return ops::variable(b, name, Shape{k}, DType::kFloat32,
                         ops::constant(b, Tensor::from_vector(Shape{k}, v)), /*trainable=*/false);
  };
  return ops::div(b, ops::sub(b, x, held("mean", c.normalizer.mean)),
                  held("scale", c.normalizer.scale));
}

}  // namespace

namespace {

// The ids of a categorical column as a dense [batch, k] int64 tensor, every value counted: what
// hashed crosses and bucketized columns read.
Result<Output> dense_ids(ModelInputs& in, const FeatureColumn& c) {
  runtime::GraphBuilder& b = in.b;
  int64_t k = 0;
  switch (c.kind) {
    case Kind::kBucketized: {
      TROUPE_ASSIGN_OR_RETURN(Output x, numeric_values(in, c.sources[0]));
      Output ids = ops::bucketize(b, x, c.boundaries);
      if (c.sources[0].width == 1) return ids;
      // Element i of an example has buckets of its own: ids i * (boundaries + 1) + bucket.
      const int64_t per = static_cast<int64_t>(c.boundaries.size() + 1);
      std::vector<int64_t> offsets;
      for (int64_t i = 0; i < c.sources[0].width; ++i) offsets.push_back(i * per);
      return ops::add(b, ids,
                      ops::constant(b, Tensor::from_vector(Shape{c.sources[0].width}, offsets)));
    }
    case Kind::kVocabulary:
    case Kind::kIdentity: {
      TROUPE_ASSIGN_OR_RETURN(Output x, feature_rows(in, c.key, &k));
      return c.kind == Kind::kVocabulary
                 ? ops::vocabulary_lookup(b, x, c.vocabulary, c.num_oov_buckets, c.key,
                                          c.default_value)
                 : ops::categorical_identity(b, x, c.num_buckets, c.key, c.default_value);
    }
    case Kind::kCrossed: {
      std::vector<Output> parts;
      for (const std::string& key : c.cross_keys) {
        TROUPE_ASSIGN_OR_RETURN(Output x, feature_rows(in, key, &k));
        parts.push_back(x);
      }
      for (const FeatureColumn& s : c.sources) {
        TROUPE_ASSIGN_OR_RETURN(Output ids, dense_ids(in, s));
        parts.push_back(ids);
      }
      return ops::hash_cross(b, parts, c.num_buckets);
    }
    default:
      return column_error(c, "gives no dense ids");
  }
}

// Feature `key` as the sparse tensor given as <key>/indices, <key>/values and <key>/dense_shape;
// invalid when it is not given so.
ops::SparseOutput given_sparse(const ModelInputs& in, const std::string& key) {
  auto part = [&](int i) {
    auto it = in.features.find(key + ops::kSparseParts[i]);
    return it == in.features.end() ? Output{} : it->second;
  };
  return {part(0), part(1), part(2)};
}

// Feature `key` as entries: the sparse tensor given as its three parts, or the dense feature
// without its missing values; `positions` gets each entry's flat position in a dense feature
// (invalid for a sparse one).
Result<ops::SparseOutput> feature_entries(ModelInputs& in, const std::string& key,
                                          Output* positions) {
  const ops::SparseOutput given = given_sparse(in, key);
  *positions = Output{};
  if (given.valid()) return given;
  int64_t k = 0;
  TROUPE_ASSIGN_OR_RETURN(Output x, feature_rows(in, key, &k));
  const DType t = in.b.dtype(x);
  if (t != DType::kString && t != DType::kInt32 && t != DType::kInt64) {
    return runtime::invalid_argument("feature '", key, "' holds ", runtime::dtype_name(t),
                                     ": categorical columns take text or integers");
  }
  return ops::dense_to_sparse(in.b, x, positions);
}

// categorical_ids, with the flat positions of the ids in a dense feature they came from.
Result<CategoricalIds> ids_at(ModelInputs& in, const FeatureColumn& c, Output* positions) {
  runtime::GraphBuilder& b = in.b;
  TROUPE_RETURN_IF_ERROR(validate_column(c));
  if (c.kind == Kind::kBucketized || c.kind == Kind::kCrossed) {
    TROUPE_ASSIGN_OR_RETURN(Output ids, dense_ids(in, c));
    return CategoricalIds{ops::dense_to_sparse(b, ids, positions), Output{}};
  }
  if (c.kind == Kind::kWeighted) {
    TROUPE_ASSIGN_OR_RETURN(CategoricalIds ids, ids_at(in, c.sources[0], positions));
    auto given = in.features.find(c.weight_key + ops::kSparseParts[1]);
    if (given != in.features.end()) {
      if (positions->valid()) {
        // The dense feature lost its missing values: no entry of the weights says which is whose.
        return runtime::invalid_argument("weight feature '", c.weight_key, "' is sparse where '",
                                         c.sources[0].key, "' is dense: give both alike");
      }
      ids.weights = given->second;  // a sparse tensor beside the ids', entry for entry
    } else {
      int64_t k = 0;
      TROUPE_ASSIGN_OR_RETURN(Output w, feature_rows(in, c.weight_key, &k));
      if (!positions->valid()) {
        return runtime::invalid_argument("weight feature '", c.weight_key, "' is dense where '",
                                         c.sources[0].key, "' is sparse: give both alike");
      }
      ids.weights = ops::gather(b, ops::reshape(b, w, {-1}), *positions);
    }
    if (!runtime::is_numeric(b.dtype(ids.weights))) {
      return runtime::invalid_argument("weight feature '", c.weight_key, "' is not numeric");
    }
    ids.weights = ops::cast(b, ids.weights, DType::kFloat32);
    return ids;
  }
  TROUPE_ASSIGN_OR_RETURN(ops::SparseOutput raw, feature_entries(in, c.key, positions));
  const DType t = b.dtype(raw.values);
  Output ids;
  switch (c.kind) {
    case Kind::kVocabulary:
      if (t != c.vocabulary.dtype()) {
        return runtime::invalid_argument("feature '", c.key, "' holds ", runtime::dtype_name(t),
                                         ", its vocabulary ",
                                         runtime::dtype_name(c.vocabulary.dtype()));
      }
      ids = ops::vocabulary_lookup(b, raw.values, c.vocabulary, c.num_oov_buckets, c.key,
                                   c.default_value);
      break;
    case Kind::kIdentity:
      if (t != DType::kInt32 && t != DType::kInt64) {
        return runtime::invalid_argument("feature '", c.key, "' holds ", runtime::dtype_name(t),
                                         ": an identity column needs integers");
      }
      ids = ops::categorical_identity(b, raw.values, c.num_buckets, c.key, c.default_value);
      break;
    case Kind::kHashBucket:
      ids = ops::string_to_hash_bucket(b, raw.values, c.num_buckets);
      break;
    default:
      return column_error(c, "gives no ids");
  }
  return CategoricalIds{{raw.indices, ids, raw.dense_shape}, Output{}};
}

}  // namespace

Result<CategoricalIds> categorical_ids(ModelInputs& in, const FeatureColumn& c) {
  Output positions;
  return ids_at(in, c, &positions);
}

namespace {

// A [rows, width] float32 variable in blocks of rows (one, when small or not asked to split).
std::vector<Output> blocks(runtime::GraphBuilder& b, const std::string& name, const Shape& shape,
                           Output initial_value, int partitions) {
  const int parts = variable_partitions(shape.num_elements() * 4, partitions);
  return ops::variable_parts(b, name, shape, DType::kFloat32, initial_value, parts);
}

// A label for each id of a categorical column: its vocabulary's words, then "<oov i>" for its
// out-of-vocabulary buckets; "id i" for the ids of other columns.
runtime::Tensor projector_labels(const FeatureColumn& c, int64_t ids) {
  runtime::Tensor labels(DType::kString, Shape{ids});
  const runtime::Tensor& v = c.vocabulary;
  const int64_t words = c.kind == FeatureColumn::Kind::kVocabulary ? v.num_elements() : 0;
  for (int64_t i = 0; i < ids; ++i) {
    std::string& label = labels.data<std::string>()[i];
    if (i < words) {
      label = v.dtype() == DType::kString ? v.data<std::string>()[i]
                                          : std::to_string(v.data<int64_t>()[i]);
    } else {
      label = words > 0 ? "<oov " + std::to_string(i - words) + ">" : "id " + std::to_string(i);
    }
  }
  return labels;
}

// An embedding column's table, <layer>/<column>/embedding_weights, in up to `partitions` blocks.
std::vector<Output> embedding_table(runtime::GraphBuilder& b, const FeatureColumn& c,
                                    const std::string& layer, int partitions) {
  auto scope = b.name_scope(layer + "/" + c.name());
  const Shape shape{c.sources[0].id_count(), c.dimension};
  // TF's default: truncated normal with stddev 1/sqrt(dimension).
  std::vector<Output> table =
      blocks(b, "embedding_weights", shape,
             ops::truncated_normal(b, shape, 0, 1.0 / std::sqrt(static_cast<double>(c.dimension))),
             partitions);
  // What each row stands for, for TensorBoard's projector (write_projector): a constant no step
  // computes, read from the graph by the summary hook.
  ops::constant(b, projector_labels(c.sources[0], shape.dim(0)), "embedding_weights/metadata");
  return table;
}

Result<Output> embedding(ModelInputs& in, const FeatureColumn& c, int partitions) {
  runtime::GraphBuilder& b = in.b;
  TROUPE_ASSIGN_OR_RETURN(CategoricalIds ids, categorical_ids(in, c.sources[0]));
  std::vector<Output> table = embedding_table(b, c, "input_layer", partitions);
  if (!b.ok()) return b.status();
  return ops::embedding_lookup_sparse(b, table, ids.ids, ids.weights, c.combiner);
}

Result<Output> indicator(ModelInputs& in, const FeatureColumn& c) {
  runtime::GraphBuilder& b = in.b;
  TROUPE_ASSIGN_OR_RETURN(CategoricalIds ids, categorical_ids(in, c.sources[0]));
  Output hot = ops::one_hot(b, ids.ids.values, c.sources[0].id_count());
  if (ids.weights.valid()) hot = ops::mul(b, hot, ops::expand_dims(b, ids.weights, 1));
  return ops::sum_by_row(b, hot, ids.ids);
}

}  // namespace

int variable_partitions(int64_t bytes, int max_parts) {
  return static_cast<int>(
      std::clamp<int64_t>(bytes / kMinSliceBytes, 1, std::max<int64_t>(max_parts, 1)));
}

Result<Output> input_layer(ModelInputs& in, const std::vector<FeatureColumn>& columns,
                           int64_t* width, int partitions) {
  TROUPE_RETURN_IF_ERROR(validate_columns(columns, /*for_linear=*/false));
  runtime::GraphBuilder& b = in.b;
  std::vector<Output> parts;
  *width = 0;
  for (const FeatureColumn& c : columns) {
    Output part;
    switch (c.kind) {
      case Kind::kNumeric: {
        TROUPE_ASSIGN_OR_RETURN(part, numeric_values(in, c));
        *width += c.width;
        break;
      }
      case Kind::kBucketized: {
        // One-hot buckets of each element, as TF's input_layer reads a bucketized column.
        TROUPE_RETURN_IF_ERROR(validate_column(c));
        TROUPE_ASSIGN_OR_RETURN(Output ids, dense_ids(in, c));
        part = ops::reduce_sum(b, ops::one_hot(b, ids, c.id_count()), {1});
        *width += c.id_count();
        break;
      }
      case Kind::kEmbedding: {
        TROUPE_ASSIGN_OR_RETURN(part, embedding(in, c, partitions));
        *width += c.dimension;
        break;
      }
      default: {  // indicator
        TROUPE_ASSIGN_OR_RETURN(part, indicator(in, c));
        *width += c.sources[0].id_count();
      }
    }
    parts.push_back(part);
  }
  if (!b.ok()) return b.status();
  return parts.size() == 1 ? parts[0] : ops::concat(b, parts, 1);
}

Result<Output> linear_model(ModelInputs& in, const std::vector<FeatureColumn>& columns,
                            int64_t units, std::vector<Output>* weights,
                            const std::string& scope_name, int partitions) {
  TROUPE_RETURN_IF_ERROR(validate_columns(columns, /*for_linear=*/true));
  runtime::GraphBuilder& b = in.b;
  std::vector<Output> terms;
  for (const FeatureColumn& c : columns) {
    const bool numeric = c.kind == Kind::kNumeric;
    Output x;
    CategoricalIds ids;
    if (numeric) {
      TROUPE_ASSIGN_OR_RETURN(x, numeric_values(in, c));
    } else {
      TROUPE_ASSIGN_OR_RETURN(ids, categorical_ids(in, c));
    }
    auto scope = b.name_scope(scope_name + "/" + c.name());
    const Shape shape{numeric ? c.width : c.id_count(), units};
    std::vector<Output> w =
        blocks(b, "weights", shape, ops::zeros(b, shape, DType::kFloat32), partitions);
    if (!b.ok()) return b.status();
    if (weights) weights->insert(weights->end(), w.begin(), w.end());
    // Categorical: a Gather of the rows of its ids, so that training updates only those rows.
    terms.push_back(numeric ? ops::matmul(b, x, w.size() == 1 ? w[0] : ops::concat(b, w, 0))
                            : ops::embedding_lookup_sparse(b, w, ids.ids, ids.weights, "sum"));
  }
  Output bias;
  {
    auto scope = b.name_scope(scope_name);
    bias = ops::variable(b, "bias_weights", Shape{units}, DType::kFloat32,
                         ops::zeros(b, Shape{units}, DType::kFloat32));
  }
  if (!b.ok()) return b.status();
  return ops::bias_add(b, terms.size() == 1 ? terms[0] : ops::add_n(b, terms), bias);
}

namespace {

// [batch, length * width] as [batch, length, width].
Output as_steps(runtime::GraphBuilder& b, Output x, int64_t width) {
  if (width == 1) return ops::expand_dims(b, x, 2);
  // A tensor of the wanted shape to reshape like: every width-th value, broadcast over a step.
  Output firsts = ops::strided_slice(
      b, x,
      {.begin = {0, 0}, .end = {0, 0}, .strides = {1, width}, .begin_mask = 3, .end_mask = 3});
  Output like =
      ops::add(b, ops::expand_dims(b, firsts, 2), ops::zeros(b, Shape{width}, b.dtype(x)));
  return ops::reshape_like(b, x, like);
}

// `sp` [batch, k] as the dense tensor, `missing` where it has no entry. A dense_shape fed in
// may be of unknown length: it is 2, so that the result's rank is known.
Output dense_of(runtime::GraphBuilder& b, const ops::SparseOutput& sp, Output missing) {
  return ops::sparse_to_dense(b, {sp.indices, sp.values, ops::reshape(b, sp.dense_shape, {2})},
                              missing);
}

// Entries a row of `sp` holds, as int64 [batch].
Output entries_by_row(runtime::GraphBuilder& b, const ops::SparseOutput& sp) {
  Output ones = ops::ones_like(b, ops::cast(b, sp.values, DType::kFloat32));
  return ops::cast(b, ops::sum_by_row(b, ones, sp), DType::kInt64);
}

Result<SequenceInput> sequence_numeric(ModelInputs& in, const FeatureColumn& c) {
  runtime::GraphBuilder& b = in.b;
  auto numbers = [&](Output values) -> Status {
    if (runtime::is_numeric(b.dtype(values))) return runtime::ok_status();
    return runtime::invalid_argument("feature '", c.key, "' holds ",
                                     runtime::dtype_name(b.dtype(values)),
                                     ": a numeric sequence takes numbers");
  };
  const ops::SparseOutput given = given_sparse(in, c.key);
  Output x, lengths;
  if (given.valid()) {
    TROUPE_RETURN_IF_ERROR(numbers(given.values));
    const ops::SparseOutput sp{given.indices, ops::cast(b, given.values, DType::kFloat32),
                               given.dense_shape};
    x = dense_of(b, sp, ops::scalar(b, 0, DType::kFloat32));
    lengths = entries_by_row(b, sp);
  } else {
    int64_t k = 0;
    TROUPE_ASSIGN_OR_RETURN(x, feature_rows(in, c.key, &k));
    TROUPE_RETURN_IF_ERROR(numbers(x));
    if (k % c.width != 0) {
      return column_error(
          c, std::to_string(k) + " values an example are not steps of " + std::to_string(c.width));
    }
    // Complete: every example has every value.
    x = ops::cast(b, x, DType::kFloat32);
    lengths = ops::cast(b, ops::reduce_sum(b, ops::ones_like(b, x), {1}), DType::kInt64);
  }
  if (c.width > 1) lengths = ops::floor_div(b, lengths, ops::scalar(b, c.width, DType::kInt64));
  return SequenceInput{as_steps(b, x, c.width), lengths};
}

// An embedding or indicator of a sequence categorical column: each step's id read alone.
Result<SequenceInput> sequence_categorical(ModelInputs& in, const FeatureColumn& c) {
  runtime::GraphBuilder& b = in.b;
  const FeatureColumn& source = c.sources[0];
  TROUPE_ASSIGN_OR_RETURN(CategoricalIds ids, categorical_ids(in, source));
  // The ids at their steps, -1 past an example's length.
  Output dense = dense_of(b, ids.ids, ops::scalar(b, -1, b.dtype(ids.ids.values)));
  Output present =
      ops::expand_dims(b,
                       ops::cast(b, ops::greater_equal(b, dense, ops::scalar(b, 0, b.dtype(dense))),
                                 DType::kFloat32),
                       2);
  Output safe = ops::maximum(b, dense, ops::scalar(b, 0, b.dtype(dense)));
  Output values;
  if (c.kind == Kind::kEmbedding) {
    values = ops::embedding_lookup(b, embedding_table(b, c, "sequence_input_layer", 1), safe);
  } else {
    values = ops::one_hot(b, safe, source.id_count());
  }
  return SequenceInput{ops::mul(b, values, present), entries_by_row(b, ids.ids)};
}

}  // namespace

Status validate_sequence_columns(const std::vector<FeatureColumn>& columns) {
  if (columns.empty()) return runtime::invalid_argument("no sequence feature columns");
  for (const FeatureColumn& c : columns) {
    TROUPE_RETURN_IF_ERROR(validate_column(c));
    const bool numeric = c.kind == Kind::kNumeric && c.sequence;
    const bool categorical =
        (c.kind == Kind::kEmbedding || c.kind == Kind::kIndicator) && c.sources[0].sequence;
    if (numeric || categorical) continue;
    return column_error(c, c.is_sequence()
                               ? "is categorical: a sequence is read through embedding_column or "
                                 "indicator_column"
                               : "is not a sequence column (sequence_numeric_column, "
                                 "sequence_categorical_column_with_*)");
  }
  return runtime::ok_status();
}

Result<SequenceInput> sequence_input_layer(ModelInputs& in,
                                           const std::vector<FeatureColumn>& columns,
                                           int64_t* width) {
  TROUPE_RETURN_IF_ERROR(validate_sequence_columns(columns));
  runtime::GraphBuilder& b = in.b;
  std::vector<Output> parts;
  Output lengths;
  *width = 0;
  for (const FeatureColumn& c : columns) {
    SequenceInput part;
    if (c.kind == Kind::kNumeric) {
      TROUPE_ASSIGN_OR_RETURN(part, sequence_numeric(in, c));
      *width += c.width;
    } else {
      TROUPE_ASSIGN_OR_RETURN(part, sequence_categorical(in, c));
      *width += c.kind == Kind::kEmbedding ? c.dimension : c.sources[0].id_count();
    }
    parts.push_back(part.values);
    if (!lengths.valid()) lengths = part.lengths;
  }
  if (!b.ok()) return b.status();
  return SequenceInput{parts.size() == 1 ? parts[0] : ops::concat(b, parts, 2), lengths};
}

}  // namespace troupe::estimators
