#include "tools/serve/http_server.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "runtime/log.h"
#include "tools/serve/bearer_token.h"

namespace troupe::serve {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

struct HttpServer::Impl {
  HttpOptions options;
  Handler handler;
  std::atomic<int> connections{0};
  std::atomic<int> in_flight{0};
  std::atomic<bool> stopping{false};
  std::mutex mu;
  std::condition_variable idle;
  // After the counters and the handler: pending connections die with their io_context, which
  // stop() destroys (after the acceptor and the guards that live on them), closing their
  // sockets. One io_context per thread, as nginx has one event loop per worker: a connection
  // lives on one thread, and a request never waits for a second thread to be woken to run its
  // handler (with one context shared by two threads, 0.82 of the requests/s at 1 connection).
  std::vector<std::unique_ptr<net::io_context>> iocs;
  // Keep the threads running while replies are computed and no socket operation is pending.
  std::vector<net::executor_work_guard<net::io_context::executor_type>> work;
  std::optional<tcp::acceptor> acceptor;
  std::optional<net::ssl::context> tls;           // with a certificate: every connection is HTTPS
  std::optional<net::steady_timer> accept_again;  // after a failed accept, on iocs[0]
  std::chrono::milliseconds backoff{10};
  std::atomic<size_t> next_context{0};
  std::vector<std::thread> threads;
  uint16_t port = 0;
  bool stopped = false;

  void answered() {
    if (--in_flight == 0) {
      std::lock_guard<std::mutex> lock(mu);
      idle.notify_all();
    }
  }
};

namespace {

// What one read of a connection takes in at most.
constexpr size_t kReadBytes = 16 * 1024;

std::string_view header_text(beast::string_view v) { return {v.data(), v.size()}; }

using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// One client's connection, over plain TCP (Stream = beast::tcp_stream) or TLS (TlsStream).
template <class Stream>
class Connection : public std::enable_shared_from_this<Connection<Stream>> {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;
  using std::enable_shared_from_this<Connection<Stream>>::shared_from_this;

 public:
  Connection(tcp::socket&& socket, HttpServer::Impl& server)
      : stream_(make_stream(std::move(socket), server)), server_(server) {
    ++server_.connections;
    // Beast reads max(512, free capacity) at a time, and the parser empties the buffer into the
    // body as it goes, so an empty buffer reads a 5 KB predict request 512 bytes and a trip
    // through the io_context at a time (11 reads instead of 1).
    buffer_.reserve(kReadBytes);
    deadline_ = idle_deadline();
  }
  ~Connection() { --server_.connections; }

  void start(bool reject) {
    net::dispatch(stream_.get_executor(), [self = shared_from_this(), reject] {
      self->watch();
      if constexpr (kTls) {
        // The TLS handshake has the idle timeout too: the watchdog cancels a stalled one.
        self->phase_ = Phase::kReading;
        self->stream_.async_handshake(net::ssl::stream_base::server,
                                      [self, reject](beast::error_code ec) {
                                        if (ec) return self->close();
                                        self->begin(reject);
                                      });
      } else {
        self->begin(reject);
      }
    });
  }

 private:
  static Stream make_stream(tcp::socket&& socket, HttpServer::Impl& server) {
    if constexpr (kTls) {
      return Stream(beast::tcp_stream(std::move(socket)), *server.tls);
    } else {
      return Stream(std::move(socket));
    }
  }
  tcp::socket& socket() { return beast::get_lowest_layer(stream_).socket(); }

  void begin(bool reject) {
    if (reject) {
      respond({503, error_body("too many connections: try again"), {}}, false, false);
    } else {
      read();
    }
  }

  enum class Phase { kReading, kHandling, kWriting, kClosing };

