// Tables show what a person reads: floats rounded, flat objects as lists, shapes in words.
#include <gtest/gtest.h>

#include "cli/client.h"

namespace gp::cli {
namespace {

TEST(CliCells, NumbersListsAndNullsReadAsWords) {
  EXPECT_EQ(cell(Json(nullptr)), "-");
  EXPECT_EQ(cell(Json("H200")), "H200");
  EXPECT_EQ(cell(Json(12)), "12");
  EXPECT_EQ(cell(Json(3.4285714285714284)), "3.43");
  EXPECT_EQ(cell(Json(2.0)), "2");
  EXPECT_EQ(cell(Json(0.5)), "0.5");
  EXPECT_EQ(cell(Json(-0.001)), "0");
  EXPECT_EQ(cell(Json{{"mig", 4}, {"whole", 12}}), "mig 4, whole 12");
  EXPECT_EQ(cell(Json::array({"H200", "A100"})), "H200, A100");
  // Nested values keep their JSON: there is no flat way to say them.
  EXPECT_EQ(cell(Json{{"a", {{"b", 1}}}}), R"({"a":{"b":1}})");
  EXPECT_EQ(cell(Json::object()), "{}");
}

TEST(CliCells, ShapesReadAsWhatWasAskedFor) {
  EXPECT_EQ(
      shape_text({{"tier", "mig"}, {"models", {"H200"}}, {"count", 2}, {"mig_profile", "3g.71gb"}}),
      "2 x 3g.71gb MIG on H200");
  EXPECT_EQ(shape_text({{"tier", "dedicated_gpu"}, {"models", Json::array()}, {"count", 1}}),
            "1 GPU (dedicated_gpu) on any model");
  EXPECT_EQ(shape_text({{"tier", "dedicated_gpu"}, {"models", {"H200"}}, {"count", 4}}),
            "4 GPUs (dedicated_gpu) on H200");
  EXPECT_EQ(shape_text({{"tier", "shared"}, {"models", {"H200"}}, {"count", 1}, {"milli", 250}}),
            "0.25 of a GPU (shared) on H200");
  EXPECT_EQ(shape_text({{"tier", "dedicated_node"},
                        {"models", {"H200"}},
                        {"count", 16},
                        {"node_count", 2},
                        {"gpus_per_node", 8}}),
            "2 nodes x 8 GPUs (dedicated_node) on H200");
}

}  // namespace
}  // namespace gp::cli
