// The Cap'n Proto layer under the codecs: tensors inside bigger messages (graphs, checkpoints,
// shard calls) and the reading and writing of whole messages with every failure a Status.
// For codec code only (runtime/, actors/); kernels and user code use tensor_codec.h.
//
//   capnp::MallocMessageBuilder m;
//   auto call = m.initRoot<schema::ShardCall>();
//   TROUPE_RETURN_IF_ERROR(write_tensor(t, call.initInputs(1)[0], m.getOrphanage()));
//   TROUPE_RETURN_IF_ERROR(write_message(m, &blob));
//
// Thread-safe: no shared state.
#pragma once

#include <capnp/message.h>
#include <capnp/serialize.h>

#include <functional>
#include <memory>
#include <vector>

#include "runtime/status.h"
#include "runtime/tensor.h"
#include "schema/tensor.capnp.h"

namespace troupe::runtime {

Result<schema::DType> dtype_to_wire(DType t);
bool dtype_from_wire(schema::DType t, DType* out);

// Fills `msg` from `t`; the data is referenced, not copied, until the message is written.
Status write_tensor(const Tensor& t, schema::Tensor::Builder msg, capnp::Orphanage orphanage);
// Validates and reads; with `keep_alive`, the tensor borrows the message's data in place.
Result<Tensor> read_tensor(schema::Tensor::Reader msg, std::shared_ptr<const void> keep_alive);
// Writes a whole message (flat, with its segment table) into `out`.
Status write_message(capnp::MessageBuilder& builder, std::vector<char>* out);
// Bytes that something keeps alive: a frame read from a socket into a buffer of its own.
struct Bytes {
  std::shared_ptr<const void> owner;
  const char* data = nullptr;
  size_t size = 0;
};
// Opens a flat message held by `bytes` and calls `read` with it and a keep-alive for zero-copy
// tensors; a malformed message is an error, never an exception.
Status read_blob(
    const Bytes& bytes,
    const std::function<Status(capnp::MessageReader&, std::shared_ptr<const void>)>& read);
Status read_blob(
    std::shared_ptr<const std::vector<char>> bytes,
    const std::function<Status(capnp::MessageReader&, std::shared_ptr<const void>)>& read);

}  // namespace troupe::runtime
