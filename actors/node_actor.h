// NodeActor: one per graph node per session, spawned once and reused for every step. It collects
// the packets of a step (one per input and control edge of the running plan), fires its kernel
// when all have arrived and every output edge has credit, and sends one packet per output edge.
// A failed kernel sends StepError to the session and "dead" packets downstream, so the step ends
// everywhere and the next one starts clean. In a plan whose NodePlan names a fused node
// (runtime/remapper.h) it runs that node's kernel on the chain's inputs instead of its own.
//
//   caf::actor n = spawn_node_actor(session_self, spec);   // linked to the session
//   self->send(n, plan);                     // NodePlan, once per plan
//   self->send(n, RunStep{step, plan.plan});  // a source node
//
// Runs on whichever CAF worker holds it; its state is its own.
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

struct NodeSpec {
  std::shared_ptr<const runtime::Graph> graph;
  int node = -1;
  caf::actor session;
  std::shared_ptr<runtime::Allocator> allocator;      // the device's
  std::shared_ptr<runtime::VariableStore> variables;  // the in-process shard's
  caf::actor remote;  // a server in another process that runs this node; invalid: run here
  std::shared_ptr<net::DataChannel> channel;  // its data channel, if it has one: calls go there
  caf::duration remote_timeout;
  std::shared_ptr<StepProfiler> profiler;  // the session's
  SyncTag sync;                            // what its remote calls say of synchronous replication
  // The servers of the cluster's other tasks, by task: where a loop's nodes placed there run.
  std::map<std::string, caf::actor> servers;
  // A synchronous replica's: set by its step's read of global_step, carried by its updates.
  std::shared_ptr<SyncStamp> stamp;
};

caf::actor spawn_node_actor(caf::event_based_actor* parent, NodeSpec spec);

}  // namespace troupe::actors
