// SessionActor: owns the node actors of one graph (linked: they die with it) and runs steps. A
// step is a wave: the session sends fed values to their consumers and RunStep to the nodes with
// no inputs; each node fires when its inputs are in; the nodes that are fetched or targeted
// report back; the step ends when they all have. Many steps can be in flight (run_loop), up to
// the pipeline depth, each edge holding at most that many.
//
//   caf::actor s = spawn_session(system, spec);
//   request(s, infinite, run_atom::value, RunRequest{...})   -> RunResult
//   request(s, infinite, loop_atom::value, LoopRequest{...}) -> LoopResult
//   send(s, stop_atom::value)     // the running loop ends after the steps already started
//
// Plans (the pruned subgraph for one set of feeds, fetches and targets) are made once and cached.
#pragma once

#include <caf/all.hpp>

#include <map>
#include <memory>
#include <string>

#include "actors/shard_codec.h"
#include "actors/step_profiler.h"
#include "actors/sync_stamp.h"
#include "runtime/allocator.h"
#include "runtime/graph.h"
#include "runtime/variable_store.h"

namespace troupe::actors {

namespace net {
class DataChannel;  // net/data_channel.h
}

struct SessionSpec {
  std::shared_ptr<const runtime::Graph> graph;
  int pipeline_depth = 2;  // slots per edge; steps in flight in a loop
  std::shared_ptr<runtime::Allocator> allocator;
  std::shared_ptr<runtime::VariableStore> variables;
  // Servers of other processes by task ("/job:ps/task:0"); nodes placed there run there.
  std::map<std::string, caf::actor> remote_tasks;
  // Their data channels (net/data_channel.h), if they have them; a node uses one by its id.
  std::map<std::string, std::vector<std::shared_ptr<net::DataChannel>>> remote_channels;
  caf::duration remote_timeout;
  std::shared_ptr<StepProfiler> profiler;
  bool fuse_ops = true;  // MatMul/Conv2D -> BiasAdd (-> Relu) as one node (runtime/remapper.h)
  // This session as a replica of synchronous training (actors/sync_rounds.h): its remote calls
  // say so, and its updates wait for `aggregate` replicas' contributions.
  SyncTag sync;
  // A synchronous replica's: the global step each step read, which its updates carry.
  std::shared_ptr<SyncStamp> stamp;
};

caf::actor spawn_session(caf::actor_system& system, SessionSpec spec);

}  // namespace troupe::actors
