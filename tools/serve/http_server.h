// The HTTP/1.1 side of `troupe serve`: Boost.Beast on an io_context of a few threads, every
// connection asynchronous (reads, handler replies, writes) and kept alive. A handler may answer
// later from another thread (a batched prediction): the reply is posted back to the connection,
// and the thread meanwhile serves other connections.
//
//   auto server = HttpServer::start({.host = "127.0.0.1", .port = 8501},
//                                   [&](HttpRequest r, std::function<void(HttpReply)> done) {
//                                     api.handle(r, std::move(done));
//                                   });
//   ... (*server)->port() ...
//   (*server)->stop(std::chrono::seconds(10));   // drains requests in flight, then closes
//
// Limits, each answered and logged, never a crash: a request without the bearer token (when one
// is set) gets 401, a body over body_limit 413, a malformed
// request 400, connections beyond max_connections 503, a request that does not arrive whole
// within idle_timeout 408; a kept-alive connection idle for as long is closed. At start the
// open-file limit is raised to its hard limit and max_connections lowered below it (so 503s,
// which take a descriptor each, come before descriptors run out); a failed accept (EMFILE,
// ENFILE, ENOMEM) is logged and retried after a back-off, never at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "runtime/status.h"
#include "tools/serve/rest_api.h"

namespace troupe::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8501;  // 0: any free port (port() says which)
  int threads = 2;
  size_t body_limit = 16 << 20;
  int max_connections = 1024;
  std::chrono::milliseconds idle_timeout{30000};
  // For a port beyond 127.0.0.1, both off by default as in TF Serving: HTTPS with this PEM
  // certificate (chain) and key, and a bearer token every request must carry
  // ("Authorization: Bearer TOKEN"; 401 without it, compared in constant time).
  std::string ssl_cert_file, ssl_key_file;
  std::string auth_token;
};

using Handler = std::function<void(HttpRequest, std::function<void(HttpReply)>)>;

class HttpServer {
 public:
  static runtime::Result<std::unique_ptr<HttpServer>> start(HttpOptions options, Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const;
  // Stops accepting, waits up to `grace` for the requests in flight to be answered, then closes
  // every connection and joins the threads. Idempotent.
  void stop(std::chrono::milliseconds grace);

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::serve
