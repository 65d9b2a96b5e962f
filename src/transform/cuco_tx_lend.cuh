// cuco_tx glue, part 6 of 8: work moved between ranks for the attention
// split (cuco_tx_attention.cuh), when the manifest declares the kernel's
// queries (queries=, first_query=, query_args=, query_width=, query_grid=,
// causal=).
//
// Under a causal mask the ranks of a context-parallel attention see
// different numbers of keys (contiguous shards: the last rank's queries see
// every key, the first rank's only its own), so one rank computes while
// another waits. At each split launch the ranks tell each other their
// launch (Info: first query, queries, keys, mask, shapes) through a small
// window of their own, and each works out the same deals (plan): the
// busiest rank lends the last of its queries over one source's keys to the
// least busy one, as many as even out their visible (query, key) pairs.
// The lender pushes those queries to the helper by the copy engine; the
// helper attends them over that source's keys (which it holds after the
// all-gather) and writes their output and log-sum-exps straight into the
// lender's temporaries (a window too), where the lender's merge folds them
// in with its own parts. Rendezvous on the lend stream (stream memory
// operations, no SM) order the pushes and the writes. CUCO_ATTN_LEND 0
// keeps every rank's work on that rank.
namespace cuco_tx {

// attention's query terms (queriesPos -1: not declared, nothing moves).
struct LendSpec {
  int queriesPos = -1, firstQueryPos = -1;
  int causalPos = -1;  // its parameter; -1: no mask; -2: always causal
  int grid = -1;       // the grid dimension over the queries (0 x, 1 y, 2 z)
  unsigned long mask = 0;  // the parameters indexed by query
};

#ifndef CUCO_ATTN_LEND
#define CUCO_ATTN_LEND 1
#endif

namespace lend {
using cuco::lend::Deal;
using cuco::lend::Info;
using cuco::lend::kInfoBytes;
using cuco::lend::Layout;
using cuco::lend::as_helper;
using cuco::lend::as_lender;
using cuco::lend::chunks_of;
using cuco::lend::layout;
using cuco::lend::parts_of;
using cuco::lend::plan;
using cuco::lend::slot_of;

// A site's windows and streams: `info` holds two sets of slots (the
// parity of the call); `data` the layout of device/lend_plan.cuh.
struct Site {
  ncclComm_t comm = nullptr;  // the communicator its windows belong to
  Buf* info = nullptr;
  Buf* data = nullptr;
  std::vector<Buf*> retired;  // data windows a larger one replaced
  cudaStream_t xs = nullptr, ls = nullptr;  // the exchange's, the deals'
  cudaEvent_t done = nullptr;
  Info* own = nullptr;    // pinned: this rank's launch, as sent
  char* slots = nullptr;  // pinned: everyone's, as read back (one slot each)
  unsigned long long calls = 0;
};
inline std::vector<Site>& sites() {
  static std::vector<Site> v;
  return v;
}
inline Site* site_of(int site) { return site_rec(sites(), site); }

// At comm_teardown: every window, stream and pinned buffer of the sites on
// comm, so that a later communicator starts them afresh. The windows are
// freed in the same order on every rank (sites by index, then the order
// they were made in).
inline ncclResult_t release_sites(ncclComm_t comm) {
  ncclResult_t r = ncclSuccess;
  for (Site& s : sites()) {
    if (!s.comm || s.comm != comm) continue;
    s.retired.push_back(s.data);
    s.retired.insert(s.retired.begin(), s.info);
    for (Buf* b : s.retired)
      if (b && symm_free(b->base) != cudaSuccess) r = CUCO_TX_FAIL("lend: freeing a window failed");
    if (s.xs) cudaStreamDestroy(s.xs);
    if (s.ls) cudaStreamDestroy(s.ls);
    if (s.done) cudaEventDestroy(s.done);
    if (s.own) cudaFreeHost(s.own);
    if (s.slots) cudaFreeHost(s.slots);
    s = Site{};
  }
  return r;
}

// A window of `bytes` on comm (collective: every rank in the same order).
inline Buf* window_new(size_t bytes, ncclComm_t comm) {
  void* p = nullptr;
  Buf* b = nullptr;
  if (symm_malloc_window(&p, bytes) != cudaSuccess || window_of(p, bytes, comm, &b) != ncclSuccess) return nullptr;
  return cuco::lsa_peer_bases(b->symm) == 0 ? b : nullptr;
}

// The site's streams, event, pinned buffers and info window on comm (what
// an earlier call that failed half way made is kept, not made again).
inline const char* setup(Site* s, ncclComm_t comm) {
  if (s->info) return s->comm == comm ? nullptr : "its windows belong to another communicator";
  on_teardown(release_sites);
  s->comm = comm;
  if ((!s->xs && priority_stream_create(&s->xs, true) != cudaSuccess) ||
      (!s->ls && priority_stream_create(&s->ls, false) != cudaSuccess) ||
      (!s->done && cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming) != cudaSuccess) ||
      (!s->own && cudaMallocHost(&s->own, sizeof(Info)) != cudaSuccess) ||
      (!s->slots && cudaMallocHost(&s->slots, kMaxRanks * kInfoBytes) != cudaSuccess))
    return "cannot create its streams";
  if (!(s->info = window_new(2 * kMaxRanks * kInfoBytes, comm))) return "cannot register its window";
  return nullptr;
}

// Every rank's Info into all[0..n) (collective; blocks the host until
// every rank has told its own).
inline const char* exchange(Site* s, const Info& own, int rank, int n, Info* all) {
  cuco::Symm& y = s->info->symm;
  size_t slots = (size_t)(s->calls++ & 1) * kMaxRanks * kInfoBytes;
  char* mine = y.local<char>(slots + (size_t)rank * kInfoBytes);
  *s->own = own;
  if (cudaMemcpyAsync(mine, s->own, sizeof(Info), cudaMemcpyHostToDevice, s->xs) != cudaSuccess)
    return "cannot write its launch";
  for (int p = 0; p < n; p++)
    if (p != rank &&
        cuco::ce_copy(y.peer<char>(p, slots + (size_t)rank * kInfoBytes), mine, sizeof(Info), s->xs) != 0)
      return "cannot tell a peer its launch";
  if (cuco::ce_rendezvous(y, s->xs) != 0) return "its rendezvous failed";
  if (cudaMemcpyAsync(s->slots, y.local<char>(slots), (size_t)n * kInfoBytes, cudaMemcpyDeviceToHost,
                      s->xs) != cudaSuccess ||
      cudaStreamSynchronize(s->xs) != cudaSuccess)
    return "cannot read the peers' launches";
  for (int p = 0; p < n; p++) std::memcpy(&all[p], s->slots + (size_t)p * kInfoBytes, sizeof(Info));
  return nullptr;
}

// The data window, at least `bytes` (collective: the same on every rank,
// since every rank sizes it from the same Infos). A larger one, at least
// twice the size, replaces it; the old one stays allocated and registered
// until the communicator's teardown (its rendezvous count is its own; the
// site's hook frees it then), so a site whose shapes grow step by step
// holds a few, not one a step.
inline const char* data_window(Site* s, size_t bytes, ncclComm_t comm) {
  if (s->data && s->data->bytes >= bytes) return nullptr;
  if (s->data && cudaStreamSynchronize(s->ls) != cudaSuccess) return "cannot finish its last deals";
  if (s->data) {
    bytes = std::max(bytes, 2 * s->data->bytes);
    s->retired.push_back(s->data);
  }
  return (s->data = window_new(bytes, comm)) ? nullptr : "cannot register its window";
}
}  // namespace lend
}  // namespace cuco_tx
