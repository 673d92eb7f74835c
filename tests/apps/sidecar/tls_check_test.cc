// TlsCertificateWarnings (tls_check.h): an expired or not yet valid server certificate is named
// at startup with its dates.
#include "tls_check.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <memory>
#include <string>

namespace strata::sidecar {
namespace {

using Catch::Matchers::Contains;

// A self-signed certificate valid from now + `from_days` to now + `to_days`, as a PEM file.
std::string WriteCertificate(const std::string& name, long from_days, long to_days) {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"), &EVP_PKEY_free);
  REQUIRE(key);
  std::unique_ptr<X509, decltype(&X509_free)> cert(X509_new(), &X509_free);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), from_days * 86400);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), to_days * 86400);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* subject = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), subject);
  REQUIRE(X509_sign(cert.get(), key.get(), EVP_sha256()) > 0);
  const std::string path = "/tmp/strata-tls-check-" + std::to_string(::getpid()) + "-" + name;
  FILE* out = std::fopen(path.c_str(), "w");
  REQUIRE(out != nullptr);
  PEM_write_X509(out, cert.get());
  std::fclose(out);
  return path;
}

TEST_CASE("an expired server certificate is named with its expiry date", "[sidecar][tls]") {
  const std::string expired = WriteCertificate("expired.pem", -30, -1);
  const auto warnings = TlsCertificateWarnings(expired);
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Contains("tls.cert_file " + expired + ": the certificate expired on "));
  CHECK_THAT(warnings[0], Contains(" GMT: clients will refuse the handshake"));

  const std::string future = WriteCertificate("future.pem", 2, 30);
  const auto early = TlsCertificateWarnings(future);
  REQUIRE(early.size() == 1);
  CHECK_THAT(early[0], Contains("the certificate is not valid before "));

  CHECK(TlsCertificateWarnings(WriteCertificate("valid.pem", -1, 30)).empty());
  CHECK(TlsCertificateWarnings("/nonexistent/cert.pem").empty());
  for (const char* name : {"expired.pem", "future.pem", "valid.pem"}) {
    std::remove(("/tmp/strata-tls-check-" + std::to_string(::getpid()) + "-" + name).c_str());
  }
}

}  // namespace
}  // namespace strata::sidecar
