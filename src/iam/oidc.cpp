#include "iam/oidc.h"

#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>

#include <algorithm>
#include <set>

#include "common/crypto.h"
#include "common/url.h"

namespace gp::iam::oidc {

struct Jwks::Key {
  std::string kid;
  std::string alg;  // "RS256" or "ES256"
  std::shared_ptr<EVP_PKEY> pkey;
};

namespace {

constexpr size_t kMaxTokenBytes = 16 << 10;
constexpr auto kJwksRefetchInterval = std::chrono::seconds(60);

Error bad_token(const std::string& why) {
  return Error::unauthenticated("ID token rejected: " + why);
}

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using BnPtr = std::unique_ptr<BIGNUM, Deleter<BIGNUM, BN_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, Deleter<EVP_MD_CTX, EVP_MD_CTX_free>>;
using PkeyCtxPtr = std::unique_ptr<EVP_PKEY_CTX, Deleter<EVP_PKEY_CTX, EVP_PKEY_CTX_free>>;
using ParamBldPtr = std::unique_ptr<OSSL_PARAM_BLD, Deleter<OSSL_PARAM_BLD, OSSL_PARAM_BLD_free>>;
using ParamPtr = std::unique_ptr<OSSL_PARAM, Deleter<OSSL_PARAM, OSSL_PARAM_free>>;
using EcSigPtr = std::unique_ptr<ECDSA_SIG, Deleter<ECDSA_SIG, ECDSA_SIG_free>>;

std::shared_ptr<EVP_PKEY> own(EVP_PKEY* p) { return {p, EVP_PKEY_free}; }

std::optional<std::string> b64_field(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return std::nullopt;
  return base64url_decode(it->get<std::string>());
}

std::string json_string(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A public key from OSSL parameters of `type` ("RSA" or "EC").
std::shared_ptr<EVP_PKEY> key_from_params(const char* type, OSSL_PARAM_BLD* bld) {
  ParamPtr params(OSSL_PARAM_BLD_to_param(bld));
  PkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr));
  EVP_PKEY* pkey = nullptr;
  if (!params || !ctx || EVP_PKEY_fromdata_init(ctx.get()) <= 0 ||
      EVP_PKEY_fromdata(ctx.get(), &pkey, EVP_PKEY_PUBLIC_KEY, params.get()) <= 0)
    return nullptr;
  auto key = own(pkey);
  // The point must lie on the curve (and an RSA key must be well formed).
  PkeyCtxPtr check(EVP_PKEY_CTX_new_from_pkey(nullptr, pkey, nullptr));
  if (!check || EVP_PKEY_public_check(check.get()) != 1) return nullptr;
  return key;
}

std::shared_ptr<EVP_PKEY> rsa_key(const std::string& n, const std::string& e) {
  ParamBldPtr bld(OSSL_PARAM_BLD_new());
  BnPtr bn_n(BN_bin2bn(reinterpret_cast<const unsigned char*>(n.data()), int(n.size()), nullptr));
  BnPtr bn_e(BN_bin2bn(reinterpret_cast<const unsigned char*>(e.data()), int(e.size()), nullptr));
  if (!bld || !bn_n || !bn_e ||
      !OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, bn_n.get()) ||
      !OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, bn_e.get()))
    return nullptr;
  return key_from_params("RSA", bld.get());
}

std::shared_ptr<EVP_PKEY> ec_p256_key(const std::string& x, const std::string& y) {
  std::string point = "\x04" + x + y;  // uncompressed SEC1 point
  ParamBldPtr bld(OSSL_PARAM_BLD_new());
  if (!bld ||
      !OSSL_PARAM_BLD_push_utf8_string(bld.get(), OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) ||
      !OSSL_PARAM_BLD_push_octet_string(bld.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(),
                                        point.size()))
    return nullptr;
  return key_from_params("EC", bld.get());
}

