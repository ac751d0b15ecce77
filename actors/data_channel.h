// The data channel: TCP connections beside CAF's that carry shard calls between processes as
// length-prefixed byte blobs. CAF's middleman handles a blob five times on its way (serialise,
// buffer, zero the read buffer, deserialise, copy); here the kernel copies it once on each side,
// which is what moving tensors to and from a parameter server needs (bench/actors_bench:
// tensor_loopback). CAF's connection stays for monitoring and heartbeats.
//
//   auto data = DataServer::listen(rt, "127.0.0.1", 0);     // server (0: any free port)
//   data->serve([calls](const runtime::Bytes& call, const DataServer::Later& later) {
//     return calls->call(call, later);   // accepts; runs each call with the handler
//   });
//
//   auto ch = DataChannel::connect(rt, "127.0.0.1", port, timeout);  // client: shared_ptr
//   (*ch)->call(ChannelCall{...}, self, tag);   // self receives (channel_reply_atom, tag, Bytes)
//                                               // or (channel_reply_atom, tag, std::string why)
//
// Calls do not wait for the replies of those before them (pipelined, as HTTP/1.1's): where a
// link is slow, a step's calls to one server cost about one round trip, not one each.
//
// A frame is an 8-byte little-endian length and that many bytes (a shard call or reply,
// shard_codec.h). A call's and a reply's segments are written as they are (the inputs' or the
// outputs' data from where it lies: a variable's value from the ps's store) and a frame is read
// into a buffer of its own, decoded in place: each side's kernel copies the bytes once, nothing
// else does. A frame longer than the limit, a short read or a timeout ends the connection with
// an error naming the peer; the call fails, nothing crashes.
//
// With a job secret in the Runtime, both sides prove membership before the first frame (an
// HMAC-SHA256 challenge-response, job_secret.h); a peer that cannot is closed and logged with
// its address, and nothing it sent reaches the shard.
//
// The server is event driven, as CAF's multiplexer: one thread accepts, and each of the others
// waits on the connections it was given (epoll; a new connection has a thread of its own, up to
// a limit, then goes to the thread serving the fewest), reads frames as their bytes arrive,
// runs each call itself (the handler: ShardCalls, thread-safe), and writes the reply, or the
// reply the handler gives later (a synchronous replica's update, answered when the other
// replicas have sent their updates). Replicas' calls so run side by side, each on the core its
// bytes woke, as TF's ps runs its ops on a pool: with one thread for all, a replica whose call
// came while another's ran waited, and its core idled (2 replicas on 2 cores: 9% idle, 2-4%
// now). Told to follow its peers, a thread serving one connection runs on the core that
// connection's packets arrive on (DataServerOptions::follow_incoming_cpu). A connection's calls run
// one at a time, in order, and while a reply is awaited or being written nothing more is read from
// that peer. It bounds what peers can take (DataServerOptions): connections (one over the limit is
// closed at once, with a log line naming its address), idle time (not counted while a reply is
// awaited), frame size, and a frame's buffer grows only as its bytes arrive, so a header claiming
// gigabytes costs nothing until they come. A failed accept (EMFILE, ENFILE, ENOMEM) is logged and
// retried with a back-off. The server goes on.
#pragma once

#include <sched.h>

#include <caf/all.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "actors/runtime_system.h"
#include "actors/shard_codec.h"
#include "runtime/status.h"
#include "runtime/tensor.h"
#include "runtime/tensor_wire.h"

namespace troupe::actors {

struct DataServerOptions {
  int max_connections = 64;
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(10)};  // without a byte either way
  uint64_t max_frame_bytes = uint64_t(1) << 32;
  // Each connection has a thread of its own until this many serve them; then they share.
  int threads = 16;
  // A thread serving one connection runs on the core that connection's packets arrive on
  // (SO_INCOMING_CPU), where its cache holds them. On one machine that is the calling replica's
  // core, idle while it waits for the reply: with replicas pinned to cores of their own, their
  // calls run as if the shard lived in their process (troupe server --pin). Off, the scheduler
  // places the threads, and may queue two replicas' calls on one core while the other idles.
  bool follow_incoming_cpu = false;
};

// A shard call to send: its message references `inputs`, which it keeps alive.
struct ChannelCall {
  std::shared_ptr<capnp::MallocMessageBuilder> message;
  std::vector<runtime::Tensor> inputs;
};

using data_port_atom = caf::atom_constant<caf::atom("dataport")>;

struct OutFrame;  // a frame being written (data_channel.cc)

class DataServer {
 public:
  static runtime::Result<std::unique_ptr<DataServer>> listen(Runtime& runtime,
                                                             const std::string& host, uint16_t port,
                                                             DataServerOptions options = {});
  ~DataServer();
  DataServer(const DataServer&) = delete;
  DataServer& operator=(const DataServer&) = delete;

  // A reply the handler gives after it has returned; from any thread.
  using Later = std::function<void(ShardReply)>;
  // Runs a call's frame on the server's thread: its reply, or nothing when `later` (the
  // connection's, made once) gets it; the handler copies `later` only then.
  using Handler =
      std::function<std::optional<ShardReply>(const runtime::Bytes& frame, const Later& later)>;

