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

TEST_CASE("sequence columns read back as sequences; a kind without a sequence form is named") {
  for (const std::string line : {"sequence_identity tokens buckets=1000 embedding=16 combiner=mean",
                                 "sequence_vocabulary words values=a,b oov=1 indicator",
                                 "sequence_hash words buckets=100 embedding=4 combiner=mean",
                                 "sequence_numeric readings width=3"}) {
    CAPTURE(line);
    auto c = parse_column(line);
    REQUIRE_MESSAGE(c.ok(), c.status().to_string());
    CHECK(c->is_sequence());
    CHECK(column_text(*c) == line);
  }
  CHECK(parse_column("sequence_crossed a,b buckets=4")
            .status()
            .message()
            .find("sequence_crossed is not sequence_numeric") != std::string::npos);
  CHECK(parse_column("sequence_identity tokens buckets=4")
            .status()
            .message()
            .find("through embedding_column or indicator_column") != std::string::npos);
  CHECK(parse_column("sequence_identity t buckets=4 weight=w indicator")
            .status()
            .message()
            .find("takes no weight=") != std::string::npos);
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
