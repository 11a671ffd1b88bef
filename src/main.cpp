#include "cli/cli.h"

int main(int argc, char** argv) { return gp::cli::main(argc, argv); }
