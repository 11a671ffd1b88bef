// Data keys: envelope encryption of the secrets the platform holds for a tenant (registry and
// storage credentials, ...). Each tenant has versioned AES-256 data keys; each data key is
// stored only wrapped (AES-256-GCM) by a master key that lives in a file outside the store.
// Secrets are sealed with AES-256-GCM under the tenant's current data key, with associated data
// binding the ciphertext to tenant, secret name and key version, so a ciphertext moved to
// another tenant or name does not open. Rotation never needs downtime: a new master key
// rewraps the data keys (secrets untouched); a new data key version seals new secrets while
// old versions keep opening old ones until they are resealed. Destroying a tenant's keys
// (offboarding) makes every ciphertext of the tenant unopenable: crypto-shredding.
//
// Pure over plain structs except load/create_master_key_file (file I/O); randomness is
// injected. Included by storage.h.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/env.h"
#include "common/json.h"
#include "common/result.h"

namespace gp::storage {

constexpr size_t kKeyBytes = 32;    // AES-256
constexpr size_t kNonceBytes = 12;  // GCM
constexpr size_t kTagBytes = 16;

// A master key, named by its fingerprint (hex of the first 8 bytes of a SHA-256 over a label
// and the key), so a wrapped key says which master opens it without storing the master.
class MasterKey {
 public:
  // `key` must be kKeyBytes long.
  static Result<MasterKey> from_bytes(std::string key);
  ~MasterKey();
  MasterKey(const MasterKey&) = default;
  MasterKey& operator=(const MasterKey&) = default;
  MasterKey(MasterKey&&) = default;
  MasterKey& operator=(MasterKey&&) = default;

  const std::string& id() const { return id_; }
  const std::string& bytes() const { return key_; }

