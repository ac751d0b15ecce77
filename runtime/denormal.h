// Flushes denormal floats to zero on this thread while in scope, as TensorFlow's executor does:
// optimizer slots (Adam's v, say) decay into the denormal range, where arithmetic is many times
// slower, and no model needs those values.
//
//   { ScopedFlushDenormal flush; run_kernels(); }   // the previous mode comes back at '}'
//
// Affects the calling thread only. A no-op on CPUs without the SSE control register.
#pragma once

namespace troupe::runtime {

class ScopedFlushDenormal {
 public:
  ScopedFlushDenormal();
  ~ScopedFlushDenormal();
  ScopedFlushDenormal(const ScopedFlushDenormal&) = delete;
  ScopedFlushDenormal& operator=(const ScopedFlushDenormal&) = delete;

 private:
  unsigned saved_ = 0;
};

}  // namespace troupe::runtime
