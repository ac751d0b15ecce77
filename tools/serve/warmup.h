// TF Serving's warm-up: an export's assets.extra/tf_serving_warmup_requests, a TFRecord file of
// PredictionLog protos (predict, classify, regress or multi-inference requests,
// schema/serving_apis.proto), run against a newly loaded version before it becomes AVAILABLE, so
// that its first real request finds its sessions, plans and buffers made.
//
//   auto n = run_warmup(export_dir, *predictor);   // Result<int64_t>: the requests run
//
// No file: nothing to run (0). A damaged record, a request of an unknown signature or input, or
// a failed run is the error, naming the file and the record: the version does not load, as TF
// Serving's does not. At most kMaxWarmupRecords are read. Plain function; thread-safe for
// distinct predictors.
#pragma once

#include <cstdint>
#include <string>

#include "estimators/export/predictor.h"
#include "runtime/status.h"

namespace troupe::serve {

inline constexpr const char* kWarmupFile = "assets.extra/tf_serving_warmup_requests";
inline constexpr int64_t kMaxWarmupRecords = 1000;  // TF Serving's limit

runtime::Result<int64_t> run_warmup(const std::string& export_dir, serving::Predictor& predictor);

}  // namespace troupe::serve