  // A request must arrive whole, and an answer be taken, within idle_timeout of its start. One
  // timer per connection checks the deadline lazily, waking when the last deadline it knew of
  // passes: a timer set and cancelled per request costs two timerfd_settime calls, 3-4% of a
  // request's time at one connection. The timer is ours, not the stream's (whose expiry closes
  // the socket), so that a client that started a request and stalled gets its 408.
  void watch() {
    watchdog_.expires_at(deadline_);
    watchdog_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec || self->phase_ == Phase::kClosing) return;
      if (std::chrono::steady_clock::now() >= self->deadline_) {
        // An answer being computed has no deadline here: the next phase sets one.
        if (self->phase_ != Phase::kHandling) {
          self->timed_out_ = self->phase_ == Phase::kReading;
          beast::error_code ignored;
          self->socket().cancel(ignored);
        }
        self->deadline_ = self->idle_deadline();
      }
      self->watch();
    });
  }

  std::chrono::steady_clock::time_point idle_deadline() const {
    return std::chrono::steady_clock::now() + server_.options.idle_timeout;
  }

  void read() {
    parser_.emplace();
    parser_->body_limit(server_.options.body_limit);
    parser_->header_limit(64 * 1024);
    phase_ = Phase::kReading;
    timed_out_ = false;
    deadline_ = idle_deadline();
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&Connection::on_read, shared_from_this()));
  }

  void on_read(beast::error_code ec, size_t) {
    phase_ = Phase::kHandling;
    if (timed_out_ && parser_->got_some()) {
      return respond({408,
                      error_body("the request did not arrive whole within " +
                                 std::to_string(server_.options.idle_timeout.count()) + " ms"),
                      {}},
                     false, false);
    }
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == net::error::operation_aborted || ec == net::error::connection_reset ||
        ec == net::error::eof) {
      return close();
    }
    if (ec == http::error::body_limit) {
      runtime::log_warning("refused a request body over ", server_.options.body_limit, " bytes");
      return respond({413,
                      error_body("the request body is over the limit of " +
                                 std::to_string(server_.options.body_limit) + " bytes"),
                      {}},
                     false, false);
    }
    if (ec) {
      return respond({400, error_body("malformed HTTP request: " + ec.message()), {}}, false,
                     false);
    }
    http::request<http::string_body> req = parser_->release();
    keep_alive_ = req.keep_alive();
    version_ = req.version();
    if (!server_.options.auth_token.empty() &&
        !bearer_matches(header_text(req[http::field::authorization]), server_.options.auth_token)) {
      return respond({401,
                      error_body("this server needs its bearer token: Authorization: Bearer "
                                 "TOKEN"),
                      {}},
                     keep_alive_, false);
    }
    if (server_.stopping) {
      return respond({503, error_body("the server is shutting down"), {}}, false, false);
    }
    ++server_.in_flight;
    HttpRequest r{std::string(req.method_string()), std::string(req.target()),
                  std::move(req.body())};
    // The reply may run on a batch runner's thread, and its closure die there later: the
    // connection rides in the dispatched answer instead, so that it is always released on an io
    // thread (or with the io_context), never after the io_context on another thread. An answer
    // given on the connection's own thread is written at once, without a trip through the
    // io_context's queue.
    auto holder = std::make_shared<std::shared_ptr<Connection>>(shared_from_this());
    auto reply = [holder](HttpReply reply) {
      std::shared_ptr<Connection> self = std::move(*holder);
      if (!self) return;  // answered already
      auto executor = self->stream_.get_executor();
      net::dispatch(executor, [self = std::move(self), reply = std::move(reply)]() mutable {
        self->respond(std::move(reply), self->keep_alive_, true);
      });
    };
    // A handler that throws answers 500; the exception must not end the server's thread.
    try {
      server_.handler(std::move(r), reply);
    } catch (const std::exception& e) {
      runtime::log_error("a request failed: ", e.what());
      reply({500, error_body(std::string("internal error: ") + e.what()), {}});
    }
  }

  void respond(HttpReply reply, bool keep_alive, bool counted) {
    res_ = {};
    res_.version(version_);
    res_.result(static_cast<http::status>(reply.status));
    res_.set(http::field::server, "troupe");
    res_.set(http::field::content_type, reply.content_type);
    if (reply.status == 401) res_.set(http::field::www_authenticate, "Bearer");
    res_.keep_alive(keep_alive && !server_.stopping);
    res_.body() = std::move(reply.body);
    res_.prepare_payload();
    keep_ = std::move(reply.keep);
    phase_ = Phase::kWriting;
    deadline_ = idle_deadline();
    http::async_write(stream_, res_,
                      [self = shared_from_this(), counted](beast::error_code ec, size_t) {
                        self->keep_.reset();  // may unload a replaced version, here
                        if (counted) self->server_.answered();
                        if (ec || !self->res_.keep_alive()) return self->close();
                        self->read();
                      });
  }

  // Half-closes, then reads what the client still sends (a refused body) until it closes too,
  // so that it reads the answer instead of a reset.
  void close() {
    phase_ = Phase::kClosing;
    watchdog_.cancel();
    beast::get_lowest_layer(stream_).expires_after(std::chrono::seconds(1));
    if constexpr (kTls) {
      // TLS says goodbye first (close_notify), so that the client knows the reply is whole.
      stream_.async_shutdown([self = shared_from_this()](beast::error_code) {
        beast::error_code ignored;
        self->socket().shutdown(tcp::socket::shutdown_both, ignored);
      });
    } else {
      beast::error_code ec;
      socket().shutdown(tcp::socket::shutdown_send, ec);
      if (ec) return;
      drain();
    }
  }

  void drain() {
    beast::get_lowest_layer(stream_).async_read_some(
        net::buffer(scratch_), [self = shared_from_this()](beast::error_code ec, size_t) {
          if (!ec) self->drain();
        });
  }

  Stream stream_;
  net::steady_timer watchdog_{stream_.get_executor()};
  Phase phase_ = Phase::kHandling;
  std::chrono::steady_clock::time_point deadline_;
  bool timed_out_ = false;
  HttpServer::Impl& server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> res_;
  std::shared_ptr<const void> keep_;
  bool keep_alive_ = false;
  unsigned version_ = 11;
  char scratch_[4096];
};

