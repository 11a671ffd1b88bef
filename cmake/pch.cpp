// The source of the precompiled-header targets gp_pch and gp_test_pch (CMakeLists.txt, GP_PCH):
// CMake compiles their headers once and the other targets of the build reuse them.