  uint16_t port() const { return port_; }
  // Accepts connections from now on; each one's calls run with `handler`, one at a time. An
  // error when the server's thread cannot be started.
  runtime::Status serve(Handler handler);
  // Connections open now (for tests and monitoring).
  int connections() const { return open_; }

 private:
  struct Connection;
  struct Replies;
  class Loop;
  DataServer(Runtime& runtime, int listen_fd, uint16_t port, DataServerOptions options);
  // On the thread that watches the listening socket:
  void accept_all(Loop& acceptor);
  Loop& loop_for_next();

  Runtime& runtime_;
  const int listen_fd_;
  const uint16_t port_;
  const DataServerOptions options_;
  Handler handler_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> open_{0};
  std::unique_ptr<Loop> acceptor_;
  std::vector<std::unique_ptr<Loop>> loops_;  // serving connections; the acceptor adds them
  uint64_t next_id_ = 2;  // 0 and 1 name the listening socket and the wake-up in epoll
  std::chrono::steady_clock::time_point accept_again_{};  // after a failed accept
  std::chrono::milliseconds backoff_{10};
  cpu_set_t cores_{};  // where the process may run, as it started: a thread following none
};

// A reply to a DataChannel call, sent to the actor that made it: (channel_reply_atom, tag,
// runtime::Bytes) with the reply's frame, or (channel_reply_atom, tag, std::string) with why
// there is none.
using channel_reply_atom = caf::atom_constant<caf::atom("chreply")>;

// Reads length-prefixed frames from a non-blocking socket as their bytes come: the header, then
// a body whose buffer grows as the bytes arrive (a header is a claim, not a promise). The
// server's thread and the channels' poller each keep one per connection.
class FrameReader {
 public:
  enum class Got { kFrame, kAgain, kEnd };  // kEnd: closed, failed or refused; why() says
  // Reads until a whole frame is in `frame` or the socket has nothing more for now.
  Got read(int fd, uint64_t max_bytes, runtime::Bytes* frame);
  const std::string& why() const { return why_; }
  uint64_t received() const { return received_; }  // bytes so far, headers included

 private:
  unsigned char header_[8] = {};
  size_t header_got_ = 0;
  uint64_t size_ = 0, got_ = 0, capacity_ = 0, received_ = 0;
  std::shared_ptr<char[]> body_;
  std::string why_;
};

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
  static runtime::Result<std::shared_ptr<DataChannel>> connect(Runtime& runtime,
                                                               const std::string& host,
                                                               uint16_t port,
                                                               std::chrono::milliseconds timeout);
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
  // On the poller's thread:
  void on_events(uint32_t events);
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
  FrameReader reader_;  // the poller's thread's alone
  std::mutex mu_;
  struct Waiting {
    caf::weak_actor_ptr to;
    uint64_t tag = 0;
    std::chrono::steady_clock::time_point since;  // sent, or the reply before it came
  };
  std::deque<Waiting> waiting_;  // sent and not yet answered, oldest first
  std::deque<OutFrame> out_;     // written in part or not at all, in order
  std::string broken_;           // why the connection is unusable, once it is
  std::string abandoned_;        // why calls fail at once, until resume()
  uint32_t watching_ = 0;        // the events the poller waits for
  std::atomic<uint64_t> calls_{0}, sent_{0}, received_{0};
};

// The one thread of a Runtime that waits on every DataChannel's socket (epoll), as a
// DataServer's thread waits on its peers: a process's channels to its ps tasks cost one thread,
// however many tasks there are. It reads replies and hands them to their callers, writes what
// calls left unwritten, and fails a channel whose oldest call waits past its timeout (it looks
// at least once a second and once a timeout). Runtime::channel_poller() starts it on first use;
// the channels share it, so it outlives the last of them.
class ChannelPoller {
 public:
  static runtime::Result<std::shared_ptr<ChannelPoller>> start();
  ~ChannelPoller();
  ChannelPoller(const ChannelPoller&) = delete;
  ChannelPoller& operator=(const ChannelPoller&) = delete;

  // Watches `channel`'s socket `fd` from now on, for replies.
  runtime::Status add(DataChannel* channel, int fd);
  // After it returns, the thread no longer calls the channel.
  void remove(uint64_t id, int fd);
  // What the thread waits for on `fd` (0: nothing, as for a broken channel). Any thread.
  void watch(uint64_t id, int fd, uint32_t events);

 private:
  ChannelPoller(int epoll_fd, int wake_fd) : epoll_fd_(epoll_fd), wake_fd_(wake_fd) {}
  void run();

  const int epoll_fd_;
  const int wake_fd_;  // an eventfd: stop
  std::atomic<bool> stopping_{false};
  std::mutex mu_;  // held while the thread calls a channel: remove() waits for it
  std::map<uint64_t, DataChannel*> channels_;
  uint64_t next_id_ = 1;  // 0 names the wake-up
  std::thread thread_;
};

}  // namespace troupe::actors