void accept(HttpServer::Impl& s) {
  net::io_context& home = *s.iocs[s.next_context++ % s.iocs.size()];
  s.acceptor->async_accept(home, [&s](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || s.stopping) return;
    if (ec) {
      // Out of descriptors or memory: the waiting connection would fail the next accept at
      // once again, so the acceptor rests, longer each time, until the shortage passes.
      runtime::log_warning("accepting a connection failed (", ec.message(), "); retrying in ",
                           s.backoff.count(), " ms");
      s.accept_again->expires_after(s.backoff);
      s.backoff = std::min(s.backoff * 2, std::chrono::milliseconds(1000));
      s.accept_again->async_wait([&s](beast::error_code e) {
        if (!e && !s.stopping) accept(s);
      });
      return;
    }
    s.backoff = std::chrono::milliseconds(10);
    const bool reject = s.connections >= s.options.max_connections;
    if (s.tls) {
      std::make_shared<Connection<TlsStream>>(std::move(socket), s)->start(reject);
    } else {
      std::make_shared<Connection<beast::tcp_stream>>(std::move(socket), s)->start(reject);
    }
    accept(s);
  });
}

// Descriptors kept for what is not a connection (the model's files, logs, the process's own).
constexpr rlim_t kSpareDescriptors = 64;

