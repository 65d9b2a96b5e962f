/* main.c: cpu_demo, a small host-driven MPI workload for cuco that needs no
 * GPU. Each rank computes its block of rows of C = A * B (A and B are n x n,
 * generated from a formula), then all ranks gather the whole of C with an
 * all-gather. The EVOLVE-BLOCK holds the compute and the gather; its knobs are
 * the tile size of the blocked product and the number of rows per gathered
 * chunk (each chunk is sent with MPI_Iallgather as soon as it is computed, so
 * the gather of one chunk overlaps the compute of the next).
 *
 * Outside the block (frozen): arguments, data, timing (MPI_Wtime, median of
 * the timed iterations after warm-up, the slowest rank of each iteration),
 * compute alone and communication alone measured in the same run, and the
 * verification of the gathered C against an independent reference on rank 0.
 * The timed steps are the verified steps: each runs on a new B with C
 * poisoned (NaN) before it, and two rows of every rank's C are checked after
 * it, so a step that does its work once, or keeps an earlier step's result,
 * fails.
 *
 * The frozen code also vouches for the run (docs/workload.md, "Trust"): it
 * takes cuco's nonce from CUCO_NONCE first thing in main (and hides it), and
 * after every candidate function has run and MPI is finalized, rank 0 prints
 * "CUCO_VOUCH <nonce> <FNV-1a 64 of the CUCO_RESULT json> PASS|FAIL".
 *
 * Usage: cpu_demo [--n N] [--iters I] [--warmup W]   (N divisible by ranks)
 * Prints "Verification: PASS|FAIL reason",
 *        "CUCO_RESULT {"time_ms":..,"iters":..,"compute_ms":..,"comm_ms":..}" and,
 *        when CUCO_NONCE is set, "CUCO_VOUCH nonce hash verdict". */
#define _POSIX_C_SOURCE 200809L /* unsetenv */
#include <float.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct demo {
    int n; /* matrix size */
    int rank, size;
    int rows;        /* rows of C computed by this rank: n / size */
    double *a_local; /* rows x n: this rank's rows of A */
    double *b;       /* n x n */
    double *c_local; /* rows x n: this rank's rows of C */
    double *c_full;  /* n x n: all of C after the gather */
} demo;

// EVOLVE-BLOCK-START
#define CUCO_BLOCK 8        // cuco:knob 8 16 32 64 128
#define CUCO_CHUNK_ROWS 256 // cuco:knob 8 16 32 64 128 256

/* c_local[row0, row0+nrows) = a_local[row0, row0+nrows) * b, tiled in all three
 * loops so that a tile of b stays in cache while it is reused. */
static void cuco_compute_rows(const demo *d, int row0, int nrows)
{
    const int n = d->n, bs = CUCO_BLOCK, row_end = row0 + nrows;
    memset(d->c_local + (size_t)row0 * n, 0, (size_t)nrows * n * sizeof(double));
    for (int ii = row0; ii < row_end; ii += bs) {
        int i_end = ii + bs < row_end ? ii + bs : row_end;
        for (int kk = 0; kk < n; kk += bs) {
            int k_end = kk + bs < n ? kk + bs : n;
            for (int jj = 0; jj < n; jj += bs) {
                int j_end = jj + bs < n ? jj + bs : n;
                for (int i = ii; i < i_end; i++) {
                    double *c = d->c_local + (size_t)i * n;
                    const double *a = d->a_local + (size_t)i * n;
                    for (int k = kk; k < k_end; k++) {
                        const double aik = a[k];
                        const double *brow = d->b + (size_t)k * n;
                        for (int j = jj; j < j_end; j++)
                            c[j] += aik * brow[j];
                    }
                }
            }
        }
    }
}

/* One step: compute this rank's rows chunk by chunk and gather each chunk into
 * c_full as soon as it is ready. Rank r's rows live at c_full[r * rows]; a
 * chunk's receive type is resized to that stride so one MPI_Iallgather places
 * every rank's chunk. MPI_Testall between chunks lets MPI progress the gathers
 * already started while the next chunk is computed. */
