// Categorical id ops against hand-computed ids: hash buckets pinned to fixed values, bucket
// boundaries, vocabulary positions with and without out-of-vocabulary buckets, identity ranges
// and hashed crosses; errors name the column, the value and the row.
#include "ops/feature_ops.h"

#include <doctest/doctest.h>

#include "harness/op_harness.h"
#include "runtime/fingerprint.h"

using namespace troupe;
using namespace troupe::runtime;
using testing::OpTest;

namespace {

Tensor strings(const Shape& s, const std::vector<std::string>& v) {
  return Tensor::from_vector<std::string>(s, v);
}

std::vector<int64_t> ids(const Tensor& t) { return t.to_vector<int64_t>(); }

}  // namespace

TEST_CASE("string_to_hash_bucket: fingerprint64 modulo the bucket count, pinned") {
  OpTest t;
  Output x = t.feed(strings(Shape{2, 2}, {"dog", "Private", "", "dog"}));
  Tensor y = t.eval(ops::string_to_hash_bucket(t.b, x, 1000));
  CHECK(y.shape() == Shape{2, 2});
  CHECK(ids(y) == std::vector<int64_t>{838, 777, 342, 838});
  // A million buckets stay ids: nothing one-hot, nothing of the bucket count's size.
  Tensor big = t.eval(ops::string_to_hash_bucket(t.b, x, 1000000));
  CHECK(big.num_elements() == 4);
  CHECK(ids(big)[0] == int64_t(0xf3805bf28273c516ULL % 1000000));
  // Integers hash by their decimal text, as TF's hash bucket column of ints.
  Output n = t.feed(Tensor::from_vector<int64_t>(Shape{2}, {7, -3}));
  Output text = t.feed(strings(Shape{2}, {"7", "-3"}));
  CHECK(ids(t.eval(ops::string_to_hash_bucket(t.b, n, 97))) ==
        ids(t.eval(ops::string_to_hash_bucket(t.b, text, 97))));
  Output f = t.feed(Tensor::from_vector<float>(Shape{1}, {1.5f}));
  ops::string_to_hash_bucket(t.b, f, 10);
  CHECK_FALSE(t.b.ok());
}

TEST_CASE("bucketize: the number of boundaries at or below each value") {
  OpTest t;
  Output x = t.feed(Tensor::from_vector<float>(Shape{6}, {-5, 18, 18.5f, 24.9f, 50, 90}));
  CHECK(ids(t.eval(ops::bucketize(t.b, x, {18, 25, 50}))) ==
        std::vector<int64_t>{0, 1, 1, 1, 3, 3});
  Output n = t.feed(Tensor::from_vector<int64_t>(Shape{3}, {0, 1, 2}));
  CHECK(ids(t.eval(ops::bucketize(t.b, n, {1}))) == std::vector<int64_t>{0, 1, 1});
  ops::bucketize(t.b, x, {3, 1});
  CHECK_FALSE(t.b.ok());
}

TEST_CASE("vocabulary_lookup: positions, out-of-vocabulary buckets, defaults, errors") {
  OpTest t;
  Tensor vocab = strings(Shape{3}, {"red", "green", "blue"});
  Output x = t.feed(strings(Shape{4}, {"blue", "red", "dog", "green"}));
  // "dog" goes to 3 + fingerprint64("dog") % 2 = 3 + 0 (0xf3805bf28273c516 is even).
  CHECK(ids(t.eval(ops::vocabulary_lookup(t.b, x, vocab, 2, "color"))) ==
        std::vector<int64_t>{2, 0, 3, 1});
  CHECK(ids(t.eval(ops::vocabulary_lookup(t.b, x, vocab, 0, "color", 0))) ==
        std::vector<int64_t>{2, 0, 0, 1});
  auto r = t.run({ops::vocabulary_lookup(t.b, x, vocab, 0, "color")});
  REQUIRE_FALSE(r.ok());
  const std::string m = r.status().message();  // status() is a copy
  CHECK(m.find("column 'color'") != std::string::npos);
  CHECK(m.find("'dog'") != std::string::npos);
  CHECK(m.find("row 2") != std::string::npos);

  Output n = t.feed(Tensor::from_vector<int64_t>(Shape{2, 1}, {30, 10}));
  Tensor int_vocab = Tensor::from_vector<int64_t>(Shape{2}, {10, 30});
  CHECK(ids(t.eval(ops::vocabulary_lookup(t.b, n, int_vocab, 0, "code"))) ==
        std::vector<int64_t>{1, 0});

  OpTest dup;
  ops::vocabulary_lookup(dup.b, dup.feed(strings(Shape{1}, {"a"})), strings(Shape{2}, {"a", "a"}),
                         0, "letter");
  REQUIRE_FALSE(dup.b.ok());
  CHECK(dup.b.status().message().find("twice") != std::string::npos);
}

TEST_CASE("categorical_identity: ids in range, a default or an error naming the column") {
  OpTest t;
  Output x = t.feed(Tensor::from_vector<int32_t>(Shape{2, 2}, {0, 3, 9, 4}));
  auto r = t.run({ops::categorical_identity(t.b, x, 5, "digit")});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("column 'digit': id 9 in row 1") != std::string::npos);
  CHECK(ids(t.eval(ops::categorical_identity(t.b, x, 5, "digit", 0))) ==
        std::vector<int64_t>{0, 3, 0, 4});
}

TEST_CASE("hash_cross: every combination per example, the first input slowest, pinned") {
  OpTest t;
  Output animal = t.feed(strings(Shape{2}, {"dog", "cat"}));
  Output color = t.feed(strings(Shape{2, 2}, {"red", "blue", "red", "red"}));
  Tensor y = t.eval(ops::hash_cross(t.b, {animal, color}, 1000));
  REQUIRE(y.shape() == Shape{2, 2});
  auto v = ids(y);
  CHECK(v[0] == 961);  // fingerprint_cat64(fp("dog"), fp("red")) % 1000
  const auto cross = [](const char* a, const char* c) {
    return int64_t(
        runtime::fingerprint_cat64(runtime::fingerprint64(a), runtime::fingerprint64(c)) % 1000);
  };
  CHECK(v[1] == cross("dog", "blue"));
  CHECK(v[2] == cross("cat", "red"));
  CHECK(v[3] == v[2]);
  // Integers cross by their value's text, as a string column holding the same digits would.
  Output n = t.feed(Tensor::from_vector<int64_t>(Shape{1}, {7}));
  Output s = t.feed(strings(Shape{1}, {"7"}));
  Output red = t.feed(strings(Shape{1}, {"red"}));
  CHECK(ids(t.eval(ops::hash_cross(t.b, {n, red}, 97))) ==
        ids(t.eval(ops::hash_cross(t.b, {s, red}, 97))));
  // A missing value ("" or -1) takes part in no cross: -1, which crossed columns drop.
  Output some = t.feed(strings(Shape{2, 2}, {"red", "", "", ""}));
  Output num = t.feed(Tensor::from_vector<int64_t>(Shape{2}, {-1, 3}));
  CHECK(ids(t.eval(ops::hash_cross(t.b, {animal, some}, 1000))) ==
        std::vector<int64_t>{cross("dog", "red"), -1, -1, -1});
  CHECK(ids(t.eval(ops::hash_cross(t.b, {num, animal}, 1000)))[0] == -1);
}
