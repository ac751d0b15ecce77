// troupe serve's --model_config_file: TF Serving's ModelServerConfig in protobuf's text format,
// read as TF Serving's documentation writes it, each mistake refused naming the file and what is
// wrong; and which version folders each version policy serves.
#include <doctest/doctest.h>

#include "tools/serve/model_config.h"

using namespace troupe::serve;
using Kind = VersionPolicy::Kind;

TEST_CASE("TF Serving's config file, as its documentation writes it") {
  // The example of TF Serving's "Model Server Configuration" guide, with a policy of each kind.
  auto models = parse_model_config(R"(
model_config_list {
  config {
    name: 'my_first_model'
    base_path: '/tmp/my_first_model/'
    model_platform: 'tensorflow'
  }
  config {
    name: 'my_second_model'
    base_path: '/tmp/my_second_model/'
    model_platform: 'tensorflow'
    model_version_policy {
      specific {
        versions: 43
        versions: 42
      }
    }
    version_labels {
      key: 'stable'
      value: 42
    }
    version_labels {
      key: 'canary'
      value: 43
    }
  }
  config { name: "latest_two" base_path: "/m" model_version_policy { latest { num_versions: 2 } } }
  config { name: "every" base_path: "/m" model_version_policy { all {} } }
}
)",
                                   "models.config");
  REQUIRE_MESSAGE(models.ok(), models.status().to_string());
  REQUIRE(models->size() == 4);
  const ModelConfig& first = (*models)[0];
  CHECK(first.name == "my_first_model");
  CHECK(first.base_path == "/tmp/my_first_model/");
  CHECK(first.policy.kind == Kind::kLatest);
  CHECK(first.policy.num_versions == 1);
  CHECK(first.labels.empty());
  const ModelConfig& second = (*models)[1];
  CHECK(second.policy.kind == Kind::kSpecific);
  CHECK(second.policy.versions == std::vector<int64_t>{42, 43});
  CHECK(second.labels == std::map<std::string, int64_t>{{"canary", 43}, {"stable", 42}});
  CHECK((*models)[2].policy.to_string() == "latest 2");
  CHECK((*models)[3].policy.to_string() == "all");
  // An empty list is a config too: a reload that serves nothing.
  auto none = parse_model_config("model_config_list {}", "empty.config");
  REQUIRE(none.ok());
  CHECK(none->empty());
}

TEST_CASE("a config's mistakes are refused, naming the file and what is wrong") {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{
           {"", "models.config: no model_config_list"},
           {"model_config_list {\n  config { name: 'a' base_path: }\n}",
            "models.config: line 2, column 33"},
           {"model_config_list { config { name: 'a' base_path: '/a' logging_config {} } }",
            "logging_config"},
           {"model_config_list { config { name: 'a' base_path: '/a' }\n"
            "config { name: 'a' base_path: '/b' } }",
            "model 'a': configured twice"},
           {"model_config_list { config { name: 'a' } }", "model 'a': no base_path"},
           {"model_config_list { config { base_path: '/a' } }", "a config has no name"},
           {"model_config_list { config { name: 'a/b' base_path: '/a' } }", "may not hold '/'"},
           {"model_config_list { config { name: 'a' base_path: '/a' model_platform: 'pytorch' } }",
            "model_platform 'pytorch'"},
           {"model_config_list { config { name: 'a' base_path: '/a' "
            "model_version_policy { specific {} } } }",
            "specific names no version"},
           {"model_config_list { config { name: 'a' base_path: '/a' "
            "model_version_policy { specific { versions: -3 } } } }",
            "version -3 is not a version"},
           {"model_config_list { config { name: 'a' base_path: '/a' "
            "version_labels { key: 'stable' value: 0 } } }",
            "label 'stable' names version 0"},
       }) {
    auto parsed = parse_model_config(c.text, "models.config");
    REQUIRE_MESSAGE(!parsed.ok(), c.text);
    CHECK_MESSAGE(parsed.status().message().find(c.says) != std::string::npos, c.text, " -> ",
                  parsed.status().message());
    CHECK(parsed.status().message().rfind("models.config", 0) == 0);
  }
  auto missing = read_model_config("/nonexistent/models.config");
  REQUIRE(!missing.ok());
  CHECK(missing.status().message().find("/nonexistent/models.config") != std::string::npos);
}

TEST_CASE("a version policy picks among the version folders found") {
  const std::vector<int64_t> found{1, 3, 4};
  CHECK(VersionPolicy{}.choose(found) == std::vector<int64_t>{4});
  CHECK(VersionPolicy::latest(2).choose(found) == std::vector<int64_t>{3, 4});
  CHECK(VersionPolicy::latest(5).choose(found) == found);
  CHECK(VersionPolicy::all().choose(found) == found);
  CHECK(VersionPolicy::specific({2, 3}).choose(found) == std::vector<int64_t>{3});
  CHECK(VersionPolicy::specific({2}).choose(found).empty());
  CHECK(VersionPolicy{}.choose({}).empty());
  CHECK(VersionPolicy::specific({2, 3}).to_string() == "specific 2, 3");
}