// One JWK, or nullptr when it is not a signature key this verifier uses.
std::shared_ptr<const Jwks::Key> parse_jwk(const Json& k) {
  if (!k.is_object()) return nullptr;
  const std::string kty = json_string(k, "kty"), use = json_string(k, "use"),
                    alg = json_string(k, "alg");
  if (!use.empty() && use != "sig") return nullptr;
  auto key = std::make_shared<Jwks::Key>();
  key->kid = json_string(k, "kid");
  if (kty == "RSA" && (alg.empty() || alg == "RS256")) {
    auto n = b64_field(k, "n"), e = b64_field(k, "e");
    if (!n || !e || n->empty() || e->empty()) return nullptr;
    key->pkey = rsa_key(*n, *e);
    if (!key->pkey || EVP_PKEY_get_bits(key->pkey.get()) < 2048) return nullptr;
    key->alg = "RS256";
  } else if (kty == "EC" && json_string(k, "crv") == "P-256" && (alg.empty() || alg == "ES256")) {
    auto x = b64_field(k, "x"), y = b64_field(k, "y");
    if (!x || !y || x->size() != 32 || y->size() != 32) return nullptr;
    key->pkey = ec_p256_key(*x, *y);
    if (!key->pkey) return nullptr;
    key->alg = "ES256";
  } else {
    return nullptr;
  }
  return key;
}

std::vector<std::string_view> split_jws(std::string_view jwt) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t i = 0; i <= jwt.size(); ++i) {
    if (i == jwt.size() || jwt[i] == '.') {
      parts.push_back(jwt.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

Result<Json> decode_json_part(std::string_view part, const char* what) {
  auto raw = base64url_decode(part);
  if (!raw) return fail(bad_token(fmt::format("{} is not base64url", what)));
  Json j = Json::parse(*raw, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return fail(bad_token(fmt::format("{} is not a JSON object", what)));
  return j;
}

// ES256 signatures are r||s (32 bytes each); OpenSSL verifies DER.
std::optional<std::string> ecdsa_raw_to_der(std::string_view raw) {
  if (raw.size() != 64) return std::nullopt;
  EcSigPtr sig(ECDSA_SIG_new());
  BIGNUM* r = BN_bin2bn(reinterpret_cast<const unsigned char*>(raw.data()), 32, nullptr);
  BIGNUM* s = BN_bin2bn(reinterpret_cast<const unsigned char*>(raw.data() + 32), 32, nullptr);
  if (!sig || !r || !s || ECDSA_SIG_set0(sig.get(), r, s) != 1) {
    BN_free(r);
    BN_free(s);
    return std::nullopt;
  }
  unsigned char* der = nullptr;
  int len = i2d_ECDSA_SIG(sig.get(), &der);
  if (len <= 0) return std::nullopt;
  std::string out(reinterpret_cast<char*>(der), size_t(len));
  OPENSSL_free(der);
  return out;
}

std::optional<std::string> ecdsa_der_to_raw(std::string_view der) {
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  EcSigPtr sig(d2i_ECDSA_SIG(nullptr, &p, long(der.size())));
  if (!sig) return std::nullopt;
  const BIGNUM *r = nullptr, *s = nullptr;
  ECDSA_SIG_get0(sig.get(), &r, &s);
  std::string raw(64, '\0');
  auto* out = reinterpret_cast<unsigned char*>(raw.data());
  if (BN_bn2binpad(r, out, 32) != 32 || BN_bn2binpad(s, out + 32, 32) != 32) return std::nullopt;
  return raw;
}

bool verify_signature(const Jwks::Key& key, std::string_view signed_part, std::string_view sig) {
  std::string der;
  if (key.alg == "ES256") {
    auto d = ecdsa_raw_to_der(sig);
    if (!d) return false;
    der = std::move(*d);
    sig = der;
  }
  MdCtxPtr md(EVP_MD_CTX_new());
  return md &&
         EVP_DigestVerifyInit(md.get(), nullptr, EVP_sha256(), nullptr, key.pkey.get()) == 1 &&
         EVP_DigestVerify(md.get(), reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                          reinterpret_cast<const unsigned char*>(signed_part.data()),
                          signed_part.size()) == 1;
}

std::optional<int64_t> numeric_date(const Json& claims, const char* key) {
  auto it = claims.find(key);
  if (it == claims.end() || !it->is_number()) return std::nullopt;
  return it->is_number_integer() || it->is_number_unsigned() ? it->get<int64_t>()
                                                             : int64_t(it->get<double>());
}

Result<std::shared_ptr<EVP_PKEY>> read_private_key(std::string_view pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), int(pem.size())));
  EVP_PKEY* pkey = bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr;
  if (!pkey) return fail(Error::invalid("not a PEM private key"));
  return own(pkey);
}

Result<const char*> key_alg(EVP_PKEY* pkey) {
  if (EVP_PKEY_is_a(pkey, "RSA")) return "RS256";
  char group[64] = {};
  if (EVP_PKEY_is_a(pkey, "EC") &&
      EVP_PKEY_get_utf8_string_param(pkey, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof(group),
                                     nullptr) == 1 &&
      std::string_view(group) == "prime256v1")
    return "ES256";
  return fail(Error::invalid("only RSA and EC P-256 keys can sign ID tokens"));
}

std::string bn_param(EVP_PKEY* pkey, const char* name) {
  BIGNUM* bn = nullptr;
  if (EVP_PKEY_get_bn_param(pkey, name, &bn) != 1) return "";
  BnPtr owned(bn);
  std::string out(size_t(BN_num_bytes(bn)), '\0');
  BN_bn2bin(bn, reinterpret_cast<unsigned char*>(out.data()));
  return out;
}

std::string base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()), int(bytes.size()));
  out.resize(size_t(n));
  return out;
}

