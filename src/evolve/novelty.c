/* novelty.c: MinHash signatures of programs (comments and whitespace
 * stripped, 3-token shingles) and parent selection. */
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cuco/hash.h"
#include "cuco/novelty.h"

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Next token of s from *pos (comments and whitespace skipped): sets *start
 * and *len; 0 at the end. */
static int next_token(const char *s, size_t *pos, size_t *start, size_t *len)
{
    size_t i = *pos;
    for (;;) {
        while (s[i] && isspace((unsigned char)s[i]))
            i++;
        if (s[i] == '/' && s[i + 1] == '/') {
            while (s[i] && s[i] != '\n')
                i++;
        } else if (s[i] == '/' && s[i + 1] == '*') {
            i += 2;
            while (s[i] && !(s[i] == '*' && s[i + 1] == '/'))
                i++;
            if (s[i])
                i += 2;
        } else {
            break;
        }
    }
    if (!s[i])
        return 0;
    *start = i;
    if (isalnum((unsigned char)s[i]) || s[i] == '_') {
        while (isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == '.')
            i++;
    } else {
        i++;
    }
    *len = i - *start;
    *pos = i;
    return 1;
}

void cuco_minhash_of(const char *text, cuco_minhash *m)
{
    for (int k = 0; k < CUCO_MINHASH_K; k++)
        m->h[k] = UINT64_MAX;
    uint64_t win[3] = {0, 0, 0};
    size_t pos = 0, st, len, ntok = 0;
    while (next_token(text, &pos, &st, &len)) {
        win[0] = win[1];
        win[1] = win[2];
        win[2] = cuco_hash64(text + st, len);
        if (++ntok < 3)
            continue;
        uint64_t sh = mix64(win[0] ^ mix64(win[1] ^ mix64(win[2])));
        for (int k = 0; k < CUCO_MINHASH_K; k++) {
            uint64_t v = mix64(sh ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(k + 1)));
            if (v < m->h[k])
                m->h[k] = v;
        }
    }
}

double cuco_minhash_similarity(const cuco_minhash *a, const cuco_minhash *b)
{
    int eq = 0;
    for (int k = 0; k < CUCO_MINHASH_K; k++)
        eq += a->h[k] == b->h[k];
    return (double)eq / CUCO_MINHASH_K;
}

size_t cuco_select_parent(cuco_selection s, const double *scores, size_t n, int exploit,
                          cuco_rng *rng)
{
    if (n <= 1)
        return 0;
    double w[n], total = 0;
    switch (s) {
    case CUCO_SEL_HILL_CLIMB:
        /* the best; in the explore phase a random elite half of the time */
        if (!exploit && cuco_rng_below(rng, 2))
            return cuco_rng_below(rng, n);
        return 0;
    case CUCO_SEL_FITNESS:
        for (size_t i = 0; i < n; i++) {
            double sc = scores[i] > 0 ? scores[i] : 0;
            w[i] = exploit ? sc * sc * sc * sc : sc;
        }
        break;
    default: /* power law over rank */
        for (size_t i = 0; i < n; i++)
            w[i] = pow((double)(i + 1), exploit ? -3.0 : -1.0);
        break;
    }
    for (size_t i = 0; i < n; i++)
        total += w[i];
    if (total <= 0)
        return cuco_rng_below(rng, n);
    double u = cuco_rng_uniform(rng) * total;
    for (size_t i = 0; i < n; i++) {
        if (u < w[i])
            return i;
        u -= w[i];
    }
    return n - 1;
}
