// fake_timeline.cu: a stand-in for a GPU program where there is no GPU (CI).
// It never touches the GPU. When $CUCO_TIMELINE_DIR is set (as 'cuco bound'
// sets it for the run with the timeline library) it writes the file that
// library would write: three full steps, three computation-only and three
// communication-only steps, each inside a 'timed' interval as a workload
// times them, plus an untimed set-up kernel. It prints its own CUCO_RESULT
// breakdown and a PASS decided by a real comparison, but its all-reduce
// never runs, so the program still passes with the all-reduce removed: the
// dynamic audit's finding. Rank r's computation takes (10 - r) ms per step,
// communication 3 ms, so rank 0 is the critical rank and the ceiling is 1.3.
#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

static void kernel(FILE *f, const char *name, unsigned long long start, unsigned long long dur,
                   unsigned *corr)
{
    fprintf(f,
            "{\"type\":\"kernel\",\"name\":\"%s\",\"start\":%llu,\"end\":%llu,\"device\":%d,"
            "\"stream\":7,\"correlation\":%u,\"grid\":[1,1,1],\"block\":[1,1,1]}\n",
            name, start, start + dur, 0, (*corr)++);
}

static void write_timeline(const char *dir, int rank)
{
    std::string path = std::string(dir) + "/timeline." + std::to_string((long)getpid()) + ".jsonl";
    FILE *f = fopen(path.c_str(), "w");
    if (!f)
        return;
    const unsigned long long ms = 1000000ull, compute = (10 - rank) * ms, comm = 3 * ms;
    unsigned corr = 1;
    unsigned long long t = 0;
    fprintf(f, "{\"type\":\"process\",\"pid\":%ld,\"rank\":%d,\"local_rank\":%d,\"hostname\":\"ci\"}\n",
            (long)getpid(), rank, rank);
    kernel(f, "setup_fill", t, 40 * ms, &corr);
    t += 50 * ms;
    for (int phase = 0; phase < 3; phase++)
        for (int it = 0; it < 3; it++) {
            unsigned lo = corr++;
            unsigned long long s = t;
            if (phase != 2) {
                kernel(f, "gemm_tile", t, compute, &corr);
                t += compute;
            }
            if (phase != 1) {
                kernel(f, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", t, comm, &corr);
                t += comm;
            }
            unsigned hi = corr++;
            fprintf(f,
                    "{\"type\":\"timed\",\"start_correlation\":%u,\"end_correlation\":%u,"
                    "\"ms\":%.3f,\"device\":0}\n",
                    lo, hi, (double)(t - s) / ms);
            t += 5 * ms;
        }
    fprintf(f, "{\"type\":\"summary\",\"records\":%u,\"dropped\":0,\"timed\":9}\n", corr);
    fclose(f);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    float sum[4] = {1, 2, 3, 4};
    if (argc < 0) // never: the communication this program claims but does not do
        ncclAllReduce(sum, sum, 4, ncclFloat, ncclSum, nullptr, nullptr);
    const char *dir = getenv("CUCO_TIMELINE_DIR");
    if (dir && *dir)
        write_timeline(dir, rank);
    float total = sum[0] + sum[1] + sum[2] + sum[3], expect = 0;
    for (int i = 0; i < 4; i++)
        expect += (float)(i + 1);
    if (rank == 0) {
        printf("Verification: %s\n", total == expect ? "PASS" : "FAIL");
        printf("CUCO_RESULT {\"time_ms\":13.0,\"iters\":3,\"compute_ms\":10.0,\"comm_ms\":3.0}\n");
    }
    MPI_Finalize();
    return 0;
}
