// Fuzz target: a request body to troupe serve's REST API (tools/serve/rest_api.h), on a small
// export with float, integer and string inputs. The first byte picks the verb (predict,
// classify, regress, or metadata with the rest as the path), the rest is the body. Every input
// must get an answer with a status and a JSON body; nothing may crash the server.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "fuzz/fuzz_input.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/parsing_ops.h"
#include "tools/serve/rest_api.h"

namespace {

using namespace troupe;

struct Fixture {
  actors::Runtime runtime;
  std::unique_ptr<serve::ServedModels> models;
  std::unique_ptr<serve::RestApi> api;

  Fixture() {
    const char* tmp = std::getenv("TMPDIR");
    const std::string base =
        std::string(tmp && *tmp ? tmp : "/tmp") + "/troupe_fuzz_rest_" + std::to_string(::getpid());
    std::filesystem::remove_all(base);
    serving::SavedModel m;
    runtime::GraphBuilder b(&m.graph);
    auto x = ops::placeholder(b, runtime::DType::kFloat32, runtime::Shape{-1, 3}, "x");
    auto k = ops::placeholder(b, runtime::DType::kInt64, runtime::Shape{-1}, "k");
    auto s = ops::placeholder(b, runtime::DType::kString, runtime::Shape{-1}, "s");
    auto y = ops::add(b, ops::mul(b, x, 0.5), 2.0);
    using serving::make_signature;
    m.signatures["serving_default"] = make_signature(m.graph, "predict", {{"x", x}}, {{"y", y}});
    m.signatures["mixed"] =
        make_signature(m.graph, "predict", {{"x", x}, {"k", k}, {"s", s}},
                       {{"y", y}, {"k", ops::identity(b, k)}, {"s_bytes", ops::identity(b, s)}});
    // classify parses serialized tf.Example protos, as TF's signatures do.
    auto examples = ops::placeholder(b, runtime::DType::kString, runtime::Shape{-1}, "examples");
    auto parsed = ops::parse_example(
        b, examples, {{"x", {.dtype = runtime::DType::kFloat32, .shape = runtime::Shape{3}}}});
    m.signatures["classification"] =
        make_signature(m.graph, "classify", {{"inputs", examples}},
                       {{"scores", ops::add(b, ops::mul(b, parsed.dense["x"], 0.5), 2.0)}});
    m.signatures["regression"] =
        make_signature(m.graph, "regress", {{"x", x}}, {{"outputs", ops::reduce_sum(b, y, {1})}});
    (void)serving::write_saved_model(base, m);
    serve::ModelOptions defaults;
    defaults.poll_interval = std::chrono::milliseconds(0);
    defaults.batching.enabled = false;
    models = std::make_unique<serve::ServedModels>(defaults, runtime);
    models->apply({{"m", base, {}, {}}});
    std::filesystem::remove_all(base);  // loaded: the files are no longer read
    api = std::make_unique<serve::RestApi>(*models);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  troupe::fuzz::cap_memory();
  static Fixture* f = new Fixture();  // lives as long as the process
  if (size == 0) return 0;
  const char* verbs[] = {":predict", ":classify", ":regress", ""};
  const int pick = data[0] % 4;
  const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  serve::HttpRequest request;
  if (pick == 3) {
    request = {"GET", "/v1/models/" + rest, ""};
  } else {
    request = {"POST", std::string("/v1/models/m") + verbs[pick], rest};
  }
  int status = 0;
  f->api->handle(request, [&status](serve::HttpReply r) { status = r.status; });
  if (status < 200 || status > 599) std::abort();  // every request gets its answer
  return 0;
}
