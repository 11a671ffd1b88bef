// Ed25519 keys that sign audit checkpoints (Signer) and check them offline (Verifier). Keys are
// exchanged as PEM (PKCS#8 private, SubjectPublicKeyInfo public); signatures travel as unpadded
// base64url. A key is named by its key_id: the first 16 hex digits of SHA-256 over the raw
// 32-byte public key, so a Signer and the Verifier made from its public PEM share a key_id.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "common/result.h"

struct evp_pkey_st;  // OpenSSL's EVP_PKEY; kept out of this header.

namespace gp::audit {

namespace detail {
struct PkeyDeleter {
  void operator()(evp_pkey_st* pkey) const;
};
using PkeyPtr = std::unique_ptr<evp_pkey_st, PkeyDeleter>;
}  // namespace detail

// Checks Ed25519 signatures made by one public key. Immutable after construction: safe for
// concurrent verify() calls from many threads without external locking. Movable, not copyable;
// a moved-from Verifier may only be destroyed or assigned to.
class Verifier {
 public:
  // Fails with kInvalidArgument unless `public_pem` holds exactly an Ed25519 public key.
  static Result<Verifier> from_public_pem(std::string_view public_pem);

  Verifier(Verifier&&) noexcept = default;
  Verifier& operator=(Verifier&&) noexcept = default;

  const std::string& key_id() const { return key_id_; }
  std::string public_pem() const;

  // True iff `signature_b64url` is the canonical unpadded base64url form of a valid 64-byte
  // Ed25519 signature of `message` under this key. Malformed input is simply false.
  bool verify(std::string_view message, std::string_view signature_b64url) const;

 private:
  friend class Signer;
  Verifier(detail::PkeyPtr pkey, std::string key_id);

  detail::PkeyPtr pkey_;
  std::string key_id_;
};

// Holds an Ed25519 private key. Immutable after construction: safe for concurrent sign() calls
// from many threads without external locking. Movable, not copyable; a moved-from Signer may
// only be destroyed or assigned to.
class Signer {
 public:
  // A fresh key from OpenSSL's CSPRNG. Fails with kInternal only if OpenSSL does.
  static Result<Signer> generate();
  // Fails with kInvalidArgument unless `private_pem` holds an unencrypted Ed25519 private key.
  static Result<Signer> from_pem(std::string_view private_pem);

  Signer(Signer&&) noexcept = default;
  Signer& operator=(Signer&&) noexcept = default;

  std::string private_pem() const;  // unencrypted PKCS#8 "PRIVATE KEY"
  std::string public_pem() const;   // SubjectPublicKeyInfo "PUBLIC KEY"
  const std::string& key_id() const { return key_id_; }

  // Ed25519 signature of `message`, unpadded base64url (86 characters). Ed25519 signing is
  // deterministic and cannot fail for a valid key; an OpenSSL failure (out of memory) aborts.
  std::string sign(std::string_view message) const;

  // A Verifier for this key's public half.
  Verifier verifier() const;

 private:
  Signer(detail::PkeyPtr pkey, std::string key_id);

  detail::PkeyPtr pkey_;
  std::string key_id_;
};

// File names load_or_create uses inside its directory.
inline constexpr std::string_view kSigningKeyFile = "audit-signing.key";
inline constexpr std::string_view kPublicKeyFile = "audit-signing.pub";

// Returns the signing key kept in `dir`, creating it on first use.
//  - If dir/audit-signing.key exists it must be a regular file, not accessible to group or
//    others (like ssh, a looser mode is refused with kPermissionDenied) and hold an Ed25519
//    private PEM. dir/audit-signing.pub is written (mode 0644) if missing; if present it must
//    match the key, otherwise kConflict (someone replaced what auditors verify against).
//  - Otherwise `dir` is created if needed (mode 0700), a key is generated and published
//    atomically: the key file appears complete with mode 0600 or not at all, and a concurrent
//    creator loses the race cleanly and loads the winner's key.
// I/O failures are kUnavailable with the path and the OS error in the message.
Result<Signer> load_or_create(const std::string& dir);

}  // namespace gp::audit
