// ID-token verification, PKCE, provider configuration and claim mapping (iam/oidc.h), with
// keys made here by OpenSSL. tests/process/oidc_test.cpp runs the same code against a real
// OpenID provider.
#include "iam/oidc.h"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <map>

#include "common/crypto.h"

namespace gp::iam::oidc {
namespace {

using namespace std::chrono_literals;

// Keys new_signing_key does not make: a weak RSA key, another curve.
std::string pem_of(EVP_PKEY* key) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  std::string pem(data, size_t(n));
  BIO_free(bio);
  EVP_PKEY_free(key);
  return pem;
}
std::string rsa_pem(unsigned bits) {
  return pem_of(EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", size_t(bits)));
}
std::string ec_pem(const char* curve) {
  return pem_of(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", curve));
}

const std::string kIssuer = "https://idp.example.com";
const TimePoint kNow = from_unix_micros(1'800'000'000'000'000);
int64_t now_s() { return 1'800'000'000; }

Json claims(Json extra = Json::object()) {
  Json c = {{"iss", kIssuer},
            {"sub", "u-123"},
            {"aud", "gpuplane"},
            {"iat", now_s() - 10},
            {"exp", now_s() + 300},
            {"nonce", "n-1"},
            {"preferred_username", "Alice"},
            {"groups", {"acme-admins", "staff"}}};
  for (auto& [k, v] : extra.items()) c[k] = v;
  return c;
}

struct Keys {
  std::string rsa = *new_signing_key("RS256"), ec = *new_signing_key("ES256");
  Jwks jwks = *Jwks::parse({{"keys", {*public_jwk(rsa, "rsa-1"), *public_jwk(ec, "ec-1")}}});
};
const Keys& keys() {
  static const Keys k;
  return k;
}

TokenCheck check(std::optional<std::string> nonce = "n-1") {
  return {kIssuer, "gpuplane", std::move(nonce), kNow, 60s};
}

std::string reason(const Result<Json>& r) { return r ? "accepted" : r.error().message; }

TEST(IdToken, Rs256AndEs256Verify) {
  for (const auto& [pem, kid] : {std::pair{keys().rsa, "rsa-1"}, std::pair{keys().ec, "ec-1"}}) {
    auto jwt = sign_jwt(claims(), pem, kid);
    ASSERT_TRUE(jwt) << jwt.error().message;
    EXPECT_EQ(token_kid(*jwt), kid);
    auto c = verify_id_token(*jwt, keys().jwks, check());
    ASSERT_TRUE(c) << kid << ": " << c.error().message;
    EXPECT_EQ((*c)["sub"], "u-123");
  }
}

TEST(IdToken, ForgedTokensAreRefused) {
  auto jwt = *sign_jwt(claims(), keys().rsa, "rsa-1");
  auto parts = std::vector<std::string>();
  for (size_t s = 0, e; s <= jwt.size(); s = e + 1) {
    e = jwt.find('.', s);
    if (e == std::string::npos) e = jwt.size();
    parts.push_back(jwt.substr(s, e - s));
  }
  ASSERT_EQ(parts.size(), 3u);
  // A payload changed after signing (a group added).
  std::string forged = parts[0] + "." +
                       base64url_encode(claims({{"groups", {"platform-admins"}}}).dump()) + "." +
                       parts[2];
  EXPECT_EQ(reason(verify_id_token(forged, keys().jwks, check())),
            "ID token rejected: signature does not verify");
  // Signed by another key under the provider's kid.
  auto other = *sign_jwt(claims(), *new_signing_key("RS256"), "rsa-1");
  EXPECT_EQ(reason(verify_id_token(other, keys().jwks, check())),
            "ID token rejected: signature does not verify");
  // A kid the provider does not have.
  EXPECT_NE(reason(verify_id_token(*sign_jwt(claims(), keys().rsa, "rsa-9"), keys().jwks, check()))
                .find("no key 'rsa-9'"),
            std::string::npos);
  // An EC key's kid on an RS256 token.
  std::string header = base64url_encode(Json{{"alg", "RS256"}, {"kid", "ec-1"}}.dump());
  EXPECT_NE(reason(verify_id_token(header + "." + parts[1] + "." + parts[2], keys().jwks, check()))
                .find("is not an RS256 key"),
            std::string::npos);
  // "none" and HMAC (signing with the public key as the secret) are never accepted.
  for (const char* alg : {"none", "HS256", "RS512", "PS256"}) {
    std::string h = base64url_encode(Json{{"alg", alg}, {"kid", "rsa-1"}}.dump());
    EXPECT_NE(reason(verify_id_token(
                         h + "." + parts[1] + "." + (std::string(alg) == "none" ? "" : parts[2]),
                         keys().jwks, check()))
                  .find("is not accepted"),
              std::string::npos)
        << alg;
  }
  // Not a JWS at all, a truncated signature, a giant token.
  EXPECT_NE(reason(verify_id_token("abc", keys().jwks, check())).find("three"), std::string::npos);
  auto es = *sign_jwt(claims(), keys().ec, "ec-1");
  EXPECT_EQ(reason(verify_id_token(es.substr(0, es.size() - 4), keys().jwks, check())),
            "ID token rejected: signature does not verify");
  EXPECT_NE(
      reason(verify_id_token(std::string(20000, 'a'), keys().jwks, check())).find("too large"),
      std::string::npos);
}

TEST(IdToken, ClaimChecks) {
  auto verify = [](Json extra, TokenCheck c = check()) {
    return reason(
        verify_id_token(*sign_jwt(claims(std::move(extra)), keys().ec, "ec-1"), keys().jwks, c));
  };
  EXPECT_EQ(verify({}), "accepted");
  EXPECT_NE(verify({{"iss", "https://evil.example.com"}}).find("issuer"), std::string::npos);
  EXPECT_NE(verify({{"aud", "other-app"}}).find("audience"), std::string::npos);
  EXPECT_EQ(verify({{"aud", {"other-app", "gpuplane"}}, {"azp", "gpuplane"}}), "accepted");
  EXPECT_NE(verify({{"aud", {"other-app", "gpuplane"}}}).find("azp"), std::string::npos);
  EXPECT_NE(verify({{"azp", "other-app"}}).find("azp"), std::string::npos);
  // exp: refused past the allowed clock skew, accepted within it.
  EXPECT_EQ(verify({{"exp", now_s() - 30}}), "accepted");
  EXPECT_EQ(verify({{"exp", now_s() - 61}}), "ID token rejected: token has expired");
  TokenCheck strict = check();
  strict.clock_skew = 0s;
  EXPECT_EQ(verify({{"exp", now_s() - 1}}, strict), "ID token rejected: token has expired");
  EXPECT_NE(verify({{"iat", now_s() + 600}}).find("future"), std::string::npos);
  EXPECT_NE(verify({{"nbf", now_s() + 600}}).find("not yet valid"), std::string::npos);
  EXPECT_NE(verify({{"nonce", "n-2"}}).find("nonce"), std::string::npos);
  EXPECT_EQ(verify({{"nonce", "n-2"}}, check(std::nullopt)), "accepted");  // a presented token
  EXPECT_NE(verify({{"sub", ""}}).find("sub"), std::string::npos);
  Json no_exp = claims();
  no_exp.erase("exp");
  EXPECT_NE(reason(verify_id_token(*sign_jwt(no_exp, keys().ec, "ec-1"), keys().jwks, check()))
                .find("exp and iat"),
            std::string::npos);
}

TEST(Jwks, KeepsOnlyUsableSignatureKeys) {
  Json weak = *public_jwk(rsa_pem(1024), "weak");
  Json enc = *public_jwk(*new_signing_key("RS256"), "enc");
  enc["use"] = "enc";
  Json off_curve = *public_jwk(*new_signing_key("ES256"), "bent");
  auto y = *base64url_decode(off_curve["y"].get<std::string>());
  y[31] = char(y[31] ^ 1);
  off_curve["y"] = base64url_encode(y);
  Json p384 = {{"kty", "EC"}, {"crv", "P-384"}, {"kid", "p384"}, {"x", "AA"}, {"y", "AA"}};
  Json good = *public_jwk(*new_signing_key("ES256"), "good");
  auto set = Jwks::parse({{"keys", {weak, enc, off_curve, p384, good, "junk"}}});
  ASSERT_TRUE(set);
  EXPECT_EQ(set->size(), 1u);
  EXPECT_TRUE(set->has("good"));
  EXPECT_FALSE(Jwks::parse(Json::array()));
  EXPECT_FALSE(sign_jwt(claims(), ec_pem("P-384"), "x"));  // only P-256 signs ES256
}

TEST(Pkce, Rfc7636AppendixB) {
  EXPECT_EQ(pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
  auto a = make_pkce(system_random()), b = make_pkce(system_random());
  EXPECT_EQ(a.verifier.size(), 43u);
  EXPECT_NE(a.verifier, b.verifier);
  EXPECT_EQ(a.challenge, pkce_challenge(a.verifier));
}

Result<std::string> secret_of(const std::string& path) {
  if (path == "/missing") return fail(Error::invalid("cannot read /missing"));
  return std::string("s3cret\n");
}

Json provider_json(Json extra = Json::object()) {
  Json p = {{"name", "corp"},
            {"issuer", kIssuer},
            {"client_id", "gpuplane"},
            {"client_secret_file", "/etc/secret"},
            {"rules",
             {{{"claim", "groups"},
               {"value", "acme-admins"},
               {"tenant", "acme"},
               {"role", "tenant-admin"}},
              {{"claim", "groups"},
               {"value", "acme-ml"},
               {"tenant", "acme"},
               {"project", "training"},
               {"role", "project-member"}},
              {{"claim", "groups"}, {"value", "ops"}, {"role", "platform-operator"}},
              {{"claim", "email_verified"},
               {"value", "true"},
               {"tenant", "acme"},
               {"role", "tenant-billing"}}}}};
  for (auto& [k, v] : extra.items()) p[k] = v;
  return p;
}

std::string config_error(Json provider) {
  auto r = parse_config({{"providers", {std::move(provider)}}}, secret_of);
  return r ? "accepted" : r.error().message;
}

TEST(ProviderConfig, ParsesAndRefusesMistakes) {
  auto r = parse_config({{"providers", {provider_json()}}}, secret_of);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].client_secret, "s3cret");
  EXPECT_EQ((*r)[0].display_name, "corp");
  EXPECT_EQ((*r)[0].rules.size(), 4u);
  EXPECT_NE(config_error(provider_json({{"issuer", "http://idp.example.com"}})).find("https"),
            std::string::npos);
  EXPECT_EQ(config_error(provider_json({{"issuer", "http://127.0.0.1:5556"}})), "accepted");
  EXPECT_NE(config_error(provider_json({{"scopes", {"email"}}})).find("openid"), std::string::npos);
  EXPECT_NE(config_error(provider_json({{"client_secret_file", "/missing"}})).find("/missing"),
            std::string::npos);
  EXPECT_NE(config_error(provider_json({{"colour", "blue"}})).find("colour"), std::string::npos);
  EXPECT_NE(config_error(provider_json({{"name", "Not A Label"}})).find("name"), std::string::npos);
  Json bad_rule = provider_json();
  bad_rule["rules"] = {{{"claim", "groups"}, {"value", "x"}, {"role", "tenant-admin"}}};
  EXPECT_NE(config_error(bad_rule).find("tenant roles a tenant"), std::string::npos);
  bad_rule["rules"] = {{{"claim", "groups"}, {"value", "x"}, {"role", "root"}}};
  EXPECT_NE(config_error(bad_rule).find("unknown role"), std::string::npos);
  auto twice = parse_config({{"providers", {provider_json(), provider_json()}}}, secret_of);
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.error().message.find("twice"), std::string::npos);
}

TEST(MapClaims, RulesGiveTenantAndRoles) {
  auto config = (*parse_config({{"providers", {provider_json()}}}, secret_of))[0];
  auto id = map_claims(config, claims({{"groups", {"acme-admins", "acme-ml", "staff"}},
                                       {"email", "alice.smith@acme.example"},
                                       {"email_verified", true}}));
  ASSERT_TRUE(id) << id.error().message;
  EXPECT_EQ(id->tenant, "acme");
  EXPECT_EQ(id->username, "alice");
  EXPECT_EQ(id->subject, kIssuer + "#u-123");
  ASSERT_EQ(id->grants.size(), 3u);
  EXPECT_EQ(id->grants[0], (Grant{"acme", "", Role::kTenantAdmin}));
  EXPECT_EQ(id->grants[1], (Grant{"acme", "training", Role::kProjectMember}));
  EXPECT_EQ(id->grants[2], (Grant{"acme", "", Role::kTenantBilling}));

  // No username claim: the email's local part, folded to a DNS label.
  Json no_name = claims({{"groups", "acme-admins"}, {"email", "Bob.O'Neil@acme.example"}});
  no_name.erase("preferred_username");
  EXPECT_EQ(map_claims(config, no_name)->username, "bob-o-neil");

  auto none = map_claims(config, claims({{"groups", {"staff"}}}));
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ErrorCode::kPermissionDenied);
  auto two = map_claims(config, claims({{"groups", {"acme-admins", "ops"}}}));
  ASSERT_FALSE(two);
  EXPECT_NE(two.error().message.find("more than one tenant"), std::string::npos);
  auto platform = map_claims(config, claims({{"groups", {"ops"}}}));
  ASSERT_TRUE(platform);
  EXPECT_EQ(platform->tenant, "");
}

// The provider's discovery document, as its fake fetcher answers it.
FetchResult discovery_document() {
  return FetchResult{200, Json{{"issuer", kIssuer},
                               {"authorization_endpoint", kIssuer + "/auth"},
                               {"token_endpoint", kIssuer + "/token"},
                               {"jwks_uri", kIssuer + "/jwks"}}
                              .dump()};
}

// The provider's endpoints through a fake fetcher: discovery once, keys again when a token
// names a new kid (rotation), the code redeemed with client_secret_basic and PKCE.
TEST(Provider, DiscoversRedeemsAndFollowsKeyRotation) {
  std::string current_kid = "ec-1", current_pem = keys().ec;
  std::map<std::string, int> calls;
  std::string token_request, token_auth;
  Fetch fetch = [&](const std::string& method, const std::string& url, const std::string& body,
                    const std::vector<std::pair<std::string, std::string>>& headers,
                    const std::string&) -> Result<FetchResult> {
    calls[url]++;
    if (url == kIssuer + "/.well-known/openid-configuration") return discovery_document();
    if (url == kIssuer + "/jwks")
      return FetchResult{200, Json{{"keys", {*public_jwk(current_pem, current_kid)}}}.dump()};
    if (url == kIssuer + "/token" && method == "POST") {
      token_request = body;
      for (const auto& [k, v] : headers)
        if (k == "Authorization") token_auth = v;
      if (body.find("code=bad") != std::string::npos)
        return FetchResult{400, R"({"error":"invalid_grant","error_description":"used"})"};
      return FetchResult{200,
                         Json{{"id_token", *sign_jwt(claims(), current_pem, current_kid)}}.dump()};
    }
    return FetchResult{404, "{}"};
  };
  ProviderConfig config;
  config.name = "corp";
  config.issuer = kIssuer;
  config.client_id = "gpuplane";
  config.client_secret = "s3 cret";
  Provider p(config, fetch);
  auto url = p.authorization_url("https://gp.example.com/cb", "st", "n-1", "ch");
  ASSERT_TRUE(url) << url.error().message;
  EXPECT_EQ(*url, kIssuer +
                      "/auth?response_type=code&client_id=gpuplane&redirect_uri=https%3A%2F%2Fgp."
                      "example.com%2Fcb&scope=openid%20email%20profile&state=st&nonce=n-1&code_"
                      "challenge=ch&code_challenge_method=S256");
  const ManualClock clock(kNow);
  auto c = p.redeem("abc", "https://gp.example.com/cb", "verif", "n-1", clock);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(token_request,
            "grant_type=authorization_code&code=abc&redirect_uri=https%3A%2F%2Fgp.example.com%"
            "2Fcb&code_verifier=verif");
  // RFC 6749 2.3.1: id and secret form-encoded, then base64 of "gpuplane:s3%20cret".
  EXPECT_EQ(token_auth, "Basic Z3B1cGxhbmU6czMlMjBjcmV0");
  EXPECT_FALSE(p.redeem("abc", "https://gp.example.com/cb", "verif", "n-2", clock));  // nonce
  auto refused = p.redeem("bad", "https://gp.example.com/cb", "verif", "n-1", clock);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kUnauthenticated);
  EXPECT_NE(refused.error().message.find("invalid_grant: used"), std::string::npos);

  // The provider rotates to an RSA key: a token naming the new kid makes the verifier fetch the
  // keys again, but not within a minute of the last fetch (no amplification by made-up kids).
  current_kid = "rsa-2";
  current_pem = keys().rsa;
  EXPECT_FALSE(p.verify(*sign_jwt(claims(), current_pem, current_kid), kNow + 30s));
  EXPECT_EQ(calls[kIssuer + "/jwks"], 1);
  EXPECT_TRUE(p.verify(*sign_jwt(claims(), current_pem, current_kid), kNow + 61s));
  EXPECT_EQ(calls[kIssuer + "/jwks"], 2);
  EXPECT_FALSE(p.verify(*sign_jwt(claims(), current_pem, "rsa-9"), kNow + 62s));
  EXPECT_EQ(calls[kIssuer + "/jwks"], 2);
  EXPECT_TRUE(p.verify(*sign_jwt(claims(), current_pem, current_kid), kNow + 63s));
  EXPECT_EQ(calls[kIssuer + "/.well-known/openid-configuration"], 1);
}

// The token exchange takes time: a token the provider issued during it, a second after the
// callback arrived, is verified at the time it arrived (with no allowed skew it would otherwise be
// "issued in the future"; this failed the real-provider test under load).
TEST(Provider, VerifiesTheRedeemedTokenAtTheTimeItArrived) {
  ManualClock clock(kNow);
  Fetch fetch = [&](const std::string& method, const std::string& url, const std::string&,
                    const std::vector<std::pair<std::string, std::string>>&,
                    const std::string&) -> Result<FetchResult> {
    if (url == kIssuer + "/.well-known/openid-configuration") return discovery_document();
    if (url == kIssuer + "/jwks")
      return FetchResult{200, Json{{"keys", {*public_jwk(keys().ec, "ec-1")}}}.dump()};
    if (url == kIssuer + "/token" && method == "POST") {
      clock.advance(2s);
      return FetchResult{
          200,
          Json{{"id_token", *sign_jwt(claims({{"iat", now_s() + 2}}), keys().ec, "ec-1")}}.dump()};
    }
    return FetchResult{404, "{}"};
  };
  ProviderConfig config;
  config.name = "corp";
  config.issuer = kIssuer;
  config.client_id = "gpuplane";
  config.clock_skew = 0s;
  Provider p(config, fetch);
  auto c = p.redeem("abc", "https://gp.example.com/cb", "verif", "n-1", clock);
  EXPECT_TRUE(c) << c.error().message;
}

TEST(Provider, DiscoveryMustNameTheConfiguredIssuer) {
  Fetch fetch = [](const std::string&, const std::string&, const std::string&,
                   const std::vector<std::pair<std::string, std::string>>&,
                   const std::string&) -> Result<FetchResult> {
    return FetchResult{200, Json{{"issuer", "https://evil.example.com"},
                                 {"authorization_endpoint", "https://evil.example.com/a"},
                                 {"token_endpoint", "https://evil.example.com/t"},
                                 {"jwks_uri", "https://evil.example.com/k"}}
                                .dump()};
  };
  ProviderConfig config;
  config.name = "corp";
  config.issuer = kIssuer;
  Provider p(config, fetch);
  auto url = p.authorization_url("https://gp.example.com/cb", "s", "n", "c");
  ASSERT_FALSE(url);
  EXPECT_EQ(url.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(url.error().message.find("evil"), std::string::npos);
}

}  // namespace
}  // namespace gp::iam::oidc
