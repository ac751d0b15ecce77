// ParameterShardActor: owns a partition of the variables (and their optimizer slots) in a
// VariableStore. In its own process, node actors read and update the store directly (no message
// per variable op); workers in other processes send it shard calls, which it runs against the
// store, so that updates are applied where the variables live, as TF applies them on the ps.
//
//   auto store = std::make_shared<runtime::VariableStore>();
//   caf::actor shard = system.spawn(parameter_shard, store, data_port);   // 0: no data channel
//   // remote: (call_atom, std::vector<char> shard_call) -> std::vector<char> shard_reply
//   //         (data_port_atom) -> uint16_t, where its data channel listens (data_channel.h)
//
// The store is thread-safe; the actor serialises remote calls.
#pragma once

#include <caf/all.hpp>

#include <memory>

#include "runtime/variable_store.h"

namespace troupe::actors {

caf::behavior parameter_shard(caf::event_based_actor* self,
                              std::shared_ptr<runtime::VariableStore> store, uint16_t data_port);

}  // namespace troupe::actors
