// Catch2 entry point, compiled once for all test files.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
