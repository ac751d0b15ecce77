#include "tools/serve/bearer_token.h"

#include <openssl/crypto.h>

#include <fstream>

namespace troupe::serve {

runtime::Result<std::string> read_bearer_token(const std::string& path) {
  std::ifstream in(path);
  if (!in) return runtime::not_found("--auth_token_file ", path, ": cannot read it");
  std::string token;
  std::getline(in, token);
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (token.empty()) {
    return runtime::invalid_argument("--auth_token_file ", path, ": its first line is empty");
  }
  return token;
}

bool bearer_matches(std::string_view header, const std::string& token) {
  const std::string expected = "Bearer " + token;
  if (header.size() != expected.size()) return false;
  return CRYPTO_memcmp(header.data(), expected.data(), expected.size()) == 0;
}

}  // namespace troupe::serve
