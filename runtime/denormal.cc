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

ScopedFlushDenormal::ScopedFlushDenormal() : saved_(_mm_getcsr()) {
  _mm_setcsr(saved_ | kFlushToZero | kDenormalsAreZero);
}
ScopedFlushDenormal::~ScopedFlushDenormal() { _mm_setcsr(saved_); }
#else
ScopedFlushDenormal::ScopedFlushDenormal() = default;
ScopedFlushDenormal::~ScopedFlushDenormal() = default;
#endif

}  // namespace troupe::runtime