// https everywhere but on loopback, where tests and local providers run plain http.
Result<void> check_url(std::string_view field, std::string_view url) {
  if (url.starts_with("https://") && url.size() > 8) return ok();
  for (std::string_view host : {"http://127.0.0.1", "http://[::1]", "http://localhost"}) {
    if (url.starts_with(host) &&
        (url.size() == host.size() || url[host.size()] == ':' || url[host.size()] == '/'))
      return ok();
  }
  return fail(Error::invalid(fmt::format(
      "{} must be an https URL (plain http only on loopback): {}", field, url.substr(0, 200))));
}

// Usernames are DNS labels: the claim's value lowercased, an email's local part, anything
// else folded to '-'.
std::string username_from(std::string v) {
  if (auto at = v.find('@'); at != std::string::npos) v.resize(at);
  std::string out;
  for (unsigned char c : v) {
    char l = char(std::tolower(c));
    bool keep = (l >= 'a' && l <= 'z') || (l >= '0' && l <= '9');
    if (keep)
      out += l;
    else if (!out.empty() && out.back() != '-')
      out += '-';
  }
  while (!out.empty() && !(out.front() >= 'a' && out.front() <= 'z')) out.erase(0, 1);
  if (out.size() > 63) out.resize(63);
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

bool claim_matches(const Json& claims, const Rule& rule) {
  auto it = claims.find(rule.claim);
  if (it == claims.end()) return false;
  if (it->is_string()) return it->get<std::string>() == rule.value;
  if (it->is_array())
    return std::any_of(it->begin(), it->end(), [&](const Json& v) {
      return v.is_string() && v.get<std::string>() == rule.value;
    });
  if (it->is_boolean()) return (it->get<bool>() ? "true" : "false") == rule.value;
  return false;
}

}  // namespace

// ---- configuration ----

