/* The fp32 FMA peak, measured independently of TVM (bench/hardware_figures.py): THREADS
 * threads, each running 12 independent vector FMA chains that start from distinct values (so
 * no compiler merges them), AVX-512 wide when compiled with -mavx512f, else AVX2. Prints the
 * best GFLOPS of five runs. */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__AVX512F__)
#define LANES 16
typedef __m512 vec;
#define SET1 _mm512_set1_ps
#define FMA _mm512_fmadd_ps
#define STORE _mm512_storeu_ps
#else
#define LANES 8
typedef __m256 vec;
#define SET1 _mm256_set1_ps
#define FMA _mm256_fmadd_ps
#define STORE _mm256_storeu_ps
#endif
#define CHAINS 12
#define ITERS 20000000L

static float sink[64][CHAINS][LANES];

static void *chains(void *arg) {
  long id = (long)arg;
  vec acc[CHAINS], x = SET1(0.9999999f), y = SET1(1e-7f);
  for (int c = 0; c < CHAINS; c++) acc[c] = SET1((float)(id * CHAINS + c));
  for (long i = 0; i < ITERS; i++) {
#pragma GCC unroll 12
    for (int c = 0; c < CHAINS; c++) acc[c] = FMA(acc[c], x, y);
  }
  for (int c = 0; c < CHAINS; c++) STORE(sink[id][c], acc[c]);
  return NULL;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  long threads = argc > 1 ? atol(argv[1]) : 1;
  pthread_t pool[64];
  double best = 0;
  for (int run = 0; run < 5; run++) {
    double start = now();
    for (long t = 0; t < threads; t++) pthread_create(&pool[t], NULL, chains, (void *)t);
    for (long t = 0; t < threads; t++) pthread_join(pool[t], NULL);
    double gflops = 2.0 * LANES * CHAINS * ITERS * threads / (now() - start) / 1e9;
    if (gflops > best) best = gflops;
  }
  printf("%.1f\n", best);
  return 0;
}
