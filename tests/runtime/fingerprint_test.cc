// The fingerprint behind hash buckets is pinned: a model's buckets must mean the same in every
// process and every version. The values were computed by an independent implementation of the
// documented formula (FNV-1a 64, then MurmurHash3's fmix64).
#include "runtime/fingerprint.h"

#include <doctest/doctest.h>

using troupe::runtime::fingerprint64;
using troupe::runtime::fingerprint_cat64;

TEST_CASE("fingerprint64 and fingerprint_cat64 are pinned") {
  CHECK(fingerprint64("") == 0xefd01f60ba992926ULL);
  CHECK(fingerprint64("dog") == 0xf3805bf28273c516ULL);
  CHECK(fingerprint64("Private") == 0x6bd604d8e3d5a029ULL);
  CHECK(fingerprint64("Self-emp-not-inc") == 0xe59843ddaee2314dULL);
  CHECK(fingerprint_cat64(fingerprint64("dog"), fingerprint64("red")) == 0xf8cd3bba84456989ULL);
  CHECK(fingerprint_cat64(fingerprint64("red"), fingerprint64("dog")) !=
        fingerprint_cat64(fingerprint64("dog"), fingerprint64("red")));
}
