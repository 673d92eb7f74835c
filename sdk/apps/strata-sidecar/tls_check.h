// tls_check.h — startup warnings about the server certificate of strata-sidecar's listeners.
//
// An expired (or not yet valid) certificate still loads, and every client then refuses the
// handshake: the sidecar says so when it starts, naming the certificate's validity dates.
//
// Thread safety: a function of its arguments and the clock.
#ifndef STRATA_APPS_STRATA_SIDECAR_TLS_CHECK_H_
#define STRATA_APPS_STRATA_SIDECAR_TLS_CHECK_H_

#include <string>
#include <vector>

namespace strata::sidecar {

// Warnings about the first certificate of the PEM file `cert_file` (the server's, before its
// chain) at the current time: expired ("... expired on Jan  1 00:00:00 2024 GMT ..."), or not
// valid before a later date. Empty when it is valid now, or when the file holds no certificate
// (ValidateSidecarConfig refuses that).
std::vector<std::string> TlsCertificateWarnings(const std::string& cert_file);

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_TLS_CHECK_H_
