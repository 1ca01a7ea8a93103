#pragma once
/** \file
 * The yardsticks benchmarks measure in their own run, side by side with what they time. */

namespace fusor {

/** GFLOP/s of an FMA loop with independent accumulators on \p threads threads (AVX-512 when the
 * CPU has it, else AVX2): the best of five runs, a capability. */
double peak_gflops(int threads);

/** GB/s of a multi-threaded copy of 256 MiB (read + write counted): the best of five runs. */
double copy_gbps(int threads);

}  // namespace fusor
