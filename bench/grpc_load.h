// serve_bench's gRPC load: `connections` channels to 127.0.0.1:port, each with one Predict in
// flight for `seconds` (gRPC's callback API, so that a few threads drive them all), as wrk keeps
// one HTTP request in flight per connection.
//
//   GrpcLoad r = grpc_load(8500, 64, 5.0, request);   // r.rps, r.p50_ms, r.p99_ms, r.errors
#pragma once

#include <cstdint>

#include "schema/serving_apis.pb.h"

namespace troupe::bench {

struct GrpcLoad {
  double rps = 0, p50_ms = 0, p99_ms = 0;
  long errors = 0;
};

GrpcLoad grpc_load(uint16_t port, int connections, double seconds,
                   const tensorflow::serving::PredictRequest& request);

}  // namespace troupe::bench
