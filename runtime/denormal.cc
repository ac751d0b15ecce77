#include "runtime/denormal.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace troupe::runtime {

#if defined(__SSE__)
namespace {
constexpr unsigned kFlushToZero = 0x8000;     // MXCSR.FTZ
constexpr unsigned kDenormalsAreZero = 0x40;  // MXCSR.DAZ
}  // namespace

// Writing MXCSR costs tens of cycles; a thread that already flushes (troupe's CAF workers do)
// skips both writes.
ScopedFlushDenormal::ScopedFlushDenormal() : saved_(_mm_getcsr()) {
  const unsigned flushing = saved_ | kFlushToZero | kDenormalsAreZero;
  if (flushing != saved_) _mm_setcsr(flushing);
}
ScopedFlushDenormal::~ScopedFlushDenormal() {
  if (_mm_getcsr() != saved_) _mm_setcsr(saved_);
}
#else
ScopedFlushDenormal::ScopedFlushDenormal() = default;
ScopedFlushDenormal::~ScopedFlushDenormal() = default;
#endif

}  // namespace troupe::runtime
