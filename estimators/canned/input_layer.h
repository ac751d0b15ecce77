// The dense input layer of the canned models over numeric features: each feature cast to
// float32, flattened per example, concatenated in name order (or the order of `keys`), as
// tf.feature_column.input_layer over numeric columns.
//
//   int64_t width = 0;
//   TROUPE_ASSIGN_OR_RETURN(Output x, dense_input_layer(in, options.feature_keys, &width));
#pragma once

#include <string>
#include <vector>

#include "estimators/model_fn.h"

namespace troupe::estimators {

// [batch, width]; an error names a missing, text or variably shaped feature.
runtime::Result<runtime::Output> dense_input_layer(ModelInputs& in,
                                                   const std::vector<std::string>& keys,
                                                   int64_t* width);

}  // namespace troupe::estimators
