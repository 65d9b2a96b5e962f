/* stats.h: small order statistics over timings (medians of repeated runs). */
#ifndef CUCO_STATS_H
#define CUCO_STATS_H

#include <stddef.h>

/* Sorts v[0..n) ascending, in place. */
void cuco_sort_doubles(double *v, size_t n);
/* The median of v[0..n), which is sorted in place: the middle value, or the
 * mean of the two middle values for an even n; 0 when n is 0. */
double cuco_median(double *v, size_t n);

#endif
