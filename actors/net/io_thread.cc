#include "actors/net/io_thread.h"

#include <boost/asio/executor_work_guard.hpp>

#include <system_error>

#include "runtime/log.h"

namespace troupe::actors::net {

runtime::Result<std::unique_ptr<IoThread>> IoThread::start(const std::string& what) {
  std::unique_ptr<IoThread> io(new IoThread());
  try {
    io->thread_ = std::thread([context = io->context_, what] {
      // Runs until stopped, with or without sockets to wait on.
      auto work = boost::asio::make_work_guard(*context);
      try {
        context->run();
      } catch (const std::exception& e) {  // a handler threw: the loop is gone, say so
        runtime::log_error(what, ": event loop ended: ", e.what());
      }
    });
  } catch (const std::system_error& e) {
    return runtime::resource_exhausted(what, ": cannot start its thread: ", e.what());
  }
  return io;
}

void IoThread::stop() {
  context_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace troupe::actors::net
