#include "actors/net/data_channel.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <system_error>

#include "actors/job_secret.h"
#include "actors/messages.h"  // Bytes as a message
#include "actors/net/event_loop.h"
#include "actors/net/socket.h"
#include "runtime/log.h"

namespace troupe::actors::net {

using runtime::Status;

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

runtime::Result<std::shared_ptr<DataChannel>> DataChannel::connect(
    Runtime& runtime, const std::string& host, uint16_t port, std::chrono::milliseconds timeout) {
  const std::string peer = host + ":" + std::to_string(port);
  TROUPE_ASSIGN_OR_RETURN(std::shared_ptr<ChannelPoller> poller, runtime.channel_poller());
  TROUPE_ASSIGN_OR_RETURN(const int fd, connect_tcp(host, port, timeout));
  if (const auto& secret = runtime.secret()) {
    const std::string refused = secret->prove_member(fd);
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
  Status added = poller->add(channel.get(), fd);
  if (!added.ok()) return added.with_context("data channel to " + peer);
  return channel;
}

DataChannel::DataChannel(int fd, std::shared_ptr<ChannelPoller> poller, std::string peer,
                         std::chrono::milliseconds timeout)
    : fd_(fd), poller_(std::move(poller)), peer_(std::move(peer)), timeout_(timeout) {}

DataChannel::~DataChannel() {
  poller_->remove(id_, fd_);
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
    if (out_.front().write(fd_) < 0) {
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

void DataChannel::watch_locked() {
  const uint32_t want = !broken_.empty() ? 0 : out_.empty() ? EPOLLIN : EPOLLIN | EPOLLOUT;
  if (want == watching_) return;
  watching_ = want;
  poller_->watch(id_, fd_, want);
}

std::chrono::steady_clock::time_point DataChannel::deadline() {
  std::lock_guard<std::mutex> lock(mu_);
  return (waiting_.empty() ? Clock::now() : waiting_.front().since) + timeout_;
}

// Writes what calls left, reads the replies and hands each to its caller.
void DataChannel::on_events(uint32_t events) {
  if (events & EPOLLOUT) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!write_pending()) return;
    watch_locked();
  }
  if (!(events & (EPOLLIN | EPOLLERR | EPOLLHUP))) return;
  for (;;) {
    runtime::Bytes reply;
    const FrameReader::Got got = reader_.read(fd_, kMaxFrameBytes, &reply);
    if (got == FrameReader::Got::kAgain) return;
    if (got == FrameReader::Got::kEnd) return fail("receiving: " + reader_.why());
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

runtime::Result<std::shared_ptr<ChannelPoller>> ChannelPoller::start() {
  auto events = EventLoop::open();
  if (!events.ok()) return events.status().with_context("data channels");
  std::shared_ptr<ChannelPoller> poller(new ChannelPoller(std::move(*events)));
  try {
    poller->thread_ = std::thread([p = poller.get()] { p->run(); });
  } catch (const std::system_error& e) {
    return runtime::resource_exhausted("data channels: cannot start their thread: ", e.what());
  }
  return poller;
}

ChannelPoller::~ChannelPoller() {
  stopping_ = true;
  events_->wake();
  if (thread_.joinable()) thread_.join();
}

Status ChannelPoller::add(DataChannel* channel, int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_id_++;
  channel->id_ = id;
  channel->watching_ = EPOLLIN;
  TROUPE_RETURN_IF_ERROR(events_->add(fd, id, EPOLLIN));
  channels_.emplace(id, channel);
  return runtime::ok_status();
}

void ChannelPoller::remove(uint64_t id, int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  if (channels_.erase(id) > 0) events_->remove(fd);
}

void ChannelPoller::watch(uint64_t id, int fd, uint32_t events) {
  if (events == 0) return events_->remove(fd);
  events_->modify(fd, id, events);
}

// Between events it looks at least once a second: a call made while it waited is bounded too.
void ChannelPoller::run() {
  std::vector<EventLoop::Event> ready;
  auto next = Clock::now() + std::chrono::seconds(1);
  while (!stopping_) {
    if (Status s = events_->wait(next, &ready); !s.ok()) {
      runtime::log_error("data channels: ", s.message());
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (const EventLoop::Event& e : ready) {
      if (stopping_) break;
      if (auto it = channels_.find(e.id); it != channels_.end()) it->second->on_events(e.events);
    }
    const auto now = Clock::now();
    next = now + std::chrono::seconds(1);
    for (const auto& [id, channel] : channels_) {
      const auto due = channel->deadline();
      if (due <= now) {
        channel->fail("receiving: timed out");
      } else {
        next = std::min(next, due);
      }
    }
  }
}

}  // namespace troupe::actors::net
