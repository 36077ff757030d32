/* A stand-in for libcudart.so (there is no GPU on the test machines): the CUDA runtime's real symbol
 * names and signatures, doing nothing but taking a little time where the real calls block. The agent's
 * uprobes attach to these as they would to NVIDIA's library. */
#include <stddef.h>
#include <time.h>

typedef int cudaError_t;
typedef struct { unsigned int x, y, z; } dim3;
typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice, cudaMemcpyDefault };

static void wait_us(long us) {
  struct timespec t = { 0, us * 1000 };
  nanosleep(&t, NULL);
}

cudaError_t cudaSetDevice(int device) { return device < 0 ? 101 : 0; }
cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shmem, cudaStream_t stream) {
  (void)func; (void)grid; (void)block; (void)args; (void)shmem; (void)stream;
  return 0;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
  (void)dst; (void)src; (void)count; (void)kind;
  wait_us(100);
  return 0;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream) {
  (void)dst; (void)src; (void)count; (void)kind; (void)stream;
  return 0;
}
cudaError_t cudaDeviceSynchronize(void) { wait_us(1000); return 0; }
cudaError_t cudaStreamSynchronize(cudaStream_t stream) { (void)stream; wait_us(200); return 0; }
cudaError_t cudaEventSynchronize(cudaEvent_t event) { (void)event; wait_us(200); return 0; }
