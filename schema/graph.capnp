# A graph of ops as it is saved and sent: nodes with their inputs by name and their attributes.
# Readers rebuild it through a GraphBuilder, so a file or a peer cannot smuggle in a node that
# would fail shape inference.
@0xb026e5f9f9a2e39d;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("troupe::schema");

using import "tensor.capnp".Tensor;
using import "tensor.capnp".DType;

struct Shape {
  unknownRank @0 :Bool;
  dims @1 :List(Int64);  # -1 for an unknown dimension
}

struct AttrValue {
  union {
    b @0 :Bool;
    i @1 :Int64;
    f @2 :Float64;
    s @3 :Text;
    dtype @4 :DType;
    shape @5 :Shape;
    ints @6 :List(Int64);
    floats @7 :List(Float64);
    tensor @8 :Tensor;
  }
}

struct Attr {
  name @0 :Text;
  value @1 :AttrValue;
}

struct NodeDef {
  name @0 :Text;
  op @1 :Text;
  inputs @2 :List(Text);         # "producer:index"
  controlInputs @3 :List(Text);  # node names
  attrs @4 :List(Attr);
  device @5 :Text;
}

struct Collection {
  key @0 :Text;
  nodes @1 :List(Text);
}

struct GraphDef {
  nodes @0 :List(NodeDef);
  hasSeed @1 :Bool;
  seed @2 :Int64;
  collections @3 :List(Collection);
}

# A stateful op run on a parameter shard for a remote worker: the node and its input values.
struct ShardCall {
  node @0 :NodeDef;
  inputs @1 :List(Tensor);
  # Synchronous replication (actors/sync_rounds.h): which replica calls, and for an update, how
  # many replicas' contributions make one, and how long a round waits for them.
  replica @2 :Int32 = -1;
  aggregate @3 :UInt32 = 0;
  aggregateTimeoutMs @4 :UInt32 = 0;
  # The caller needs no outputs (an update only ordered by control edges): the reply carries
  # none, so that a step moves each variable down once, not twice.
  discardOutputs @5 :Bool = false;
  # Reads of further variables on this shard (nodes without inputs), run after `node`: their
  # outputs follow its own in the reply, so that a step's reads of one task are one call.
  reads @6 :List(NodeDef);
  # Updates of further variables on this shard, each with its inputs, run in order after `node`
  # (itself an update) by a call that discards its outputs: a step's updates of one task are
  # one call.
  updates @7 :List(ShardUpdate);
  # Elastic synchronous training: a round aggregates the live replicas, at least this many (0:
  # rounds of `aggregate`, fewer only once replicas are gone).
  minAggregate @8 :UInt32 = 0;
  # A replica of asynchronous training: named for the shard's view of who trains, no rounds.
  asynchronous @9 :Bool = false;
  # Synchronous training: the global step the replica read in this step (its updates' round on
  # every shard); -1: none read, rounds by the replica's reads of each variable.
  stamp @10 :Int64 = -1;
}

struct ShardUpdate {
  node @0 :NodeDef;
  inputs @1 :List(Tensor);
}

struct ShardReply {
  error @0 :Text;  # empty on success
  outputs @1 :List(Tensor);
}