Result<std::vector<ProviderConfig>> parse_config(
    const Json& doc, const std::function<Result<std::string>(const std::string&)>& read_secret) {
  if (!doc.is_object()) return fail(Error::invalid("OIDC configuration must be a JSON object"));
  ObjectReader top(doc, "OIDC configuration");
  const Json* list = top.optional_array("providers");
  GP_TRY_VOID(top.finish());
  std::vector<ProviderConfig> out;
  if (!list) return out;
  std::set<std::string> names;
  for (const Json& p : *list) {
    if (!p.is_object()) return fail(Error::invalid("each provider must be an object"));
    ObjectReader r(p, "provider");
    ProviderConfig c;
    c.name = r.string("name", 63);
    c.display_name = r.optional_string("display_name", 128).value_or(c.name);
    c.issuer = r.string("issuer", 512);
    c.client_id = r.string("client_id", 256);
    const std::string secret_file = r.string("client_secret_file", 4096);
    c.redirect_uri = r.optional_string("redirect_uri", 1024).value_or("");
    if (auto s = r.optional_string_array("scopes", 32, 128)) c.scopes = *s;
    if (auto u = r.optional_string("username_claim", 128)) c.username_claim = *u;
    c.ca_file = r.optional_string("ca_file", 4096).value_or("");
    if (auto skew = r.optional_integer("clock_skew_seconds", 0, 600))
      c.clock_skew = std::chrono::seconds(*skew);
    const Json* rules = r.optional_array("rules");
    GP_TRY_VOID(r.finish());
    GP_TRY_VOID(validate_dns_label("provider name", c.name));
    if (!names.insert(c.name).second)
      return fail(Error::invalid(fmt::format("provider '{}' is configured twice", c.name)));
    GP_TRY_VOID(check_url("issuer", c.issuer));
    if (!c.redirect_uri.empty()) GP_TRY_VOID(check_url("redirect_uri", c.redirect_uri));
    if (std::find(c.scopes.begin(), c.scopes.end(), "openid") == c.scopes.end())
      return fail(Error::invalid(fmt::format("provider '{}': scopes must include openid", c.name)));
    c.client_secret = GP_TRY(read_secret(secret_file));
    while (!c.client_secret.empty() && std::isspace((unsigned char)c.client_secret.back()))
      c.client_secret.pop_back();
    if (c.client_secret.empty())
      return fail(Error::invalid(fmt::format("provider '{}': {} is empty", c.name, secret_file)));
    for (const Json& rj : rules ? *rules : Json::array()) {
      if (!rj.is_object()) return fail(Error::invalid("each rule must be an object"));
      ObjectReader rr(rj, "rule");
      Rule rule;
      rule.claim = rr.string("claim", 128);
      rule.value = rr.string("value", 256);
      rule.tenant = rr.optional_string("tenant", 63).value_or("");
      rule.project = rr.optional_string("project", 63).value_or("");
      const std::string role = rr.string("role", 64);
      GP_TRY_VOID(rr.finish());
      auto parsed = parse_role(role);
      if (!parsed) return fail(Error::invalid(fmt::format("rule: unknown role '{}'", role)));
      rule.role = *parsed;
      const ScopeLevel level = role_level(rule.role);
      const bool shape_ok =
          level == ScopeLevel::kPlatform ? rule.tenant.empty() && rule.project.empty()
          : level == ScopeLevel::kTenant ? !rule.tenant.empty() && rule.project.empty()
                                         : !rule.tenant.empty() && !rule.project.empty();
      if (!shape_ok)
        return fail(Error::invalid(fmt::format(
            "rule for role {}: platform roles name no tenant, tenant roles a tenant, project "
            "roles a tenant and a project",
            role)));
      c.rules.push_back(std::move(rule));
    }
    out.push_back(std::move(c));
  }
  return out;
}

// ---- tokens ----

Result<Jwks> Jwks::parse(const Json& doc) {
  auto it = doc.is_object() ? doc.find("keys") : doc.end();
  if (!doc.is_object() || it == doc.end() || !it->is_array())
    return fail(Error::invalid("a JWKS must be an object with a 'keys' array"));
  Jwks set;
  for (const Json& k : *it) {
    if (auto key = parse_jwk(k)) set.keys_.push_back(std::move(key));
  }
  return set;
}

std::shared_ptr<const Jwks::Key> Jwks::find(std::string_view kid) const {
  for (const auto& k : keys_)
    if (k->kid == kid) return k;
  return nullptr;
}

std::optional<std::string> token_kid(std::string_view jwt) {
  auto parts = split_jws(jwt);
  if (parts.size() != 3) return std::nullopt;
  auto header = decode_json_part(parts[0], "header");
  if (!header) return std::nullopt;
  auto kid = json_string(*header, "kid");
  return kid.empty() ? std::nullopt : std::optional(kid);
}

