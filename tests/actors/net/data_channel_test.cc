// The data channel's client: calls pipelined without waiting for replies, replies matched in
// order, one poller thread for a runtime's channels putting replies together as their bytes come,
// a call larger than the socket takes written whole, and a call unanswered past its timeout failed
// with the peer's name.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "actors/net/data_channel.h"
#include "harness/raw_socket.h"

using namespace troupe;

TEST_CASE("a data channel writes calls without waiting for replies; they come back in order") {
  // A server that answers nothing until it holds two calls: a channel that waited for each
  // reply before the next call would never get one.
  uint16_t port = 0;
  const int listener = testing::listen_on(&port);
  std::thread server([listener] {
    const int fd = ::accept(listener, nullptr, nullptr);
    std::string body;
    const bool both = testing::recv_frame(fd, &body) && testing::recv_frame(fd, &body);
    const std::string replies =
        testing::frame_header(5) + "first" + testing::frame_header(6) + "second";
    if (both) ::send(fd, replies.data(), replies.size(), MSG_NOSIGNAL);
    ::close(fd);  // a third call finds the connection gone
  });
  actors::Runtime rt;
  auto channel = actors::net::DataChannel::connect(rt, "127.0.0.1", port, std::chrono::seconds(10));
  REQUIRE(channel.ok());
  auto call = [] {
    auto message = std::make_shared<capnp::MallocMessageBuilder>();
    message->initRoot<capnp::AnyPointer>();
    return actors::net::ChannelCall{message, {}};
  };
  caf::scoped_actor self{rt.system()};
  // Each reply as "<tag>:<bytes>", an error as "<tag>!<why>".
  auto next_reply = [&] {
    std::string got = "none";
    self->receive(
        [&](actors::net::channel_reply_atom, uint64_t tag, runtime::Bytes& r) {
          got = std::to_string(tag) + ":" + std::string(r.data, r.size);
        },
        [&](actors::net::channel_reply_atom, uint64_t tag, std::string& why) {
          got = std::to_string(tag) + "!" + why;
        },
        caf::after(std::chrono::seconds(10)) >> [] {});
    return got;
  };
  (*channel)->call(call(), self, 7);
  (*channel)->call(call(), self, 8);
  CHECK(next_reply() == "7:first");
  CHECK(next_reply() == "8:second");
  server.join();
  // The server has closed the connection: a third call gets the error, naming the peer.
  (*channel)->call(call(), self, 9);
  const std::string error = next_reply();
  CHECK_MESSAGE(error.rfind("9!data channel to 127.0.0.1:" + std::to_string(port), 0) == 0, error);
  ::close(listener);
}

TEST_CASE("a runtime's data channels share one thread, which puts replies together as they come") {
  // Three servers, each answering one call with a reply sent in pieces: the header split, the
  // body in three parts, a pause between each.
  constexpr int kServers = 3;
  uint16_t ports[kServers] = {};
  int listeners[kServers] = {};
  std::vector<std::thread> servers;
  for (int i = 0; i < kServers; ++i) {
    listeners[i] = testing::listen_on(&ports[i]);
    servers.emplace_back([listener = listeners[i], i] {
      const int fd = ::accept(listener, nullptr, nullptr);
      std::string body;
      bool ok = testing::recv_frame(fd, &body);
      const std::string reply = std::string(3000 * (i + 1), static_cast<char>('a' + i));
      const std::string frame = testing::frame_header(reply.size()) + reply;
      const size_t cuts[] = {0, 3, 8, 1000, 2500, frame.size()};
      for (size_t k = 0; ok && k + 1 < std::size(cuts); ++k) {
        const size_t piece = cuts[k + 1] - cuts[k];
        ok = ::send(fd, frame.data() + cuts[k], piece, MSG_NOSIGNAL) == ssize_t(piece);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      ::close(fd);
    });
  }
  auto threads = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/task"),
                         std::filesystem::directory_iterator{});
  };
  actors::Runtime rt;
  const auto before = threads();
  std::vector<std::shared_ptr<actors::net::DataChannel>> channels;
  for (int i = 0; i < kServers; ++i) {
    auto channel =
        actors::net::DataChannel::connect(rt, "127.0.0.1", ports[i], std::chrono::seconds(10));
    REQUIRE_MESSAGE(channel.ok(), channel.status().to_string());
    channels.push_back(*channel);
  }
  CHECK(threads() == before + 1);
  caf::scoped_actor self{rt.system()};
  for (int i = 0; i < kServers; ++i) {
    auto message = std::make_shared<capnp::MallocMessageBuilder>();
    message->initRoot<capnp::AnyPointer>();
    channels[i]->call(actors::net::ChannelCall{message, {}}, self, static_cast<uint64_t>(i));
  }
  std::map<uint64_t, std::string> replies;
  for (int i = 0; i < kServers; ++i) {
    self->receive([&](actors::net::channel_reply_atom, uint64_t tag,
                      runtime::Bytes& r) { replies[tag] = std::string(r.data, r.size); },
                  [&](actors::net::channel_reply_atom, uint64_t tag, std::string& why) {
                    replies[tag] = why;
                  },
                  caf::after(std::chrono::seconds(10)) >> [] {});
  }
  for (int i = 0; i < kServers; ++i) {
    CHECK(replies[i] == std::string(3000 * (i + 1), static_cast<char>('a' + i)));
    CHECK(channels[i]->traffic().bytes_received == 8 + 3000 * (i + 1));
  }
  for (auto& t : servers) t.join();
  for (int fd : listeners) ::close(fd);
}

