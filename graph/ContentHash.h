#pragma once
/** \file
 * Content hashes, the project's one hash: the ids of tuning records (trial ids, workload
 * signatures), the kernel cache's keys and checksums (runtime/KernelCache.h). No Halide, no
 * SQLite: the tuning database's JSON reader (tuner/db/TuningRecords.h) and its fuzzer use it alone. */

#include <string>

namespace fusor {

/** XXH3-128 of \p text as 32 lowercase hex digits (the canonical big-endian form, as `xxhsum -H2`
 * prints it). Stable across platforms and runs: ids computed from it survive export, import and
 * merge. */
std::string content_hash(const std::string &text);

/** True when \p text has content_hash's form: 32 lowercase hex digits. */
bool is_content_hash(const std::string &text);

/** The content hash of tuning database schema versions 1 and 2 (two 64-bit FNV-1a lanes), as 32
 * lowercase hex digits. Only for checking the ids of records of those versions before their ids
 * are recomputed with content_hash. */
std::string legacy_content_hash(const std::string &text);

}  // namespace fusor
