#include "actors/net/sealed_scribe.h"

#include <caf/io/network/stream_impl.hpp>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <string>

#include "runtime/log.h"

namespace troupe::actors::net {

namespace {

using caf::io::network::native_socket;
using caf::io::network::rw_state;

// How CAF's stream reads and writes its socket (the role of caf::policy::tcp). Plaintext is
// reported written only once its record has left whole: CAF then keeps asking to write until
// it has, and stops watching the socket only when nothing of its buffer is left in the sealer.
class SealedPolicy {
 public:
  explicit SealedPolicy(const LinkKeys& keys)
      : sealer_(std::make_unique<Sealer>(keys.send)),
        opener_(std::make_unique<Opener>(keys.receive)) {}

  rw_state read_some(size_t& result, native_socket fd, void* buf, size_t len) {
    result = 0;
    const ssize_t n = opener_->read(fd, static_cast<char*>(buf), len);
    if (n < 0) {
      if (opener_->integrity_failed()) {
        auto peer = caf::io::network::remote_addr_of_fd(fd);
        auto port = caf::io::network::remote_port_of_fd(fd);
        runtime::log_warning("CAF connection from ", peer ? *peer : std::string("?"), ":",
                             port ? *port : 0, ": ", opener_->why(),
                             "; the connection is closed and nothing of it applied");
      }
      return rw_state::failure;
    }
    result = static_cast<size_t>(n);
    return rw_state::success;
  }

  rw_state write_some(size_t& result, native_socket fd, const void* buf, size_t len) {
    result = 0;
    if (!sealer_->pending()) {
      iovec part{const_cast<void*>(buf), std::min(len, kMaxRecordBytes)};
      sealed_ = sealer_->seal(&part, 1);
    }
    if (sealer_->send(fd) < 0) return rw_state::failure;
    if (sealer_->pending()) return rw_state::success;
    result = sealed_;
    sealed_ = 0;
    return rw_state::success;
  }

  // CAF reads again, past its limit of reads in a row, while bytes taken from the socket wait
  // here (records opened, or whole and not yet opened): the socket shows nothing of them.
  bool must_read_more(native_socket, size_t) { return opener_->buffered() > 0; }

 private:
  std::unique_ptr<Sealer> sealer_;
  std::unique_ptr<Opener> opener_;
  size_t sealed_ = 0;  // plaintext bytes of CAF's buffer in the pending record
};

// caf::io::network::scribe_impl, over SealedPolicy.
class SealedScribe : public caf::io::scribe {
 public:
  SealedScribe(caf::io::network::default_multiplexer& mpx, native_socket fd, const LinkKeys& keys)
      : scribe(caf::io::network::conn_hdl_from_socket(fd)), stream_(mpx, fd, keys) {}

  void configure_read(caf::io::receive_policy::config config) override {
    stream_.configure_read(config);
    if (!launched_) launch();
  }
  void ack_writes(bool enable) override { stream_.ack_writes(enable); }
  std::vector<char>& wr_buf() override { return stream_.wr_buf(); }
  std::vector<char>& rd_buf() override { return stream_.rd_buf(); }
  void graceful_shutdown() override {
    stream_.graceful_shutdown();
    detach(&stream_.backend(), false);
  }
  void flush() override { stream_.flush(this); }
  std::string addr() const override {
    auto x = caf::io::network::remote_addr_of_fd(stream_.fd());
    return x ? *x : std::string();
  }
  uint16_t port() const override {
    auto x = caf::io::network::remote_port_of_fd(stream_.fd());
    return x ? *x : 0;
  }
  void add_to_loop() override { stream_.activate(this); }
  void remove_from_loop() override { stream_.passivate(); }

 private:
  void launch() {
    launched_ = true;
    stream_.start(this);
  }

  bool launched_ = false;
  caf::io::network::stream_impl<SealedPolicy> stream_;
};

}  // namespace

caf::io::scribe_ptr make_sealed_scribe(caf::io::network::default_multiplexer& mpx, native_socket fd,
                                       const LinkKeys& keys) {
  return caf::make_counted<SealedScribe>(mpx, fd, keys);
}

}  // namespace troupe::actors::net
