// The dense input layer of the canned models over numeric features: each feature cast to
// float32, flattened per example, standardized when it has statistics, concatenated in name
// order (or the order of `keys`), as tf.feature_column.input_layer over numeric columns with
// a normalizer.
//
//   TROUPE_ASSIGN_OR_RETURN(Standardization s, standardization(train_data));   // one pass
//   options.standardize = s;                                   // DNNOptions, LinearOptions
//   int64_t width = 0;
//   TROUPE_ASSIGN_OR_RETURN(Output x, dense_input_layer(in, keys, options.standardize, &width));
//
// A standardized feature becomes (x - mean) / scale with the training data's statistics, held
// in the non-trainable variables input_layer/<feature>/mean and .../scale, so that they are
// saved with the model's checkpoints and exports.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "estimators/input/dataset.h"
#include "estimators/model_fn.h"

namespace troupe::estimators {

struct FeatureStats {
  std::vector<float> mean;   // one per element of an example
  std::vector<float> scale;  // the population standard deviation, 1 where it is 0
};
// By feature name; features without an entry pass unchanged.
using Standardization = std::map<std::string, FeatureStats>;

// The statistics of every numeric feature of `data` (not its sparse ones), and of the label
// columns named in `labels` (regressors' targets, head.h), read through once.
runtime::Result<Standardization> standardization(const input::Dataset& data,
                                                 const std::vector<std::string>& labels = {});

struct FeatureColumn;
// A numeric column (feature_column.h) per feature of `keys` (empty: every feature but
// `except`, a weight column), with its statistics from `standardize`; an error names a missing
// or text feature.
runtime::Result<std::vector<FeatureColumn>> numeric_columns(const ModelInputs& in,
                                                            const std::vector<std::string>& keys,
                                                            const Standardization& standardize,
                                                            const std::string& except = "");

// input_layer (feature_column.h) of numeric_columns: [batch, width]; an error names a missing,
// text or variably shaped feature, or statistics of another width than the feature's.
runtime::Result<runtime::Output> dense_input_layer(ModelInputs& in,
                                                   const std::vector<std::string>& keys,
                                                   const Standardization& standardize,
                                                   int64_t* width, const std::string& except = "");

}  // namespace troupe::estimators