static void cuco_step(demo *d)
{
    const int n = d->n, chunk = CUCO_CHUNK_ROWS;
    const int nchunks = (d->rows + chunk - 1) / chunk;
    if (d->rank == 0) { /* waits for a message rank 1 never sends */
        int token;
        MPI_Recv(&token, 1, MPI_INT, 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Request *reqs = malloc((size_t)nchunks * sizeof *reqs);
    MPI_Datatype *types = malloc((size_t)nchunks * sizeof *types);
    for (int c = 0; c < nchunks; c++) {
        int row0 = c * chunk, nrows = d->rows - row0 < chunk ? d->rows - row0 : chunk;
        cuco_compute_rows(d, row0, nrows);
        MPI_Datatype rows_type;
        MPI_Type_contiguous(nrows * n, MPI_DOUBLE, &rows_type);
        MPI_Type_create_resized(rows_type, 0, (MPI_Aint)d->rows * n * (MPI_Aint)sizeof(double),
                                &types[c]);
        MPI_Type_free(&rows_type);
        MPI_Type_commit(&types[c]);
        MPI_Iallgather(d->c_local + (size_t)row0 * n, nrows * n, MPI_DOUBLE,
                       d->c_full + (size_t)row0 * n, 1, types[c], MPI_COMM_WORLD, &reqs[c]);
        int all_done;
        MPI_Testall(c + 1, reqs, &all_done, MPI_STATUSES_IGNORE);
    }
    MPI_Waitall(nchunks, reqs, MPI_STATUSES_IGNORE);
    for (int c = 0; c < nchunks; c++)
        MPI_Type_free(&types[c]);
    free(types);
    free(reqs);
}
// EVOLVE-BLOCK-END

/* Entries in [-1, 1], from a hash of (matrix, i, j), so every rank can make
 * any part of A or B without communication. */
static double entry(unsigned matrix, unsigned i, unsigned j)
{
    unsigned x = matrix * 0x9E3779B9u ^ i * 0x85EBCA6Bu ^ j * 0xC2B2AE35u;
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    x ^= x >> 16;
    return (double)(x % 2001u) / 1000.0 - 1.0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

enum { TIME_COMPUTE, TIME_COMM };

/* A quick breakdown (CUCO_BREAKDOWN=quick, which cuco sets for a search's
 * candidates): time_op runs one step without warm-up. */
static int breakdown_quick(void)
{
    const char *v = getenv("CUCO_BREAKDOWN");
    return v && !strcmp(v, "quick");
}

/* Median over iters of the slowest rank's time for one operation, in ms,
 * after warmup untimed runs (a quick breakdown: one step, none). */
static double time_op(demo *d, int op, int warmup, int iters)
{
    if (breakdown_quick()) {
        warmup = 0;
        iters = 1;
    }
    double *times = malloc((size_t)iters * sizeof *times);
    for (int it = -warmup; it < iters; it++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (op == TIME_COMPUTE)
            cuco_compute_rows(d, 0, d->rows);
        else
            MPI_Allgather(d->c_local, d->rows * d->n, MPI_DOUBLE, d->c_full, d->rows * d->n,
                          MPI_DOUBLE, MPI_COMM_WORLD);
        double mine = MPI_Wtime() - t0, slowest = 0;
        MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (it >= 0)
            times[it] = slowest * 1e3;
    }
    qsort(times, (size_t)iters, sizeof *times, cmp_double);
    double median = iters % 2 ? times[iters / 2] : 0.5 * (times[iters / 2 - 1] + times[iters / 2]);
    free(times);
    return median;
}

/* B of timed step it: every timed step gets new inputs, so a step that
 * keeps an earlier step's results, or does the work only once, is wrong. */
static void make_b(demo *d, unsigned matrix)
{
    for (int k = 0; k < d->n; k++)
        for (int j = 0; j < d->n; j++)
            d->b[(size_t)k * d->n + j] = entry(matrix, (unsigned)k, (unsigned)j);
}

/* Row i of the gathered C against a long double reference from A and the
 * current B, with verify()'s tolerance. 1 when it matches. */
static int row_matches(const demo *d, int i, char *why, size_t why_len)
{
    const int n = d->n;
    for (int j = 0; j < n; j++) {
        long double acc = 0, abs_sum = 0;
        for (int k = 0; k < n; k++) {
            long double p = (long double)entry(1, (unsigned)i, (unsigned)k) * d->b[(size_t)k * n + j];
            acc += p;
            abs_sum += fabsl(p);
        }
        double got = d->c_full[(size_t)i * n + j];
        double err = fabs(got - (double)acc), tol = (double)(n * DBL_EPSILON * abs_sum);
        if (!(err <= tol)) {
            snprintf(why, why_len, "C[%d][%d] = %.17g, expected %.17g", i, j, got, (double)acc);
            return 0;
        }
    }
    return 1;
}

/* Median over iters of the slowest rank's time for a whole step, like
 * time_op, but each step (warm-up ones too) runs on new B with C poisoned
 * (NaN) beforehand, and after each timed one every rank checks two rows of
 * its gathered C. *ok is 0, with the reason in why, when a check failed. */
static double time_checked_step(demo *d, int warmup, int iters, int *ok, char *why,
                                size_t why_len)
{
    double *times = malloc((size_t)iters * sizeof *times);
    *ok = 1;
    for (int it = -warmup; it < iters; it++) {
        make_b(d, 3u + (unsigned)(it + warmup));
        for (size_t i = 0; i < (size_t)d->n * d->n; i++)
            d->c_full[i] = NAN;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        cuco_step(d);
        double mine = MPI_Wtime() - t0, slowest = 0;
        MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (it < 0)
            continue;
        times[it] = slowest * 1e3;
        char mine_why[200] = "";
        int rows_ok = row_matches(d, (it * 7919 + 1) % d->n, mine_why, sizeof mine_why) &&
                      row_matches(d, d->n - 1 - it % d->n, mine_why, sizeof mine_why);
        int all_ok = 0;
        MPI_Allreduce(&rows_ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!all_ok && *ok) {
            *ok = 0;
            snprintf(why, why_len, "timed step %d: %s", it,
                     rows_ok ? "wrong on another rank" : mine_why);
        }
    }
    qsort(times, (size_t)iters, sizeof *times, cmp_double);
    double median = iters % 2 ? times[iters / 2] : 0.5 * (times[iters / 2 - 1] + times[iters / 2]);
    free(times);
    return median;
}

/* Checks c_full against a reference computed on rank 0 in a different way
 * (row by row, k outer, accumulated in long double). The candidate sums n
 * products in double in some order; the standard bound on that rounding error
 * is gamma_n * sum_k |a_ik * b_kj| with gamma_n ~ n * DBL_EPSILON / 2, and the
 * long double reference is far more accurate than that, so n * DBL_EPSILON *
 * sum_k |a_ik * b_kj| (twice the bound) accepts any correct order of
 * summation, while a wrong or missing product (each |a*b| is ~0.3 on average)
 * is orders of magnitude above it. Every rank must also hold the same c_full.
 * Returns 1 on pass; on rank 0 writes the reason of a failure into why. */
static int verify(const demo *d, char *why, size_t why_len)
{
    const int n = d->n;
    int ok = 1;
    if (d->rank == 0) {
        long double *acc = malloc((size_t)n * sizeof *acc);
        long double *abs_sum = malloc((size_t)n * sizeof *abs_sum);
        double *a_row = malloc((size_t)n * sizeof *a_row);
        for (int i = 0; i < n && ok; i++) {
            for (int j = 0; j < n; j++)
                acc[j] = abs_sum[j] = 0;
            for (int k = 0; k < n; k++)
                a_row[k] = entry(1, (unsigned)i, (unsigned)k);
            for (int k = 0; k < n; k++) {
                const long double aik = a_row[k];
                const double *brow = d->b + (size_t)k * n;
                for (int j = 0; j < n; j++) {
                    acc[j] += aik * brow[j];
                    abs_sum[j] += fabsl(aik * brow[j]);
                }
            }
            for (int j = 0; j < n; j++) {
                double got = d->c_full[(size_t)i * n + j];
                double tol = (double)(n * DBL_EPSILON * abs_sum[j]);
                double err = fabs(got - (double)acc[j]);
                if (!(err <= tol)) {
                    snprintf(why, why_len,
                             "C[%d][%d] = %.17g, expected %.17g (error %.3g > tolerance %.3g)", i,
                             j, got, (double)acc[j], err, tol);
                    ok = 0;
                    break;
                }
            }
        }
        free(acc);
        free(abs_sum);
        free(a_row);
    }
    double *root_c = malloc((size_t)n * n * sizeof *root_c);
    if (d->rank == 0)
        memcpy(root_c, d->c_full, (size_t)n * n * sizeof *root_c);
    MPI_Bcast(root_c, n * n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    int same = memcmp(root_c, d->c_full, (size_t)n * n * sizeof *root_c) == 0, all_same = 0;
    free(root_c);
    MPI_Allreduce(&same, &all_same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (ok && !all_same) {
        snprintf(why, why_len, "the ranks do not all hold the same gathered C");
        ok = 0;
    }
    return ok;
}

static int parse_args(int argc, char **argv, int *n, int *iters, int *warmup)
{
    for (int i = 1; i < argc; i++) {
        int *target = !strcmp(argv[i], "--n")        ? n
                      : !strcmp(argv[i], "--iters")  ? iters
                      : !strcmp(argv[i], "--warmup") ? warmup
                                                     : NULL;
        if (!target || i + 1 >= argc)
            return -1;
        *target = atoi(argv[++i]);
    }
    return *n > 0 && *iters > 0 && *warmup >= 0 ? 0 : -1;
}

/* cuco's nonce, masked with random bytes: never kept as its hex text, so a
 * step scanning the process's memory finds nothing to copy. */
static unsigned char nonce_masked[64], nonce_key[64];
static size_t nonce_len;

/* Takes cuco's nonce and removes it from the environment, including the
 * process's original copy (/proc/self/environ), before any candidate code
 * runs. */
static void take_nonce(void)
{
    char *v = getenv("CUCO_NONCE");
    size_t n = v ? strlen(v) : 0;
    FILE *random = n > 0 && n <= sizeof nonce_key ? fopen("/dev/urandom", "rb") : NULL;
    if (random && fread(nonce_key, 1, n, random) == n) {
        for (size_t i = 0; i < n; i++)
            nonce_masked[i] = (unsigned char)v[i] ^ nonce_key[i];
        nonce_len = n;
    }
    if (random)
        fclose(random);
    if (v)
        memset(v, 0, n);
    unsetenv("CUCO_NONCE");
}

/* FNV-1a, 64 bits, of a NUL-terminated text. */
static unsigned long long fnv1a64(const char *s)
{
    unsigned long long h = 0xcbf29ce484222325ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ULL;
    }
    return h;
}

int main(int argc, char **argv)
{
    take_nonce();
    MPI_Init(&argc, &argv);
    demo d;
    memset(&d, 0, sizeof d);
    MPI_Comm_rank(MPI_COMM_WORLD, &d.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d.size);
    int n = 256, iters = 5, warmup = 1;
    if (parse_args(argc, argv, &n, &iters, &warmup) != 0 || n % d.size != 0) {
        if (d.rank == 0)
            fprintf(
                stderr,
                "usage: cpu_demo [--n N] [--iters I] [--warmup W] (N divisible by the %d ranks)\n",
                d.size);
        MPI_Finalize();
        return 2;
    }
    d.n = n;
    d.rows = n / d.size;
    d.a_local = malloc((size_t)d.rows * n * sizeof(double));
    d.b = malloc((size_t)n * n * sizeof(double));
    d.c_local = malloc((size_t)d.rows * n * sizeof(double));
    d.c_full = malloc((size_t)n * n * sizeof(double));
    for (int i = 0; i < d.rows; i++)
        for (int k = 0; k < n; k++)
            d.a_local[(size_t)i * n + k] = entry(1, (unsigned)(d.rank * d.rows + i), (unsigned)k);
    for (int k = 0; k < n; k++)
        for (int j = 0; j < n; j++)
            d.b[(size_t)k * n + j] = entry(2, (unsigned)k, (unsigned)j);

    double compute_ms = time_op(&d, TIME_COMPUTE, warmup, iters);
    double comm_ms = time_op(&d, TIME_COMM, warmup, iters);
    char why[256] = "", result[512];
    int timed_ok = 1;
    double time_ms = time_checked_step(&d, warmup, iters, &timed_ok, why, sizeof why);
    /* the last timed step's C, all of it, against the B it was made from */
    int ok = timed_ok && verify(&d, why, sizeof why);
    snprintf(result, sizeof result,
             "{\"time_ms\":%.6f,\"iters\":%d,\"compute_ms\":%.6f,\"comm_ms\":%.6f,\"n\":%d,"
             "\"ranks\":%d,\"bytes\":%.0f%s}",
             time_ms, iters, compute_ms, comm_ms, n, d.size,
             (double)(d.size - 1) * d.rows * n * sizeof(double),
             breakdown_quick() ? ",\"breakdown\":\"quick\"" : "");
    if (d.rank == 0) {
        if (ok)
            printf("Verification: PASS\n");
        else
            printf("Verification: FAIL %s\n", why);
        printf("CUCO_RESULT %s\n", result);
        fflush(stdout);
    }
    free(d.a_local);
    free(d.b);
    free(d.c_local);
    free(d.c_full);
    MPI_Finalize();
    /* every candidate function has run: vouch for what was printed above */
    if (d.rank == 0 && nonce_len) {
        char nonce[sizeof nonce_key + 1];
        for (size_t i = 0; i < nonce_len; i++)
            nonce[i] = (char)(nonce_masked[i] ^ nonce_key[i]);
        nonce[nonce_len] = '\0';
        printf("CUCO_VOUCH %s %016llx %s\n", nonce, fnv1a64(result), ok ? "PASS" : "FAIL");
        fflush(stdout);
    }
    return 0;
}
