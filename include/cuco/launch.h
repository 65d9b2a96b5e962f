/* launch.h: launchers run one program for N ranks, with a timeout and an
 * environment, and say how it ended, separating the program's failures from
 * failures of the machinery underneath (a node that died, a preempted job).
 *
 *   local  mpirun on this host. Runs take "slots": with G GPUs and R ranks per
 *          run, G/R runs go at once on disjoint GPUs (CUDA_VISIBLE_DEVICES per
 *          slot, a TMPDIR per slot so concurrent mpiruns keep their session
 *          folders apart); for CPU workloads slots = cores / R. A run marked
 *          exclusive (a benchmark) waits until no other run is active and keeps
 *          the others waiting while it runs, so its timing is undisturbed.
 *   slurm  one sbatch job per run (a generated batch script that starts the
 *          program through mpirun or srun inside the allocation), polled with
 *          squeue (sacct once the job has left the controller's memory) at an
 *          interval that grows, scancel'd on timeout. NODE_FAIL, PREEMPTED,
 *          BOOT_FAIL, a job that ends without the program's exit status, or the
 *          job's node going down while it runs count as infrastructure failures
 *          and the run is submitted again, up to `retries` times.
 *
 * A launcher is shared by the threads that evaluate candidates in parallel:
 * cuco_launcher_run() may be called from several threads at once.
 */
#ifndef CUCO_LAUNCH_H
#define CUCO_LAUNCH_H

#include "cuco/confine.h"
#include "cuco/err.h"
#include "cuco/proc.h"

typedef struct cuco_launcher cuco_launcher; /* opaque */

typedef struct cuco_launch_job {
    const char *const *argv;         /* the program and its arguments, NULL-terminated */
    int ranks;                       /* processes to start (>= 1) */
    int mpi;                         /* 1: start through mpirun/srun; 0: run argv once, directly */
    const char *const *mpi_args;     /* extra mpirun flags (NULL-terminated) or NULL */
    const char *cwd;                 /* folder of the run; slurm: it must be on a file
                                        system the compute nodes share, the job's
                                        script and output files go there */
    const char *const *env_set;      /* extra "NAME=VALUE" (NULL-terminated) or NULL */
    double timeout_s;                /* of the run itself (queue time not counted); <= 0: none */
    int gpu;                         /* 1: each rank needs a GPU */
    int exclusive;                   /* 1: wants the host to itself (a benchmark) */
    const char *name;                /* a short label for job names and messages, or NULL */
    unsigned long long output_limit; /* local: > 0 stops a run that writes more than this
                                        (cuco_proc_opts.output_limit); slurm: ignored (its
                                        output files are capped by the file-size rlimit) */
    void (*progress)(void *ctx, const char *line); /* optional: retries, job ids */
    void *progress_ctx;
    const struct cuco_confine *confine; /* NULL or not enabled: unconfined. local: the
                                           whole mpirun runs confined (cuco/confine.h);
                                           slurm: the batch script runs it through
                                           `cuco confine-exec` (docs/launch.md) */
} cuco_launch_job;

typedef struct cuco_launch_result {
    cuco_proc_result proc; /* how the program ended and what it printed; for slurm,
                              exited/exit_code come from the batch script, out/err
                              from the job's output files */
    int infra_failure;     /* 1: the launcher or the node failed on the last attempt;
                              the program's own outcome is unknown */
    char *infra_reason;    /* owned: why (the last infrastructure failure), or NULL */
    int attempts;          /* runs started (more than 1 after infrastructure retries) */
    int infra_failures;    /* infrastructure failures seen, retried ones included */
    char *job_id;          /* slurm: the last attempt's job id (owned); local: NULL */
} cuco_launch_result;

typedef struct cuco_local_opts {
    int gpu;                  /* runs need GPUs (the workload's `gpu`) */
    int ranks;                /* ranks per run, to size the slots; 0: 1 */
    int gpus;                 /* GPUs on this host; < 0: detect with nvidia-smi (0 if none) */
    int cores;                /* CPU cores; <= 0: detect */
    int slots;                /* runs at once; 0: auto (gpus / ranks, or cores / ranks) */
    int shared_bench;         /* 0 (default, exclusive_bench: true): a job marked exclusive
                                 has the host to itself; 1: it takes one slot like any run */
    int verify_share;         /* GPU runs: each GPU set serves this many runs that are not
                                 exclusive (verifications, small) at once; <= 1: one.
                                 Exclusive runs (benchmarks) still hold every slot. */
    const char *tmp_root;     /* parent of the per-slot TMPDIRs; NULL: $TMPDIR or /tmp */
    const char *visible_gpus; /* the GPUs runs may use, as a CUDA_VISIBLE_DEVICES list
                                 ("2,3", or UUIDs); NULL: $CUDA_VISIBLE_DEVICES when
                                 it is set (a Slurm allocation, a user's choice), else
                                 GPUs 0..gpus-1. Slots hand out disjoint parts of it;
                                 `gpus` >= 0 takes only its first `gpus` entries. */
} cuco_local_opts;