TEST_CASE("a data channel's call bigger than the socket takes at once arrives whole, in order") {
  // A server that reads nothing for a while: the first call's 16 MB cannot all go at once, so
  // the channel's thread writes the rest when there is room, and the second call waits its turn.
  uint16_t port = 0;
  const int listener = testing::listen_on(&port);
  std::vector<uint64_t> sizes;
  std::vector<std::string> tails;
  std::thread server([&] {
    const int fd = ::accept(listener, nullptr, nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    for (int i = 0; i < 2; ++i) {
      std::string body;
      if (!testing::recv_frame(fd, &body)) break;
      sizes.push_back(body.size());
      tails.push_back(body.substr(body.size() - 8));  // the blob's last bytes
    }
    const std::string replies = testing::frame_header(3) + "one" + testing::frame_header(3) + "two";
    ::send(fd, replies.data(), replies.size(), MSG_NOSIGNAL);
    ::close(fd);
  });
  actors::Runtime rt;
  auto channel = actors::net::DataChannel::connect(rt, "127.0.0.1", port, std::chrono::seconds(10));
  REQUIRE(channel.ok());
  // A message whose root is a blob of `n` bytes ending in `last`.
  auto call = [](size_t n, char last) {
    auto message = std::make_shared<capnp::MallocMessageBuilder>();
    capnp::Data::Builder blob = message->initRoot<capnp::AnyPointer>().initAs<capnp::Data>(n);
    std::memset(blob.begin(), 'x', n);
    blob[n - 1] = static_cast<kj::byte>(last);
    return actors::net::ChannelCall{message, {}};
  };
  caf::scoped_actor self{rt.system()};
  (*channel)->call(call(16 << 20, 'A'), self, 1);
  (*channel)->call(call(1000, 'B'), self, 2);
  std::vector<std::string> replies;
  for (int i = 0; i < 2; ++i) {
    self->receive(
        [&](actors::net::channel_reply_atom, uint64_t tag, runtime::Bytes& r) {
          replies.push_back(std::to_string(tag) + ":" + std::string(r.data, r.size));
        },
        [&](actors::net::channel_reply_atom, uint64_t tag, std::string& why) {
          replies.push_back(std::to_string(tag) + "!" + why);
        },
        caf::after(std::chrono::seconds(10)) >> [] {});
  }
  server.join();
  CHECK(replies == std::vector<std::string>{"1:one", "2:two"});
  REQUIRE(sizes.size() == 2);
  CHECK(sizes[0] > (16u << 20));
  CHECK(sizes[1] < 2000u);
  // Cap'n Proto pads a blob to whole words: its last byte sits just before the padding.
  CHECK(tails[0].find('A') != std::string::npos);
  CHECK(tails[1].find('B') != std::string::npos);
  ::close(listener);
}

TEST_CASE("a data channel fails a call that gets no reply within its timeout, naming the peer") {
  uint16_t port = 0;
  const int listener = testing::listen_on(&port);
  int accepted = -1;
  std::thread server([&] { accepted = ::accept(listener, nullptr, nullptr); });  // never answers
  actors::Runtime rt;
  auto channel =
      actors::net::DataChannel::connect(rt, "127.0.0.1", port, std::chrono::milliseconds(300));
  REQUIRE(channel.ok());
  server.join();
  auto message = std::make_shared<capnp::MallocMessageBuilder>();
  message->initRoot<capnp::AnyPointer>();
  caf::scoped_actor self{rt.system()};
  const auto sent = std::chrono::steady_clock::now();
  (*channel)->call(actors::net::ChannelCall{message, {}}, self, 1);
  std::string error;
  self->receive(
      [&](actors::net::channel_reply_atom, uint64_t, runtime::Bytes&) { error = "a reply"; },
      [&](actors::net::channel_reply_atom, uint64_t, std::string& why) { error = why; },
      caf::after(std::chrono::seconds(10)) >> [] {});
  const auto waited = std::chrono::steady_clock::now() - sent;
  CHECK_MESSAGE(error.find("data channel to 127.0.0.1:" + std::to_string(port)) == 0, error);
  CHECK_MESSAGE(error.find("timed out") != std::string::npos, error);
  CHECK(waited >= std::chrono::milliseconds(300));
  CHECK(waited < std::chrono::seconds(5));
  ::close(accepted);
  ::close(listener);
}
