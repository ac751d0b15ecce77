#include "runtime/fingerprint.h"

namespace troupe::runtime {

namespace {

uint64_t fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

}  // namespace

uint64_t fingerprint64(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a's offset basis and prime
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return fmix64(h);
}

uint64_t fingerprint_cat64(uint64_t a, uint64_t b) {
  // Golden-ratio multiplier: a's bits spread before b joins, so that swapping them changes it.
  return fmix64(a * 0x9e3779b97f4a7c15ULL ^ b);
}

}  // namespace troupe::runtime
