/*
 * mtp_report.h - the statistics of multi-token prediction (coli_stats'
 * mtp_ fields) as `coli generate --stats` and `coli bench` print them.
 */
#ifndef COLI_TOOLS_MTP_REPORT_H
#define COLI_TOOLS_MTP_REPORT_H

#include <colibri/colibri.h>

#include <stdio.h>

/* Adds the counts of b to a (the rates are made again from the sums). */
void mtp_report_add(coli_stats *a, const coli_stats *b);
/* One line "mtp: ..." (nothing when no step was taken and none was wanted). */
void mtp_report_text(FILE *f, const coli_stats *s, int64_t drafts);
/* ,"mtp":{...} or ,"mtp":null when drafts is 0. */
void mtp_report_json(FILE *f, const coli_stats *s, int64_t drafts);

#endif
