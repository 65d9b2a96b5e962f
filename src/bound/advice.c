/* advice.c: one plain paragraph from the bound's numbers, so that a reader
 * knows at a glance whether overlapping communication is worth a search. */
#include "cuco/bound.h"

#include "cuco/buf.h"

char *cuco_bound_advice(double comm_share, double ceiling, const char *top_name, double top_share,
                        int top_is_comm)
{
    cuco_buf b = CUCO_BUF_INIT;
    double pct = comm_share * 100.0;
    if (ceiling < 1.05) {
        /* The wording: "communication is 0.7% of the critical rank's
         * time; the most any overlap can gain is 1.007x; 98% of the time is
         * kernel X: optimize computation first". */
        cuco_buf_printf(&b,
                        "Communication is %.1f%% of the critical rank's time; the most any "
                        "overlap can gain is %.3fx; ",
                        pct, ceiling);
        if (top_name && top_share > 0.2 && !top_is_comm)
            cuco_buf_printf(&b, "%.0f%% of the time is kernel %s: optimize computation first.",
                            top_share * 100.0, top_name);
        else
            cuco_buf_puts(&b, "too little for a search over overlap strategies: optimize "
                              "computation first.");
    } else if (ceiling < 1.2) {
        cuco_buf_printf(&b,
                        "Communication is %.1f%% of the critical rank's time; ceiling %.3fx: "
                        "a search can gain a little (at most the ceiling, less the cost of "
                        "device-initiated communication).",
                        pct, ceiling);
        if (top_name && top_share > 0.3)
            cuco_buf_printf(&b, " %.0f%% of the time is %s kernel %s.", top_share * 100.0,
                            top_is_comm ? "communication" : "computation", top_name);
    } else {
        cuco_buf_printf(&b,
                        "Communication is %.1f%% of the critical rank's time; ceiling %.3fx: "
                        "worth searching.",
                        pct, ceiling);
        if (comm_share > 0.6)
            cuco_buf_puts(&b, " Communication dominates: also look at moving less data.");
    }
    return cuco_buf_detach(&b);
}
