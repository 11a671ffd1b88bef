// gp::iam::oidc::verify_id_token and Jwks::parse: the ID tokens and key sets an identity
// provider (or anyone posting to /v1/auth/oidc/{provider}/token) sends. The keys are made at
// start, so no input can carry a valid signature: any token that verifies is a finding.
#include "fuzz_util.h"
#include "iam/oidc.h"

namespace {

const gp::iam::oidc::Jwks& keys() {
  static const gp::iam::oidc::Jwks set = *gp::iam::oidc::Jwks::parse(
      {{"keys",
        {*gp::iam::oidc::public_jwk(*gp::iam::oidc::new_signing_key("RS256"), "rsa-1"),
         *gp::iam::oidc::public_jwk(*gp::iam::oidc::new_signing_key("ES256"), "ec-1")}}});
  return set;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text = gp::fuzz::as_text(data, size);
  const gp::iam::oidc::TokenCheck check{"https://idp.example.com", "gpuplane", "n-1",
                                        gp::from_unix_micros(1'800'000'000'000'000)};
  if (gp::iam::oidc::verify_id_token(text, keys(), check)) __builtin_trap();
  (void)gp::iam::oidc::token_kid(text);
  gp::Json doc = gp::Json::parse(text, nullptr, false);
  if (!doc.is_discarded()) (void)gp::iam::oidc::Jwks::parse(doc);
  return 0;
}
