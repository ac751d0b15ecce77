// IoThread: a Boost.Asio io_context and the one thread that runs it: the event loop of each of
// a DataServer's threads (net/data_server.h) and of the channels' poller (net/data_channel.h).
// Asio waits on the sockets (epoll underneath) and runs the handlers; the frames are read and
// written by our own non-blocking code (net/frame.h), which waits with `async_wait` alone.
// Measured against the hand-written epoll loop it replaced (bench/transport_bench), Asio moves
// the data channel's frames as fast.
//
//   auto io = IoThread::start("data channel");        // Result<std::unique_ptr<IoThread>>
//   boost::asio::posix::stream_descriptor fd((*io)->context(), socket_fd);
//   fd.async_wait(boost::asio::posix::descriptor_base::wait_read, handler);  // on its thread
//   (*io)->post([] { ... });                          // from any thread
//
// stop() (and the destructor) ends the loop and joins its thread; handlers not yet run are
// destroyed unrun. The io_context is shared, so that what posts to it (a reply given later) may
// outlive the thread: posting to a stopped loop does nothing.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "runtime/status.h"

namespace troupe::actors::net {

class IoThread {
 public:
  // `what` names the loop in the error when its thread cannot start.
  static runtime::Result<std::unique_ptr<IoThread>> start(const std::string& what);
  // Stops the loop and joins its thread; what waits on its context stays until destroyed.
  void stop();
  ~IoThread() { stop(); }
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  boost::asio::io_context& context() { return *context_; }
  const std::shared_ptr<boost::asio::io_context>& shared_context() const { return context_; }
  // Runs `f` on the loop's thread, after the handlers already queued; from any thread.
  template <typename F>
  void post(F&& f) {
    boost::asio::post(*context_, std::forward<F>(f));
  }
  bool on_this_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  IoThread() = default;
  std::shared_ptr<boost::asio::io_context> context_ =
      std::make_shared<boost::asio::io_context>(1);  // a hint: one thread runs it
  std::thread thread_;
};

}  // namespace troupe::actors::net
