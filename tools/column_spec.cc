#include "tools/column_spec.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

namespace troupe::cli {

using estimators::FeatureColumn;
using Kind = FeatureColumn::Kind;
using runtime::DType;
using runtime::Result;

std::string format_floats(const std::vector<float>& v) {
  std::string text;
  for (float f : v) {
    char buf[32];
    const auto end = std::to_chars(buf, buf + sizeof buf, f).ptr;
    text += (text.empty() ? "" : ",") + std::string(buf, end);
  }
  return text;
}

bool parse_floats(const std::string& text, std::vector<float>* out) {
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');) {
    char* end = nullptr;
    const float v = std::strtof(item.c_str(), &end);
    if (item.empty() || *end != '\0') return false;
    out->push_back(v);
  }
  return true;
}

namespace {

std::string escape(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (c == ',' || c == ' ' || c == '%' || c < 0x20 || c == 0x7f) {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

bool unescape(const std::string& s, std::string* out) {
  out->clear();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      *out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return false;
    unsigned v = 0;
    const auto r = std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16);
    if (r.ec != std::errc() || r.ptr != s.data() + i + 3) return false;
    *out += static_cast<char>(v);
    i += 2;
  }
  return true;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::stringstream list(s);
  for (std::string item; std::getline(list, item, sep);) parts.push_back(item);
  return parts;
}

std::string doubles_text(const std::vector<double>& v) {
  std::string text;
  for (double d : v) {
    char buf[32];
    const auto end = std::to_chars(buf, buf + sizeof buf, d).ptr;
    text += (text.empty() ? "" : ",") + std::string(buf, end);
  }
  return text;
}

// The categorical part of a column: KIND FEATURE and its options.
std::string categorical_text(const FeatureColumn& c) {
  std::string text;
  switch (c.kind) {
    case Kind::kBucketized:
      return "bucketized " + c.key + " boundaries=" + doubles_text(c.boundaries) +
             (c.sources[0].width != 1 ? " width=" + std::to_string(c.sources[0].width) : "");
    case Kind::kVocabulary: {
      text = "vocabulary " + c.key + " values=";
      for (int64_t i = 0; i < c.vocabulary.num_elements(); ++i) {
        text += (i ? "," : "") + (c.vocabulary.dtype() == DType::kString
                                      ? escape(c.vocabulary.data<std::string>()[i])
                                      : std::to_string(c.vocabulary.data<int64_t>()[i]));
      }
      if (c.vocabulary.dtype() == DType::kInt64) text += " integers";
      if (c.num_oov_buckets > 0) text += " oov=" + std::to_string(c.num_oov_buckets);
      break;
    }
    case Kind::kIdentity:
      text = "identity " + c.key + " buckets=" + std::to_string(c.num_buckets);
      break;
    case Kind::kHashBucket:
      return "hash " + c.key + " buckets=" + std::to_string(c.num_buckets);
    case Kind::kCrossed: {
      std::string keys;
      for (const std::string& k : c.cross_keys) keys += (keys.empty() ? "" : ",") + k;
      return "crossed " + keys + " buckets=" + std::to_string(c.num_buckets);
    }
    case Kind::kWeighted:
      return categorical_text(c.sources[0]) + " weight=" + c.weight_key;
    default:
      return "";
  }
  if (c.default_value >= 0) text += " default=" + std::to_string(c.default_value);
  return text;
}

bool to_int64(const std::string& s, int64_t* out) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size();
}

}  // namespace

namespace {

std::string plain_column_text(const FeatureColumn& c) {
  switch (c.kind) {
    case Kind::kNumeric: {
      std::string text = "numeric " + c.key;
      if (c.width != 1) text += " width=" + std::to_string(c.width);
      if (!c.normalizer.mean.empty()) {
        text += " mean=" + format_floats(c.normalizer.mean) +
                " scale=" + format_floats(c.normalizer.scale);
      }
      return text;
    }
    case Kind::kEmbedding:
      return categorical_text(c.sources[0]) + " embedding=" + std::to_string(c.dimension) +
             " combiner=" + c.combiner;
    case Kind::kIndicator:
      return categorical_text(c.sources[0]) + " indicator";
    default:
      return categorical_text(c);
  }
}

}  // namespace

std::string column_text(const FeatureColumn& c) {
  return (c.is_sequence() ? "sequence_" : "") + plain_column_text(c);
}

