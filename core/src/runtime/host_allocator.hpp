// The host allocator's settings for a training process.
#pragma once

namespace accel {

// Fixes glibc malloc's mmap and trim thresholds (32 MiB, 128 MiB) once per process.
//
// Why: LibTorch's CPU tensors come from malloc. glibc's default mmap threshold moves
// (it rises to the size of the largest mmapped block freed so far, up to 32 MiB), so
// whether a step's multi-megabyte temporaries come from the reused heap or from fresh
// zeroed pages of mmap, a page fault every 4 KiB, depends on the order of the first
// frees, so the same command ran at either of two speeds (measurements in
// docs/performance.md); with the thresholds fixed, every run takes the fast path. The
// cost: up to the trim threshold of freed memory stays with the process, as a caching
// allocator's would.
//
// Left alone when the user tuned malloc (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_,
// GLIBC_TUNABLES naming glibc.malloc) or set ACCEL_TUNE_MALLOC=0. No-op off glibc.
void tune_host_allocator();

}  // namespace accel
