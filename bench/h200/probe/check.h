// CHECK(call): a CUDA runtime call that must succeed, or the probe exits with the
// call, the file and line and the error's name. Shared by the probes here.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                              \
    do {                                                                                      \
        cudaError_t e = (x);                                                                  \
        if (e != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
            exit(2);                                                                          \
        }                                                                                     \
    } while (0)