Result<FeatureColumn> parse_column(const std::string& line) {
  std::vector<std::string> words;
  for (const std::string& w : split(line, ' ')) {
    if (!w.empty()) words.push_back(w);
  }
  auto bad = [&](const std::string& why) {
    return runtime::invalid_argument("feature column '", line, "': ", why);
  };
  if (words.size() < 2) return bad("needs a kind and a feature");
  std::string kind = words[0];
  const std::string& key = words[1];
  std::map<std::string, std::string> opt;
  for (size_t i = 2; i < words.size(); ++i) {
    const size_t eq = words[i].find('=');
    if (eq == std::string::npos) {
      opt[words[i]] = "";
    } else {
      opt[words[i].substr(0, eq)] = words[i].substr(eq + 1);
    }
  }
  auto take = [&](const std::string& name) -> std::string {
    auto it = opt.find(name);
    if (it == opt.end()) return "";
    std::string v = it->second;
    opt.erase(it);
    return v;
  };
  auto int_opt = [&](const std::string& name, int64_t fallback, int64_t* out) -> bool {
    if (!opt.count(name)) {
      *out = fallback;
      return true;
    }
    return to_int64(take(name), out);
  };
  int64_t oov = 0, fallback = -1, buckets = 0, width = 1;
  if (!int_opt("oov", 0, &oov) || !int_opt("default", -1, &fallback) ||
      !int_opt("buckets", 0, &buckets) || !int_opt("width", 1, &width)) {
    return bad("oov, default, buckets and width take integers");
  }
  // sequence_numeric, sequence_identity, ...: the column's feature is a sequence an example.
  const bool sequence = kind.rfind("sequence_", 0) == 0;
  if (sequence) {
    kind = kind.substr(std::strlen("sequence_"));
    if (kind != "numeric" && kind != "vocabulary" && kind != "identity" && kind != "hash") {
      return bad("sequence_" + kind + " is not sequence_numeric, sequence_vocabulary, " +
                 "sequence_identity or sequence_hash");
    }
    if (opt.count("weight")) return bad("a sequence column takes no weight=");
  }
  FeatureColumn c;
  if (kind == "numeric") {
    estimators::FeatureStats st;
    const bool normalized = opt.count("mean") || opt.count("scale");
    if (normalized && (!parse_floats(take("mean"), &st.mean) ||
                       !parse_floats(take("scale"), &st.scale) || st.mean.empty())) {
      return bad("mean= and scale= take comma-separated numbers, one per value");
    }
    c = estimators::numeric_column(key, width, st);
  } else if (kind == "bucketized") {
    std::vector<double> bounds;
    for (const std::string& b : split(take("boundaries"), ',')) {
      char* end = nullptr;
      bounds.push_back(std::strtod(b.c_str(), &end));
      if (b.empty() || *end != '\0') return bad("boundaries= takes comma-separated numbers");
    }
    c = estimators::bucketized_column(estimators::numeric_column(key, width), bounds);
  } else if (kind == "vocabulary") {
    const bool integers = opt.count("integers") > 0;
    take("integers");
    std::vector<std::string> values;
    std::vector<int64_t> ints;
    for (const std::string& v : split(take("values"), ',')) {
      std::string word;
      if (!unescape(v, &word)) return bad("a damaged %-escape in values=");
      int64_t n = 0;
      if (integers && !to_int64(word, &n)) return bad("'" + word + "' is not an integer");
      values.push_back(word);
      ints.push_back(n);
    }
    c = integers ? estimators::categorical_column_with_int_vocabulary_list(key, ints, oov, fallback)
                 : estimators::categorical_column_with_vocabulary_list(key, values, oov, fallback);
  } else if (kind == "vocabulary_file") {
    TROUPE_ASSIGN_OR_RETURN(
        c, estimators::categorical_column_with_vocabulary_file(key, take("path"), oov, fallback));
  } else if (kind == "identity") {
    c = estimators::categorical_column_with_identity(key, buckets, fallback);
  } else if (kind == "hash") {
    c = estimators::categorical_column_with_hash_bucket(key, buckets);
  } else if (kind == "crossed") {
    c = estimators::crossed_column(split(key, ','), {}, buckets);
  } else {
    return bad("kind '" + kind +
               "' is not numeric, bucketized, vocabulary, vocabulary_file, identity, hash or "
               "crossed");
  }
  c.sequence = sequence;
  if (opt.count("weight")) c = estimators::weighted_categorical_column(c, take("weight"));
  if (opt.count("embedding")) {
    int64_t dim = 0;
    if (!to_int64(take("embedding"), &dim)) return bad("embedding= takes a dimension");
    const std::string combiner = opt.count("combiner") ? take("combiner") : "mean";
    c = estimators::embedding_column(c, dim, combiner);
  } else if (opt.count("indicator")) {
    take("indicator");
    c = estimators::indicator_column(c);
  }
  if (!opt.empty()) return bad("unknown option '" + opt.begin()->first + "'");
  const bool dense_only = c.kind == Kind::kEmbedding || c.kind == Kind::kIndicator;
  if (runtime::Status s = sequence ? estimators::validate_sequence_columns({c})
                                   : estimators::validate_columns({c}, /*for_linear=*/!dense_only);
      !s.ok()) {
    return bad(s.message());
  }
  return c;
}

