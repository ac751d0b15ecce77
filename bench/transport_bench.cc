// The data server against a server written in Boost.Asio's own style, on the same sockets and
// frames. It decided that the hand-written epoll loops of actors/net/ give way to Asio (equal
// within noise); the data server now waits with Asio and frames with its own code, and this
// bench keeps that layer honest: ratio >= 1, it costs nothing over Asio alone.
//   data_server_vs_asio  4 MiB frames from a blocking client on 127.0.0.1, each answered with a
//                        small reply frame, GB/s of payload through net::DataServer against the
//                        same protocol served by an Asio io_context (async_read of the header,
//                        then of the body into a reused buffer, async_write of the reply), one
//                        thread each, in one process; alternated rounds, medians (ratio >= 1:
//                        ours is no slower)
//   data_server_vs_asio_small  the same with 4 KiB frames: where a loop's own cost per frame
//                        shows rather than the kernel's copy
//
//   transport_bench [--quick] [--json FILE]
#include <unistd.h>

#include <boost/asio.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "actors/net/data_server.h"
#include "actors/net/socket.h"
#include "actors/shard_codec.h"
#include "bench/bench_flags.h"
#include "bench/bench_util.h"

using namespace troupe;
namespace asio = boost::asio;

namespace {

// The reply both servers give: a call's reply frame with no outputs.
std::vector<char> reply_frame() {
  const std::vector<char> body = actors::make_shard_reply(runtime::ok_status(), {}).flat();
  std::vector<char> frame(8 + body.size());
  for (int i = 0; i < 8; ++i) frame[i] = static_cast<char>(uint64_t(body.size()) >> (8 * i));
  std::copy(body.begin(), body.end(), frame.begin() + 8);
  return frame;
}

// Serves the frame protocol with Asio on one thread until destroyed.
class AsioServer {
 public:
  AsioServer() : acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}), reply_(reply_frame()) {
    accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~AsioServer() {
    io_.stop();
    thread_.join();
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }

 private:
  struct Connection {
    explicit Connection(asio::ip::tcp::socket s) : socket(std::move(s)) {}
    asio::ip::tcp::socket socket;
    unsigned char header[8] = {};
    std::vector<char> body;
  };
  void accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, asio::ip::tcp::socket s) {
      if (ec) return;
      s.set_option(asio::ip::tcp::no_delay(true));
      read(std::make_shared<Connection>(std::move(s)));
      accept();
    });
  }
  void read(std::shared_ptr<Connection> c) {
    asio::async_read(c->socket, asio::buffer(c->header), [this, c](auto ec, size_t) {
      if (ec) return;
      uint64_t n = 0;
      for (int i = 0; i < 8; ++i) n |= uint64_t(c->header[i]) << (8 * i);
      c->body.resize(n);  // reused: grows once
      asio::async_read(c->socket, asio::buffer(c->body), [this, c](auto ec, size_t) {
        if (ec) return;
        asio::async_write(c->socket, asio::buffer(reply_), [this, c](auto ec, size_t) {
          if (!ec) read(c);
        });
      });
    });
  }
  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  const std::vector<char> reply_;
  std::thread thread_;
};

// A blocking client: `bytes` of payload a frame, each sent whole and its reply read whole.
class Client {
 public:
  Client(uint16_t port, size_t bytes) : frame_(8 + bytes, 'x') {
    fd_ = actors::net::connect_tcp("127.0.0.1", port, std::chrono::seconds(10)).value();
    for (int i = 0; i < 8; ++i) frame_[i] = static_cast<char>(uint64_t(bytes) >> (8 * i));
  }
  ~Client() { ::close(fd_); }
  void call() {
    for (size_t sent = 0; sent < frame_.size();) {
      const ssize_t n = ::write(fd_, frame_.data() + sent, frame_.size() - sent);
      if (n <= 0) std::abort();
      sent += static_cast<size_t>(n);
    }
    unsigned char header[8];
    read_whole(reinterpret_cast<char*>(header), 8);
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= uint64_t(header[i]) << (8 * i);
    reply_.resize(n);
    read_whole(reply_.data(), n);
  }

 private:
  void read_whole(char* into, size_t n) {
    for (size_t got = 0; got < n;) {
      const ssize_t r = ::read(fd_, into + got, n - got);
      if (r <= 0) std::abort();
      got += static_cast<size_t>(r);
    }
  }
  int fd_ = -1;
  std::vector<char> frame_;
  std::vector<char> reply_;
};

// GB/s of payload, medians of alternated rounds: (ours, Asio's).
std::pair<double, double> compare(size_t bytes, int rounds, double window) {
  actors::Runtime rt;
  auto ours = actors::net::DataServer::listen(rt, "127.0.0.1", 0, {.threads = 1});
  if (!ours.ok() || !(*ours)
                         ->serve([](const runtime::Bytes&, const actors::net::DataServer::Later&,
                                    const actors::Peer&) {
                           return std::optional<actors::ShardReply>(
                               actors::make_shard_reply(runtime::ok_status(), {}));
                         })
                         .ok()) {
    std::fprintf(stderr, "transport_bench: the data server did not start\n");
    return {0, 0};
  }
  AsioServer theirs;
  Client to_ours((*ours)->port(), bytes), to_theirs(theirs.port(), bytes);
  std::vector<double> a, b;
  for (int r = 0; r < rounds; ++r) {
    a.push_back(bytes / bench::median_seconds([&] { to_ours.call(); }, 1, window) / 1e9);
    b.push_back(bytes / bench::median_seconds([&] { to_theirs.call(); }, 1, window) / 1e9);
  }
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return {a[a.size() / 2], b[b.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
  bench::Flags flags("transport_bench", "bench_transport.json");
  flags.parse(argc, argv);
  bench::Bars bars("transport");
  const int rounds = flags.quick ? 3 : 9;
  const double window = flags.quick ? 0.1 : 0.3;
  const auto [big, big_asio] = compare(4 << 20, rounds, window);
  bars.add("data_server_vs_asio", big, "GB/s", "asio", big_asio, big_asio > 0 ? big / big_asio : 0);
  const auto [small, small_asio] = compare(4 << 10, rounds, window);
  bars.add("data_server_vs_asio_small", small, "GB/s", "asio", small_asio,
           small_asio > 0 ? small / small_asio : 0);
  if (!bars.write_json(flags.json)) std::fprintf(stderr, "cannot write %s\n", flags.json.c_str());
  return 0;
}
