/*
 * mtp_report.c - the statistics of multi-token prediction, in text and JSON.
 */
#include "mtp_report.h"

#include <inttypes.h>

void mtp_report_add(coli_stats *a, const coli_stats *b)
{
    a->mtp_steps += b->mtp_steps;
    a->mtp_drafted += b->mtp_drafted;
    a->mtp_accepted += b->mtp_accepted;
    a->mtp_tokens += b->mtp_tokens;
    a->mtp_plain_tokens += b->mtp_plain_tokens;
    a->mtp_extra_experts += b->mtp_extra_experts;
    a->mtp_guard_offs += b->mtp_guard_offs;
    a->mtp_drafts = b->mtp_drafts;
    a->mtp_accept_rate = a->mtp_drafted ? (double)a->mtp_accepted / (double)a->mtp_drafted : 0;
    a->mtp_tokens_per_step = a->mtp_steps ? (double)a->mtp_tokens / (double)a->mtp_steps : 0;
}

void mtp_report_text(FILE *f, const coli_stats *s, int64_t drafts)
{
    if (drafts <= 0)
        return;
    fprintf(f,
            "mtp: %" PRIu64 " of %" PRIu64 " drafts accepted (%.1f%%), %.2f tokens per verification "
            "(%" PRIu64 " passes), %" PRIu64 " tokens without drafts, %" PRIu64
            " extra experts read, guard off %" PRIu64 " times, drafting %d now\n",
            s->mtp_accepted, s->mtp_drafted, 100.0 * s->mtp_accept_rate, s->mtp_tokens_per_step,
            s->mtp_steps, s->mtp_plain_tokens, s->mtp_extra_experts, s->mtp_guard_offs, s->mtp_drafts);
}

void mtp_report_json(FILE *f, const coli_stats *s, int64_t drafts)
{
    if (drafts <= 0) {
        fprintf(f, ",\"mtp\":null");
        return;
    }
    fprintf(f,
            ",\"mtp\":{\"drafts_per_step\":%" PRId64 ",\"steps\":%" PRIu64 ",\"drafted\":%" PRIu64
            ",\"accepted\":%" PRIu64 ",\"accept_rate\":%.4f,\"tokens\":%" PRIu64 ",\"tokens_per_step\":%.4f"
            ",\"plain_tokens\":%" PRIu64 ",\"extra_experts\":%" PRIu64 ",\"guard_offs\":%" PRIu64
            ",\"drafting_now\":%d}",
            drafts, s->mtp_steps, s->mtp_drafted, s->mtp_accepted, s->mtp_accept_rate, s->mtp_tokens,
            s->mtp_tokens_per_step, s->mtp_plain_tokens, s->mtp_extra_experts, s->mtp_guard_offs,
            s->mtp_drafts);
}