Result<ColumnSpec> read_columns_file(const std::string& path) {
  std::ifstream file(path);
  if (!file) return runtime::not_found("--columns: cannot read '", path, "'");
  ColumnSpec spec;
  int number = 0;
  for (std::string line; std::getline(file, line);) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t start = line.find_first_not_of(' ');
    if (start == std::string::npos || line[start] == '#') continue;
    line.erase(0, start);
    std::vector<FeatureColumn>* part = &spec.columns;
    if (line.rfind("wide ", 0) == 0 || line.rfind("deep ", 0) == 0) {
      if (line[0] == 'w') part = &spec.wide;
      line.erase(0, 5);
    }
    auto c = parse_column(line);
    if (!c.ok()) return runtime::invalid_argument(path, ":", number, ": ", c.status().message());
    part->push_back(std::move(*c));
  }
  if (spec.columns.empty() && spec.wide.empty()) {
    return runtime::invalid_argument(path, ": no feature columns");
  }
  return spec;
}

std::vector<FeatureColumn> wide_columns_of(const std::vector<FeatureColumn>& linear) {
  std::vector<FeatureColumn> wide;
  for (const FeatureColumn& c : linear) {
    if (c.categorical()) wide.push_back(c);
  }
  const size_t n = wide.size();
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      // Room for every pair twice over, so that few of them collide.
      const int64_t pairs = wide[i].id_count() * wide[j].id_count();
      const int64_t buckets = std::clamp<int64_t>(2 * pairs, 16, 100000);
      wide.push_back(estimators::crossed_column({wide[i].key, wide[j].key}, {}, buckets));
    }
  }
  return wide;
}

std::vector<FeatureColumn> tree_columns_of(std::vector<FeatureColumn> dnn) {
  for (FeatureColumn& c : dnn) {
    if (c.kind == FeatureColumn::Kind::kEmbedding) c = estimators::indicator_column(c.sources[0]);
  }
  return dnn;
}

Result<std::vector<FeatureColumn>> infer_columns(const estimators::input::Dataset& data,
                                                 const estimators::Standardization& stats,
                                                 bool dnn) {
  std::vector<std::string> names = data.features;
  std::sort(names.begin(), names.end());
  std::map<std::string, std::map<std::string, int64_t>> counts;  // text feature: value: count
  std::map<std::string, int64_t> widths;
  for (int64_t u = 0; u < data.source->num_units(); ++u) {
    std::vector<actors::Chunk> chunks;
    int64_t skipped = 0;
    TROUPE_RETURN_IF_ERROR(data.source->read(u, &chunks, &skipped));
    for (const actors::Chunk& c : chunks) {
      for (const std::string& f : names) {
        const runtime::Tensor& t = c.components[data.component(f)];
        if (t.rank() >= 1 && t.dim(0) > 0) widths[f] = t.num_elements() / t.dim(0);
        if (t.dtype() != DType::kString) continue;
        const int64_t per = widths[f];
        auto& seen = counts[f];
        for (int64_t j = c.first() * per; j < c.last() * per; ++j) ++seen[t.data<std::string>()[j]];
      }
    }
  }
  std::vector<FeatureColumn> columns;
  for (const std::string& f : names) {
    auto text = counts.find(f);
    if (text == counts.end()) {
      auto st = stats.find(f);
      columns.push_back(
          estimators::numeric_column(f, widths.count(f) ? widths[f] : 1,
                                     st == stats.end() ? estimators::FeatureStats{} : st->second));
      continue;
    }
    const int64_t distinct = static_cast<int64_t>(text->second.size());
    FeatureColumn c;
    if (distinct > kMaxInferredVocabulary) {
      // An identifier or free text: hashed, twice as many buckets as values seen, so that the
      // model keeps no list of them.
      c = estimators::categorical_column_with_hash_bucket(
          f, std::min<int64_t>(int64_t{1} << 20, 2 * distinct));
    } else {
      std::vector<std::pair<int64_t, std::string>> by_count;
      for (const auto& [value, n] : text->second) by_count.push_back({-n, value});
      std::sort(by_count.begin(), by_count.end());
      std::vector<std::string> vocab;
      for (const auto& [n, value] : by_count) vocab.push_back(value);
      c = estimators::categorical_column_with_vocabulary_list(f, vocab, 1);
    }
    if (dnn) {
      const int64_t ids = c.id_count();
      c = ids <= 50
              ? estimators::indicator_column(c)
              : estimators::embedding_column(
                    c, std::min<int64_t>(64, static_cast<int64_t>(std::ceil(
                                                 6 * std::pow(static_cast<double>(ids), 0.25)))));
    }
    columns.push_back(std::move(c));
  }
  return columns;
}

}  // namespace troupe::cli
