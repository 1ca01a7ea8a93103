#pragma once
/** \file
 * The test-only ops (graph/Op.h, FUSOR_OPS_TEST) for the programs that use them: the test
 * executables whose cases build such models and fusor_test_worker, the fusor CLI with these ops,
 * which the tuner tests start as their measurement worker. */

namespace fusor::test {

/** Makes the test-only ops known (find_op, all_ops) and registers their lowerings and the extern
 * functions their kernels call. Call at startup, before any compile; calling again does nothing. */
void register_test_ops();

}  // namespace fusor::test