Result<Json> verify_id_token(std::string_view jwt, const Jwks& keys, const TokenCheck& check) {
  if (jwt.size() > kMaxTokenBytes) return fail(bad_token("token too large"));
  auto parts = split_jws(jwt);
  if (parts.size() != 3) return fail(bad_token("not a compact JWS (three dot-separated parts)"));
  Json header = GP_TRY(decode_json_part(parts[0], "header"));
  const std::string alg = json_string(header, "alg");
  if (alg != "RS256" && alg != "ES256")
    return fail(bad_token(fmt::format("signature algorithm '{}' is not accepted (RS256 or ES256)",
                                      alg.substr(0, 32))));
  if (header.contains("crit")) return fail(bad_token("critical header extensions not supported"));
  // Without a kid, the only key of the right type (a provider with one key).
  std::shared_ptr<const Jwks::Key> key;
  const std::string kid = json_string(header, "kid");
  if (!kid.empty()) {
    key = keys.find(kid);
  } else {
    for (const auto& k : keys.keys_)
      if (k->alg == alg) {
        if (key) return fail(bad_token("token names no kid and the provider has several keys"));
        key = k;
      }
  }
  if (!key)
    return fail(bad_token(fmt::format("no key '{}' in the provider's JWKS", kid.substr(0, 64))));
  if (key->alg != alg) return fail(bad_token(fmt::format("key '{}' is not an {} key", kid, alg)));
  auto sig = base64url_decode(parts[2]);
  const std::string_view signed_part = jwt.substr(0, parts[0].size() + 1 + parts[1].size());
  if (!sig || !verify_signature(*key, signed_part, *sig))
    return fail(bad_token("signature does not verify"));

  Json claims = GP_TRY(decode_json_part(parts[1], "payload"));
  if (json_string(claims, "iss") != check.issuer)
    return fail(bad_token(fmt::format("issuer '{}' is not '{}'",
                                      json_string(claims, "iss").substr(0, 200), check.issuer)));
  const std::string sub = json_string(claims, "sub");
  if (sub.empty() || sub.size() > 255) return fail(bad_token("sub missing or too long"));
  auto aud = claims.find("aud");
  std::vector<std::string> audiences;
  if (aud != claims.end() && aud->is_string()) audiences.push_back(aud->get<std::string>());
  if (aud != claims.end() && aud->is_array())
    for (const Json& a : *aud)
      if (a.is_string()) audiences.push_back(a.get<std::string>());
  if (std::find(audiences.begin(), audiences.end(), check.client_id) == audiences.end())
    return fail(bad_token(fmt::format("audience does not include client '{}'", check.client_id)));
  const std::string azp = json_string(claims, "azp");
  if ((audiences.size() > 1 && azp.empty()) || (!azp.empty() && azp != check.client_id))
    return fail(bad_token("authorized party (azp) is not this client"));
  const int64_t now = to_unix_micros(check.now) / 1'000'000;
  const int64_t skew = std::chrono::duration_cast<std::chrono::seconds>(check.clock_skew).count();
  auto exp = numeric_date(claims, "exp"), iat = numeric_date(claims, "iat"),
       nbf = numeric_date(claims, "nbf");
  if (!exp || !iat) return fail(bad_token("exp and iat are required"));
  if (now > *exp + skew) return fail(bad_token("token has expired"));
  if (*iat > now + skew) return fail(bad_token("token issued in the future"));
  if (nbf && *nbf > now + skew) return fail(bad_token("token not yet valid"));
  if (check.nonce) {
    auto n = claims.find("nonce");
    if (n == claims.end() || !n->is_string() ||
        !constant_time_equal(n->get<std::string>(), *check.nonce))
      return fail(bad_token("nonce does not match this login"));
  }
  return claims;
}

Result<std::string> sign_jwt(const Json& claims, std::string_view private_key_pem,
                             const std::string& kid) {
  auto pkey = GP_TRY(read_private_key(private_key_pem));
  const char* alg = GP_TRY(key_alg(pkey.get()));
  Json header = {{"alg", alg}, {"typ", "JWT"}};
  if (!kid.empty()) header["kid"] = kid;
  std::string input = base64url_encode(header.dump()) + "." + base64url_encode(claims.dump());
  MdCtxPtr md(EVP_MD_CTX_new());
  size_t len = 0;
  if (!md || EVP_DigestSignInit(md.get(), nullptr, EVP_sha256(), nullptr, pkey.get()) != 1 ||
      EVP_DigestSign(md.get(), nullptr, &len, reinterpret_cast<const unsigned char*>(input.data()),
                     input.size()) != 1)
    return fail(Error::internal("signing failed"));
  std::string sig(len, '\0');
  if (EVP_DigestSign(md.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                     reinterpret_cast<const unsigned char*>(input.data()), input.size()) != 1)
    return fail(Error::internal("signing failed"));
  sig.resize(len);
  if (std::string_view(alg) == "ES256") {
    auto raw = ecdsa_der_to_raw(sig);
    if (!raw) return fail(Error::internal("signing failed"));
    sig = std::move(*raw);
  }
  return input + "." + base64url_encode(sig);
}

