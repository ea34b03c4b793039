// GEMM census: loaded with LD_PRELOAD into any program that calls CBLAS's
// cblas_sgemm (train, bench/kernels), it passes every call on to the real one
// and adds its wall time to a table keyed by the call's shape: transposes
// (row-major terms), M x N x K, and whether beta is 0. At exit it writes the
// table, the most time first, to $GEMM_CENSUS_OUT (else stderr):
//   op  M  N  K  beta  calls  ms  %  GFLOP/s  by
// % is the share of all the census's GEMM time; GFLOP/s = 2 M N K calls / s;
// by: openblas, or engine for the products the engine's own AVX-512 kernel
// ran (kernels/gemm/sgemm_avx512.cpp), which never call CBLAS: that kernel
// looks up gemm_census_record below and reports each product's time to it.
// The time is per calling thread: when the engine cuts a product into tiles
// (kernels/gemm/blas_gemm.cpp) each tile is a call of its own, and tiles that
// ran side by side each count their own time. A per-shape table shows what a
// per-symbol profile cannot: which products run far below the machine's
// SGEMM rate (docs/cpu_speed.md found attention's NT products this way).
// Written in C: it only forwards calls, and needs no engine header.
#define _GNU_SOURCE
#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef void (*sgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint,
                         float, const float*, blasint, const float*, blasint, float, float*, blasint);

enum { kMaxShapes = 4096 };
struct Shape {
  int order, ta, tb, m, n, k, beta0, engine;
  long calls;
  double seconds;
};
static struct Shape g_shapes[kMaxShapes];
static int g_count;
static long g_dropped;  // calls of shapes past kMaxShapes (counted, not timed per shape)
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static sgemm_fn g_real;
static FILE* g_out;  // $GEMM_CENSUS_OUT, opened at the first call, else stderr
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int by_time(const void* a, const void* b) {
  const double x = ((const struct Shape*)a)->seconds, y = ((const struct Shape*)b)->seconds;
  return x < y ? 1 : x > y ? -1 : 0;
}

static void report(void) {
  FILE* f = g_out;
  pthread_mutex_lock(&g_lock);
  qsort(g_shapes, (size_t)g_count, sizeof g_shapes[0], by_time);
  double total = 0;
  for (int i = 0; i < g_count; ++i) total += g_shapes[i].seconds;
  fprintf(f, "op M N K beta calls ms %% GFLOP/s by\n");
  for (int i = 0; i < g_count; ++i) {
    const struct Shape* s = &g_shapes[i];
    const double flops = 2.0 * s->m * (double)s->n * s->k * (double)s->calls;
    // Row-major CBLAS calls are the engine's; a column-major one is marked.
    fprintf(f, "%c%c%s %d %d %d %d %ld %.3f %.1f %.1f %s\n", s->ta == CblasTrans ? 'T' : 'N',
            s->tb == CblasTrans ? 'T' : 'N', s->order == CblasColMajor ? "(col)" : "", s->m, s->n, s->k,
            s->beta0 ? 0 : 1, s->calls, 1e3 * s->seconds, total > 0 ? 100 * s->seconds / total : 0,
            s->seconds > 0 ? flops / s->seconds / 1e9 : 0, s->engine ? "engine" : "openblas");
  }
  if (g_dropped) fprintf(f, "# %ld calls of shapes past the first %d not listed\n", g_dropped, kMaxShapes);
  pthread_mutex_unlock(&g_lock);
  if (f != stderr) fclose(f);
}

static void init(void) {
  // The output file is opened here, not at exit: a path that cannot be
  // written stops the program at its first product, with a non-zero exit.
  const char* path = getenv("GEMM_CENSUS_OUT");
  g_out = path && *path ? fopen(path, "w") : stderr;
  if (!g_out) {
    fprintf(stderr, "gemm_census: cannot write GEMM_CENSUS_OUT=%s: name a file in a writable directory\n", path);
    exit(1);
  }
  g_real = (sgemm_fn)dlsym(RTLD_NEXT, "cblas_sgemm");
  if (!g_real) {
    fprintf(stderr, "gemm_census: no cblas_sgemm after this library: is the program linked with a CBLAS?\n");
    exit(1);
  }
  atexit(report);
}

// One product's shape and time into the table (under the lock).
static void add(int order, int ta, int tb, int m, int n, int k, int beta0, int engine, double dt) {
  pthread_mutex_lock(&g_lock);
  int i = 0;
  while (i < g_count && !(g_shapes[i].order == order && g_shapes[i].ta == ta && g_shapes[i].tb == tb &&
                          g_shapes[i].m == m && g_shapes[i].n == n && g_shapes[i].k == k &&
                          g_shapes[i].beta0 == beta0 && g_shapes[i].engine == engine))
    ++i;
  if (i == g_count && g_count < kMaxShapes)
    g_shapes[g_count++] = (struct Shape){order, ta, tb, m, n, k, beta0, engine, 0, 0.0};
  if (i < g_count) {
    g_shapes[i].calls++;
    g_shapes[i].seconds += dt;
  } else {
    g_dropped++;
  }
  pthread_mutex_unlock(&g_lock);
}

void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, blasint m, blasint n,
                 blasint k, float alpha, const float* a, blasint lda, const float* b, blasint ldb, float beta, float* c,
                 blasint ldc) {
  pthread_once(&g_once, init);
  const double t0 = now();
  g_real(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  add((int)order, (int)ta, (int)tb, m, n, k, beta == 0.0f, 0, now() - t0);
}

// The engine's AVX-512 kernel's report (row-major; ta, tb: 1 = transposed).
void gemm_census_record(int ta, int tb, int m, int n, int k, int beta0, double seconds);
void gemm_census_record(int ta, int tb, int m, int n, int k, int beta0, double seconds) {
  pthread_once(&g_once, init);
  add(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, beta0, 1, seconds);
}
