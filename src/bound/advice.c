/* advice.c: one plain paragraph from the bound's numbers, so that a reader
 * knows at a glance whether overlapping communication is worth a search. */
#include "cuco/bound.h"

#include "cuco/buf.h"

char *cuco_bound_advice(double comm_share, double ceiling, const char *top_name, double top_share,
                        int top_is_comm)
{
    cuco_buf b = CUCO_BUF_INIT;
    double pct = comm_share * 100.0;
    cuco_buf_printf(&b, "Communication is %.1f%% of the critical rank's GPU time; the most any "
                        "overlap can gain is %.3fx. ",
                    pct, ceiling);
    if (ceiling < 1.05) {
        cuco_buf_puts(&b, "That is too little to be worth a search over overlap strategies");
        if (top_name && top_share > 0.2 && !top_is_comm)
            cuco_buf_printf(&b, ": %.0f%% of the time is kernel %s, optimize computation first.",
                            top_share * 100.0, top_name);
        else
            cuco_buf_puts(&b, ": optimize computation first.");
    } else if (ceiling < 1.2) {
        cuco_buf_puts(&b, "A search can gain a little; expect at most the ceiling, less the cost "
                          "of device-initiated communication.");
        if (top_name && top_share > 0.3)
            cuco_buf_printf(&b, " %.0f%% of the time is %s kernel %s.", top_share * 100.0,
                            top_is_comm ? "communication" : "computation", top_name);
    } else {
        cuco_buf_puts(&b, "Worth searching: overlapping communication with computation can "
                          "remove a large share of the step time.");
        if (comm_share > 0.6)
            cuco_buf_puts(&b, " Communication dominates: also look at moving less data.");
    }
    return cuco_buf_detach(&b);
}
