#include "estimators/input/idx_file.h"

#include <doctest/doctest.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

using troupe::estimators::input::read_idx;

namespace {
std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("troupe_idx_" + name)).string();
}
void write_file(const std::string& path, const std::string& bytes, bool gz) {
  if (gz) {
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(path, std::ios::binary) << bytes;
  }
}
std::string idx_bytes() {  // rank 2, [2, 3]
  std::string s("\0\0\x08\x02\0\0\0\x02\0\0\0\x03", 12);
  return s + std::string("\x01\x02\x03\x04\x05\x06", 6);
}
}  // namespace

TEST_CASE("IDX files, plain or gzipped, read into uint8 tensors") {
  for (bool gz : {false, true}) {
    std::string path = temp_path(gz ? "ok.gz" : "ok");
    write_file(path, idx_bytes(), gz);
    auto t = read_idx(path);
    REQUIRE_MESSAGE(t.ok(), t.status().to_string());
    CHECK(t->shape() == troupe::runtime::Shape{2, 3});
    CHECK(t->data<uint8_t>()[5] == 6);
    std::filesystem::remove(path);
  }
}

TEST_CASE("bad IDX files are errors that name the file and the problem") {
  std::string path = temp_path("bad");
  auto error_for = [&](const std::string& bytes) {
    write_file(path, bytes, true);
    auto r = read_idx(path);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find(path) != std::string::npos);
    return r.status().message();
  };
  std::string good = idx_bytes();
  CHECK(error_for(good.substr(0, 2)).find("header") != std::string::npos);
  CHECK(error_for(std::string("\x01\x02\x03\x04", 4)).find("magic") != std::string::npos);
  CHECK(error_for(good.substr(0, 8)).find("truncated in the header") != std::string::npos);
  CHECK(error_for(good.substr(0, 15)).find("body truncated") != std::string::npos);
  CHECK(error_for(good + "x").find("trailing") != std::string::npos);
  std::filesystem::remove(path);
  CHECK(read_idx("/nonexistent/file.gz").status().message().find("cannot be opened") !=
        std::string::npos);
}

TEST_CASE("the Fashion-MNIST package reads when installed") {
  const std::string dir = "/usr/share/datasets/fashion-mnist/";
  if (!std::filesystem::exists(dir + "t10k-labels-idx1-ubyte.gz")) {
    MESSAGE("dataset-fashion-mnist is not installed; skipped");
    return;
  }
  auto labels = read_idx(dir + "t10k-labels-idx1-ubyte.gz");
  REQUIRE(labels.ok());
  CHECK(labels->shape() == troupe::runtime::Shape{10000});
  auto images = read_idx(dir + "t10k-images-idx3-ubyte.gz");
  REQUIRE(images.ok());
  CHECK(images->shape() == troupe::runtime::Shape{10000, 28, 28});
}

TEST_CASE("a gzip CRC or length mismatch in an IDX file is data loss, not the end of the file") {
  const std::string path = temp_path("crc.gz");
  write_file(path, idx_bytes(), true);
  std::string gz;
  {
    std::ifstream in(path, std::ios::binary);
    gz.assign(std::istreambuf_iterator<char>(in), {});
  }
  // The gzip trailer: CRC-32 of the data, then its length, 4 bytes each.
  for (size_t at : {gz.size() - 8, gz.size() - 4}) {
    std::string bad = gz;
    bad[at] = static_cast<char>(bad[at] ^ 0x5a);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bad;
    auto r = read_idx(path);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == troupe::runtime::Code::kDataLoss);
    CHECK_MESSAGE(r.status().message().find("corrupt gzip data") != std::string::npos,
                  r.status().message());
  }
  // A trailer cut off, whole or in part: the data is all there but was never checked.
  for (size_t cut : {size_t{8}, size_t{3}}) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << gz.substr(0, gz.size() - cut);
    auto r = read_idx(path);
    CAPTURE(cut);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == troupe::runtime::Code::kDataLoss);
    CHECK_MESSAGE(r.status().message().find("ends before its 8-byte trailer") != std::string::npos,
                  r.status().message());
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc) << gz;
  CHECK(read_idx(path).ok());
  std::filesystem::remove(path);
}

TEST_CASE("an IDX header that claims more than its file holds is refused before allocating") {
  const std::string path = temp_path("claims");
  // [32768, 32768]: 1 GiB of pixels claimed by a 12-byte header.
  const std::string header("\0\0\x08\x02\0\0\x80\0\0\0\x80\0", 12);
  for (bool gz : {false, true}) {
    write_file(path, header + "abc", gz);
    auto r = read_idx(path);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == troupe::runtime::Code::kDataLoss);
    CHECK_MESSAGE(r.status().message().find("claims 1073741824 bytes") != std::string::npos,
                  r.status().message());
  }
  std::filesystem::remove(path);
}
