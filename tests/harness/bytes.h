// Bytes as hex and back, for tests that compare encodings with reference vectors.
//
//   CHECK(testing::hex(frame) == "1800000000000000a37f4b22...");
#pragma once

#include <string>

namespace troupe::testing {

inline std::string hex(const std::string& s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

inline std::string unhex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
  }
  return out;
}

}  // namespace troupe::testing
