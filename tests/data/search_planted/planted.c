/* planted.c: the search benchmark's workload (tests/data/search_planted). It
 * does no work: its "time" is a fixed function of its knob values with a
 * planted two-knob interaction, times +-2% multiplicative noise drawn from a
 * fresh random seed each run, so a search over it is timed like a real one
 * (each evaluation a separate process with its own noise) at no CPU cost.
 *
 * The model (outside the EVOLVE-BLOCK, so a search cannot see or edit it):
 *   CUCO_PL_THREADS   128 / 256 / 512: x1.05 / x1 / x0.95 (monotone)
 *   CUCO_PL_DEPTH     1 / 2 / 3: x1 / x0.95 / x0.99 (best in the middle)
 *   CUCO_PL_CHUNKS    1 / 2 / 4 / 8: x1 / x0.99 / x1.005 / x1.02
 *   CUCO_PL_LOCAL_FIRST 0 / 1: x1 / x1.006
 *   and only together, LOCAL_FIRST=1 with CHUNKS 2 / 4 / 8: x0.99 / x0.88 /
 *   x0.95 (the planted interaction: LOCAL_FIRST=1 alone and CHUNKS=4 alone
 *   are each slightly worse than the default, together 11% better).
 *   CUCO_PL_TRACE is never read (a knob the program cannot reach).
 * The best cell: THREADS=512 DEPTH=2 CHUNKS=4 LOCAL_FIRST=1 (0.803 of the
 * default's time); the next best is 4% slower.
 *
 * Usage: planted [--exact | --exact-setting THREADS DEPTH CHUNKS LOCAL_FIRST]
 *   (no noise, for scoring a search: this program's setting, or the one given)
 * Prints "Verification: PASS" and "CUCO_RESULT {"time_ms":..,"iters":1}". */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// EVOLVE-BLOCK-START
#define CUCO_PL_THREADS 256   // cuco:knob 128 256 512
#define CUCO_PL_DEPTH 1       // cuco:knob 1 2 3
#define CUCO_PL_CHUNKS 1      // cuco:knob 1 2 4 8
#define CUCO_PL_LOCAL_FIRST 0 // cuco:knob 0 1
#define CUCO_PL_TRACE 0       // cuco:knob 0 1

/* The program's setting, as the frozen model below reads it. */
static void cuco_pl_setting(int *threads, int *depth, int *chunks, int *local_first)
{
    *threads = CUCO_PL_THREADS;
    *depth = CUCO_PL_DEPTH;
    *chunks = CUCO_PL_CHUNKS;
    *local_first = CUCO_PL_LOCAL_FIRST;
}
// EVOLVE-BLOCK-END

static double level(int v, const int *values, const double *factors, int n)
{
    for (int i = 0; i < n; i++)
        if (values[i] == v)
            return factors[i];
    return 2.0; /* a value outside the knob's list: much slower */
}

static double model_time_ms(int threads, int depth, int chunks, int local_first)
{
    static const int tv[] = {128, 256, 512}, dv[] = {1, 2, 3}, cv[] = {1, 2, 4, 8};
    static const double tf[] = {1.05, 1.0, 0.95}, df[] = {1.0, 0.95, 0.99},
                        cf[] = {1.0, 0.99, 1.005, 1.02}, lf_cf[] = {1.0, 0.99, 0.88, 0.95};
    double t =
        10.0 * level(threads, tv, tf, 3) * level(depth, dv, df, 3) * level(chunks, cv, cf, 4);
    if (local_first)
        t *= 1.006 * level(chunks, cv, lf_cf, 4);
    return t;
}

/* Uniform in [0, 1) from a seed that differs between processes. */
static double noise_uniform(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t z = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 12);
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

/* The setting given as the four arguments after --exact-setting (for
 * scoring a search against every cell without rebuilding); 0 when absent. */
static int setting_of_args(int argc, char **argv, int *v)
{
    if (argc != 6 || strcmp(argv[1], "--exact-setting"))
        return 0;
    for (int i = 0; i < 4; i++) {
        char *end;
        long x = strtol(argv[i + 2], &end, 10);
        if (*end || end == argv[i + 2])
            return 0;
        v[i] = (int)x;
    }
    return 1;
}

int main(int argc, char **argv)
{
    int exact = argc > 1 && !strcmp(argv[1], "--exact"), v[4];
    cuco_pl_setting(&v[0], &v[1], &v[2], &v[3]);
    if (setting_of_args(argc, argv, v))
        exact = 1;
    double t = model_time_ms(v[0], v[1], v[2], v[3]);
    if (!exact)
        t *= 1.0 + 0.02 * (2.0 * noise_uniform() - 1.0);
    printf("Verification: PASS\n");
    printf("CUCO_RESULT {\"time_ms\":%.6f,\"iters\":1}\n", t);
    return 0;
}
