// The job secret: what proves that a process is a member of a cluster. One PEM file holds a
// private key and a certificate for it, made once per job (`troupe cluster` makes one per run,
// `troupe secret FILE` one for machines of your own). Both of a cluster's transports check it
// before any message of a connection reaches an actor:
// - CAF's port speaks mutual TLS (libcaf_openssl, verify peer and fail without a certificate)
//   with the certificate as the only trusted one, so a peer must present it and prove its key;
// - the data channel runs an HMAC-SHA256 challenge-response, both ways, keyed by a hash of the
//   private key, before its first frame (data_channel.h).
//
//   auto secret = actors::load_job_secret("/run/job.pem");   // Result<shared_ptr<const ...>>
//   actors::Runtime rt({.secret = *secret});                   // every connection checked
//
// Thread-safe once loaded.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>

#include "runtime/status.h"

namespace troupe::actors {

class JobSecret {
 public:
  using Mac = std::array<unsigned char, 32>;
  const std::string& path() const { return path_; }
  Mac sign(std::string_view message) const;
  bool verify(std::string_view message, const Mac& mac) const;  // in constant time

 private:
  friend runtime::Result<std::shared_ptr<const JobSecret>> load_job_secret(const std::string&);
  std::string path_;
  Mac key_{};
};

// Reads and checks a secret file (a key, a certificate, and that they belong together); an
// error naming the file and what is wrong. The file must not be readable by others.
runtime::Result<std::shared_ptr<const JobSecret>> load_job_secret(const std::string& path);
// Writes a new secret (an EC P-256 key and a self-signed certificate) to `path`, mode 0600.
runtime::Status make_job_secret(const std::string& path);
// The file TROUPE_JOB_SECRET names, loaded; null when the variable is unset.
runtime::Result<std::shared_ptr<const JobSecret>> job_secret_from_env();

}  // namespace troupe::actors
