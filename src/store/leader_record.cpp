// The leader record (store.h, "the leader record").
#include "store/store.h"

namespace gp::store {

Result<void> record_leader(Tx& tx, const std::string& holder, const std::string& url,
                           int64_t since_micros) {
  GP_TRY_VOID(tx.exec("DELETE FROM control_plane_leader"));
  GP_TRY_VOID(
      tx.exec("INSERT INTO control_plane_leader (id, holder, url, since) VALUES (1, ?, ?, ?)",
              {holder, url, since_micros}));
  return ok();
}

Result<std::string> leader_url(Tx& tx) {
  auto row = GP_TRY(tx.query_one("SELECT url FROM control_plane_leader WHERE id = 1"));
  return row ? row->text(0) : std::string();
}

}  // namespace gp::store