Result<std::string> new_signing_key(std::string_view alg) {
  EVP_PKEY* raw = alg == "RS256"   ? EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", size_t(2048))
                  : alg == "ES256" ? EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256")
                                   : nullptr;
  if (!raw) return fail(Error::invalid(fmt::format("cannot make a key for '{}'", alg)));
  auto key = own(raw);
  BioPtr bio(BIO_new(BIO_s_mem()));
  char* data = nullptr;
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1)
    return fail(Error::internal("cannot write the key"));
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, size_t(n));
}

Result<Json> public_jwk(std::string_view private_key_pem, const std::string& kid) {
  auto pkey = GP_TRY(read_private_key(private_key_pem));
  const std::string alg = GP_TRY(key_alg(pkey.get()));
  if (alg == "RS256")
    return Json{{"kty", "RSA"},
                {"kid", kid},
                {"use", "sig"},
                {"alg", alg},
                {"n", base64url_encode(bn_param(pkey.get(), OSSL_PKEY_PARAM_RSA_N))},
                {"e", base64url_encode(bn_param(pkey.get(), OSSL_PKEY_PARAM_RSA_E))}};
  auto coord = [&](const char* name) {
    std::string v = bn_param(pkey.get(), name);
    return base64url_encode(std::string(32 - std::min<size_t>(32, v.size()), '\0') + v);
  };
  return Json{{"kty", "EC"},
              {"kid", kid},
              {"use", "sig"},
              {"alg", alg},
              {"crv", "P-256"},
              {"x", coord(OSSL_PKEY_PARAM_EC_PUB_X)},
              {"y", coord(OSSL_PKEY_PARAM_EC_PUB_Y)}};
}

Pkce make_pkce(const Random& random) {
  Pkce p;
  p.verifier = base64url_encode(random.bytes(32));
  p.challenge = pkce_challenge(p.verifier);
  return p;
}

std::string pkce_challenge(std::string_view verifier) { return base64url_encode(sha256(verifier)); }

// ---- mapping ----

Result<Identity> map_claims(const ProviderConfig& config, const Json& claims) {
  Identity id;
  const std::string sub = json_string(claims, "sub");
  id.subject = json_string(claims, "iss") + "#" + sub;
  std::set<std::string> tenants;
  for (const Rule& rule : config.rules) {
    if (!claim_matches(claims, rule)) continue;
    Grant g{rule.tenant, rule.project, rule.role};
    if (std::find(id.grants.begin(), id.grants.end(), g) == id.grants.end())
      id.grants.push_back(std::move(g));
    tenants.insert(rule.tenant);
  }
  if (id.grants.empty())
    return fail(Error::denied(fmt::format(
        "no mapping rule of identity provider '{}' grants this identity access; ask an operator "
        "to add one for your groups",
        config.name)));
  if (tenants.size() > 1)
    return fail(Error::denied(fmt::format(
        "mapping rules of '{}' place this identity in more than one tenant ({}); a user belongs "
        "to one tenant",
        config.name, fmt::join(tenants, ", "))));
  id.tenant = *tenants.begin();
  for (const std::string& v :
       {json_string(claims, config.username_claim.c_str()), json_string(claims, "email"), sub}) {
    id.username = username_from(v);
    if (!id.username.empty()) break;
  }
  if (id.username.empty())
    return fail(Error::invalid("the identity has no usable username (claim, email or sub)"));
  id.email = json_string(claims, "email");
  id.display_name = json_string(claims, "name");
  if (id.display_name.empty()) id.display_name = id.username;
  return id;
}

