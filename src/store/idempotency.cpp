// Idempotency keys (store.h, "idempotency keys").
#include "store/store.h"

namespace gp::store {

Result<std::optional<IdempotentReply>> find_idempotent_reply(Tx& tx, const std::string& principal,
                                                             const std::string& key) {
  auto row = GP_TRY(tx.query_one(
      "SELECT request_hash, status, body FROM idempotency_keys WHERE principal_id = ? AND "
      "idem_key = ?",
      {principal, key}));
  if (!row) return std::optional<IdempotentReply>();
  return std::optional<IdempotentReply>(
      IdempotentReply{row->text(0), static_cast<int>(row->integer(1)), row->text(2)});
}

Result<void> record_idempotent_reply(Tx& tx, const IdempotentWrite& write) {
  GP_TRY_VOID(
      tx.exec("INSERT INTO idempotency_keys (principal_id, idem_key, method, path, request_hash, "
              "status, body, created_at) VALUES (?,?,?,?,?,?,?,?)",
              {write.principal, write.key, write.method, write.path, write.reply.request_hash,
               int64_t{write.reply.status}, write.reply.body, write.created_at}));
  return ok();
}

}  // namespace gp::store
