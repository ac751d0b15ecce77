#include "tools/serve/model_config.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <set>

#include "runtime/record_io.h"
#include "schema/model_server_config.pb.h"

namespace troupe::serve {

using runtime::Result;

namespace {

// The first syntax error protobuf's parser reports, with its place (1-based, as editors count).
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (!text.empty()) return;
    text = "line " + std::to_string(line + 1) + ", column " + std::to_string(column + 1) + ": " +
           message;
  }
  std::string text;
};

Result<VersionPolicy> policy_of(const tensorflow::serving::ServableVersionPolicy& p,
                                const std::string& where) {
  using P = tensorflow::serving::ServableVersionPolicy;
  VersionPolicy out;
  switch (p.policy_choice_case()) {
    case P::kLatest:
      out.num_versions = std::max<int64_t>(p.latest().num_versions(), 1);
      break;
    case P::kAll:
      out.kind = VersionPolicy::Kind::kAll;
      break;
    case P::kSpecific: {
      out.kind = VersionPolicy::Kind::kSpecific;
      for (int64_t v : p.specific().versions()) {
        if (v <= 0) return runtime::invalid_argument(where, ": version ", v, " is not a version");
        out.versions.push_back(v);
      }
      if (out.versions.empty()) {
        return runtime::invalid_argument(where, ": model_version_policy specific names no version");
      }
      std::sort(out.versions.begin(), out.versions.end());
      out.versions.erase(std::unique(out.versions.begin(), out.versions.end()), out.versions.end());
      break;
    }
    case P::POLICY_CHOICE_NOT_SET:
      break;  // TF Serving's default: the newest version
  }
  return out;
}

}  // namespace

std::vector<int64_t> VersionPolicy::choose(const std::vector<int64_t>& found) const {
  switch (kind) {
    case Kind::kAll:
      return found;
    case Kind::kSpecific: {
      std::vector<int64_t> out;
      std::set_intersection(found.begin(), found.end(), versions.begin(), versions.end(),
                            std::back_inserter(out));
      return out;
    }
    case Kind::kLatest:
      break;
  }
  const size_t keep = std::min<size_t>(found.size(), static_cast<size_t>(num_versions));
  return std::vector<int64_t>(found.end() - keep, found.end());
}

std::string VersionPolicy::to_string() const {
  switch (kind) {
    case Kind::kAll:
      return "all";
    case Kind::kSpecific: {
      std::string s = "specific";
      for (size_t i = 0; i < versions.size(); ++i) {
        s += (i == 0 ? " " : ", ") + std::to_string(versions[i]);
      }
      return s;
    }
    case Kind::kLatest:
      break;
  }
  return "latest " + std::to_string(num_versions);
}

bool VersionPolicy::operator==(const VersionPolicy& o) const {
  return kind == o.kind && num_versions == o.num_versions && versions == o.versions;
}

bool ModelConfig::operator==(const ModelConfig& o) const {
  return name == o.name && base_path == o.base_path && policy == o.policy && labels == o.labels;
}

Result<std::vector<ModelConfig>> parse_model_config(std::string_view text,
                                                    const std::string& origin) {
  tensorflow::serving::ModelServerConfig config;
  google::protobuf::TextFormat::Parser parser;
  FirstError error;
  parser.RecordErrorsTo(&error);
  if (!parser.ParseFromString(std::string(text), &config)) {
    return runtime::invalid_argument(origin, ": ",
                                     error.text.empty() ? "not a ModelServerConfig" : error.text);
  }
  return model_config_of(config, origin);
}

Result<std::vector<ModelConfig>> model_config_of(
    const tensorflow::serving::ModelServerConfig& config, const std::string& origin) {
  if (!config.has_model_config_list()) {
    return runtime::invalid_argument(origin, ": no model_config_list");
  }
  std::vector<ModelConfig> models;
  std::set<std::string> names;
  for (const auto& c : config.model_config_list().config()) {
    const std::string where = origin + ": model '" + c.name() + "'";
    if (c.name().empty()) return runtime::invalid_argument(origin, ": a config has no name");
    if (c.name().find_first_of("/:?") != std::string::npos) {
      return runtime::invalid_argument(where, ": a name may not hold '/', ':' or '?'");
    }
    if (!names.insert(c.name()).second) {
      return runtime::invalid_argument(where, ": configured twice");
    }
    if (c.base_path().empty()) return runtime::invalid_argument(where, ": no base_path");
    if (!c.model_platform().empty() && c.model_platform() != "tensorflow") {
      return runtime::invalid_argument(where, ": model_platform '", c.model_platform(),
                                       "' (troupe serves \"tensorflow\" exports)");
    }
    ModelConfig m{c.name(), c.base_path(), {}, {}};
    TROUPE_ASSIGN_OR_RETURN(m.policy, policy_of(c.model_version_policy(), where));
    for (const auto& [label, version] : c.version_labels()) {
      if (label.empty() || label.find_first_of("/:?") != std::string::npos) {
        return runtime::invalid_argument(where, ": version label '", label, "' is not a label");
      }
      if (version <= 0) {
        return runtime::invalid_argument(where, ": label '", label, "' names version ", version);
      }
      m.labels[label] = version;
    }
    models.push_back(std::move(m));
  }
  return models;
}

Result<std::vector<ModelConfig>> read_model_config(const std::string& path) {
  std::string text;
  if (runtime::Status s = runtime::read_file(path, &text); !s.ok()) {
    return runtime::make_error(s.code(), "--model_config_file ", path, ": cannot read it (",
                               s.message(), ")");
  }
  return parse_model_config(text, path);
}

}  // namespace troupe::serve
