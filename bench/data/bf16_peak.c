/* The bf16 peak, measured independently of TVM (bench/hardware_figures.py --only bf16): THREADS
 * threads, each running either 12 independent _mm512_dpbf16_ps chains over 12 distinct rows
 * (compiled with -mavx512bf16), or, compiled with -mamx-tile -mamx-bf16, 4 accumulator tiles
 * fed by 2 A and 2 B tiles with _tile_dpbf16ps after asking Linux for the tile state. Prints
 * the best GFLOPS of five runs (bf16 multiply-adds into fp32, 2 flops each). */
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CHAINS 12
#define ITERS 20000000L
#define TILE_ITERS 2000000L

static float sink[64][CHAINS][16];

#if defined(__AMX_BF16__)
#define FLOPS_PER_THREAD (2.0 * 16 * 16 * 32 * 4 * TILE_ITERS)
static void *work(void *arg) {
  long id = (long)arg;
  static __thread uint16_t a[16][32], b[16][32];
  uint8_t cfg[64];
  memset(cfg, 0, sizeof cfg);
  cfg[0] = 1;
  for (int r = 0; r < 8; r++) cfg[16 + 2 * r] = 64, cfg[48 + r] = 16;
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 32; j++) a[i][j] = b[i][j] = 0x3f80;
  _tile_loadconfig(cfg);
  _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
  _tile_loadd(4, a, 64); _tile_loadd(5, a, 64); _tile_loadd(6, b, 64); _tile_loadd(7, b, 64);
  for (long i = 0; i < TILE_ITERS; i++) {
    _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, sink[id], 64);
  _tile_release();
  return NULL;
}
static int prepare(void) { return (int)syscall(SYS_arch_prctl, 0x1023, 18); }
#else
#define FLOPS_PER_THREAD (2.0 * 32 * CHAINS * ITERS)
static void *work(void *arg) {
  long id = (long)arg;
  __m512 acc[CHAINS];
  __m512bh x[CHAINS], y = (__m512bh)_mm512_set1_epi16(0x3a80);
  for (int c = 0; c < CHAINS; c++) {
    acc[c] = _mm512_set1_ps((float)(id * CHAINS + c));
    x[c] = (__m512bh)_mm512_set1_epi16((short)(0x3f80 + c));
  }
  for (long i = 0; i < ITERS; i++) {
#pragma GCC unroll 12
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_dpbf16_ps(acc[c], x[c], y);
  }
  for (int c = 0; c < CHAINS; c++) _mm512_storeu_ps(sink[id][c], acc[c]);
  return NULL;
}
static int prepare(void) { return 0; }
#endif

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  long threads = argc > 1 ? atol(argv[1]) : 1;
  pthread_t pool[64];
  double best = 0;
  if (prepare() != 0) {
    fprintf(stderr, "the OS refused the AMX tile state\n");
    return 2;
  }
  for (int run = 0; run < 5; run++) {
    double start = now();
    for (long t = 0; t < threads; t++) pthread_create(&pool[t], NULL, work, (void *)t);
    for (long t = 0; t < threads; t++) pthread_join(pool[t], NULL);
    double gflops = FLOPS_PER_THREAD * threads / (now() - start) / 1e9;
    if (gflops > best) best = gflops;
  }
  printf("%.1f\n", best);
  return 0;
}
