/** \file
 * `fusor`: the CLI of tools/fusor.cpp, with the production op table. */
#include "tools/Commands.h"

int main(int argc, char **argv) {
    return fusor::cli::run_cli(argc, argv);
}
