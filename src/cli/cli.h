// The gpuplane command: `serve`, the offline `audit verify`, and the API client commands
// (`tenant`, `project`, `user`, `service-account`, `api-key`, `role-binding`, `audit`, `login`,
// `whoami`). Public header of the cli module.
#pragma once

namespace gp::cli {

int main(int argc, char** argv);

}  // namespace gp::cli
