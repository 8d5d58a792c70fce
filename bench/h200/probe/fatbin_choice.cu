// Which cubin the driver runs from a fatbin holding both sm_90 and sm_90a machine
// code (in either order) on a compute-capability 9.0 GPU: the kernel reports whether
// it was compiled with the sm_90a features. Loaded as the crate loads its images
// (cuModuleLoadData), so that the answer is the one dispatch gets.
//   kernel:  extern "C" __global__ void which(int* out)
//   host:    fatbin_choice FILE...
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

#ifdef KERNEL
extern "C" __global__ void which(int* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    *out = 901;
#elif defined(__CUDA_ARCH__)
    *out = __CUDA_ARCH__;
#endif
}
#else
int main(int argc, char** argv) {
    cudaFree(0);
    PFN_cuModuleLoadData_v2000 load;
    PFN_cuModuleGetFunction_v2000 get;
    PFN_cuLaunchKernel_v4000 launch;
    cudaDriverEntryPointQueryResult q;
    cudaGetDriverEntryPoint("cuModuleLoadData", (void**)&load, cudaEnableDefault, &q);
    cudaGetDriverEntryPoint("cuModuleGetFunction", (void**)&get, cudaEnableDefault, &q);
    cudaGetDriverEntryPoint("cuLaunchKernel", (void**)&launch, cudaEnableDefault, &q);
    int* out;
    cudaMalloc(&out, 4);
    for (int i = 1; i < argc; ++i) {
        std::ifstream f(argv[i], std::ios::binary);
        std::vector<char> data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        CUmodule module;
        CUfunction fn;
        int r = load(&module, data.data());
        if (r == 0) r = get(&fn, module, "which");
        int host = -1;
        if (r == 0) {
            cudaMemset(out, 0, 4);
            void* args[] = {&out};
            r = launch(fn, 1, 1, 1, 1, 1, 1, 0, 0, args, nullptr);
            cudaMemcpy(&host, out, 4, cudaMemcpyDeviceToHost);
        }
        printf("%-40s load/launch %d  ran code for %d (901 = sm_90a)\n", argv[i], r, host);
    }
}
#endif
