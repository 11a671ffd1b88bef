// OpenID Connect login (docs/oidc.md): the provider configuration, ID-token (JWT) verification
// against the provider's JSON Web Key Set (RS256 and ES256 through OpenSSL), PKCE, the
// discovery document, and the operator's rules that map claims to a tenant and roles. The
// checks are pure; Provider adds the provider's HTTP endpoints through an injected fetcher, so
// the api module decides how requests travel and tests can run it against any provider.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/env.h"
#include "common/json.h"
#include "common/result.h"
#include "common/thread_safety.h"
#include "iam/iam.h"
#include "store/store.h"

namespace gp::iam::oidc {

// ---- configuration ----

// One rule: when the claim `claim` equals `value` (or, for an array claim such as groups,
// contains it), the identity receives `role` in `tenant` (at platform scope when `tenant` is
// empty), in `project` for project roles.
struct Rule {
  std::string claim, value;
  std::string tenant, project;
  Role role = Role::kProjectViewer;
};

struct ProviderConfig {
  std::string name;          // a DNS label: the provider's path segment (/v1/auth/oidc/{name}/...)
  std::string display_name;  // what the login page shows
  std::string issuer;        // exactly as the provider's discovery document states it
  std::string client_id, client_secret;
  // Where the provider sends the browser back; empty: derived from the request's Host as
  // <scheme>://<host>/v1/auth/oidc/<name>/callback.
  std::string redirect_uri;
  std::vector<std::string> scopes{"openid", "email", "profile"};
  std::string username_claim = "preferred_username";  // falls back to email, then sub
  std::string ca_file;  // https issuers: trust only these CAs (empty: the system store)
  Duration clock_skew = std::chrono::seconds(60);
  std::vector<Rule> rules;
};

// Reads {"providers": [...]} (docs/oidc.md). `read_secret` loads client_secret_file. Issuers
// must be https, except on loopback addresses (tests and local providers).
Result<std::vector<ProviderConfig>> parse_config(
    const Json& doc, const std::function<Result<std::string>(const std::string&)>& read_secret);

// ---- tokens ----

struct TokenCheck {
  std::string issuer, client_id;
  std::optional<std::string> nonce;  // when set, the token's nonce must equal it
  TimePoint now;
  Duration clock_skew = std::chrono::seconds(60);
};

// A JSON Web Key Set reduced to the signature keys this verifier can use: RSA keys (RS256, at
// least 2048 bits) and EC P-256 keys (ES256). Keys of other types or for encryption are skipped.
class Jwks {
 public:
  static Result<Jwks> parse(const Json& doc);
  size_t size() const { return keys_.size(); }
  bool has(std::string_view kid) const { return find(kid) != nullptr; }

  struct Key;  // oidc.cpp
  std::shared_ptr<const Key> find(std::string_view kid) const;

