// The models a server serves, as TF Serving's --model_config_file gives them: protobuf's text
// format of a ModelServerConfig (schema/model_server_config.proto), checked as a whole.
//
//   auto models = read_model_config("models.config");
//   // model_config_list {
//   //   config { name: "fmnist" base_path: "/exports/fmnist" model_platform: "tensorflow"
//   //            model_version_policy { latest { num_versions: 2 } }
//   //            version_labels { key: "stable" value: 3 } version_labels { key: "canary" value: 4
//   } }
//   // }
//   for (const ModelConfig& m : *models) ...;     // {name, base_path, policy, labels}
//   m.policy.choose({1, 3, 4});                    // the versions it serves of those found: {3, 4}
//   VersionPolicy::latest(2), VersionPolicy::all(), VersionPolicy::specific({3, 4})
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/status.h"

namespace tensorflow::serving {
class ModelServerConfig;  // schema/model_server_config.proto
}

namespace troupe::serve {

// Which of a model's version folders are served (TF Serving's ServableVersionPolicy).
struct VersionPolicy {
  enum class Kind { kLatest, kAll, kSpecific };
  Kind kind = Kind::kLatest;
  int64_t num_versions = 1;       // kLatest
  std::vector<int64_t> versions;  // kSpecific, ascending

  static VersionPolicy latest(int64_t n) { return {Kind::kLatest, n, {}}; }
  static VersionPolicy all() { return {Kind::kAll, 1, {}}; }
  static VersionPolicy specific(std::vector<int64_t> v) { return {Kind::kSpecific, 1, v}; }

  // The versions served of those found (ascending in, ascending out).
  std::vector<int64_t> choose(const std::vector<int64_t>& found) const;
  std::string to_string() const;  // "latest 2", "all", "specific 1, 3"
  bool operator==(const VersionPolicy& o) const;
};

struct ModelConfig {
  std::string name;
  std::string base_path;
  VersionPolicy policy;
  std::map<std::string, int64_t> labels;  // version_labels: a label and the version it names
  bool operator==(const ModelConfig& o) const;
  bool operator!=(const ModelConfig& o) const { return !(*this == o); }
};

// The models of a config's text; errors name `origin` (the file), and the line and column of a
// syntax error.
runtime::Result<std::vector<ModelConfig>> parse_model_config(std::string_view text,
                                                             const std::string& origin);
// The models of a config already parsed (a gRPC HandleReloadConfigRequest's), checked as a file's.
runtime::Result<std::vector<ModelConfig>> model_config_of(
    const tensorflow::serving::ModelServerConfig& config, const std::string& origin);
runtime::Result<std::vector<ModelConfig>> read_model_config(const std::string& path);

}  // namespace troupe::serve