// The soft limit on descriptors raised to the hard one, and max_connections clamped below it:
// a connection over max_connections is accepted and answered 503, which takes a descriptor, so
// the guard must trip before the descriptors run out.
void fit_descriptors(HttpOptions* options) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur < limit.rlim_max) {
    const rlim_t was = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &limit) == 0) {
      runtime::log_info("raised the open-file limit from ", was, " to ", limit.rlim_cur);
    } else {
      limit.rlim_cur = was;
    }
  }
  if (limit.rlim_cur == RLIM_INFINITY) return;
  // Half of what is left after the spare: each 503 holds a descriptor while it is written.
  const rlim_t room = limit.rlim_cur > 2 * kSpareDescriptors
                          ? (limit.rlim_cur - kSpareDescriptors) / 2
                          : limit.rlim_cur / 4;
  if (static_cast<rlim_t>(options->max_connections) > room) {
    runtime::log_warning("max_connections ", options->max_connections, " lowered to ", room,
                         ": the process may open ", limit.rlim_cur, " files");
    options->max_connections = static_cast<int>(room);
  }
}

}  // namespace

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { stop(std::chrono::milliseconds(0)); }

runtime::Result<std::unique_ptr<HttpServer>> HttpServer::start(HttpOptions options,
                                                               Handler handler) {
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->handler = std::move(handler);
  if (impl->options.threads < 1) impl->options.threads = 1;
  fit_descriptors(&impl->options);
  const HttpOptions& o = impl->options;
  if (o.ssl_cert_file.empty() != o.ssl_key_file.empty()) {
    return runtime::invalid_argument("HTTPS needs both a certificate file and a key file");
  }
  if (!o.ssl_cert_file.empty()) {
    impl->tls.emplace(net::ssl::context::tls_server);
    impl->tls->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                           net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                           net::ssl::context::no_tlsv1_1);
    beast::error_code ec;
    impl->tls->use_certificate_chain_file(o.ssl_cert_file, ec);
    if (ec) {
      return runtime::invalid_argument("certificate ", o.ssl_cert_file, ": ", ec.message());
    }
    impl->tls->use_private_key_file(o.ssl_key_file, net::ssl::context::pem, ec);
    if (ec) return runtime::invalid_argument("key ", o.ssl_key_file, ": ", ec.message());
  }
  for (int i = 0; i < impl->options.threads; ++i) {
    impl->iocs.push_back(std::make_unique<net::io_context>(1));
    impl->work.push_back(net::make_work_guard(*impl->iocs.back()));
  }
  impl->acceptor.emplace(*impl->iocs[0]);
  impl->accept_again.emplace(*impl->iocs[0]);
  const std::string where = impl->options.host + ":" + std::to_string(impl->options.port);
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(impl->options.host, ec);
  if (ec) return runtime::invalid_argument("'", impl->options.host, "' is not an IP address");
  const tcp::endpoint endpoint(address, impl->options.port);
  tcp::acceptor& acceptor = *impl->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return runtime::unavailable("cannot listen on ", where, ": ", ec.message());
  impl->port = acceptor.local_endpoint().port();
  accept(*impl);
  for (auto& ioc : impl->iocs) {
    impl->threads.emplace_back([ioc = ioc.get()] { ioc->run(); });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

uint16_t HttpServer::port() const { return impl_->port; }

void HttpServer::stop(std::chrono::milliseconds grace) {
  Impl& s = *impl_;
  if (s.stopped) return;
  s.stopped = true;
  s.stopping = true;
  net::post(*s.iocs[0], [&s] {
    beast::error_code ec;
    s.acceptor->close(ec);
    s.accept_again->cancel();
  });
  {
    std::unique_lock<std::mutex> lock(s.mu);
    if (!s.idle.wait_for(lock, grace, [&s] { return s.in_flight == 0; })) {
      runtime::log_warning(s.in_flight.load(), " requests still running after ", grace.count(),
                           " ms: closing them");
    }
  }
  s.work.clear();
  for (auto& ioc : s.iocs) ioc->stop();
  for (std::thread& t : s.threads) t.join();
  s.acceptor.reset();
  s.accept_again.reset();  // lives on iocs[0], as the acceptor does
  s.iocs.clear();
}

}  // namespace troupe::serve
