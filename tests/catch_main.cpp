// Catch wraps long test names in --list-test-names-only at the console width, and CTest discovery would
// read each wrapped line as a separate test that selects nothing. A wide console keeps one name per line.
#define CATCH_CONFIG_CONSOLE_WIDTH 1000
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
