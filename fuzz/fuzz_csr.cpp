// gp::tls::sign_client_csr and cert_info: the certificate request a node agent sends at
// enrolment and renewal. Anything that is not a well-signed request for an acceptable key is
// refused; what is accepted becomes a certificate that names the node and nothing else.
#include "fuzz_util.h"
#include "tls/tls.h"

namespace {

const gp::tls::KeyAndCert& node_ca() {
  static const gp::tls::KeyAndCert ca =
      *gp::tls::make_ca({.common_name = "fuzz node CA", .not_before = {}}, 1);
  return ca;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view pem = gp::fuzz::as_text(data, size);
  auto cert = gp::tls::sign_client_csr(
      node_ca(), pem,
      {.common_name = "nod_fuzz", .not_before = {}, .validity = std::chrono::hours(1)}, 2);
  if (cert) {
    auto info = gp::tls::cert_info(*cert);
    if (!info || info->common_name != "nod_fuzz" || info->serial != "2") __builtin_trap();
  }
  (void)gp::tls::cert_info(pem);
  return 0;
}
