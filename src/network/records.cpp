// Network's rows in the store (records.h).
#include "network/records.h"

namespace gp::network {

Result<std::optional<Segment>> load_segment(store::Tx& tx, const std::string& tenant_id) {
  auto row = GP_TRY(
      tx.query_one("SELECT vni, cidr FROM tenant_segments WHERE tenant_id = ?", {tenant_id}));
  if (!row) return std::optional<Segment>{};
  return std::optional<Segment>{
      Segment{tenant_id, static_cast<uint32_t>(row->integer(0)), GP_TRY(parse_cidr(row->text(1)))}};
}

}  // namespace gp::network
