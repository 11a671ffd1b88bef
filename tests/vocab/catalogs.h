// The MIG catalog of a GPU model, for the tests (a failed test if the model is unknown).
#pragma once

#include <gtest/gtest.h>

#include <string_view>

#include "vocab/vocab.h"

namespace gp::vocab {

inline const MigCatalog& catalog_for(std::string_view model) {
  Result<const MigCatalog*> catalog = mig_catalog(model);
  EXPECT_TRUE(catalog.has_value()) << model;
  return **catalog;
}

}  // namespace gp::vocab