typedef struct cuco_slurm_opts {
    const char *partition;          /* NULL: the cluster's default */
    const char *const *sbatch_args; /* extra sbatch flags (NULL-terminated) or NULL */
    int retries;                    /* resubmissions after infrastructure failures; < 0: 2 */
    double poll_s;                  /* first poll interval; <= 0: 1 s */
    double poll_max_s;              /* the interval grows x1.5 up to this; <= 0: 15 s */
    int use_srun;                   /* 1: start ranks with srun (needs Slurm's MPI
                                       plugin to match the MPI); 0: mpirun inside
                                       the allocation */
    double grace_s;                 /* extra --time beyond the run's timeout; <= 0: 60 s */
    const char *gres;               /* GPU jobs ask for --gres=GRES:R; NULL: "gpu" (a
                                       typed one such as "gpu:h100" where the site
                                       wants it) */
} cuco_slurm_opts;

/* Local launcher. Returns 0 and *out (free with cuco_launcher_free), or
 * CUCO_EINVAL for impossible settings (a GPU workload with more ranks than
 * GPUs is allowed: it gets one slot holding all GPUs). */
int cuco_launcher_local_new(const cuco_local_opts *o, cuco_launcher **out, cuco_err *e);
/* Slurm launcher. Fails with CUCO_ENOTFOUND when sbatch, squeue or scancel
 * is not in PATH. */
int cuco_launcher_slurm_new(const cuco_slurm_opts *o, cuco_launcher **out, cuco_err *e);
void cuco_launcher_free(cuco_launcher *l);

/* "local" or "slurm". */
const char *cuco_launcher_name(const cuco_launcher *l);
/* How many runs the launcher lets go at once (local: its slots; slurm: as
 * many as the caller likes, reported as 0). */
int cuco_launcher_slots(const cuco_launcher *l);

/* Runs a job to completion. Returns 0 when the launcher did its job, whatever
 * the program did (r->infra_failure tells whether the last attempt was lost
 * to the infrastructure); negative when the run could not be started at all
 * (mpirun or sbatch missing, a script that cannot be written), with e set and
 * r holding nothing. On 0 free r with cuco_launch_result_free(). */
int cuco_launcher_run(const cuco_launcher *l, const cuco_launch_job *job, cuco_launch_result *r,
                      cuco_err *e);
void cuco_launch_result_free(cuco_launch_result *r);

/* Runs a job on this host now, without slots: mpirun -np R --bind-to none
 * --oversubscribe (--allow-run-as-root as root) MPI_ARGS ARGV for MPI jobs,
 * ARGV itself otherwise; slot_env ("NAME=VALUE", NULL-terminated, or NULL)
 * is applied after job->env_set. What the local launcher does inside a slot,
 * and what cuco_launcher_run() does with a NULL launcher. Same returns. */
int cuco_launch_local_once(const cuco_launch_job *job, const char *const *slot_env,
                           cuco_launch_result *r, cuco_err *e);
/* The CUDA_VISIBLE_DEVICES value of a local launcher's slot, or NULL (CPU
 * runs, not a local launcher, no such slot). The string stays the launcher's. */
const char *cuco_launcher_slot_gpus(const cuco_launcher *l, int slot);

/* GPUs on this host by `nvidia-smi -L` (0 when there is none or it fails). */
int cuco_launch_detect_gpus(void);
/* GPUs this process may use: cuco_launch_detect_gpus(), narrowed to the
 * entries of CUDA_VISIBLE_DEVICES when it is set (an empty value: none). */
int cuco_launch_visible_gpus(void);
/* Online CPU cores (at least 1). */
int cuco_launch_detect_cores(void);
/* Slots for runs of `ranks` ranks: gpus / ranks for GPU runs, cores / ranks
 * otherwise, at least 1. */
int cuco_launch_auto_slots(int gpu, int ranks, int gpus, int cores);

/* Builds a launcher from CLI-style settings: kind "local" (or NULL) or
 * "slurm"; slots 0 = auto; gpus < 0 = detect; shared_bench and
 * verify_share as in cuco_local_opts (Slurm jobs share no GPU). Slurm site settings come from the
 * environment: CUCO_SLURM_PARTITION, CUCO_SLURM_GRES, CUCO_SLURM_TIME_GRACE_S,
 * CUCO_SLURM_SBATCH_ARGS (extra sbatch flags, split at blanks),
 * CUCO_SLURM_RETRIES, CUCO_SLURM_POLL_MAX_S (docs/launch.md). For `cuco
 * evolve` and `cuco eval`. Fails with CUCO_EINVAL naming an unknown kind or
 * a malformed setting. */
int cuco_launcher_from_kind(const char *kind, int gpu, int ranks, int slots, int gpus,
                            int shared_bench, int verify_share, cuco_launcher **out, cuco_err *e);

/* Quotes one word for a POSIX shell script ('...' with embedded quotes
 * escaped). Caller frees. Used for the batch scripts sbatch runs. */
char *cuco_launch_shell_quote(const char *word);

#endif
