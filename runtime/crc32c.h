// CRC-32C (Castagnoli), as TFRecord files, TensorBoard event files and troupe's checkpoints and
// record files use it, and TF's "masked" form that framing stores.
//
//   uint32_t crc = crc32c(data, size);                 // crc32c("123456789") == 0xE3069283
//   uint32_t stored = mask_crc32c(crc);                // what a TFRecord frame holds
//   crc = crc32c_extend(crc, more, more_size);         // the CRC of data + more
//
// Thread-safe: the tables are built once, at first use.
#pragma once

#include <cstddef>
#include <cstdint>

namespace troupe::runtime {

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size);
inline uint32_t crc32c(const void* data, size_t size) { return crc32c_extend(0, data, size); }

// TF masks stored CRCs so that the CRC of data that itself holds CRCs stays well distributed.
inline uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t unmask_crc32c(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace troupe::runtime