 private:
  MasterKey() = default;
  std::string key_;
  std::string id_;
};

// Reads a master key file: 64 hex characters (one trailing newline allowed). The file must be
// a regular file (not a symlink) owned by the calling user with no group or other permission
// bits (0600 or 0400); anything else is refused with the reason.
Result<MasterKey> load_master_key(const std::filesystem::path& path);
// Writes a fresh random master key to a new file (O_EXCL, mode 0600).
Result<MasterKey> create_master_key_file(const std::filesystem::path& path, const Random& random);

// A data directory's master keys: kMasterKeyFile wraps; kNextMasterKeyFile exists only while a
// master-key rewrap is unfinished (it is what the rewrap wraps into, renamed over the first
// when every data key is rewrapped).
inline constexpr const char* kMasterKeyFile = "master.key";
inline constexpr const char* kNextMasterKeyFile = "master.key.next";
// The keys of `data_dir`, the one that wraps first, then the unfinished rewrap's. With
// `create`, a data directory with neither gets a fresh master key.
Result<std::vector<MasterKey>> load_master_keys(const std::filesystem::path& data_dir, bool create,
                                                const Random& random);

struct WrappedDataKey {
  uint32_t version = 0;
  std::string master_key_id;  // which master key wraps it
  std::string nonce;          // kNonceBytes
  std::string ciphertext;     // wrapped key and GCM tag
  int64_t created_at = 0;     // unix micros; 0 for a key made before this was recorded
  bool operator==(const WrappedDataKey&) const = default;
};

struct TenantKeys {
  std::string tenant;
  uint32_t current_version = 0;  // seals new secrets
  std::vector<WrappedDataKey> versions;
  bool destroyed = false;  // crypto-shredded: no key material left, nothing opens
  bool operator==(const TenantKeys&) const = default;
};

// What the store persists (the lead keeps one row per tenant).
struct Keyring {
  std::vector<TenantKeys> tenants;
  bool operator==(const Keyring&) const = default;
};

struct SealedSecret {
  std::string tenant;
  std::string name;
  uint32_t key_version = 0;
  std::string nonce;
  std::string ciphertext;  // with GCM tag
  bool operator==(const SealedSecret&) const = default;
};

// Gives a tenant its first data key (version 1). Conflict when it has keys already, or had
// them destroyed (a shredded tenant's name is not silently given a new key).
// `now_micros` is recorded as the key's creation time (what rotation ages are measured from).
Result<void> create_tenant_key(Keyring& ring, std::string_view tenant, const MasterKey& master,
                               const Random& random, int64_t now_micros = 0);
// Adds a new data key version and makes it current; older versions keep opening old secrets.
Result<uint32_t> rotate_data_key(Keyring& ring, std::string_view tenant, const MasterKey& master,
                                 const Random& random, int64_t now_micros = 0);
// When the tenant's current data key was made (unix micros; 0 when unknown or none).
int64_t current_key_created_at(const TenantKeys& t);
// Rewraps every data key of every tenant under `to`, unwrapping each with whichever of `from`
// wrapped it. Secrets are untouched. Returns how many keys were rewrapped. All or nothing: on
// error `ring` is unchanged.
Result<size_t> rewrap_all(Keyring& ring, std::span<const MasterKey> from, const MasterKey& to,
                          const Random& random);
// Crypto-shredding: wipes every data key of the tenant and marks it destroyed.
Result<void> destroy_tenant_keys(Keyring& ring, std::string_view tenant);
// Drops a data key version no secret uses any more (after resealing); refuses the current one
// and versions `still_sealed` uses.
Result<void> retire_data_key(Keyring& ring, std::string_view tenant, uint32_t version,
                             std::span<const SealedSecret> still_sealed);

// Secret names: 1-128 characters, each a letter, a digit or one of kSecretNamePunctuation, and
// not "." or ".." alone. A name is one segment of the secret's URL path, which is decoded before
// it is routed: "/" (even as %2F) would split it, so no name may hold one. Secrets stored with
// a "/" before this rule can still be deleted by name in the query (docs/storage.md).
inline constexpr const char* kSecretNamePunctuation = "-_.:";
Result<void> validate_secret_name(std::string_view name);
Result<SealedSecret> seal_secret(const Keyring& ring, std::span<const MasterKey> masters,
                                 std::string_view tenant, std::string_view name,
                                 std::string_view plaintext, const Random& random);
// Errors: not_found for an unknown tenant or key version, permission_denied when the tenant's
// keys were destroyed, invalid_argument when the ciphertext does not authenticate (tampered,
// or moved to another tenant or name).
Result<std::string> open_secret(const Keyring& ring, std::span<const MasterKey> masters,
                                const SealedSecret& secret);
// The key that encrypts the tenant's volume trees on the nodes (fscrypt, 64 bytes): derived
// (HMAC-SHA512) from the tenant's first data key and its name, so it is the same on every node
// and after any restart, is never stored, and dies with the data keys (crypto-shredding). Data
// key rotation leaves it as it is: re-encrypting volumes would mean copying every file.
inline constexpr size_t kVolumeKeyBytes = 64;
inline constexpr uint32_t kVolumeKeyVersion = 1;
Result<std::string> derive_volume_key(const Keyring& ring, std::span<const MasterKey> masters,
                                      std::string_view tenant);
// True when the secret is sealed under an older version than the tenant's current one.
bool needs_reseal(const Keyring& ring, const SealedSecret& secret);
// Opens and seals again under the current version (lazily on read, or in a batch).
Result<SealedSecret> reseal_secret(const Keyring& ring, std::span<const MasterKey> masters,
                                   const SealedSecret& secret, const Random& random);

// ---- Sealed files: a byte stream encrypted under a key the operator keeps (backups) ----
// Layout: kSealedFileMagic, the key's id (16 hex characters), a 16-byte random file id, then
// records of a 4-byte big-endian length and one AES-256-GCM sealed chunk (at most
// kSealedChunkBytes of plaintext). Chunks are sealed under a key derived from the file key and
// the file id (HMAC-SHA256), so one file key seals any number of files without nonce reuse; the
// nonce is the chunk's index and the associated data binds the header, the index and whether it
// is the last chunk, so an altered, reordered, dropped or truncated chunk does not open.
inline constexpr std::string_view kSealedFileMagic = "GPSEALED1\n";
inline constexpr size_t kSealedChunkBytes = size_t{1} << 20;

class SealedFileWriter {
 public:
  // Creates `path` (O_EXCL, mode 0600). The key is copied; the writer wipes it when destroyed.
  static Result<SealedFileWriter> create(const std::filesystem::path& path, const MasterKey& key,
                                         const Random& random);
  SealedFileWriter(SealedFileWriter&&) noexcept;
  SealedFileWriter& operator=(SealedFileWriter&&) noexcept;
  ~SealedFileWriter();
  Result<void> write(std::string_view bytes);
  // Seals the last chunk, syncs and closes. A writer destroyed without finish leaves a file
  // that no reader accepts (it has no last chunk).
  Result<void> finish();

 private:
  struct State;
  explicit SealedFileWriter(std::unique_ptr<State> s);
  Result<void> seal_chunk(bool last);
  std::unique_ptr<State> s_;
};

class SealedFileReader {
 public:
  // Errors: not_found (no file), invalid_argument (not a sealed file), permission_denied (sealed
  // under another key: the message names both key ids).
  static Result<SealedFileReader> open(const std::filesystem::path& path, const MasterKey& key);
  SealedFileReader(SealedFileReader&&) noexcept;
  SealedFileReader& operator=(SealedFileReader&&) noexcept;
  ~SealedFileReader();
  // The next chunk of plaintext; nullopt after the last one. Errors: invalid_argument naming the
  // chunk that does not authenticate, or that the file ends before its last chunk.
  Result<std::optional<std::string>> next();

 private:
  struct State;
  explicit SealedFileReader(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

// Persisted forms (binary fields base64url). Strict readers.
Json to_json(const Keyring& ring);
Result<Keyring> keyring_from_json(const Json& j);
Json to_json(const SealedSecret& secret);
Result<SealedSecret> sealed_secret_from_json(const Json& j);

}  // namespace gp::storage
