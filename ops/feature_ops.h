// Ops that turn raw feature values into categorical ids, the pieces feature columns
// (estimators/feature_column.h) are built of. Ids are int64 and keep the input's shape, so a
// column with k values per example ([batch, k]) gives k ids per example.
//
//   Output words = placeholder(b, DType::kString, Shape{-1}, "word");
//   Output ids = string_to_hash_bucket(b, words, 1000);          // fingerprint64(w) % 1000
//   Output age_bucket = bucketize(b, age, {18, 25, 35, 50});     // 0..4
//   Output color = vocabulary_lookup(b, colors, vocab, /*num_oov_buckets=*/1, "color");
//   Output digit = categorical_identity(b, ints, 10, "digit");
//   Output pair = hash_cross(b, {color, age_bucket}, 1000);      // [batch, k_color * k_age]
//
// `column` names the feature in errors: a value outside a vocabulary with no out-of-vocabulary
// bucket, or an id outside [0, num_buckets), fails the step with the column, the value and its
// row in the batch. Hashing is runtime/fingerprint.h's, stable across processes.
#pragma once

#include <string>
#include <vector>

#include "ops/builder_names.h"
#include "runtime/tensor.h"

namespace troupe::ops {

using runtime::Tensor;

// Strings to fingerprint64 % num_buckets, as TF's string_to_hash_bucket_fast; integers hash by
// their decimal text (so 7 and "7" share a bucket).
Output string_to_hash_bucket(GraphBuilder& b, Output strings, int64_t num_buckets,
                             const std::string& name = "");
// The number of boundaries below or at each value: boundaries (ascending) [a, b] put x < a in 0,
// a <= x < b in 1 and x >= b in 2, as TF's Bucketize.
Output bucketize(GraphBuilder& b, Output x, const std::vector<double>& boundaries,
                 const std::string& name = "");
// Each value's position in `vocabulary` (a string or int64 tensor of distinct entries, the
// dtype of `values`); values outside it go to vocabulary.size() + fingerprint % num_oov_buckets,
// or to `default_value` when that is >= 0; with neither they are an error.
Output vocabulary_lookup(GraphBuilder& b, Output values, const Tensor& vocabulary,
                         int64_t num_oov_buckets, const std::string& column,
                         int64_t default_value = -1);
// Integer values used as ids: each must be in [0, num_buckets) unless `default_value` >= 0
// replaces the others.
Output categorical_identity(GraphBuilder& b, Output values, int64_t num_buckets,
                            const std::string& column, int64_t default_value = -1);
// The crossed ids of several categorical inputs, each [batch] or [batch, k_i]: for every
// example, every combination of one value from each input (the first input varies slowest),
// hashed to [0, num_buckets). Strings cross by their fingerprint, integers by their value. A
// combination with a missing value ("" or -1) is -1, no cross, as TF's crossed columns drop it.
Output hash_cross(GraphBuilder& b, const std::vector<Output>& inputs, int64_t num_buckets,
                  const std::string& name = "");

}  // namespace troupe::ops
