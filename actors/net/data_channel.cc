#include "actors/net/data_channel.h"

#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <future>

#include "actors/job_secret.h"
#include "actors/messages.h"  // Bytes as a message
#include "actors/net/io_thread.h"
#include "actors/net/socket.h"
#include "runtime/log.h"

namespace troupe::actors::net {

using runtime::Status;

namespace {
using Clock = std::chrono::steady_clock;
using Descriptor = boost::asio::posix::stream_descriptor;
}  // namespace

runtime::Result<std::shared_ptr<DataChannel>> DataChannel::connect(
    Runtime& runtime, const std::string& host, uint16_t port, std::chrono::milliseconds timeout,
    const std::string& task) {
  const std::string peer = host + ":" + std::to_string(port);
  TROUPE_ASSIGN_OR_RETURN(std::shared_ptr<ChannelPoller> poller, runtime.channel_poller());
  TROUPE_ASSIGN_OR_RETURN(const int fd, connect_tcp(host, port, timeout));
  std::unique_ptr<LinkKeys> keys;
  if (const auto& secret = runtime.secret()) {
    keys = std::make_unique<LinkKeys>();
    const std::string refused = secret->prove_member(fd, runtime.introduction(task), keys.get());
    if (!refused.empty()) {
      ::close(fd);
      return runtime::unavailable("data channel to ", peer, ": ", refused);
    }
  }
  // From here on the poller's thread reads as bytes come, and a call writes what the socket
  // takes at once.
  if (const std::string why = set_nonblocking(fd); !why.empty()) {
    ::close(fd);
    return runtime::unavailable("data channel to ", peer, ": ", why);
  }
  std::shared_ptr<DataChannel> channel(new DataChannel(fd, poller, peer, timeout));
  if (keys) {
    channel->sealer_ = std::make_unique<Sealer>(keys->send);
    channel->opener_ = std::make_unique<Opener>(keys->receive);
  }
  Status added = poller->add(channel.get(), fd);
  if (!added.ok()) return added.with_context("data channel to " + peer);
  return channel;
}

DataChannel::DataChannel(int fd, std::shared_ptr<ChannelPoller> poller, std::string peer,
                         std::chrono::milliseconds timeout)
    : fd_(fd), poller_(std::move(poller)), peer_(std::move(peer)), timeout_(timeout) {}

DataChannel::~DataChannel() {
  poller_->remove(id_);
  ::close(fd_);
}

void DataChannel::call(ChannelCall call, const caf::actor& reply_to, uint64_t tag) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!broken_.empty() || !abandoned_.empty()) {
    caf::anon_send(reply_to, channel_reply_atom::value, tag,
                   "data channel to " + peer_ + ": " + (broken_.empty() ? abandoned_ : broken_));
    return;
  }
  // Queued before it goes: its reply may come before the write returns.
  waiting_.push_back({caf::actor_cast<caf::weak_actor_ptr>(reply_to), tag, Clock::now()});
  out_.emplace_back();
  out_.back().message = std::move(call.message);
  out_.back().tensors = std::move(call.inputs);
  out_.back().frame();
  calls_.fetch_add(1, std::memory_order_relaxed);
  sent_.fetch_add(out_.back().bytes, std::memory_order_relaxed);
  if (out_.size() > 1) return;  // behind another call's bytes: the poller writes both
  if (!write_pending()) return;
  watch_locked();  // the rest, if any, waits for room in the socket: the poller's to write
}

bool DataChannel::write_pending() {
  while (!out_.empty()) {
    if (out_.front().write(fd_, sealer_.get()) < 0) {
      fail_locked("sending: " + errno_text());
      return false;
    }
    if (!out_.front().done()) return true;
    out_.pop_front();
  }
  return true;
}

void DataChannel::abandon(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  abandoned_ = why;
  for (Waiting& w : waiting_) {
    if (caf::strong_actor_ptr to = w.to.lock()) {
      caf::anon_send(caf::actor_cast<caf::actor>(to), channel_reply_atom::value, w.tag,
                     "data channel to " + peer_ + ": " + why);
    }
    w.to.reset();
  }
}

void DataChannel::resume() {
  std::lock_guard<std::mutex> lock(mu_);
  abandoned_.clear();
}

void DataChannel::fail(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_locked(why);
}

// Every call waiting gets the error, and no later call may use the stream (a half-done
// exchange leaves it out of step).
void DataChannel::fail_locked(const std::string& why) {
  if (broken_.empty()) broken_ = why;
  ::shutdown(fd_, SHUT_RDWR);
  const std::string message = "data channel to " + peer_ + ": " + broken_;
  for (const Waiting& w : waiting_) {
    if (caf::strong_actor_ptr to = w.to.lock()) {
      caf::anon_send(caf::actor_cast<caf::actor>(to), channel_reply_atom::value, w.tag, message);
    }
  }
  waiting_.clear();
  out_.clear();
  watch_locked();  // nothing more: a shut socket would report itself for ever
}

DataChannel::Want DataChannel::wants_locked() const {
  return !broken_.empty() ? Want::kNothing : out_.empty() ? Want::kReplies : Want::kRoom;
}

DataChannel::Want DataChannel::wants() {
  std::lock_guard<std::mutex> lock(mu_);
  return wants_locked();
}

void DataChannel::watch_locked() {
  const Want want = wants_locked();
  if (want == watching_) return;
  watching_ = want;
  poller_->watch(id_);
}

std::chrono::steady_clock::time_point DataChannel::deadline() {
  std::lock_guard<std::mutex> lock(mu_);
  return (waiting_.empty() ? Clock::now() : waiting_.front().since) + timeout_;
}

