# A tensor on the wire and on disk: the one format every process and file of troupe shares.
# Readers use `data` in place (zero-copy); writers reference the tensor's buffer as its own segment.
@0xc6ed8cf8f1ec9c66;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("troupe::schema");

enum DType {
  float32 @0;
  float64 @1;
  int32 @2;
  int64 @3;
  uint8 @4;
  bool @5;
  string @6;
}

struct Tensor {
  dtype @0 :DType;
  shape @1 :List(Int64);
  # Row-major element bytes, little-endian; empty for string tensors.
  data @2 :Data;
  # One entry per element for string tensors; empty otherwise.
  strings @3 :List(Data);
}
