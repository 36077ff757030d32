/* The overhead benchmark's program (slurmlens-dev bench agent), against the stand-in libraries:
 *   bench cost CALLS DELAY_S   waits DELAY_S, then prints the mean ns per call of cudaLaunchKernel,
 *                              cudaMemcpyAsync and ncclAllReduce over CALLS calls each;
 *   bench rate PER_S SECONDS   calls cudaLaunchKernel PER_S times a second (batches every 10 ms). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct { unsigned int x, y, z; } dim3;
int cudaLaunchKernel(const void *, dim3, dim3, void **, size_t, void *);
int cudaMemcpyAsync(void *, const void *, size_t, int, void *);
int ncclAllReduce(const void *, void *, size_t, int, int, void *, void *);

__attribute__((noinline, used)) void bench_kernel(void) { __asm__ volatile(""); }

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc != 4) { fprintf(stderr, "usage: bench cost CALLS DELAY_S | bench rate PER_S SECONDS\n"); return 2; }
  long a = atol(argv[2]), b = atol(argv[3]);
  dim3 grid = { 1, 1, 1 };
  if (strcmp(argv[1], "cost") == 0) {
    sleep((unsigned)b);
    double t0 = now_ns();
    for (long i = 0; i < a; i++) cudaLaunchKernel((const void *)bench_kernel, grid, grid, NULL, 0, NULL);
    double t1 = now_ns();
    for (long i = 0; i < a; i++) cudaMemcpyAsync((void *)0x1000, (void *)0x2000, 4096, 1, NULL);
    double t2 = now_ns();
    for (long i = 0; i < a; i++) ncclAllReduce((void *)0x1000, (void *)0x1000, 1024, 7, 0, NULL, NULL);
    double t3 = now_ns();
    printf("cudaLaunchKernel %.1f\ncudaMemcpyAsync %.1f\nncclAllReduce %.1f\n", (t1 - t0) / a, (t2 - t1) / a, (t3 - t2) / a);
    return 0;
  }
  long batch = a / 100;
  double start = now_ns();
  for (long tick = 1; tick <= b * 100; tick++) {
    for (long i = 0; i < batch; i++) cudaLaunchKernel((const void *)bench_kernel, grid, grid, NULL, 0, NULL);
    double wait = start + tick * 1e7 - now_ns();
    if (wait > 0) { struct timespec t = { 0, (long)wait }; nanosleep(&t, NULL); }
  }
  return 0;
}
