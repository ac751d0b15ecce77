// A self-signed certificate for 127.0.0.1 (its CN and an IP subject alternative name) and its
// key, PEM, made now with OpenSSL (an EC P-256 key), for tests of TLS servers.
//
//   const auto [cert_pem, key_pem] = testing::self_signed();
#pragma once

#include <doctest/doctest.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <string>
#include <utility>

namespace troupe::testing {

inline std::pair<std::string, std::string> self_signed() {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  REQUIRE(key != nullptr);
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  // Clients that check a name (gRPC's do) find the address among the subject's alternatives.
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* san = X509V3_EXT_conf_nid(nullptr, &ctx, NID_subject_alt_name, "IP:127.0.0.1");
  REQUIRE(san != nullptr);
  X509_add_ext(cert, san, -1);
  X509_EXTENSION_free(san);
  REQUIRE(X509_sign(cert, key, EVP_sha256()) > 0);
  auto pem = [](auto write) {
    BIO* bio = BIO_new(BIO_s_mem());
    write(bio);
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio, &data);
    std::string text(data, static_cast<size_t>(n));
    BIO_free(bio);
    return text;
  };
  std::string cert_pem = pem([&](BIO* b) { PEM_write_bio_X509(b, cert); });
  std::string key_pem =
      pem([&](BIO* b) { PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr); });
  X509_free(cert);
  EVP_PKEY_free(key);
  return {cert_pem, key_pem};
}

}  // namespace troupe::testing
