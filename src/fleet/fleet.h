// Fleet: the hardware gpuplane governs. So far the MIG catalog (profiles and placements per
// GPU model, from NVIDIA's MIG user guide) and MIG geometry (validate, place, plan, export as
// mig-parted config). Public header of the fleet module.
#pragma once

#include "fleet/mig_catalog.h"
#include "fleet/mig_geometry.h"
