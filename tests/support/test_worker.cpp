/** \file
 * fusor_test_worker: the fusor CLI (tools/fusor.cpp) with the test-only ops registered. The tuner
 * tests start it as their measurement worker (`fusor_test_worker worker JOB RESULT`, the same entry
 * point as `fusor worker`) and as the CLI for models that use those ops. */
#include "support/TestOps.h"
#include "tools/Commands.h"

int main(int argc, char **argv) {
    fusor::test::register_test_ops();
    return fusor::cli::run_cli(argc, argv);
}
