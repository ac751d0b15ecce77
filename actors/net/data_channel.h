// DataChannel: the client side of the data channel, one TCP connection to a DataServer
// (net/data_server.h) that carries a session's shard calls as frames (net/frame.h), shared by
// the node actors of the session; and ChannelPoller, the one thread of a Runtime that waits on
// all of its channels.
//
//   auto ch = DataChannel::connect(rt, "127.0.0.1", port, timeout);  // shared_ptr
//   (*ch)->call(ChannelCall{...}, self, tag);   // self receives (channel_reply_atom, tag, Bytes)
//                                               // or (channel_reply_atom, tag, std::string why)
//
// Calls do not wait for the replies of those before them (pipelined, as HTTP/1.1's): where a
// link is slow, a step's calls to one server cost about one round trip, not one each. With a
// job secret in the Runtime, the channel proves membership before its first frame
// (job_secret.h), and its frames travel sealed (net/seal.h): a reply that fails to open ends the
// channel, logged with the peer and the word "integrity", and is never delivered. A frame longer
// than the limit, a short read or a timeout ends the channel with an error naming the peer; the
// calls fail, nothing crashes.
//
// Thread-safe (below).
#pragma once

#include <caf/all.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actors/net/frame.h"
#include "actors/runtime_system.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

namespace troupe::actors::net {

class IoThread;  // net/io_thread.h

// A shard call to send: its message references `inputs`, which it keeps alive.
struct ChannelCall {
  std::shared_ptr<capnp::MallocMessageBuilder> message;
  std::vector<runtime::Tensor> inputs;
};

// A reply to a DataChannel call, sent to the actor that made it: (channel_reply_atom, tag,
// runtime::Bytes) with the reply's frame, or (channel_reply_atom, tag, std::string) with why
// there is none.
using channel_reply_atom = caf::atom_constant<caf::atom("chreply")>;

class ChannelPoller;

// One connection to a DataServer, shared by the node actors of a session. A call is written by
// the calling thread as far as the socket takes it at once (usually all of it: no hand-over to
// another thread); the Runtime's one channel thread (ChannelPoller, below) writes what is left,
// reads the replies, which come in the calls' order, and sends each to the actor that made the
// call. A reply is awaited at most `timeout`, as is a write. The first error ends the channel:
// every call waiting and every later one gets it. Thread-safe; the last owner's destructor
// closes the connection.
class DataChannel {
 public:
  // `task`: the ps task it means to reach; a server that says it is another is refused.
  static runtime::Result<std::shared_ptr<DataChannel>> connect(Runtime& runtime,
                                                               const std::string& host,
                                                               uint16_t port,
                                                               std::chrono::milliseconds timeout,
                                                               const std::string& task = "");
  ~DataChannel();
  DataChannel(const DataChannel&) = delete;
  DataChannel& operator=(const DataChannel&) = delete;

  // Sends `call`; its reply goes to `reply_to`, tagged `tag`.
  void call(ChannelCall call, const caf::actor& reply_to, uint64_t tag);
  // Until resume(), every call waiting and every call made fails at once with `why`; the
  // replies of those that were waiting, when they come, go to no one. A replica that stops need
  // not wait out a synchronous round it has sent its part to. The stream stays in step: after
  // resume(), calls are sent again, their replies behind the abandoned ones'.
  void abandon(const std::string& why);
  void resume();
  // What the channel carried since it opened: calls made, and the frames' bytes each way
  // (headers included), as the benchmarks' bytes-per-step and the tests read them.
  struct Traffic {
    uint64_t calls = 0;
    uint64_t bytes_sent = 0;
    uint64_t bytes_received = 0;
  };
  Traffic traffic() const { return {calls_.load(), sent_.load(), received_.load()}; }

 private:
  friend class ChannelPoller;
  DataChannel(int fd, std::shared_ptr<ChannelPoller> poller, std::string peer,
              std::chrono::milliseconds timeout);
  // What the poller waits for on its behalf.
  enum class Want { kNothing, kReplies, kRoom };  // kRoom: replies, and room to write
  Want wants();
  Want wants_locked() const;
  // On the poller's thread:
  void on_readable();
  void on_writable();
  // When the oldest call waiting fails unanswered; with none waiting, a timeout from now (a
  // call may come meanwhile): when the poller must look again.
  std::chrono::steady_clock::time_point deadline();
  bool write_pending();  // false on an error (the channel is then broken); mu_ held
  void watch_locked();   // the poller waits for what the channel needs now; mu_ held
  void fail(const std::string& why);
  void fail_locked(const std::string& why);

  const int fd_;
  const std::shared_ptr<ChannelPoller> poller_;
  uint64_t id_ = 0;  // the poller's name for it
  const std::string peer_;
  const std::chrono::milliseconds timeout_;
  FrameReader reader_;              // the poller's thread's alone
  std::unique_ptr<Opener> opener_;  // with a job secret: the replies are sealed; the poller's
  std::unique_ptr<Sealer> sealer_;  // and the calls; used under mu_
  std::mutex mu_;
  struct Waiting {
    caf::weak_actor_ptr to;
    uint64_t tag = 0;
    std::chrono::steady_clock::time_point since;  // sent, or the reply before it came
  };
  std::deque<Waiting> waiting_;     // sent and not yet answered, oldest first
  std::deque<OutFrame> out_;        // written in part or not at all, in order
  std::string broken_;              // why the connection is unusable, once it is
  std::string abandoned_;           // why calls fail at once, until resume()
  Want watching_ = Want::kNothing;  // what the poller was last told
  std::atomic<uint64_t> calls_{0}, sent_{0}, received_{0};
};

// The one thread of a Runtime that waits on every DataChannel's socket (an Asio loop,
// net/io_thread.h), as a DataServer's thread waits on its peers: a process's channels to its ps
// tasks cost one thread, however many tasks there are. It reads replies and hands them to their
// callers, writes what calls left unwritten, and fails a channel whose oldest call waits past
// its timeout (it looks at least once a second and once a timeout). Runtime::channel_poller()
// starts it on first use; the channels share it, so it outlives the last of them.
class ChannelPoller {
 public:
  static runtime::Result<std::shared_ptr<ChannelPoller>> start();
  ~ChannelPoller();
  ChannelPoller(const ChannelPoller&) = delete;
  ChannelPoller& operator=(const ChannelPoller&) = delete;

  // Watches `channel`'s socket `fd` from now on, for replies.
  runtime::Status add(DataChannel* channel, int fd);
  // After it returns, the thread no longer calls the channel. The channel closes `fd` itself.
  void remove(uint64_t id);
  // The channel wants something else now (DataChannel::wants()). Any thread.
  void watch(uint64_t id);

 private:
  struct Watched;
  struct Timer;
  ChannelPoller() = default;
  // On the poller's thread:
  void arm(uint64_t id, Watched& w);
  void on_ready(uint64_t id, bool room, bool aborted);
  void check_deadlines();

  std::unique_ptr<IoThread> io_;  // first in, last out: the rest lives on its context
  std::unique_ptr<Timer> timer_;
  std::map<uint64_t, std::unique_ptr<Watched>> channels_;  // the thread's alone
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace troupe::actors::net
