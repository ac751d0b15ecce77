#include "actors/job_secret.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace troupe::actors {

using runtime::Result;
using runtime::Status;

namespace {

template <class T, void (*Free)(T*)>
struct Freer {
  void operator()(T* p) const { Free(p); }
};
using Bio = std::unique_ptr<BIO, Freer<BIO, BIO_free_all>>;
using Key = std::unique_ptr<EVP_PKEY, Freer<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Freer<X509, X509_free>>;

bool add_extension(X509* cert, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return false;
  const bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

}  // namespace

JobSecret::Mac JobSecret::sign(std::string_view message) const {
  Mac mac{};
  unsigned int size = 0;
  HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac.data(), &size);
  return mac;
}

bool JobSecret::verify(std::string_view message, const Mac& mac) const {
  const Mac expected = sign(message);
  return CRYPTO_memcmp(expected.data(), mac.data(), mac.size()) == 0;
}

Result<std::shared_ptr<const JobSecret>> load_job_secret(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return runtime::not_found("job secret ", path, ": no such file");
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return runtime::failed_precondition("job secret ", path,
                                        " is readable by others: chmod 600 it");
  }
  Bio bio(BIO_new_file(path.c_str(), "r"));
  if (!bio) return runtime::not_found("job secret ", path, ": cannot open it");
  Key key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) return runtime::invalid_argument("job secret ", path, " holds no private key");
  Bio again(BIO_new_file(path.c_str(), "r"));
  Cert cert(again ? PEM_read_bio_X509(again.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert) return runtime::invalid_argument("job secret ", path, " holds no certificate");
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return runtime::invalid_argument("job secret ", path,
                                     ": the certificate is not the private key's");
  }
  unsigned char* der = nullptr;
  const int size = i2d_PrivateKey(key.get(), &der);
  if (size <= 0) return runtime::invalid_argument("job secret ", path, ": cannot encode its key");
  auto secret = std::make_shared<JobSecret>();
  secret->path_ = path;
  SHA256(der, static_cast<size_t>(size), secret->key_.data());
  OPENSSL_clear_free(der, static_cast<size_t>(size));
  return std::shared_ptr<const JobSecret>(std::move(secret));
}

Status make_job_secret(const std::string& path) {
  Key key(EVP_EC_gen("P-256"));
  Cert cert(X509_new());
  if (!key || !cert) return runtime::internal_error("making a job secret: OpenSSL failed");
  unsigned char serial[16];
  RAND_bytes(serial, sizeof serial);
  serial[0] &= 0x7f;  // a positive serial number
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_set_version(cert.get(), 2);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 60L * 60 * 24 * 365 * 10);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("troupe job"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  // Its own trust anchor: a CA that signs itself.
  if (!add_extension(cert.get(), NID_basic_constraints, "critical,CA:TRUE") ||
      !add_extension(cert.get(), NID_key_usage, "critical,digitalSignature,keyCertSign") ||
      X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) {
    return runtime::internal_error("making a job secret: cannot sign its certificate");
  }
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return runtime::failed_precondition("cannot write the job secret ", tmp);
  FILE* f = ::fdopen(fd, "w");
  const bool written = f != nullptr &&
                       PEM_write_PrivateKey(f, key.get(), nullptr, nullptr, 0, nullptr, nullptr) &&
                       PEM_write_X509(f, cert.get());
  const bool closed = f != nullptr ? std::fclose(f) == 0 : ::close(fd) == 0;
  if (!written || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return runtime::internal_error("cannot write the job secret ", path);
  }
  return runtime::ok_status();
}

Result<std::shared_ptr<const JobSecret>> job_secret_from_env() {
  const char* path = std::getenv("TROUPE_JOB_SECRET");
  if (path == nullptr || *path == '\0') return std::shared_ptr<const JobSecret>();
  return load_job_secret(path);
}

}  // namespace troupe::actors
