// Every fuzz target over its corpus (tests/fuzz/corpus) and the inputs that once crashed it
// (tests/fuzz/regressions), as a plain test: every build runs them, sanitizers or not.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#define FUZZ_TARGET(name) extern "C" int name(const uint8_t* data, size_t size);
FUZZ_TARGET(fuzz_tensor_codec)
FUZZ_TARGET(fuzz_graph_codec)
FUZZ_TARGET(fuzz_shard_call)
FUZZ_TARGET(fuzz_checkpoint)
FUZZ_TARGET(fuzz_record_file)
FUZZ_TARGET(fuzz_csv)
FUZZ_TARGET(fuzz_libsvm)
FUZZ_TARGET(fuzz_idx)
FUZZ_TARGET(fuzz_rest_api)
FUZZ_TARGET(fuzz_handshake)
FUZZ_TARGET(fuzz_sealed_record)
FUZZ_TARGET(fuzz_tfrecord)
FUZZ_TARGET(fuzz_grpc_request)
#undef FUZZ_TARGET

namespace {

// Runs `target` on every file of its corpus and regressions; how many there were.
size_t replay(const std::string& name, int (*target)(const uint8_t*, size_t)) {
  size_t n = 0;
  for (const char* kind : {"corpus", "regressions"}) {
    const std::filesystem::path dir = std::filesystem::path(TROUPE_FUZZ_DIR) / kind / name;
    if (!std::filesystem::exists(dir)) continue;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path(), std::ios::binary);
      const std::vector<char> bytes{std::istreambuf_iterator<char>(in), {}};
      CAPTURE(entry.path().string());
      CHECK(target(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()) == 0);
      ++n;
    }
  }
  return n;
}

}  // namespace

TEST_CASE("every fuzz target runs its whole corpus without a crash") {
  const std::pair<const char*, int (*)(const uint8_t*, size_t)> targets[] = {
      {"tensor_codec", fuzz_tensor_codec},
      {"graph_codec", fuzz_graph_codec},
      {"shard_call", fuzz_shard_call},
      {"checkpoint", fuzz_checkpoint},
      {"record_file", fuzz_record_file},
      {"csv", fuzz_csv},
      {"libsvm", fuzz_libsvm},
      {"idx", fuzz_idx},
      {"rest_api", fuzz_rest_api},
      {"handshake", fuzz_handshake},
      {"sealed_record", fuzz_sealed_record},
      {"tfrecord", fuzz_tfrecord},
      {"grpc_request", fuzz_grpc_request},
  };
  for (const auto& [name, fn] : targets) {
    CAPTURE(name);
    CHECK(replay(name, fn) > 0);
  }
}