// ---- the provider's endpoints ----

Result<Discovery> parse_discovery(const Json& doc, std::string_view expected_issuer) {
  if (!doc.is_object()) return fail(Error::unavailable("discovery document is not an object"));
  Discovery d{json_string(doc, "issuer"), json_string(doc, "authorization_endpoint"),
              json_string(doc, "token_endpoint"), json_string(doc, "jwks_uri")};
  if (d.issuer != expected_issuer)
    return fail(
        Error::unavailable(fmt::format("discovery document names issuer '{}', configured '{}'",
                                       d.issuer.substr(0, 200), expected_issuer)));
  for (auto [field, url] :
       {std::pair{"authorization_endpoint", &d.authorization_endpoint},
        std::pair{"token_endpoint", &d.token_endpoint}, std::pair{"jwks_uri", &d.jwks_uri}}) {
    if (url->empty())
      return fail(Error::unavailable(fmt::format("discovery document lacks {}", field)));
    if (auto c = check_url(field, *url); !c) return fail(Error::unavailable(c.error().message));
  }
  return d;
}

Provider::Provider(ProviderConfig config, Fetch fetch)
    : config_(std::move(config)), fetch_(std::move(fetch)) {}

Result<Json> Provider::fetch_json(const std::string& method, const std::string& url,
                                  const std::string& body,
                                  const std::vector<std::pair<std::string, std::string>>& headers) {
  auto r = fetch_(method, url, body, headers, config_.ca_file);
  if (!r)
    return fail(Error::unavailable(
        fmt::format("identity provider '{}' unreachable: {}", config_.name, r.error().message)));
  Json j = Json::parse(r->body, nullptr, false);
  if (j.is_discarded())
    return fail(Error::unavailable(
        fmt::format("identity provider '{}' answered {} without JSON", config_.name, r->status)));
  if (r->status != 200) {
    std::string why = json_string(j, "error");
    if (auto d = json_string(j, "error_description"); !d.empty()) why += ": " + d;
    // A refused code or grant is the caller's problem; anything else is the provider's.
    if (r->status == 400 || r->status == 401)
      return fail(Error::unauthenticated(
          fmt::format("identity provider '{}' refused: {}", config_.name, why.substr(0, 300))));
    return fail(Error::unavailable(fmt::format("identity provider '{}' answered {}: {}",
                                               config_.name, r->status, why.substr(0, 300))));
  }
  return j;
}

Result<Discovery> Provider::discovery() {
  {
    MutexLock lock(mu_);
    if (discovery_) return *discovery_;
  }
  Json doc =
      GP_TRY(fetch_json("GET", config_.issuer + "/.well-known/openid-configuration", "", {}));
  Discovery d = GP_TRY(parse_discovery(doc, config_.issuer));
  MutexLock lock(mu_);
  discovery_ = d;
  return d;
}

Result<std::shared_ptr<const Jwks>> Provider::keys(const std::optional<std::string>& kid,
                                                   TimePoint now) {
  {
    MutexLock lock(mu_);
    const bool fresh_enough = jwks_ && (!kid || jwks_->has(*kid));
    const bool fetched_recently = jwks_fetched_ && now - *jwks_fetched_ < kJwksRefetchInterval;
    if (jwks_ && (fresh_enough || fetched_recently)) return jwks_;
  }
  Discovery d = GP_TRY(discovery());
  Json doc = GP_TRY(fetch_json("GET", d.jwks_uri, "", {}));
  auto parsed = Jwks::parse(doc);
  if (!parsed) return fail(Error::unavailable(parsed.error().message));
  auto set = std::make_shared<const Jwks>(std::move(*parsed));
  MutexLock lock(mu_);
  jwks_ = set;
  jwks_fetched_ = now;
  return set;
}

