#include "harness/cli.h"

int main(int argc, char** argv) { return tc::cli_main(argc, argv); }
