/* Streaming bandwidth, measured independently of TVM (bench/hardware_figures.py): THREADS
 * threads, each scaling its own slice of SLICE bytes (y = 2 x, vectorised by the compiler at
 * -O3) REPS times between two barriers, timed on thread 0. Prints the best GB/s of seven runs, counting each pass
 * as STREAM does: the bytes read plus the bytes written. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long slice_floats, reps;
static float *xs[64], *ys[64];
static long threads;
static double best;
static pthread_barrier_t start, stop;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *scale(void *arg) {
  long id = (long)arg;
  float *restrict x = xs[id], *restrict y = ys[id];
  for (int run = 0; run < 8; run++) {
    pthread_barrier_wait(&start);
    double begin = now(); /* thread 0's clock: the timer runs on a working thread */
    for (long r = 0; r < reps; r++) {
      for (long i = 0; i < slice_floats; i++) y[i] = 2.0f * x[i];
      __asm__ volatile("" : : "r"(y) : "memory");
    }
    pthread_barrier_wait(&stop);
    double gbps = 2.0 * 4 * slice_floats * threads * reps / (now() - begin) / 1e9;
    if (id == 0 && run > 0 && gbps > best) best = gbps; /* the first run warms the pages */
  }
  return NULL;
}

int main(int argc, char **argv) {
  threads = atol(argv[1]);
  slice_floats = atol(argv[2]) / 4;
  reps = atol(argv[3]);
  pthread_t pool[64];
  pthread_barrier_init(&start, NULL, threads);
  pthread_barrier_init(&stop, NULL, threads);
  for (long t = 0; t < threads; t++) {
    xs[t] = aligned_alloc(64, slice_floats * 4);
    ys[t] = aligned_alloc(64, slice_floats * 4);
    for (long i = 0; i < slice_floats; i++) xs[t][i] = (float)i, ys[t][i] = 0;
  }
  for (long t = 0; t < threads; t++) pthread_create(&pool[t], NULL, scale, (void *)t);
  for (long t = 0; t < threads; t++) pthread_join(pool[t], NULL);
  printf("%.2f\n", best);
  return 0;
}
