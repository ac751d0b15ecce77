// A stable 64-bit fingerprint of bytes, for hashing feature values to buckets: the same string
// gets the same bucket in every process, on every machine and in every version, so a model's
// hash buckets mean the same when it is restored or served elsewhere.
//
//   uint64_t f = fingerprint64("dog");                   // 0x... fixed forever
//   int64_t bucket = int64_t(f % num_buckets);           // TF's string_to_hash_bucket_fast
//   uint64_t c = fingerprint_cat64(f, fingerprint64("red"));  // a crossed feature's key
//
// FNV-1a over the bytes, then MurmurHash3's 64-bit finalizer so that every bit of the result
// depends on every input bit (FNV-1a alone leaves the low bits, which `% n` keeps, weak). It is
// not TF's FarmHash Fingerprint64: bucket ids differ from a TF model's. Thread-safe, pure.
#pragma once

#include <cstdint>
#include <string_view>

namespace troupe::runtime {

uint64_t fingerprint64(std::string_view bytes);
// Order matters: fingerprint_cat64(a, b) != fingerprint_cat64(b, a).
uint64_t fingerprint_cat64(uint64_t a, uint64_t b);

}  // namespace troupe::runtime
