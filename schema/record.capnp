# One record of a troupe record file: a chunk of examples, each named component a tensor with the
# examples along dimension 0. Records are framed as TFRecord frames (runtime/record_io.h).
@0xb1f0e4c5d2a39b71;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("troupe::schema");

using import "tensor.capnp".Tensor;

struct Record {
  names @0 :List(Text);
  tensors @1 :List(Tensor);
}