Result<std::string> Provider::authorization_url(std::string_view redirect_uri,
                                                std::string_view state, std::string_view nonce,
                                                std::string_view challenge) {
  Discovery d = GP_TRY(discovery());
  std::string scopes = fmt::format("{}", fmt::join(config_.scopes, " "));
  const char sep = d.authorization_endpoint.find('?') == std::string::npos ? '?' : '&';
  return fmt::format(
      "{}{}response_type=code&client_id={}&redirect_uri={}&scope={}&state={}&nonce={}"
      "&code_challenge={}&code_challenge_method=S256",
      d.authorization_endpoint, sep, percent_encode(config_.client_id),
      percent_encode(redirect_uri), percent_encode(scopes), percent_encode(state),
      percent_encode(nonce), percent_encode(challenge));
}

Result<Json> Provider::redeem(std::string_view code, std::string_view redirect_uri,
                              std::string_view verifier, std::string_view nonce,
                              const Clock& clock) {
  Discovery d = GP_TRY(discovery());
  const std::string body =
      fmt::format("grant_type=authorization_code&code={}&redirect_uri={}&code_verifier={}",
                  percent_encode(code), percent_encode(redirect_uri), percent_encode(verifier));
  const std::string basic =
      base64(percent_encode(config_.client_id) + ":" + percent_encode(config_.client_secret));
  Json tokens = GP_TRY(fetch_json("POST", d.token_endpoint, body,
                                  {{"Content-Type", "application/x-www-form-urlencoded"},
                                   {"Authorization", "Basic " + basic},
                                   {"Accept", "application/json"}}));
  const std::string id_token = json_string(tokens, "id_token");
  if (id_token.empty())
    return fail(Error::unavailable(
        fmt::format("identity provider '{}' returned no id_token", config_.name)));
  const TimePoint now = clock.now();
  auto set = GP_TRY(keys(token_kid(id_token), now));
  return verify_id_token(
      id_token, *set,
      {config_.issuer, config_.client_id, std::string(nonce), now, config_.clock_skew});
}

Result<Json> Provider::verify(std::string_view id_token, TimePoint now) {
  if (id_token.size() > kMaxTokenBytes) return fail(bad_token("token too large"));
  auto set = GP_TRY(keys(token_kid(id_token), now));
  return verify_id_token(
      id_token, *set, {config_.issuer, config_.client_id, std::nullopt, now, config_.clock_skew});
}

// ---- logins in flight ----

namespace {
std::string pending_login_key(std::string_view state) { return hex_encode(sha256(state)); }
}  // namespace

Result<std::optional<Duration>> save_pending_login(store::Tx& tx, std::string_view state,
                                                   const PendingLogin& login, int64_t now_micros,
                                                   int max_in_flight) {
  GP_TRY_VOID(tx.exec("DELETE FROM oidc_logins WHERE expires_at < ?", {now_micros}));
  auto held = GP_TRY(tx.query_one(
      "SELECT COUNT(*), MIN(expires_at) FROM oidc_logins WHERE provider = ?", {login.provider}));
  if (held && held->integer(0) >= max_in_flight) {
    const int64_t wait = held->is_null(1) ? 0 : std::max<int64_t>(0, held->integer(1) - now_micros);
    return std::optional<Duration>(std::chrono::microseconds(wait));
  }
  GP_TRY_VOID(
      tx.exec("INSERT INTO oidc_logins (state_hash, provider, nonce, code_verifier, redirect_uri, "
              "return_to, created_at, expires_at) VALUES (?,?,?,?,?,?,?,?)",
              {pending_login_key(state), login.provider, login.nonce, login.code_verifier,
               login.redirect_uri, login.return_to, now_micros, login.expires_at}));
  return std::optional<Duration>();
}

Result<std::optional<PendingLogin>> take_pending_login(store::Tx& tx, std::string_view state) {
  const std::string key = pending_login_key(state);
  auto row = GP_TRY(tx.query_one(
      "SELECT provider, nonce, code_verifier, redirect_uri, return_to, expires_at FROM "
      "oidc_logins WHERE state_hash = ?",
      {key}));
  if (!row) return std::optional<PendingLogin>();
  PendingLogin out{row->text(0), row->text(1), row->text(2),
                   row->text(3), row->text(4), row->integer(5)};
  GP_TRY_VOID(tx.exec("DELETE FROM oidc_logins WHERE state_hash = ?", {key}));
  return std::optional<PendingLogin>(std::move(out));
}

}  // namespace gp::iam::oidc