 private:
  std::vector<std::shared_ptr<const Key>> keys_;
  friend Result<Json> verify_id_token(std::string_view jwt, const Jwks& keys,
                                      const TokenCheck& check);
};

// Verifies a compact JWS ID token: alg RS256 or ES256 only ("none" and HMAC are refused), the
// signature with the key its kid names, then iss, aud (and azp when several audiences), exp,
// nbf, iat and nonce. Returns the claims; errors are kUnauthenticated with the reason.
Result<Json> verify_id_token(std::string_view jwt, const Jwks& keys, const TokenCheck& check);
// The kid in a token's header, to decide whether the key set must be fetched again.
std::optional<std::string> token_kid(std::string_view jwt);

// Signs `claims` as a compact JWS with a PEM private key (RSA: RS256, EC P-256: ES256); and
// the public JWK of such a key. For tests and tools that play an identity provider.
Result<std::string> sign_jwt(const Json& claims, std::string_view private_key_pem,
                             const std::string& kid);
// A new private key (PEM) for `alg`: "RS256" (RSA 2048) or "ES256" (EC P-256).
Result<std::string> new_signing_key(std::string_view alg);
Result<Json> public_jwk(std::string_view private_key_pem, const std::string& kid);

// PKCE (RFC 7636) with S256.
struct Pkce {
  std::string verifier, challenge;
};
Pkce make_pkce(const Random& random);
std::string pkce_challenge(std::string_view verifier);

// ---- mapping ----

struct Grant {
  std::string tenant, project;  // tenant empty: platform scope
  Role role;
  bool operator==(const Grant&) const = default;
};
struct Identity {
  std::string subject;  // "<issuer>#<sub>": unique across providers
  std::string username, email, display_name;
  std::string tenant;  // home tenant; empty for a platform user
  std::vector<Grant> grants;
};
// Applies the provider's rules to verified claims. kPermissionDenied when no rule matches or
// the matches name more than one tenant (a user belongs to one tenant).
Result<Identity> map_claims(const ProviderConfig& config, const Json& claims);

// ---- logins in flight (the oidc_logins table) ----

// A browser login between its start and the provider's callback. Its `state` is kept only as a
// hash; the login is single use.
struct PendingLogin {
  std::string provider, nonce, code_verifier, redirect_uri, return_to;
  int64_t expires_at = 0;  // Unix microseconds
};
// Purges expired logins, then stores `login` under `state`, unless its provider already has
// `max_in_flight` unexpired logins: then nothing is stored and the answer is how long until the
// provider's oldest one expires (a slot frees up). Logins are begun without credentials, so the
// cap is what bounds the table.
Result<std::optional<Duration>> save_pending_login(store::Tx& tx, std::string_view state,
                                                   const PendingLogin& login, int64_t now_micros,
                                                   int max_in_flight);
// Removes and returns the login stored under `state`; nullopt when there is none (never begun,
// already used, or purged).
Result<std::optional<PendingLogin>> take_pending_login(store::Tx& tx, std::string_view state);

// ---- the provider's endpoints ----

struct FetchResult {
  int status = 0;
  std::string body;
};
// method, absolute URL, body, headers; `ca_file` for https.
using Fetch = std::function<Result<FetchResult>(
    const std::string& method, const std::string& url, const std::string& body,
    const std::vector<std::pair<std::string, std::string>>& headers, const std::string& ca_file)>;

struct Discovery {
  std::string issuer, authorization_endpoint, token_endpoint, jwks_uri;
};
// Checks the document names `expected_issuer` exactly and has the endpoints a code flow needs.
Result<Discovery> parse_discovery(const Json& doc, std::string_view expected_issuer);

// A configured provider: discovery and keys fetched on first use and kept; the key set fetched
// again when a token names a kid it lacks (at most once a minute). Thread-safe.
class Provider {
 public:
  Provider(ProviderConfig config, Fetch fetch);
  const ProviderConfig& config() const { return config_; }

  // The authorization request URL (response_type=code, PKCE S256, state and nonce).
  Result<std::string> authorization_url(std::string_view redirect_uri, std::string_view state,
                                        std::string_view nonce, std::string_view challenge);
  // Redeems a code at the token endpoint (client_secret_basic) and verifies the ID token it
  // returns against `nonce`, at the clock's time when the token arrived (the exchange may take
  // seconds, and a token issued during it is not from the future). Returns the verified claims.
  Result<Json> redeem(std::string_view code, std::string_view redirect_uri,
                      std::string_view verifier, std::string_view nonce, const Clock& clock);
  // Verifies an ID token presented directly (issued by this provider for this client).
  Result<Json> verify(std::string_view id_token, TimePoint now);

 private:
  Result<Discovery> discovery();
  Result<std::shared_ptr<const Jwks>> keys(const std::optional<std::string>& kid, TimePoint now);
  Result<Json> fetch_json(const std::string& method, const std::string& url,
                          const std::string& body,
                          const std::vector<std::pair<std::string, std::string>>& headers);

  ProviderConfig config_;
  Fetch fetch_;
  Mutex mu_;
  std::optional<Discovery> discovery_ GP_GUARDED_BY(mu_);
  std::shared_ptr<const Jwks> jwks_ GP_GUARDED_BY(mu_);
  std::optional<TimePoint> jwks_fetched_ GP_GUARDED_BY(mu_);
};

}  // namespace gp::iam::oidc
