// Feature columns as text: spec lines read and written back, spec files with their errors
// naming file and line, and the floats troupe_model.txt keeps.
#include "tools/column_spec.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace troupe::cli {

using estimators::FeatureColumn;

TEST_CASE("a column's spec line reads back as the same column") {
  for (const std::string line :
       {"numeric hours_per_week", "bucketized age boundaries=18,25,30",
        "vocabulary workclass values=Private,State-gov oov=1 indicator",
        "hash native_country buckets=1000 embedding=6", "identity digit buckets=10",
        "crossed education,occupation buckets=10000"}) {
    CAPTURE(line);
    auto c = parse_column(line);
    REQUIRE(c.ok());
    auto again = parse_column(column_text(*c));
    REQUIRE(again.ok());
    CHECK(column_text(*again) == column_text(*c));
  }
  auto c = parse_column("vocabulary workclass values=Private,State-gov oov=1 indicator");
  REQUIRE(c.ok());
  CHECK(c->kind == FeatureColumn::Kind::kIndicator);
}

TEST_CASE("vocabulary values with commas, spaces and percent signs survive the text") {
  const FeatureColumn c = estimators::categorical_column_with_vocabulary_list(
      "city", {"Washington, D.C.", "100%", "New York"}, 1);
  auto back = parse_column(column_text(c));
  REQUIRE(back.ok());
  CHECK(column_text(*back) == column_text(c));
  REQUIRE(back->vocabulary.num_elements() == 3);
}

TEST_CASE("a bad column line says what is wrong with it") {
  auto unknown = parse_column("spline age");
  REQUIRE(!unknown.ok());
  CHECK(unknown.status().message().find("spline age") != std::string::npos);
  CHECK(!parse_column("hash country buckets=many").ok());
  CHECK(!parse_column("numeric").ok());
}

TEST_CASE("a spec file: comments, wide and deep parts, and errors naming file and line") {
  const auto path = std::filesystem::temp_directory_path() /
                    ("troupe_columns_" + std::to_string(::getpid()) + ".txt");
  std::ofstream(path) << "# the deep part\nnumeric x\n\nwide identity d buckets=10\n";
  auto spec = read_columns_file(path.string());
  REQUIRE(spec.ok());
  CHECK(spec->columns.size() == 1);
  CHECK(spec->wide.size() == 1);

  std::ofstream(path) << "numeric x\nnumeric\n";
  auto bad = read_columns_file(path.string());
  REQUIRE(!bad.ok());
  CHECK(bad.status().message().find(path.string() + ":2:") == 0);
  std::ofstream(path) << "# nothing\n";
  CHECK(read_columns_file(path.string()).status().message().find("no feature columns") !=
        std::string::npos);
  std::filesystem::remove(path);
  CHECK(read_columns_file(path.string()).status().message().find("cannot read") !=
        std::string::npos);
}

TEST_CASE("floats as troupe_model.txt keeps them read back exactly") {
  const std::vector<float> v = {0.1f, -3.5f, 1e-7f, 12345.678f};
  std::vector<float> back;
  REQUIRE(parse_floats(format_floats(v), &back));
  CHECK(back == v);
  CHECK(!parse_floats("1,x", &back));
}

}  // namespace troupe::cli
