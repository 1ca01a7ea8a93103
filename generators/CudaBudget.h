#pragma once
/** \file
 * The register budget of fusor's CUDA kernels (`--gpu-max-registers`), apart from
 * generators/CudaCheck.h so that option structs can name it without Halide. */

#include <string>

namespace fusor {

/** Registers per thread unless `--gpu-max-registers` says otherwise. ptxas checks with it, and
 * Halide's CUDA runtime loads the kernels with it: Halide 14 caps them at 64 unless
 * HL_CUDA_JIT_MAX_REGISTERS says otherwise (set_cuda_jit_max_registers). */
constexpr int kDefaultGpuMaxRegisters = 128;
/** ptxas raises a budget under 24 to 24 for sm_80 and sm_90 (its lower bound), so a smaller one
 * would be a budget nobody checks; CUDA allows at most 255. */
constexpr int kMinGpuMaxRegisters = 24, kMaxGpuMaxRegisters = 255;

/** Empty when \p n is a register budget ptxas and the driver honour (24..255), else why. */
std::string gpu_max_registers_problem(int n);

/** Makes Halide's CUDA runtime load the kernels of this process with at most \p n registers per
 * thread (HL_CUDA_JIT_MAX_REGISTERS, read when a module is loaded). \p overwrite false keeps a
 * value the environment already has. */
void set_cuda_jit_max_registers(int n, bool overwrite);

}  // namespace fusor
