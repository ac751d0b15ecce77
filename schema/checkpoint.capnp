# A checkpoint: every variable (and optimizer slot) of a model at one global step. Stored as one
# TFRecord frame after an 8-byte magic (runtime/checkpoint.h), with a CRC-32C per tensor on top
# of the frame's own, so a damaged tensor is named.
@0xd3a1c0f27e5b4a96;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("troupe::schema");

using import "tensor.capnp".Tensor;

struct Checkpoint {
  globalStep @0 :Int64;
  entries @1 :List(Entry);
  # Metrics at the time of saving (for keeping the best checkpoints), by name.
  metricNames @2 :List(Text);
  metricValues @3 :List(Float64);
  # Where the training input stood: batches consumed from a dataset that hashes to
  # inputFingerprint, so that a resumed run reads on from there (0: from the start).
  inputBatches @4 :Int64;
  inputFingerprint @5 :UInt64;

  struct Entry {
    name @0 :Text;
    tensor @1 :Tensor;
    # CRC-32C of the element bytes (numeric) or of each string in turn (string).
    crc32c @2 :UInt32;
  }
}
