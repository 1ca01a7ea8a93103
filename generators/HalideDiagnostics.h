#pragma once
/** \file
 * Halide's compile-time diagnostics, routed in one place. Halide prints a compile-time warning
 * (e.g. "Warning: Outer dim vectorization of var ...") to stderr on every compile of a pipeline
 * that triggers it, which in fusor is every `run` and `bench`. Through Halide's process-wide
 * CompileTimeErrorReporter, fusor prints them only when the environment variable FUSOR_DEBUG is
 * set (non-empty), and raises errors as Halide's own reporter does. */

namespace fusor {

/** Installs the reporter, once per process; later calls do nothing. lower_cluster calls it, so it
 * is in place before any pipeline of fusor's is defined or compiled.
 *
 * - warning: written to stderr as Halide writes it, only when FUSOR_DEBUG is non-empty (read at
 *   each warning).
 * - error: thrown, never returned: Halide::InternalError for Halide's internal errors, otherwise
 *   Halide::CompileError, with Halide's message as what(). Halide does not tell a reporter which
 *   errors it would have thrown as Halide::RuntimeError (a failing JIT run's message): those are
 *   CompileErrors too. Every caller in fusor catches Halide::Error, their common base. */
void install_halide_diagnostics();

}  // namespace fusor
