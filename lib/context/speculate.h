/* speculate.h - multi-token prediction: the MTP layer drafts tokens, one
 * pass of the decoder verifies them (internal; docs/formats.md,
 * "Multi-token prediction").
 *
 * The MTP layer pairs the decoder's state h_j of position j (after the
 * final norm) with the token of position j + 1, at position j of its own
 * KV cache. The context keeps the states of positions not yet paired, so
 * that the cache follows every position evaluated: prompts, plain steps
 * and accepted drafts alike. */
#ifndef COLI_SPECULATE_H
#define COLI_SPECULATE_H

#include "context/core.h"

typedef struct coli__mtp coli__mtp;

/* Turns drafting on for c: k drafts per step, with the guard or not
 * (COLI_OPT_MTP_GUARD). The model must hold its MTP layer. */
coli_status coli__mtp_create(coli__ctx_core *c, int k, int guard);
void coli__mtp_free(coli__mtp *s);

/* Evaluates tokens[0..n) at c->pos with the decoder, keeping their states;
 * c->logits gets the last one's. c->pos is the caller's to move. */
coli_status coli__mtp_eval(coli__ctx_core *c, const int32_t *tokens, size_t n, uint64_t *read);
/* The context was cut back to n positions (c->pos is n already). */
void coli__mtp_truncate(coli__ctx_core *c, size_t n);

/* The drafts the next step should make, at most most (0: a plain step):
 * what the guard and the acceptance of each draft position allow. */
int coli__mtp_plan(coli__ctx_core *c, int most);
/* Drafts k tokens to follow t (sampled, not yet evaluated) and verifies
 * t and the drafts with one pass of the decoder at c->pos. */
coli_status coli__mtp_propose(coli__ctx_core *c, int32_t t, int k, uint64_t *read);
/* The verification's logits of its position j (0 .. k), and draft j (1 .. k). */
const float *coli__mtp_logits(const coli__ctx_core *c, int j);
int32_t coli__mtp_draft(const coli__ctx_core *c, int j);
/* Keeps the verification's positions 0 .. j (t and drafts 1 .. j): c->pos,
 * c->logits and the statistics move; seconds: the step's time. */
void coli__mtp_commit(coli__ctx_core *c, int j, double seconds);
/* A step without drafts took seconds (for the guard). */
void coli__mtp_note_plain(coli__ctx_core *c, double seconds);
/* The drafts per step the guard allows now. */
int coli__mtp_drafts_now(const coli__ctx_core *c);

/* The MTP layer's logits for the token after next, next being the token
 * that follows the evaluated positions (coli_context_mtp_logits). */
coli_status coli__mtp_peek(coli__ctx_core *c, int32_t next, float *logits);

#endif