void DataChannel::on_writable() {
  std::lock_guard<std::mutex> lock(mu_);
  if (write_pending()) watch_locked();
}

// Reads the replies come so far and hands each to its caller.
void DataChannel::on_readable() {
  for (;;) {
    runtime::Bytes reply;
    const FrameReader::Got got = reader_.read(fd_, kMaxFrameBytes, &reply, opener_.get());
    if (got == FrameReader::Got::kAgain) return;
    if (got == FrameReader::Got::kEnd) {
      if (opener_ && opener_->integrity_failed()) {
        runtime::log_warning("data channel to ", peer_, ": ", reader_.why(),
                             "; the connection is closed and nothing of it applied");
      }
      return fail("receiving: " + reader_.why());
    }
    received_.fetch_add(8 + reply.size, std::memory_order_relaxed);
    Waiting w;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (waiting_.empty()) return fail_locked("a reply to no call");
      w = std::move(waiting_.front());
      waiting_.pop_front();
      if (!waiting_.empty()) waiting_.front().since = Clock::now();
    }
    if (caf::strong_actor_ptr to = w.to.lock()) {
      caf::anon_send(caf::actor_cast<caf::actor>(to), channel_reply_atom::value, w.tag,
                     std::move(reply));
    }
  }
}

// What the poller's thread keeps of a channel.
struct ChannelPoller::Watched {
  DataChannel* channel = nullptr;
  std::unique_ptr<Descriptor> socket;     // the channel's descriptor: released, never closed here
  bool reading = false, writing = false;  // an async_wait of that kind is pending
};

struct ChannelPoller::Timer {
  explicit Timer(boost::asio::io_context& context) : timer(context) {}
  boost::asio::steady_timer timer;
};

runtime::Result<std::shared_ptr<ChannelPoller>> ChannelPoller::start() {
  std::shared_ptr<ChannelPoller> poller(new ChannelPoller());
  TROUPE_ASSIGN_OR_RETURN(poller->io_, IoThread::start("data channels"));
  poller->timer_ = std::make_unique<Timer>(poller->io_->context());
  poller->io_->post([p = poller.get()] { p->check_deadlines(); });
  return poller;
}

ChannelPoller::~ChannelPoller() {
  io_->stop();
  for (auto& [id, w] : channels_) w->socket->release();  // none, once the channels are gone
  channels_.clear();
  timer_.reset();
}

Status ChannelPoller::add(DataChannel* channel, int fd) {
  auto socket = std::make_unique<Descriptor>(io_->context());
  boost::system::error_code error;
  socket->assign(fd, error);
  if (error) return runtime::resource_exhausted("cannot wait on its socket: ", error.message());
  const uint64_t id = next_id_.fetch_add(1);
  channel->id_ = id;
  channel->watching_ = DataChannel::Want::kReplies;
  io_->post([this, id, channel, socket = std::move(socket)]() mutable {
    auto w = std::make_unique<Watched>();
    w->channel = channel;
    w->socket = std::move(socket);
    arm(id, *w);
    channels_.emplace(id, std::move(w));
  });
  return runtime::ok_status();
}

void ChannelPoller::remove(uint64_t id) {
  auto forget = [this, id] {
    auto it = channels_.find(id);
    if (it == channels_.end()) return;
    it->second->socket->release();
    channels_.erase(it);  // its waits end, aborted, and find no one
  };
  if (io_->on_this_thread()) return forget();
  std::promise<void> done;
  io_->post([&forget, &done] {
    forget();
    done.set_value();
  });
  done.get_future().wait();
}

void ChannelPoller::watch(uint64_t id) {
  io_->post([this, id] {
    if (auto it = channels_.find(id); it != channels_.end()) arm(id, *it->second);
  });
}

// Waits for what the channel wants now: its replies, room to write what its calls left, or
// nothing once it is broken (a shut socket would report itself for ever).
void ChannelPoller::arm(uint64_t id, Watched& w) {
  const DataChannel::Want want = w.channel->wants();
  if (want == DataChannel::Want::kNothing) {
    w.socket->cancel();
    return;
  }
  if (!w.reading) {
    w.reading = true;
    w.socket->async_wait(Descriptor::wait_read, [this, id](const boost::system::error_code& e) {
      on_ready(id, /*room=*/false, e == boost::asio::error::operation_aborted);
    });
  }
  if (want == DataChannel::Want::kRoom && !w.writing) {
    w.writing = true;
    w.socket->async_wait(Descriptor::wait_write, [this, id](const boost::system::error_code& e) {
      on_ready(id, /*room=*/true, e == boost::asio::error::operation_aborted);
    });
  }
}

void ChannelPoller::on_ready(uint64_t id, bool room, bool aborted) {
  auto it = channels_.find(id);
  if (it == channels_.end()) return;  // removed meanwhile
  Watched& w = *it->second;
  (room ? w.writing : w.reading) = false;
  if (aborted) return;  // broken: it wants nothing
  if (room) {
    w.channel->on_writable();
  } else {
    w.channel->on_readable();  // a failed wait shows as a failed read
  }
  arm(id, w);
}

// At least once a second, and when the oldest call of a channel is due: a call made while
// the thread waited is bounded too.
void ChannelPoller::check_deadlines() {
  const auto now = Clock::now();
  auto next = now + std::chrono::seconds(1);
  for (auto& [id, w] : channels_) {
    const auto due = w->channel->deadline();
    if (due <= now) {
      w->channel->fail("receiving: timed out");
    } else {
      next = std::min(next, due);
    }
  }
  timer_->timer.expires_at(next);
  timer_->timer.async_wait([this](const boost::system::error_code& error) {
    if (!error) check_deadlines();
  });
}

}  // namespace troupe::actors::net
