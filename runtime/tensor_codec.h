// Tensor <-> Cap'n Proto (schema/tensor.capnp): the bytes a tensor travels and is stored as.
//
//   std::vector<char> blob;
//   Status s = encode_tensor(t, &blob);                   // one copy: the data into the blob
//   auto shared = std::make_shared<const std::vector<char>>(std::move(blob));
//   Result<Tensor> back = decode_tensor(shared);          // zero-copy: reads in place
//
// Decoding checks everything a peer could get wrong (truncation, a bad dtype, a shape that
// disagrees with the data) and returns an error naming it; it never crashes. The decoded tensor
// keeps the blob alive and treats it as read-only. Thread-safe.
#pragma once

#include <memory>
#include <vector>

#include "runtime/status.h"
#include "runtime/tensor.h"

namespace troupe::runtime {

// Writes `t` as one flat Cap'n Proto message into `out` (replacing its contents).
Status encode_tensor(const Tensor& t, std::vector<char>* out);
// Reads a message in place; the tensor's data points into `bytes` when it is 8-byte aligned.
Result<Tensor> decode_tensor(std::shared_ptr<const std::vector<char>> bytes);
// Reads a message from memory the caller keeps; the tensor gets its own copy of the data.
Result<Tensor> decode_tensor_copy(const void* data, size_t size);

}  // namespace troupe::runtime
