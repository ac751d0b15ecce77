// troupe serve's bearer token, one for its REST and gRPC ports: read from --auth_token_file and
// checked against what a request carries ("Authorization: Bearer TOKEN", or gRPC's
// "authorization" metadata) in time that does not depend on where they differ.
//
//   TROUPE_ASSIGN_OR_RETURN(std::string token, read_bearer_token("token.txt"));
//   if (!bearer_matches(request_header, token)) ... 401 / UNAUTHENTICATED
#pragma once

#include <string>
#include <string_view>

#include "runtime/status.h"

namespace troupe::serve {

// The file's first line, which must not be empty.
runtime::Result<std::string> read_bearer_token(const std::string& path);
bool bearer_matches(std::string_view header, const std::string& token);

}  // namespace troupe::serve
