// CRC-32C, its mask and TFRecord framing against the reference's test vectors; torn and
// corrupt frames; atomic file writes.
#include "runtime/record_io.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "harness/bytes.h"
#include "runtime/crc32c.h"

using namespace troupe::runtime;

using troupe::testing::hex;
using troupe::testing::unhex;

TEST_CASE("crc32c: the check value, the mask, and extension") {
  CHECK(crc32c("123456789", 9) == 0xE3069283u);
  CHECK(mask_crc32c(0) == 0xa282ead8u);
  CHECK(mask_crc32c(crc32c("123456789", 9)) == 0xc78ab0e5u);
  CHECK(unmask_crc32c(mask_crc32c(0x12345678u)) == 0x12345678u);
  std::string long_text(1000, 'x');
  for (size_t i = 0; i < long_text.size(); ++i) long_text[i] = static_cast<char>(i * 7);
  CHECK(crc32c_extend(crc32c(long_text.data(), 333), long_text.data() + 333, 667) ==
        crc32c(long_text.data(), 1000));
}

TEST_CASE("TFRecord frames match the reference's event-file vectors") {
  std::string frame;
  const std::string version = unhex("09000000000000f03f1a0d627261696e2e4576656e743a32");
  append_record_frame(version.data(), version.size(), &frame);
  CHECK(hex(frame) ==
        "1800000000000000a37f4b2209000000000000f03f1a0d627261696e2e4576656e743a3286bf577a");
  std::string scalar_frame;
  const std::string scalar = unhex("09000000000000004010012a0d0a0b0a046c6f7373150000003f");
  append_record_frame(scalar.data(), scalar.size(), &scalar_frame);
  CHECK(hex(scalar_frame) ==
        "1a00000000000000129bd82d09000000000000004010012a0d0a0b0a046c6f7373150000003fe20576ce");
}

TEST_CASE("record reader: records back, and every torn or corrupt frame named by offset") {
  std::string file;
  for (const std::string& r : {std::string("first"), std::string(""), std::string("third one")}) {
    append_record_frame(r.data(), r.size(), &file);
  }
  RecordReader reader(file.data(), file.size(), "f");
  std::string_view rec;
  std::vector<std::string> got;
  while (true) {
    auto more = reader.next(&rec);
    REQUIRE(more.ok());
    if (!*more) break;
    got.emplace_back(rec);
  }
  CHECK(got == std::vector<std::string>{"first", "", "third one"});

  for (size_t cut = 1; cut < file.size(); ++cut) {
    RecordReader r(file.data(), cut, "f");
    Status last;
    while (true) {
      auto more = r.next(&rec);
      if (!more.ok()) {
        last = more.status();
        break;
      }
      if (!*more) break;
    }
    const bool at_boundary = cut == 21 || cut == 37;
    CHECK(last.ok() == at_boundary);
    if (!at_boundary) CHECK(last.message().find("f: truncated record") == 0);
  }
  for (size_t flip = 0; flip < file.size(); ++flip) {
    std::string bad = file;
    bad[flip] ^= 0x01;
    RecordReader r(bad.data(), bad.size(), "g");
    bool failed = false;
    while (true) {
      auto more = r.next(&rec);
      if (!more.ok()) {
        failed = true;
        CHECK(more.status().code() == Code::kDataLoss);
        CHECK(more.status().message().find("at byte ") != std::string::npos);
        break;
      }
      if (!*more) break;
    }
    CHECK(failed);
  }
}

TEST_CASE("record reader: after any damaged frame header, resync finds the next frame") {
  std::vector<std::string> records;
  std::string file;
  std::vector<size_t> starts;
  for (int i = 0; i < 6; ++i) {
    records.push_back(std::string(size_t(5 + 7 * i), char('a' + i)));
    starts.push_back(file.size());
    append_record_frame(records.back().data(), records.back().size(), &file);
  }
  // Every byte of the third frame's header (length and its checksum) in turn.
  for (size_t k = 0; k < 12; ++k) {
    std::string bad = file;
    bad[starts[2] + k] ^= 0x10;
    RecordReader r(bad.data(), bad.size(), "f");
    std::vector<std::string> got;
    int damaged = 0;
    std::string_view rec;
    while (true) {
      const uint64_t at = r.offset();
      auto more = r.next(&rec);
      if (!more.ok()) {
        CHECK(r.offset() == at);
        ++damaged;
        CHECK(r.resync() == starts[3]);
        continue;
      }
      if (!*more) break;
      got.emplace_back(rec);
    }
    CAPTURE(k);
    CHECK(damaged == 1);
    CHECK(got ==
          std::vector<std::string>{records[0], records[1], records[3], records[4], records[5]});
  }
  // A frame cut short at the end: nothing left to find.
  RecordReader cut(file.data(), file.size() - 3, "f");
  std::string_view rec;
  for (int i = 0; i < 5; ++i) REQUIRE(*cut.next(&rec));
  CHECK(!cut.next(&rec).ok());
  CHECK(cut.resync() == file.size() - 3);
  CHECK(*cut.next(&rec) == false);
}

TEST_CASE("write_file_atomic replaces a file whole and leaves no temporary behind") {
  const auto dir = std::filesystem::temp_directory_path() / "troupe_atomic_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "index").string();
  REQUIRE(write_file_atomic(path, "one").ok());
  REQUIRE(write_file_atomic(path, "two, longer").ok());
  std::string back;
  REQUIRE(read_file(path, &back).ok());
  CHECK(back == "two, longer");
  CHECK(std::distance(std::filesystem::directory_iterator(dir), {}) == 1);
  CHECK(read_file((dir / "missing").string(), &back).code() == Code::kNotFound);
  std::filesystem::remove_all(dir);
}
