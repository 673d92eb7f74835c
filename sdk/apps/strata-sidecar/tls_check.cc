// Startup warnings about the server certificate (tls_check.h).
#include "tls_check.h"

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>

namespace strata::sidecar {
namespace {

// An ASN1 time as OpenSSL prints it ("Jan  1 00:00:00 2024 GMT").
std::string TimeText(const ASN1_TIME* time) {
  std::unique_ptr<BIO, decltype(&BIO_free)> out(BIO_new(BIO_s_mem()), &BIO_free);
  if (!out || ASN1_TIME_print(out.get(), time) != 1) return "(unreadable date)";
  char* data = nullptr;
  const long size = BIO_get_mem_data(out.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

}  // namespace

std::vector<std::string> TlsCertificateWarnings(const std::string& cert_file) {
  std::unique_ptr<BIO, decltype(&BIO_free)> in(BIO_new_file(cert_file.c_str(), "r"), &BIO_free);
  if (!in) return {};
  std::unique_ptr<X509, decltype(&X509_free)> cert(
      PEM_read_bio_X509(in.get(), nullptr, nullptr, nullptr), &X509_free);
  if (!cert) return {};
  std::vector<std::string> warnings;
  const ASN1_TIME* not_after = X509_get0_notAfter(cert.get());
  const ASN1_TIME* not_before = X509_get0_notBefore(cert.get());
  if (X509_cmp_current_time(not_after) < 0) {
    warnings.push_back("tls.cert_file " + cert_file + ": the certificate expired on " +
                       TimeText(not_after) +
                       ": clients will refuse the handshake; renew it and restart");
  }
  if (X509_cmp_current_time(not_before) > 0) {
    warnings.push_back("tls.cert_file " + cert_file + ": the certificate is not valid before " +
                       TimeText(not_before) + ": clients will refuse the handshake until then");
  }
  return warnings;
}

}  // namespace strata::sidecar
